"""Typed expression nodes. Immutable; every node knows its element type.

Semantics, one line each (Halide's):
- Const: a scalar; `literal` marks an unsuffixed integer literal that still
  takes the type of the other operand (Halide's C++ int overloads).
- Var: a Func's pure variable (i32), bound by name inside one definition.
- RVar: dimension `index` of a reduction domain (i32).
- Param / BufferProp: run-time scalars (a param, an input's dim min/extent).
- Cast: wraps on integer narrowing; float to int truncates toward zero.
- BinOp: both operands have the same type. '/' on integers is Euclidean
  (rounds toward -inf for a positive divisor), '%' is never negative, and
  x / 0 == x % 0 == 0. Narrow unsigned arithmetic wraps. Float '%' is
  a - b * floor(a / b). Shifts by a negative amount shift the other way.
- Select: lane-wise choice; cond is bool, both values have the same type.
- FuncCall / InputCall: read a Func (value `index` of a tuple) or an input buffer.
- Intrinsic: math and other built-ins by name (see interp for the exact rules).
"""
from __future__ import annotations

import contextlib
import gc
import threading

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

from hdsl.ir.types import BOOL, I32, Type

if TYPE_CHECKING:
    from hdsl.ir.func import Func, InputBuffer, RDom

ARITH_OPS = ("+", "-", "*", "/", "%", "min", "max")
CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")
LOGIC_OPS = ("&&", "||")
BIT_OPS = ("&", "|", "^")
SHIFT_OPS = ("<<", ">>")


class Expr:
    __slots__ = ()
    type: Type

    def children(self) -> tuple["Expr", ...]:
        return ()


@dataclass(frozen=True, slots=True, eq=False)
class Const(Expr):
    type: Type
    value: object
    literal: bool = False

    def __repr__(self):
        return f"{self.value}" if self.literal else f"{self.type}({self.value})"


@dataclass(frozen=True, slots=True, eq=False)
class Var(Expr):
    name: str
    type: Type = I32


@dataclass(frozen=True, slots=True, eq=False)
class RVar(Expr):
    rdom: "RDom"
    index: int
    type: Type = I32

    @property
    def name(self) -> str:
        return f"{self.rdom.name}.{'xyzw'[self.index] if self.index < 4 else self.index}"


@dataclass(frozen=True, slots=True, eq=False)
class Param(Expr):
    name: str
    type: Type


@dataclass(frozen=True, slots=True, eq=False)
class BufferProp(Expr):
    buffer: "InputBuffer"
    dim: int
    what: str                 # 'min' or 'extent'
    type: Type = I32


@dataclass(frozen=True, slots=True, eq=False)
class Cast(Expr):
    type: Type
    value: Expr
    saturate: bool = False

    def children(self):
        return (self.value,)


@dataclass(frozen=True, slots=True, eq=False)
class BinOp(Expr):
    op: str
    a: Expr
    b: Expr
    type: Type

    def children(self):
        return (self.a, self.b)


@dataclass(frozen=True, slots=True, eq=False)
class Unary(Expr):
    op: str                   # '-', '!', '~'
    a: Expr
    type: Type

    def children(self):
        return (self.a,)


@dataclass(frozen=True, slots=True, eq=False)
class Select(Expr):
    cond: Expr
    t: Expr
    f: Expr
    type: Type

    def children(self):
        return (self.cond, self.t, self.f)


@dataclass(frozen=True, slots=True, eq=False)
class FuncCall(Expr):
    func: "Func"
    args: tuple[Expr, ...]
    index: int
    type: Type

    def children(self):
        return self.args


@dataclass(frozen=True, slots=True, eq=False)
class InputCall(Expr):
    buffer: "InputBuffer"
    args: tuple[Expr, ...]
    type: Type

    def children(self):
        return self.args


@dataclass(frozen=True, slots=True, eq=False)
class Intrinsic(Expr):
    name: str
    args: tuple[Expr, ...]
    type: Type
    extra: tuple = field(default=())      # e.g. print's string pieces

    def children(self):
        return self.args


def walk(e: Expr) -> Iterator[Expr]:
    """Every distinct node of `e` once, parents before children (expressions are DAGs:
    inlining shares subexpressions, and visiting them once keeps passes linear)."""
    stack = [e]
    seen = set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        stack.extend(reversed(n.children()))


def rebuild(e: Expr, children: list[Expr]) -> Expr:
    """`e` with new children (same order as `children()`); `e` itself if unchanged."""
    old = e.children()
    if all(a is b for a, b in zip(old, children)):
        return e
    make = _REBUILD.get(type(e))
    if make is not None:
        return make(e, children)
    if hasattr(e, "with_children"):
        return e.with_children(children)
    raise TypeError(f"cannot rebuild {type(e).__name__}")


