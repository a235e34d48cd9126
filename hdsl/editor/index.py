"""Names in a .hl document, for the language server: where each name is declared, every place
it is used, and what the checker knows about it (a Func's types and dimensions).

Built from the front end's AST (hdsl/frontend/parse.py, whose nodes carry the span of every
name) and, for types, from the elaborator (hdsl/frontend/elaborate.py) run on the same AST
and read even when it reports errors. A document that does not parse is indexed from its
text with the offending lines blanked, one at a time (`parse_recovering`), so that a
half-typed line does not hide the rest of the file. Nothing here raises on a user's file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from hdsl.diagnostics import HdslError, Span, register_source
from hdsl.editor.directives import LOOP_KINDS, NEW_KIND, arg_kinds
from hdsl.frontend import ast
from hdsl.frontend.parse import parse

MAX_RECOVERY = 50          # lines blanked at most before giving up on a document
MAX_USE_DEPTH = 8


@dataclass(eq=False)
class Symbol:
    name: str
    kind: str          # pipeline input output param const fn fn-param func var let rdom loop binding schedule array
    span: Span         # the name where it is declared
    decl: Span         # the whole declaration
    detail: str = ""   # the declaration's text (one line)
    doc: str | None = None
    parent: "Symbol | None" = None
    children: list["Symbol"] = field(default_factory=list)
    module: str | None = None      # the `use`d module it comes from


@dataclass
class Occurrence:
    span: Span
    symbol: Symbol
    is_decl: bool = False


@dataclass
class AttrSite:
    """`obj.name` in the document: a directive, `.iir`, a buffer property or an rdom dimension."""
    span: Span         # of `name`
    name: str
    base: str | None   # the name at the root of `obj` (the Func a schedule chain is on)
    in_schedule: bool


def parse_recovering(text: str, filename: str) -> tuple[ast.Module | None, list[int]]:
    """The AST of `text`, with the lines that stop it from parsing replaced by blanks (their
    numbers are returned); None if it still does not parse after MAX_RECOVERY lines."""
    lines = text.split("\n")
    blanked: list[int] = []
    try:
        for _ in range(MAX_RECOVERY):
            try:
                return parse("\n".join(lines), filename), blanked
            except HdslError as e:
                d = e.diagnostics[0]
                if d.span is None or d.span.file != filename or not 1 <= d.span.line <= len(lines):
                    return None, blanked
                n = d.span.line
                if not lines[n - 1].strip():
                    return None, blanked
                lines[n - 1] = " " * len(lines[n - 1])    # same length: every other span stays put
                blanked.append(n)
            except RecursionError:
                return None, blanked
        return None, blanked
    finally:
        register_source(filename, text)     # diagnostics quote the real text, not the blanked one


def doc_comment(lines: list[str], line: int) -> str | None:
    """The `#` comment lines right above 1-based `line`, without their '#'."""
    out = []
    n = line - 1
    while n >= 1 and lines[n - 1].lstrip().startswith("#"):
        out.append(lines[n - 1].lstrip()[1:])
        n -= 1
    if not out:
        return None
    out.reverse()
    pad = min((len(s) - len(s.lstrip()) for s in out if s.strip()), default=0)
    return "\n".join(s[pad:] for s in out).strip("\n")


def _source_text(lines: list[str], span: Span) -> str:
    """A declaration's text on one line, its alignment padding squeezed (`input  img` -> `input img`)."""
    if span.line == span.end_line and 1 <= span.line <= len(lines):
        text = lines[span.line - 1][span.col - 1:span.end_col - 1]
    elif 1 <= span.line <= len(lines):
        text = lines[span.line - 1][span.col - 1:].rstrip() + " ..."
    else:
        return ""
    return re.sub(r"\s+", " ", text.strip())


