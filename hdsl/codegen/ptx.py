"""The CUDA device back end: `Kernel`s (hdsl/ir/kernel.py) → LLVM IR for NVPTX → PTX text.

A CodeGenLLVM subclass (as Halide's CodeGen_PTX_Dev subclasses CodeGen_LLVM): statements and
operator semantics are the base's; this class overrides the hooks for loop kinds, memory,
math, float → int and errors. Every kernel of a pipeline goes into one module and so into one
PTX text (one `cuModuleLoadData`).

A kernel is `define ptx_kernel void @NAME(args…)`, in the kernel's argument order: a buffer
argument is a (generic, noalias) pointer to its first element, a scalar its value (a bool as
an i8). Where the block size is constant it becomes the launch bound (`.maxntid`).

- A "gpu_block" loop `v` is `v = min + %ctaid[dim]` (no loop, no guard: the grid equals
  the extent), a "gpu_thread" loop `v = min + %tid[dim]` under `if %tid[dim] < extent`. Dims
  come from nesting: the innermost block (thread) loop is x, the next outer y, then z.
  Any other loop kind inside a kernel is a serial loop (unrolled where the base unrolls).
- `Allocate(memory="gpu_shared")`: one block-wide array in shared memory (addrspace 3):
  a static `.shared` array where its size is a constant and the kernel's static arrays stay
  within 48 KB (more must be dynamic, with the runtime's opt-in); otherwise a slice of the dynamic
  shared memory (`extern .shared`) at an offset that is the sum of the earlier dynamic
  allocations' sizes in bytes, each rounded up to 16 — the launch's dynamic shared memory
  must be at least the sum of those rounded sizes. Any other Allocate inside a kernel
  ("gpu_local", …) is per thread: an alloca in local memory.
- `GpuBarrier` is `llvm.nvvm.barrier.cta.sync.aligned.all(0)` (PTX `bar.sync 0`; LLVM 22's
  name for the old `llvm.nvvm.barrier0`).
- Math functions are CUDA's libdevice (`__nv_expf`, …), linked into the module, every
  non-kernel definition internalized (so that the optimizer drops what is unused: a saxpy
  with expf is ~1.3 KB of PTX instead of ~800 KB), then the module is optimized.
- Floating point is strict by default: no flush to zero (`nvvm-reflect-ftz` 0, IEEE
  denormals), IEEE division and square root (`div.rn`, `sqrt.rn`), no contraction into fma
  — as the evaluator. `-fast_math` allows contraction and reciprocals (the CPU's flags).
  libdevice's own functions keep their internals (`__nv_expf` uses `ex2.approx.ftz` on
  an argument it has range-reduced: its result is that of the non-FTZ library).
- `print` is CUDA's device printf (`vprintf`), in the evaluator's format.
- An Assert that fails inside a kernel traps (the launch then fails, and the runtime
  names the kernel). Lowering keeps run-time checks on the host, so kernels have none today.
- f32 → i32 casts use the base's range check (PTX's cvt.rzi saturates and gives 0 for NaN;
  the evaluator's rule is INT_MIN).

The PTX is checked by `ptxas` (pip's nvidia-cuda-nvcc; see hdsl/codegen/cuda_tools.py) in the
tests for sm_75, sm_80 and sm_90. Without a GPU it never runs here: see docs/gpu.md.
"""
from __future__ import annotations

from llvmlite import ir

from hdsl.codegen.llvm import I8T, I32T, I64T, PTR, CodeGenLLVM, _const_int, _Fn, llvm_type
from hdsl.diagnostics import InternalError
from hdsl.ir.expr import Expr
from hdsl.ir.stmt import GPU_BLOCK, GPU_THREAD, Allocate, Block, For, GpuBarrier, IfThenElse, LetStmt, Stmt, children
from hdsl.ir.types import I32, Type
from hdsl.target import STATIC_SHARED_LIMIT

TRIPLE = "nvptx64-nvidia-cuda"
SHARED = 3                    # NVPTX's shared address space
DIMS = "xyz"
SHARED_ALIGN = 16


