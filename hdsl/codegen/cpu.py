"""The CPU back end: flat loop nest → LLVM IR for the host (a CodeGenLLVM subclass).

The generated function is

    i32 @NAME(ptr args, ptr err_info)

where args[k] points at input k's buffer struct, then at each param's value,
then at each output's buffer struct (in declaration order). A buffer struct is
`{ ptr host, i32 dims, i32 elem_bytes, i64 min[8], i64 extent[8], i64 stride[8], u64 device,
ptr device_interface, u64 flags }` (strides in elements; hdsl/runtime/abi.py). It returns 0, or an error code with four i64 values in
err_info (see hdsl/lower/loops.py for the codes).

On top of the base's statements and operator semantics (hdsl/codegen/llvm.py) this adds
the host calling convention and run-time errors, allocations on the stack or through
the runtime's malloc, the vector strategy (a vectorized loop's index is a symbolic ramp:
dense, strided, patterned and gathered loads, masked stores), x86's cvttps2dq for
f32 → i32, libm calls and printf. Parallel loops are outlined into a task function and
run by the C thread pool (hdsl/runtime/thread_pool.c).
"""
from __future__ import annotations

from llvmlite import ir

from hdsl.codegen import gather_groups, transpose
from hdsl.codegen.llvm import (F32T, I1T, I8T, I32T, I64T, PTR, CodeGenLLVM, Interleave, K, Ramp, _const_int, _const_of,
                               _Fn, _free_names, _suffix, llvm_type)
from hdsl.ir.closure import shape_key
from hdsl.ir.expr import BinOp, Cast, Expr, Intrinsic, Var, free_vars, walk
from hdsl.ir.func import Pipeline
from hdsl.ir.stmt import Allocate, Block, For, IfThenElse, LetStmt, Load, Stmt, Store
from hdsl.ir.stmt import children as stmt_children
from hdsl.ir.types import I32, I64, Type
from hdsl.lower.loops import ERR_BUFFER_TOO_LARGE, ERR_OUT_OF_MEMORY
from hdsl.lower.partition import NARROW_LANES
from hdsl.runtime.abi import llvm_buffer_type

MAX_DIMS = 8
# the memory intrinsics the code generator calls (name without its type suffixes) -> which
# argument is the address (a vector of addresses for gathers and scatters)
_MEMORY_INTRINSIC_PTR = {"llvm.masked.load": 0, "llvm.masked.store": 1, "llvm.masked.gather": 0,
                         "llvm.masked.scatter": 1}
BUFFER_T = llvm_buffer_type()           # hdsl/runtime/abi.py
TASK_T = ir.FunctionType(I32T, [PTR, I32T])

# allocations up to this many bytes are made on the stack (the pool's threads have 8 MiB)
STACK_ALLOCATION_LIMIT = 64 * 1024
_ABSENT_RING = object()


