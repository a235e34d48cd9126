"""Schedule blocks → validated `Directive` lists.

A schedule never changes a result, so every check here is about whether the
directive makes sense: the Func and vars exist, arities and argument kinds
match, `compute_at` names a consumer, reductions are not raced.
The compiler executes what is recorded; the reference evaluator ignores it
(but for `bound`, whose region it honours). A Func's storage must enclose its
computation; GPU directives are refused on the CPU (`refuse_unsupported`).
A `schedule auto { ... }` block holds only `estimate` directives: the sizes the
automatic scheduler (hdsl/schedule/auto.py) plans for.
"""
from __future__ import annotations

import re

from hdsl.diagnostics import Diagnostic, HdslError, Span, did_you_mean
from hdsl.frontend import ast
from hdsl.frontend.errors import Poisoned
from hdsl.frontend.values import FuncVal, Scope
from hdsl.ir.expr import Const, FuncCall, RVar, Var, intern, walk
from hdsl.ir.func import Directive, Func, Schedule, callees, inner_loop_name, pure_positions, tile_parts
from hdsl.ir.ops import fold_const_int
from hdsl.ir.types import I32

I32_MAX = 2 ** 31 - 1

# argument kinds: var (an existing loop var), new (a fresh name), int (compile-time),
# func (a Func), rvar (r.x), expr (compile-time int or param); '*' repeats the last kind
SIGNATURES: dict[str, list[list[str]]] = {
    "compute_root": [[]], "compute_inline": [[]], "store_root": [[]], "memoize": [[]], "store_nontemporal": [[]],
    "compute_at": [["func", "var_of"]], "store_at": [["func", "var_of"]],
    "split": [["var", "new", "new", "int"]],
    "fuse": [["var", "var", "new"]],
    "reorder": [["var", "var", "*"]],
    "tile": [["var", "var", "new", "new", "int", "int"],
             ["var", "var", "new", "new", "new", "new", "int", "int"]],
    "vectorize": [["var"], ["var", "int"]],
    "unroll": [["var"], ["var", "int"]],
    "parallel": [["var"], ["var", "int"]],
    "bound": [["dim", "expr", "expr"]],
    "estimate": [["dim", "expr", "expr"]],
    "reorder_storage": [["dim", "dim", "*"]],
    "gpu_blocks": [["var"], ["var", "var"], ["var", "var", "var"]],
    "gpu_threads": [["var"], ["var", "var"], ["var", "var", "var"]],
    "gpu_tile": [["var", "new", "int"], ["var", "var", "new", "new", "int", "int"],
                 ["var", "var", "new", "new", "new", "new", "int", "int"],
                 ["var", "var", "var", "new", "new", "new", "int", "int", "int"],
                 ["var", "var", "var", "new", "new", "new", "new", "new", "new", "int", "int", "int"]],
    "update": [["int"]],
    "rfactor": [["rvar", "new"]],
    "tile_iir": [["dim", "int"], ["dim", "dim", "int", "int"]],
    "fold_storage": [["dim", "int"]],
    "glsl": [["var", "var"], ["var", "var", "var"]],
}
USAGE = {
    "compute_root": "compute_root()", "compute_inline": "compute_inline()", "store_root": "store_root()",
    "memoize": "memoize()", "store_nontemporal": "store_nontemporal()", "compute_at": "compute_at(consumer, var)", "store_at": "store_at(consumer, var)",
    "split": "split(v, vo, vi, factor)", "fuse": "fuse(a, b, ab)", "reorder": "reorder(v1, v2, ...)",
    "tile": "tile(x, y, xi, yi, w, h) or tile(x, y, xo, yo, xi, yi, w, h)",
    "vectorize": "vectorize(v) or vectorize(v, n)", "unroll": "unroll(v) or unroll(v, n)",
    "parallel": "parallel(v) or parallel(v, n)", "bound": "bound(v, min, extent)",
    "estimate": "estimate(v, min, extent)", "reorder_storage": "reorder_storage(v1, v2, ...)",
    "gpu_blocks": "gpu_blocks(x), gpu_blocks(x, y) or gpu_blocks(x, y, z)",
    "gpu_threads": "gpu_threads(x), gpu_threads(x, y) or gpu_threads(x, y, z)",
    "gpu_tile": "gpu_tile(x, xi, n), gpu_tile(x, y, xi, yi, w, h), gpu_tile(x, y, xo, yo, xi, yi, w, h), "
                "gpu_tile(x, y, z, xi, yi, zi, w, h, d) or gpu_tile(x, y, z, xo, yo, zo, xi, yi, zi, w, h, d)",
    "update": "update(i)", "rfactor": "rfactor(r.x, u)", "tile_iir": "tile_iir(v, n) or tile_iir(x, y, nx, ny)",
    "fold_storage": "fold_storage(v, n)",
    "glsl": "glsl(x, y, c) or glsl(x, y)",
}
# a split's optional last argument: how its last, partial tile is computed (Halide's
# TailStrategy; without one, Halide's Auto: shift_inwards for pure definitions, guard_with_if
# for updates and, when narrower than a tile, outputs)
TAILS = ("round_up", "guard_with_if", "shift_inwards")
TAILED = {"split", "tile", "gpu_tile", "vectorize", "unroll", "parallel"}
PURE_ONLY = {"compute_root", "compute_inline", "store_root", "compute_at", "store_at", "memoize", "store_nontemporal",
             "reorder_storage", "bound", "estimate", "tile_iir", "fold_storage", "glsl"}
