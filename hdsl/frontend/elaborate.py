"""AST → typed Func graph.

Resolves names, expands `use`, `fn`, compile-time `for`, `const` and arrays of
Funcs, applies Halide's type rules (hdsl/ir/ops.py) and records schedule
directives (validated by hdsl/schedule/validate.py). Errors are collected per
statement: a statement with an error is skipped and the Func it defines is
poisoned, so one mistake reports once.
"""
from __future__ import annotations

import math
import re
import os
from pathlib import Path

import numpy as np

from hdsl.diagnostics import Span, did_you_mean, source_line
from hdsl.frontend import ast
from hdsl.frontend.errors import ElabError, Poisoned, Sink
from hdsl.frontend.parse import parse
from hdsl.frontend.values import (ArrayVal, DimVal, ExprVal, FnVal, FuncVal, InputVal, ListVal,
                                  OutputSlot, PoisonVal, RangeVal, RDomVal, Scope, StrVal, TupleVal, VarVal)
from hdsl.frontend.values import GradVal      # autodiff (hdsl/frontend/gradient.py)
from hdsl.ir import ops
from hdsl.ir.expr import BufferProp, Const, Expr, FuncCall, InputCall, Intrinsic, Param, RVar, Var, walk
from hdsl.ir.func import Func, InputBuffer, ParamDecl, Pipeline, RDom, Update, calls_in, find_cycle
from hdsl.ir.types import BOOL, BY_NAME, ERROR, I32, Type

STDLIB_DIR = Path(__file__).resolve().parents[1] / "stdlib"       # package data (`use NAME`)

CAST_NAMES = set(BY_NAME)
SAT_CAST_NAMES = {f"{n}_sat" for n in BY_NAME if n != "bool"}
MATH1 = {"sqrt", "exp", "log", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
         "floor", "ceil", "round", "trunc", "is_nan", "is_inf", "is_finite", "abs"}
BUILTIN_ARITY = {**{n: 1 for n in MATH1}, "pow": 2, "atan2": 2, "absd": 2, "min": 2, "max": 2,
                 "clamp": 3, "lerp": 3, "select": 3}
BUILTIN_USAGE = {"pow": "pow(x, y)", "atan2": "atan2(y, x)", "absd": "absd(a, b)", "min": "min(a, b, ...)",
                 "max": "max(a, b, ...)", "clamp": "clamp(x, lo, hi)", "lerp": "lerp(a, b, weight)",
                 "select": "select(condition, a, b) or select(c1, a, c2, b, ..., otherwise)"}
INLINE_REDUCTIONS = {"sum", "product", "maximum", "minimum", "argmax", "argmin"}
BOUNDARY_FNS = {"repeat_edge", "constant_exterior", "mirror_image", "mirror_interior", "repeat_image"}
BUILTINS = CAST_NAMES | SAT_CAST_NAMES | set(BUILTIN_ARITY) | INLINE_REDUCTIONS | {"print", "derivative"}
KEYWORDS = {"pipeline", "input", "param", "output", "const", "use", "fn", "algorithm", "schedule",
            "let", "var", "rdom", "for", "in", "return", "where", "true", "false"}
MAX_FN_DEPTH = 64
# other languages' names for hdsl's types, for "did you mean"
TYPE_ALIASES = {"float": "f32", "double": "f64", "half": "f16", "int": "i32", "uint": "u32", "char": "i8",
                "short": "i16", "long": "i64", "boolean": "bool", "byte": "u8",
                **{f"{w}{b}": f"{w[0]}{b}" for w in ("int", "uint", "float") for b in (8, 16, 32, 64)}}


class _Return(Exception):
    def __init__(self, value):
        self.value = value


class DefContext:
    """What names mean inside one definition's right-hand side."""

    def __init__(self, func: Func | None, pure_vars: list[str] | None, partial_ok: bool = False):
        self.func = func                  # the Func being defined (None: a let, a binding)
        self.pure_vars = pure_vars        # allowed pure var names; None: any declared var
        self.partial_ok = partial_ok      # a bare Func may stand for f(_0, _1, ...)
        self.implicit_dims: int | None = None


