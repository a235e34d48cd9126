"""Flat loop nest → LLVM IR (llvmlite), with the reference evaluator's semantics.

The generated function is

    i32 @NAME(ptr args, ptr err_info)

where args[k] points at input k's buffer struct, then at each param's value,
then at each output's buffer struct (in declaration order). A buffer struct is
`{ ptr host, i32 dims, i32 elem_bytes, i64 min[8], i64 extent[8], i64 stride[8] }`
(strides in elements). It returns 0, or an error code with four i64 values in
err_info (see hdsl/lower/loops.py for the codes).

Every operator is emitted with exactly the semantics of hdsl/interp/scalar.py:
Euclidean division with x / 0 == 0, wrapping integer arithmetic, defined
results for shifts and out-of-range float→int casts, IEEE floats with no
contraction (strict mode). Parallel loops are outlined into a task function
and run by the C thread pool (hdsl/runtime/thread_pool.c).
"""
from __future__ import annotations

from llvmlite import ir

from hdsl.diagnostics import InternalError
from hdsl.ir.expr import BinOp, Cast, Const, Expr, Intrinsic, Param, Select, Unary, Var, free_vars, walk
from hdsl.ir.func import Pipeline
from hdsl.ir.stmt import (Allocate, Assert, Block, Evaluate, For, IfThenElse, LetStmt, Load, Stmt, Store)
from hdsl.ir.types import F32, F64, I32, I64, Type
from hdsl.lower.loops import ERR_BUFFER_TOO_LARGE

MAX_DIMS = 8
I1T, I8T, I32T, I64T = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F32T = ir.FloatType()
PTR = ir.PointerType()
BUFFER_T = ir.LiteralStructType([PTR, I32T, I32T, ir.ArrayType(I64T, MAX_DIMS), ir.ArrayType(I64T, MAX_DIMS),
                                 ir.ArrayType(I64T, MAX_DIMS)])
TASK_T = ir.FunctionType(I32T, [PTR, I32T])

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


# allocations up to this many bytes are made on the stack (the pool's threads have 8 MiB)
STACK_ALLOCATION_LIMIT = 64 * 1024


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

    def __init__(self, parts: list):
        self.parts = parts
        self.lanes = sum(p.lanes for p in parts)


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
        return ir.Constant(rt, [ir.Constant(rt.element, _norm(rt.element, value))] * rt.count)
    return ir.Constant(rt, _norm(rt, value))


def _norm(t, value):
    if isinstance(t, ir.IntType):
        return int(value) & ((1 << t.width) - 1)
    return value


class _Fn:
    """Codegen state for one LLVM function (the pipeline, or an outlined task)."""

    def __init__(self, cg: "CodeGen", fn: ir.Function):
        self.cg = cg
        self.fn = fn
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.syms: dict[str, tuple[object, Type | None]] = {}
        self.err_info = None
        self.lanes: int | None = None        # inside a vectorized loop: its width
        self.mask = None                     # inside a vector guard: the active lanes
        self.cache: dict = {}                # id(expr) -> (expr, value) for CSE