# the Funcs tile_iir makes of filter update(k) of f, named f.<stage>k (lower/tile_iir.py)
TILE_STAGE = r"(weights|intra|last|tail|final|tiled)(\d+)"
# the Funcs tile_iir(a, b, na, nb) makes that a schedule may name (lower/tile_iir2d.py)
TILE_STAGE_2D = r"(intra|final)_\w+|edges"

RACY = {"parallel", "vectorize", "gpu_blocks", "gpu_threads", "gpu_tile"}


class _State:
    """Loop vars of one stage, innermost first, as directives reshape them."""

    def __init__(self, f: Func, stage: int):
        self.f, self.stage = f, stage
        self.alias: dict[str, str] = {}
        if stage < 0:
            self.vars = list(f.args)
            self.rvars: set[str] = set()
        else:
            u = f.updates[stage]
            pure = [a for _, a in pure_positions(f, u)]
            rv = [RVar(u.rdom, i).name for i in range(len(u.rdom.bounds))] if u.rdom else []
            self.vars = rv + pure
            self.rvars = set(rv)
            # a filter's scan loop (`.iir(+x, ...)`) is named by the var it runs along (u.iir,
            # not the rdom's name: a Func made in a fn is renamed after its rdom was named)
            if u.rdom is not None and u.iir is not None:
                for d, a in enumerate(u.args):
                    if not isinstance(a, Var) and d < len(f.args):
                        self.alias[f.args[d]] = rv[0]
        # the reduction variables each loop runs over (a split of r.x runs over r.x)
        self.origin: dict[str, frozenset] = {r: frozenset({r}) for r in self.rvars}
        # the points one iteration of each loop steps over (split factors multiplied): at
        # most 2^31 - 1, as loop indices are i32
        self.step: dict[str, int] = {}
        self.shown = {r: a for a, r in self.alias.items()}

    def derive(self, old: str, *new: str, origins: tuple = ()):
        """Loops `new` made from `old` (and `origins`) run over the same reduction variables."""
        rv = frozenset().union(*(self.origin.get(o, frozenset()) for o in (origins or (old,))))
        for n in new:
            if rv:
                self.origin[n] = rv
            else:
                self.origin.pop(n, None)

    def display(self) -> str:
        return ", ".join(self.shown.get(v, v) for v in self.vars)


def record_schedules(el, blocks: list[ast.ScheduleBlock], scope: Scope, outputs: list[Func]):
    schedules: dict[str | None, Schedule] = {}
    first: dict[str | None, ast.ScheduleBlock] = {}
    for blk in blocks:
        if blk.name in schedules:
            what = f"schedule '{blk.name}'" if blk.name else "the default schedule"
            el.sink.error(f"{what} is defined twice", blk.name_span or blk.span,
                          "give each schedule block its own name, or merge the two",
                          [("the first definition is here", first[blk.name].name_span or first[blk.name].span)])
            continue
        first[blk.name] = blk
        sched = Schedule(blk.name, span=blk.span, auto=(blk.name == "auto"))
        schedules[blk.name] = sched
        if blk.body is None:
            if blk.name != "auto":
                el.sink.error("a schedule needs a block: schedule NAME { ... }", blk.name_span or blk.span)
            continue
        rec = _Recorder(el, sched, outputs)
        rec.block(blk.body, Scope(scope, block=False))
        rec.finish()
        if sched.auto:
            for ds in sched.directives.values():
                for d in ds:
                    if d.name != "estimate":
                        el.sink.error(f"'schedule auto' holds only estimate(...) directives, not '{d.name}'",
                                      d.span, "the automatic scheduler decides the rest; to start from its "
                                      "schedule and edit it, print it with `hdsl schedule FILE --schedule auto` "
                                      "and paste it into a named block")
    return schedules