class Elaborator:
    def __init__(self, filename: str):
        self.filename = filename
        self.sink = Sink()
        self.globals = Scope()
        self.inputs: list[InputBuffer] = []
        self.params: list[ParamDecl] = []
        self.output_decls: list[OutputSlot] = []
        self.func_names: dict[str, int] = {}
        self.created: list[list[Func]] = []      # Funcs made by each active fn call
        self.fn_depth = 0
        self.uses_boundary = False
        self.loaded: set[str] = set()
        self.texts: list[str] = []               # this file's text and every used module's (cache key)
        self.algorithm_scope: Scope | None = None
        self.reduction_count = 0
        self.def_sites: dict[int, tuple[Span, Span]] = {}   # id(Func) -> (left side, right side)
        self.broken: set[int] = set()     # id(Func) with a definition that had an error
        self.global_spans: dict[str, Span] = {}   # where each top-level name is declared
        self.later: dict[str, Span] = {}         # names the algorithm block defines, and where
        self.gradient_funcs: list[Func] = []     # made by derivative(...) (hdsl/frontend/gradient.py)
        self.gradient_snapshots: list = []       # what each derivative(...) saw, to catch later updates

    # ------------------------------------------------------------------ helpers
    def error(self, message, span, hint=None, notes=None):
        raise ElabError(message, span, hint, notes)

    def report(self, e: ElabError) -> None:
        self.sink.report(e)

    @staticmethod
    def text(span: Span | None) -> str | None:
        """The source text under a one-line span, for hints that quote the program."""
        if span is None or span.end_line != span.line:
            return None
        line = source_line(span)
        return None if line is None else line[span.col - 1:span.end_col - 1]

    def unique_name(self, base: str) -> str:
        n = self.func_names.get(base, 0)
        self.func_names[base] = n + 1
        return base if n == 0 else f"{base}${n}"

    def new_func(self, name: str, span: Span | None, implicit: bool = False) -> Func:
        f = Func(self.unique_name(name), span=span, implicit=implicit)
        if self.created:
            self.created[-1].append(f)
        return f

    def type_rule(self, fn, *args, spans=None, span=None):
        try:
            return fn(*args)
        except ops.TypeRuleError as e:
            where = span
            if spans is not None and e.operand is not None and e.operand < len(spans):
                where = spans[e.operand]
            self.error(e.message, where, e.hint)

    def soft(self, check, fallback):
        """Run one check of a declaration; on error report it and go on with `fallback`."""
        try:
            return check()
        except ElabError as e:
            self.report(e)
            return fallback

    # ------------------------------------------------------------------ module
    def module(self, mod: ast.Module) -> Pipeline | None:
        pipeline = None
        algorithm = None
        schedules: list[ast.ScheduleBlock] = []
        for item in mod.items:
            try:
                if isinstance(item, ast.PipelineDecl):
                    if pipeline is not None:
                        self.error("a file holds one pipeline", item.name_span or item.span,
                                   "split it into two files", [("the first pipeline is named here",
                                                                pipeline.name_span or pipeline.span)])
                    pipeline = item
                elif isinstance(item, ast.AlgorithmBlock):
                    if algorithm is not None:
                        self.error("a pipeline has one algorithm block", self.keyword_span(item.span, "algorithm"),
                                   "merge the two blocks into one",
                                   [("the first algorithm block is here", self.keyword_span(algorithm.span,
                                                                                             "algorithm"))])
                    algorithm = item
                elif isinstance(item, ast.ScheduleBlock):
                    schedules.append(item)
                else:
                    self.declaration(item)
            except ElabError as e:
                self.report(e)
        if pipeline is None:
            if algorithm is not None or self.inputs or self.output_decls:
                first = mod.items[0].span if mod.items else Span(self.filename, 1, 1, 1, 2)
                self.sink.error("this file has an algorithm or declarations but no 'pipeline NAME' line",
                                Span(self.filename, first.line, first.col, first.line, first.col + 1),
                                "add 'pipeline NAME' at the top; a library holds only 'fn', 'const' and 'use'")
            self.sink.raise_if_any()
            return None
        pipeline_name = pipeline.name
        where = pipeline.name_span or pipeline.span
        if algorithm is None:
            self.sink.error(f"pipeline '{pipeline_name}' has no algorithm block", where,
                            "add 'algorithm { ... }' defining every output")
            self.sink.raise_if_any()
        if not self.output_decls:
            self.sink.error(f"pipeline '{pipeline_name}' declares no output", where,
                            "add a line such as 'output out: u8[2]'")
        scope = Scope(self.globals)
        self.algorithm_scope = scope
        if algorithm is not None:
            self.later = collect_definitions(algorithm.body)
            self.block(algorithm.body, scope, in_fn=False)
        outputs, out_types = self.finish_outputs(scope)
        if not self.sink.diagnostics:
            self.check_acyclic(outputs)
        from hdsl.schedule.record import record_schedules
        sched = record_schedules(self, schedules, scope, outputs)
        if self.gradient_funcs:                 # autodiff: gradients get a default schedule
            from hdsl.autodiff.schedule import schedule_gradients
            from hdsl.frontend.gradient import check_gradients_current
            check_gradients_current(self)
            schedule_gradients(sched, self.gradient_funcs)
        self.sink.raise_if_any()
        import hashlib
        key = hashlib.sha256("\0".join(self.texts).encode()).hexdigest() if self.texts else ""
        p = Pipeline(pipeline_name, self.inputs, self.params, outputs, out_types, sched, self.filename, key)
        p.names = schedulable_names(scope)
        p.named = {k: v.func for k, v in scope.names.items() if isinstance(v, FuncVal)}   # autodiff
        p.record_text = lambda text, name: self.record_text(text, name, scope, outputs)
        return p

    def record_text(self, text: str, name: str, scope: Scope, outputs: list[Func]):
        """A schedule written as text (the automatic scheduler's, or a tuner's candidate) recorded
        with every check a block of the file gets; HdslError when it breaks a rule."""
        from hdsl.schedule.record import record_schedules
        self.sink.diagnostics.clear()
        mod = parse(f"schedule {name} {{\n{text}\n}}\n", f"<schedule {name}>")
        sched = record_schedules(self, [it for it in mod.items if isinstance(it, ast.ScheduleBlock)], scope,
                                 outputs)
        self.sink.raise_if_any()
        return sched[name]

    def check_acyclic(self, outputs: list[Func]):
        """No Func may read itself through others (the one rule for the evaluator and native
        code): reported at the update that closes the ring, the definition that came last."""
        ring = find_cycle(outputs)
        if ring is None:
            return
        edges = list(zip(ring, ring[1:] + ring[:1]))
        where = None
        for f, g in edges:
            for u in f.updates:
                if any(isinstance(c, FuncCall) and c.func is g for c in calls_in(u.args + u.values)):
                    if where is None or (u.span.line, u.span.col) > (where[2].line, where[2].col):
                        where = (f, g, u.span)
        f, g, span = where or (ring[0], ring[1], ring[0].span)
        i = ring.index(g)
        between = (ring[i:] + ring[:i])[1:-1]          # g reads these, the last of which reads f
        through = f" through {', '.join(repr(h.name) for h in between)}" if between else ""
        self.sink.error(f"'{f.name}' and '{g.name}' depend on each other: this update of '{f.name}' reads "
                        f"'{g.name}', which reads '{f.name}'{through}", span,
                        "a Func can read itself only in its own update definitions; give the updated "
                        f"value a new name, e.g. {f.name}2(...) = {f.name}(...) + {g.name}(...)")

    def keyword_span(self, span: Span, keyword: str) -> Span:
        return Span(span.file, span.line, span.col, span.line, span.col + len(keyword))

    def finish_outputs(self, scope: Scope):
        outputs, types = [], []
        for decl in self.output_decls:
            v = scope.lookup(decl.name)
            t = BY_NAME.get(decl.type_name)
            if isinstance(v, PoisonVal):
                continue
            if isinstance(v, OutputSlot) or v is None:
                self.sink.error(f"output '{decl.name}' is declared but never defined", decl.span,
                                f"define it in the algorithm block: "
                                f"{decl.name}({', '.join('xyzw'[:decl.dims or 2])}) = ...")
                continue
            if not isinstance(v, FuncVal):
                self.sink.error(f"output '{decl.name}' must be a Func", decl.span)
                continue
            f = v.func
            if f.values is None:
                continue
            lhs_span, rhs_span = self.def_sites.get(id(f), (f.span, f.span))
            if decl.dims is not None and f.dims != decl.dims:
                self.sink.error(f"output '{decl.name}' is declared with {decl.dims} dimension"
                                f"{'s' if decl.dims != 1 else ''} but defined with {f.dims}",
                                lhs_span or decl.span,
                                f"define it over {decl.dims} variable{'s' if decl.dims != 1 else ''}, "
                                f"or declare it {decl.type_name}[{f.dims}]",
                                [(f"'{decl.name}' is declared here", decl.dims_span or decl.span)])
            if t is not None and len(f.types) == 1 and not f.types[0].is_error() and f.types[0] != t:
                self.sink.error(f"output '{decl.name}' is declared {t} but its definition has type {f.types[0]}",
                                rhs_span or decl.span,
                                f"convert the value, e.g. {t}(...) or {t}_sat(...), "
                                f"or declare the output {f.types[0]}",
                                [(f"'{decl.name}' is declared {t} here", decl.type_span or decl.span)])
            if len(f.types) > 1:
                self.sink.error(f"output '{decl.name}' has {len(f.types)} values; an output holds one",
                                rhs_span or decl.span, "declare one output per value")
            outputs.append(f)
            types.append(t)
        return outputs, types

    def declaration(self, item):
        if isinstance(item, ast.BufferDecl):
            name_span = item.name_span or item.span
            self.check_new_name(item.name, name_span)
            t = self.soft(lambda: self.parse_type(item.type_name, item.type_span), ERROR)
            dims = self.soft(lambda: self.const_int(item.dims, self.globals), None)
            if dims is not None and not 1 <= dims <= 8:
                self.report(ElabError(f"a buffer has 1 to 8 dimensions, not {dims}", item.dims.span))
                dims = None
            if item.kind == "input":
                if dims is None:
                    self.globals.define(item.name, PoisonVal(item.name))
                    return
                buf = InputBuffer(item.name, t, dims, item.span)
                self.inputs.append(buf)
                self.globals.define(item.name, InputVal(buf))
            else:
                slot = OutputSlot(item.name, item.type_name, dims, name_span, item.type_span,
                                  Span(item.type_span.file, item.type_span.line, item.type_span.col,
                                       item.dims.span.end_line, item.dims.span.end_col + 1))
                self.output_decls.append(slot)
                self.globals.define(item.name, slot)
        elif isinstance(item, ast.ParamDeclNode):
            self.check_new_name(item.name, item.name_span or item.span)
            t = self.soft(lambda: self.parse_type(item.type_name, item.type_span), ERROR)
            default = None
            if item.default is not None and not t.is_error():
                default = self.soft(lambda: self.param_default(item, t), None)
            p = ParamDecl(item.name, t, default, item.span)
            self.params.append(p)
            self.globals.define(item.name, ExprVal(Param(item.name, t)))
        elif isinstance(item, ast.ConstDecl):
            self.check_new_name(item.name, item.name_span or item.span)
            v = self.soft(lambda: self.const_int(item.value, self.globals, f"const '{item.name}'"), None)
            self.globals.define(item.name, PoisonVal(item.name) if v is None
                                else ExprVal(Const(I32, v, literal=True)))
        elif isinstance(item, ast.Use):
            self.use(item)
        elif isinstance(item, ast.FnDef):
            self.check_new_name(item.name, item.name_span or item.span)
            dup = [p for i, p in enumerate(item.params) if p in item.params[:i]]
            if dup:
                self.error(f"fn '{item.name}' names parameter '{dup[0]}' twice", item.name_span or item.span,
                           "give each parameter its own name")
            self.globals.define(item.name, FnVal(item, self.globals))
        else:
            self.error("unexpected item", item.span)

    def param_default(self, item: ast.ParamDeclNode, t: Type):
        e = self.expr(item.default, self.globals, DefContext(None, []))
        if e.type.is_error():
            raise Poisoned()
        if not isinstance(e, Const):
            self.error("a param's default must be a literal", item.default.span,
                       "write a number, or true or false")
        if t.is_float():
            if e.type.is_bool():
                self.error(f"param '{item.name}' is {t}; its default must be a number, "
                           f"not {'true' if e.value else 'false'}", item.default.span)
            return float(e.value)
        if t.is_bool():
            if not e.type.is_bool():
                self.error(f"param '{item.name}' is bool; its default must be true or false, not {e.value}",
                           item.default.span, "write true or false")
            return bool(e.value)
        if e.type.is_float():
            self.error(f"param '{item.name}' is {t}; its default {e.value:g} is not an integer",
                       item.default.span, "write an integer, or declare the param f32")
        if e.type.is_bool():
            self.error(f"param '{item.name}' is {t}; its default must be an integer, not "
                       f"{'true' if e.value else 'false'}", item.default.span, "declare the param bool")
        if not t.can_represent(int(e.value)):
            self.error(f"default {e.value} does not fit in param '{item.name}' of type {t}", item.default.span,
                       f"{t} holds {t.min_value()} to {t.max_value()}")
        return int(e.value)

    def check_new_name(self, name: str, span: Span):
        if name in BUILTINS or name in BOUNDARY_FNS:
            self.error(f"'{name}' is the name of a built-in", span, "choose another name")
        if self.globals.lookup(name) is not None:
            first = self.global_spans.get(name)
            self.error(f"'{name}' is already defined", span, "choose another name",
                       [("the first definition is here", first)] if first else None)
        self.global_spans[name] = span

    def parse_type(self, name: str, span: Span) -> Type:
        t = BY_NAME.get(name)
        if t is None:
            guess = TYPE_ALIASES.get(name.lower()) or did_you_mean(name, BY_NAME)
            self.error(f"unknown type '{name}'" + (f"; did you mean '{guess}'?" if guess else ""), span,
                       "types are bool, u8, u16, u32, u64, i8, i16, i32, i64, f16, f32, f64")
        return t

    def use(self, item: ast.Use):
        where = item.target_span or item.span
        if not item.is_path and item.target == "boundary":
            self.uses_boundary = True
            return
        # a quoted path is relative to the file the `use` is written in (a library's own folder)
        here = Path(item.span.file if item.span else self.filename).parent
        if item.is_path:
            path = (here / item.target).resolve()
        else:
            path = STDLIB_DIR / f"{item.target}.hl"
        if not path.is_file():
            avail = sorted(p.stem for p in STDLIB_DIR.glob("*.hl")) + ["boundary"]
            guess = did_you_mean(item.target, avail) if not item.is_path else None
            self.error(f"cannot find module '{item.target}'" + (f"; did you mean '{guess}'?" if guess else ""),
                       where, "a quoted path is relative to the folder of this file" if item.is_path
                       else None if guess else "standard modules: " + ", ".join(avail))
        key = str(path)
        if key in self.loaded:
            return
        self.loaded.add(key)
        from hdsl.diagnostics import HdslError
        note = [("in the module used here", where)]
        try:
            # a file next to this one is named as the user wrote it, relative like this file's name
            shown = os.path.normpath(here / item.target) if item.is_path else str(path)
            from hdsl.diagnostics import read_source
            text = read_source(path, shown)
            self.texts.append(text)
            mod = parse(text, shown)
        except HdslError as e:
            for d in e.diagnostics:
                self.sink.error(d.message, d.span, d.hint, note)
            return
        except (OSError, UnicodeDecodeError) as e:
            self.error(f"cannot read module '{item.target}': {getattr(e, 'strerror', None) or e}", where)
        # a library is its own module: its fns see its own consts and fns (and what it
        # uses), never the names of the program that uses it; its names are then exported
        user_scope, self.globals = self.globals, Scope()
        library = self.globals
        try:
            for sub in mod.items:
                if isinstance(sub, (ast.FnDef, ast.ConstDecl, ast.Use)):
                    try:
                        self.declaration(sub)
                    except ElabError as e:
                        e.add_note(*note[0])
                        self.report(e)
                else:
                    self.sink.error("a library holds only 'fn', 'const' and 'use'", sub.span,
                                    "move pipelines and algorithm blocks to the program that uses the library",
                                    note)
        finally:
            self.globals = user_scope
        for name, value in library.names.items():
            if user_scope.lookup(name) is None:
                user_scope.define(name, value)

    # ------------------------------------------------------------------ compile-time ints
    def const_int(self, node: ast.Node, scope: Scope, what: str | None = None) -> int:
        e = self.expr(node, scope, DefContext(None, []))
        if e.type.is_error():
            raise Poisoned()
        if isinstance(e, Const) and (e.type.is_int() or e.type.is_uint()):
            return int(e.value)
        subject = f"{what} must be" if what else "this must be"
        reason = f", not {e.type}" if e.type.is_float() or e.type.is_bool() else ""
        for n in walk(e):
            if isinstance(n, Param):
                reason = f", but it reads param '{n.name}', which is known only at run time"
                break
            if isinstance(n, BufferProp):
                reason = f", but it reads the size of input '{n.buffer.name}', which is known only at run time"
                break
            if isinstance(n, (InputCall, FuncCall)):
                reason = ", but it reads image values"
                break
            if isinstance(n, RVar):
                reason = f", but it uses rdom '{n.rdom.name}'"
                break
        self.error(f"{subject} a compile-time integer{reason}", node.span,
                   "use integer literals, consts and for-loop variables here")

    # ------------------------------------------------------------------ statements
    def block(self, stmts: list[ast.Node], scope: Scope, in_fn: bool) -> bool:
        """Check each statement; report errors and go on. True if any statement failed."""
        failed = False
        for s in stmts:
            try:
                self.statement(s, scope, in_fn)
            except ElabError as e:
                self.report(e)
                failed = True
            except RecursionError:
                self.sink.error("expression too deeply nested", s.span,
                                "split it into several Funcs or 'let' bindings")
                failed = True
        return failed

    def statement(self, s: ast.Node, scope: Scope, in_fn: bool):
        if isinstance(s, ast.Assign):
            self.assign(s, scope)
        elif isinstance(s, ast.Let):
            self.check_local_name(s.name, s.name_span or s.span, scope)
            try:
                value = self.value(s.value, scope, DefContext(None, None, partial_ok=True))
                if isinstance(value, PoisonVal):
                    raise Poisoned()
                if not isinstance(value, (ExprVal, TupleVal)):
                    self.error(f"'let' names an expression, but this is {self.describe(value)}", s.value.span,
                               f"bind it with '{s.name} = ...' instead" if isinstance(value, (FuncVal, ArrayVal))
                               else self.value_hint(value))
            except ElabError:
                scope.define(s.name, PoisonVal(s.name))
                raise
            scope.define(s.name, value)
        elif isinstance(s, ast.VarDecl):
            spans = s.name_spans or [s.span] * len(s.names)
            for n, sp in zip(s.names, spans):
                self.check_local_name(n, sp, scope)
                scope.define(n, VarVal(n))
        elif isinstance(s, ast.RDomDecl):
            self.check_local_name(s.name, s.name_span or s.span, scope)
            try:
                self.rdom_decl(s, scope)
            except ElabError:
                if not isinstance(scope.lookup(s.name), RDomVal):
                    scope.define(s.name, PoisonVal(s.name))
                raise
        elif isinstance(s, ast.For):
            try:
                lo = self.const_int(s.lo, scope, "the start of a 'for' range")
                hi = self.const_int(s.hi, scope, "the end of a 'for' range")
                if hi - lo > 4096:
                    self.error(f"this compile-time loop runs {hi - lo} times; the limit is 4096",
                               Span(s.lo.span.file, s.lo.span.line, s.lo.span.col, s.hi.span.end_line,
                                    s.hi.span.end_col), "a 'for' unrolls at compile time; use an rdom for "
                                                        "a loop over data")
            except ElabError:
                self.poison_definitions(s.body, scope)
                raise
            for j in range(lo, hi):
                inner = Scope(scope, block=False)
                inner.names[s.var] = ExprVal(Const(I32, j, literal=True))
                self.block(s.body, inner, in_fn)
        elif isinstance(s, ast.Return):
            if not in_fn:
                self.error("'return' outside a fn", self.keyword_span(s.span, "return"),
                           "the algorithm block defines Funcs; 'return' ends a fn")
            ctx = DefContext(None, None, partial_ok=True)
            value = self.value(s.value, scope, ctx)
            # `return v * v` with v a Func: a point-wise Func, as `h = v * v` would be
            raise _Return(self.funcify(value, ctx, "result", s.value.span))
        elif isinstance(s, ast.ExprStmt):
            self.expr_statement(s, scope)
        else:
            self.error("this statement is not allowed here", s.span)

    def poison_definitions(self, stmts: list[ast.Node], scope: Scope):
        """The names a skipped block would have defined: known, but wrong (their error is reported)."""
        for s in stmts:
            if isinstance(s, ast.For):
                self.poison_definitions(s.body, scope)
                continue
            name = None
            if isinstance(s, (ast.Let, ast.RDomDecl)):
                name = s.name
            elif isinstance(s, ast.Assign):
                t = s.target.func if isinstance(s.target, ast.Call) else s.target
                if isinstance(t, ast.Index) and isinstance(t.obj, ast.Name):
                    arr = scope.lookup(t.obj.id)
                    if arr is None:
                        arr = ArrayVal(t.obj.id)
                        scope.define(t.obj.id, arr)
                    if isinstance(arr, ArrayVal):
                        arr.poisoned = True
                elif isinstance(t, ast.Name):
                    name = t.id
            if name is not None and scope.lookup(name) is None:
                scope.define(name, PoisonVal(name))

    def check_local_name(self, name: str, span: Span, scope: Scope):
        if name in BUILTINS:
            self.error(f"'{name}' is the name of a built-in", span, "choose another name")
        old = scope.lookup(name)
        if isinstance(old, (InputVal, OutputSlot, FnVal)) or (isinstance(old, ExprVal) and isinstance(old.expr, Param)):
            self.error(f"'{name}' is already defined as {self.describe(old)}", span, "choose another name")

    def expr_statement(self, s: ast.ExprStmt, scope: Scope):
        e = s.expr
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attr) and e.func.name == "iir":
            target = self.value(e.func.obj, scope, DefContext(None, None))
            if not isinstance(target, FuncVal):
                self.error("'.iir' applies to a Func", e.func.obj.span)
            from hdsl.frontend.iir import add_iir
            add_iir(self, target.func, e, scope)
            return
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attr):
            self.error(f"'{e.func.name}' is a scheduling directive; it belongs in a schedule block",
                       e.func.name_span, "move it to 'schedule { ... }'")
        self.error("this statement has no effect", s.span,
                   "define a Func with 'f(x, y) = ...' or bind a name with 'name = ...'")

    def rdom_decl(self, s: ast.RDomDecl, scope: Scope):
        dom = s.domain
        bounds = []
        if isinstance(dom, ast.ListLit):
            if not dom.items:
                self.error("an rdom needs at least one range", dom.span)
            for item in dom.items:
                if not isinstance(item, ast.Range):
                    self.error("each rdom dimension is a range 'lo..hi'", item.span, "e.g. rdom r = [0..8, 0..8]")
                lo = self.rdom_bound(item.lo, scope)
                hi = self.rdom_bound(item.hi, scope)
                ext = self.type_rule(ops.binop, "-", hi, lo, span=item.span)
                # an rdom's min and extent are i32 (Halide's RDom takes Int(32) Exprs)
                lo_value, ext_value = ops.fold_const_int(lo), ops.fold_const_int(ext)
                if lo_value is not None and not I32.can_represent(lo_value):
                    self.error(f"an rdom bound must fit in i32, not {lo_value}", item.lo.span)
                if ext_value is not None and not I32.can_represent(ext_value):
                    self.error(f"this range has {ext_value} values; an rdom dimension has at most "
                               f"{2 ** 31 - 1} (its extent is an i32)", item.span)
                bounds.append((self.as_i32(lo), self.as_i32(ext)))
        else:
            v = self.value(dom, scope, DefContext(None, []))
            if isinstance(v, InputVal):
                b = v.buffer
                bounds = [(BufferProp(b, i, "min"), BufferProp(b, i, "extent")) for i in range(b.dims)]
            else:
                self.error("an rdom is a list of ranges or an input buffer", dom.span,
                           "e.g. rdom r = [0..8, 0..8] or rdom s = img")
        if len(bounds) > 8:
            self.error("an rdom has at most 8 dimensions", dom.span)
        rdom = RDom(s.name, bounds, None, s.span)
        scope.define(s.name, RDomVal(rdom))
        if s.where is not None:
            # (it may mention declared pure vars, `var x` then `where r.x <= x`, as in Halide's
            # RDom::where: the update that uses the rdom must have them as pure vars)
            p = self.expr(s.where, scope, DefContext(None, None))
            if not p.type.is_bool() and not p.type.is_error():
                text = self.text(s.where.span)
                self.error(f"an rdom's 'where' condition must be bool, not {p.type}", s.where.span,
                           f"compare it, e.g. {text} == 0" if text and len(text) <= 40
                           else "compare with '== 0' or '!= 0' to get a bool")
            rdom.predicate = p

    def rdom_bound(self, node: ast.Node, scope: Scope) -> Expr:
        e = self.expr(node, scope, DefContext(None, []))
        if e.type.is_float() or e.type.is_bool():
            self.error(f"an rdom bound must be an integer, not {e.type}", node.span,
                       "convert it explicitly, e.g. i32(...)")
        return e

    @staticmethod
    def as_i32(e: Expr) -> Expr:
        if isinstance(e, Const):
            return Const(I32, int(e.value))
        return e if e.type == I32 else ops.cast(I32, e)

    # ------------------------------------------------------------------ definitions
    def callee_target(self, node: ast.Node, scope: Scope, create: bool):
        """The Func a left-hand side `f(...)` or `a[i](...)` names, creating it if new."""
        if isinstance(node, ast.Name):
            v = scope.lookup(node.id)
            if isinstance(v, FuncVal):
                return v.func
            if isinstance(v, PoisonVal):
                raise Poisoned()
            if v is None or isinstance(v, OutputSlot):
                if node.id in BUILTINS or node.id in BOUNDARY_FNS or node.id in KEYWORDS:
                    # later uses of the name say nothing more (they would be about the built-in)
                    scope.define(node.id, PoisonVal(node.id))
                if node.id in BUILTINS or node.id in BOUNDARY_FNS:
                    self.error(f"'{node.id}' is a built-in and cannot be defined", node.span, "choose another name")
                if node.id in KEYWORDS:
                    self.error(f"'{node.id}' is a keyword and cannot name a Func", node.span, "choose another name")
                f = self.new_func(node.id, node.span)
                scope.define(node.id, FuncVal(f))
                return f
            if isinstance(v, InputVal):
                self.error(f"'{node.id}' is an input; it cannot be defined", node.span,
                           "inputs are read-only; give the Func you are defining another name")
            self.error(f"'{node.id}' is {self.describe(v)}, not a Func", node.span,
                       "choose another name for the Func")
        if isinstance(node, ast.Index):
            arr = self.array_for(node.obj, scope)
            i = self.const_int(node.index, scope)
            v = arr.elems.get(i)
            if isinstance(v, FuncVal):
                return v.func
            if isinstance(v, PoisonVal):
                raise Poisoned()
            if v is not None:
                self.error(f"'{arr.name}[{i}]' is {self.describe(v)}, not a Func", node.span)
            f = self.new_func(f"{arr.name}[{i}]", node.span)
            arr.elems[i] = FuncVal(f)
            return f
        self.error("the left-hand side must name a Func", node.span, "e.g. f(x, y) = ...")

    def array_for(self, node: ast.Node, scope: Scope) -> ArrayVal:
        if not isinstance(node, ast.Name):
            self.error("arrays of Funcs are indexed by name, e.g. gp[j]", node.span)
        v = scope.lookup(node.id)
        if v is None:
            v = ArrayVal(node.id)
            scope.define(node.id, v)
        if isinstance(v, PoisonVal):
            raise Poisoned()
        if not isinstance(v, ArrayVal):
            self.error(f"'{node.id}' is {self.describe(v)}, not an array of Funcs", node.span)
        return v

    def assign(self, s: ast.Assign, scope: Scope):
        target = s.target
        if isinstance(target, ast.Call):
            f = self.callee_target(target.func, scope, create=True)
            try:
                self.definition(f, target, s, scope)
            except ElabError:
                self.broken.add(id(f))
                raise
            return
        if isinstance(target, (ast.Name, ast.Index)):
            if s.op != "=":
                self.error(f"'{s.op}' needs a Func call on the left, e.g. f(x) {s.op} ...", target.span)
            self.bind(target, s.value, scope)
            return
        self.error("cannot assign to this", target.span, "define a Func with 'f(x, y) = ...'")

    def bind(self, target: ast.Node, value_node: ast.Node, scope: Scope):
        name = target.id if isinstance(target, ast.Name) else None
        if name is not None:
            old = scope.lookup(name)
            if isinstance(old, FuncVal) and old.func.defined:
                first = self.def_sites.get(id(old.func), (None,))[0]
                self.error(f"'{name}' is already defined", target.span,
                           "choose another name; a Func is defined once (update definitions add to it)",
                           [("the first definition is here", first)] if first else None)
            if isinstance(old, (InputVal, FnVal)) or (isinstance(old, ExprVal) and isinstance(old.expr, Param)):
                self.error(f"'{name}' is already defined as {self.describe(old)}", target.span,
                           "choose another name")
            if name in BUILTINS or name in BOUNDARY_FNS:
                self.error(f"'{name}' is the name of a built-in", target.span, "choose another name")
        arr, i = None, None
        try:
            if isinstance(target, ast.Index):
                arr = self.array_for(target.obj, scope)
                i = self.const_int(target.index, scope)
            self.bind_value(target, name, arr, i, value_node, scope)
        except ElabError:
            # the name stays known, so that its uses do not report it again
            if name is not None:
                scope.define(name, PoisonVal(name))
            elif arr is not None and i is not None:
                arr.elems[i] = PoisonVal(f"{arr.name}[{i}]")
            elif arr is not None:
                arr.poisoned = True
            raise

    def bind_value(self, target, name, arr, i, value_node, scope):
        display = name if arr is None else f"{arr.name}[{i}]"
        ctx = DefContext(None, None, partial_ok=True)
        self.created.append([])
        try:
            v = self.value(value_node, scope, ctx)
        finally:
            made = self.created.pop()
            if self.created:
                self.created[-1].extend(made)
        if isinstance(v, PoisonVal):
            raise Poisoned()
        v = self.funcify(v, ctx, display, value_node.span)
        if isinstance(v, FuncVal) and v.func in made:
            self.rename(v.func, display, made)
            self.def_sites[id(v.func)] = (target.span, value_node.span)
        is_output = name is not None and isinstance(scope.lookup(name), OutputSlot)
        if is_output and isinstance(v, FuncVal) and v.func not in made:
            # an output is its own Func: wrap an existing one
            g = v.func
            f = self.new_func(name, target.span)
            f.args = [f"_{i}" for i in range(g.dims)]
            f.values = [FuncCall(g, tuple(Var(a) for a in f.args), k, t) for k, t in enumerate(g.types)]
            self.def_sites[id(f)] = (target.span, value_node.span)
            v = FuncVal(f)
        if arr is not None:
            arr.elems[i] = v
        else:
            scope.define(name, v)

    def rename(self, f: Func, display: str, made: list[Func]):
        old_prefix = f.name
        f.name = self.unique_name(display)
        for g in made:
            if g is not f and g.name.startswith(old_prefix.split(".")[0] + "."):
                local = g.name.split(".", 1)[1].split("$")[0]    # blur.bx$1 (a second call) -> bx
                g.name = self.unique_name(f"{f.name}.{local}")

    def funcify(self, v, ctx: DefContext, name: str | None, span: Span):
        """A value with bare Funcs in it (partial application) becomes a Func."""
        if isinstance(v, (ExprVal, TupleVal)) and ctx.implicit_dims is not None:
            f = self.new_func(name or "partial", span, implicit=False)
            f.args = [f"_{i}" for i in range(ctx.implicit_dims)]
            f.values = [v.expr] if isinstance(v, ExprVal) else list(v.items)
            return FuncVal(f)
        return v

    def definition(self, f: Func, lhs: ast.Call, s: ast.Assign, scope: Scope):
        arg_nodes = lhs.args
        for a in arg_nodes:
            if isinstance(a, ast.Range):
                self.error("a range is not a coordinate", a.span,
                           "to run over a range, declare an rdom: rdom r = [lo..hi], then use r.x")
        pure_names = []
        not_pure = None
        for a in arg_nodes:
            v = scope.lookup(a.id) if isinstance(a, ast.Name) else None
            if isinstance(a, ast.Name) and (v is None or isinstance(v, VarVal)):
                pure_names.append(a.id)
            elif not_pure is None:
                not_pure = a
        if not f.defined:
            if s.op == "=" and not_pure is None:
                f.args = pure_names
                f.span = s.span
                self.def_sites[id(f)] = (lhs.span, s.value.span)
                try:
                    for k, a in enumerate(arg_nodes):
                        if a.id in pure_names[:k]:
                            self.error(f"pure var '{a.id}' appears twice on the left-hand side", a.span,
                                       "each argument of a pure definition is a distinct variable")
                    f.values = self.rhs_values(s.value, scope, DefContext(f, pure_names))
                    self.check_no_rvars(f, s, scope)
                except ElabError:
                    f.values = [ops.poison()]
                    raise
                return
            if s.op == "=":
                f.args = [f"_{i}" for i in range(len(arg_nodes))]
                f.values = [ops.poison()]
                what = self.text(not_pure.span)
                example = ', '.join('xyzw'[:len(arg_nodes)]) if len(arg_nodes) <= 4 else '...'
                if isinstance(not_pure, ast.Name):
                    why = f"{self.named(not_pure, scope.lookup(not_pure.id))}, not a variable"
                else:
                    why = (f"'{what}'" if what else "this argument") + " is not a plain variable"
                self.error(f"the first definition of '{f.name}' must be pure, but {why}",
                           not_pure.span,
                           f"define it over variables first, e.g. {f.name}({example}) = ..., "
                           "then add update definitions")
            # a reduction without a pure definition starts at the update's identity
            f.args = [f"_{i}" for i in range(len(arg_nodes))]
            f.span = s.span
            f.values = None
            try:
                self.update(f, lhs, s, scope, initial=True)
            except ElabError:
                if f.values is None:
                    f.values = [ops.poison()]
                raise
            return
        if len(arg_nodes) != f.dims:
            self.error(f"'{f.name}' has {f.dims} dimension{'s' if f.dims != 1 else ''} but is defined here "
                       f"with {len(arg_nodes)}", lhs.span,
                       f"its first definition is {f.name}({', '.join(f.args)})")
        self.update(f, lhs, s, scope, initial=False)

    def rhs_values(self, node: ast.Node, scope: Scope, ctx: DefContext) -> list[Expr]:
        v = self.value(node, scope, ctx)
        if isinstance(v, TupleVal):
            return list(v.items)
        if isinstance(v, ExprVal):
            return [v.expr]
        self.error(f"the right-hand side must be an expression, not {self.describe(v)}", node.span,
                   self.value_hint(v))

    def update(self, f: Func, lhs: ast.Call, s: ast.Assign, scope: Scope, initial: bool):
        pure_here: list[str] = []
        ctx = DefContext(f, pure_here)
        args: list[Expr] = []

        def is_pure(a):
            return isinstance(a, ast.Name) and (scope.lookup(a.id) is None or isinstance(scope.lookup(a.id), VarVal))
        # every pure var of the left-hand side is bound in the whole update, its computed
        # coordinates included: `partial(img(rx.x, y), y) += 1` (Halide's Function::define_update
        # takes as pure the args that are the pure definition's var in the same position)
        computed_ctx = DefContext(f, [a.id for i, a in enumerate(lhs.args)
                                      if is_pure(a) and (initial or (i < len(f.args) and a.id == f.args[i]))])
        for i, a in enumerate(lhs.args):
            v = scope.lookup(a.id) if isinstance(a, ast.Name) else None
            if is_pure(a):
                if not initial and a.id != f.args[i]:
                    if a.id in computed_ctx.pure_vars:
                        # also at its own position: here a computed coordinate (f(x, x) += 1,
                        # the diagonal, as in Halide)
                        args.append(Var(a.id))
                        continue
                    if a.id in f.args:
                        self.error(f"pure var '{a.id}' is argument {f.args.index(a.id)} of '{f.name}' "
                                   f"but appears here as argument {i}", a.span,
                                   f"pure vars keep their positions in update definitions; '{a.id}' may "
                                   f"appear elsewhere only while it is also argument {f.args.index(a.id)}, "
                                   f"as in {f.name}({', '.join(a.id if k in (i, f.args.index(a.id)) else v for k, v in enumerate(f.args))})")
                    if v is None:
                        guess = did_you_mean(a.id, scope.all_names() | set(f.args))
                        self.error(f"'{a.id}' is not defined" + (f"; did you mean '{guess}'?" if guess else ""),
                                   a.span, f"the pure vars of '{f.name}' are {', '.join(f.args)}")
                    # a declared var that is not this Func's: Halide's "Undefined variable in
                    # definition of Func" (an update's pure vars are those of the pure definition)
                    self.error(f"'{a.id}' is not a pure var of '{f.name}'; its argument {i} is '{f.args[i]}'",
                               a.span, f"an update names the pure definition's vars in their places: "
                               f"{f.name}({', '.join(f.args)})")
                if initial:
                    f.args[i] = a.id
                pure_here.append(a.id)
                args.append(Var(a.id))
            else:
                e = self.index_expr(a, scope, computed_ctx)
                args.append(self.as_i32(e))
        if initial and len(set(pure_here)) != len(pure_here):
            dup = next(a for k, a in enumerate(lhs.args) if isinstance(a, ast.Name) and a.id in pure_here
                       and a.id in [b.id for b in lhs.args[:k] if isinstance(b, ast.Name)])
            self.error(f"pure var '{dup.id}' appears twice on the left-hand side", dup.span,
                       "each pure var names one dimension")
        rhs = self.rhs_values(s.value, scope, ctx)
        if initial:
            if s.op not in ("+=", "-=", "*=", "/="):
                raise AssertionError
            identity = 0 if s.op in ("+=", "-=") else 1
            f.values = [Const(e.type, identity if not e.type.is_float() else float(identity))
                        if not e.type.is_error() else e for e in rhs]
        if len(rhs) != len(f.types):
            self.error(f"'{f.name}' has {len(f.types)} values but this definition gives {len(rhs)}", s.value.span)
        values = []
        for k, e in enumerate(rhs):
            t = f.types[k]
            if ops.is_literal(e) and (t.is_int() or t.is_uint()) and not t.can_represent(int(e.value)):
                self.error(f"integer constant {e.value} does not fit in {t}, the type of '{f.name}'", s.value.span,
                           f"give '{f.name}' a wider type in its first definition, e.g. "
                           f"{f.name}({', '.join(f.args)}) = {'u' if t.is_uint() else 'i'}{min(64, t.bits * 2)}(...)"
                           if t.bits < 64 else None)
            if s.op != "=":
                current = FuncCall(f, tuple(args), k, f.types[k])
                e = self.type_rule(ops.binop, s.op[0], current, e, spans=[lhs.span, s.value.span], span=s.span)
            if not e.type.is_error() and not f.types[k].is_error() and e.type != f.types[k]:
                self.error(f"this update of '{f.name}' has type {e.type}, but '{f.name}' has type {f.types[k]}",
                           s.value.span, f"cast it: {f.types[k]}(...)")
            values.append(e)
        rdoms = []
        for e in args + values:
            for n in walk(e):
                if isinstance(n, RVar) and n.rdom not in rdoms:
                    rdoms.append(n.rdom)
        if len(rdoms) > 1:
            self.error(f"an update definition uses one rdom, but this one uses {len(rdoms)} "
                       f"({', '.join(r.name for r in rdoms)})", self.second_rdom_use(s, scope, rdoms) or s.span,
                       "merge them into one multi-dimensional rdom, e.g. "
                       f"rdom {rdoms[0].name} = [{', '.join('lo..hi' for r in rdoms)}]")
        if rdoms and rdoms[0].predicate is not None:
            pure = {a.name for a in args if isinstance(a, Var)}
            loose = sorted({n.name for n in walk(rdoms[0].predicate) if isinstance(n, Var)} - pure)
            if loose:
                self.error(f"the 'where' condition of rdom '{rdoms[0].name}' uses {', '.join(loose)}, which "
                           f"this update of '{f.name}' does not have as a pure var", s.span,
                           f"an update over '{rdoms[0].name}' must keep {', '.join(loose)} on its left-hand side, "
                           f"e.g. {f.name}({', '.join(f.args)}) += ...")
        self.check_self_reads(f, args, values, s, scope)
        f.updates.append(Update(args, values, rdoms[0] if rdoms else None, s.span))

    def check_no_rvars(self, f: Func, s: ast.Assign, scope: Scope):
        """A pure definition is one value per point: an rdom in it (bare, or through a `let`)
        has no point to take (the evaluator once failed on it; Halide: "Reduction domain
        referenced in pure function definition", Function::define)."""
        for e in f.values:
            rv = next((n for n in walk(e) if isinstance(n, RVar)), None)
            if rv is not None:
                where = next((n.span for n in ast_walk(s.value) if isinstance(n, ast.Attr)
                              and isinstance(n.obj, ast.Name)
                              and isinstance(scope.lookup(n.obj.id), RDomVal)
                              and scope.lookup(n.obj.id).rdom is rv.rdom), s.value.span)
                self.error(f"rdom '{rv.rdom.name}' is used in the pure definition of '{f.name}'", where,
                           f"use it in an update ({f.name}({', '.join(f.args)}) += ...) "
                           "or an inline reduction (sum(...))")

    def second_rdom_use(self, s: ast.Assign, scope: Scope, rdoms) -> Span | None:
        """Where the statement first uses an rdom other than the first one it uses."""
        first = None
        for n in ast_walk(s):
            if isinstance(n, ast.Attr) and isinstance(n.obj, ast.Name):
                v = scope.lookup(n.obj.id)
                if isinstance(v, RDomVal) and v.rdom in rdoms:
                    if first is None:
                        first = v.rdom
                    elif v.rdom is not first:
                        return n.span
        return None

    def check_self_reads(self, f: Func, args: list[Expr], values: list[Expr], s: ast.Assign, scope: Scope):
        """Halide's rule: a pure var of the update stays in its place in every self-reference."""
        for e in values + args:
            for n in walk(e):
                if isinstance(n, FuncCall) and n.func is f:
                    for i, (a, b) in enumerate(zip(args, n.args)):
                        if isinstance(a, Var) and a.name == f.args[i] and not (isinstance(b, Var) and b.name == a.name):
                            self.error(f"'{f.name}' reads itself at another value of pure var '{a.name}'",
                                       self.self_read_span(f, i, a.name, s, scope) or s.value.span,
                                       f"in an update, a pure var appears unchanged in every use of "
                                       f"'{f.name}'; to scan along '{a.name}', use an rdom r and write r.x "
                                       f"in its place")

    def self_read_span(self, f: Func, i: int, var: str, s: ast.Assign, scope: Scope) -> Span | None:
        for node in ast_walk(s.value):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and i < len(node.args):
                v = scope.lookup(node.func.id)
                arg = node.args[i]
                if isinstance(v, FuncVal) and v.func is f and not (isinstance(arg, ast.Name) and arg.id == var):
                    return arg.span
        return None

    # ------------------------------------------------------------------ expressions
    def named(self, node: ast.Node, v) -> str:
        """"'k' is a param" for a name, "this is an expression" otherwise: the subject of a message."""
        if isinstance(node, ast.Name):
            return f"'{node.id}' is {self.describe(v)}"
        text = self.text(node.span)
        if text and len(text) <= 30:
            return f"'{text}' is {self.describe(v)}"
        return f"this is {self.describe(v)}"

    def describe(self, v) -> str:
        if isinstance(v, ExprVal) and isinstance(v.expr, Param):
            return "a param"
        if isinstance(v, ExprVal) and isinstance(v.expr, Const):
            return "a constant"
        return {FuncVal: "a Func", ArrayVal: "an array of Funcs", ExprVal: "an expression", VarVal: "a var",
                RDomVal: "an rdom", InputVal: "an input", FnVal: "a fn", OutputSlot: "an output",
                ListVal: "a list", RangeVal: "a range", TupleVal: "a tuple", DimVal: "a buffer dimension",
                StrVal: "a string", GradVal: "a gradient"}.get(type(v), "a value")

    def value_hint(self, v) -> str | None:
        if isinstance(v, FuncVal):
            return f"call it with coordinates, e.g. {v.func.name}({', '.join(v.func.args) or 'x'})"
        if isinstance(v, InputVal):
            return f"read it with coordinates, e.g. {v.buffer.name}(x, y)"
        if isinstance(v, RDomVal):
            return f"use one of its dimensions, e.g. {v.rdom.name}.x"
        return None

    def expr(self, node: ast.Node, scope: Scope, ctx: DefContext) -> Expr:
        v = self.value(node, scope, ctx)
        if isinstance(v, ExprVal):
            return v.expr
        if isinstance(v, TupleVal):
            self.error(f"a tuple of {len(v.items)} values is used where one value is expected", node.span,
                       self.tuple_hint(node))
        self.error(f"{self.named(node, v)}, not a value", node.span, self.value_hint(v))

    def index_expr(self, node: ast.Node, scope: Scope, ctx: DefContext) -> Expr:
        e = self.expr(node, scope, ctx)
        if e.type.is_float():
            self.error(f"a coordinate must be an integer, not {e.type}", node.span,
                       "convert it explicitly, e.g. i32(floor(...))")
        if e.type.is_bool():
            self.error("a coordinate must be an integer, not bool", node.span)
        value = ops.fold_const_int(e) if e.type.bits > 32 or e.type == Type("uint", 32) else None
        if value is not None and not I32.can_represent(value):
            # coordinates are i32 (Halide: "Implicit cast from int64 to int ... is not allowed")
            self.error(f"coordinate {value} does not fit in i32 (at most {2 ** 31 - 1})", node.span)
        return e

    def value(self, node: ast.Node, scope: Scope, ctx: DefContext):
        m = getattr(self, "v_" + type(node).__name__, None)
        if m is None:
            self.error("unexpected syntax here", node.span)
        return m(node, scope, ctx)

    def v_IntLit(self, n, scope, ctx):
        if n.value >= 2 ** 63:
            self.error(f"integer literal {n.value} is too large", n.span)
        if n.value >= 2 ** 31:
            return ExprVal(Const(BY_NAME["i64"], n.value))
        return ExprVal(Const(I32, n.value, literal=True))

    def v_FloatLit(self, n, scope, ctx):
        with np.errstate(over="ignore"):
            rounded = np.float32(n.value)
        if math.isinf(rounded):
            self.error(f"float literal {n.text} is too large for f32, whose largest value is about 3.4e38",
                       n.span, "float literals are f32 (as in Halide)")
        return ExprVal(ops.float_literal(n.value, n.text))

    def v_BoolLit(self, n, scope, ctx):
        return ExprVal(Const(BOOL, n.value))

    def v_StrLit(self, n, scope, ctx):
        return StrVal(n.value)

    def v_Name(self, n, scope, ctx):
        v = scope.lookup(n.id)
        if isinstance(v, PoisonVal):
            raise Poisoned()
        if v is None:
            if ctx.func is not None and ctx.pure_vars is not None and n.id in ctx.func.args \
                    and n.id not in ctx.pure_vars:
                self.error(f"pure var '{n.id}' of '{ctx.func.name}' is not bound in this update", n.span,
                           "an update definition may use only the pure vars on its left-hand side")
            if ctx.pure_vars is not None and n.id in ctx.pure_vars:
                return ExprVal(Var(n.id))
            if n.id in BUILTINS or n.id in BOUNDARY_FNS:
                self.error(f"built-in '{n.id}' must be called", n.span)
            candidates = scope.all_names() | set(ctx.pure_vars or [])
            guess = did_you_mean(n.id, candidates)
            hint = None
            if ctx.func is None and ctx.pure_vars is None:
                hint = f"declare it with 'var {n.id}' if it is a pure variable"
            elif ctx.func is not None and not ctx.func.defined and ctx.pure_vars == ctx.func.args and not guess:
                f = ctx.func
                hint = (f"the pure vars of '{f.name}' are {', '.join(f.args) or '(none)'}; to use '{n.id}' as one, "
                        f"add it to the left-hand side: {f.name}({', '.join(f.args + [n.id])})")
            self.used_before_definition(n.id, n.span)
            self.error(f"'{n.id}' is not defined" + (f"; did you mean '{guess}'?" if guess else ""), n.span, hint)
        if isinstance(v, VarVal):
            if ctx.pure_vars is not None and v.name not in ctx.pure_vars:
                if ctx.func is not None:
                    self.error(f"'{v.name}' is not a pure var of '{ctx.func.name}'", n.span,
                               f"its pure vars are {', '.join(ctx.pure_vars) or '(none)'}")
                self.error(f"var '{v.name}' cannot be used here", n.span,
                           "vars have values only inside a Func definition")
            return ExprVal(Var(v.name))
        if isinstance(v, ExprVal):
            self.check_free_vars(v.expr, ctx, n)
            return v
        if isinstance(v, TupleVal):
            for e in v.items:
                self.check_free_vars(e, ctx, n)
            return v
        if isinstance(v, OutputSlot):
            self.error(f"output '{n.id}' is used before it is defined", n.span)
        return v

    def used_before_definition(self, name: str, span: Span):
        """An unknown name that the algorithm block defines further down."""
        later = self.later.get(name)
        if later is not None and later.file == span.file and (later.line, later.col) > (span.line, span.col):
            self.error(f"'{name}' is used before it is defined", span,
                       f"move the definition of '{name}' above this line",
                       [(f"'{name}' is defined here", later)])

    def check_free_vars(self, e: Expr, ctx: DefContext, n: ast.Node):
        if ctx.pure_vars is None:
            return
        for node in walk(e):
            if isinstance(node, Var) and node.name not in ctx.pure_vars and not node.name.startswith("_"):
                where = f"'{ctx.func.name}'" if ctx.func is not None else "this context"
                self.error(f"'{n.id if isinstance(n, ast.Name) else '...'}' uses var '{node.name}', "
                           f"which is not a pure var of {where}", n.span,
                           f"the pure vars here are {', '.join(ctx.pure_vars) or '(none)'}")

    def as_operand(self, v, node: ast.Node, ctx: DefContext) -> Expr:
        if isinstance(v, ExprVal):
            return v.expr
        if isinstance(v, FuncVal) and ctx.partial_ok:
            return self.implicit_call(v.func, node, ctx)
        if isinstance(v, InputVal) and ctx.partial_ok:
            b = v.buffer
            self.set_implicit(ctx, b.dims, node)
            return InputCall(b, tuple(Var(f"_{i}") for i in range(b.dims)), b.type)
        if isinstance(v, TupleVal):
            self.error(f"a tuple of {len(v.items)} values is used where one value is expected", node.span,
                       self.tuple_hint(node))
        self.error(f"{self.named(node, v)}, not a value", node.span, self.value_hint(v))

    def tuple_hint(self, node: ast.Node) -> str:
        text = self.text(node.span)
        if text and len(text) <= 40:
            if not isinstance(node, (ast.Name, ast.Call, ast.Index, ast.Attr, ast.TupleLit)):
                text = f"({text})"
            return f"pick one value with [i], e.g. {text}[0]"
        return "pick one value with [i]"

    def set_implicit(self, ctx: DefContext, dims: int, node: ast.Node):
        if ctx.implicit_dims is not None and ctx.implicit_dims != dims:
            self.error(f"Funcs of {ctx.implicit_dims} and {dims} dimensions are combined point-wise", node.span)
        ctx.implicit_dims = dims

    def implicit_call(self, f: Func, node: ast.Node, ctx: DefContext) -> Expr:
        if not f.defined:
            self.error(f"'{f.name}' is used before it is defined", node.span)
        if len(f.types) != 1:
            self.error(f"'{f.name}' has {len(f.types)} values", node.span, "pick one with f(x, y)[i]")
        self.set_implicit(ctx, f.dims, node)
        return FuncCall(f, tuple(Var(f"_{i}") for i in range(f.dims)), 0, f.types[0])

    def v_BinOp(self, n, scope, ctx):
        a = self.as_operand(self.value(n.left, scope, ctx), n.left, ctx)
        b = self.as_operand(self.value(n.right, scope, ctx), n.right, ctx)
        try:
            return ExprVal(ops.binop(n.op, a, b))
        except ops.TypeRuleError as e:
            spans, hint = [n.left.span, n.right.span], e.hint
            if e.operand is not None:
                lit, other = (a, b) if e.operand == 0 else (b, a)
                other_node = n.right if e.operand == 0 else n.left
                wider = _wider(other.type)
                text = self.text(other_node.span)
                if ops.is_literal(lit) and not ops.is_literal(other) and wider and text and len(text) <= 40:
                    hint = f"widen the other operand first, e.g. {wider}({text})"
            self.error(e.message, spans[e.operand] if e.operand is not None else n.span, hint)

    def v_UnaryOp(self, n, scope, ctx):
        a = self.as_operand(self.value(n.operand, scope, ctx), n.operand, ctx)
        return ExprVal(self.type_rule(ops.unary, n.op, a, spans=[n.operand.span], span=n.span))

    def check_condition(self, c: Expr, node: ast.Node, what: str):
        """A condition must be bool, whatever is wrong with the values it chooses between."""
        if not c.type.is_error() and not c.type.is_bool():
            text = self.text(node.span)
            if text and isinstance(node, ast.Ternary):
                text = f"({text})"
            self.error(f"the condition of {what} must be bool, not {c.type}", node.span,
                       f"compare it, e.g. {text} != 0" if text and len(text) <= 40
                       else "compare with '!= 0' to get a bool")

    def v_Ternary(self, n, scope, ctx):
        c = self.as_operand(self.value(n.cond, scope, ctx), n.cond, ctx)
        self.check_condition(c, n.cond, "'?:'")
        t = self.value(n.then, scope, ctx)
        f = self.value(n.other, scope, ctx)
        if isinstance(t, TupleVal) and isinstance(f, TupleVal):
            if len(t.items) != len(f.items):
                self.error("both sides of '?:' must have the same number of values", n.span)
            return TupleVal([self.type_rule(ops.select, c, a, b, spans=[n.cond.span, n.then.span, n.other.span],
                                            span=n.span) for a, b in zip(t.items, f.items)])
        a = self.as_operand(t, n.then, ctx)
        b = self.as_operand(f, n.other, ctx)
        return ExprVal(self.type_rule(ops.select, c, a, b, spans=[n.cond.span, n.then.span, n.other.span],
                                      span=n.span))

    def select_call(self, n, scope, ctx):
        """select(c, a, b), Halide's multi-way select(c0, v0, c1, v1, ..., otherwise) (the first
        value whose condition holds; folded from the right as in src/IROperator.h), and a
        select of tuples, point by point (Halide's Tuple select)."""
        conds = [self.as_operand(self.value(a, scope, ctx), a, ctx) for a in n.args[0:-1:2]]
        for c, a in zip(conds, n.args[0:-1:2]):
            self.check_condition(c, a, "select")
        nodes = list(n.args[1::2]) + [n.args[-1]]
        values = [self.value(a, scope, ctx) for a in nodes]
        tuples = [v for v in values if isinstance(v, TupleVal)]
        if tuples:
            width = len(tuples[0].items)
            for v, a in zip(values, nodes):
                if not isinstance(v, TupleVal) or len(v.items) != width:
                    self.error(f"select mixes a tuple of {width} values with "
                               + (f"a tuple of {len(v.items)}" if isinstance(v, TupleVal) else "a single value"),
                               a.span, "give every choice the same number of values")
            columns = [[v.items[j] for v in values] for j in range(width)]
        else:
            columns = [[self.as_operand(v, a, ctx) for v, a in zip(values, nodes)]]
        out = []
        for col in columns:
            acc, acc_span = col[-1], nodes[-1].span
            for i in range(len(conds) - 1, -1, -1):
                acc = self.type_rule(ops.select, conds[i], col[i], acc,
                                     spans=[n.args[2 * i].span, nodes[i].span, acc_span], span=n.span)
                acc_span = n.span
            out.append(acc)
        return TupleVal(out) if tuples else ExprVal(out[0])

    def v_TupleLit(self, n, scope, ctx):
        return TupleVal([self.as_operand(self.value(i, scope, ctx), i, ctx) for i in n.items])

    def v_ListLit(self, n, scope, ctx):
        return ListVal([self.value(i, scope, ctx) for i in n.items])

    def v_Range(self, n, scope, ctx):
        return RangeVal(self.expr(n.lo, scope, ctx), self.expr(n.hi, scope, ctx))

    def v_Index(self, n, scope, ctx):
        obj = self.value(n.obj, scope, ctx)
        if isinstance(obj, ArrayVal):
            i = self.const_int(n.index, scope)
            if i not in obj.elems:
                if obj.poisoned:
                    raise Poisoned()
                have = sorted(obj.elems)
                self.error(f"'{obj.name}[{i}]' is not defined", n.span,
                           f"the defined elements are {_elements(obj.name, have)}" if have else None)
            v = obj.elems[i]
            if isinstance(v, PoisonVal):
                raise Poisoned()
            return v
        if isinstance(obj, TupleVal):
            i = self.const_int(n.index, scope)
            k = len(obj.items)
            if not 0 <= i < k:
                self.error(f"tuple index {i} is out of range: the tuple has {k} values", n.index.span,
                           f"use an index from 0 to {k - 1}")
            return ExprVal(obj.items[i])
        if isinstance(obj, ListVal):
            i = self.const_int(n.index, scope)
            if not 0 <= i < len(obj.items):
                self.error(f"list index {i} is out of range", n.index.span)
            return obj.items[i]
        if isinstance(obj, ExprVal):
            self.error("only tuples and arrays of Funcs can be indexed with [ ]", n.span,
                       "this value has one element")
        self.error(f"{self.named(n.obj, obj)}; it cannot be indexed with [ ]", n.span, self.value_hint(obj))

    def v_Attr(self, n, scope, ctx):
        obj = self.value(n.obj, scope, ctx)
        name = n.name
        if isinstance(obj, RDomVal):
            rd = obj.rdom
            idx = "xyzw".find(name) if len(name) == 1 else -1
            if idx < 0 or idx >= len(rd.bounds):
                dims = ", ".join(f"{rd.name}.{'xyzw'[i]}" for i in range(min(4, len(rd.bounds))))
                self.error(f"rdom '{rd.name}' has no dimension '{name}'", n.name_span, f"its dimensions are {dims}")
            return ExprVal(RVar(rd, idx))
        if isinstance(obj, (InputVal, DimVal)):
            b = obj.buffer
            props = {"width": (0, "extent"), "height": (1, "extent"), "channels": (2, "extent")}
            if isinstance(obj, DimVal):
                if name in ("min", "extent"):
                    return ExprVal(BufferProp(b, obj.dim, name))
                if name == "max":
                    return ExprVal(ops.binop("-", ops.binop("+", BufferProp(b, obj.dim, "min"),
                                                            BufferProp(b, obj.dim, "extent")), Const(I32, 1, True)))
                self.error(f"a buffer dimension has 'min', 'extent' and 'max', not '{name}'", n.name_span)
            if name in props:
                d, what = props[name]
                if d >= b.dims:
                    self.error(f"input '{b.name}' has {b.dims} dimension{'s' if b.dims > 1 else ''}; "
                               f"'{name}' needs {d + 1}", n.name_span)
                return ExprVal(BufferProp(b, d, what))
            if name == "dim":
                self.error("'dim' takes the dimension's index", n.name_span, f"e.g. {b.name}.dim(0).extent")
            guess = did_you_mean(name, list(props) + ["dim"])
            self.error(f"input '{b.name}' has no property '{name}'" + (f"; did you mean '{guess}'?" if guess else ""),
                       n.name_span, "buffer properties: width, height, channels, dim(i).min, dim(i).extent")
        if isinstance(obj, FuncVal):
            f = obj.func
            if name in f.locals:
                return FuncVal(f.locals[name])
            # an array of Funcs made inside the fn: its elements are the locals 'name[i]'
            elems = {int(k[len(name) + 1:-1]): FuncVal(g) for k, g in f.locals.items()
                     if re.fullmatch(re.escape(name) + r"\[-?\d+\]", k)}
            if elems:
                return ArrayVal(f"{f.name}.{name}", elems)
            self.error(f"'{f.name}' has no member '{name}'", n.name_span,
                       ("its local Funcs are " + ", ".join(sorted(f.locals))) if f.locals else None)
        self.error(f"{self.named(n.obj, obj)}; it has no member '{name}'", n.name_span)

    # ------------------------------------------------------------------ calls
    def v_Call(self, n, scope, ctx):
        fn = n.func
        if isinstance(fn, ast.Name) and scope.lookup(fn.id) is None:
            return self.builtin_call(fn.id, n, scope, ctx)
        if isinstance(fn, ast.Attr):
            obj = self.value(fn.obj, scope, ctx)
            if isinstance(obj, InputVal) and fn.name == "dim":
                if len(n.args) != 1:
                    self.error("dim takes one argument", n.span)
                d = self.const_int(n.args[0], scope)
                if not 0 <= d < obj.buffer.dims:
                    self.error(f"input '{obj.buffer.name}' has no dimension {d}", n.args[0].span,
                               f"it has dimensions 0 to {obj.buffer.dims - 1}")
                return DimVal(obj.buffer, d)
            if isinstance(obj, FuncVal):
                self.error(f"'{fn.name}' is a scheduling directive; it belongs in a schedule block", fn.name_span)
            callee = self.value(fn, scope, ctx)
        else:
            callee = self.value(fn, scope, ctx)
        if isinstance(callee, FuncVal):
            return self.func_call(callee.func, n, scope, ctx)
        if isinstance(callee, InputVal):
            b = callee.buffer
            args = self.call_args(n, scope, ctx, b.dims, f"input '{b.name}'")
            return ExprVal(InputCall(b, tuple(args), b.type))
        if isinstance(callee, FnVal):
            return self.fn_call(callee, n, scope, ctx)
        if isinstance(callee, GradVal):          # autodiff: hdsl/frontend/gradient.py
            from hdsl.frontend.gradient import gradient_call
            return gradient_call(self, callee, n, scope, ctx)
        if isinstance(callee, OutputSlot):
            self.error(f"output '{callee.name}' is used before it is defined", fn.span)
        self.error(f"{self.named(fn, callee)}, not a Func; it cannot be called", fn.span, self.value_hint(callee))

    def call_args(self, n, scope, ctx, dims, what, arg_names=None) -> list[Expr]:
        if len(n.args) != dims:
            names = arg_names if arg_names and not any(a.startswith("_") for a in arg_names) else \
                ("xyzw"[:dims] if dims <= 4 else [f"x{i}" for i in range(dims)])
            callee = self.text(n.func.span) or "f"
            self.error(f"{what} has {dims} dimension{'s' if dims != 1 else ''} but is called with "
                       f"{len(n.args)} argument{'s' if len(n.args) != 1 else ''}", n.span,
                       f"call it with {dims} coordinate{'s' if dims != 1 else ''}, e.g. {callee}({', '.join(names)})")
        return [self.as_i32(self.index_expr(a, scope, ctx)) for a in n.args]

    def func_call(self, f: Func, n, scope, ctx):
        if not f.defined:
            if ctx.func is f:
                self.error(f"'{f.name}' is used in its own pure definition", n.span,
                           "recursion needs an update definition over an rdom")
            self.error(f"'{f.name}' is used before it is defined", n.span)
        args = self.call_args(n, scope, ctx, f.dims, f"'{f.name}'", f.args)
        if len(f.types) == 1:
            return ExprVal(FuncCall(f, tuple(args), 0, f.types[0]))
        return TupleVal([FuncCall(f, tuple(args), k, t) for k, t in enumerate(f.types)])

    def fn_call(self, fv: FnVal, n, scope, ctx):
        node = fv.node
        if len(n.args) != len(node.params):
            want = len(node.params)
            where = n.span
            if len(n.args) > want:      # point at the extra arguments
                first, last = n.args[want].span, n.args[-1].span
                if first.line == last.end_line:
                    where = Span(first.file, first.line, first.col, last.end_line, last.end_col)
            self.error(f"fn '{node.name}' takes {want} argument{'s' if want != 1 else ''}, given {len(n.args)}",
                       where, f"call it as {node.name}({', '.join(node.params)})")
        if self.fn_depth >= MAX_FN_DEPTH:
            self.error(f"fn '{node.name}' calls itself more than {MAX_FN_DEPTH} levels deep", n.span,
                       "a fn is expanded at compile time, so its recursion must stop; "
                       "to repeat a step a fixed number of times, use a 'for' loop")
        argv = [self.value(a, scope, DefContext(ctx.func, ctx.pure_vars, partial_ok=True)) for a in n.args]
        inner = Scope(fv.scope)
        for p, v in zip(node.params, argv):
            inner.names[p] = v
        self.fn_depth += 1
        self.created.append([])
        result = None
        errors_before = len(self.sink.diagnostics)
        note = f"in this call of fn '{node.name}'"
        failed = False
        try:
            failed = self.block(node.body, inner, in_fn=True)
        except _Return as r:
            result = r.value
        except ElabError as e:
            e.add_note(note, n.span)
            raise
        finally:
            made = self.created.pop()
            self.fn_depth -= 1
        if len(self.sink.diagnostics) > errors_before:
            # errors inside the body were reported there; say where the fn was called from
            for d in self.sink.diagnostics[errors_before:]:
                if n.span != d.span and all(sp != n.span for _, sp in d.notes):
                    d.notes.append((note, n.span))
            raise Poisoned()
        if failed:
            raise Poisoned()
        if result is None:
            self.error(f"fn '{node.name}' ends without returning a value", node.name_span or node.span,
                       "end it with 'return ...'", [(note, n.span)])
        prefix = node.name
        for g in made:
            if not g.name.startswith(prefix + "."):
                g.name = self.unique_name(f"{prefix}.{g.name.split('$')[0]}")
        if isinstance(result, FuncVal) and result.func in made:
            result.func.locals.update({g.name.split(".", 1)[1].split("$")[0]: g for g in made
                                       if g is not result.func})
        if self.created:
            self.created[-1].extend(made)
        return result

    def builtin_call(self, name: str, n, scope, ctx):
        if name in CAST_NAMES or name in SAT_CAST_NAMES:
            if len(n.args) != 1:
                self.error(f"{name}(...) takes one argument", n.span)
            a = self.as_operand(self.value(n.args[0], scope, ctx), n.args[0], ctx)
            if name in SAT_CAST_NAMES:
                return ExprVal(self.type_rule(ops.saturating_cast, BY_NAME[name[:-4]], a, span=n.args[0].span))
            # an explicit cast of a literal wraps like any cast, i8(240) == -16: Halide's
            # cast() folds it with make_const, whose IntImm::make drops the high bits
            # (src/IROperator.cpp, src/Expr.cpp); only implicit narrowing is an error
            return ExprVal(ops.cast(BY_NAME[name], a))
        if name in BUILTIN_ARITY:
            want = BUILTIN_ARITY[name]
            k = len(n.args)
            if name == "select" and k >= 3 and k % 2 == 1:
                return self.select_call(n, scope, ctx)
            if name in ("min", "max") and k > 2:
                # Halide's variadic min/max, folded from the right (src/IROperator.h):
                # max(a, b, c) is max(a, max(b, c))
                args = [self.as_operand(self.value(a, scope, ctx), a, ctx) for a in n.args]
                acc, acc_span = args[-1], n.args[-1].span
                for i in range(k - 2, -1, -1):
                    acc = self.type_rule(ops.intrinsic, name, [args[i], acc], spans=[n.args[i].span, acc_span],
                                         span=n.span)
                    acc_span = n.span
                return ExprVal(acc)
            if len(n.args) != want:
                self.error(f"{name} takes {want} argument{'s' if want != 1 else ''}, given {len(n.args)}", n.span,
                           f"write {BUILTIN_USAGE.get(name, name + '(x)')}")
            args = [self.as_operand(self.value(a, scope, ctx), a, ctx) for a in n.args]
            spans = [a.span for a in n.args]
            return ExprVal(self.type_rule(ops.intrinsic, name, args, spans=spans, span=n.span))
        if name in INLINE_REDUCTIONS:
            from hdsl.frontend.reductions import inline_reduction
            if len(n.args) != 1:
                self.error(f"{name} takes one argument", n.span)
            e = self.as_operand(self.value(n.args[0], scope, ctx), n.args[0], ctx)
            return inline_reduction(self, name, e, n, ctx)
        if name == "print":
            if not n.args:
                self.error("print needs at least one argument", n.span)
            first = self.as_operand(self.value(n.args[0], scope, ctx), n.args[0], ctx)
            rest, pieces = [], []
            for a in n.args[1:]:
                v = self.value(a, scope, ctx)
                if isinstance(v, StrVal):
                    pieces.append(v.value)
                else:
                    pieces.append(None)
                    rest.append(self.as_operand(v, a, ctx))
            return ExprVal(Intrinsic("print", (first, *rest), first.type, tuple(pieces)))
        if name == "derivative":            # autodiff: hdsl/frontend/gradient.py
            from hdsl.frontend.gradient import derivative_call
            return derivative_call(self, n, scope, ctx)
        if name in BOUNDARY_FNS:
            if not self.uses_boundary:
                self.error(f"'{name}' comes from the boundary module", n.func.span, "add 'use boundary' at the top")
            from hdsl.frontend.boundary import boundary_call
            return boundary_call(self, name, n, scope, ctx)
        self.used_before_definition(name, n.func.span)
        guess = did_you_mean(name, scope.all_names() | BUILTINS | (BOUNDARY_FNS if self.uses_boundary else set()))
        self.error(f"'{name}' is not defined" + (f"; did you mean '{guess}'?" if guess else ""), n.func.span)