class DocIndex:
    def __init__(self, text: str, filename: str, *, elaborate: bool = True, _depth: int = 0,
                 _seen: set[str] | None = None):
        self.text = text
        self.filename = filename
        self.lines = text.split("\n")
        self.symbols: list[Symbol] = []
        self.occurrences: list[Occurrence] = []
        self.attrs: list[AttrSite] = []
        self.top: list[Symbol] = []            # the outline: top-level symbols, with children
        self.exports: dict[str, Symbol] = {}  # top-level names (what a `use` of this file gives)
        self.func_vars: dict[int, list[Symbol]] = {}    # id(Func symbol) -> its pure vars
        self.loops: dict[int, dict[str, Symbol]] = {}   # id(Func symbol) -> loops named by directives
        self.used_modules: dict[str, "DocIndex"] = {}
        self.info: dict[str, str] = {}         # algorithm-level name -> what the elaborator knows
        self._depth = _depth
        self._seen = _seen if _seen is not None else {str(Path(filename).resolve())}
        self.module, self.blanked = parse_recovering(text, filename)
        self._scopes: list[dict[str, Symbol]] = [{}]
        self._func_syms: dict[str, Symbol] = {}     # algorithm Funcs by name
        self._algo_scope: dict[str, Symbol] = {}    # every name the algorithm block declares
        if self.module is not None:
            try:
                self._walk_module(self.module)
            except RecursionError:
                pass
            if elaborate:
                self._elaborate()

    # ------------------------------------------------------------------ lookups
    def occurrence_at(self, line: int, col: int) -> Occurrence | None:
        """The occurrence under 1-based (line, col), the character at col or just before it."""
        best = None
        for o in self.occurrences:
            s = o.span
            if s.file == self.filename and s.line == line and s.col <= col <= s.end_col:
                if best is None or s.col > best.span.col:   # prefer the one starting at the cursor
                    best = o
        return best

    def attr_at(self, line: int, col: int) -> AttrSite | None:
        for a in self.attrs:
            if a.span.line == line and a.span.col <= col <= a.span.end_col:
                return a
        return None

    def references(self, sym: Symbol) -> list[Occurrence]:
        return [o for o in self.occurrences if o.symbol is sym]

    def visible(self) -> dict[str, Symbol]:
        """Every top-level name (the program's and its modules') and the algorithm's names."""
        out = dict(self._scopes[0])
        out.update(self._func_syms)
        return out

    def func_symbol(self, name: str) -> Symbol | None:
        """A name of the algorithm block (a Func, an rdom, a let) or a top-level name."""
        return self._func_syms.get(name) or self._algo_scope.get(name) or self._scopes[0].get(name)

    # ------------------------------------------------------------------ building
    def _declare(self, name: str, kind: str, span: Span | None, decl: Span | None, *, detail: str = "",
                 doc: str | None = None, parent: Symbol | None = None, scope: dict | None = None) -> Symbol:
        span = span or decl
        sym = Symbol(name, kind, span, decl or span, detail, doc, parent)
        self.symbols.append(sym)
        (self._scopes[-1] if scope is None else scope)[name] = sym
        if span is not None and span.file == self.filename:
            self.occurrences.append(Occurrence(span, sym, True))
        if parent is not None:
            parent.children.append(sym)
        return sym

    def _lookup(self, name: str) -> Symbol | None:
        for scope in reversed(self._scopes):
            if name in scope:
                return scope[name]
        return None

    def _use(self, name: str, span: Span, sym: Symbol | None = None) -> Symbol | None:
        sym = sym or self._lookup(name)
        if sym is not None and span.file == self.filename:
            self.occurrences.append(Occurrence(span, sym))
        return sym

    def _walk_module(self, mod: ast.Module):
        pending = []
        for item in mod.items:
            text = _source_text(self.lines, item.span)
            if isinstance(item, ast.PipelineDecl):
                self.top.append(self._declare(item.name, "pipeline", item.name_span, item.span, detail=text))
            elif isinstance(item, (ast.BufferDecl, ast.ParamDeclNode, ast.ConstDecl, ast.FnDef)):
                if isinstance(item, ast.FnDef):
                    kind, text, inner = "fn", f"fn {item.name}({', '.join(item.params)})", None
                else:
                    kind = item.kind if isinstance(item, ast.BufferDecl) else \
                        "param" if isinstance(item, ast.ParamDeclNode) else "const"
                    inner = item.dims if isinstance(item, ast.BufferDecl) else \
                        item.default if isinstance(item, ast.ParamDeclNode) else item.value
                sym = self._declare(item.name, kind, item.name_span, item.span, detail=text,
                                    doc=doc_comment(self.lines, item.span.line))
                self.top.append(sym)
                self.exports[item.name] = sym
                if kind == "fn":
                    pending.append(lambda item=item, sym=sym: self._fn_body(item, sym))
                elif inner is not None:
                    pending.append(lambda inner=inner: self._expr(inner))
            elif isinstance(item, ast.Use):
                self._use_module(item)
            elif isinstance(item, ast.AlgorithmBlock):
                pending.append(lambda item=item: self._algorithm(item))
            elif isinstance(item, ast.ScheduleBlock):
                pending.append(lambda item=item: self._schedule(item))
        for walk in pending:
            walk()

    def _use_module(self, item: ast.Use):
        if not item.is_path and item.target == "boundary":
            return
        from hdsl.frontend.elaborate import STDLIB_DIR
        if item.is_path:
            path = (Path(item.span.file).parent / item.target).resolve()
        else:
            path = STDLIB_DIR / f"{item.target}.hl"
        key = str(path.resolve()) if path.exists() else str(path)
        if not path.is_file() or key in self._seen or self._depth >= MAX_USE_DEPTH:
            return
        self._seen.add(key)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return
        sub = DocIndex(text, str(path), elaborate=False, _depth=self._depth + 1, _seen=self._seen)
        self.used_modules[str(path)] = sub
        for name, sym in sub.exports.items():
            if sym.module is None:
                sym.module = item.target
            self._scopes[0].setdefault(name, sym)
        # the module's own uses are exported too (the elaborator defines all a library's names)
        for name, sym in sub._scopes[0].items():
            self._scopes[0].setdefault(name, sym)
        if item.target_span is not None:
            self.attrs.append(AttrSite(item.target_span, item.target, None, False))

    def _fn_body(self, fn: ast.FnDef, fsym: Symbol):
        self._scopes.append({})
        try:
            for name, span in zip(fn.params, fn.param_spans or [fn.name_span] * len(fn.params)):
                self._declare(name, "fn-param", span, span, detail=f"parameter of fn {fn.name}")
            self._block(fn.body, fsym)
        finally:
            self._scopes.pop()

    def _algorithm(self, blk: ast.AlgorithmBlock):
        self._scopes.append(self._algo_scope)
        try:
            self._block(blk.body, None, top=True)
        finally:
            self._scopes.pop()

    def _block(self, stmts: list[ast.Node], owner: Symbol | None, top: bool = False):
        for s in stmts:
            try:
                self._statement(s, owner, top)
            except RecursionError:
                pass

    def _statement(self, s: ast.Node, owner: Symbol | None, top: bool):
        text = _source_text(self.lines, s.span)
        if isinstance(s, ast.Assign):
            self._assign(s, owner, top, text)
        elif isinstance(s, ast.Let):
            self._expr(s.value)
            self._declare(s.name, "let", s.name_span, s.span, detail=text, parent=owner)
        elif isinstance(s, ast.VarDecl):
            for n, sp in zip(s.names, s.name_spans or [s.span] * len(s.names)):
                self._declare(n, "var", sp, s.span, detail=text)
        elif isinstance(s, ast.RDomDecl):
            self._expr(s.domain)
            self._declare(s.name, "rdom", s.name_span, s.span, detail=text, parent=owner)
            if s.where is not None:
                self._expr(s.where)
        elif isinstance(s, ast.For):
            self._for(s, lambda: self._block(s.body, owner, top))
        elif isinstance(s, ast.Return):
            self._expr(s.value)
        elif isinstance(s, ast.ExprStmt):
            self._expr(s.expr)

    def _for(self, s: ast.For, body):
        """A compile-time `for`: its bounds, then its body with the loop variable in scope."""
        self._expr(s.lo)
        self._expr(s.hi)
        self._scopes.append({})
        try:
            self._declare(s.var, "var", s.var_span, s.span, detail=f"for {s.var} in ... (compile time)")
            body()
        finally:
            self._scopes.pop()

    def _define_func(self, name_node: ast.Name, s: ast.Assign, owner: Symbol | None, top: bool, text: str,
                     kind: str) -> Symbol:
        existing = self._lookup(name_node.id)
        if existing is not None and existing.kind in ("func", "binding", "output", "array"):
            self._use(name_node.id, name_node.span, existing)
            return existing
        where = self._scopes[-1] if not top else self._algo_scope
        sym = self._declare(name_node.id, kind, name_node.span, s.span, detail=text, parent=owner, scope=where)
        if top and owner is None:
            self._func_syms[name_node.id] = sym
        return sym

    def _assign(self, s: ast.Assign, owner: Symbol | None, top: bool, text: str):
        target = s.target
        if isinstance(target, ast.Call):
            fn_node = target.func
            fsym = None
            if isinstance(fn_node, ast.Name):
                fsym = self._define_func(fn_node, s, owner, top, text, "func")
            else:
                self._expr(fn_node)
            pure: dict[str, Symbol] = {}
            vars_ = []
            for a in target.args:
                if isinstance(a, ast.Name):
                    known = self._lookup(a.id)
                    if known is not None and known.kind == "var":
                        self._use(a.id, a.span, known)
                        vars_.append(known)
                    elif known is None:
                        v = Symbol(a.id, "var", a.span, a.span,
                                   detail=f"pure var of {fsym.name if fsym else 'this definition'}")
                        self.symbols.append(v)
                        self.occurrences.append(Occurrence(a.span, v, True))
                        pure[a.id] = v
                        vars_.append(v)
                    else:
                        self._use(a.id, a.span, known)
                else:
                    self._expr(a)
            if fsym is not None and vars_ and id(fsym) not in self.func_vars and s.op == "=" \
                    and len(vars_) == len(target.args):
                self.func_vars[id(fsym)] = vars_
            self._scopes.append(pure)
            try:
                self._expr(s.value)
            finally:
                self._scopes.pop()
        elif isinstance(target, ast.Name):
            self._expr(s.value)
            self._define_func(target, s, owner, top, text, "binding")
        elif isinstance(target, ast.Index):
            self._expr(target.index)
            self._expr(s.value)
            if isinstance(target.obj, ast.Name):
                self._define_func(target.obj, s, owner, top, text, "array")
        else:
            self._expr(target)
            self._expr(s.value)

    def _expr(self, node: ast.Node | None, in_schedule: bool = False):
        if node is None:
            return
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Name):
                self._use(n.id, n.span)
            elif isinstance(n, ast.Attr):
                base = n.obj
                while isinstance(base, (ast.Attr, ast.Call, ast.Index)):
                    base = base.obj if isinstance(base, (ast.Attr, ast.Index)) else base.func
                if n.name_span is not None:
                    self.attrs.append(AttrSite(n.name_span, n.name, base.id if isinstance(base, ast.Name)
                                               else None, in_schedule))
                stack.append(n.obj)
            elif isinstance(n, ast.Node):
                for fname in n.__dataclass_fields__:
                    if fname == "span" or fname.endswith("_span") or fname.endswith("_spans"):
                        continue
                    child = getattr(n, fname)
                    if isinstance(child, ast.Node):
                        stack.append(child)
                    elif isinstance(child, list):
                        stack.extend(c for c in reversed(child) if isinstance(c, ast.Node))

    # ------------------------------------------------------------------ schedules
    def _schedule(self, blk: ast.ScheduleBlock):
        if blk.name is not None:
            self.top.append(self._declare(blk.name, "schedule", blk.name_span, blk.span,
                                          detail=f"schedule {blk.name}", scope={}))
        self._scopes.append(self._algo_scope)
        try:
            self._sched_block(blk.body or [])
        finally:
            self._scopes.pop()

    def _sched_block(self, stmts: list[ast.Node]):
        for s in stmts:
            if isinstance(s, ast.For):
                self._for(s, lambda: self._sched_block(s.body))
            elif isinstance(s, ast.ExprStmt):
                self._chain(s.expr)
            else:
                for n in [s]:
                    self._expr(n, in_schedule=True)

    def _chain(self, e: ast.Node):
        """`f.d1(...).d2(...)`: f is a Func; each directive's arguments name loops of f (or new ones)."""
        calls = []
        while isinstance(e, ast.Call) and isinstance(e.func, ast.Attr):
            calls.append(e)
            e = e.func.obj
        calls.reverse()
        # the scheduled Func: a name, an array element gp[j], or a fn's local b.gauss_x
        base = e
        while isinstance(base, (ast.Attr, ast.Index)):
            if isinstance(base, ast.Index):
                self._expr(base.index)
            if isinstance(base, ast.Attr) and base.name_span is not None:
                self.attrs.append(AttrSite(base.name_span, base.name, None, True))
            base = base.obj
        fsym = self._use(base.id, base.span) if isinstance(base, ast.Name) else None
        if not isinstance(base, ast.Name):
            self._expr(base)
        target = fsym if e is base else None          # loops of a fn's local Func are not tracked
        for call in calls:
            name = call.func.name
            if call.func.name_span is not None:
                self.attrs.append(AttrSite(call.func.name_span, name, fsym.name if fsym else None, True))
            kinds = arg_kinds(name, len(call.args))
            consumer = None
            for k, a in zip(kinds, call.args):
                if isinstance(a, ast.Name) and k == "func":
                    consumer = self._use(a.id, a.span)
                elif isinstance(a, ast.Name) and k == "var_of":
                    self._loop_use(consumer, a)
                elif isinstance(a, ast.Name) and k in LOOP_KINDS:
                    self._loop_use(target, a)
                elif isinstance(a, ast.Name) and k == NEW_KIND:
                    if target is None:
                        continue
                    loops = self.loops.setdefault(id(target), {})
                    if a.id in loops:
                        self.occurrences.append(Occurrence(a.span, loops[a.id]))
                    elif self._var_of(target, a.id) is not None:
                        self.occurrences.append(Occurrence(a.span, self._var_of(target, a.id)))
                    else:
                        sym = Symbol(a.id, "loop", a.span, call.span,
                                     detail=f"loop of {target.name}, made by {name}")
                        self.symbols.append(sym)
                        self.occurrences.append(Occurrence(a.span, sym, True))
                        loops[a.id] = sym
                else:
                    self._expr(a, in_schedule=True)
            if target is not None and name in ("vectorize", "unroll", "parallel", "split") \
                    and call.args and isinstance(call.args[0], ast.Name):
                inner = f"{call.args[0].id}_i"
                if name != "split" and len(call.args) >= 2:
                    self.loops.setdefault(id(target), {}).setdefault(
                        inner, Symbol(inner, "loop", call.span, call.span,
                                      detail=f"loop of {target.name}, made by {name}"))

    def _var_of(self, fsym: Symbol | None, name: str) -> Symbol | None:
        if fsym is None:
            return None
        for v in self.func_vars.get(id(fsym), []):
            if v.name == name:
                return v
        return None

    def _loop_use(self, fsym: Symbol | None, a: ast.Name):
        sym = None
        if fsym is not None:
            sym = self.loops.get(id(fsym), {}).get(a.id) or self._var_of(fsym, a.id)
        if sym is None:
            looked = self._lookup(a.id)
            sym = looked if looked is not None and looked.kind == "var" else None
        if sym is not None:
            self.occurrences.append(Occurrence(a.span, sym))

    def loop_names(self, fsym: Symbol | None) -> list[str]:
        """The pure vars of a Func and the loops its directives made, in order of appearance."""
        if fsym is None:
            return []
        names = [v.name for v in self.func_vars.get(id(fsym), [])]
        names += [n for n in self.loops.get(id(fsym), {}) if n not in names]
        return names

    # ------------------------------------------------------------------ types
    def _elaborate(self):
        """What the elaborator knows of each algorithm-level name, even when it reports errors."""
        from hdsl.frontend.elaborate import Elaborator
        from hdsl.frontend.values import ArrayVal, ExprVal, FuncVal, InputVal, RDomVal
        el = Elaborator(self.filename)
        el.texts.append(self.text)
        try:
            el.module(self.module)
        except (HdslError, RecursionError):
            pass
        except Exception:      # an editor must not fail on what the compiler would report
            return
        scope = el.algorithm_scope
        if scope is None:
            return
        for name, v in scope.names.items():
            if isinstance(v, FuncVal):
                self.info[name] = describe_func(v.func)
            elif isinstance(v, ExprVal):
                self.info[name] = f"{v.expr.type}"
            elif isinstance(v, RDomVal):
                self.info[name] = f"rdom of {len(v.rdom.bounds)} dimension{'s' if len(v.rdom.bounds) != 1 else ''}"
            elif isinstance(v, ArrayVal):
                funcs = [e.func for _, e in sorted(v.elems.items()) if isinstance(e, FuncVal)]
                self.info[name] = f"array of {len(v.elems)} Funcs" + (
                    f"; {name}[{min(v.elems)}]: {describe_func(funcs[0])}" if funcs else "")
            elif isinstance(v, InputVal):
                self.info[name] = f"input, {v.buffer.type}, {v.buffer.dims}-D"


def describe_func(f) -> str:
    types = ", ".join(str(t) for t in f.types) if f.types else "?"
    if len(f.types) > 1:
        types = f"({types})"
    args = ", ".join(f.args)
    ups = len(getattr(f, "updates", []) or [])
    text = f"Func {f.name}({args}): {types}, {f.dims}-D"
    if ups:
        text += f", {ups} update definition{'s' if ups != 1 else ''}"
    return text