class _Recorder:
    def __init__(self, el, sched: Schedule, outputs: list[Func]):
        self.el, self.sched, self.outputs = el, sched, outputs
        self.states: dict[tuple[int, int], _State] = {}
        self.pending: list[tuple[Func, Directive, ast.Call]] = []
        self.tile_stages: dict[tuple[int, int], dict[str, Func]] = {}

    def state(self, f: Func, stage: int) -> _State:
        key = (id(f), stage)
        if key not in self.states:
            self.states[key] = _State(f, stage)
        return self.states[key]

    def block(self, stmts, scope):
        from hdsl.frontend.errors import ElabError
        for s in stmts:
            try:
                if isinstance(s, ast.For):
                    lo = self.el.const_int(s.lo, scope)
                    hi = self.el.const_int(s.hi, scope)
                    for j in range(lo, hi):
                        inner = Scope(scope, block=False)
                        from hdsl.frontend.values import ExprVal
                        from hdsl.ir.expr import Const
                        inner.names[s.var] = ExprVal(Const(I32, j, literal=True))
                        self.block(s.body, inner)
                elif isinstance(s, ast.ExprStmt):
                    self.chain(s.expr, scope)
                else:
                    self.el.error("a schedule holds directives such as f.compute_root() and 'for' loops",
                                  s.span, "definitions belong in the algorithm block")
            except ElabError as e:
                self.el.report(e)

    def chain(self, node, scope):
        calls = []
        while isinstance(node, ast.Call) and isinstance(node.func, ast.Attr):
            calls.append(node)
            node = node.func.obj
            if isinstance(node, ast.Attr) and not isinstance(node, ast.Call):
                # gp[3].dx: a Func's local, not a directive
                break
        if not calls:
            self.el.error("expected a directive such as f.compute_root()", node.span)
        calls.reverse()
        f = self._func(node, scope)
        stage = -1
        for call in calls:
            name = call.func.name
            if name == "update":
                args = self.args(f, stage, call, scope)
                i = args[0]
                if not 0 <= i < len(f.updates) and id(f) in self.el.broken:
                    raise Poisoned()     # the missing update may be the one whose definition had an error
                if not 0 <= i < len(f.updates):
                    k = len(f.updates)
                    self.el.error(f"'{f.name}' has {k} update definition{'s' if k != 1 else ''}; "
                                  f"there is no update({i})", call.args[0].span,
                                  "update definitions are numbered from 0 in the order written"
                                  + ("; this one is update(0)" if k == 1 else
                                     f"; they are update(0) to update({k - 1})" if k > 1 else
                                     f"; '{f.name}' has only its pure definition"))
                stage = i
                continue
            if stage >= 0 and name in PURE_ONLY:
                self.el.error(f"'{name}' applies to the whole Func, not to one update", call.func.name_span,
                              f"write {f.name}.{USAGE[name]} without update(...)")
            call, tail = self._tail(f, stage, name, call)
            args = self.args(f, stage, call, scope)
            if tail is not None and isinstance(args[-1], str):
                self.el.error(f"{name}({args[0]}) does not split, so it takes no tail strategy", tail[1],
                              f"give a factor first: {name}({args[0]}, 8, {tail[0]})")
            if stand_in(f) and name in ("reorder_storage", "tile_iir", "rfactor", "memoize", "compute_inline", "fold_storage"):
                self.el.error(f"'{name}' does not apply to '{f.name}', a stage of tile_iir", call.func.name_span,
                              "its stages take loop directives (split, reorder, vectorize, parallel, ...) "
                              "and compute_at/compute_root")
            self.apply(f, stage, name, args, call)
            self.sched.add(f, Directive(name, args, call.span, stage, tail[0] if tail else None))
            if name == "rfactor":
                rest = calls[calls.index(call) + 1:]
                if rest:
                    self.el.error("directives chained after rfactor(...) are not supported yet", rest[0].func.name_span,
                                  "the intermediate is computed at the root with its new var's loops parallel; "
                                  "end the chain at rfactor(...)")
                break

    def _tail(self, f, stage, name, call):
        """`split(x, xo, xi, 8, round_up)`: the call without its tail strategy, and the
        strategy with its span (or None)."""
        if name not in TAILED or len(call.args) < 2 or not isinstance(call.args[-1], ast.Name):
            return call, None
        last = call.args[-1]
        longest = max(len(s) for s in SIGNATURES[name])
        if last.id not in TAILS:
            if len(call.args) > longest:
                guess = did_you_mean(last.id, TAILS)
                self.el.error(f"'{last.id}' is not a tail strategy" + (f"; did you mean '{guess}'?" if guess else ""),
                              last.span, "a split's last argument may be " + ", ".join(TAILS))
            return call, None
        if stage >= 0 and last.id != "guard_with_if":
            # Halide: "Can't use TailStrategy::RoundUp for splitting ... in update definition"
            # (an update's points computed twice would be updated twice)
            self.el.error(f"{last.id} would compute some points of update({stage}) of '{f.name}' twice, "
                          "changing its result", last.span, "use guard_with_if (the default for updates)")
        return ast.Call(call.span, call.func, call.args[:-1]), (last.id, last.span)

    def _func(self, node, scope) -> Func:
        from hdsl.frontend.elaborate import DefContext
        if isinstance(node, ast.Attr) and re.fullmatch(TILE_STAGE, node.name):
            base = self.el.value(node.obj, scope, DefContext(None, None))
            if isinstance(base, FuncVal) and node.name not in base.func.locals:
                return self._tile_stage(base.func, node)
        if isinstance(node, ast.Attr) and re.fullmatch(TILE_STAGE_2D, node.name):
            base = self.el.value(node.obj, scope, DefContext(None, None))
            if isinstance(base, FuncVal) and node.name not in base.func.locals:
                return self._tile_stage_2d(base.func, node)
        if isinstance(node, ast.Name) and scope.lookup(node.id) is None:
            names = [n for n in scope.all_names() if isinstance(scope.lookup(n), FuncVal)]
            guess = did_you_mean(node.id, names)
            self.el.error(f"'{node.id}' is not a Func" + (f"; did you mean '{guess}'?" if guess else ""), node.span,
                          None if guess else "the Funcs are " + ", ".join(sorted(names)))
        v = self.el.value(node, scope, DefContext(None, None))
        if not isinstance(v, FuncVal):
            self.el.error(f"{self.el.named(node, v)}; only Funcs can be scheduled", node.span,
                          "schedules name Funcs defined in the algorithm")
        return v.func

    def _tile_stage(self, f: Func, node) -> Func:
        """`rf.final2`: a stage that tile_iir makes of filter update(2) of rf, as a stand-in
        Func of the same shape (its directives replace the stage's defaults when lowered)."""
        from hdsl.lower.tile_iir import stage_funcs
        m = re.fullmatch(TILE_STAGE, node.name)
        kind, k = m.group(1), int(m.group(2))
        filters = [i for i, u in enumerate(f.updates) if u.iir is not None]
        if k not in filters:
            self.el.error(f"'{f.name}' has no recursive filter update({k}), so no stage '{node.name}'",
                          node.name_span, f"its filters are update({'), update('.join(map(str, filters))})"
                          if filters else f"'{f.name}' has no .iir filter")
        dim = f.args[f.updates[k].iir[0]]
        if not any(d.name == "tile_iir" and d.args[0] == dim for d in self.sched.for_func(f)):
            self.el.error(f"'{f.name}.{node.name}' is a stage of {f.name}.tile_iir({dim}, n), which this schedule "
                          "has not given (yet)", node.name_span,
                          f"write {f.name}.tile_iir({dim}, n) before scheduling its stages")
        key = (id(f), k)
        if key not in self.tile_stages:
            self.tile_stages[key] = {g.name.rsplit(".", 1)[1]: g for g in stage_funcs(f, k)}
        return self.tile_stages[key][node.name]

    def _tile_stage_2d(self, f: Func, node) -> Func:
        """`rf.final_y`: a stage of rf.tile_iir(x, y, nx, ny), as a stand-in Func."""
        from hdsl.lower.tile_iir2d import stage_funcs_2d
        d = next((d for d in self.sched.for_func(f) if d.name == "tile_iir" and len(d.args) == 4), None)
        if d is None:
            self.el.error(f"'{f.name}.{node.name}' is a stage of {f.name}.tile_iir(x, y, nx, ny), which this "
                          "schedule has not given (yet)", node.name_span,
                          f"write {f.name}.tile_iir(x, y, nx, ny) before scheduling its stages")
        key = (id(f), "2d")
        if key not in self.tile_stages:
            self.tile_stages[key] = {g.name.rsplit(".", 1)[1]: g for g in stage_funcs_2d(f, d)}
        stages = self.tile_stages[key]
        if node.name not in stages:
            self.el.error(f"tile_iir({', '.join(map(str, d.args))}) makes no stage '{node.name}' of '{f.name}'",
                          node.name_span, "its stages: " + ", ".join(f"{f.name}.{n}" for n in stages))
        return stages[node.name]

    def args(self, f, stage, call, scope):
        name = call.func.name
        sigs = SIGNATURES.get(name)
        if sigs is None:
            guess = did_you_mean(name, SIGNATURES)
            self.el.error(f"unknown scheduling directive '{name}'" + (f"; did you mean '{guess}'?" if guess else ""),
                          call.func.name_span, None if guess else "directives: " + ", ".join(sorted(SIGNATURES)))
        n = len(call.args)
        sig = None
        for s in sigs:
            if len(s) == n or (s and s[-1] == "*" and n >= len(s) - 1):
                sig = s
                break
        if sig is None:
            counts = sorted({len(s) for s in sigs})
            self.el.error(f"'{name}' takes {' or '.join(map(str, counts))} argument"
                          f"{'s' if counts != [1] else ''}, given {n}", directive_span(call),
                          f"write {USAGE[name]}")
        out = []
        st = self.state(f, stage) if name != "update" else None
        # a split's outer loop may keep the old loop's name, split(x, x, xi, 8) (Halide's too):
        # position -> the position of the loop it splits
        outer_of = {1: 0} if name == "split" else {2: 0, 3: 1} if name in ("tile", "gpu_tile") and n == 8 else \
            {3: 0, 4: 1, 5: 2} if name == "gpu_tile" and n == 12 else {}
        for i, a in enumerate(call.args):
            kind = sig[i] if i < len(sig) and sig[i] != "*" else sig[-2]
            keeps = out[outer_of[i]] if i in outer_of else None
            out.append(self.arg(kind, a, st, f, scope, out, keeps))
        return out

    def _var_name(self, a) -> str | None:
        if isinstance(a, ast.Name):
            return a.id
        if isinstance(a, ast.Attr) and isinstance(a.obj, ast.Name) and len(a.name) == 1:
            return f"{a.obj.id}.{a.name}"
        return None

    def arg(self, kind, a, st, f, scope, previous, keeps=None):
        el = self.el
        if kind == "int":
            v = el.const_int(a, scope)
            if v <= 0 and st is not None:
                el.error(f"this factor must be positive, not {v}", a.span)
            if v > I32_MAX:
                # loop extents and indices are i32 (as in Halide)
                el.error(f"this number must be at most {I32_MAX} (2^31 - 1), not {v}", a.span)
            return v
        if kind == "expr":
            from hdsl.frontend.elaborate import DefContext
            e = el.expr(a, scope, DefContext(None, []))
            if not (e.type.is_int() or e.type.is_uint()):
                el.error(f"this must be an integer, not {e.type}", a.span)
            fits = e.type.bits < 32 or (e.type.is_int() and e.type.bits == 32)
            if not fits:
                # a bound is an i32 loop bound (Halide's Func::bound takes Int(32) Exprs)
                v = fold_const_int(e)
                if v is None:
                    el.error(f"this must be an i32, not {e.type}", a.span, "cast it: i32(...)")
                if not I32.can_represent(v):
                    el.error(f"this must fit in i32 ({-I32_MAX - 1} .. {I32_MAX}), not {v}", a.span)
                return Const(I32, v)
            return e
        if kind == "func":
            return self._func(a, scope)
        name = self._var_name(a)
        if name is None:
            el.error("expected a loop variable name here", a.span)
        if st is not None and kind in ("var", "rvar"):
            name = st.alias.get(name, name)
        if kind == "var":
            if name not in st.vars:
                guess = did_you_mean(name, [st.shown.get(v, v) for v in st.vars])
                el.error(f"'{name}' is not a loop of '{f.name}'" + ("" if st.stage < 0 else f".update({st.stage})")
                         + (f"; did you mean '{guess}'?" if guess else ""), a.span,
                         f"its loops are {st.display()} (innermost first)")
            return name
        if kind == "dim":        # a dimension of the Func (not a loop: splits do not rename it)
            if name not in f.args:
                el.error(f"'{name}' is not a dimension of '{f.name}'", a.span,
                         f"its dimensions are {', '.join(f.args)}")
            return name
        if kind == "rvar":
            if name not in st.rvars and (len(st.origin.get(name, ())) != 1 or name not in st.vars):
                el.error(f"'{name}' is not a reduction variable of this update", a.span,
                         f"its loops are {st.display()} (innermost first)")
            return name
        if kind == "new":
            if (name in st.vars or name in st.alias) and name != keeps:
                el.error(f"'{name}' is already a loop of '{f.name}'", a.span, "choose a new name")
            if name in previous and name != keeps:
                el.error(f"'{name}' is named twice", a.span)
            return name
        if kind == "var_of":
            return name       # checked once every directive of the block is known
        raise AssertionError(kind)

    def apply(self, f, stage, name, args, call):
        st = self.state(f, stage)
        v = st.vars
        el = self.el

        def at(i):      # the span of argument i
            return call.args[i].span

        def stepped(old, outer, inner, factor, k):
            # the outer loop of a split steps `factor` times its loop's step
            step = st.step.get(old, 1)
            if isinstance(factor, int) and step * factor > I32_MAX:
                el.error(f"splitting '{old}' by {factor} makes each iteration of '{outer}' step over "
                         f"{step * factor} points, more than {I32_MAX} (2^31 - 1; loop indices are i32)",
                         at(k), f"'{old}' already steps over {step} points: use a smaller factor")
            st.step[inner] = step
            st.step[outer] = step * factor if isinstance(factor, int) else step

        if name == "split":
            stepped(args[0], args[1], args[2], args[3], 3)
            i = v.index(args[0])
            v[i:i + 1] = [args[2], args[1]]
            st.derive(args[0], args[1], args[2])
        elif name == "fuse":
            a, b, ab = args
            if a == b:
                el.error("fuse needs two different loops", at(1))
            v.remove(b)
            v[v.index(a)] = ab
            st.step[ab] = st.step.get(a, 1)
            st.derive(a, ab, origins=(a, b))
        elif name in ("tile", "gpu_tile") and len(args) >= 6:
            parts = tile_parts(args)
            loops = [p[0] for p in parts]
            for k, x in enumerate(loops):
                if x in loops[:k]:
                    el.error(f"{name} needs {len(loops)} different loops", at(k))
            for k, (old, outer, inner, factor) in enumerate(parts):
                stepped(old, outer, inner, factor, len(args) - len(parts) + k)
                i = v.index(old)
                v[i:i + 1] = [inner, outer]
                st.derive(old, inner, outer)
            self._reorder(st, [p[2] for p in parts] + [p[1] for p in parts], call)
        elif name == "gpu_tile":
            i = v.index(args[0])
            v[i:i + 1] = [args[1], args[0]]
            st.derive(args[0], args[1])
        elif name in ("vectorize", "unroll", "parallel") and len(args) == 2:
            inner = inner_loop_name(args[0], v)
            stepped(args[0], args[0], inner, args[1], 1)
            i = v.index(args[0])
            v[i:i + 1] = [inner, args[0]]
            st.derive(args[0], inner)
        elif name in ("reorder", "reorder_storage"):
            what = "loop" if name == "reorder" else "dimension"
            for k, a in enumerate(args):
                if a in args[:k]:
                    el.error(f"{name} names the {what} '{a}' twice", at(k))
            if name == "reorder":
                self._reorder(st, args, call)
        elif name in ("compute_at", "store_at"):
            if f in self.outputs:
                el.error(f"output '{f.name}' is computed at the root; it cannot be computed inside another Func",
                         call.func.name_span, "remove this directive; outputs are always computed at the root")
            g = args[0]
            if (g is f or not _consumes(g, f)) and id(g) not in el.broken and not stand_in(f) and not stand_in(g):
                users = [h.name for h in self._users(f)]
                el.error(f"'{g.name}' does not use '{f.name}', so '{f.name}' cannot be computed inside it",
                         at(0), f"{name} names a Func that reads '{f.name}': "
                         + (", ".join(users) if users else "none does"))
            self.pending.append((f, Directive(name, args, call.span, stage), call))
        elif name == "glsl":
            # OpenGL's fragment path (hdsl/codegen/glsl.py): a fragment per (x, y) of the Func's
            # own dims, its channels c (the innermost loop) in one RGBA texel
            for k, a in enumerate(args):
                if a not in f.args:
                    el.error(f"glsl() takes the dims of '{f.name}' ({', '.join(f.args)}), not the loop '{a}'",
                             at(k), "write glsl(x, y, c) before any split of those dims")
            if len(set(args)) != len(args):
                el.error("glsl() names a dim twice", call.func.name_span, f"write {USAGE[name]}")
            if f.updates:
                scatter = [i for i, u in enumerate(f.updates)
                           if not all(isinstance(u.args[f.args.index(a)], Var) and u.args[f.args.index(a)].name == a
                                      for a in args[:2])]
                el.error(f"the fragment path renders one value per fragment, but '{f.name}' has update "
                         "definitions" + (f" (update({scatter[0]}) writes other points than its own (x, y): a "
                                          "reduction scattered across fragments)" if scatter else ""),
                         call.func.name_span, f"compute '{f.name}' with gpu_tile(...) (the compute path), "
                         "which runs updates, or on the CPU")
            if len(args) == 3 and all(a in v for a in args):
                self._reorder(st, [args[2], args[0], args[1]], call)
        elif name == "tile_iir":
            # the rdom is named '<name>.iir<k>' after the Func's name when .iir ran, which a
            # Func made in a fn no longer has (it is renamed when bound: 'g.yvv_u')
            if not any(u.rdom is not None and re.search(r"\.iir\d+$", u.rdom.name) for u in f.updates):
                el.error(f"'{f.name}' has no recursive filter (.iir)", call.func.name_span,
                         f"add one in the algorithm, e.g. {f.name}.iir(+x, 0..img.width, b0, [a1])")
        if name in RACY and stage >= 0:
            u = f.updates[stage]
            for k, a in enumerate(args):
                if not isinstance(a, str) or not st.origin.get(a):
                    continue
                racy = sorted(r for r in st.origin[a] if not race_free(f, u, r))
                if racy:
                    what = f"reduction variable '{a}'" if a in st.rvars else \
                        f"'{a}' (a loop over reduction variable{'s' if len(racy) > 1 else ''} {', '.join(racy)})"
                    if _is_scan(f, stage):
                        hint = (f"update({stage}) reads '{f.name}' at other points than it writes, so its "
                                f"iterations must run in order; {name} a pure var's loop instead")
                    else:
                        hint = (f"factor the reduction first: rfactor({racy[0]}, u) computes partial results "
                                f"over u in parallel (a reduction variable's loop may be "
                                f"{'run in parallel' if name == 'parallel' else 'vectorized' if name == 'vectorize' else 'mapped to the GPU'} only when it "
                                f"is a coordinate of the left-hand side that every read of '{f.name}' shares: "
                                f"{f.name}({racy[0]}) = {f.name}({racy[0]}) * 2)")
                    el.error(f"'{name}' of {what} would let its iterations race: different values of "
                             f"{racy[0]} may update the same point of '{f.name}'", at(k), hint)

    def _users(self, f: Func) -> list[Func]:
        from hdsl.ir.func import topo_order
        return [h for h in topo_order(self.outputs) if h is not f and f in callees(h)]

    def _reorder(self, st: _State, names: list[str], call):
        positions = sorted(st.vars.index(n) for n in names)
        if st.stage >= 0 and _is_scan(st.f, st.stage):
            # (loops split or fused from reduction variables count as theirs)
            rv_old = [x for x in st.vars if st.origin.get(x)]
            new = list(st.vars)
            for p, n in zip(positions, names):
                new[p] = n
            rv_new = [x for x in new if st.origin.get(x)]
            if rv_old != rv_new:
                self.el.error("reordering the reduction variables of this update would change its result",
                              directive_span(call),
                              f"update({st.stage}) of '{st.f.name}' reads values that earlier iterations write, "
                              f"so its reduction variables run in the order written ({', '.join(rv_old)}, "
                              "innermost first)")
        for p, n in zip(positions, names):
            st.vars[p] = n

    def finish(self):
        bad = set()
        for f, d, call in self.pending:
            g, var = d.args
            # as Halide's LoopLevel(g, var), the loop of any stage of g: an update's RVar loops
            # and the loops split from them too (Func.h, compute_at(const Func &, const RVar &))
            stages = [(s, self.state(g, s)) for s in range(-1, len(g.updates))]
            if not any(var in st.vars for _, st in stages):
                bad.add(id(f))
                loops = [st.shown.get(v, v) for _, st in stages for v in st.vars]
                guess = did_you_mean(var, loops)
                listed = "; ".join(f"{'update(%d)' % s if s >= 0 else 'its pure definition'}: {st.display()}"
                                   for s, st in stages)
                self.el.sink.error(f"'{var}' is not a loop of '{g.name}'"
                                   + (f"; did you mean '{guess}'?" if guess else ""),
                                   call.args[1].span, f"its loops (innermost first) are, in {listed}"
                                   if len(stages) > 1 else f"its loops are {', '.join(loops)} (innermost first)")
        self._check_store_levels(bad)

    def _check_store_levels(self, bad: set[int]):
        """A Func's storage must enclose its computation (Halide: the store level is the compute
        level or a loop outside it). Levels are compared as the loops around them, outermost
        first; a level inside a Func whose own place is unknown here (computed inline, a loop
        already reported) is left to lowering."""
        compute, store = {}, {}
        for fid, ds in self.sched.directives.items():
            for d in ds:
                if d.name in ("compute_at", "compute_root", "compute_inline"):
                    compute[fid] = d
                elif d.name in ("store_at", "store_root"):
                    store[fid] = d
        calls = {id(d.span): call for _, d, call in self.pending}

        def enclosing(d, seen):
            if d.name in ("compute_root", "store_root"):
                return []
            if d.name != "compute_at" and d.name != "store_at":
                return None
            g, var = d.args
            loops = self.state(g, -1).vars
            if var not in loops or id(g) in seen:
                return None
            if g in self.outputs:
                outer = []
            elif id(g) in compute:
                outer = enclosing(compute[id(g)], seen | {id(g)})
            else:
                return None
            if outer is None:
                return None
            return outer + [(g.name, v) for v in reversed(loops[loops.index(var):])]

        for fid, st in store.items():
            cd = compute.get(fid)
            if cd is None or fid in bad:
                continue
            ps, pc = enclosing(st, {fid}), enclosing(cd, {fid})
            if ps is None or pc is None or pc[:len(ps)] == ps:
                continue
            f = self.sched.funcs[fid]
            where = "at the root" if cd.name == "compute_root" else f"at loop '{cd.args[1]}' of '{cd.args[0].name}'"
            at = "at the root" if st.name == "store_root" else f"at loop '{st.args[1]}' of '{st.args[0].name}'"
            outer = ("store_root()" if cd.name == "compute_root" else
                     f"store_at({cd.args[0].name}, {cd.args[1]}), a loop around that one, or store_root()")
            call = calls.get(id(st.span))
            self.el.sink.error(f"'{f.name}' is stored {at}, which does not enclose where it is computed "
                               f"({where})", directive_span(call) if call is not None else st.span,
                               f"its storage must enclose its computation: store it where it is computed or "
                               f"further out: {outer}")