def _wider(t: Type) -> str | None:
    """The next wider integer type's name: u8 -> u16, i32 -> i64."""
    if (t.is_int() or t.is_uint()) and t.bits < 64:
        return f"{'i' if t.is_int() else 'u'}{t.bits * 2}"
    return None


def _elements(name: str, nums: list[int]) -> str:
    """'gp', [0, 1, 2, 5] -> 'gp[0] to gp[2], gp[5]' (nums sorted and distinct)"""
    out, start = [], None
    for k, v in enumerate(nums):
        if start is None:
            start = v
        if k + 1 == len(nums) or nums[k + 1] != v + 1:
            out.append(f"{name}[{start}]" if start == v else f"{name}[{start}] to {name}[{v}]")
            start = None
    return ", ".join(out)


def collect_definitions(stmts: list[ast.Node], out: dict[str, Span] | None = None) -> dict[str, Span]:
    """The names a block defines (Funcs, bindings, lets, rdoms), each with its first definition's span."""
    out = {} if out is None else out
    for s in stmts:
        if isinstance(s, ast.For):
            collect_definitions(s.body, out)
        elif isinstance(s, ast.Assign):
            t = s.target.func if isinstance(s.target, ast.Call) else s.target
            if isinstance(t, ast.Index):
                t = t.obj
            if isinstance(t, ast.Name):
                out.setdefault(t.id, t.span)
        elif isinstance(s, (ast.Let, ast.RDomDecl)):
            out.setdefault(s.name, s.name_span or s.span)
    return out


