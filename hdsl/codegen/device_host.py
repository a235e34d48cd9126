"""Host code of GPU pipelines: kernel launches and device copies through the device table.

`CodeGenHostGPU` is the CPU back end (hdsl/codegen/cpu.py) plus what a pipeline with
LaunchKernel statements needs on the host. Its function takes one more argument after
the outputs: a pointer to the device-interface table (hdsl/runtime/device.py). Every
buffer a kernel uses has a record with the buffer ABI's device fields
(hdsl/runtime/abi.py): inputs and outputs their own structs, intermediates a struct on
the stack. On entry no buffer is on the device, inputs are HOST_DIRTY.

- LaunchKernel: each buffer arg is allocated on the device if it is not there yet and
  copied in if HOST_DIRTY; the args go into 8-byte slots; `launch` is called with the
  grid, the block size and the shared bytes; the buffers the kernel writes become
  DEVICE_DIRTY.
- DeviceSync "to_host": copied back if DEVICE_DIRTY; "host_written": HOST_DIRTY.
- An intermediate's device copy is freed when its Allocate's scope ends; what a call
  leaves on the device is released by the Device after the call.

For the host-emulation device each kernel is also compiled here, from the same Kernel
object, as `i32 NAME.KERNEL(u64 *args)`: its outermost block loop runs on the thread
pool, inner block loops and thread loops serially, GpuBarrier does nothing (the thread
loops it separates run one after another) and gpu_shared / gpu_local allocations are
ordinary ones, made per block / per thread where the Allocate is.
"""
from __future__ import annotations

from llvmlite import ir

from hdsl.codegen.cpu import BUFFER_T, CodeGenCPU
from hdsl.codegen.llvm import I32T, I64T, PTR, _Fn, llvm_type
from hdsl.ir.expr import BinOp, Const, Var
from hdsl.ir.func import Pipeline
from hdsl.ir.stmt import GPU_BLOCK, GPU_THREAD, Allocate, DeviceSync, For, GpuBarrier, LaunchKernel, LetStmt, Stmt
from hdsl.ir.types import I32
from hdsl.lower.gpu import kernels_of
from hdsl.runtime.abi import DEVICE_DIRTY, FIELD_INDEX, HOST_DIRTY
from hdsl.runtime import device as device_rt
from hdsl.runtime.device import ERR_DEVICE

# the device table's entry points, in DeviceInterface's order
MALLOC, FREE, TO_DEVICE, TO_HOST, LAUNCH = range(5)
TABLE_T = ir.LiteralStructType([PTR] * 5)
KERNEL_T = ir.FunctionType(I32T, [PTR])