def stand_in(f: Func) -> bool:
    """A stage of tile_iir named in a schedule (lower/tile_iir.py builds the real one)."""
    return getattr(f, "tile_stage_of", None) is not None


def directive_span(call: ast.Call):
    """`split(x, xo, xi)` in `out.split(x, xo, xi)`: from the directive's name to its ')'."""
    name = call.func.name_span
    if name is None or name.line != call.span.end_line:
        return call.span
    return Span(name.file, name.line, name.col, call.span.end_line, call.span.end_col)


def _consumes(g: Func, f: Func) -> bool:
    seen, stack = set(), [g]
    while stack:
        h = stack.pop()
        for c in callees(h):
            if c is f:
                return True
            if id(c) not in seen:
                seen.add(id(c))
                stack.append(c)
    return False


def _is_scan(f: Func, stage: int) -> bool:
    u = f.updates[stage]
    for e in u.values:
        for n in walk(e):
            if isinstance(n, FuncCall) and n.func is f:
                if len(n.args) != len(u.args) or any(a is not b and not _same(a, b) for a, b in zip(n.args, u.args)):
                    return True
    return False


def _same(a, b) -> bool:
    """Structurally equal (hash-consing makes equal expressions one object)."""
    return intern(a) is intern(b)


GPU_DIRECTIVES = ("gpu_blocks", "gpu_threads", "gpu_tile", "glsl")
GPU_SCHEDULES = ("cuda", "opengl")      # chosen by compiling for that target, never for the CPU


