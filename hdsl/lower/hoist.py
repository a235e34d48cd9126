"""Hoisting loop-invariant loads out of short constant loops.

A colour loop inside vector code (`out.reorder(c, x, y).bound(c, 0, 3)`)
often recomputes, for every c, a term that does not depend on c: the alpha
channel a colour is divided by, `f(x, y, 3)`. LLVM's own loop-invariant code
motion cannot move its loads above the loop, because the loop stores into the
output and LLVM cannot tell the output from the buffers the loads read. Here
the buffers are named, and two names never share memory (inputs and outputs
are distinct arrays, intermediates are allocated apart), so a subexpression
of the loop's body is invariant when

- it mentions no variable bound inside the loop (the loop's own, a let or an
  inner loop's), and
- every load in it reads a buffer the loop does not store to.

Such subexpressions (the largest ones, holding at least one load) become lets
just before the loop. Only loops of a constant extent of at least one are
treated, and only expressions that every iteration evaluates (not under an
`if`, not in an inner loop of run-time extent): the hoisted loads then read
nothing the loop would not have read itself, so bounds inference still
covers them.
"""
from __future__ import annotations

from hdsl.ir.expr import Const, Expr, Var, free_vars, intern, rebuild, walk
from hdsl.ir.stmt import (Allocate, Block, Evaluate, For, LetStmt, Load, Stmt, Store, children, map_exprs,
                          with_children)


def hoist_invariants(stmt: Stmt) -> Stmt:
    return _Hoister().stmt(stmt)


def _const_loop(s: Stmt) -> bool:
    return isinstance(s, For) and isinstance(s.extent, Const) and s.extent.value >= 1


class _Hoister:
    def __init__(self):
        self.n = 0

    def stmt(self, s: Stmt) -> Stmt:
        kids = children(s)
        new = [self.stmt(k) for k in kids]
        if any(a is not b for a, b in zip(new, kids)):
            s = with_children(s, new)
        if _const_loop(s) and s.kind in ("serial", "unrolled"):
            return self.hoist(s)
        return s

    def hoist(self, loop: For) -> Stmt:
        # lets at the top of the body whose values do not depend on the loop (a vector
        # loop's coordinate, computed inside the channel loop) move out first
        outer = []
        body = loop.body
        while isinstance(body, LetStmt) and loop.var not in free_vars(body.value) and not any(
                isinstance(n, Load) for n in walk(body.value)):
            outer.append((body.name, body.value))
            body = body.body
        if outer:
            loop = For(loop.var, loop.min, loop.extent, loop.kind, body)
        out = self._hoist(loop)
        for name, e in reversed(outer):
            out = LetStmt(name, e, out)
        return out

    def _hoist(self, loop: For) -> Stmt:
        bound, written = {loop.var}, set()

        def scan(s: Stmt):
            if isinstance(s, For):
                bound.add(s.var)
            elif isinstance(s, LetStmt):
                bound.add(s.name)
            elif isinstance(s, Store):
                written.add(s.buffer)
            elif isinstance(s, Allocate):           # a buffer of the loop's own
                written.add(s.name)
            for k in children(s):
                scan(k)
        scan(loop.body)

        # the expressions every iteration evaluates: through lets, blocks and inner loops of
        # constant extent, not under an if or a loop that may run no iteration
        exprs: list[Expr] = []

        def collect(s: Stmt):
            if isinstance(s, Store):
                exprs.extend((s.value, s.index))
            elif isinstance(s, LetStmt):
                exprs.append(s.value)
                collect(s.body)
            elif isinstance(s, Evaluate):
                exprs.append(s.value)
            elif isinstance(s, Block):
                for k in s.stmts:
                    collect(k)
            elif _const_loop(s):
                collect(s.body)
        collect(loop.body)

        # per node, memoized (expressions are DAGs; inlined pipelines share a lot):
        # (reads only buffers the loop does not write, holds a load)
        facts: dict[int, tuple[bool, bool]] = {}

        def loads(e: Expr) -> tuple[bool, bool]:
            r = facts.get(id(e))
            if r is None:
                ok, has = True, isinstance(e, Load)
                if has and e.buffer in written:
                    ok = False
                for k in e.children():
                    kok, khas = loads(k)
                    ok, has = ok and kok, has or khas
                r = facts[id(e)] = (ok, has)
            return r

        chosen: dict[int, Expr] = {}
        seen: set[int] = set()

        def pick(e: Expr):
            if id(e) in seen:
                return
            seen.add(id(e))
            ok, has = loads(e)
            if not has:
                return
            if ok and not (free_vars(e) & bound):
                chosen[id(e)] = e
                return
            for k in e.children():
                pick(k)
        for e in exprs:
            pick(e)
        if not chosen:
            return loop
        names: dict[int, Var] = {}
        lets = []
        for i, e in chosen.items():
            self.n += 1
            v = Var(f"{loop.var}.inv{self.n}", e.type)
            names[i] = intern(v)
            lets.append((v.name, e))

        memo2: dict[int, Expr] = {}

        def rewrite_expr(e: Expr) -> Expr:
            # top-down: a chosen node is replaced whole (a bottom-up rewrite would first
            # replace a smaller chosen node inside it and no longer recognize it)
            r = memo2.get(id(e))
            if r is not None:
                return r
            if id(e) in names:
                r = names[id(e)]
            else:
                kids = e.children()
                new_kids = [rewrite_expr(k) for k in kids]
                r = e if all(a is b for a, b in zip(new_kids, kids)) else intern(rebuild(e, new_kids))
            memo2[id(e)] = r
            return r

        body = map_exprs(loop.body, rewrite_expr)
        out: Stmt = For(loop.var, loop.min, loop.extent, loop.kind, body)
        for name, e in reversed(lets):
            out = LetStmt(name, e, out)
        return out


__all__ = ["hoist_invariants"]