class CodeGen:
    def __init__(self, pipeline: Pipeline, name: str, fast_math: bool = False, runtime_prefix: str = "hdsl"):
        self.p = pipeline
        self.name = name
        self.runtime_prefix = runtime_prefix
        self.fast_math = fast_math
        self.module = ir.Module(name=name)
        self.n_tasks = 0
        self.fn_main = ir.Function(self.module, ir.FunctionType(I32T, [PTR, PTR]), name=name)
        self._decls: dict[str, ir.Function] = {}

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
    def generate(self, stmt: Stmt) -> ir.Module:
        st = _Fn(self, self.fn_main)
        args_ptr, err_ptr = self.fn_main.args
        st.err_info = err_ptr
        b = st.b
        k = 0

        def arg(i):
            p = b.gep(args_ptr, [ir.Constant(I64T, i)], source_etype=PTR)
            return b.load(p, typ=PTR)

        nbuf = 0
        for buf in self.p.inputs:
            self._bind_buffer(st, buf.name, arg(k), buf.dims, nbuf)
            k += 1
            nbuf += 1
        for prm in self.p.params:
            p = arg(k)
            t = prm.type
            v = b.load(p, typ=llvm_type(t, memory=True))
            if t.is_bool():
                v = b.icmp_unsigned("!=", v, ir.Constant(I8T, 0))
            st.syms[prm.name] = (v, t)
            k += 1
        for f in self.p.outputs:
            self._bind_buffer(st, f.name, arg(k), f.dims, nbuf)
            k += 1
            nbuf += 1
        self.stmt(st, stmt)
        if not b.block.is_terminated:
            b.ret(ir.Constant(I32T, 0))
        return self.module

    def _bind_buffer(self, st: _Fn, name: str, ptr, dims: int, which: int):
        """The buffer's host pointer, mins, extents and strides (i32). Offsets into it are
        32-bit, so the elements it spans, Σ (extent - 1) * |stride| + 1, must be below 2^31."""
        b = st.b
        host = b.load(b.gep(ptr, [ir.Constant(I32T, 0), ir.Constant(I32T, 0)], source_etype=BUFFER_T), typ=PTR)
        st.syms[name] = (host, None)
        span = ir.Constant(I64T, 1)
        for d in range(dims):
            fields = {}
            for field, what in ((3, "min"), (4, "extent"), (5, "stride")):
                p = b.gep(ptr, [ir.Constant(I32T, 0), ir.Constant(I32T, field), ir.Constant(I32T, d)],
                          source_etype=BUFFER_T)
                fields[what] = v = b.load(p, typ=I64T)
                st.syms[f"{name}.{what}.{d}"] = (b.trunc(v, I32T), I32)
            stride = fields["stride"]
            mag = b.select(b.icmp_signed("<", stride, ir.Constant(I64T, 0)), b.neg(stride), stride)
            ext = fields["extent"]
            ext = b.select(b.icmp_signed(">", ext, ir.Constant(I64T, 0)), ext, ir.Constant(I64T, 1))
            span = b.add(span, b.mul(b.sub(ext, ir.Constant(I64T, 1)), mag))
        self._check_size(st, span, which)

    def _check_size(self, st: _Fn, elements, which: int):
        """Return ERR_BUFFER_TOO_LARGE (info: which buffer, its elements) unless elements < 2^31;
        `which` counts inputs then outputs, -1 is an intermediate."""
        b = st.b
        # unsigned: a negative count is an extent that overflowed i32 (a region from a
        # coordinate near -2^31, such as i32(NaN)), as much too large as any other
        big = b.icmp_unsigned(">", elements, ir.Constant(I64T, 2 ** 31 - 1))
        with b.if_then(big, likely=False):
            if st.err_info is not None:
                b.store(ir.Constant(I64T, which), b.gep(st.err_info, [ir.Constant(I64T, 0)], source_etype=I64T))
                b.store(elements, b.gep(st.err_info, [ir.Constant(I64T, 1)], source_etype=I64T))
            b.ret(ir.Constant(I32T, ERR_BUFFER_TOO_LARGE))

    # ------------------------------------------------------------ statements
    def stmt(self, st: _Fn, s: Stmt):
        # (a let of a fresh name keeps what is cached: nothing cached can mention the name,
        # and the values it holds dominate the let's body. A chain of bounds lets then
        # shares its subexpressions: the local Laplacian's entry had ~3000 divisions)
        if isinstance(s, (For, IfThenElse, Allocate)) or (isinstance(s, LetStmt) and s.name in st.syms):
            st.cache = {}
        self._stmt(st, s)
        if isinstance(s, (LetStmt, For, IfThenElse, Allocate)):
            st.cache = {}      # values made inside a branch or loop body do not dominate what follows

    def _stmt(self, st: _Fn, s: Stmt):
        b = st.b
        if isinstance(s, Block):
            for x in s.stmts:
                self.stmt(st, x)
        elif isinstance(s, LetStmt):
            v = self.expr(st, s.value, keep_ramp=True)
            old = st.syms.get(s.name)
            st.syms[s.name] = (v, s.value.type)
            self.stmt(st, s.body)
            if old is None:
                del st.syms[s.name]
            else:
                st.syms[s.name] = old
        elif isinstance(s, For):
            if s.kind == "parallel" and st.lanes is None:
                self.parallel_for(st, s)
            elif s.kind == "vectorized" and st.lanes is None and _const_int(s.extent) is not None \
                    and 2 <= _const_int(s.extent) <= 64 and _vectorizable(s.body, frozenset((s.var,))):
                self.vector_for(st, s, _const_int(s.extent))
            elif s.kind == "unrolled" and st.lanes is None and _const_int(s.extent) is not None \
                    and _const_int(s.extent) <= 64:
                self.unrolled_for(st, s, _const_int(s.extent))
            else:
                self.serial_for(st, s)
        elif isinstance(s, IfThenElse):
            c = self.expr(st, s.cond)
            if isinstance(c.type, ir.VectorType):
                # lanes disagree: run both sides under masks
                old = st.mask
                st.mask = c if old is None else b.and_(old, c)
                self.stmt(st, s.then)
                if s.otherwise is not None:
                    nc = b.not_(c)
                    st.mask = nc if old is None else b.and_(old, nc)
                    self.stmt(st, s.otherwise)
                st.mask = old
            elif s.otherwise is None:
                with b.if_then(c):
                    self.stmt(st, s.then)
            else:
                with b.if_else(c) as (then, other):
                    with then:
                        self.stmt(st, s.then)
                    with other:
                        self.stmt(st, s.otherwise)
        elif isinstance(s, Store):
            self.store(st, s)
        elif isinstance(s, Allocate):
            elements = self.expr(st, s.size)
            self._check_size(st, elements, -1)
            size = b.mul(elements, ir.Constant(I64T, max(1, s.type.bits // 8)))
            size = b.select(b.icmp_signed(">", size, ir.Constant(I64T, 0)), size, ir.Constant(I64T, 1))
            rounded = b.and_(b.add(size, ir.Constant(I64T, 63)), ir.Constant(I64T, -64))
            # small buffers (a tile's intermediate, allocated once per tile) live on the
            # stack, between a stack save and restore so a loop does not grow it; larger
            # ones on the heap. Either way 64-byte aligned for dense vector loads and stores.
            small = b.icmp_unsigned("<=", size, ir.Constant(I64T, STACK_ALLOCATION_LIMIT))
            saved = b.call(self.decl("llvm.stacksave.p0", PTR, []), [])
            with b.if_else(small, likely=True) as (then, other):
                with then:
                    # (aligned by the alloca itself, not by pointer arithmetic: LLVM then knows
                    # the block is distinct from every other buffer and keeps values in registers)
                    on_stack = b.alloca(I8T, size=rounded)
                    on_stack.align = 64
                    stack_block = b.block
                with other:
                    malloc = self.decl(f"{self.runtime_prefix}_malloc", PTR, [I64T])
                    if "noalias" not in malloc.return_value.attributes:
                        malloc.return_value.add_attribute("noalias")     # fresh memory, as malloc's
                    on_heap = b.call(malloc, [rounded])
                    heap_block = b.block
            mem = b.phi(PTR)
            mem.add_incoming(on_stack, stack_block)
            mem.add_incoming(on_heap, heap_block)
            ok = b.icmp_unsigned("!=", mem, ir.Constant(PTR, None))
            with b.if_then(b.not_(ok), likely=False):
                b.ret(ir.Constant(I32T, 4))          # out of memory
            old = st.syms.get(s.name)
            st.syms[s.name] = (mem, None)
            self.stmt(st, s.body)
            with b.if_then(b.not_(small)):
                b.call(self.decl(f"{self.runtime_prefix}_free", ir.VoidType(), [PTR]), [mem])
            b.call(self.decl("llvm.stackrestore.p0", ir.VoidType(), [PTR]), [saved])
            if old is None:
                del st.syms[s.name]
            else:
                st.syms[s.name] = old
        elif isinstance(s, Assert):
            c = self.expr(st, s.cond)
            saved, st.cache = st.cache, {}       # (values made on the failure path stay there)
            with b.if_then(b.not_(c), likely=False):
                if st.err_info is not None:
                    for i, e in enumerate(s.info[:4]):
                        v = self.expr(st, e)
                        v = b.sext(v, I64T) if v.type != I64T else v
                        b.store(v, b.gep(st.err_info, [ir.Constant(I64T, i)], source_etype=I64T))
                b.ret(ir.Constant(I32T, s.code))
            st.cache = saved
        elif isinstance(s, Evaluate):
            self.expr(st, s.value)
        else:
            raise InternalError(f"codegen: unexpected statement {type(s).__name__}")

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
        base = self.buffer_ptr(st, s.buffer)
        lanes = idx.lanes if isinstance(idx, Ramp) else (idx.type.count if isinstance(idx.type, ir.VectorType)
                                                         else (v.type.count if isinstance(v.type, ir.VectorType)
                                                               else None))
        if lanes is None and st.mask is None:
            if t.is_bool():
                v = b.zext(v, I8T)
            b.store(v, b.gep(base, [idx], source_etype=mt))
            return
        lanes = lanes or st.lanes
        v = self.splat(st, v, lanes)
        if t.is_bool():
            v = b.zext(v, ir.VectorType(I8T, lanes))
        vt = ir.VectorType(mt, lanes)
        mask = st.mask if st.mask is not None else None
        if mask is not None and not isinstance(mask.type, ir.VectorType):
            mask = self.splat(st, mask, lanes)
        align = ir.Constant(I32T, max(1, t.bits // 8))
        if isinstance(idx, Ramp) and isinstance(idx.stride, int) and idx.stride == 1:
            ptr = b.gep(base, [idx.base], source_etype=mt)
            if mask is None:
                b.store(v, ptr, align=max(1, t.bits // 8))
            else:
                f = self.decl(f"llvm.masked.store.{_suffix(vt)}.p0", ir.VoidType(), [vt, PTR, I32T, mask.type])
                b.call(f, [v, ptr, align, mask])
            return
        ptrs = self.pointers(st, base, self.val(st, idx, lanes), t)
        if mask is None:
            mask = K(ir.VectorType(I1T, lanes), 1)
        f = self.decl(f"llvm.masked.scatter.{_suffix(vt)}.v{lanes}p0", ir.VoidType(),
                      [vt, ptrs.type, I32T, mask.type])
        b.call(f, [v, ptrs, align, mask])

    def pointers(self, st: _Fn, base, idx, t: Type):
        """A vector of element addresses base + idx[k] (for gathers and scatters)."""
        b = st.b
        n = idx.type.count
        idx = self._widen(st, idx, I32 if idx.type.element.width < 64 else I64)
        # `getelementptr T, ptr base, <n x i64> idx` (a scalar base and vector offsets, which
        # the x86 back end folds into the gather's base + index * scale addressing); llvmlite
        # types a GEP by its pointer operand, so the vector result type is set by hand
        gep = ir.instructions.GEPInstr(b.block, base, [idx], inbounds=False, name="",
                                       source_etype=llvm_type(t, True))
        gep.type = ir.VectorType(PTR, n)
        b._insert(gep)
        return gep

    def load(self, st: _Fn, e: Load):
        b = st.b
        t = e.type
        mt = llvm_type(t, True)
        idx = self.expr(st, e.index, keep_ramp=True)
        base = self.buffer_ptr(st, e.buffer)
        if isinstance(idx, Interleave):
            if st.mask is None:
                v = self.interleave(st, [self.load_vector(st, e, base, p) for p in idx.parts])
                return b.icmp_unsigned("!=", v, K(v, 0)) if t.is_bool() else v
            idx = self.val(st, idx)
        vector = isinstance(idx, Ramp) or isinstance(idx.type, ir.VectorType)
        if not vector:
            v = b.load(b.gep(base, [idx], source_etype=mt), typ=mt)
            return b.icmp_unsigned("!=", v, ir.Constant(I8T, 0)) if t.is_bool() else v
        v = self.load_vector(st, e, base, idx)
        return b.icmp_unsigned("!=", v, K(v, 0)) if t.is_bool() else v

    def load_vector(self, st: _Fn, e: Load, base, idx):
        """The vector of elements of `base` at `idx` (a Ramp or a vector), as stored in memory."""
        b = st.b
        t = e.type
        mt = llvm_type(t, True)
        lanes = idx.lanes if isinstance(idx, Ramp) else idx.type.count
        vt = ir.VectorType(mt, lanes)
        mask = st.mask
        if mask is not None and not isinstance(mask.type, ir.VectorType):
            mask = self.splat(st, mask, lanes)
        align = ir.Constant(I32T, max(1, t.bits // 8))
        stride = idx.stride if isinstance(idx, Ramp) else None
        if isinstance(stride, int) and stride == 1:
            ptr = b.gep(base, [idx.base], source_etype=mt)
            if mask is None:
                v = b.load(ptr, typ=vt, align=max(1, t.bits // 8))
            else:
                f = self.decl(f"llvm.masked.load.{_suffix(vt)}.p0", vt, [PTR, I32T, mask.type, vt])
                v = b.call(f, [ptr, align, mask, K(vt, 0)])
        elif isinstance(stride, int) and stride == 0 and mask is None:
            v = self.splat(st, b.load(b.gep(base, [idx.base], source_etype=mt), typ=mt), lanes)
        elif isinstance(stride, int) and 2 <= stride <= 8 and mask is None:
            v = self.strided_load(st, b.gep(base, [idx.base], source_etype=mt), stride, lanes, mt, t)
        elif stride is not None and not isinstance(stride, int) and mask is None:
            # a run-time stride (a buffer's row stride): dense when it is 1, else a gather
            unit = b.icmp_signed("==", stride, ir.Constant(stride.type, 1))
            with b.if_else(unit) as (then, other):
                with then:
                    v_dense = b.load(b.gep(base, [idx.base], source_etype=mt), typ=vt, align=max(1, t.bits // 8))
                    dense_block = b.block
                with other:
                    v_gather = self.gather(st, base, self.val(st, idx, lanes), t, vt, None)
                    gather_block = b.block
            v = b.phi(vt)
            v.add_incoming(v_dense, dense_block)
            v.add_incoming(v_gather, gather_block)
        elif mask is None and not isinstance(idx, Ramp) and not _data_dependent(e.index):
            v = self.patterned_load(st, base, idx, t, vt)
        else:
            v = self.gather(st, base, self.val(st, idx, lanes), t, vt, mask)
        return v

    def strided_load(self, st: _Fn, ptr, stride: int, lanes: int, mt, t: Type):
        """Lanes ptr[0], ptr[stride], …: dense vectors of `lanes` elements covering exactly the
        span the lanes touch (the last one overlapping its neighbour, so nothing past the last
        lane is read), then one shuffle. A single load of the odd-sized span would be split by
        LLVM into many small loads and inserts."""
        b = st.b
        align = max(1, t.bits // 8)
        span = (lanes - 1) * stride + 1
        n = -(-span // lanes)
        offsets = [k * lanes for k in range(n - 1)] + [span - lanes]
        vt = ir.VectorType(mt, lanes)
        chunks = [b.load(ptr if o == 0 else b.gep(ptr, [ir.Constant(I32T, o)], source_etype=mt), typ=vt, align=align)
                  for o in offsets]

        def where(el):
            k = min(el // lanes, n - 1)
            return k * lanes + el - offsets[k]
        mask = ir.Constant(ir.VectorType(I32T, lanes), [where(i * stride) for i in range(lanes)])
        if n == 2:
            return b.shuffle_vector(chunks[0], chunks[1], mask)
        cat = self.concat(st, chunks)
        return b.shuffle_vector(cat, ir.Constant(cat.type, ir.Undefined), mask)

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

    def patterned_load(self, st: _Fn, base, iv, t: Type, vt):
        """A load at a vector of indices that, at run time, is often `first + P` for a known
        pattern P: dense (a clamp that did not bite), half rate (`f(x / 2)`, upsampling and
        Bayer interleaving, both phases) or a broadcast. Each is checked in turn and loaded
        as exactly the span it covers (then shuffled); anything else is a gather."""
        b = st.b
        lanes = vt.count
        mt = vt.element
        align = max(1, t.bits // 8)
        patterns = [list(range(lanes)), [i // 2 for i in range(lanes)], [(i + 1) // 2 for i in range(lanes)],
                    [0] * lanes]
        first = b.extract_element(iv, ir.Constant(I32T, 0))
        splat_first = self.splat(st, first, lanes)
        reduce_and = self.decl(f"llvm.vector.reduce.and.{_suffix(ir.VectorType(I1T, lanes))}", I1T,
                               [ir.VectorType(I1T, lanes)])
        merge = st.fn.append_basic_block()
        incoming = []
        ptr = b.gep(base, [first], source_etype=mt)
        for pat in patterns:
            ok = b.call(reduce_and, [b.icmp_signed("==", iv, b.add(splat_first, ir.Constant(iv.type, pat)))])
            hit, miss = st.fn.append_basic_block(), st.fn.append_basic_block()
            b.cbranch(ok, hit, miss)
            b.position_at_end(hit)
            span = max(pat) + 1
            if span == lanes:
                v = b.load(ptr, typ=vt, align=align)
            elif span == 1:
                v = self.splat(st, b.load(ptr, typ=mt, align=align), lanes)
            else:
                wide = b.load(ptr, typ=ir.VectorType(mt, span), align=align)
                v = b.shuffle_vector(wide, ir.Constant(ir.VectorType(mt, span), ir.Undefined),
                                     ir.Constant(ir.VectorType(I32T, lanes), pat))
            incoming.append((v, b.block))
            b.branch(merge)
            b.position_at_end(miss)
        incoming.append((self.gather(st, base, iv, t, vt, None), b.block))
        b.branch(merge)
        b.position_at_end(merge)
        v = b.phi(vt)
        for val, block in incoming:
            v.add_incoming(val, block)
        return v

    def gather(self, st: _Fn, base, idx, t: Type, vt, mask):
        b = st.b
        lanes = vt.count
        ptrs = self.pointers(st, base, idx, t)
        if mask is None:
            mask = K(ir.VectorType(I1T, lanes), 1)
        f = self.decl(f"llvm.masked.gather.{_suffix(vt)}.v{lanes}p0", vt, [ptrs.type, I32T, mask.type, vt])
        return b.call(f, [ptrs, ir.Constant(I32T, max(1, t.bits // 8)), mask, K(vt, 0)])

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
        i = b.phi(I32T, name=s.var)
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", i, hi), body, done)
        b.position_at_end(body)
        old = st.syms.get(s.var)
        st.syms[s.var] = (i, I32)
        self.stmt(st, s.body)
        nxt = b.add(i, ir.Constant(I32T, 1), flags=("nsw",))     # (i < hi: no overflow)
        i.add_incoming(nxt, b.block)
        b.branch(head)
        b.position_at_end(done)
        self._restore(st, s.var, old)

    @staticmethod
    def _restore(st, name, old):
        if old is None:
            del st.syms[name]
        else:
            st.syms[name] = old

    def vector_for(self, st: _Fn, s: For, lanes: int):
        """The loop becomes one pass over `lanes` lanes: its var is a ramp."""
        lo = self.expr(st, s.min)
        old = st.syms.get(s.var)
        st.syms[s.var] = (Ramp(lo, 1, lanes), I32)
        st.lanes = lanes
        try:
            self.stmt(st, s.body)
        finally:
            st.lanes = None
            self._restore(st, s.var, old)

    def unrolled_for(self, st: _Fn, s: For, n: int):
        lo = self.expr(st, s.min)
        old = st.syms.get(s.var)
        for k in range(n):
            st.syms[s.var] = (st.b.add(lo, ir.Constant(I32T, k)), I32)
            st.cache = {}          # the loop var has a new value: nothing cached still holds
            self.stmt(st, s.body)
        self._restore(st, s.var, old)

    # ------------------------------------------------------------ expressions
    def splat(self, st: _Fn, v, lanes: int):
        if isinstance(v, (Ramp, Interleave)):
            return self.val(st, v, lanes)
        if isinstance(v.type, ir.VectorType):
            return v
        b = st.b
        vt = ir.VectorType(v.type, lanes)
        if isinstance(v, ir.Constant):
            return ir.Constant(vt, [v] * lanes)
        one = b.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(I32T, 0))
        return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(I32T, lanes), [0] * lanes))

    def val(self, st: _Fn, v, lanes: int | None = None):
        """A plain LLVM value: ramps become vectors."""
        if isinstance(v, Interleave):
            return self.interleave(st, [self.val(st, p) for p in v.parts])
        if not isinstance(v, Ramp):
            return v
        b = st.b
        et = v.base.type
        if isinstance(v.stride, int):
            steps = ir.Constant(ir.VectorType(et, v.lanes), [k * v.stride for k in range(v.lanes)])
        else:
            steps = b.mul(self.splat(st, v.stride, v.lanes), ir.Constant(ir.VectorType(et, v.lanes), list(range(v.lanes))))
        return b.add(self.splat(st, v.base, v.lanes), steps)

    # strides of ramps: Python ints, or scalar LLVM values
    @staticmethod
    def _s(b, x, like):
        return x if not isinstance(x, int) else ir.Constant(like.type, x)

    def _sadd(self, b, x, y, like, sub=False):
        if isinstance(x, int) and isinstance(y, int):
            return x - y if sub else x + y
        x, y = self._s(b, x, like), self._s(b, y, like)
        return b.sub(x, y) if sub else b.add(x, y)

    def _smul(self, b, x, other):
        """stride x times the scalar LLVM value `other`."""
        if isinstance(x, int):
            return other if x == 1 else b.mul(other, ir.Constant(other.type, x))
        return b.mul(x, other)

    def expr(self, st: _Fn, e: Expr, keep_ramp: bool = False):
        # common subexpressions (expressions are interned DAGs) are generated once per
        # straight-line stretch; the cache is dropped wherever control flow or bindings change
        hit = st.cache.get(id(e))
        if hit is not None:
            v = hit[1]
        else:
            v = self._expr(st, e)
            if not isinstance(e, (Const, Var, Param)):
                st.cache[id(e)] = (e, v)
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
            v = self.expr(st, e.value, keep_ramp=True)
            if isinstance(v, Interleave):
                if t.is_int() and t.bits >= 32 and e.value.type.is_int() and not e.saturate:
                    return Interleave([Ramp(self.cast(st, t, p.base, e.value.type),
                                            p.stride if isinstance(p.stride, int) else
                                            self.cast(st, t, p.stride, e.value.type), p.lanes) for p in v.parts])
                v = self.val(st, v)
            if isinstance(v, Ramp):
                if t.is_int() and t.bits >= 32 and e.value.type.is_int() and not e.saturate:
                    # index arithmetic: a widened ramp is still a ramp (no overflow within a vector)
                    stride = v.stride if isinstance(v.stride, int) else self.cast(st, t, v.stride, e.value.type)
                    return Ramp(self.cast(st, t, v.base, e.value.type), stride, v.lanes)
                v = self.val(st, v)
            return self.cast(st, t, v, e.value.type, e.saturate)
        if isinstance(e, BinOp):
            a = self.expr(st, e.a, keep_ramp=True)
            c = self.expr(st, e.b, keep_ramp=True)
            r = self._ramp_binop(st, e, a, c)
            if r is not None:
                return r
            a, c = self.unify(st, self.val(st, a), self.val(st, c))
            if e.op in ("<<", ">>"):
                return self.shift(st, e.op, a, c, e.a.type, e.b.type)
            return self.binop(st, e.op, a, c, e.a.type)
        if isinstance(e, Unary):
            a = self.expr(st, e.a)
            if e.op == "-":
                # Halide's -x is 0 - x (so -(0.0) is +0.0), as the evaluator
                return b.fsub(K(a, 0.0), a) if t.is_float() else b.sub(K(a, 0), a)
            return b.not_(a)
        if isinstance(e, Select):
            c = self.expr(st, e.cond)
            x, y = self.unify(st, self.expr(st, e.t), self.expr(st, e.f))
            if isinstance(x.type, ir.VectorType) and not isinstance(c.type, ir.VectorType):
                c = self.splat(st, c, x.type.count)
            elif isinstance(c.type, ir.VectorType) and not isinstance(x.type, ir.VectorType):
                x, y = self.splat(st, x, c.type.count), self.splat(st, y, c.type.count)
            return b.select(c, x, y)
        if isinstance(e, Intrinsic):
            return self.intrinsic_call(st, e)
        raise InternalError(f"codegen: unexpected expression {type(e).__name__}")

    def _ramp_binop(self, st, e: BinOp, a, c):
        if not (isinstance(a, (Ramp, Interleave)) or isinstance(c, (Ramp, Interleave))) or e.type.is_float() \
                or e.type.bits < 32:
            return None
        b = st.b
        if isinstance(a, Interleave) or isinstance(c, Interleave):
            return self._interleave_binop(st, e, a, c)
        if e.op in ("/", "%") and isinstance(a, Ramp) and isinstance(a.stride, int):
            k = _const_int(e.b)
            if k is not None and k > 1:
                if a.stride % k == 0:
                    q = self.binop(st, e.op, a.base, ir.Constant(a.base.type, k), e.a.type)
                    return Ramp(q, a.stride // k if e.op == "/" else 0, a.lanes)
                if a.lanes % k == 0 and a.lanes // k >= 2:
                    parts = []
                    for r in range(k):
                        br = a.base if r == 0 else b.add(a.base, ir.Constant(a.base.type, a.stride * r))
                        q = self.binop(st, e.op, br, ir.Constant(br.type, k), e.a.type)
                        parts.append(Ramp(q, a.stride if e.op == "/" else 0, a.lanes // k))
                    return Interleave(parts)
            return None

        def scalar(v):
            return not isinstance(v, Ramp) and not isinstance(v.type, ir.VectorType)
        if e.op == "+":
            if isinstance(a, Ramp) and scalar(c):
                return Ramp(b.add(a.base, c), a.stride, a.lanes)
            if isinstance(c, Ramp) and scalar(a):
                return Ramp(b.add(a, c.base), c.stride, c.lanes)
            if isinstance(a, Ramp) and isinstance(c, Ramp):
                return Ramp(b.add(a.base, c.base), self._sadd(b, a.stride, c.stride, a.base), a.lanes)
        if e.op == "-":
            if isinstance(a, Ramp) and scalar(c):
                return Ramp(b.sub(a.base, c), a.stride, a.lanes)
            if isinstance(c, Ramp) and scalar(a):
                return Ramp(b.sub(a, c.base), self._sadd(b, 0, c.stride, c.base, sub=True), c.lanes)
            if isinstance(a, Ramp) and isinstance(c, Ramp):
                return Ramp(b.sub(a.base, c.base), self._sadd(b, a.stride, c.stride, a.base, sub=True), a.lanes)
        if e.op == "*":
            k = _const_int(e.b) if isinstance(a, Ramp) else _const_int(e.a)
            r, other = (a, c) if isinstance(a, Ramp) else (c, a)
            if k is not None:
                stride = r.stride * k if isinstance(r.stride, int) else b.mul(r.stride, ir.Constant(r.stride.type, k))
                return Ramp(b.mul(r.base, other), stride, r.lanes)
            if isinstance(r, Ramp) and scalar(other):
                # times a run-time value (a buffer's stride): still a ramp, of run-time stride
                return Ramp(b.mul(r.base, other), self._smul(b, r.stride, other), r.lanes)
        return None

    def _interleave_binop(self, st, e: BinOp, a, c):
        """An operation on an interleaved index done part by part (None: not possible)."""
        b = st.b
        k = len((a if isinstance(a, Interleave) else c).parts)

        def split(v):
            if isinstance(v, Interleave):
                return v.parts if len(v.parts) == k and len({p.lanes for p in v.parts}) == 1 else None
            if isinstance(v, Ramp):
                if v.lanes % k:
                    return None
                sk = v.stride * k if isinstance(v.stride, int) else b.mul(v.stride, ir.Constant(v.stride.type, k))
                return [Ramp(v.base if r == 0 else b.add(v.base, self._s(b, v.stride, v.base) if r == 1 else
                                                          self._smul(b, v.stride, ir.Constant(v.base.type, r))),
                             sk, v.lanes // k) for r in range(k)]
            if isinstance(v.type, ir.VectorType):
                return None
            return [v] * k
        pa, pc = split(a), split(c)
        if pa is None or pc is None:
            return None
        out = []
        for x, y in zip(pa, pc):
            r = self._ramp_binop(st, e, x, y)
            if not isinstance(r, Ramp):
                return None
            out.append(r)
        return Interleave(out)

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
            if t.is_int():
                c = b.icmp_signed("<" if op == "min" else ">", a, b_)
            else:
                c = b.icmp_unsigned("<" if op == "min" else ">", a, b_)
            return b.select(c, a, b_)
        if op in ("==", "!=", "<", "<=", ">", ">="):
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
            # x86's cvttps2dq truncates toward zero and gives INT_MIN for NaN and anything
            # outside i32: exactly the rule for i32 (one instruction instead of a range check
            # around LLVM's fptosi, whose out-of-range result is poison); narrower types then
            # check the i32 against their own range
            r = self.cvtt_i32(st, v)
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

    def cvtt_i32(self, st: _Fn, v):
        """f32 (scalar or vector) -> i32 with x86's cvttps2dq: toward zero, INT_MIN when NaN or
        out of range. Vectors go in chunks of 8 (or 4) lanes, padded where needed."""
        b = st.b
        v4 = ir.VectorType(F32T, 4)
        if not isinstance(v.type, ir.VectorType):
            x = b.insert_element(ir.Constant(v4, ir.Undefined), v, ir.Constant(I32T, 0))
            return b.call(self.decl("llvm.x86.sse.cvttss2si", I32T, [v4]), [x])
        n = v.type.count
        w = 8 if n % 8 == 0 else 4
        padded = -(-n // w) * w
        if padded != n:
            v = self._pad(st, v, padded)
        fn = (self.decl("llvm.x86.avx.cvtt.ps2dq.256", ir.VectorType(I32T, 8), [ir.VectorType(F32T, 8)]) if w == 8
              else self.decl("llvm.x86.sse2.cvttps2dq", ir.VectorType(I32T, 4), [v4]))
        parts = []
        for k in range(0, padded, w):
            chunk = v if padded == w else b.shuffle_vector(
                v, ir.Constant(v.type, ir.Undefined), ir.Constant(ir.VectorType(I32T, w), list(range(k, k + w))))
            parts.append(b.call(fn, [chunk]))
        r = self.concat(st, parts) if len(parts) > 1 else parts[0]
        if padded != n:
            r = b.shuffle_vector(r, ir.Constant(r.type, ir.Undefined), ir.Constant(ir.VectorType(I32T, n), list(range(n))))
        return r

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
            return self.libm(st, LIBM1.get(name, name), args, t)
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
            self.print_call(st, e, args)
            return args[0]
        raise InternalError(f"codegen: intrinsic {name}")

    def libm(self, st: _Fn, base: str, args, t: Type):
        """A C math library call; for vectors, one call per lane."""
        b = st.b
        vec = isinstance(args[0].type, ir.VectorType)
        et = args[0].type.element if vec else args[0].type
        ct = ir.FloatType() if t.bits == 16 else et
        fn = self.decl(base + ("f" if str(ct) == "float" else ""), ct, [ct] * len(args))

        def one(xs):
            xs = [b.fpext(x, ct) if t.bits == 16 else x for x in xs]
            r = b.call(fn, xs)
            return b.fptrunc(r, et) if t.bits == 16 else r
        if not vec:
            return one(args)
        out = ir.Constant(args[0].type, ir.Undefined)
        for k in range(args[0].type.count):
            lane = ir.Constant(I32T, k)
            out = b.insert_element(out, one([b.extract_element(a, lane) for a in args]), lane)
        return out

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

    def parallel_for(self, st: _Fn, s: For):
        """Outline the body into task(closure, i) and call hdsl_parallel_for."""
        b = st.b
        free = sorted(n for n in _free_names(s.body) if n != s.var and n in st.syms)
        types = [st.syms[n][0].type for n in free]
        closure_t = ir.LiteralStructType(types) if types else ir.LiteralStructType([I8T])
        # in the entry block: an alloca inside a loop would grow the stack every iteration.
        # (When b itself is still in the entry block it allocates there: llvmlite builders
        # insert at an index, so a second builder inserting in b's block would move b's
        # insertion point behind the block's terminator.)
        if b.block is st.fn.entry_basic_block:
            closure = b.alloca(closure_t)
        else:
            entry = ir.IRBuilder(st.fn.entry_basic_block)
            entry.position_at_start(st.fn.entry_basic_block)
            closure = entry.alloca(closure_t)
        for k, n in enumerate(free):
            b.store(st.syms[n][0], b.gep(closure, [ir.Constant(I32T, 0), ir.Constant(I32T, k)]))
        self.n_tasks += 1
        task = ir.Function(self.module, TASK_T, name=f"{self.name}.par{self.n_tasks}")
        task.linkage = "internal"
        inner = _Fn(self, task)
        inner.err_info = None
        cl, idx = task.args
        cl.add_attribute("noalias")       # the closure is only read, by every task alike
        for k, n in enumerate(free):
            v = inner.b.load(inner.b.gep(cl, [ir.Constant(I32T, 0), ir.Constant(I32T, k)], source_etype=closure_t),
                             typ=types[k])
            inner.syms[n] = (v, st.syms[n][1])
        inner.syms[s.var] = (idx, I32)
        self.stmt(inner, s.body)
        if not inner.b.block.is_terminated:
            inner.b.ret(ir.Constant(I32T, 0))
        lo = self.expr(st, s.min)
        ext = self.expr(st, s.extent)
        pf = self.decl(f"{self.runtime_prefix}_parallel_for", I32T, [PTR, PTR, I32T, I32T])
        r = b.call(pf, [task, closure, lo, ext])
        with b.if_then(b.icmp_signed("!=", r, ir.Constant(I32T, 0)), likely=False):
            b.ret(r)

    # ------------------------------------------------------------ expressions
    def print_call(self, st: _Fn, e: Intrinsic, args):
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
        printf = self.decl("printf", I32T, [PTR], var_arg=True)
        b.call(printf, [self._cstr(" ".join(fmt) + "\n")] + vals)

    def _cstr(self, s: str):
        data = bytearray(s.encode()) + b"\0"
        name = f".str{len(self.module.globals)}"
        g = ir.GlobalVariable(self.module, ir.ArrayType(I8T, len(data)), name=name)
        g.global_constant = True
        g.linkage = "internal"
        g.initializer = ir.Constant(ir.ArrayType(I8T, len(data)), data)
        return g


def _data_dependent(e: Expr) -> bool:
    """Does an index read memory (a look-up table)? Then no pattern is worth checking for."""
    return any(isinstance(n, Load) for n in walk(e))


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


def _vectorizable(s: Stmt, lane: frozenset = frozenset()) -> bool:
    """Statements a vectorized loop's body may hold (anything else runs serially). A serial
    loop inside is kept, with a vector body, when its bounds are the same in every lane:
    lanes are independent, so `for x in lanes: for c: body` may run as `for c: body(lanes)`
    (Halide does the same)."""
    if isinstance(s, Block):
        return all(_vectorizable(x, lane) for x in s.stmts)
    if isinstance(s, LetStmt):
        inner = lane | {s.name} if free_vars(s.value) & lane else lane
        return _vector_expr_ok(s.value) and _vectorizable(s.body, inner)
    if isinstance(s, IfThenElse):
        return _vector_expr_ok(s.cond) and _vectorizable(s.then, lane) and \
            (s.otherwise is None or _vectorizable(s.otherwise, lane))
    if isinstance(s, Store):
        return _vector_expr_ok(s.index) and _vector_expr_ok(s.value)
    if isinstance(s, For) and s.kind in ("serial", "unrolled"):
        return not ((free_vars(s.min) | free_vars(s.extent)) & lane) and _vectorizable(s.body, lane)
    return False


def _vector_expr_ok(e: Expr) -> bool:
    return not any(isinstance(n, Intrinsic) and n.name == "print" for n in walk(e))


def _suffix(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_suffix(t.element)}"
    return {"half": "f16", "float": "f32", "double": "f64"}.get(str(t), str(t))


def _free_names(s: Stmt) -> set[str]:
    """Every variable and buffer name a statement mentions (a superset of its free names)."""
    names: set[str] = set()

    def ex(e: Expr):
        for n in walk(e):
            if isinstance(n, (Var, Param)):
                names.add(n.name)
            elif isinstance(n, Load):
                names.add(n.buffer)

    def visit(x):
        if isinstance(x, Block):
            for y in x.stmts:
                visit(y)
        elif isinstance(x, LetStmt):
            ex(x.value)
            visit(x.body)
        elif isinstance(x, For):
            ex(x.min)
            ex(x.extent)
            visit(x.body)
        elif isinstance(x, IfThenElse):
            ex(x.cond)
            visit(x.then)
            if x.otherwise is not None:
                visit(x.otherwise)
        elif isinstance(x, Store):
            names.add(x.buffer)
            ex(x.index)
            ex(x.value)
        elif isinstance(x, Allocate):
            ex(x.size)
            visit(x.body)
        elif isinstance(x, Assert):
            ex(x.cond)
            for i in x.info:
                ex(i)
        elif isinstance(x, Evaluate):
            ex(x.value)
    visit(s)
    return names


def generate(pipeline: Pipeline, stmt: Stmt, name: str, fast_math: bool = False,
             runtime_prefix: str = "hdsl") -> ir.Module:
    """The pipeline as LLVM IR; `runtime_prefix` names the thread pool's entry points
    (ahead-of-time objects give each pipeline its own, so two can be linked together)."""
    return CodeGen(pipeline, name, fast_math, runtime_prefix).generate(stmt)


# Splitting a module for parallel compilation. LLVM's time grows with a function's
# instructions plus a fixed cost per function (measured on the local Laplacian: ~50 us per
# unit of the weight below, each small task function ~0.05 s of optimization and code
# generation); a part lighter than MIN_PART_WEIGHT (~0.2 s) is not worth a process.
FUNCTION_WEIGHT = 1000
MIN_PART_WEIGHT = 4000


def function_weight(f: ir.Function) -> int:
    return sum(len(b.instructions) for b in f.blocks) + FUNCTION_WEIGHT


def balance(weights: list[int], n: int) -> list[list[int]]:
    """The indices of `weights` in n groups of about equal total weight (each, heaviest first,
    onto the lightest group so far), the heaviest group first."""
    groups: list[list[int]] = [[] for _ in range(n)]
    load = [0] * n
    for i in sorted(range(len(weights)), key=lambda i: -weights[i]):
        k = load.index(min(load))
        groups[k].append(i)
        load[k] += weights[i]
    order = sorted(range(n), key=lambda k: -load[k])
    return [groups[k] for k in order]


def split_module(module: ir.Module, parts: int) -> list[str]:
    """The module as at most `parts` LLVM IR texts that compile separately and link together:
    each defines some of the functions (balanced by weight, heaviest part first) and declares
    the others. Task functions are reached only through their addresses, which the thread
    pool calls, so no optimization crosses a part's boundary. A small module stays whole."""
    defined = [f for f in module.functions if f.blocks]
    weights = [function_weight(f) for f in defined]
    n = max(1, min(parts, len(defined), sum(weights) // MIN_PART_WEIGHT))
    if n == 1:
        return [str(module)]
    saved = [(f, f.blocks, f.linkage) for f in defined]
    texts = []
    try:
        for group in balance(weights, n):
            owned = {defined[i].name for i in group}
            for f, blocks, _ in saved:
                f.linkage = ""           # visible to the other parts (the object stays private to its engine)
                f.blocks = blocks if f.name in owned else []
            texts.append(str(module))
    finally:
        for f, blocks, linkage in saved:
            f.blocks, f.linkage = blocks, linkage
    return texts