class CodeGenHostGPU(CodeGenCPU):
    ALIAS_INFO = False       # (device copies write the host's buffers too: CodeGenCPU.ALIAS_INFO)

    def __init__(self, pipeline: Pipeline, name: str, fast_math: bool = False, runtime_prefix: str = "hdsl",
                 device: str = "host_emulate"):
        super().__init__(pipeline, name, fast_math, runtime_prefix)
        self.device = device
        self.on_device: set[str] = set()
        self.records: dict[str, ir.Value] = {}      # buffer -> its struct (with the device fields)
        self.elements: dict[str, ir.Value] = {}     # buffer -> i64 elements it spans
        self.elem_bits: dict[str, int] = {}         # buffer -> bits of its elements (kernels' args)
        self.table = None

    def generate(self, stmt: Stmt) -> ir.Module:
        launches = kernels_of(stmt)
        self.on_device = {a.name for k in launches for a in k.kernel.buffers()}
        self.elem_bits = {a.name: a.type.bits for k in launches for a in k.kernel.buffers()}
        return super().generate(stmt)

    # ------------------------------------------------------------ entry
    def entry(self, st: _Fn, arg, k: int) -> None:
        """After the outputs: the device table; inputs HOST_DIRTY, nothing on the device."""
        self.table = arg(k)
        inputs = {b.name for b in self.p.inputs}
        for name, rec in self.records.items():
            self._set(st, rec, "device", ir.Constant(I64T, 0))
            self._set(st, rec, "flags", ir.Constant(I64T, HOST_DIRTY if name in inputs else 0))

    def _bind_buffer(self, st: _Fn, name: str, ptr, dims: int, which: int):
        super()._bind_buffer(st, name, ptr, dims, which)
        if name not in self.on_device:
            return
        b = st.b
        span = ir.Constant(I64T, 1)
        for d in range(dims):
            ext = b.sext(st.syms[f"{name}.extent.{d}"][0], I64T)
            stride = b.sext(st.syms[f"{name}.stride.{d}"][0], I64T)
            mag = b.select(b.icmp_signed("<", stride, ir.Constant(I64T, 0)), b.neg(stride), stride)
            ext = b.select(b.icmp_signed(">", ext, ir.Constant(I64T, 0)), ext, ir.Constant(I64T, 1))
            span = b.add(span, b.mul(b.sub(ext, ir.Constant(I64T, 1)), mag))
        self.records[name] = ptr
        self.elements[name] = span

    # ------------------------------------------------------------ records
    def _field(self, st: _Fn, rec, field: str):
        idx = [ir.Constant(I32T, 0), ir.Constant(I32T, FIELD_INDEX[field])]
        if getattr(rec.type, "is_opaque", False):       # an argument's struct
            return st.b.gep(rec, idx, source_etype=BUFFER_T)
        return st.b.gep(rec, idx)                         # a struct on the stack

    def _get(self, st: _Fn, rec, field: str):
        return st.b.load(self._field(st, rec, field), typ=I64T)

    def _set(self, st: _Fn, rec, field: str, v):
        st.b.store(v, self._field(st, rec, field))

    def _call(self, st: _Fn, index: int, ret, args, types):
        b = st.b
        slot = b.gep(self.table, [ir.Constant(I32T, 0), ir.Constant(I32T, index)], source_etype=TABLE_T)
        fn = b.load(slot, typ=ir.FunctionType(ret, types).as_pointer())
        return b.call(fn, args)

    def _check(self, st: _Fn, r):
        b = st.b
        with b.if_then(b.icmp_signed("!=", r, ir.Constant(I32T, 0)), likely=False):
            b.ret(ir.Constant(I32T, ERR_DEVICE))

    def _bytes(self, st: _Fn, name: str, elem_bits: int):
        return st.b.mul(self.elements[name], ir.Constant(I64T, max(1, elem_bits // 8)))

    def to_device(self, st: _Fn, name: str, elem_bits: int):
        """Allocated on the device if it is not yet, copied in if the host's copy is newer."""
        b = st.b
        rec = self.records[name]
        nbytes = self._bytes(st, name, elem_bits)
        with b.if_then(b.icmp_unsigned("==", self._get(st, rec, "device"), ir.Constant(I64T, 0))):
            h = self._call(st, MALLOC, I64T, [nbytes], [I64T])
            with b.if_then(b.icmp_unsigned("==", h, ir.Constant(I64T, 0)), likely=False):
                b.ret(ir.Constant(I32T, ERR_DEVICE))
            self._set(st, rec, "device", h)
        flags = self._get(st, rec, "flags")
        with b.if_then(b.icmp_unsigned("!=", b.and_(flags, ir.Constant(I64T, HOST_DIRTY)), ir.Constant(I64T, 0))):
            host = self.buffer_ptr(st, name)
            r = self._call(st, TO_DEVICE, I32T, [self._get(st, rec, "device"), host, nbytes], [I64T, PTR, I64T])
            self._check(st, r)
            self._set(st, rec, "flags", b.and_(self._get(st, rec, "flags"), ir.Constant(I64T, ~HOST_DIRTY)))

    def to_host(self, st: _Fn, name: str, elem_bits: int):
        b = st.b
        rec = self.records[name]
        flags = self._get(st, rec, "flags")
        with b.if_then(b.icmp_unsigned("!=", b.and_(flags, ir.Constant(I64T, DEVICE_DIRTY)),
                                       ir.Constant(I64T, 0))):
            host = self.buffer_ptr(st, name)
            r = self._call(st, TO_HOST, I32T, [host, self._get(st, rec, "device"), self._bytes(st, name, elem_bits)],
                           [PTR, I64T, I64T])
            self._check(st, r)
            self._set(st, rec, "flags", b.and_(self._get(st, rec, "flags"), ir.Constant(I64T, ~DEVICE_DIRTY)))

    def _mark(self, st: _Fn, name: str, bit: int):
        rec = self.records[name]
        self._set(st, rec, "flags", st.b.or_(self._get(st, rec, "flags"), ir.Constant(I64T, bit)))

    # ------------------------------------------------------------ statements
    def _stmt(self, st: _Fn, s: Stmt):
        if isinstance(s, LaunchKernel):
            self.launch(st, s)
        elif isinstance(s, DeviceSync):
            if s.op == "to_host":
                self.to_host(st, s.buffer, self.elem_bits[s.buffer])
            else:
                self._mark(st, s.buffer, HOST_DIRTY)
        elif isinstance(s, GpuBarrier):
            pass            # (emulation: the thread loops it separates run one after another)
        else:
            super()._stmt(st, s)

    def allocate(self, st: _Fn, s: Allocate):
        if s.name not in self.on_device or st.fn is not self.fn_main:
            return super().allocate(st, s)
        # an intermediate that kernels use: a record of its own, freed on the device after
        rec = self.entry_alloca(st, BUFFER_T)
        self._set(st, rec, "device", ir.Constant(I64T, 0))
        self._set(st, rec, "flags", ir.Constant(I64T, 0))
        old = self.records.get(s.name), self.elements.get(s.name)
        self.records[s.name], self.elements[s.name] = rec, self.expr(st, s.size)
        super().allocate(st, s)
        b = st.b
        if not b.block.is_terminated:
            h = self._get(st, rec, "device")
            with b.if_then(b.icmp_unsigned("!=", h, ir.Constant(I64T, 0))):
                self._call(st, FREE, I32T, [h], [I64T])
        self.records[s.name], self.elements[s.name] = old
        if old[0] is None:
            del self.records[s.name], self.elements[s.name]

    def launch(self, st: _Fn, s: LaunchKernel):
        b = st.b
        k = s.kernel
        for a in k.buffers():
            self.to_device(st, a.name, a.type.bits)
        slots_t = ir.ArrayType(I64T, max(1, len(k.args)))
        slots = self.entry_alloca(st, slots_t)
        for i, a in enumerate(k.args):
            p = b.gep(slots, [ir.Constant(I32T, 0), ir.Constant(I32T, i)])
            if a.kind == "buffer":
                b.store(self._get(st, self.records[a.name], "device"), p)
            else:
                v = st.syms[a.name][0]
                b.store(ir.Constant(I64T, 0), p)
                b.store(v, b.bitcast(p, v.type.as_pointer()))
        grid = self.entry_alloca(st, ir.ArrayType(I32T, 3))
        threads = self.entry_alloca(st, ir.ArrayType(I32T, 3))
        for arr, exprs in ((grid, s.grid), (threads, k.threads)):
            for d in range(3):
                v = self.expr(st, exprs[d]) if d < len(exprs) else ir.Constant(I32T, 1)
                b.store(v, b.gep(arr, [ir.Constant(I32T, 0), ir.Constant(I32T, d)]))
        shared = self.expr(st, k.shared_bytes)
        fn = self.emulated_kernel(s) if s.device == "host_emulate" else ir.Constant(PTR, None)
        r = self._call(st, LAUNCH, I32T, [b.bitcast(self._cstr(k.name), PTR), b.bitcast(fn, PTR), b.bitcast(grid, PTR),
                                          b.bitcast(threads, PTR), shared, b.bitcast(slots, PTR),
                                          ir.Constant(I32T, len(k.args))],
                       [PTR, PTR, PTR, PTR, I64T, PTR, I32T])
        self._check(st, r)
        for a in k.buffers():
            if "w" in a.access:
                self._mark(st, a.name, DEVICE_DIRTY)

    # ------------------------------------------------------------ the kernel, for the host
    def emulated_kernel(self, s: LaunchKernel) -> ir.Function:
        k = s.kernel
        fn = ir.Function(self.module, KERNEL_T, name=f"{self.name}.{k.name}")
        fn.linkage = "internal"
        inner = _Fn(self, fn)
        inner.err_info = None
        inner.emulated_kernel = True
        (args,) = fn.args
        for i, a in enumerate(k.args):
            p = inner.b.gep(args, [ir.Constant(I32T, i)], source_etype=I64T)
            if a.kind == "buffer":
                inner.syms[a.name] = (inner.b.inttoptr(inner.b.load(p, typ=I64T), PTR), None)
            else:
                t = a.type
                v = inner.b.load(p, typ=llvm_type(t))
                inner.syms[a.name] = (v, t)
        self.stmt(inner, k.body)
        if not inner.b.block.is_terminated:
            inner.b.ret(ir.Constant(I32T, 0))
        return fn

    def loop(self, st: _Fn, s: For):
        if s.kind == GPU_BLOCK and getattr(st, "emulated_kernel", False):
            # the outermost block loop on the thread pool (its body, inner block loops
            # included, is one task per iteration)
            return self.parallel_for(st, s)
        if s.kind == GPU_THREAD and device_rt.THREAD_ORDER == "reversed":
            # thread t = min + extent - 1 - t' for t' = 0 .. extent - 1
            rev = f"{s.var}.reversed"
            last = BinOp("+", s.min, BinOp("-", s.extent, Const(I32, 1), I32), I32)
            return self.serial_for(st, For(rev, Const(I32, 0), s.extent, "serial",
                                           LetStmt(s.var, BinOp("-", last, Var(rev), I32), s.body)))
        if s.kind in (GPU_BLOCK, GPU_THREAD):
            return self.serial_for(st, s)
        return super().loop(st, s)


def generate(pipeline: Pipeline, stmt: Stmt, name: str, fast_math: bool = False, runtime_prefix: str = "hdsl",
             device: str = "host_emulate") -> ir.Module:
    return CodeGenHostGPU(pipeline, name, fast_math, runtime_prefix, device).generate(stmt)