def ast_walk(node):
    """Every AST node under `node`, in source order (children by field order)."""
    yield node
    for name in node.__dataclass_fields__:
        if name == "span" or name.endswith("_span") or name.endswith("_spans"):
            continue
        child = getattr(node, name)
        if isinstance(child, ast.Node):
            yield from ast_walk(child)
        elif isinstance(child, list):
            for c in child:
                if isinstance(c, ast.Node):
                    yield from ast_walk(c)


def schedulable_names(scope: Scope) -> dict[int, str]:
    """id(Func) -> the shortest name a schedule reaches it by: a Func of the algorithm, an
    element of an array of Funcs, or a Func's local (`sharp.unsharp_blur`)."""
    found: dict[int, str] = {}

    def visit(f: Func, name: str, depth: int = 0):
        old = found.get(id(f))
        if old is not None and (len(old), old) <= (len(name), name):
            return
        found[id(f)] = name
        if depth < 8:
            for local, g in f.locals.items():
                visit(g, f"{name}.{local}", depth + 1)

    for n, v in sorted(scope.names.items()):
        if isinstance(v, FuncVal):
            visit(v.func, n)
        elif isinstance(v, ArrayVal):
            for i, e in sorted(v.elems.items()):
                if isinstance(e, FuncVal):
                    visit(e.func, f"{n}[{i}]")
    return found


def elaborate(module: ast.Module, filename: str, text: str | None = None) -> Pipeline | None:
    el = Elaborator(filename)
    if text is not None:
        el.texts.append(text)
    return el.module(module)


def check_source(text: str, filename: str) -> Pipeline | None:
    return elaborate(parse(text, filename), filename, text)