class CodeGenCPU(CodeGenLLVM):
    # Each buffer's loads and stores carry their own TBAA type (alias_info): buffers never
    # overlap (the pipeline's allocations are its own; the call path refuses inputs and
    # outputs that overlap, docs/python.md; C callers must not pass such), so LLVM may keep
    # a value loaded from one buffer across stores to another (camera_pipe's colour matrix,
    # loaded once per row instead of once per vector). Host code of GPU pipelines has none
    # (its buffers are also written by device copies).
    ALIAS_INFO = True
    # Parallel loops whose bodies are the same up to names share one task function (task_key;
    # off only to measure what it saves: benchmarks/compile_phases.py --ab share_tasks)
    SHARE_TASKS = True
    # strided loads picked within 128-bit halves on AVX/AVX2 (in_lane_picks; a switch for
    # benchmarks/alias_ab.py)
    IN_LANE_PICKS = True
    # AVX2 strided taps share their dense vectors (gather_groups.prepare; experiment switch)
    SHARE_STRIDED_AVX2 = False
    # ... except the phases of one stride (x * 2 and x * 2 + 1: a deinterleave), which read the
    # same vectors, shared on every target, also between the loads that consecutive lets bind
    # (gather_groups.prepare and prepare_lets; a switch for benchmarks/alias_ab.py)
    SHARE_PHASES = True

    def __init__(self, pipeline: Pipeline, name: str, fast_math: bool = False, runtime_prefix: str = "hdsl",
                 cpu: str | None = None, nontemporal: frozenset = frozenset()):
        super().__init__(name, fast_math)
        self.p = pipeline
        # buffers stored with non-temporal (streaming) stores: `store_nontemporal()`
        self.nontemporal = nontemporal
        self.runtime_prefix = runtime_prefix
        self.n_tasks = 0
        self.tasks: dict = {}           # task_key -> (task function, its closure's fields by name index)
        self.repeated: dict = {}        # the serial loop nests outlined (repeated_nests)
        # i16 lanes of the widest pmaddwd the target has (None: the CPU is not known here)
        self.madd_lanes = madd_lanes(cpu) if cpu is not None else None
        # byte permutes over two 64-byte tables (vpermi2b: AVX-512 VBMI)
        self.vbmi = cpu is not None and has_features(cpu, "+avx512vbmi")
        # 512-bit integer vectors (AVX-512BW), where shared strided loads pay (gather_groups.prepare)
        self.avx512bw = self.madd_lanes == 32
        # 256-bit vectors whose two-source shuffles cross 128-bit halves in two steps (AVX and
        # AVX2 without AVX-512's vpermt2ps): strided loads are picked within halves
        # (gather_groups.pick), their common cross-half step left for LLVM to merge
        self.in_lane_picks = (self.IN_LANE_PICKS and cpu is not None and (has_features(cpu, "+avx2") or has_features(cpu, "+avx"))
                              and not has_features(cpu, "+avx512f"))
        # ... and on AVX2 a stride's phases of 8- and 16-bit elements picked from vectors that
        # hold whole strides by masks or shifts and one pack per 256 bits (gather_groups.pick)
        self.phase_packs = self.in_lane_picks and self.SHARE_PHASES and has_features(cpu, "+avx2")
        self.buffer_bases: dict[int, tuple] = {}      # id(host pointer value) -> (value, buffer name)
        self.fn_main = ir.Function(self.module, ir.FunctionType(I32T, [PTR, PTR]), name=name)

    # ------------------------------------------------------------ entry
    def generate(self, stmt: Stmt) -> ir.Module:
        st = _Fn(self, self.fn_main)
        st.wide_index = True
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
        self.entry(st, arg, k)
        self.repeated = self.repeated_nests(stmt) if self.SHARE_TASKS else {}
        self.stmt(st, stmt)
        if not b.block.is_terminated:
            self.stream_fence(st)
            b.ret(ir.Constant(I32T, 0))
        if self.ALIAS_INFO:
            self.alias_info()
        return self.module

    def repeated_nests(self, stmt: Stmt) -> dict:
        """The serial loop nests outside parallel loops that have the shape of another such nest
        (closure.shape_key), by id: each is outlined (serial_outlined), so that nests that are
        the same up to names share one function. Nests with an Assert or other loop kinds are
        left in place."""
        shapes: dict = {}

        def visit(s: Stmt):
            if isinstance(s, For):
                if s.kind == "parallel":
                    return
                if s.kind == "serial":
                    got = shape_key(s, (), NARROW_LANES)
                    if got is not None and not any(t[0] == "assert" or (t[0] == "for" and t[2] not in
                                                   ("serial", "vectorized", "unrolled")) for t in got[0]):
                        shapes.setdefault(got[0], []).append(s)
            for k in stmt_children(s):
                visit(k)
        visit(stmt)
        return {id(s): s for nests in shapes.values() if len(nests) > 1 for s in nests}

    def stream_fence(self, st: _Fn):
        """Streaming stores are weakly ordered: an sfence at the end of each task and of the
        pipeline makes them visible before the caller (or the joining thread) reads. (Not
        LLVM's seq_cst fence, which x86 code writes as a locked or: x86 orders streaming stores
        by sfence, mfence or a serializing instruction.)"""
        if self.nontemporal:
            st.b.call(self.decl("llvm.x86.sse.sfence", ir.VoidType(), []), [])

    def dense_store(self, st: _Fn, buffer: str, v, ptr, align: int):
        """A store of the whole vector v at ptr (align: its element's bytes); into a
        `store_nontemporal()` buffer, a streaming store where ptr is aligned to the vector's
        size (a whole cache line for 16 f32), else an ordinary one (checked at run time: NumPy's
        large arrays start 16 bytes into a line). (Streaming the misaligned vectors as pieces of
        16 bytes, which x86 allows, made the box filter 1.7x slower: the two lines each vector
        touches are completed by other iterations, long after, and leave as partial writes.)"""
        b = st.b
        size = v.type.count * align if isinstance(v.type, ir.VectorType) else 0
        if buffer not in self.nontemporal or size < 16 or size & (size - 1):
            b.store(v, ptr, align=align)
            return
        aligned = b.icmp_unsigned("==", b.and_(b.ptrtoint(ptr, I64T), ir.Constant(I64T, size - 1)),
                                  ir.Constant(I64T, 0))
        with b.if_else(aligned, likely=True) as (then, other):
            with then:
                ins = b.store(v, ptr, align=size)
                ins.set_metadata("nontemporal", self.module.add_metadata([ir.Constant(I32T, 1)]))
            with other:
                b.store(v, ptr, align=align)

    def base_of(self, name: str, v) -> None:
        """v is the host pointer of buffer `name` (its accesses are tagged by alias_info)."""
        self.buffer_bases[id(v)] = (v, name)

    def alias_info(self) -> None:
        """Every load and store (masked and gathered ones too) whose address is a buffer's host
        pointer plus offsets gets that buffer's TBAA access tag (a scalar type of its own under
        one root: tags of two buffers never alias; LLVM's LangRef, "tbaa" metadata).
        Accesses to anything else (buffer descriptors, closures, error info) keep none."""
        m = self.module
        root = m.add_metadata([ir.MetaDataString(m, "hdsl buffers")])
        tags: dict[str, object] = {}
        zero = ir.Constant(I64T, 0)
        bases = self.buffer_bases
        for f in m.functions:
            for blk in f.blocks:
                for ins in blk.instructions:
                    if isinstance(ins, ir.LoadInstr):
                        ptr = ins.operands[0]
                    elif isinstance(ins, ir.StoreInstr):
                        ptr = ins.operands[1]
                    elif isinstance(ins, ir.CallInstr) and (k := _MEMORY_INTRINSIC_PTR.get(
                            getattr(ins.callee, "name", "").rsplit(".", 2)[0])) is not None:
                        ptr = ins.args[k]
                    else:
                        continue
                    while isinstance(ptr, ir.GEPInstr):
                        ptr = ptr.pointer
                    hit = bases.get(id(ptr))
                    if hit is None or hit[0] is not ptr:
                        continue
                    tag = tags.get(hit[1])
                    if tag is None:
                        ty = m.add_metadata([ir.MetaDataString(m, f"hdsl.{hit[1]}"), root, zero])
                        tag = tags[hit[1]] = m.add_metadata([ty, ty, zero])
                    ins.set_metadata("tbaa", tag)

    def entry(self, st: _Fn, arg, k: int) -> None:
        """After the arguments are bound: arguments past the outputs (arg(k), ...) for a
        subclass (GPU pipelines take their device table there, codegen/device_host.py)."""

    def _bind_buffer(self, st: _Fn, name: str, ptr, dims: int, which: int):
        """The buffer's host pointer, mins, extents and strides (i32). Offsets into it are
        32-bit, so the elements it spans, Σ (extent - 1) * |stride| + 1, must be below 2^31."""
        b = st.b
        host = b.load(b.gep(ptr, [ir.Constant(I32T, 0), ir.Constant(I32T, 0)], source_etype=BUFFER_T), typ=PTR)
        st.syms[name] = (host, None)
        self.base_of(name, host)
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

    def fail(self, st: _Fn, code: int, info: tuple):
        """Up to four i64 values of info in err_info (none in a task function), return code."""
        b = st.b
        if st.err_info is not None:
            for i, e in enumerate(info[:4]):
                v = self.expr(st, e)
                v = b.sext(v, I64T) if v.type != I64T else v
                b.store(v, b.gep(st.err_info, [ir.Constant(I64T, i)], source_etype=I64T))
        b.ret(ir.Constant(I32T, code))

    # (the bytes of fixed stack slots a function may take for allocations of constant size)
    FIXED_STACK_LIMIT = 16 * 1024

    def allocate(self, st: _Fn, s: Allocate):
        b = st.b
        elements = self.expr(st, s.size)
        known = gather_groups.const_int(elements)
        nbytes = None if known is None or known <= 0 else -(-known * max(1, s.type.bits // 8) // 64) * 64
        if nbytes is not None and st.fixed_stack + nbytes <= self.FIXED_STACK_LIMIT:
            # a small buffer of constant size (a tile's intermediate, allocated once per tile:
            # camera_pipe's demosaic and colour correction) in a fixed slot of the function's
            # frame, as Halide's: no stack save and restore, no size check and no pointer to
            # keep in a register per tile (the slot is at a constant offset in the frame)
            st.fixed_stack += nbytes
            slot = self.entry_alloca(st, I8T, nbytes)
            slot.align = 64
            slot.type = PTR                 # (an opaque pointer, as every buffer's: llvmlite types it i8*)
            self._allocated(st, s, slot, nbytes)
            return
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
                    # (and like malloc it touches only its own bookkeeping: a loop that
                    # allocates per iteration still keeps values loaded from other buffers)
                    if self.ALIAS_INFO:
                        malloc.attributes.add("inaccessiblememonly")
                        malloc.attributes.add("nounwind")
                on_heap = b.call(malloc, [rounded])
                heap_block = b.block
        mem = b.phi(PTR)
        mem.add_incoming(on_stack, stack_block)
        mem.add_incoming(on_heap, heap_block)
        ok = b.icmp_unsigned("!=", mem, ir.Constant(PTR, None))
        with b.if_then(b.not_(ok), likely=False):
            b.ret(ir.Constant(I32T, ERR_OUT_OF_MEMORY))
        self._allocated(st, s, mem, nbytes, after=lambda: self._free_unless(st, small, mem))
        b.call(self.decl("llvm.stackrestore.p0", ir.VoidType(), [PTR]), [saved])

    def _allocated(self, st: _Fn, s: Allocate, mem, nbytes, after=None):
        """The body of allocation s with its buffer at mem (nbytes: its size, where constant)."""
        old = st.syms.get(s.name)
        st.syms[s.name] = (mem, None)
        old_bytes = st.alloc_bytes.pop(s.name, None)
        if nbytes is not None:
            st.alloc_bytes[s.name] = nbytes
        self.base_of(s.name, mem)
        self.stmt(st, s.body)
        st.alloc_bytes.pop(s.name, None)
        if old_bytes is not None:
            st.alloc_bytes[s.name] = old_bytes
        if after is not None:
            after()
        if old is None:
            del st.syms[s.name]
        else:
            st.syms[s.name] = old

    def _free_unless(self, st: _Fn, small, mem):
        b = st.b
        with b.if_then(b.not_(small)):
            free = self.decl(f"{self.runtime_prefix}_free", ir.VoidType(), [PTR])
            if self.ALIAS_INFO and "nounwind" not in free.attributes:
                # (the block it frees, its header and the allocator's own state: no other buffer)
                free.attributes.add("inaccessiblemem_or_argmemonly")
                free.attributes.add("nounwind")
            b.call(free, [mem])

    # ------------------------------------------------------------ loops
    def loop(self, st: _Fn, s: For):
        n = _const_int(s.extent)
        if s.kind == "parallel" and st.lanes is None:
            self.parallel_for(st, s)
        elif st.fn is self.fn_main and st.lanes is None and st.mask is None and \
                self.repeated.get(id(s)) is s:
            self.serial_outlined(st, s)
        elif s.kind == "vectorized" and st.lanes is None and n is not None and 2 <= n <= 64 \
                and _vectorizable(s.body, frozenset((s.var,))):
            self.vector_for(st, s, n)
        elif s.kind in ("serial", "unrolled") and st.lanes is None and st.mask is None and (n is None or n >= 4) and \
                (p := transpose.plan(s)) is not None and (n is None or n >= p.lanes) and _vectorizable(p.vec.body, frozenset((p.vec.var,))):
            self.transpose_for(st, s, p)
        elif (inner := _unrolled_around_vector(s)) is not None and st.lanes is None and st.mask is None:
            # `for c (unrolled): for x (vectorized): body` as `for x (vectorized): for c
            # (unrolled): body`: the same vector operations in the same order (the vector loop
            # is one pass over its lanes, and its bounds do not depend on c), but the lets and
            # guards of the lanes (a split's tail clamp and guard) are then made once, not per
            # channel, and what the channels share is computed once (CodeGenLLVM.unrolled_for)
            self.stmt(st, For(inner.var, inner.min, inner.extent, inner.kind,
                              For(s.var, s.min, s.extent, s.kind, inner.body)))
        else:
            super().loop(st, s)

    # ------------------------------------------------------------ two-dimensional vectorization
    def transpose_for(self, st: _Fn, s: For, p: "transpose.TransposePlan"):
        """Loop s, n = p.lanes iterations at a time, its row <-> lane accesses as transposed
        blocks (hdsl/codegen/transpose.py); a block whose clamps are not no-ops, and the
        last e mod n iterations, run one by one."""
        b, n = st.b, p.lanes
        lo = self.expr(st, s.min)
        ext = self.expr(st, s.extent)
        zero, N = ir.Constant(I32T, 0), ir.Constant(I32T, n)
        ext = b.select(b.icmp_signed(">", ext, zero), ext, zero)
        blocks = b.sdiv(ext, N)
        pre = b.block
        head = st.fn.append_basic_block(f"{s.var}.blocks")
        body = st.fn.append_basic_block(f"{s.var}.block")
        done = st.fn.append_basic_block(f"{s.var}.blocks_end")
        b.branch(head)
        b.position_at_end(head)
        k = b.phi(I32T, name=f"{s.var}.block")
        k.add_incoming(zero, pre)
        b.cbranch(b.icmp_signed("<", k, blocks), body, done)
        b.position_at_end(body)
        st.cache = {}
        o0 = b.add(lo, b.mul(k, N))
        ok = self._block_conditions(st, s, p, o0)
        if ok is None:
            self._transposed_block(st, s, p, o0)
        else:
            with b.if_else(ok) as (then, other):
                with then:
                    self._transposed_block(st, s, p, o0)
                with other:
                    self._serial_range(st, s, o0, N)
        st.cache = {}
        k.add_incoming(b.add(k, ir.Constant(I32T, 1)), b.block)
        b.branch(head)
        b.position_at_end(done)
        const = _const_int(s.extent)
        if const is None or const % n:            # (the last e mod n iterations)
            done_n = b.mul(blocks, N)
            self._serial_range(st, s, b.add(lo, done_n), b.sub(ext, done_n))
        st.cache = {}

    def _serial_range(self, st: _Fn, s: For, start, count):
        """Iterations start .. start + count - 1 of s, one by one."""
        names = (f"{s.var}.range.min", f"{s.var}.range.extent")
        old = [st.syms.get(x) for x in names]
        st.syms[names[0]], st.syms[names[1]] = (start, I32), (count, I32)
        st.cache = {}
        self.serial_for(st, For(s.var, Var(names[0]), Var(names[1]), "serial", s.body))
        st.cache = {}
        for x, o in zip(names, old):
            self._restore(st, x, o)

    def _block_conditions(self, st: _Fn, s: For, p, o0):
        """The run-time check that the clamps p assumed away are no-ops from o0 to o0 + n - 1."""
        b = st.b
        ok = None
        if not p.conds:
            return None
        old = st.syms.get(s.var)
        st.syms[s.var] = (o0, I32)
        for cond in p.conds:
            if cond[0] == "far":
                st.cache = {}
                d = self.expr(st, cond[1])
                zero = ir.Constant(d.type, 0)
                t = b.icmp_signed(">=", b.select(b.icmp_signed("<", d, zero), b.neg(d), d), ir.Constant(d.type, p.lanes))
                ok = t if ok is None else b.and_(ok, t)
                continue
            op, a, c, at_last = cond
            at = b.add(o0, ir.Constant(I32T, p.lanes - 1)) if at_last else o0
            st.syms[s.var] = (at, I32)
            st.cache = {}
            va, vc = self.expr(st, a), self.expr(st, c)
            t = b.icmp_signed("<=" if op == "le" else ">=", va, vc)
            ok = t if ok is None else b.and_(ok, t)
        st.cache = {}
        self._restore(st, s.var, old)
        return ok

    def _bind_lets(self, st: _Fn, lets, saved: dict):
        for x in lets:
            saved.setdefault(x.name, st.syms.get(x.name))
            saved.setdefault(("ring", x.name), st.ring_lets.get(x.name, _ABSENT_RING))
            st.syms[x.name] = (self.expr(st, x.value, keep_ramp=True), x.value.type)
            st.ring_lets[x.name] = None        # (offsets through it keep 32 bits: see wide_index)

    def _transposed_block(self, st: _Fn, s: For, p, o0):
        b, n = st.b, p.lanes
        saved: dict = {s.var: st.syms.get(s.var), p.vec.var: st.syms.get(p.vec.var)}
        cols, vals, idxs = {}, [], []
        try:
            for k in range(n):
                st.cache = {}
                st.syms[s.var] = (b.add(o0, ir.Constant(I32T, k)), I32)
                self._bind_lets(st, p.outer_lets, saved)
                st.syms[p.vec.var] = (Ramp(self.expr(st, p.vec.min), 1, n), I32)
                st.lanes = n
                self._bind_lets(st, p.inner_lets, saved)
                if k == 0:
                    cols = {id(x): self._load_block(st, x, n, p.steps.get(id(x), 1)) for x in p.loads}
                for x in p.loads:
                    st.cache[id(x)] = (x, cols[id(x)][k])
                for x, d in p.forwards:          # (a scan: what iteration k - d computed)
                    if k - d >= 0:
                        st.cache[id(x)] = (x, vals[k - d])
                if p.store_blocked:
                    vals.append(self.splat(st, self.expr(st, p.store.value), n))
                    idx = self.expr(st, p.store.index, keep_ramp=True)
                    idxs.append(self.val(st, idx) if isinstance(idx, Interleave) else idx)
                else:
                    self.store(st, p.store)
                st.lanes = None
            if p.store_blocked:
                self._store_block(st, p.store, vals, idxs, p.steps.get(id(p.store), 1))
        finally:
            st.lanes = None
            st.cache = {}
            for name, old in saved.items():
                if isinstance(name, tuple):
                    if old is _ABSENT_RING:
                        st.ring_lets.pop(name[1], None)
                    else:
                        st.ring_lets[name[1]] = old
                else:
                    self._restore(st, name, old)

    def _block_addresses(self, st: _Fn, idx, n: int, step: int = 1):
        """Lane j's element offset of the vector index idx, for j = 0 .. n-1; where the index
        moves down with o (step -1), the offset n - 1 below it, where the block's column starts."""
        b = st.b
        if isinstance(idx, Ramp):
            base = idx.base if step > 0 else b.sub(idx.base, ir.Constant(idx.base.type, n - 1))
            if isinstance(idx.stride, int):
                return [b.add(base, ir.Constant(base.type, j * idx.stride)) for j in range(n)]
            return [b.add(base, b.mul(idx.stride, ir.Constant(idx.stride.type, j))) for j in range(n)]
        v = self.val(st, idx, n)
        out = [b.extract_element(v, ir.Constant(I32T, j)) for j in range(n)]
        return out if step > 0 else [b.sub(a, ir.Constant(a.type, n - 1)) for a in out]

    def _load_block(self, st: _Fn, e: Load, n: int, step: int = 1) -> list:
        """The n vectors load e gives in iterations o0 .. o0 + n - 1: n dense vectors down
        the block's columns, transposed (in reverse order where the index moves down with o)."""
        b = st.b
        mt = llvm_type(e.type, True)
        base = self.buffer_ptr(st, e.buffer)
        idx = self.expr(st, e.index, keep_ramp=True)
        align = max(1, e.type.bits // 8)
        rows = [b.load(b.gep(base, [a], source_etype=mt), typ=ir.VectorType(mt, n), align=align)
                for a in self._block_addresses(st, idx, n, step)]
        cols = transpose.transpose_vectors(b, rows)
        return cols if step > 0 else cols[::-1]

    def _store_block(self, st: _Fn, s: Store, vals: list, idxs: list, step: int = 1):
        """Store the n vectors of iterations o0 .. o0 + n - 1 as n dense vectors down the
        block's columns, where the lanes of one iteration are n or more elements apart."""
        b, n = st.b, len(vals)
        t = s.value.type
        mt = llvm_type(t, True)
        base = self.buffer_ptr(st, s.buffer)
        align = max(1, t.bits // 8)

        def blocked():
            rows = transpose.transpose_vectors(b, vals if step > 0 else vals[::-1])
            for a, v in zip(self._block_addresses(st, idxs[0], n, step), rows):
                self.dense_store(st, s.buffer, v, b.gep(base, [a], source_etype=mt), align)

        def one_by_one():
            # (lanes fewer than n apart: iteration by iteration, in order, as the loop does;
            # one scatter in a loop over the block's vectors, kept on the stack)
            vt = vals[0].type
            arr = self.entry_alloca(st, ir.ArrayType(vt, n))
            for k, v in enumerate(vals):
                b.store(v, b.gep(arr, [ir.Constant(I32T, 0), ir.Constant(I32T, k)]))
            first = self.val(st, idxs[0], n)       # (iteration k's index: first + k, or - k)
            pre = b.block
            head = st.fn.append_basic_block("store_block.head")
            body = st.fn.append_basic_block("store_block.body")
            end = st.fn.append_basic_block("store_block.end")
            b.branch(head)
            b.position_at_end(head)
            k = b.phi(I32T)
            k.add_incoming(ir.Constant(I32T, 0), pre)
            b.cbranch(b.icmp_signed("<", k, ir.Constant(I32T, n)), body, end)
            b.position_at_end(body)
            v = b.load(b.gep(arr, [ir.Constant(I32T, 0), k]), typ=vt)
            kk = k if first.type.element == I32T else b.sext(k, first.type.element)
            idx = (b.add if step > 0 else b.sub)(first, self.splat(st, kk, n))
            self.store_vector(st, s, base, idx, v, n)
            k.add_incoming(b.add(k, ir.Constant(I32T, 1)), b.block)
            b.branch(head)
            b.position_at_end(end)
        stride = idxs[0].stride if isinstance(idxs[0], Ramp) else None
        if isinstance(stride, int):
            (blocked if abs(stride) >= n else one_by_one)()
        elif stride is not None:
            far = b.icmp_signed(">=", b.select(b.icmp_signed("<", stride, ir.Constant(stride.type, 0)),
                                               b.neg(stride), stride), ir.Constant(stride.type, n))
            with b.if_else(far) as (then, other):
                with then:
                    blocked()
                with other:
                    one_by_one()
        else:
            one_by_one()

    def vector_for(self, st: _Fn, s: For, lanes: int):
        """The loop becomes one pass over `lanes` lanes: its var is a ramp (generated once per
        residue of its first value where selects test its parity: CodeGenLLVM.by_residue)."""
        self.per_residue(st, s, lambda lo: self._vector_pass(st, s, lanes, lo))

    def _vector_pass(self, st: _Fn, s: For, lanes: int, lo):
        old = st.syms.get(s.var)
        st.syms[s.var] = (Ramp(lo, 1, lanes), I32)
        st.lanes = lanes
        try:
            self.stmt(st, s.body)
        finally:
            st.lanes = None
            self._restore(st, s.var, old)

    def parallel_for(self, st: _Fn, s: For):
        """Outline the body into task(closure, i) and call hdsl_parallel_for."""
        b = st.b
        task, closure = self.outline(st, s.body, s.var)
        lo = self.expr(st, s.min)
        ext = self.expr(st, s.extent)
        pf = self.decl(f"{self.runtime_prefix}_parallel_for", I32T, [PTR, PTR, I32T, I32T])
        r = b.call(pf, [task, closure, lo, ext])
        with b.if_then(b.icmp_signed("!=", r, ir.Constant(I32T, 0)), likely=False):
            b.ret(r)

    def serial_outlined(self, st: _Fn, s: For):
        """Serial loop nest s as a function of its own, called once here: another nest of the
        pipeline has its shape (a pyramid's coarse levels, computed serially), and calls the
        same function if it is the same up to names (outline)."""
        b = st.b
        task, closure = self.outline(st, s, None)
        task.attributes.add("noinline")      # (one function's code for every level: kept so)
        r = b.call(task, [closure, ir.Constant(I32T, 0)])
        with b.if_then(b.icmp_signed("!=", r, ir.Constant(I32T, 0)), likely=False):
            b.ret(r)

    def outline(self, st: _Fn, body: Stmt, var: str | None):
        """`body` as a task function task(closure, var), and the closure it is called with here
        (filled with this scope's values of the names body uses). A body that is another
        outlined one's up to its names, over values of the same kinds (the local Laplacian's
        pyramid levels: one loop nest each, over other buffers), calls that function with its
        own closure: its code would be the same, names aside."""
        b = st.b
        free = sorted(n for n in _free_names(body) if n != var and n in st.syms)
        # (constants, such as a root Func's `curve.min.0 = 0`, are bound as constants in the
        # task, not passed through the closure, where LLVM could no longer fold them: the
        # LUT's gather subtracted a loaded 0 from every index)
        consts = [n for n in free if isinstance(st.syms[n][0], ir.Constant)]
        free = [n for n in free if n not in consts]
        # a serial nest runs on this thread: its errors' values go where this function's do
        # (the last field; a parallel task's iterations would race for them)
        err = var is None and st.err_info is not None
        key = self.task_key(st, body, var) if self.SHARE_TASKS else None
        key = ((key[0], err), key[1]) if key is not None else None
        known = self.tasks.get(key[0]) if key is not None else None
        if known is not None:
            task, fields = known
            free = [key[1][i] for i in fields]     # this body's names for the task's fields
        types = [st.syms[n][0].type for n in free] + ([PTR] if err else [])
        closure_t = ir.LiteralStructType(types) if types else ir.LiteralStructType([I8T])
        closure = self.entry_alloca(st, closure_t)
        for k, v in enumerate([st.syms[n][0] for n in free] + ([st.err_info] if err else [])):
            b.store(v, b.gep(closure, [ir.Constant(I32T, 0), ir.Constant(I32T, k)]))
        if known is None:
            task = self.task_body(st, body, var, free, consts, types, closure_t, err)
            if key is not None:
                where = {n: i for i, n in enumerate(key[1])}
                self.tasks[key[0]] = (task, [where[n] for n in free])
        return task, closure

    def task_key(self, st: _Fn, body: Stmt, var: str | None) -> tuple | None:
        """(key, names) for an outlined body (with `var` bound to the task's index): its shape
        up to names (closure.shape_key), and what the task's code takes from outside it for
        each name, by index: the kind of value bound (a constant's value itself, it is not
        passed), and what the code generator knows of the name (a buffer's host pointer, a non-temporal buffer, an allocation's
        constant size, a ring let). None where a body has no key."""
        got = shape_key(body, (var,) if var is not None else (), NARROW_LANES)
        if got is None:
            return None
        shape, names = got
        context = []
        tags: dict[str, int] = {}       # a host pointer's TBAA name -> the first index with it
        for i, n in enumerate(names):
            v = st.syms.get(n)
            if v is None or n == var:
                context.append((n in self.nontemporal,))
                continue
            val, t = v
            kind = str(val) if isinstance(val, ir.Constant) else str(val.type)
            base = self.buffer_bases.get(id(val)) if t is None else None
            # (the task tags its accesses by the first body's buffers: names that share a
            # tag there share it here, so tags differ only where buffers do)
            tag = tags.setdefault(base[1], i) if base is not None and base[0] is val else None
            context.append((kind, t, tag, n in self.nontemporal, st.alloc_bytes.get(n), n in st.ring_lets))
        return (shape, tuple(context), st.wide_index), names

    def task_body(self, st: _Fn, body: Stmt, var: str | None, free: list, consts: list, types: list,
                  closure_t, err: bool = False) -> ir.Function:
        """`body` as a task function task(closure, var): `free` are the names passed in the
        closure (of `types`), `consts` those bound to constants; err: the closure's last field
        is where errors leave their values (else a task leaves none)."""
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
            if st.syms[n][1] is None and id(st.syms[n][0]) in self.buffer_bases:
                self.base_of(self.buffer_bases[id(st.syms[n][0])][1], v)
        if err:
            inner.err_info = inner.b.load(inner.b.gep(cl, [ir.Constant(I32T, 0), ir.Constant(I32T, len(free))],
                                                      source_etype=closure_t), typ=PTR)
        if var is not None:
            inner.syms[var] = (idx, I32)
        for n in consts:
            inner.syms[n] = st.syms[n]
        # (a ring let of the caller arrives as a plain value that may have wrapped: its
        # offsets keep 32 bits, see CodeGenLLVM.wide_index)
        inner.wide_index = st.wide_index
        inner.ring_lets = {n: None for n in free if n in st.ring_lets}
        inner.alloc_bytes = dict(st.alloc_bytes)
        self.stmt(inner, body)
        if not inner.b.block.is_terminated:
            self.stream_fence(inner)
            inner.b.ret(ir.Constant(I32T, 0))
        return task

    def before_let(self, st: _Fn, s: LetStmt):
        if st.lanes is not None and st.mask is None and isinstance(s.value, Load) and id(s) not in st.lets_prepared:
            # a vector let of a load and the lets of loads right inside it (camera_pipe's
            # deinterleave binds its four phases, unrolled over c, so): their strided loads
            # of one stride's phases read shared vectors (gather_groups.prepare_lets)
            chain, names, x = [], set(), s
            while isinstance(x, LetStmt) and isinstance(x.value, Load) and not (free_vars(x.value) & names):
                chain.append(x)
                names.add(x.name)
                x = x.body
            st.lets_prepared.update(id(c) for c in chain)
            if len(chain) > 1:
                gather_groups.prepare_lets(self, st, [c.value for c in chain])

    # ------------------------------------------------------------ vector memory access
    def store(self, st: _Fn, s: Store):
        parity = False
        if st.lanes is not None and st.mask is None:
            # gathers of neighbouring elements loaded together (hdsl/codegen/gather_groups.py)
            gather_groups.prepare(self, st, s.value)
            parity = self.PARITY_LOADS and self.in_lane_picks and self.parity_loads(st, s.value)
        saved, st.parity = getattr(st, "parity", False), parity
        super().store(st, s)
        st.parity = saved

    PARITY_MIN_LOADS = 8          # halves loads a statement needs for parity_load to pay

    def parity_loads(self, st: _Fn, value) -> bool:
        """Whether `value` has at least PARITY_MIN_LOADS loads of 32-bit halves (parity_load):
        their controls, two to four vector instructions for each distinct d, are then
        shared by enough loads (interpolate's output: 8 a channel; its upsampling levels'
        4 took 3 instructions a vector more than the fixed interleave)."""
        n = 0
        for ld in gather_groups.every_lane(value):
            if ld.type.bits == 32:
                iv = self.expr(st, ld.index, keep_ramp=True)
                n += isinstance(iv, Interleave) and iv.halves
        return n >= self.PARITY_MIN_LOADS

    def store_vector(self, st: _Fn, s: Store, base, idx, v, lanes: int | None):
        b = st.b
        t = s.value.type
        mt = llvm_type(t, True)
        lanes = lanes or st.lanes
        v = self.splat(st, v, lanes)
        if not isinstance(idx, Ramp) and not isinstance(idx.type, ir.VectorType):
            # (one index for every lane, under a vectorized loop's mask: a scatter to one
            # address, which stores the active lanes in order, the last one's value kept, as
            # the loop's iterations would)
            idx = self.splat(st, idx, lanes)
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
                self.dense_store(st, s.buffer, v, ptr, max(1, t.bits // 8))
            else:
                f = self.decl(f"llvm.masked.store.{_suffix(vt)}.p0", ir.VoidType(), [vt, PTR, I32T, mask.type])
                b.call(f, [v, ptr, align, mask])
            return
        if isinstance(idx, Ramp) and isinstance(idx.stride, int) and idx.stride == -1:
            # lanes running downwards: reversed, then one dense store ending at the first lane
            ptr = b.gep(base, [b.sub(idx.base, ir.Constant(idx.base.type, lanes - 1))], source_etype=mt)
            v = self.reverse(st, v)
            if mask is None:
                b.store(v, ptr, align=max(1, t.bits // 8))
            else:
                f = self.decl(f"llvm.masked.store.{_suffix(vt)}.p0", ir.VoidType(), [vt, PTR, I32T, mask.type])
                b.call(f, [v, ptr, align, self.reverse(st, mask)])
            return
        ptrs = self.pointers(st, base, self.val(st, idx, lanes), t)
        if mask is None:
            mask = K(ir.VectorType(I1T, lanes), 1)
        f = self.decl(f"llvm.masked.scatter.{_suffix(vt)}.v{lanes}p0", ir.VoidType(),
                      [vt, ptrs.type, I32T, mask.type])
        b.call(f, [v, ptrs, align, mask])

    @staticmethod
    def reverse(st: _Fn, v):
        """v's lanes in the opposite order."""
        n = v.type.count
        return st.b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined),
                                   ir.Constant(ir.VectorType(I32T, n), list(range(n - 1, -1, -1))))

    PARITY_LOADS = True           # (off: the two halves interleaved by a fixed shuffle)

    def vector_load(self, st: _Fn, e: Load, base, idx):
        if isinstance(idx, Interleave):
            if st.mask is None:
                v = self.parity_load(st, e, base, idx)
                if v is not None:
                    return v
                return self.interleave(st, [self.load_vector(st, e, base, p) for p in idx.parts])
            idx = self.val(st, idx)
        return self.load_vector(st, e, base, idx)

    def parity_load(self, st: _Fn, e: Load, base, idx: Interleave):
        """`f(x / 2)` (an Interleave of halves: first lanes p and p + d, d = 0 or 1) of 8
        lanes of 32 bits on AVX/AVX2, as one vector holding the two half-vectors it reads,
        [f[p .. p + 3] | f[p + d .. p + d + 3]] (a 16-byte load and an insert from memory),
        and one in-lane variable permute (vpermilps) whose control depends on d only:
        lanes (p, p + d, p + 1, p + 1 + d) from the low half, (p + 2, p + 2 + d, p + 3,
        p + 3 + d) from the high one, at [0, d, 1, 1 + d] and [2 - d, 2, 3 - d, 3]. LLVM
        makes the fixed interleave of the two halves two broadcasts, two permutes and a
        blend; this is two loads (one folded into the insert) and one permute, plus the
        control, made once a vector for every load of the same d. It reads the same
        elements. None: not such a load."""
        if not (getattr(st, "parity", False) and idx.halves and len(idx.parts) == 2
                and e.type.bits == 32 and all(isinstance(p, Ramp) and isinstance(p.stride, int) and p.stride == 1
                                               and p.lanes == 4 for p in idx.parts)):
            return None
        b = st.b
        mt = llvm_type(e.type, True)
        halves = [self.load_vector(st, e, base, p) for p in idx.parts]
        both = b.shuffle_vector(halves[0], halves[1], ir.Constant(ir.VectorType(I32T, 8), list(range(8))))
        d = b.sub(idx.parts[1].base, idx.parts[0].base)
        if d.type != I32T:
            d = b.trunc(d, I32T)
        # (-d is all ones or zeros: the control moves by [0 1 0 1 -1 0 -1 0] or not)
        i32x8 = ir.VectorType(I32T, 8)
        minus_d = self.splat(st, b.sub(ir.Constant(I32T, 0), d), 8)
        ctrl = b.add(ir.Constant(i32x8, [0, 0, 1, 1, 2, 2, 3, 3]),
                     b.and_(minus_d, ir.Constant(i32x8, [0, 1, 0, 1, -1, 0, -1, 0])))
        f32x8 = ir.VectorType(ir.FloatType(), 8)
        permute = self.decl("llvm.x86.avx.vpermilvar.ps.256", f32x8, [f32x8, ir.VectorType(I32T, 8)])
        v = b.call(permute, [both if mt == ir.FloatType() else b.bitcast(both, f32x8), ctrl])
        return v if mt == ir.FloatType() else b.bitcast(v, ir.VectorType(mt, 8))

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
        elif isinstance(stride, int) and stride == -1:
            # lanes running downwards (an anticausal scan's input): the dense vector that ends
            # at the first lane, reversed, instead of a gather
            ptr = b.gep(base, [b.sub(idx.base, ir.Constant(idx.base.type, lanes - 1))], source_etype=mt)
            if mask is None:
                v = b.load(ptr, typ=vt, align=max(1, t.bits // 8))
            else:
                f = self.decl(f"llvm.masked.load.{_suffix(vt)}.p0", vt, [PTR, I32T, mask.type, vt])
                v = b.call(f, [ptr, align, self.reverse(st, mask), K(vt, 0)])
            v = self.reverse(st, v)
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
            v = self.clamped_load(st, e, base, idx, t, vt)
            if v is None:
                v = self.patterned_load(st, base, idx, t, vt)
        elif mask is None and (v := self.table_lookup(st, e, base, self.val(st, idx, lanes), t)) is not None:
            pass
        else:
            v = self.gather(st, base, self.val(st, idx, lanes), t, vt, mask)
        return v

    _PERMI2B = "llvm.x86.avx512.vpermi2var.qi.512"
    _PACKED_LOOKUP = True         # (off: the per-lane gather without VBMI, to measure against)

    def table_lookup(self, st: _Fn, e: Load, base, idx, t: Type):
        """A gather of bytes from an allocation of at most 1024 bytes of constant size (a
        look-up table computed by the pipeline: camera_pipe's tone curve) on a CPU with
        AVX-512 VBMI, as byte permutes instead of one scalar load per lane: the table's
        64-byte chunks loaded whole, each pair of them indexed by the low 7 bits of every
        lane's index at once (vpermi2b, 64 lanes an instruction), and the pair chosen by the
        index's higher bits (a tree of blends). Halide loads each lane on its own. Exact for
        every index inside the allocation, which every index of a load is (bounds inference
        sizes storage to what is read); lanes of a masked tail keep the gather. None: not
        such a load."""
        size = st.alloc_bytes.get(e.buffer)
        lanes = idx.type.count
        if not self.vbmi and self.madd_lanes and t.bits == 8 and not t.is_bool() and size is not None \
                and size <= 1 << 16 and lanes % 8 == 0 and idx.type.element == I32T and self._PACKED_LOOKUP:
            return self.packed_lookup(st, base, idx)
        if not (self.vbmi and t.bits == 8 and not t.is_bool() and size is not None and size <= 1024
                and lanes >= 16 and idx.type.element == I32T):
            return None
        b = st.b
        v64 = ir.VectorType(I8T, 64)
        chunks = [b.load(b.gep(base, [ir.Constant(I64T, 64 * j)], source_etype=I8T), typ=v64, align=64)
                  for j in range(size // 64)]
        if len(chunks) % 2:
            chunks.append(ir.Constant(v64, None))            # (never indexed: past the allocation)
        permi2b = self.decl(self._PERMI2B, v64, [v64, v64, v64])

        def lookup(part):                                    # 64 lanes
            low = b.trunc(part, v64)
            vals = [b.call(permi2b, [chunks[2 * p], low, chunks[2 * p + 1]]) for p in range(len(chunks) // 2)]
            high = b.trunc(b.lshr(part, ir.Constant(part.type, 7)), v64) if len(vals) > 1 else None
            bit = 0
            while len(vals) > 1:
                on = b.icmp_unsigned("!=", b.and_(high, ir.Constant(v64, 1 << bit)), ir.Constant(v64, 0))
                vals = [b.select(on, vals[i + 1], vals[i]) if i + 1 < len(vals) else vals[i]
                        for i in range(0, len(vals), 2)]
                bit += 1
            return vals[0]
        return self.in_chunks(st, 64, [idx], lookup)

    def packed_lookup(self, st: _Fn, base, idx):
        """Bytes base[idx[k]] for a table of at most 2^16 bytes on x86 without VBMI (AVX2):
        one scalar load per lane, as Halide's, inserted into the vector as Halide's
        (vpinsrb from memory), but the indices taken out four lanes at a time: narrowed to
        16 bits (exact: each lies in the table, as for table_lookup), one 64-bit extract
        (vmovq / vpextrq) per four lanes, split with shifts and masks on the integer ALUs.
        Halide (and LLVM from a gather) widens the indices to 32 bits and extracts each lane
        with vpextrd, a second vector-shuffle operation on every lane beside the insert;
        camera_pipe's tone curve on AVX2 went from about Halide's time to ~10% less."""
        b = st.b
        lanes = idx.type.count
        q = b.bitcast(b.trunc(idx, ir.VectorType(ir.IntType(16), lanes)), ir.VectorType(I64T, lanes // 4))
        quads = [b.extract_element(q, ir.Constant(I32T, j)) for j in range(lanes // 4)]
        mask16 = ir.Constant(I64T, 0xFFFF)
        v = ir.Constant(ir.VectorType(I8T, lanes), ir.Undefined)
        for k in range(lanes):
            sh = 16 * (k % 4)
            i = quads[k // 4] if sh == 0 else b.lshr(quads[k // 4], ir.Constant(I64T, sh))
            if sh != 48:
                i = b.and_(i, mask16)
            v = b.insert_element(v, b.load(b.gep(base, [i], source_etype=I8T), typ=I8T), ir.Constant(I32T, k))
        return v

    def strided_load(self, st: _Fn, ptr, stride: int, lanes: int, mt, t: Type):
        """Lanes ptr[0], ptr[stride], …: dense vectors of `lanes` elements covering exactly the
        span the lanes touch (the last one overlapping its neighbour, so nothing past the last
        lane is read), then one shuffle. A single load of the odd-sized span would be split by
        LLVM into many small loads and inserts."""
        b = st.b
        align = max(1, t.bits // 8)
        offsets, positions = gather_groups.span_chunks(lanes, stride)
        vt = ir.VectorType(mt, lanes)
        chunks = [b.load(ptr if o == 0 else b.gep(ptr, [ir.Constant(I32T, o)], source_etype=mt), typ=vt, align=align)
                  for o in offsets]
        return gather_groups.pick(self, st, chunks, positions)

    def clamped_load(self, st: _Fn, e: Load, base, iv, t: Type, vt):
        """A load at `off + clamp(r)`, r a ramp of constant stride 1 to 8, off the same on
        every lane, clamp any nest of min and max with bounds the same on every lane (a
        boundary condition's repeat_edge in the first or last vector of a row, where
        partition_loops leaves the clamp; a pyramid level clamped to a coarser one's size
        under a downsampling tap at 2x + k): the clamped index c is non-decreasing, so the
        lanes where c == r are those of r (one masked load of exactly them, dense or strided:
        gather_groups.masked_strided_load) and the others hold c's first or last lane (two
        scalar loads, at indices the load reads anyway). Instead of up to four pattern checks
        and then a gather of every lane. None: not of that form."""
        clamp = self._clamp_term(st, e.index)
        if clamp is None:
            return None
        c_expr, r = clamp
        b = st.b
        lanes = vt.count
        c = self.expr(st, c_expr)
        if not isinstance(c.type, ir.VectorType) or c.type.count != lanes or c.type != iv.type:
            return None
        first, last = ir.Constant(I32T, 0), ir.Constant(I32T, lanes - 1)
        off = b.sub(b.extract_element(iv, first), b.extract_element(c, first))
        rv = self.val(st, r, lanes)
        dense = b.icmp_signed("==", c, rv)
        mt = vt.element
        align = max(1, t.bits // 8)
        ptr = b.gep(base, [b.add(off, r.base)], source_etype=mt)
        if r.stride == 1:
            f = self.decl(f"llvm.masked.load.{_suffix(vt)}.p0", vt, [PTR, I32T, dense.type, vt])
            v = b.call(f, [ptr, ir.Constant(I32T, align), dense, K(vt, 0)])
        else:                         # (a downsampling's tap: hdsl/codegen/gather_groups.py)
            v = gather_groups.masked_strided_load(self, st, ptr, r.stride, dense, vt, align)
        v0 = b.load(b.gep(base, [b.extract_element(iv, first)], source_etype=mt), typ=mt, align=align)
        vl = b.load(b.gep(base, [b.extract_element(iv, last)], source_etype=mt), typ=mt, align=align)
        c0 = self.splat(st, b.extract_element(c, first), lanes)
        edge = b.select(b.icmp_signed("==", c, c0), self.splat(st, v0, lanes), self.splat(st, vl, lanes))
        return b.select(dense, v, edge)

    def _clamp_term(self, st: _Fn, index: Expr):
        """(c, r) when index is a sum of lane-invariant terms and one term c (added, not
        subtracted) that is a nest of min / max over lane-invariant bounds and a dense ramp r."""
        def lanewise(x):
            v = self.expr(st, x, keep_ramp=True)
            return isinstance(v, (Ramp, Interleave)) or isinstance(v.type, ir.VectorType)
        terms, todo = [], [(index, True)]
        while todo:
            x, plus = todo.pop()
            if isinstance(x, BinOp) and x.op in ("+", "-") and x.type == I32:
                todo += [(x.a, plus), (x.b, plus if x.op == "+" else not plus)]
            else:
                terms.append((x, plus))
        varying = [(x, plus) for x, plus in terms if lanewise(x)]
        if len(varying) != 1 or not varying[0][1]:
            return None
        c = varying[0][0]
        x = c
        while isinstance(x, BinOp) and x.op in ("min", "max"):
            va, vb = lanewise(x.a), lanewise(x.b)
            if va == vb:
                return None
            x = x.a if va else x.b
        if x is c:
            return None
        r = self.expr(st, x, keep_ramp=True)
        if not (isinstance(r, Ramp) and isinstance(r.stride, int) and 1 <= r.stride <= 8 and r.base.type == I32T):
            return None
        return c, r

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
        if mask is None and t.bits <= 16 and idx.type.element.width <= 32:
            return self.lane_loads(st, base, idx, t, vt)
        ptrs = self.pointers(st, base, idx, t)
        if mask is None:
            mask = K(ir.VectorType(I1T, lanes), 1)
        f = self.decl(f"llvm.masked.gather.{_suffix(vt)}.v{lanes}p0", vt, [ptrs.type, I32T, mask.type, vt])
        return b.call(f, [ptrs, ir.Constant(I32T, max(1, t.bits // 8)), mask, K(vt, 0)])

    # ------------------------------------------------------------ rounding averages
    def rounding_avg(self, st: _Fn, e: Cast):
        """`uN((W(a) + W(b) + 1) / 2)` with a and b of uN (N = 8 or 16) and W any integer type
        wide enough for the sum (Halide's avg, camera_pipe's avg8, avg16 and blur121) as x86's
        pavgb / pavgw of the target's widest vectors, which compute exactly that. Left as
        arithmetic, LLVM finds pavg only where the average is used at its own width: a
        nest of them whose result is widened again (camera_pipe's unsharp mask, an i16
        difference of two 1-2-1 blurs) became pavgw on 16-bit lanes, with the 8-bit lanes
        unpacked to 16 first, where Halide has pavgb. None: not that pattern, or not x86."""
        t = e.type
        if not (self.madd_lanes and t.is_uint() and t.bits in (8, 16)):
            return None
        ab = _avg_operands(e.value, t)
        if ab is None:
            return None
        va, vb = (self.expr(st, x) for x in ab)
        if not (isinstance(va.type, ir.VectorType) and isinstance(vb.type, ir.VectorType)):
            return None
        b = st.b
        n = va.type.count
        widest = {32: 512, 16: 256}.get(self.madd_lanes, 128) // t.bits     # lanes of the widest
        w = min(widest, max(128 // t.bits, 1 << (n - 1).bit_length()))
        name = {128: "llvm.x86.sse2.pavg", 256: "llvm.x86.avx2.pavg", 512: "llvm.x86.avx512.pavg"}[w * t.bits]
        name += (".b" if t.bits == 8 else ".w") + (".512" if w * t.bits == 512 else "")
        vt = ir.VectorType(ir.IntType(t.bits), w)
        fn = self.decl(name, vt, [vt, vt])
        return self.in_chunks(st, w, [va, vb], lambda x, y: b.call(fn, [x, y]))

    # ------------------------------------------------------------ i16 x i16 products
    def binop(self, st: _Fn, op: str, a, b_, t: Type):
        if op == "*" and t == I32 and self.madd_lanes and isinstance(a.type, ir.VectorType):
            v = self.madd_mul(st, a, b_)
            if v is not None:
                return v
        return super().binop(st, op, a, b_, t)

    def madd_mul(self, st: _Fn, a, c):
        """i32(x) * i32(y) of 16-bit (or 8-bit) x and y as x86's pmaddwd (Halide's pattern for
        camera_pipe's colour matrix): each operand zero-extended from its 16 bits, so that
        the pair of i16 halves of a lane is (x, 0) and pmaddwd's x * y + 0 * 0 is the exact
        product (|x * y| <= 2^30). On targets with VNNI, LLVM fuses a pmaddwd added to a sum
        into vpdpwssd. Where LLVM would do this itself it needs vectors of 128 bits, or an
        operand known non-negative; a vector of signed 16-bit values times a broadcast
        coefficient stays a pmulld (3 to 10 cycles) and a separate add. None: not such a
        product (an operand not extended from 16 bits or fewer)."""
        xa, xc = _i16_in_i32(st.b, a), _i16_in_i32(st.b, c)
        if xa is None or xc is None:
            return None
        b = st.b
        w = self.madd_lanes // 2                       # i32 lanes per pmaddwd
        name = {4: "llvm.x86.sse2.pmadd.wd", 8: "llvm.x86.avx2.pmadd.wd", 16: "llvm.x86.avx512.pmaddw.d.512"}[w]
        vi16 = ir.VectorType(ir.IntType(16), 2 * w)
        fn = self.decl(name, ir.VectorType(I32T, w), [vi16, vi16])
        return self.in_chunks(st, w, [xa, xc], lambda x, y: b.call(fn, [b.bitcast(x, vi16), b.bitcast(y, vi16)]))

    def in_chunks(self, st: _Fn, w: int, args, op):
        """op applied to the lanes of `args` (vectors of the same count) w at a time (an
        instruction of w lanes), the lanes padded up to a multiple of w and the results'
        lanes concatenated back to the count of args."""
        b = st.b
        n = args[0].type.count
        padded = -(-n // w) * w
        args = [self._pad(st, v, padded) for v in args]
        parts = []
        for k in range(0, padded, w):
            parts.append(op(*(v if padded == w else b.shuffle_vector(
                v, ir.Constant(v.type, ir.Undefined), ir.Constant(ir.VectorType(I32T, w), list(range(k, k + w))))
                for v in args)))
        r = self.concat(st, parts) if len(parts) > 1 else parts[0]
        if padded != n:
            r = b.shuffle_vector(r, ir.Constant(r.type, ir.Undefined), ir.Constant(ir.VectorType(I32T, n), list(range(n))))
        return r

    def lane_loads(self, st: _Fn, base, idx, t: Type, vt):
        """A gather of 8- or 16-bit elements (a look-up table's), which x86 has no instruction
        for, as one scalar load per lane at base + its 32-bit index, sign-extended as in
        `pointers` (Halide's scalarized load). LLVM's own expansion of a masked gather first
        builds the vector of 64-bit addresses, several registers of them for 32 or 64 lanes,
        which spill before each lane is extracted (camera_pipe's tone curve: 4% fewer
        instructions in the whole pipeline's assembly, the spills of its look-ups gone)."""
        b = st.b
        mt = llvm_type(t, True)
        v = ir.Constant(vt, ir.Undefined)
        for k in range(vt.count):
            p = b.gep(base, [b.sext(b.extract_element(idx, ir.Constant(I32T, k)), I64T)], source_etype=mt)
            v = b.insert_element(v, b.load(p, typ=mt, align=max(1, t.bits // 8)), ir.Constant(I32T, k))
        return v

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

    # ------------------------------------------------------------ index arithmetic on ramps
    def index_cast(self, st: _Fn, e: Cast, v):
        """Index arithmetic: a widened ramp is still a ramp (no overflow within a vector)."""
        t = e.type
        if not (t.is_int() and t.bits >= 32 and e.value.type.is_int() and not e.saturate):
            return None

        def widen(r: Ramp) -> Ramp:
            stride = r.stride if isinstance(r.stride, int) else self.cast(st, t, r.stride, e.value.type)
            return Ramp(self.cast(st, t, r.base, e.value.type), stride, r.lanes)
        if isinstance(v, Interleave):
            return Interleave([widen(p) for p in v.parts], v.halves)
        return widen(v)

    def index_binop(self, st: _Fn, e: BinOp, a, c):
        return self._ramp_binop(st, e, a, c)

    def _ramp_binop(self, st, e: BinOp, a, c):
        u = self._uniform_binop(st, e, a, c)
        if u is not None:
            return u
        if any(isinstance(v, Interleave) and all(isinstance(p.stride, int) and p.stride == 0 for p in v.parts)
               for v in (a, c)):
            return self._interleave_binop(st, e, a, c)
        if not (isinstance(a, (Ramp, Interleave)) or isinstance(c, (Ramp, Interleave))) or e.type.is_float() \
                or e.type.bits < 32:
            return None
        b = st.b
        if isinstance(a, Interleave) or isinstance(c, Interleave):
            return self._interleave_binop(st, e, a, c)
        if e.op in ("/", "%") and isinstance(a, Ramp) and isinstance(a.stride, int):
            k = _const_int(e.b)
            if k is not None and k > 1:
                def divmod_(v):
                    # (a remainder known in a loop copy of known residue: a constant; a
                    # quotient there a shift of v less it, the same value for v and v + 1 of
                    # an even v: CodeGenLLVM.let_residue_split)
                    r = self.known_rem(st, v, k) if k & (k - 1) == 0 else None
                    if r is not None and e.op == "%":
                        return ir.Constant(v.type, r)
                    if r is not None:
                        return b.ashr(v if r == 0 else b.sub(v, ir.Constant(v.type, r)),
                                      ir.Constant(v.type, k.bit_length() - 1))
                    return self.binop(st, e.op, v, ir.Constant(v.type, k), e.a.type)
                if a.stride % k == 0:
                    return Ramp(divmod_(a.base), a.stride // k if e.op == "/" else 0, a.lanes)
                if a.lanes % k == 0 and a.lanes // k >= 2:
                    parts = []
                    for r in range(k):
                        br = a.base if r == 0 else \
                            self.plus_known(st, b.add(a.base, ir.Constant(a.base.type, a.stride * r)), a.base, a.stride * r)
                        parts.append(Ramp(divmod_(br), a.stride if e.op == "/" else 0, a.lanes // k))
                    return Interleave(parts, e.op == "/" and k == 2 and a.stride == 1)
            return None

        def scalar(v):
            return not isinstance(v, Ramp) and not isinstance(v.type, ir.VectorType)
        if e.op == "+":
            if isinstance(a, Ramp) and scalar(c):
                d = _const_of(c)
                return Ramp(b.add(a.base, c) if d is None else self.plus_known(st, b.add(a.base, c), a.base, d),
                            a.stride, a.lanes)
            if isinstance(c, Ramp) and scalar(a):
                return Ramp(b.add(a, c.base), c.stride, c.lanes)
            if isinstance(a, Ramp) and isinstance(c, Ramp):
                return Ramp(b.add(a.base, c.base), self._sadd(b, a.stride, c.stride, a.base), a.lanes)
        if e.op == "-":
            if isinstance(a, Ramp) and scalar(c):
                d = _const_of(c)
                return Ramp(b.sub(a.base, c) if d is None else self.plus_known(st, b.sub(a.base, c), a.base, -d),
                            a.stride, a.lanes)
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

    def _uniform_binop(self, st, e: BinOp, a, c):
        """`a op c` where each operand is the same on every lane (a ramp of stride 0, as
        `x % 2` of a vectorized x makes part by part, or a scalar): still one such ramp, of
        any type (comparisons included: vector_select reads their lane sets)."""
        def uniform(v):
            if isinstance(v, Ramp):
                return isinstance(v.stride, int) and v.stride == 0
            return not isinstance(v, Interleave) and not isinstance(v.type, ir.VectorType)
        if not (uniform(a) and uniform(c)) or not (isinstance(a, Ramp) or isinstance(c, Ramp)) \
                or e.op in ("<<", ">>"):
            return None
        lanes = (a if isinstance(a, Ramp) else c).lanes
        x = a.base if isinstance(a, Ramp) else a
        y = c.base if isinstance(c, Ramp) else c
        return Ramp(self.binop(st, e.op, x, y, e.a.type), 0, lanes)

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

        def same_on_every_lane(v):
            return (isinstance(v, Ramp) and isinstance(v.stride, int) and v.stride == 0) or \
                not isinstance(v, (Ramp, Interleave)) and not isinstance(v.type, ir.VectorType)
        # (halves plus or minus one value: the parts' first lanes still differ by 0 or 1)
        halves = e.op in ("+", "-") and isinstance(a, Interleave) and a.halves and same_on_every_lane(c) or \
            e.op == "+" and isinstance(c, Interleave) and c.halves and same_on_every_lane(a)
        return Interleave(out, halves)

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

    # ------------------------------------------------------------ x86, libm, printf
    def float_to_i32(self, st: _Fn, v):
        return self.cvtt_i32(st, v)

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

    def math_call(self, st: _Fn, name: str, args, t: Type):
        return self.libm(st, name, args, t)

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

    def emit_print(self, st: _Fn, fmt: str, vals: list):
        printf = self.decl("printf", I32T, [PTR], var_arg=True)
        st.b.call(printf, [self._cstr(fmt)] + vals)


def _avg_operands(e: Expr, t: Type):
    """(a, b) when e is `(W(a) + W(b) + 1) / 2` (or `>> 1`, the three terms added in any
    order) with a and b of type t and W an integer type that holds a + b + 1 exactly."""
    from hdsl.ir.expr import Const
    if not (isinstance(e, BinOp) and e.op in ("/", ">>") and isinstance(e.b, Const)
            and e.b.value == (2 if e.op == "/" else 1)):
        return None
    w = e.type
    if not (w.is_int() or w.is_uint()) or w.bits - (1 if w.is_int() else 0) < t.bits + 1:
        return None
    terms = []

    def flatten(x):
        if isinstance(x, BinOp) and x.op == "+" and x.type == w:
            flatten(x.a)
            flatten(x.b)
        else:
            terms.append(x)
    flatten(e.a)
    if len(terms) != 3:
        return None
    ones = [x for x in terms if isinstance(x, Const) and x.value == 1]
    ops = [x.value for x in terms if isinstance(x, Cast) and x.type == w and x.value.type == t]
    if len(ones) != 1 or len(ops) != 2:
        return None
    return ops[0], ops[1]


def has_features(cpu: str, *wanted: str) -> bool:
    """Whether `cpu` (a target's CPU variant) is an x86-64 one with every feature in `wanted`
    (LLVM's spelling: "+avx512vbmi")."""
    from llvmlite import binding as llvm

    from hdsl.runtime.jit import cpu_features
    if not llvm.get_default_triple().startswith(("x86_64", "amd64")):
        return False
    features = cpu_features(cpu)[1].split(",")
    return all(f in features for f in wanted)


def madd_lanes(cpu: str) -> int | None:
    """The i16 lanes of `cpu`'s widest pmaddwd: 32 with AVX-512BW, 16 with AVX2, else 8
    (SSE2, every x86-64); None off x86. `cpu` is a target's CPU variant ("host",
    "x86-64-avx2", ...)."""
    from llvmlite import binding as llvm
    if not llvm.get_default_triple().startswith(("x86_64", "amd64")):
        return None
    return 32 if has_features(cpu, "+avx512bw") else 16 if has_features(cpu, "+avx2") else 8


def _i16_in_i32(b, v):
    """A vector of i32 lanes whose values `v` (a vector of i32) are known to be those of 16-bit
    signed lanes (extended from i16, i8 or u8, or a broadcast of such a scalar), as the same
    values zero-extended from their 16 bits: the lanes pmaddwd multiplies. None: not known."""
    vt = v.type
    mask = v.operands[2] if isinstance(v, ir.ShuffleVector) else None
    splat = isinstance(v, ir.ShuffleVector) and isinstance(v.operands[0], ir.InsertElement) and \
        isinstance(mask, ir.Constant) and isinstance(mask.constant, list) and \
        all(getattr(k, "constant", k) == 0 for k in mask.constant)
    x = v.operands[0].operands[1] if splat else v
    if not (isinstance(x, ir.CastInstr) and x.opname in ("sext", "zext")):
        return None
    src = x.operands[0]
    bits = (src.type.element if isinstance(src.type, ir.VectorType) else src.type).width
    if x.opname == "zext" and bits <= 8:
        out = x                                        # (already 0 above bit 8)
    elif x.opname == "sext" and bits <= 16:
        s16 = src.type if bits == 16 else (ir.VectorType(ir.IntType(16), src.type.count)
                                           if isinstance(src.type, ir.VectorType) else ir.IntType(16))
        src = src if bits == 16 else b.sext(src, s16)
        out = b.zext(src, x.type)
    else:
        return None
    if splat:
        one = b.insert_element(ir.Constant(vt, ir.Undefined), out, ir.Constant(I32T, 0))
        out = b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), mask)
    return out


def _data_dependent(e: Expr) -> bool:
    """Does an index read memory (a look-up table)? Then no pattern is worth checking for."""
    return any(isinstance(n, Load) for n in walk(e))


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


def _unrolled_around_vector(s: For) -> For | None:
    """The vectorized loop that is the whole body of unrolled loop s, where the two may be
    swapped: s has a constant extent of 1 to 64, the inner loop's bounds do not depend on s's
    var, and the inner loop is one vector_for pass (CodeGenCPU.loop) with s inside it.
    None: not of that form."""
    inner = s.body
    n, m = _const_int(s.extent), _const_int(inner.extent) if isinstance(inner, For) else None
    if s.kind != "unrolled" or n is None or not 1 <= n <= 64 or not isinstance(inner, For) or \
            inner.kind != "vectorized" or m is None or not 2 <= m <= 64 or inner.var == s.var:
        return None
    if s.var in free_vars(inner.min) | free_vars(inner.extent) or \
            inner.var in free_vars(s.min) | free_vars(s.extent):
        return None
    swapped = For(s.var, s.min, s.extent, s.kind, inner.body)
    return inner if _vectorizable(swapped, frozenset((inner.var,))) else None


def _vector_expr_ok(e: Expr) -> bool:
    return not any(isinstance(n, Intrinsic) and n.name == "print" for n in walk(e))


def generate(pipeline: Pipeline, stmt: Stmt, name: str, fast_math: bool = False,
             runtime_prefix: str = "hdsl", cpu: str | None = None, nontemporal: frozenset = frozenset()) -> ir.Module:
    """The pipeline as LLVM IR; `runtime_prefix` names the thread pool's entry points
    (ahead-of-time objects give each pipeline its own, so two can be linked together); `cpu`,
    the target's CPU variant ("host", "x86-64-avx2", ...), lets it use that CPU's widest
    instructions where LLVM would not choose them (pmaddwd); `nontemporal`, the buffers whose
    dense vector stores stream past the caches (`store_nontemporal()`)."""
    return CodeGenCPU(pipeline, name, fast_math, runtime_prefix, cpu, nontemporal).generate(stmt)