def substitute(e: Expr, fn, memo: dict | None = None) -> Expr:
    """Bottom-up rewrite: `fn(node)` returns a replacement or None to keep it.
    Shared subexpressions are rewritten once, and the results are interned."""
    memo = {} if memo is None else memo

    def go(n: Expr) -> Expr:
        r = memo.get(id(n))
        if r is not None:
            return r[1]
        kids = [go(c) for c in n.children()]
        node = rebuild(n, kids) if kids else n
        out = fn(node)
        res = intern(node if out is None else out)
        memo[id(n)] = (n, res)
        return res
    try:
        return go(e)
    finally:
        del go          # (go refers to itself: a cycle, left for the collector to walk)


# Hash-consing: structurally equal expressions become one object, so that the
# DAGs inlining makes stay small and `a is b` means "the same expression".
#
# The tables are per thread, and a compilation runs on one thread: it clears its own
# tables when it starts and ends (clear_interned), which would otherwise pull canonical
# nodes (and the id-keyed caches below) from under a compilation on another thread ("unbound
# variable" in codegen, or code built from two nodes that should have been one). Per-thread
# tables need no lock on the hot path, and a table dies with its thread. A node made
# canonical on one thread is an ordinary node on another, where intern() adopts it.


class _Tables(threading.local):
    def __init__(self):
        self.interned: dict = {}        # structural key -> the canonical node
        self.canon: set = set()         # ids of canonical nodes (kept alive by `interned`)
        # caches keyed by canonical nodes, valid until clear_interned: the names of the Vars
        # an expression mentions, the Funcs and buffers it calls, and its simplified form
        self.free: dict[int, frozenset] = {}
        self.called: dict[int, frozenset] = {}
        self.simplified: dict[int, Expr] = {}
        self.memos: dict[str, dict] = {}    # other passes' caches keyed by canonical nodes (memo_table)


_TABLES = _Tables()


def _intern_key(e: Expr):
    keyer = _KEYS.get(type(e))
    if keyer is not None:
        return keyer(e)
    key = getattr(e, "intern_key", None)
    return key() + (tuple(id(c) for c in e.children()),) if key is not None else None


# each expression class rebuilt with new children, by exact class (rebuild)
_REBUILD = {
    BinOp: lambda e, c: BinOp(e.op, c[0], c[1], e.type),
    Cast: lambda e, c: Cast(e.type, c[0], e.saturate),
    Unary: lambda e, c: Unary(e.op, c[0], e.type),
    Select: lambda e, c: Select(c[0], c[1], c[2], e.type),
    FuncCall: lambda e, c: FuncCall(e.func, tuple(c), e.index, e.type),
    InputCall: lambda e, c: InputCall(e.buffer, tuple(c), e.type),
    Intrinsic: lambda e, c: Intrinsic(e.name, tuple(c), e.type, e.extra),
}


# the intern key of each expression class, by exact class (a dict lookup instead of a chain of
# isinstance tests: ~50k keys per lowering of the local Laplacian, most of them BinOps)
_KEYS = {
    BinOp: lambda e: ("bin", e.op, e.type, (id(e.a), id(e.b))),
    Const: lambda e: ("C", e.type, repr(e.value), e.literal),
    Var: lambda e: ("V", e.name, e.type),
    RVar: lambda e: ("R", id(e.rdom), e.index),
    Param: lambda e: ("P", e.name, e.type),
    BufferProp: lambda e: ("B", id(e.buffer), e.dim, e.what),
    Cast: lambda e: ("cast", e.type, e.saturate, (id(e.value),)),
    Unary: lambda e: ("un", e.op, e.type, (id(e.a),)),
    Select: lambda e: ("sel", e.type, (id(e.cond), id(e.t), id(e.f))),
    FuncCall: lambda e: ("call", id(e.func), e.index, e.type, tuple(id(c) for c in e.args)),
    InputCall: lambda e: ("in", id(e.buffer), e.type, tuple(id(c) for c in e.args)),
    Intrinsic: lambda e: ("intr", e.name, e.type, e.extra, tuple(id(c) for c in e.args)),
}


def intern(e: Expr) -> Expr:
    """The canonical object for `e` (children are made canonical first)."""
    t = _TABLES
    canon = t.canon
    if id(e) in canon:          # about half the calls in a lowering
        return e
    return _intern(e, t.interned, canon)


def _intern(e: Expr, table: dict, canon: set) -> Expr:
    if id(e) in canon:
        return e
    kids = e.children()
    if kids:
        new = [_intern(c, table, canon) for c in kids]
        if any(a is not b for a, b in zip(new, kids)):
            e = rebuild(e, new)
            if id(e) in canon:
                return e
    key = _intern_key(e)
    if key is None:
        return e
    got = table.get(key)
    if got is None:
        # the canonical node keeps its children alive, so the ids in its key stay valid
        table[key] = got = e
        canon.add(id(e))
    return got


