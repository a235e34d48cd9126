"""The LLVM code generator's target-independent base: flat loop nests → LLVM IR (llvmlite),
with the reference evaluator's semantics.

`CodeGenLLVM` generates statements, serial and unrolled loops, and every operator with
exactly the semantics of hdsl/interp/scalar.py: Euclidean division with x / 0 == 0,
wrapping integer arithmetic, defined results for shifts and out-of-range float→int casts
(saturating casts, lerp), IEEE floats with no contraction (strict mode). A target subclasses
it (Halide's CodeGen_X86 / CodeGen_PTX_Dev over CodeGen_LLVM) and overrides the hooks:

- `loop(st, s)`: loop kinds beyond serial and unrolled (vectorized, parallel, GPU);
- `vector_load` / `store_vector` / `index_binop` / `index_cast`: vectorized memory access and
  index arithmetic (a vectorized loop's index is a symbolic `Ramp`), only where `loop` makes
  vectorized loops;
- `float_to_i32(st, v)`: f32 → i32 toward zero, INT_MIN for NaN and out of range (a generic
  range check here; x86's cvttps2dq on the CPU);
- `math_call(st, name, args, t)`: exp, log, sin, …, pow, atan2 (libm on the CPU, libdevice
  on NVPTX);
- `emit_print(st, fmt, vals)` (printf; print_call makes the line), `allocate(st, s)` (an
  Allocate with its body) and
  `fail(st, code, info)` (an Assert that does not hold: report the error and leave).

The CPU subclass (host calling convention, thread pool, x86 vector strategy) is
hdsl/codegen/cpu.py; splitting a module for parallel compilation is hdsl/codegen/modules.py.
"""
from __future__ import annotations

from llvmlite import ir

from hdsl.diagnostics import InternalError
from hdsl.ir.closure import mentioned, mentioned_names
from hdsl.ir.expr import BinOp, Cast, Const, Expr, Intrinsic, Param, Select, Unary, Var, walk
from hdsl.ir.stmt import (Allocate, Assert, Block, Evaluate, For, IfThenElse, LetStmt, Load, Stmt, Store, children,
                          own_exprs)
from hdsl.ir.types import F32, F64, I32, I64, Type
from hdsl.lower.partition import NARROW_LANES

I1T, I8T, I32T, I64T = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F32T = ir.FloatType()
PTR = ir.PointerType()

LIBM1 = {"exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos",
         "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh"}


def llvm_type(t: Type, memory: bool = False) -> ir.Type:
    if t.is_bool():
        return I8T if memory else I1T
    if t.is_float():
        return {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}[t.bits]
    return ir.IntType(t.bits)


def _c(t: Type, v) -> ir.Constant:
    lt = llvm_type(t)
    if t.is_float():
        return ir.Constant(lt, float(v))
    if t.is_bool():
        return ir.Constant(lt, int(bool(v)))
    return ir.Constant(lt, int(v) & ((1 << t.bits) - 1))


class Ramp:
    """The vector <base, base + stride, …, base + (lanes - 1) * stride> of a vectorized loop's index.
    `stride` is a Python int, or a scalar LLVM value of base's type (a buffer's run-time stride)."""

    def __init__(self, base: ir.Value, stride: int, lanes: int):
        self.base, self.stride, self.lanes = base, stride, lanes


class Interleave:
    """The lanes of k ramps interleaved: lane i is parts[i % k][i // k]. `ramp / k` and
    `ramp % k` of a vectorized index are exactly this (lane k*j + r of (b + s*i) / k is
    (b + s*r) / k + s*j), so `f(x / 2)` loads two dense half-vectors and interleaves them,
    as Halide does, instead of gathering or checking patterns at run time."""

    def __init__(self, parts: list, halves: bool = False):
        self.parts = parts
        self.lanes = sum(p.lanes for p in parts)
        # halves: two parts whose first lanes differ by 0 or 1 (`ramp / 2` of a ramp of
        # stride 1, plus terms the same on every lane): CodeGenCPU.parity_load
        self.halves = halves


def shaped(ref, scalar_type: ir.Type) -> ir.Type:
    """scalar_type, or a vector of it with ref's lane count when ref is a vector."""
    rt = ref.type if isinstance(ref, ir.Value) else ref
    if isinstance(rt, ir.VectorType):
        return ir.VectorType(scalar_type, rt.count)
    return scalar_type


def K(ref, value) -> ir.Constant:
    """A constant of ref's type (splat across lanes for a vector)."""
    rt = ref.type if isinstance(ref, ir.Value) else ref
    if isinstance(rt, ir.VectorType):
        return splat_constant(rt, ir.Constant(rt.element, _norm(rt.element, value)))
    return ir.Constant(rt, _norm(rt, value))


_SPLATS: dict = {}


def splat_constant(vt: ir.VectorType, elem: ir.Constant) -> ir.Constant:
    """The vector constant with `elem` in each lane, made once: llvmlite builds a constant's
    lanes one by one and formats them again for each object (a vector constant per use was
    ~10% of the local Laplacian's IR generation and ~15% of its printing). The text is the
    same. Keyed by the element's text (0.0 and -0.0 are equal as keys, not as texts)."""
    key = (str(elem.type), elem.get_reference(), vt.count)
    got = _SPLATS.get(key)
    if got is None:
        if len(_SPLATS) > 4096:
            _SPLATS.clear()
        got = _SPLATS[key] = ir.Constant(vt, [elem] * vt.count)
    return got


def _norm(t, value):
    if isinstance(t, ir.IntType):
        return int(value) & ((1 << t.width) - 1)
    return value


class _Fn:
    """Codegen state for one LLVM function (the pipeline, an outlined task, a GPU kernel)."""

    def __init__(self, cg: "CodeGenLLVM", fn: ir.Function):
        self.cg = cg
        self.fn = fn
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.syms: dict[str, tuple[object, Type | None]] = {}
        self.err_info = None
        self.lanes: int | None = None        # inside a vectorized loop: its width
        self.mask = None                     # inside a vector guard: the active lanes
        self.cache: dict = {}                # id(expr) -> (expr, value[, made at]) for CSE
        self.lets_prepared: set = set()      # ids of lets whose loads before_let has seen
        self.clock = 0                       # counts the stores generated (and loops entered)
        self.printed = False                 # whether a print has been generated (and cached)
        self.written_at: dict = {}           # buffer -> the clock when it was last written
        # 64-bit addressing of scalar loads and stores (CodeGenLLVM.wide_index): on only where
        # every variable's value is known exact (the CPU's functions); ring_lets holds the i32
        # lets defined by + - * (their i64 forms made on demand), None for one that cannot be
        self.wide_index = False
        self.ring_lets: dict[str, "_RingLet | None"] = {}
        # bytes of the allocations in scope whose size is a constant (rounded up to 64 as
        # CodeGenCPU.allocate allocates them): a look-up table's loads may read all of them
        self.alloc_bytes: dict[str, int] = {}
        # remainders known where code is generated for one residue of a loop's first value
        # (CodeGenLLVM.by_residue): id(value) -> (value, k, r), value ≡ r (mod k)
        self.known: dict[int, tuple] = {}
        self.copies = 1                      # how many such copies the code here is one of
        self.fixed_stack = 0                 # bytes of fixed frame slots taken (CodeGenCPU.allocate)
        # the innermost serial loop being generated: the index in fn.blocks of its head (the
        # loop's blocks are that one and every later one until it ends), for
        # CodeGenLLVM.hoisted_base; None outside loops
        self.loop_from: int | None = None
        self.block_pos: dict = {}            # id(block) -> its index in fn.blocks (hoisted_base)
        self.hoisted: dict = {}              # the pointers hoisted out of that loop so far


    def wrote(self, buffer: str) -> None:
        """`buffer` is written here: what was read from it before no longer holds."""
        self.written_at[buffer] = self.clock      # (what was made up to now is stale)
        self.clock += 1


ANY_BUFFER = "\0any"          # written_at's key for a statement that may write any buffer
_NO_BUFFERS: frozenset = frozenset()


class _NotWide(Exception):
    """An index that wide_index cannot evaluate in 64 bits (it is then addressed in 32)."""


_RING = {"+": "add", "-": "sub", "*": "mul"}
_COMPARE = {"==": lambda x, y: x == y, "!=": lambda x, y: x != y, "<": lambda x, y: x < y,
            "<=": lambda x, y: x <= y, ">": lambda x, y: x > y, ">=": lambda x, y: x >= y}
_ABSENT = object()


class _RingLet:
    """An i32 let whose value is made by + - * (a hoisted part of an offset): its expression,
    the LLVM value it was given (where its i64 form is inserted), the values its leaves had
    (non-ring subexpressions and plain variables, by id) and the ring lets it uses."""

    def __init__(self, expr, anchor, leaves: dict, lets: dict):
        self.expr, self.anchor, self.leaves, self.lets = expr, anchor, leaves, lets
        self.wide = None


class _LaneInvariantLets:
    """st.ring_lets seen by _wide where only lets the same on every lane may be expanded
    (their values' first lanes are every lane's): a let of a vectorized loop's ramp is not."""

    def __init__(self, st):
        self.st = st

    def __contains__(self, name) -> bool:
        return name in self.st.ring_lets

    def __getitem__(self, name):
        v = self.st.syms.get(name)
        v = None if v is None else v[0]
        if isinstance(v, (Ramp, Interleave)) or not isinstance(v, ir.Value) or isinstance(v.type, ir.VectorType):
            return None
        return self.st.ring_lets[name]


def _added_once(e: Expr, n: Expr) -> bool:
    """Whether e is n plus terms without n (n reached through + either side or - 's left)."""
    memo: dict = {}

    def has(x) -> bool:
        got = memo.get(id(x))
        if got is None:
            got = memo[id(x)] = x is n or any(has(y) for y in x.children())
        return got
    while e is not n:
        if not (isinstance(e, BinOp) and e.op in ("+", "-")):
            return False
        ina, inb = has(e.a), has(e.b)
        if ina == inb or (inb and e.op == "-"):
            return False
        e = e.a if ina else e.b
    return True


class _LoopID(ir.values.MDValue):
    """A loop's own metadata node (`distinct !{!self, ...}`, as LangRef's llvm.loop asks),
    one per loop."""

    def __init__(self, module: ir.Module, operands: list):
        super().__init__(module, operands, name=str(len(module.metadata)))

    def descr(self, buf):
        buf += ("distinct !{{ {0} }}".format(", ".join([self.get_reference()] + [
            op.get_reference() for op in self.operands])), "\n")