def refuse_unsupported(sched: Schedule | None, target) -> None:
    """Refuse what the target cannot honour, before anything is compiled: GPU directives on a
    CPU target (running them serially on the CPU would hide that the schedule does not do what
    it says; GPU targets, cuda-emulate among them, take them). The reference evaluator ignores schedules and needs no such check."""
    from hdsl.target import parse_target
    if sched is None:
        return
    target = parse_target(target)
    found = []
    hint = ("this block is for a GPU target: run the CPU schedule instead (leave out --schedule)"
            if sched.name in GPU_SCHEDULES else
            "keep GPU directives in a `schedule cuda { ... }` block; for the CPU use tile(...), parallel(...) "
            "and vectorize(...)")
    for ds in sched.directives.values():
        for d in ds:
            if d.name == "glsl" and target.is_gpu and target.device != "opengl":
                found.append(Diagnostic(f"'glsl' is OpenGL's fragment path, which target '{target}' does not have",
                                        d.span, "compile for --target opengl, or map the Func with "
                                        "gpu_tile(...) for this target"))
    for ds in sched.directives.values() if not target.is_gpu else ():
        for d in ds:
            if d.name in GPU_DIRECTIVES:
                found.append(Diagnostic(f"'{d.name}' maps loops onto a GPU, but target '{target}' is a CPU",
                                        d.span, hint + "; or compile for a GPU target (--target cuda, or "
                                        "cuda-emulate to run GPU schedules on the CPU)"))
    if found:
        found.sort(key=lambda d: (d.span.line, d.span.col) if d.span else (0, 0))
        raise HdslError(found)