def intern_tree(e: Expr, memo: dict | None = None) -> Expr:
    return substitute(e, lambda n: None, memo)


_gc_lock = threading.Lock()
_gc_pausers = 0                 # compilations in flight that paused the collector
_gc_was_enabled = False


@contextlib.contextmanager
def no_collection():
    """Python's cyclic garbage collector paused (then restored) for a compilation: lowering
    and code generation allocate millions of small, long-lived nodes, and each automatic
    collection walks them all, for nothing (the local Laplacian's lowering and code
    generation: ~1.0 s with collections, ~0.85 s without). What becomes garbage meanwhile
    is collected after, as usual. Compilations on several threads share one collector: it
    is restored when the last of them ends."""
    global _gc_pausers, _gc_was_enabled
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()


def clear_interned() -> None:
    """Forget this thread's canonical nodes and the caches keyed by them (a compilation
    starts and ends with this; compilations on other threads keep theirs)."""
    _TABLES.__init__()


def memo_table(name: str) -> dict:
    """This thread's cache `name` for a pass's results keyed by ids of canonical nodes (which
    stay alive, and keep their ids, until clear_interned empties it with the rest)."""
    t = _TABLES.memos.get(name)
    if t is None:
        t = _TABLES.memos[name] = {}
    return t


def simplified_cache() -> dict:
    """This thread's cache of simplified forms, keyed by id of canonical nodes (ir.simplify)."""
    return _TABLES.simplified


_EMPTY: frozenset = frozenset()


def called(e: Expr) -> frozenset:
    """ids of the Funcs and input buffers that e calls (cached like free_vars)."""
    tables = _TABLES
    cache, canon = tables.called, tables.canon
    hit = cache.get(id(e))
    if hit is not None:
        return hit
    local: dict[int, frozenset] = {}

    def go(n: Expr) -> frozenset:
        r = cache.get(id(n))
        if r is None:
            r = local.get(id(n))
        if r is not None:
            return r
        kids = n.children()
        parts = [go(k) for k in kids]
        nonempty = [p for p in parts if p]
        own = id(n.func) if isinstance(n, FuncCall) else id(n.buffer) if isinstance(n, InputCall) else None
        if own is not None:
            nonempty.append(frozenset((own,)))
        r = _EMPTY if not nonempty else nonempty[0] if len(nonempty) == 1 else frozenset().union(*nonempty)
        if id(n) in canon:
            cache[id(n)] = r
        else:
            local[id(n)] = r
        return r
    try:
        return go(e)
    finally:
        del go          # (go refers to itself: a cycle, left for the collector to walk)


def subst_vars(e: Expr, mapping: dict, memo: dict | None = None) -> Expr:
    """e with the Vars named in mapping replaced; subtrees that mention none are kept as they are.
    `memo`: shared by calls with the same mapping (their expressions' common subtrees are
    rewritten once)."""
    keys = frozenset(mapping)
    memo = {} if memo is None else memo

    def go(n: Expr) -> Expr:
        if not (free_vars(n) & keys):
            return n
        r = memo.get(id(n))
        if r is not None:
            return r[1]
        if isinstance(n, Var):
            out = mapping[n.name]
        else:
            kids = n.children()
            new = [go(k) for k in kids]
            out = n if all(a is b for a, b in zip(new, kids)) else rebuild(n, new)
        out = intern(out)
        memo[id(n)] = (n, out)
        return out
    try:
        return go(e)
    finally:
        del go          # (go refers to itself: a cycle, left for the collector to walk)


def is_canonical(e: Expr) -> bool:
    return id(e) in _TABLES.canon


def free_vars(e: Expr) -> frozenset:
    """The names of the Vars in e (cached for interned expressions, which share subtrees)."""
    tables = _TABLES
    cache, canon = tables.free, tables.canon
    hit = cache.get(id(e))
    if hit is not None:
        return hit
    local: dict[int, frozenset] = {}

    def go(n: Expr) -> frozenset:
        r = cache.get(id(n))
        if r is None:
            r = local.get(id(n))
        if r is not None:
            return r
        if isinstance(n, Var):
            r = frozenset((n.name,))
        else:
            kids = n.children()
            if not kids:
                r = _EMPTY
            elif len(kids) == 1:
                r = go(kids[0])
            else:
                parts = [go(k) for k in kids]
                nonempty = [p for p in parts if p]
                r = _EMPTY if not nonempty else nonempty[0] if len(nonempty) == 1 else frozenset().union(*nonempty)
        if id(n) in canon:
            cache[id(n)] = r
        else:
            local[id(n)] = r
        return r
    try:
        return go(e)
    finally:
        del go          # (go refers to itself: a cycle, left for the collector to walk)


def const(t: Type, v) -> Const:
    return Const(t, v)


def make_bool(v: bool) -> Const:
    return Const(BOOL, bool(v))