class CodeGenLLVM:
    """Statements, loops and operators for any LLVM target; see the module docstring for the hooks."""

    def __init__(self, name: str, fast_math: bool = False):
        self.name = name
        self.fast_math = fast_math
        self.module = ir.Module(name=name)
        self._decls: dict[str, ir.Function] = {}
        self._written_memo: dict = {}
        self._residue_memo: dict = {}
        self._reads_memo: dict = {}
        self._accesses_memo: dict = {}

    # ------------------------------------------------------------ declarations
    def decl(self, name: str, ret: ir.Type, args: list[ir.Type], var_arg=False) -> ir.Function:
        f = self._decls.get(name)
        if f is None:
            f = self.module.globals.get(name)
            if f is None:
                f = ir.Function(self.module, ir.FunctionType(ret, args, var_arg=var_arg), name=name)
            self._decls[name] = f
        return f

    def intrinsic(self, name: str, t: ir.Type, nargs: int = 1) -> ir.Function:
        return self.decl(f"llvm.{name}.{_suffix(t)}", t, [t] * nargs)

    # ------------------------------------------------------------ entry
    # ------------------------------------------------------------ statements
    def stmt(self, st: _Fn, s: Stmt):
        # The cache of generated values (expr) is scoped like the statements: a value made
        # before a loop, a guard, a let or an allocation dominates everything inside it and
        # after it, so it is reused there (the local Laplacian's entry function computed its
        # bounds again in every scope: 11900 instructions for ~1700 distinct operations).
        # Inside a loop, what depends on the loop var (or prints) is hidden, and the buffers
        # the loop writes count as written at its top (a value read from them before the
        # loop is stale from the second iteration on: st.written_at). Values made inside a
        # statement are dropped at its end: they need not dominate what follows, and a later
        # statement may bind the same names again.
        if isinstance(s, Block):
            for x in s.stmts:
                self.stmt(st, x)
            return
        if isinstance(s, (Store, Assert, Evaluate)):
            self._stmt(st, s)
            return
        saved = st.cache
        if isinstance(s, For):
            for name in self.written(s.body):
                st.wrote(name)
            if s.var in st.syms or st.printed:
                # (a var of a fresh name: nothing cached mentions it, as what mentioned an
                # earlier binding of the name was dropped with that binding's scope)
                memo: dict = {}
                st.cache = {i: hit for i, hit in saved.items() if not _varies(hit[0], s.var, frozenset(), memo)}
            else:
                st.cache = dict(saved)
        elif isinstance(s, (LetStmt, IfThenElse, Allocate)):
            st.cache = dict(saved)
        else:
            st.wrote(ANY_BUFFER)      # (a statement of a subclass: device copies, launches)
        self._stmt(st, s)
        st.cache = saved

    def written(self, s: Stmt) -> frozenset:
        """The buffers statement s stores to (kept per statement: loops nest); ANY_BUFFER
        for a statement of a subclass (a device copy, a kernel launch)."""
        memo = self._written_memo
        got = memo.get(id(s))
        if got is not None and got[0] is s:
            return got[1]
        names: set = set()
        todo = [s]
        while todo:
            x = todo.pop()
            if isinstance(x, Store):
                names.add(x.buffer)
            elif isinstance(x, Block):
                todo.extend(x.stmts)
            elif isinstance(x, IfThenElse):
                todo.append(x.then)
                if x.otherwise is not None:
                    todo.append(x.otherwise)
            elif isinstance(x, (LetStmt, For, Allocate)):
                names |= self.written(x.body)
            elif not isinstance(x, (Assert, Evaluate)):
                names.add(ANY_BUFFER)
        out = frozenset(names)
        memo[id(s)] = (s, out)
        return out

    def reads(self, e: Expr) -> frozenset:
        """The buffers expression e loads from (a property of the interned node: kept)."""
        memo = self._reads_memo
        got = memo.get(id(e))
        if got is not None and got[0] is e:
            return got[1]
        todo = [e]
        while todo:
            n = todo[-1]
            got = memo.get(id(n))
            if got is not None and got[0] is n:
                todo.pop()
                continue
            kids = [c for c in n.children() if (g := memo.get(id(c))) is None or g[0] is not c]
            if kids:
                todo.extend(kids)
                continue
            todo.pop()
            r = frozenset().union(*(memo[id(c)][1] for c in n.children()))
            if isinstance(n, Load):
                r = r | {n.buffer}
            memo[id(n)] = (n, r if r else _NO_BUFFERS)
        return memo[id(e)][1]

    def before_let(self, st: _Fn, s: LetStmt):
        """A hook before a let's value is generated (CodeGenCPU: loads shared with the lets
        that follow)."""

    def cached(self, st: _Fn, e: Expr):
        """e's cached entry (expr, value[, made at]) if it still holds: none of the buffers it
        reads was written since it was made."""
        hit = st.cache.get(id(e))
        if hit is None or len(hit) < 3 or not st.written_at:
            return hit
        made = hit[2]
        r = self.reads(e)
        if not r:
            return hit
        w = st.written_at
        if w.get(ANY_BUFFER, -1) >= made or any(w.get(n, -1) >= made for n in r):
            return None
        return hit

    def _stmt(self, st: _Fn, s: Stmt):
        b = st.b
        if isinstance(s, Block):
            for x in s.stmts:
                self.stmt(st, x)
        elif isinstance(s, LetStmt):
            self.before_let(st, s)
            v = self.expr(st, s.value, keep_ramp=True)
            old = st.syms.get(s.name)
            if old is not None:      # (what was made with the name's outer value does not hold)
                memo: dict = {}
                st.cache = {i: hit for i, hit in st.cache.items() if not _varies(hit[0], s.name, frozenset(), memo)}
            st.syms[s.name] = (v, s.value.type)
            old_ring = st.ring_lets.pop(s.name, _ABSENT)
            if st.wide_index and isinstance(s.value, BinOp) and s.value.op in _RING and s.value.type == I32:
                st.ring_lets[s.name] = self._ring_let(st, s.value, v)
            k = self.let_residue_split(st, s, v)
            if k is None:
                self.stmt(st, s.body)
            else:
                self.by_residue(st, v.base, k, lambda: self.stmt(st, s.body))
            st.ring_lets.pop(s.name, None)
            if old_ring is not _ABSENT:
                st.ring_lets[s.name] = old_ring
            if old is None:
                del st.syms[s.name]
            else:
                st.syms[s.name] = old
        elif isinstance(s, For):
            self.loop(st, s)
        elif isinstance(s, IfThenElse):
            c = self.expr(st, s.cond)
            if isinstance(c.type, ir.VectorType):
                # lanes disagree: run both sides under masks
                old = st.mask
                st.mask = c if old is None else b.and_(old, c)
                outer = dict(st.cache)
                self.stmt(st, s.then)
                if s.otherwise is not None:
                    st.cache = outer             # (the first arm's values are masked by its lanes)
                    nc = b.not_(c)
                    st.mask = nc if old is None else b.and_(old, nc)
                    self.stmt(st, s.otherwise)
                st.mask = old
            elif s.otherwise is None:
                with b.if_then(c):
                    self.stmt(st, s.then)
            else:
                outer = dict(st.cache)
                with b.if_else(c) as (then, other):
                    with then:
                        self.stmt(st, s.then)
                    with other:
                        st.cache = outer         # (what the first arm made is not in the second)
                        self.stmt(st, s.otherwise)
        elif isinstance(s, Store):
            self.store(st, s)
            st.wrote(s.buffer)
        elif isinstance(s, Allocate):
            self.allocate(st, s)
        elif isinstance(s, Assert):
            c = self.expr(st, s.cond)
            saved, st.cache = st.cache, {}       # (values made on the failure path stay there)
            with b.if_then(b.not_(c), likely=False):
                self.fail(st, s.code, s.info)
            st.cache = saved
        elif isinstance(s, Evaluate):
            self.expr(st, s.value)
        else:
            raise InternalError(f"codegen: unexpected statement {type(s).__name__}")

    # ------------------------------------------------------------ hooks (see the module docstring)
    def loop(self, st: _Fn, s: For):
        n = _const_int(s.extent)
        # (inside a vectorized loop too: the channels of a vector of pixels, unroll(c) inside
        # vectorize(x), each then a constant, so selects on c fold)
        if s.kind == "unrolled" and n is not None and n <= 64:
            self.unrolled_for(st, s, n)
        else:
            self.serial_for(st, s)

    def allocate(self, st: _Fn, s: Allocate):
        raise InternalError(f"codegen: {type(self).__name__} cannot allocate {s.name}")

    def fail(self, st: _Fn, code: int, info: tuple):
        raise InternalError(f"codegen: {type(self).__name__} has no run-time errors (code {code})")

    def vector_load(self, st: _Fn, e: Load, base, idx):
        raise InternalError(f"codegen: {type(self).__name__} has no vector loads")

    def store_vector(self, st: _Fn, s: Store, base, idx, v, lanes: int | None):
        raise InternalError(f"codegen: {type(self).__name__} has no vector stores")

    def index_binop(self, st: _Fn, e: BinOp, a, c):
        """`a op c` where one is a symbolic vector index (Ramp, Interleave), kept symbolic; None: not."""
        return None

    def rounding_avg(self, st: _Fn, e: Cast):
        """`e`, a cast in a vectorized loop, as one rounding-average instruction where it is
        one (CodeGenCPU); None: not."""
        return None

    def index_cast(self, st: _Fn, e: Cast, v):
        """A cast of a symbolic vector index kept symbolic; None: not."""
        return None

    def math_call(self, st: _Fn, name: str, args, t: Type):
        raise InternalError(f"codegen: {type(self).__name__} has no math function {name}")

    def emit_print(self, st: _Fn, fmt: str, vals: list):
        """printf(fmt, vals…): each value a double, an i64 or a string pointer."""
        raise InternalError(f"codegen: {type(self).__name__} cannot print")

    def print_call(self, st: _Fn, e: Intrinsic, args):
        """`print(e, …)`: the line as the evaluator prints it, through emit_print."""
        b = st.b
        fmt, vals = [], []

        def add(v, t):
            if t.is_float():
                # the evaluator's (and Halide's runtime) format: f64 in scientific notation,
                # narrower floats with six decimals (hdsl/interp/evaluate.py: _fmt)
                fmt.append("%e" if t.bits == 64 else "%f")
                vals.append(b.fpext(v, ir.DoubleType()) if t.bits < 64 else v)
            elif t.is_bool():
                fmt.append("%s")
                # (the two strings' arrays differ in length: select between pointers to their first bytes)
                first = [ir.Constant(I32T, 0)] * 2
                vals.append(b.select(v, self._cstr("true").gep(first), self._cstr("false").gep(first)))
            else:
                fmt.append("%lld" if t.is_int() else "%llu")
                vals.append(self._widen(st, v, t))
        add(args[0], e.args[0].type)
        j = 1
        for piece in e.extra:
            if piece is None:
                add(args[j], e.args[j].type)
                j += 1
            else:
                fmt.append(piece.replace("%", "%%"))
        self.emit_print(st, " ".join(fmt) + "\n", vals)


    def entry_alloca(self, st: _Fn, t: ir.Type, size: int | None = None):
        """An alloca in the function's entry block (one inside a loop would grow the stack every
        iteration). When st.b itself is still in the entry block it allocates there: llvmlite
        builders insert at an index, so a second builder inserting in b's block would move b's
        insertion point behind the block's terminator."""
        n = None if size is None else ir.Constant(I32T, size)
        if st.b.block is st.fn.entry_basic_block:
            return st.b.alloca(t, size=n)
        entry = ir.IRBuilder(st.fn.entry_basic_block)
        entry.position_at_start(st.fn.entry_basic_block)
        return entry.alloca(t, size=n)

    def buffer_ptr(self, st: _Fn, name: str):
        v = st.syms.get(name)
        if v is None:
            raise InternalError(f"codegen: unknown buffer {name}")
        return v[0]

    # ------------------------------------------------------------ memory
    def store(self, st: _Fn, s: Store):
        b = st.b
        t = s.value.type
        mt = llvm_type(t, True)
        v = self.expr(st, s.value)
        idx = self.expr(st, s.index, keep_ramp=True)
        if isinstance(idx, Interleave):
            idx = self.val(st, idx)
        idx = self.wide_ramp(st, s.index, idx)
        base, idx = self.hoisted_access(st, self.buffer_ptr(st, s.buffer), mt, idx)
        lanes = idx.lanes if isinstance(idx, Ramp) else (idx.type.count if isinstance(idx.type, ir.VectorType)
                                                         else (v.type.count if isinstance(v.type, ir.VectorType)
                                                               else None))
        if lanes is None and st.mask is None:
            if t.is_bool():
                v = b.zext(v, I8T)
            ptr, off = self.hoisted_base(st, base, mt, self.wide_index(st, s.index, idx))
            b.store(v, b.gep(ptr, [off], source_etype=mt))
        else:
            self.store_vector(st, s, base, idx, v, lanes)

    def load(self, st: _Fn, e: Load):
        b = st.b
        t = e.type
        mt = llvm_type(t, True)
        idx = self.wide_ramp(st, e.index, self.expr(st, e.index, keep_ramp=True))
        base, idx = self.hoisted_access(st, self.buffer_ptr(st, e.buffer), mt, idx)
        if isinstance(idx, (Ramp, Interleave)) or isinstance(idx.type, ir.VectorType):
            v = self.vector_load(st, e, base, idx)
            return b.icmp_unsigned("!=", v, K(v, 0)) if t.is_bool() else v
        ptr, off = self.hoisted_base(st, base, mt, self.wide_index(st, e.index, idx))
        v = b.load(b.gep(ptr, [off], source_etype=mt), typ=mt)
        return b.icmp_unsigned("!=", v, ir.Constant(I8T, 0)) if t.is_bool() else v

    # ------------------------------------------------------------ 64-bit addressing
    def wide_index(self, st: _Fn, e: Expr, idx):
        """The scalar offset `e` (whose i32 value is `idx`) for a gep, computed in i64 where
        st.wide_index allows: its + - * are done in 64 bits over sign-extended leaves (loop
        variables, buffer fields, params, and values made by other operators: min, max,
        casts, loads, ...), lets made by + - * expanded into their own expressions (their
        i64 forms inserted after them). LLVM then folds the offset into the addressing and
        widens the loop's induction variable, as it does for Halide (whose i32 arithmetic
        has no signed wrap): a histogram's bin update is a load, an add and a store, not
        two 32-bit sums and two sign extensions per pixel.

        Sound because + - * commute with reduction mod 2^32: the i64 result is the exact
        value of the offset over the leaves' values, the i32 one that value mod 2^32, and
        an offset in bounds (checked before any access: flatten.py) is below 2^31, where
        the two agree. A let's i32 value may have wrapped (a min near -2^31), so lets are
        expanded rather than taken as leaves; a variable whose provenance is not known
        (a ring let passed into a task, see CodeGenCPU.parallel_for) keeps 32 bits."""
        if not st.wide_index or idx.type != I32T:
            return idx
        try:
            return self._wide(st.b, e, lambda n: self._leaf(st, n), st.ring_lets)
        except _NotWide:
            return idx

    def wide_ramp(self, st: _Fn, e: Expr, idx):
        """A vector access's index `idx` (of expression e) with its first lane computed in 64
        bits as wide_index does for scalar offsets, when it is a ramp of constant stride: its
        first lane is e at every variable's first lane, so the same + - * over the leaves'
        first lanes. LLVM then keeps one pointer per access stream in the loop, as for Halide,
        instead of an i32 offset, a sign extension and a spilled counter per load and store."""
        if isinstance(idx, Interleave):
            return self._wide_interleave(st, e, idx)
        if not (st.wide_index and isinstance(idx, Ramp) and isinstance(idx.stride, int) and idx.base.type == I32T):
            return idx
        try:
            return Ramp(self._wide(st.b, e, lambda n: _lane0(self._leaf(st, n)), st.ring_lets), idx.stride, idx.lanes)
        except _NotWide:
            return idx

    def hoisted_access(self, st: _Fn, base, mt, idx):
        """(pointer, index) for a vector access at idx (as wide_ramp gives it) off base: a
        ramp's 64-bit first lane split by hoisted_base, an interleaved index's parts (first
        lanes w0 and w0 + d, _wide_interleave) off the pointer w0's split gives."""
        if isinstance(idx, Ramp) and isinstance(idx.base, ir.Value) and idx.base.type == I64T:
            ptr, off = self.hoisted_base(st, base, mt, idx.base)
            return ptr, Ramp(off, idx.stride, idx.lanes)
        if isinstance(idx, Interleave) and isinstance(idx.parts[0], Ramp) and \
                isinstance(idx.parts[0].base, ir.Value) and idx.parts[0].base.type == I64T:
            w0 = idx.parts[0].base
            if not all(isinstance(p, Ramp) and isinstance(p.base, ir.Value) and p.base.type == I64T
                       for p in idx.parts[1:]):
                return base, idx
            ptr, off = self.hoisted_base(st, base, mt, w0)
            if off is w0:
                return base, idx
            # (part r: off + (w_r - w0), which LLVM folds to w_r's own varying terms)
            b = st.b
            bases = [off] + [b.add(off, b.sub(p.base, w0)) for p in idx.parts[1:]]
            return ptr, Interleave([Ramp(o, p.stride, p.lanes) for o, p in zip(bases, idx.parts)], idx.halves)
        return base, idx

    HOIST_BASES = True            # (off: one offset per access; benchmarks/alias_ab.py)
    HOIST_LIMIT = 12              # pointers hoisted out of one loop at most (then offsets as before)
    HOIST_ACCESSES = 16           # loops with more loads and stores than this hoist none

    def accesses(self, s: Stmt) -> int:
        """The distinct loads and stores in statement s (kept per statement: loops nest)."""
        memo = self._accesses_memo
        got = memo.get(id(s))
        if got is not None and got[0] is s:
            return got[1]
        seen: set = set()
        todo_s, todo_e, n = [s], [], 0
        while todo_s or todo_e:
            if todo_s:
                x = todo_s.pop()
                n += isinstance(x, Store)
                todo_s.extend(children(x))
                todo_e.extend(own_exprs(x))
                continue
            e = todo_e.pop()
            if id(e) in seen:
                continue
            seen.add(id(e))
            n += isinstance(e, Load)
            todo_e.extend(e.children())
        memo[id(s)] = (s, n)
        return n
    _PURE = frozenset(("add", "sub", "mul", "shl", "ashr", "lshr", "and", "or", "xor", "sext", "zext", "trunc"))

    def hoisted_base(self, st: _Fn, base, mt, w):
        """(pointer, offset) for an access at the i64 offset w (in elements of mt) off base,
        inside a serial loop: w's terms (its + and - taken apart) that do not change in the
        innermost loop summed into a pointer of their own, `base + invariant`, the rest left
        as the offset. LLVM hoists that pointer out of the loop, and every access of the
        loop addresses as pointer + shared offset (x86: one addressing mode) instead of
        summing its own offset, and reloading the invariant terms the registers could not
        hold, in every iteration. It is what LLVM's loop strength reduction would do, which
        the CPU code generator leaves out for its compile time (hdsl/runtime/jit.py:
        CODEGEN_OPTIONS): interpolate's level-1 input loop went from 45 to 27 instructions
        for two vectors. Exact: the same sum, in the same wrapping 64-bit arithmetic (no
        `inbounds`), associated otherwise."""
        k = st.loop_from
        if not self.HOIST_BASES or k is None or st.hoisted is None or not isinstance(w, ir.Instruction) \
                or w.type != I64T:
            return base, w
        blocks, pos = st.fn.blocks, st.block_pos
        for j in range(len(pos), len(blocks)):          # (blocks are only ever appended)
            pos[id(blocks[j])] = j
        memo: dict = {}

        def inside(block) -> bool:
            return pos.get(id(block), -1) >= k

        def invariant(v) -> bool:
            if not isinstance(v, ir.Instruction):
                return isinstance(v, (ir.Constant, ir.Argument))
            if not inside(v.parent):
                return True
            got = memo.get(id(v))
            if got is None:
                got = memo[id(v)] = v.opname in self._PURE and all(invariant(x) for x in v.operands)
            return got
        terms = []

        def flatten(v, neg: bool):
            if isinstance(v, ir.Instruction) and v.opname in ("add", "sub") and not invariant(v):
                flatten(v.operands[0], neg)
                flatten(v.operands[1], neg != (v.opname == "sub"))
            else:
                terms.append((invariant(v), neg, v))
        flatten(w, False)
        if all(t[0] for t in terms) or not any(t[0] for t in terms):
            return base, w
        shapes: dict = {}

        def shape(v):             # (the same sum made again for another access: one pointer)
            got = shapes.get(id(v))
            if got is None:
                if isinstance(v, ir.Instruction) and v.opname in self._PURE and inside(v.parent):
                    got = (v.opname,) + tuple(shape(x) for x in v.operands)
                else:
                    got = str(v.constant) if isinstance(v, ir.Constant) else id(v)
                shapes[id(v)] = got
            return got
        if st.hoisted is None:
            return base, w
        key = (id(base), frozenset((shape(v), neg) for inv, neg, v in terms if inv))
        if key not in st.hoisted:
            if len(st.hoisted) >= self.HOIST_LIMIT:
                return base, w
            st.hoisted[key] = True
        b = st.b

        def total(part):
            acc = None
            for _, neg, v in sorted(part, key=lambda t: t[1]):     # (the added terms first)
                acc = (b.neg(v) if neg else v) if acc is None else (b.sub(acc, v) if neg else b.add(acc, v))
            return acc
        inv = total([t for t in terms if t[0]])
        return b.gep(base, [inv], source_etype=mt), total([t for t in terms if not t[0]])

    SHARED_HALVES = True          # (off: part r as lane 0 plus a difference; tests/compiler/test_hoisted_bases.py)
    WIDE_INTERLEAVE = True        # (off: interleaved indices addressed in 32 bits; benchmarks/alias_ab.py)

    def _wide_interleave(self, st: _Fn, e: Expr, idx: Interleave):
        """An interleaved index (`f(x / 2)`: Interleave) with each part's first lane in 64 bits:
        lane 0 of e as wide_ramp makes it (the + - * over the leaves' first lanes), and part r's
        first lane that plus the i32 difference of the parts' first lanes (lane r less lane 0:
        a small exact number, 0 or 1 for `x / 2`, as both lanes are offsets in bounds). Each
        tap then addresses off one pointer per row and channel held outside the loop and one
        64-bit lane offset per vector, shared by every load of the vector, where the i32 sum
        of every tap's row, channel and lane terms was made and sign-extended on its own
        (interpolate's output: 24 loads a vector, each two to four integer instructions)."""
        parts = idx.parts
        if not (st.wide_index and self.WIDE_INTERLEAVE and all(
                isinstance(p, Ramp) and isinstance(p.stride, int) and p.base.type == I32T for p in parts)):
            return idx
        try:
            w0 = self._wide(st.b, e, lambda n: _lane0(self._leaf(st, n)), st.ring_lets)
        except _NotWide:
            return idx
        b = st.b
        own = self._interleave_terms(st, e, len(parts)) if self.SHARED_HALVES else None
        if own is not None:
            rest, halves = own
            return Interleave([Ramp(b.add(rest, b.sext(h.base, I64T)), p.stride, p.lanes)
                               for h, p in zip(halves, parts)], idx.halves)
        out = [Ramp(w0, parts[0].stride, parts[0].lanes)]
        for p in parts[1:]:
            d = b.sub(p.base, parts[0].base)
            out.append(Ramp(b.add(w0, b.sext(d, I64T)), p.stride, p.lanes))
        return Interleave(out, idx.halves)

    def _interleave_terms(self, st: _Fn, e: Expr, k: int):
        """(rest, parts) when e is `t + rest` (t added, once) with t's value an interleaved
        index of k ramp parts and rest the same on every lane: rest in 64 bits and t's parts.
        Part r's first lane is then rest + t's part r's first lane, a form in which the
        halves that `f(x / 2)` and `f((x + 1) / 2)` share ((x + 1) / 2 of the first lane) are
        the same value for LLVM, and so one load. None: e is not of that form."""
        found = []

        def leaf(n):
            v = self._leaf(st, n)
            if isinstance(v, Interleave):
                if found or len(v.parts) != k or not all(
                        isinstance(p, Ramp) and isinstance(p.base, ir.Value) and p.base.type == I32T for p in v.parts):
                    raise _NotWide
                found.append(n)
                return ir.Constant(I32T, 0)
            if isinstance(v, Ramp) or not isinstance(v, ir.Value) or isinstance(v.type, ir.VectorType):
                raise _NotWide
            return v
        try:
            rest = self._wide(st.b, e, leaf, _LaneInvariantLets(st))
        except _NotWide:
            return None
        if not found or not _added_once(e, found[0]):
            return None
        return rest, self._leaf(st, found[0]).parts

    def _leaf(self, st: _Fn, n: Expr):
        if isinstance(n, (Var, Param)):
            v = st.syms.get(n.name)
            v = None if v is None else v[0]
        else:
            v = self.expr(st, n, keep_ramp=True)     # (cached: the i32 index made it just now)
        return v

    def _wide(self, b, e: Expr, leaf, lets, limit=None):
        """e's i64 form, made by b. limit: the instruction b inserts right after, where b is a
        second builder placed there (_wide_let): a ring let's i64 form made earlier further
        down that block (at the main builder's place then) does not dominate it, and is made
        again here."""
        if isinstance(e, Const) and e.type == I32:
            return ir.Constant(I64T, int(e.value))
        if isinstance(e, BinOp) and e.op in _RING and e.type == I32:
            x = self._wide(b, e.a, leaf, lets, limit)
            y = self._wide(b, e.b, leaf, lets, limit)
            return getattr(b, _RING[e.op])(x, y)
        if isinstance(e, Var) and e.name in lets:
            rec = lets[e.name]
            if rec is None:
                raise _NotWide
            w = rec.wide
            if w is not None and limit is not None and w.parent is limit.parent:
                block = limit.parent.instructions
                if block.index(w) > block.index(limit):
                    return self._wide(b, rec.expr, lambda n: rec.leaves.get(id(n)), rec.lets, limit)
            return self._wide_let(b, rec, limit)
        v = leaf(e)
        if not isinstance(v, ir.Value) or v.type != I32T:
            raise _NotWide
        return b.sext(v, I64T)

    def _ring_let(self, st: _Fn, e: Expr, v) -> "_RingLet | None":
        """The record of a ring let just bound to v; None when its i64 form cannot be made.
        (A let of a vectorized loop's ramp is recorded by its first lane: for wide_ramp.)"""
        v = _lane0(v)
        if not isinstance(v, ir.Instruction) or v.type != I32T:
            return None
        leaves, lets = {}, {}

        def walk(n):
            if isinstance(n, Const):
                return True
            if isinstance(n, BinOp) and n.op in _RING and n.type == I32:
                return walk(n.a) and walk(n.b)
            if isinstance(n, Var) and n.name in st.ring_lets:
                lets[n.name] = st.ring_lets[n.name]
                return True
            if isinstance(n, (Var, Param)):
                val = st.syms.get(n.name)
                val = None if val is None else val[0]
            else:
                hit = self.cached(st, n)
                val = None if hit is None else hit[1]
            val = _lane0(val)
            if not isinstance(val, ir.Value) or val.type != I32T:
                return False
            leaves[id(n)] = val
            return True
        ok = walk(e)
        del walk            # (it refers to itself: a cycle left for the collector otherwise)
        return _RingLet(e, v, leaves, lets) if ok else None

    def _wide_let(self, b, rec: _RingLet, limit=None):
        """rec's i64 form, made once, right after its i32 value (so it dominates every use).
        limit: as _wide's, where b is a second builder."""
        if rec.wide is None:
            anchor = rec.anchor
            if b.block is anchor.parent:
                # (the builder is still in the let's block, past its value: made here, it
                # dominates the rest of the let's body; a second builder inserting into this
                # block would leave b's insertion point behind)
                at = b
            else:
                at = ir.IRBuilder(anchor.parent)
                at.position_after(anchor)
                limit = anchor
            rec.wide = self._wide(at, rec.expr, lambda n: rec.leaves.get(id(n)), rec.lets, limit)
        return rec.wide

    def concat(self, st: _Fn, vecs):
        """One vector holding the lanes of `vecs` one after another."""
        b = st.b
        vecs = list(vecs)
        while len(vecs) > 1:
            nxt = []
            for i in range(0, len(vecs) - 1, 2):
                x, y = vecs[i], vecs[i + 1]
                nx, ny = x.type.count, y.type.count
                n = max(nx, ny)
                x, y = self._pad(st, x, n), self._pad(st, y, n)
                nxt.append(b.shuffle_vector(x, y, ir.Constant(ir.VectorType(I32T, nx + ny),
                                                              list(range(nx)) + [n + j for j in range(ny)])))
            if len(vecs) % 2:
                nxt.append(vecs[-1])
            vecs = nxt
        return vecs[0]

    def _pad(self, st: _Fn, v, n: int):
        m = v.type.count
        if m == n:
            return v
        return st.b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined),
                                   ir.Constant(ir.VectorType(I32T, n), list(range(m)) + [0] * (n - m)))

    def interleave(self, st: _Fn, vecs):
        """Lane i of the result is lane i // k of vecs[i % k]."""
        k, m = len(vecs), vecs[0].type.count
        cat = self.concat(st, vecs)
        return st.b.shuffle_vector(cat, ir.Constant(cat.type, ir.Undefined),
                                   ir.Constant(ir.VectorType(I32T, k * m), [(i % k) * m + i // k for i in range(k * m)]))

    # ------------------------------------------------------------ loops
    def serial_for(self, st: _Fn, s: For):
        b = st.b
        lo = self.expr(st, s.min)
        ext = self.expr(st, s.extent)
        hi = b.add(lo, ext)
        pre = b.block
        head = st.fn.append_basic_block(f"{s.var}.head")
        body = st.fn.append_basic_block(f"{s.var}.body")
        done = st.fn.append_basic_block(f"{s.var}.end")
        # a loop of extent <= 0 runs no iteration, as in the evaluator, even where lo + ext
        # wraps past lo (an rdom from i32(NaN) = -2^31 to 4 has a wrapped, negative extent)
        b.cbranch(b.icmp_signed(">", ext, ir.Constant(I32T, 0)), head, done)
        b.position_at_end(head)
        outer_loop, st.loop_from = st.loop_from, len(st.fn.blocks) - 3
        outer_hoisted, st.hoisted = st.hoisted, ({} if self.accesses(s.body) <= self.HOIST_ACCESSES else None)
        i = b.phi(I32T, name=s.var)
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", i, hi), body, done)
        b.position_at_end(body)
        old = st.syms.get(s.var)
        st.syms[s.var] = (i, I32)
        self.stmt(st, s.body)
        nxt = b.add(i, ir.Constant(I32T, 1), flags=("nsw",))     # (i < hi: no overflow)
        st.loop_from, st.hoisted = outer_loop, outer_hoisted
        i.add_incoming(nxt, b.block)
        back = b.branch(head)
        if s.var.endswith(NARROW_LANES):
            # a narrow region's lanes (lower/partition.py), at most a vector's worth and run
            # only where a region is narrower than one: LLVM vectorizing and unrolling them
            # again cost about a sixth of the local Laplacian's LLVM time for nothing
            back.set_metadata("llvm.loop", _LoopID(self.module, [
                self.module.add_metadata([ir.MetaDataString(self.module, "llvm.loop.vectorize.enable"),
                                          ir.Constant(ir.IntType(1), 0)]),
                self.module.add_metadata([ir.MetaDataString(self.module, "llvm.loop.unroll.disable")])]))
        b.position_at_end(done)
        self._restore(st, s.var, old)

    @staticmethod
    def _restore(st, name, old):
        if old is None:
            del st.syms[name]
        else:
            st.syms[name] = old

    def unrolled_for(self, st: _Fn, s: For, n: int):
        """The n iterations one after another. Lets and guards at the top of the body that do
        not depend on the loop var are made once, around all of them (unrolled_hoist), and a
        value made by one iteration that does not depend on the loop var is reused by the
        next (the output of interpolate made its alpha once per channel: three times)."""
        hoisted = unrolled_hoist(s) if n >= 1 else None
        if hoisted is not None:
            self.stmt(st, hoisted)
            return
        self.per_residue(st, s, lambda lo: self._unrolled(st, s, n, lo))

    def _unrolled(self, st: _Fn, s: For, n: int, lo):
        old = st.syms.get(s.var)
        written = {name for name, u in mentioned(s.body).items() if u.kind == "buffer" and u.written}
        varies: dict[int, bool] = {}
        carried: dict = st.cache       # (what the loop's scope keeps: CodeGenLLVM.stmt)
        lo_c = _const_of(lo)
        for k in range(n):
            # (a constant where the loop's min is one: selects and guards on the var then
            # choose their arm here, straight-line code whose values the next iteration reuses)
            st.syms[s.var] = (ir.Constant(I32T, lo_c + k) if lo_c is not None and -2 ** 31 <= lo_c + k < 2 ** 31
                              else self.plus_known(st, st.b.add(lo, ir.Constant(I32T, k)), lo, k), I32)
            # (the loop var has a new value: only what does not depend on it still holds; what
            # is left cached after the body was made in its straight-line part, which
            # dominates the next iteration)
            st.cache = carried
            self.stmt(st, s.body)
            carried = {i: hit for i, hit in st.cache.items()
                       if not _varies(hit[0], s.var, written, varies)}
        self._restore(st, s.var, old)

    # ------------------------------------------------------------ loops by residue
    # `select(x % 2 == 0, a, b)` in an unrolled or vectorized loop over x (the Bayer
    # interleavings of camera_pipe's demosaic) chooses its arm by the parity of the loop's
    # first value. Where that is known only at run time, each select would branch (or blend)
    # on it, every time the loop runs: twelve branches per tile of camera_pipe, each arm's
    # values unshared with the other channels'. Instead the loop is generated once per
    # residue of its first value modulo k (a switch around the copies): in each copy the
    # residue is a known constant (st.known), `x % k` folds, every select chooses its arm
    # while generating, and the chosen arms are one straight-line stretch whose common
    # values are made once. Halide gets the same from knowing the parities statically
    # (ModulusRemainder on the output's bound). The copies are at most 2 x 2 deep: a loop
    # nested in a copy splits only while fewer than _RESIDUE_COPIES copies would result.
    _RESIDUE_COPIES = 4

    def residue_split(self, st: _Fn, s: For, lo) -> int | None:
        """k when loop s (first value lo) is worth generating once per residue of lo mod k:
        a select or guard in its body tests `s.var % k` (or `(s.var + c) % k`), k a power of
        two up to 4, lo is not a constant nor of known residue already, and the copies stay
        within _RESIDUE_COPIES. None: generate it once."""
        if _const_of(lo) is not None or not isinstance(lo.type, ir.IntType) or lo.type.width != 32:
            return None
        memo = self._residue_memo
        got = memo.get(id(s))
        if got is None or got[0] is not s:
            got = memo[id(s)] = (s, _residue_tested(s))
        k = got[1]
        if k is None or self.known_rem(st, lo, k) is not None:
            return None
        return k if st.copies * k <= self._RESIDUE_COPIES else None

    # Off: interpolate on AVX2 took 3.3% less CPU with it (host 2.8%), but its cold compile
    # 40% more time and the local Laplacian's 17-20% more, for no gain there (each copy is a
    # whole vector body; benchmarks/alias_ab.py --switch LET_RESIDUES). Splitting only the
    # loads, not the arithmetic after them, would keep most of the gain: not built.
    LET_RESIDUES = False

    def let_residue_split(self, st: _Fn, s: LetStmt, v) -> int | None:
        """k where a let of the vectorized loop, a ramp of a stride not a multiple of k, is
        divided by k in its body (`x / 2`, `(x + 1) / 2`: upsampling) and the residue of its
        first lane mod k is not known: the body is then generated once per residue of it
        (by_residue, a switch per vector that always takes the same arm where the ramp's
        start moves by a multiple of k), and in each copy `x / k` is a known shift of one
        base (x / 2 and (x + 1) / 2 of an even x read one vector: cpu's _ramp_binop)."""
        if not self.LET_RESIDUES or not isinstance(v, Ramp) or not isinstance(v.stride, int) \
                or not isinstance(v.base.type, ir.IntType) or v.base.type.width != 32:
            return None
        memo = self._residue_memo
        got = memo.get(id(s))
        if got is None or got[0] is not s:
            got = memo[id(s)] = (s, _divided_by(s.body, s.name))
        k = got[1]
        if k is None or v.stride % k == 0 or self.known_rem(st, v.base, k) is not None:
            return None
        return k if st.copies == 1 else None

    def per_residue(self, st: _Fn, s: For, gen) -> None:
        """gen(first value of loop s), once per residue of it where residue_split says so."""
        lo = self.expr(st, s.min)
        k = self.residue_split(st, s, lo)
        if k is None:
            gen(lo)
        else:
            self.by_residue(st, lo, k, lambda: gen(lo))

    def by_residue(self, st: _Fn, v, k: int, gen) -> None:
        """gen() once per residue r of v mod k, under a switch on v & (k - 1), with v ≡ r
        (mod k) known in each copy (st.known)."""
        b = st.b
        rem = b.and_(v, ir.Constant(v.type, k - 1))
        blocks = [st.fn.append_basic_block(f"residue{r}") for r in range(k)]
        done = st.fn.append_basic_block("residue.end")
        sw = b.switch(rem, blocks[-1])
        for r in range(k - 1):
            sw.add_case(ir.Constant(v.type, r), blocks[r])
        saved, known = st.cache, st.known
        st.copies *= k
        try:
            for r, blk in enumerate(blocks):
                b.position_at_end(blk)
                st.cache = dict(saved)          # (values made in a copy stay in it, and so
                st.known = dict(known)          # does what is known of them)
                st.known[id(v)] = (v, k, r)
                gen()
                b.branch(done)
        finally:
            st.cache, st.known = saved, known
            st.copies //= k
        b.position_at_end(done)

    @staticmethod
    def known_rem(st: _Fn, v, d: int) -> int | None:
        """v mod d (d > 0, a power of two) where it is known while generating: v a constant,
        or a value of known residue mod a multiple of d (st.known). None: not known."""
        c = _const_of(v)
        if c is not None:
            return c % d
        hit = st.known.get(id(v))
        if hit is None or hit[0] is not v or hit[1] % d:
            return None
        return hit[2] % d

    @staticmethod
    def plus_known(st: _Fn, v, src, delta: int):
        """v (= src + delta): of known residue where src's is known (returns v)."""
        hit = st.known.get(id(src))
        if hit is not None and hit[0] is src:
            st.known[id(v)] = (v, hit[1], (hit[2] + delta) % hit[1])
        return v

    # ------------------------------------------------------------ expressions
    def splat(self, st: _Fn, v, lanes: int):
        if isinstance(v, (Ramp, Interleave)):
            return self.val(st, v, lanes)
        if isinstance(v.type, ir.VectorType):
            return v
        b = st.b
        vt = ir.VectorType(v.type, lanes)
        if isinstance(v, ir.Constant) and not isinstance(v.constant, (list, tuple)):
            return splat_constant(vt, v)
        if isinstance(v, ir.Constant):
            return ir.Constant(vt, [v] * lanes)
        one = b.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(I32T, 0))
        return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), splat_constant(ir.VectorType(I32T, lanes),
                                                                                 ir.Constant(I32T, 0)))

    def val(self, st: _Fn, v, lanes: int | None = None):
        """A plain LLVM value: ramps become vectors."""
        if isinstance(v, Interleave):
            return self.interleave(st, [self.val(st, p) for p in v.parts])
        if not isinstance(v, Ramp):
            return v
        b = st.b
        et = v.base.type
        if isinstance(v.stride, int) and v.stride == 0:
            return self.splat(st, v.base, v.lanes)
        if isinstance(v.stride, int):
            steps = ir.Constant(ir.VectorType(et, v.lanes), [k * v.stride for k in range(v.lanes)])
        else:
            steps = b.mul(self.splat(st, v.stride, v.lanes), ir.Constant(ir.VectorType(et, v.lanes), list(range(v.lanes))))
        return b.add(self.splat(st, v.base, v.lanes), steps)

    # strides of ramps: Python ints, or scalar LLVM values
    def expr(self, st: _Fn, e: Expr, keep_ramp: bool = False):
        # common subexpressions (expressions are interned DAGs) are generated once per
        # straight-line stretch; the cache is dropped wherever control flow or bindings change
        hit = self.cached(st, e)
        if hit is not None:
            v = hit[1]
        else:
            v = self._expr(st, e)
            if not isinstance(e, (Const, Var, Param)):
                st.cache[id(e)] = (e, v, st.clock)
        return v if keep_ramp else self.val(st, v)

    def _expr(self, st: _Fn, e: Expr):
        b = st.b
        t = e.type
        if isinstance(e, Const):
            return _c(t, e.value)
        if isinstance(e, (Var, Param)):
            v = st.syms.get(e.name)
            if v is None:
                raise InternalError(f"codegen: unbound variable {e.name}")
            return v[0]
        if isinstance(e, Load):
            return self.load(st, e)
        if isinstance(e, Cast):
            if st.lanes is not None and (r := self.rounding_avg(st, e)) is not None:
                return r
            v = self.expr(st, e.value, keep_ramp=True)
            if isinstance(v, (Ramp, Interleave)):
                r = self.index_cast(st, e, v)
                if r is not None:
                    return r
                v = self.val(st, v)
            return self.cast(st, t, v, e.value.type, e.saturate)
        if isinstance(e, BinOp):
            a = self.expr(st, e.a, keep_ramp=True)
            c = self.expr(st, e.b, keep_ramp=True)
            if isinstance(a, (Ramp, Interleave)) or isinstance(c, (Ramp, Interleave)):
                r = self.index_binop(st, e, a, c)
                if r is not None:
                    return r
            a, c = self.unify(st, self.val(st, a), self.val(st, c))
            if e.op in ("<<", ">>"):
                return self.shift(st, e.op, a, c, e.a.type, e.b.type)
            if st.known and not t.is_float() and not isinstance(a.type, ir.VectorType):
                d = _const_of(c)
                if e.op == "%" and d is not None and d > 0 and d & (d - 1) == 0 \
                        and (r := self.known_rem(st, a, d)) is not None:
                    return ir.Constant(a.type, r)          # (a loop copy of known residue)
                if e.op in ("+", "-") and d is not None and id(a) in st.known:
                    return self.plus_known(st, self.binop(st, e.op, a, c, e.a.type), a, d if e.op == "+" else -d)
            return self.binop(st, e.op, a, c, e.a.type)
        if isinstance(e, Unary):
            a = self.expr(st, e.a)
            if e.op == "-":
                # Halide's -x is 0 - x (so -(0.0) is +0.0), as the evaluator
                return b.fsub(K(a, 0.0), a) if t.is_float() else b.sub(K(a, 0), a)
            return b.not_(a)
        if isinstance(e, Select):
            if st.lanes is not None:
                v = self.vector_select(st, e)
                if v is not None:
                    return v
            c = self.expr(st, e.cond)
            if st.lanes is not None and t.is_float() and not isinstance(c.type, ir.VectorType) and \
                    any(isinstance(n, Load) for x in (e.t, e.f) for n in walk(x)):
                # (a side that reads memory is not computed for nothing, however cheap: a
                # boundary's other side, read through clamped coordinates, is a gather in a
                # lane-major loop)
                return self.branch_select(st, c, e.t, e.f, st.lanes)
            x, y = self.unify(st, self.expr(st, e.t), self.expr(st, e.f))
            if isinstance(x.type, ir.VectorType) and not isinstance(c.type, ir.VectorType):
                c = self.splat(st, c, x.type.count)
            elif isinstance(c.type, ir.VectorType) and not isinstance(x.type, ir.VectorType):
                x, y = self.splat(st, x, c.type.count), self.splat(st, y, c.type.count)
            return b.select(c, x, y)
        if isinstance(e, Intrinsic):
            return self.intrinsic_call(st, e)
        raise InternalError(f"codegen: unexpected expression {type(e).__name__}")

    # ------------------------------------------------------------ selects in vector code
    # A select in a vectorized loop normally computes both arms on every lane and blends
    # them. Two common conditions need far less: one the same on every lane (`y % 2 == 0`
    # for an unrolled y, a parameter test), where only the chosen arm has to be computed, and
    # one the same on every k-th lane (`x % 2 == 0` for the vectorized x: Bayer interleaving,
    # the demosaic of camera_pipe), where each of the k interleaved lane sets needs only its
    # own arm, and each arm at x / k is a dense vector of lanes / k (no duplicated lanes).
    # Halide gets the same from knowing the parities (ModulusRemainder) and from its
    # interleave rewrites; here the parities may be known only at run time, so each lane
    # set branches to its arm (a condition the same for the whole loop predicts perfectly).
    _BRANCH_COST = 8       # arms with fewer operations than this are blended, not branched to

    def vector_select(self, st: _Fn, e: Select):
        """`e` in a vectorized loop when its condition is uniform over all lanes or over each
        of k interleaved lane sets; None: an ordinary blend."""
        c = self.expr(st, e.cond, keep_ramp=True)
        if isinstance(c, Interleave) and all(isinstance(p, Ramp) and isinstance(p.stride, int) and p.stride == 0
                                             for p in c.parts) and st.lanes % len(c.parts) == 0:
            k = len(c.parts)
            outs = []
            for r, p in enumerate(c.parts):
                with self._lane_set(st, r, k):
                    outs.append(self._uniform_select(st, p.base, e.t, e.f, st.lanes))
            return self.interleave(st, outs)
        if isinstance(c, Ramp) and isinstance(c.stride, int) and c.stride == 0:
            c = c.base
        if isinstance(c, (Ramp, Interleave)) or isinstance(c.type, ir.VectorType):
            return None
        if not isinstance(c, ir.Constant) and self._cost(st, e.t) + self._cost(st, e.f) < self._BRANCH_COST:
            return None
        return self._uniform_select(st, c, e.t, e.f, st.lanes)

    def _uniform_select(self, st: _Fn, c, te: Expr, fe: Expr, lanes: int):
        """select(c, te, fe) for a scalar i1 c, as a vector of `lanes`: the chosen arm only
        (a constant c), a blend (cheap arms) or a branch to each arm."""
        b = st.b
        if isinstance(c, ir.Constant):
            return self.splat(st, self.expr(st, te if c.constant else fe), lanes)
        if self._cost(st, te) + self._cost(st, fe) < self._BRANCH_COST:
            return b.select(c, self.splat(st, self.expr(st, te), lanes), self.splat(st, self.expr(st, fe), lanes))
        return self.branch_select(st, c, te, fe, lanes)

    def branch_select(self, st: _Fn, c, te: Expr, fe: Expr, lanes: int):
        """select(c, te, fe) for a scalar i1 c, as a vector of `lanes`: a branch to each arm,
        so only the chosen one is computed."""
        b = st.b
        saved = st.cache
        arms = []
        with b.if_else(c) as (then, other):
            for blk, arm in ((then, te), (other, fe)):
                with blk:
                    st.cache = dict(saved)          # (values made in an arm stay in it)
                    arms.append((self.splat(st, self.expr(st, arm), lanes), b.block))
        st.cache = saved
        v = b.phi(arms[0][0].type)
        for val, blk in arms:
            v.add_incoming(val, blk)
        return v

    def _cost(self, st: _Fn, e: Expr, limit: int = 64) -> int:
        """The operations of e not yet generated (cached), counted up to about `limit`."""
        seen, todo, n = set(), [e], 0
        while todo and n < limit:
            x = todo.pop()
            if id(x) in seen or id(x) in st.cache or isinstance(x, (Const, Var, Param)):
                continue
            seen.add(id(x))
            n += 1
            todo.extend(x.children())
        return n

    def _lane_set(self, st: _Fn, r: int, k: int):
        """A context in which the vectorized loop's values are restricted to lanes r, r + k,
        r + 2k, … (ramps stay ramps of k times the stride; other vectors are shuffled)."""
        cg = self

        class _Ctx:
            def __enter__(self_):
                self_.saved = (st.syms, st.lanes, st.mask, st.cache)
                lanes = st.lanes
                st.syms = {n: (cg._lanes_of(st, v, r, k, lanes), t) for n, (v, t) in st.syms.items()}
                st.mask = None if st.mask is None else cg._lanes_of(st, st.mask, r, k, lanes)
                # (values the same on every lane, made already, hold in the lane set too)
                st.cache = {i: hit for i, hit in st.cache.items()
                            if isinstance(hit[1], ir.Value) and not isinstance(hit[1].type, ir.VectorType)}
                st.lanes = lanes // k
                # (ring lets that vary over the lanes were recorded by the first lane of all
                # of them: not this set's; wide_index and wide_ramp then expand or skip them)
                self_.rings = st.ring_lets
                st.ring_lets = {n: (None if isinstance(self_.saved[0].get(n, (None,))[0], (Ramp, Interleave))
                                    or isinstance(getattr(self_.saved[0].get(n, (None,))[0], "type", None),
                                                  ir.VectorType) else rec)
                                for n, rec in st.ring_lets.items()}

            def __exit__(self_, *exc):
                st.syms, st.lanes, st.mask, st.cache = self_.saved
                st.ring_lets = self_.rings
        return _Ctx()

    def _lanes_of(self, st: _Fn, v, r: int, k: int, lanes: int):
        """Lanes r, r + k, … of v, a value of the vectorized loop (`lanes` wide) or a scalar."""
        b = st.b
        if isinstance(v, Ramp) and v.lanes == lanes:
            if isinstance(v.stride, int):
                base = v.base if r == 0 or v.stride == 0 else \
                    self.plus_known(st, b.add(v.base, ir.Constant(v.base.type, r * v.stride)), v.base, r * v.stride)
                return Ramp(base, v.stride * k, lanes // k)
            base = v.base if r == 0 else b.add(v.base, b.mul(v.stride, ir.Constant(v.stride.type, r)))
            return Ramp(base, b.mul(v.stride, ir.Constant(v.stride.type, k)), lanes // k)
        if isinstance(v, Interleave) and v.lanes == lanes and len(v.parts) == k:
            return v.parts[r]
        if isinstance(v, (Ramp, Interleave)):
            v = self.val(st, v)
        if isinstance(v, ir.Value) and isinstance(v.type, ir.VectorType) and v.type.count == lanes:
            return b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined),
                                    ir.Constant(ir.VectorType(I32T, lanes // k), list(range(r, lanes, k))))
        return v

    def unify(self, st: _Fn, x, y):
        """Make a scalar and a vector operand both vectors."""
        xv, yv = isinstance(x.type, ir.VectorType), isinstance(y.type, ir.VectorType)
        if xv and not yv:
            return x, self.splat(st, y, x.type.count)
        if yv and not xv:
            return self.splat(st, x, y.type.count), y
        return x, y

    def _widen(self, st, v, t: Type, to=I64T):
        to = shaped(v, to)
        if v.type == to:
            return v
        if t.is_int():
            return st.b.sext(v, to)
        return st.b.zext(v, to)

    def binop(self, st: _Fn, op: str, a, b_, t: Type):
        b = st.b
        flt = t.is_float()
        if op in ("+", "-", "*"):
            if flt:
                return self._fast({"+": b.fadd, "-": b.fsub, "*": b.fmul}[op](a, b_))
            if t.is_bool() and op == "*":
                return b.and_(a, b_)
            return {"+": b.add, "-": b.sub, "*": b.mul}[op](a, b_)
        if op in ("/", "%"):
            if flt:
                q = self._fast(b.fdiv(a, b_))
                if op == "/":
                    return q
                fl = b.call(self.intrinsic("floor", a.type), [q])
                return b.fsub(a, b.fmul(b_, fl))
            return self.int_divmod(st, op, a, b_, t)
        if op in ("min", "max"):
            if flt:
                # select(a < b, a, b) (and > for max), as Halide and the evaluator: NaN not propagated
                return b.select(b.fcmp_ordered("<" if op == "min" else ">", a, b_), a, b_)
            # (LLVM's intrinsic, which InstCombine would make of the compare and select anyway:
            # one instruction, where the bounds code of a large pipeline has thousands)
            name = ("s" if t.is_int() else "u") + op
            return b.call(self.intrinsic(name, a.type, 2), [a, b_])
        if op in ("==", "!=", "<", "<=", ">", ">="):
            x, y = _const_of(a), _const_of(b_)
            if not flt and x is not None and y is not None:
                # (two constants, such as `c < 3` of an unrolled c: a constant, so a select on
                # it chooses its arm in codegen, vector_select)
                if not t.is_int():
                    x, y = x & ((1 << a.type.width) - 1), y & ((1 << a.type.width) - 1)
                return ir.Constant(I1T, int(_COMPARE[op](x, y)))
            if flt:
                return b.fcmp_unordered(op, a, b_) if op == "!=" else b.fcmp_ordered(op, a, b_)
            if t.is_int():
                return b.icmp_signed(op, a, b_)
            return b.icmp_unsigned(op, a, b_)
        if op in ("&&", "&"):
            return b.and_(a, b_)
        if op in ("||", "|"):
            return b.or_(a, b_)
        if op == "^":
            return b.xor(a, b_)
        raise InternalError(f"codegen: operator {op}")

    def _fast(self, instr):
        """With fast_math, Halide's default float rewrites: FMA contraction and reciprocals."""
        if self.fast_math:
            instr.flags.extend(["contract", "arcp"])
        return instr

    def int_divmod(self, st: _Fn, op: str, a, b_, t: Type):
        b = st.b
        zero, one = K(a, 0), K(a, 1)
        k = _const_of(b_)
        if k is not None and (k > 0 or not t.is_int()) and k != 0:
            # a positive constant divisor (any nonzero one, unsigned): no zero or -1 cases
            if not t.is_int():
                return b.udiv(a, b_) if op == "/" else b.urem(a, b_)
            if k & (k - 1) == 0:
                # a power of two: floor division is an arithmetic shift and the non-negative
                # remainder a mask (one instruction each, where sdiv/srem/fix-up were five,
                # thousands of times over in a pyramid's bounds)
                if op == "/":
                    return b.ashr(a, K(a, k.bit_length() - 1))
                return b.and_(a, K(a, k - 1))
            q = b.sdiv(a, b_)
            r = b.srem(a, b_)
            neg = b.icmp_signed("<", r, zero)
            if op == "/":
                return b.select(neg, b.sub(q, one), q)
            return b.select(neg, b.add(r, b_), r)
        is_zero = b.icmp_unsigned("==", b_, zero)
        if not t.is_int():
            safe = b.select(is_zero, one, b_)
            r = b.udiv(a, safe) if op == "/" else b.urem(a, safe)
            return b.select(is_zero, zero, r)
        is_m1 = b.icmp_signed("==", b_, K(a, -1))
        safe = b.select(b.or_(is_zero, is_m1), one, b_)
        q = b.sdiv(a, safe)
        r = b.srem(a, safe)
        neg = b.icmp_signed("<", r, zero)
        bpos = b.icmp_signed(">", safe, zero)
        # Euclidean: make the remainder non-negative
        q_fix = b.select(bpos, b.sub(q, one), b.add(q, one))
        r_fix = b.select(bpos, b.add(r, safe), b.sub(r, safe))
        q = b.select(neg, q_fix, q)
        r = b.select(neg, r_fix, r)
        if op == "/":
            q = b.select(is_m1, b.sub(zero, a), q)
            return b.select(is_zero, zero, q)
        r = b.select(is_m1, zero, r)
        return b.select(is_zero, zero, r)

    def shift(self, st: _Fn, op: str, a, amt, t: Type, amount_type: Type):
        b = st.b
        bits = t.bits
        amount = self._widen(st, amt, amount_type)
        if op == ">>":
            amount = b.sub(K(amount, 0), amount)
        zero64, c63 = K(amount, 0), K(amount, 63)

        def clip(v):
            v = b.select(b.icmp_signed("<", v, zero64), zero64, v)
            return b.select(b.icmp_signed(">", v, c63), c63, v)
        left = clip(amount)
        right = clip(b.sub(zero64, amount))
        wide = self._widen(st, a, t)
        sl = b.shl(wide, left)
        if t.is_int():
            cap = K(amount, bits - 1)
            sr = b.ashr(wide, b.select(b.icmp_signed(">", right, cap), cap, right))
        else:
            sr = b.select(b.icmp_signed(">=", right, K(amount, bits)), zero64, b.lshr(wide, right))
        out = b.select(b.icmp_signed(">=", amount, zero64), sl, sr)
        return b.trunc(out, a.type) if t.bits < 64 else out

    def cast(self, st: _Fn, t: Type, v, src: Type, saturate: bool = False):
        b = st.b
        if saturate:
            v, src = self.saturate(st, t, v, src)
        if t == src:
            return v
        lt = shaped(v, llvm_type(t))
        if t.is_bool():
            if src.is_float():
                return b.fcmp_unordered("!=", v, K(v, 0.0))
            return b.icmp_unsigned("!=", v, K(v, 0))
        if t.is_float():
            if src.is_float() and src.bits == 64 and t.bits == 16:
                return b.fptrunc(self.f64_to_f32_round_to_odd(st, v), lt)
            if src.is_float():
                return b.fpext(v, lt) if t.bits > src.bits else b.fptrunc(v, lt)
            if src.is_int():
                return b.sitofp(v, lt)
            return b.uitofp(v, lt)
        if src.is_float() and src.bits == 16:
            # f16 -> f32 is exact, and f16 cannot hold the range bounds compared below (2^31)
            v, src = b.fpext(v, shaped(v, F32T)), F32
        if src.is_float() and src.bits == 32 and t.bits <= 32 and not (t.is_uint() and t.bits == 32):
            # f32 -> i32 toward zero, INT_MIN for NaN and anything outside i32 (the target's
            # hook: one instruction on x86); narrower types then check the i32 against their
            # own range
            r = self.float_to_i32(st, v)
            if t.bits == 32:
                return r
            lo = int(t.min_value())
            ok = b.icmp_unsigned("<", b.sub(r, K(r, lo)), K(r, 1 << t.bits))
            return b.trunc(b.select(ok, r, K(r, lo)), lt)
        if src.is_float():
            # (f64 sources, and u32 / 64-bit results) truncated toward zero; out of t's range
            # (or NaN) gives t's minimum. Compared in the source's own float type (t's bounds
            # are powers of two, exact there), converted through i32 where t fits in it
            tv = b.call(self.intrinsic("trunc", v.type), [v])
            lo = float(t.min_value())
            hi = 2.0 ** (t.bits if t.is_uint() else t.bits - 1)
            ok = b.and_(b.fcmp_ordered(">=", tv, K(v, lo)), b.fcmp_ordered("<", tv, K(v, hi)))
            tv = b.select(ok, tv, K(v, lo))
            if t.is_uint() and t.bits == 64:
                return b.fptoui(tv, lt)
            wide = I64T if t.bits == 64 or (t.is_uint() and t.bits == 32) else I32T
            r = b.fptosi(tv, shaped(v, wide))
            return b.trunc(r, lt) if t.bits < wide.width else r
        sw = (v.type.element if isinstance(v.type, ir.VectorType) else v.type).width
        tw = llvm_type(t).width
        if tw < sw:
            return b.trunc(v, lt)
        if tw > sw:
            return b.sext(v, lt) if src.is_int() else b.zext(v, lt)
        return v

    def f64_to_f32_round_to_odd(self, st: _Fn, v):
        """f64 -> f32 rounded to odd (toward zero, then the lowest mantissa bit set when inexact),
        so that rounding that f32 to f16 gives the f64's correctly rounded f16 (24 bits >= 11 + 2):
        LLVM lowers a direct f64 -> f16 fptrunc to a call of __truncdfhf2, which the JIT cannot
        resolve (the call jumped to address 0)."""
        b = st.b
        f = b.fptrunc(v, shaped(v, F32T))
        i32 = shaped(v, I32T)
        back = b.fpext(f, v.type)
        fabs = self.intrinsic("fabs", v.type)
        # rounded away from zero: step the magnitude back by one ulp (|f| > |v| >= 0: f != 0)
        away = b.fcmp_ordered(">", b.call(fabs, [back]), b.call(fabs, [v]))
        fb = b.bitcast(f, i32)
        fb = b.select(away, b.sub(fb, K(fb, 1)), fb)
        inexact = b.fcmp_ordered("!=", back, v)
        fb = b.select(inexact, b.or_(fb, K(fb, 1)), fb)
        return b.bitcast(fb, f.type)

    def float_to_i32(self, st: _Fn, v):
        """f32 (scalar or vector) -> i32 toward zero; INT_MIN for NaN and out of range. Generic:
        a range check around fptosi, whose out-of-range result is poison (and whose PTX
        instruction, cvt.rzi, saturates and gives 0 for NaN)."""
        b = st.b
        tv = b.call(self.intrinsic("trunc", v.type), [v])
        ok = b.and_(b.fcmp_ordered(">=", tv, K(v, -2.0 ** 31)), b.fcmp_ordered("<", tv, K(v, 2.0 ** 31)))
        return b.fptosi(b.select(ok, tv, K(v, -2.0 ** 31)), shaped(v, I32T))

    def saturate(self, st: _Fn, t: Type, v, src: Type):
        """Clamp into t's range (hdsl/interp/scalar.py: _saturate); returns (value, its type)."""
        b = st.b
        if t.is_float():
            # a float type's range is [-inf, inf]: nothing to clamp (Halide)
            return v, src
        lo, hi = (0, 1) if t.is_bool() else (t.min_value(), t.max_value())
        if src.is_float():
            D = shaped(v, ir.DoubleType())
            w = b.fpext(v, D) if src.bits < 64 else v
            w = b.select(b.fcmp_unordered("uno", w, w), K(D, 0.0), w)
            over = b.fcmp_ordered(">=", w, K(D, float(hi)))
            under = b.fcmp_ordered("<=", w, K(D, float(lo)))
            it = t if not t.is_bool() else Type("uint", 8)
            inner = self.cast(st, it, b.select(b.or_(over, under), K(D, 0.0), w), F64)
            res = b.select(over, K(inner, hi), inner)
            res = b.select(under, K(inner, lo), res)
            return res, it
        if src.is_uint() or src.is_bool():
            w = self._widen(st, v, src)
            cap = K(w, max(hi, 0))
            w = b.select(b.icmp_unsigned(">", w, cap), cap, w)
            return w, Type("uint", 64)
        w = self._widen(st, v, src)
        lo_c = K(w, max(lo, -(2 ** 63)))
        hi_c = K(w, min(hi, 2 ** 63 - 1))
        w = b.select(b.icmp_signed("<", w, lo_c), lo_c, w)
        w = b.select(b.icmp_signed(">", w, hi_c), hi_c, w)
        return w, I64

    def intrinsic_call(self, st: _Fn, e: Intrinsic):
        b = st.b
        t = e.type
        name = e.name
        args = [self.expr(st, a) for a in e.args]
        if len(args) > 1:
            lanes = max((a.type.count for a in args if isinstance(a.type, ir.VectorType)), default=None)
            if lanes:
                args = [self.splat(st, a, lanes) for a in args]
        if name in ("sqrt", "floor", "ceil", "trunc"):
            return b.call(self.intrinsic(name, args[0].type), [args[0]])
        if name == "round":
            return b.call(self.intrinsic("roundeven", args[0].type), [args[0]])
        if name in LIBM1 or name in ("pow", "atan2"):
            return self.math_call(st, LIBM1.get(name, name), args, t)
        if name == "is_nan":
            return b.fcmp_unordered("uno", args[0], args[0])
        if name in ("is_inf", "is_finite"):
            # |x| == inf, |x| < inf (both false for NaN: Halide's is_finite is !is_inf && !is_nan)
            mag = b.call(self.intrinsic("fabs", args[0].type), [args[0]])
            lt = args[0].type
            if isinstance(lt, ir.VectorType):
                inf = ir.Constant(lt, [ir.Constant(lt.element, float("inf"))] * lt.count)
            else:
                inf = ir.Constant(lt, float("inf"))
            return b.fcmp_ordered("==" if name == "is_inf" else "<", mag, inf)
        if name == "abs":
            at = e.args[0].type
            a = args[0]
            if at.is_float():
                return b.call(self.intrinsic("fabs", a.type), [a])
            if at.is_int():
                return b.select(b.icmp_signed("<", a, K(a, 0)), b.sub(K(a, 0), a), a)
            return a
        if name == "absd":
            at = e.args[0].type
            x, y = args
            if at.is_float():
                return b.call(self.intrinsic("fabs", x.type), [b.fsub(x, y)])
            gt = b.icmp_signed(">", x, y) if at.is_int() else b.icmp_unsigned(">", x, y)
            return b.select(gt, b.sub(x, y), b.sub(y, x))
        if name == "lerp":
            return self.lerp(st, e, args)
        if name == "print":
            st.printed = True
            self.print_call(st, e, args)
            return args[0]
        raise InternalError(f"codegen: intrinsic {name}")

    def lerp(self, st: _Fn, e: Intrinsic, args):
        b = st.b
        t = e.type
        wt = e.args[2].type
        z, o, w = args
        if t.is_float():
            if wt.is_float():
                wv = self.cast(st, t, w, wt)
            else:
                D = shaped(w, ir.DoubleType())
                wd = b.uitofp(w, D)
                wv = self.cast(st, t, b.fdiv(wd, K(D, float(2 ** wt.bits - 1))), F64)
            return b.fadd(b.fmul(z, b.fsub(K(z, 1.0), wv)), b.fmul(o, wv))
        bits = t.bits
        if t.is_bool():
            c = b.fcmp_ordered(">", w, K(w, 0.5)) if wt.is_float() else \
                b.icmp_unsigned(">", w, K(w, wt.max_value() // 2))
            return b.select(c, o, z)
        ct = shaped(z, ir.IntType(bits))
        bias = 0
        if t.is_int():
            bias = -(1 << (bits - 1))
            z = b.sub(z, K(z, bias))
            o = b.sub(o, K(o, bias))
        maxc = (1 << bits) - 1
        if wt.is_float():
            D = shaped(w, ir.DoubleType())
            if bits == 32:
                wd = b.fpext(w, D) if wt.bits < 64 else w
                tw = b.call(self.intrinsic("trunc", D), [b.fmul(K(D, 65535.0 * 65537.0), wd)])
            else:
                wf = self.cast(st, F32, w, wt)
                tw = b.call(self.intrinsic("trunc", wf.type), [b.fmul(K(wf, float(maxc)), wf)])
                tw = b.fpext(tw, D)
            twi = b.trunc(b.fptosi(tw, shaped(w, I64T)), ct)
        else:
            wb = wt.bits
            if wb == bits:
                twi = w
            else:
                diff, left, shift, scale = wb - bits, abs(wb - bits), min(bits, wb), 1
                while left:
                    scale = scale + (scale << shift)
                    left -= shift
                    shift *= 2
                w64 = self._widen(st, w, wt)
                if diff < 0:
                    twi = b.trunc(b.mul(w64, K(w64, scale)), ct)
                else:
                    twi = b.trunc(b.udiv(w64, K(w64, scale)), ct)
        inv = b.sub(K(ct, maxc), twi)
        wide = shaped(z, ir.IntType(2 * bits))
        zu, ou = b.zext(z, wide), b.zext(o, wide)
        prod = b.add(b.add(b.mul(zu, b.zext(inv, wide)), b.mul(ou, b.zext(twi, wide))), K(wide, 1 << (bits - 1)))
        div = K(wide, 1 << bits)
        res = b.trunc(b.udiv(b.add(b.udiv(prod, div), prod), div), ct)
        if t.is_int():
            res = b.add(res, K(res, bias))
        return res

    # ------------------------------------------------------------ expressions
    def _cstr(self, s: str):
        data = bytearray(s.encode()) + b"\0"
        name = f".str{len(self.module.globals)}"
        g = ir.GlobalVariable(self.module, ir.ArrayType(I8T, len(data)), name=name)
        g.global_constant = True
        g.linkage = "internal"
        g.initializer = ir.Constant(ir.ArrayType(I8T, len(data)), data)
        return g


def _lane0(v):
    """The first lane of a symbolic vector index (v itself for anything else)."""
    while isinstance(v, (Ramp, Interleave)):
        v = v.base if isinstance(v, Ramp) else v.parts[0]
    return v


def _const_int(e: Expr) -> int | None:
    if isinstance(e, Const) and not e.type.is_float() and not e.type.is_bool():
        return int(e.value)
    return None


def _const_of(v) -> int | None:
    """The signed value of a scalar integer constant (constants are stored masked to their width)."""
    if isinstance(v, ir.Constant) and isinstance(v.type, ir.IntType) and not isinstance(v.constant, list):
        c, w = int(v.constant), v.type.width
        c &= (1 << w) - 1
        return c - (1 << w) if c >= 1 << (w - 1) else c
    return None


def _suffix(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_suffix(t.element)}"
    return {"half": "f16", "float": "f32", "double": "f64"}.get(str(t), str(t))


def _free_names(s: Stmt) -> set[str]:
    """Every variable and buffer name a statement mentions (a superset of its free names):
    the closure analysis kernel outlining shares (hdsl/ir/closure.py)."""
    return mentioned_names(s)


def _varies(e: Expr, var: str, written: set, memo: dict) -> bool:
    """Can e's value differ between iterations of an unrolled loop over `var` whose body
    writes the buffers `written`? (It mentions var, reads a written buffer or prints.)
    memo: id -> answer, shared by the calls for one loop (expressions are DAGs)."""
    todo = [e]
    while todo:
        n = todo[-1]
        if id(n) in memo:
            todo.pop()
            continue
        kids = [c for c in n.children() if id(c) not in memo]
        if kids:
            todo.extend(kids)
            continue
        todo.pop()
        memo[id(n)] = (isinstance(n, Var) and n.name == var) or (isinstance(n, Load) and n.buffer in written) \
            or (isinstance(n, Intrinsic) and n.name == "print") or any(memo[id(c)] for c in n.children())
    return memo[id(e)]


def _divided_by(body: Stmt, name: str) -> int | None:
    """The largest k in (2, 4) such that body divides `name` or `name ± c` (c a constant) by
    k; None: nothing does."""
    best = None

    def var_plus_const(x: Expr) -> bool:
        if isinstance(x, Var):
            return x.name == name
        return isinstance(x, BinOp) and x.op in ("+", "-") and _const_int(x.b) is not None and var_plus_const(x.a)
    seen: set = set()
    todo = [body]
    while todo:
        x = todo.pop()
        for e in own_exprs(x):
            for n in walk(e):
                if id(n) in seen:
                    continue
                seen.add(id(n))
                if isinstance(n, BinOp) and n.op == "/" and (k := _const_int(n.b)) in (2, 4) and var_plus_const(n.a):
                    best = max(best or 0, k)
        todo.extend(children(x))
    return best


def _residue_tested(s: For) -> int | None:
    """The largest k in (2, 4) such that a select or a guard inside loop s tests
    `s.var % k` or `(s.var ± c) % k` (c a constant); None: none does."""
    best = None
    seen: set = set()

    def var_plus_const(x: Expr) -> bool:
        if isinstance(x, Var):
            return x.name == s.var
        return isinstance(x, BinOp) and x.op in ("+", "-") and _const_int(x.b) is not None and var_plus_const(x.a)

    def scan_cond(c: Expr):
        nonlocal best
        for n in walk(c):
            if isinstance(n, BinOp) and n.op == "%" and (k := _const_int(n.b)) in (2, 4) and var_plus_const(n.a):
                best = max(best or 0, k)
    todo = [s.body]
    while todo:
        x = todo.pop()
        if isinstance(x, IfThenElse):
            scan_cond(x.cond)
        for e in own_exprs(x):
            for n in walk(e):
                if isinstance(n, Select) and id(n) not in seen:
                    seen.add(id(n))
                    scan_cond(n.cond)
        todo.extend(children(x))
    return best


def unrolled_hoist(s: For) -> Stmt | None:
    """An unrolled loop (of at least one iteration) whose body starts with a let or a guard
    that does not depend on the loop: that let or guard around the loop, the loop inside
    (around both arms of a guard with an else). The same statement: each iteration would
    bind the same value and take the same arm (nothing it reads is written by the body, and
    nothing prints). None: nothing to hoist."""
    body = s.body
    if not isinstance(body, (LetStmt, IfThenElse)):
        return None
    written = {name for name, u in mentioned(body).items() if u.kind == "buffer" and u.written}
    memo: dict[int, bool] = {}
    if isinstance(body, LetStmt):
        if body.name == s.var or _varies(body.value, s.var, written, memo) or \
                any(isinstance(n, Var) and n.name == body.name for x in (s.min, s.extent) for n in walk(x)):
            return None
        return LetStmt(body.name, body.value, For(s.var, s.min, s.extent, s.kind, body.body))
    if _varies(body.cond, s.var, written, memo):
        return None
    return IfThenElse(body.cond, For(s.var, s.min, s.extent, s.kind, body.then),
                      None if body.otherwise is None else For(s.var, s.min, s.extent, s.kind, body.otherwise))