class CodeGenPTX(CodeGenLLVM):
    def __init__(self, name: str, sm: int = 75, fast_math: bool = False):
        super().__init__(name, fast_math)
        self.sm = sm
        self.module.triple = TRIPLE
        self._dims: dict[int, int] = {}
        self._threads: list = [None] * 3      # the block size per dim where constant
        self._dynamic_shared = None          # the extern .shared array, made on first use
        self._shared_offset = None           # bytes of dynamic shared memory in use (an i64 value)
        self.kernels: list[str] = []
        self._all_dynamic = False            # the kernel's shared memory is all dynamic (over 48 KB)

    # ------------------------------------------------------------ kernels
    def add_kernel(self, kernel) -> ir.Function:
        """The kernel's entry function (a `Kernel`: name, args, body, threads, shared_bytes)."""
        types = []
        for a in kernel.args:
            if a.kind == "buffer":
                types.append(PTR)
            elif a.kind == "scalar":
                types.append(llvm_type(a.type, memory=True))
            else:
                raise InternalError(f"codegen: kernel {kernel.name}: argument {a.name} of kind {a.kind}")
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), types), name=kernel.name)
        fn.calling_convention = "ptx_kernel"
        threads = [_const_int(t) for t in kernel.threads]
        self._threads = threads + [None] * (3 - len(threads))
        if threads and all(t is not None and t > 0 for t in threads):
            # the launch bound, as nvvm.annotations (LLVM 22 turns it into "nvvm.maxntid")
            md = [fn]
            for d, n in zip(DIMS, threads):
                md += [ir.MetaDataString(self.module, f"maxntid{d}"), ir.Constant(I32T, n)]
            self.module.add_named_metadata("nvvm.annotations", md)
        st = _Fn(self, fn)
        for a, v in zip(kernel.args, fn.args):
            v.name = a.name
            if a.kind == "buffer":
                # distinct buffers (Halide's CodeGen_PTX_Dev::add_kernel marks them noalias too)
                v.add_attribute("noalias")
                st.syms[a.name] = (v, None)
            elif a.type.is_bool():
                st.syms[a.name] = (st.b.icmp_unsigned("!=", v, ir.Constant(I8T, 0)), a.type)
            else:
                st.syms[a.name] = (v, a.type)
        self._dims = _gpu_dims(kernel.body)
        self._shared_offset = ir.Constant(I64T, 0)
        self._all_dynamic = _static_shared_bytes(kernel) > STATIC_SHARED_LIMIT
        self.stmt(st, kernel.body)
        if not st.b.block.is_terminated:
            st.b.ret_void()
        self.kernels.append(kernel.name)
        return fn

    def sreg(self, st: _Fn, which: str, dim: int):
        name = f"llvm.nvvm.read.ptx.sreg.{which}.{DIMS[dim]}"
        return st.b.call(self.decl(name, I32T, []), [])

    # ------------------------------------------------------------ hooks
    def loop(self, st: _Fn, s: For):
        if s.kind not in (GPU_BLOCK, GPU_THREAD):
            return super().loop(st, s)
        b = st.b
        dim = self._dims[id(s)]
        idx = self.sreg(st, "ctaid" if s.kind == GPU_BLOCK else "tid", dim)
        lo = self.expr(st, s.min)
        old = st.syms.get(s.var)
        st.syms[s.var] = (b.add(lo, idx, name=s.var), I32)
        n = _const_int(s.extent)
        if s.kind == GPU_BLOCK or (n is not None and n == self._threads[dim]):
            self.stmt(st, s.body)
        else:
            # (a block runs the largest thread loop's extent: shorter ones are guarded)
            with b.if_then(b.icmp_signed("<", idx, self.expr(st, s.extent))):
                self.stmt(st, s.body)
        self._restore(st, s.var, old)

    def _stmt(self, st: _Fn, s: Stmt):
        if isinstance(s, GpuBarrier):
            st.b.call(self.decl("llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [I32T]),
                      [ir.Constant(I32T, 0)])
        else:
            super()._stmt(st, s)

    def allocate(self, st: _Fn, s: Allocate):
        b = st.b
        et = llvm_type(s.type, memory=True)
        elem_bytes = max(1, s.type.bits // 8)
        n = _const_int(s.size)
        if s.memory == "gpu_shared":
            if n is not None and not self._all_dynamic:
                arr = ir.ArrayType(et, max(n, 1))
                # (unique: an unrolled loop makes its body's allocations once per copy)
                g = ir.GlobalVariable(self.module, arr, name=self.module.get_unique_name(f"{st.fn.name}.{s.name}"),
                                      addrspace=SHARED)
                g.linkage = "internal"
                g.initializer = ir.Constant(arr, ir.Undefined)
                g.align = SHARED_ALIGN
                mem = b.addrspacecast(g, PTR)
            else:
                if self._dynamic_shared is None:
                    arr = ir.ArrayType(I8T, 0)
                    self._dynamic_shared = ir.GlobalVariable(self.module, arr, name="hdsl_dynamic_shared",
                                                             addrspace=SHARED)
                    self._dynamic_shared.linkage = "external"
                    self._dynamic_shared.align = SHARED_ALIGN
                size = b.mul(self._i64(st, s.size), ir.Constant(I64T, elem_bytes))
                at = b.gep(self._dynamic_shared, [self._shared_offset], source_etype=I8T)
                mem = b.addrspacecast(at, PTR)
                saved = self._shared_offset
                rounded = b.and_(b.add(size, ir.Constant(I64T, SHARED_ALIGN - 1)), ir.Constant(I64T, -SHARED_ALIGN))
                self._shared_offset = b.add(saved, rounded)
                self._bind(st, s, mem)
                self._shared_offset = saved
                return
        elif n is not None:
            # per thread, in local memory, allocated once in the entry block
            mem = self.entry_alloca(st, et, max(n, 1))
            mem.align = SHARED_ALIGN
        else:
            # a per-thread array of run-time size: a dynamic alloca, between a stack save and
            # restore so that a loop does not grow the thread's stack by one array per
            # iteration (without them, a Func computed inside a serial loop of a kernel ran
            # past its thread's local memory on an H200: "an illegal memory access")
            saved = b.call(self.decl("llvm.stacksave.p0", PTR, []), [])
            mem = b.alloca(et, size=b.trunc(self._i64(st, s.size), I32T))
            self._bind(st, s, mem)
            st.b.call(self.decl("llvm.stackrestore.p0", ir.VoidType(), [PTR]), [saved])
            return
        self._bind(st, s, mem)

    def _bind(self, st: _Fn, s: Allocate, mem):
        old = st.syms.get(s.name)
        st.syms[s.name] = (mem, None)
        self.stmt(st, s.body)
        self._restore(st, s.name, old)

    def _i64(self, st: _Fn, e: Expr):
        v = self.expr(st, e)
        return v if v.type == I64T else st.b.sext(v, I64T)

    def fail(self, st: _Fn, code: int, info: tuple):
        st.b.call(self.decl("llvm.trap", ir.VoidType(), []), [])
        st.b.unreachable()

    def math_call(self, st: _Fn, name: str, args, t: Type):
        """libdevice's __nv_NAMEf (f32, and f16 computed in f32) or __nv_NAME (f64)."""
        b = st.b
        f64 = t.bits == 64
        ct = ir.DoubleType() if f64 else ir.FloatType()
        fn = self.decl(f"__nv_{name}" + ("" if f64 else "f"), ct, [ct] * len(args))
        xs = [b.fpext(x, ct) if t.bits == 16 else x for x in args]
        r = b.call(fn, xs)
        return b.fptrunc(r, args[0].type) if t.bits == 16 else r

    def emit_print(self, st: _Fn, fmt: str, vals: list):
        """CUDA's printf: vprintf(fmt, a buffer of the values, each in an 8-byte slot)."""
        b = st.b
        # (a struct of 8-byte values: each at a multiple of 8, as vprintf reads them)
        buf_t = ir.LiteralStructType([v.type for v in vals] or [I64T])
        buf = self.entry_alloca(st, buf_t)
        for k, v in enumerate(vals):
            b.store(v, b.gep(buf, [ir.Constant(I32T, 0), ir.Constant(I32T, k)]))
        vprintf = self.decl("vprintf", I32T, [PTR, PTR])
        b.call(vprintf, [self._cstr(fmt), buf])


def _gpu_dims(body: Stmt) -> dict[int, int]:
    """id(For) -> its GPU dim: how many loops of its own kind (gpu_block / gpu_thread) it encloses
    (the innermost is x = 0)."""
    dims: dict[int, int] = {}

    def depth(s: Stmt, kind: str) -> int:
        """The deepest nesting of `kind` loops in s (a mapping of each to its dim on the way)."""
        if isinstance(s, For):
            inner = depth(s.body, kind)
            if s.kind == kind:
                dims[id(s)] = inner
                return inner + 1
            return inner
        if isinstance(s, Block):
            return max((depth(x, kind) for x in s.stmts), default=0)
        if isinstance(s, IfThenElse):
            return max(depth(s.then, kind), depth(s.otherwise, kind) if s.otherwise is not None else 0)
        if isinstance(s, (LetStmt, Allocate)):
            return depth(s.body, kind)
        return 0
    for kind in (GPU_BLOCK, GPU_THREAD):
        depth(body, kind)
    for s_id, d in dims.items():
        if d > 2:
            raise InternalError("codegen: more than 3 nested GPU block or thread loops in a kernel")
    return dims


# ---------------------------------------------------------------- the module → PTX

_nvptx_ready = False


def _init_nvptx():
    global _nvptx_ready
    if not _nvptx_ready:
        from llvmlite import binding as llvm
        # (llvm.initialize() raises in llvmlite 0.50; the native target is initialized by the JIT)
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _nvptx_ready = True


# The PTX ISA version per architecture: at least 7.3 (CUDA 11.3 drivers), which a per-thread
# array of run-time size (a dynamic alloca) needs; LLVM's own choice for sm_75 is 6.3, and it
# stops the process (a fatal error, not an exception) on such an alloca below 7.3.
PTX_ISA = {75: 73, 80: 73, 90: 78}


def nvptx_machine(sm: int = 75):
    from llvmlite import binding as llvm
    _init_nvptx()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=f"sm_{sm}", features=f"+ptx{PTX_ISA[sm]}",
                                                                 opt=3)


def kernels_llvm(kernels, sm: int = 75, fast_math: bool = False, name: str = "hdsl_kernels") -> ir.Module:
    """The kernels' LLVM IR module, before libdevice and optimization."""
    cg = CodeGenPTX(name, sm, fast_math)
    for k in kernels:
        cg.add_kernel(k)
    # strict floats: libdevice's __nvvm_reflect("__CUDA_FTZ") answers 0 (keep denormals)
    cg.module.add_named_metadata("llvm.module.flags", [ir.Constant(I32T, 4), ir.MetaDataString(cg.module, "nvvm-reflect-ftz"),
                                                       ir.Constant(I32T, 0)])
    return cg.module


def compile_ptx(kernels, sm: int = 75, fast_math: bool = False, name: str = "hdsl_kernels") -> str:
    """PTX text for sm_NN with every kernel of `kernels` (libdevice linked in where used)."""
    from llvmlite import binding as llvm

    from hdsl.codegen.cuda_tools import libdevice
    module = kernels_llvm(kernels, sm, fast_math, name)
    entries = {k.name for k in kernels}
    tm = nvptx_machine(sm)
    mod = llvm.parse_assembly(str(module))
    if any(f.is_declaration and f.name.startswith("__nv_") for f in mod.functions):
        lib = llvm.parse_bitcode(libdevice())
        lib.triple = TRIPLE
        lib.data_layout = str(tm.target_data)
        mod.link_in(lib)
        # every definition but the kernels internal: the optimizer then drops what is unused
        for f in mod.functions:
            if not f.is_declaration and f.name not in entries:
                f.linkage = "internal"
    mod.data_layout = str(tm.target_data)
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return tm.emit_assembly(mod)


def param_bytes(kernel) -> list[int]:
    """The size in bytes of each of the kernel's parameters (a buffer's pointer: 8)."""
    return [8 if a.kind == "buffer" else max(1, a.type.bits // 8) for a in kernel.args]


def dynamic_shared_slack(kernel) -> int | None:
    """None where the kernel uses no dynamic shared memory; else the bytes to add to its
    shared_bytes (the sum of its gpu_shared sizes) for the rounding of each dynamic
    allocation's offset up to SHARED_ALIGN."""
    static = _static_shared_bytes(kernel)
    all_dynamic = static > STATIC_SHARED_LIMIT
    count = sum(1 for s in _shared_allocations(kernel.body) if all_dynamic or _const_int(s.size) is None)
    # (shared_bytes counts the static arrays too, which are not dynamic)
    return SHARED_ALIGN * count - (0 if all_dynamic else static) if count else None


def static_shared_bytes(kernel) -> int:
    """The bytes of the kernel's static `.shared` arrays (0 where all is dynamic)."""
    static = _static_shared_bytes(kernel)
    return 0 if static > STATIC_SHARED_LIMIT else static


def _shared_allocations(s: Stmt) -> list:
    out = [s] if isinstance(s, Allocate) and s.memory == "gpu_shared" else []
    for k in children(s):
        out += _shared_allocations(k)
    return out


def _static_shared_bytes(kernel) -> int:
    """The bytes of the kernel's gpu_shared allocations of constant size: static `.shared`
    arrays, as long as they stay within the 48 KB a kernel may declare statically (ptxas's
    limit; beyond it, a kernel's shared memory is all dynamic and the runtime opts in to
    more, hdsl/target.py)."""
    return sum(max(_const_int(s.size), 1) * max(1, s.type.bits // 8)
               for s in _shared_allocations(kernel.body) if _const_int(s.size) is not None)