def race_free(f: Func, u, rvar: str) -> bool:
    """Whether distinct values of reduction variable `rvar` never touch the same point of f in
    update u, whatever values every other variable takes (Halide's can_parallelize_rvar,
    src/ParallelRVar.cpp: the hazard `rvar != rvar' && (store == store' || load == store')`,
    with every variable of the other iteration renamed, must be provably false). A store and a
    store (or a read) of two such iterations never meet when one coordinate provably differs:
    see _never_equal."""
    if u.rdom is None:
        return False
    index = [i for i in range(len(u.rdom.bounds)) if RVar(u.rdom, i).name == rvar]
    if not index:
        return False
    exprs = list(u.values) + list(u.args) + ([u.rdom.predicate] if u.rdom.predicate is not None else [])
    reads = [n.args for e in exprs for n in walk(e) if isinstance(n, FuncCall) and n.func is f]
    store = tuple(u.args)
    return all(any(_never_equal(a, b, f, u.rdom, index[0]) for a, b in zip(acc, store))
               for acc in [store] + reads)


def _never_equal(a, b, f: Func, rdom, v: int) -> bool:
    """Coordinate a of one iteration never equals coordinate b of another iteration whose
    reduction variable v differs (all other variables arbitrary in both), shown from their
    linear forms: the difference is a nonzero multiple of (v - v'); or no integer solves it
    (a constant not divisible by the coefficients' gcd: 2 * r.x vs 2 * r.x' + 1); or the two
    ranges over the rdom's constant bounds are disjoint (r.x + 20 vs r.x' in [0, 11])."""
    from math import gcd

    from hdsl.ir.expr import Const
    la, lb = _linear(a, 0, f, rdom), _linear(b, 1, f, rdom)
    if la is None or lb is None:
        return False
    terms = dict(la[0])
    for k, c in lb[0].items():
        terms[k] = terms.get(k, 0) - c
    terms = {k: c for k, c in terms.items() if c}
    const = la[1] - lb[1]
    if set(terms) == {("r", v, 0), ("r", v, 1)} and terms[("r", v, 0)] == -terms[("r", v, 1)] and const == 0:
        return True
    g = 0
    for c in terms.values():
        g = gcd(g, abs(c))
    if g == 0 and const != 0 or g and const % g:
        return True
    if all(k[0] == "r" for k in terms):
        lo = hi = const
        for (_, i, _tag), c in terms.items():
            mn, ext = rdom.bounds[i]
            if not (isinstance(mn, Const) and isinstance(ext, Const)):
                return False
            ends = (c * mn.value, c * (mn.value + ext.value - 1))
            lo, hi = lo + min(ends), hi + max(ends)
        return lo > 0 or hi < 0
    return False


def _linear(e, tag: int, f: Func, rdom):
    """e as ({term: integer coefficient}, constant), or None. Terms: ('r', i, tag) for rvar i,
    ('v', name, tag) for a pure var, ('fix', id) for a subexpression that is the same in every
    iteration (a param, an input read at constant coordinates); `tag` tells iterations apart."""
    from hdsl.ir.expr import BinOp, Const
    if isinstance(e, Const):
        return ({}, int(e.value)) if (e.type.is_int() or e.type.is_uint()) else None
    if isinstance(e, RVar):
        return ({("r", e.index, tag): 1}, 0) if e.rdom is rdom else None
    if isinstance(e, Var):
        return {("v", e.name, tag): 1}, 0
    if isinstance(e, BinOp) and e.op in ("+", "-", "*") and e.type.is_int() and e.type.bits >= 32:
        a, b = _linear(e.a, tag, f, rdom), _linear(e.b, tag, f, rdom)
        if a is None or b is None:
            return None
        if e.op == "*":
            if a[0] and b[0]:
                return None
            (k, (terms, c)) = (a[1], b) if not a[0] else (b[1], a)
            return {t: k * x for t, x in terms.items()}, k * c
        s = 1 if e.op == "+" else -1
        terms = dict(a[0])
        for t, x in b[0].items():
            terms[t] = terms.get(t, 0) + s * x
        return terms, a[1] + s * b[1]
    if not any(isinstance(n, (Var, RVar)) or (isinstance(n, FuncCall) and n.func is f) for n in walk(e)):
        return {("fix", id(intern(e))): 1}, 0
    return None
