"""The CUDA back end's device code (hdsl/codegen/ptx.py) on kernels built by hand in the shape
lowering makes (GPU_CONTRACT: hdsl/ir/kernel.py): what the PTX must contain for the semantics
to hold, and ptxas accepting it for sm_75, sm_80 and sm_90. No GPU runs it here (CI has none):
the kernels' values are checked on the host by the cuda-emulate target, which runs the very
same Kernel objects, and the hooks this back end changes are checked on the CPU
(tests/cuda/test_generic_float_to_int.py)."""
from __future__ import annotations

import re

import pytest

from hdsl.codegen.ptx import kernels_llvm
from hdsl.ir import ops
from hdsl.ir.expr import Cast, Const, Var
from hdsl.ir.kernel import Kernel, KernelArg
from hdsl.ir.stmt import Allocate, Block, For, GpuBarrier, IfThenElse, LetStmt, Load, Store
from hdsl.ir.types import F32, F64, I32, Type
from tests.cuda.ptxas_check import ptx_of

U8 = Type("uint", 8)
I0 = Const(I32, 0)


def c(v):
    return Const(I32, v)


def buf(name, t=F32, access="rw"):
    return KernelArg(name, t, "buffer", access)


def scalar(name, t=I32):
    return KernelArg(name, t, "scalar")


def elementwise(name, value_of, args, out="y", out_type=F32, threads=256):
    """for bx (gpu_block) in [0, ceil(n / threads)): for tx (gpu_thread) in [0, threads):
    i = bx * threads + tx; if i < n: out[i] = value_of(i)."""
    n = Var("n")
    i = Var("i")
    bx, tx = Var("bx"), Var("tx")
    blocks = ops.binop("/", ops.binop("+", n, c(threads - 1)), c(threads))
    body = For("bx", I0, blocks, "gpu_block",
               For("tx", I0, c(threads), "gpu_thread",
                   LetStmt("i", ops.binop("+", ops.binop("*", bx, c(threads)), tx),
                           IfThenElse(ops.binop("<", i, n), Store(out, i, value_of(i))))))
    return Kernel(name, tuple(args) + (scalar("n"),), body, (c(threads),), I0)


def saxpy(name="saxpy"):
    a = Var("a", F32)
    return elementwise(name, lambda i: ops.binop("+", ops.binop("*", a, Load("x", i, F32)), Load("y", i, F32)),
                       [buf("x", access="r"), buf("y"), scalar("a", F32)])


def body_of(ptx: str, kernel: str) -> str:
    """The text of one .entry in a PTX module."""
    m = re.search(r"\.entry\s+" + re.escape(kernel) + r"\((.*?)\n}\n", ptx, re.S)
    assert m, f"no .entry {kernel} in\n{ptx}"
    return m.group(1)


def test_saxpy_is_one_strict_kernel_with_its_launch_bound():
    ptx = ptx_of([saxpy()])
    k = body_of(ptx, "saxpy")
    assert ".maxntid 256" in k
    assert "%ctaid.x" in k and "%tid.x" in k
    # strict: a * x + y is a rounded multiply, then a rounded add (no contraction into fma)
    assert "mul.rn.f32" in k and "add.rn.f32" in k
    assert "fma" not in k and ".ftz" not in k


def test_fast_math_contracts_into_fma():
    k = body_of(ptx_of([saxpy()], fast_math=True), "saxpy")
    assert "fma.rn.f32" in k and "mul.rn.f32" not in k


def test_division_and_sqrt_are_ieee_by_default():
    """CUDA's defaults for nvcc (-prec-div=true -prec-sqrt=true -ftz=false), which the
    evaluator's float semantics need: div.rn and sqrt.rn, never the approximate forms."""
    x, a = (lambda i: Load("x", i, F32)), Var("a", F32)
    kern = elementwise("divsqrt", lambda i: ops.binop("+", ops.binop("/", x(i), a), ops.intrinsic("sqrt", [x(i)])),
                       [buf("x", access="r"), buf("y", access="w"), scalar("a", F32)])
    k = body_of(ptx_of([kern]), "divsqrt")
    assert "div.rn.f32" in k and "sqrt.rn.f32" in k
    assert "approx" not in k and "div.full" not in k and ".ftz" not in k


@pytest.mark.parametrize("sm", [75, 80, 90])
def test_each_architecture_is_the_ptx_target(sm):
    ptx = ptx_of([saxpy()], sm=sm)
    assert f".target sm_{sm}" in ptx


def test_expf_comes_from_libdevice_inlined_and_internalized():
    """libdevice is linked in and every non-kernel definition internalized, so only what the
    kernel uses stays (the whole of libdevice is ~800 KB of PTX)."""
    kern = elementwise("expk", lambda i: ops.intrinsic("exp", [Load("x", i, F32)]), [buf("x", access="r"), buf("y")])
    ptx = ptx_of([kern])
    assert len(ptx) < 8000
    assert "__nv_" not in ptx and ".func" not in ptx          # inlined, nothing else kept
    assert "ex2.approx" in body_of(ptx, "expk")                # libdevice's expf (range-reduced ex2)


def test_f64_and_f16_math_call_libdevice_in_their_precision():
    d = elementwise("logd", lambda i: ops.intrinsic("log", [Load("xd", i, F64)]),
                    [buf("xd", F64, "r"), buf("yd", F64, "w")], out="yd")
    llvm_ir = str(kernels_llvm([d]))
    assert re.search(r'call double @"?__nv_log"?\(double', llvm_ir)
    k = body_of(ptx_of([d]), "logd")
    assert ".f64" in k


def test_integer_div_mod_and_saturating_casts_assemble():
    """Euclidean div/mod (x / 0 == 0) and saturating casts are the base code generator's (the
    CPU's, checked against the evaluator everywhere); here they must lower to PTX."""
    x, d = (lambda i: Load("xi", i, I32)), Var("d")
    val = lambda i: ops.saturating_cast(U8, ops.binop("+", ops.binop("/", x(i), d), ops.binop("%", x(i), d)))
    kern = elementwise("divmod", val, [buf("xi", I32, "r"), buf("yb", U8, "w"), scalar("d")], out="yb", out_type=U8)
    k = body_of(ptx_of([kern]), "divmod")
    assert "div.s32" in k
    assert re.search(r"setp\.eq\.b32\s+%p\d+, %r\d+, 0;", k)          # the x / 0 == 0 case


def test_float_to_int_keeps_the_range_check():
    """PTX's cvt.rzi.s32.f32 saturates and gives 0 for NaN; the evaluator gives INT_MIN, so
    the conversion is guarded (a compare and select around the cvt)."""
    kern = elementwise("f2i", lambda i: Cast(I32, Load("x", i, F32)), [buf("x", access="r"), buf("yi", I32, "w")],
                       out="yi")
    k = body_of(ptx_of([kern]), "f2i")
    assert "cvt.rzi.s32.f32" in k
    assert re.search(r"setp\.(ge|lt|gtu|geu|ltu|nan|num)\.f32", k) and "selp" in k
    assert "-2147483648" in k or "0fCF000000" in k


def stencil(shared_size, name="blur"):
    """A 2-D 3-tap blur per 16x16 block with its input tile staged in shared memory: a first
    thread nest fills the tile (18 wide with a 1-pixel apron), a barrier, a second nest reads it."""
    w = Var("w")
    bx, by, tx, ty = Var("bx"), Var("by"), Var("tx"), Var("ty")
    plus, times = (lambda a, b: ops.binop("+", a, b)), (lambda a, b: ops.binop("*", a, b))
    x0, y0 = times(bx, c(16)), times(by, c(16))
    fill = For("ty", I0, c(16), "gpu_thread", For("tx", I0, c(18), "gpu_thread",
               Store("tile", plus(times(ty, c(18)), tx),
                     Load("inp", plus(times(plus(y0, ty), plus(w, c(2))), plus(x0, tx)), F32))))
    tap = lambda k: Load("tile", plus(times(ty, c(18)), plus(tx, c(k))), F32)
    use = For("ty", I0, c(16), "gpu_thread", For("tx", I0, c(16), "gpu_thread",
              Store("out", plus(times(plus(y0, ty), w), plus(x0, tx)), plus(plus(tap(0), tap(1)), tap(2)))))
    body = For("by", I0, Var("bh"), "gpu_block", For("bx", I0, Var("bw"), "gpu_block",
               Allocate("tile", F32, shared_size, Block((fill, GpuBarrier(), use)), "gpu_shared")))
    return Kernel(name, (buf("inp", access="r"), buf("out", access="w"), scalar("w"), scalar("bw"), scalar("bh")),
                  body, (c(18), c(16)), times(shared_size, c(4)))


def test_shared_memory_stage_with_a_barrier():
    ptx = ptx_of([stencil(c(18 * 16))])
    k = body_of(ptx, "blur")
    assert re.search(r"\.shared \.align 16 \.b8 \S+\[1152\]", ptx)          # 18 * 16 f32
    assert "st.shared.b32" in k and "ld.shared.b32" in k
    assert k.count("bar.sync") == 1
    assert ".maxntid 18, 16" in k
    # the innermost block loop (bx) is x, the outer (by) y; likewise threads
    assert "%ctaid.x" in k and "%ctaid.y" in k and "%tid.y" in k


def test_block_and_thread_dims_follow_nesting():
    """In the LLVM IR, each loop variable is its min plus the special register of its dim."""
    text = str(kernels_llvm([stencil(c(18 * 16))]))
    regs = dict(re.findall(r'(%"?[\w.]+"?) = call i32 @"?llvm\.nvvm\.read\.ptx\.sreg\.(\w+\.\w)"?\(\)', text))
    for var, reg in (("bx", "ctaid.x"), ("by", "ctaid.y"), ("tx", "tid.x"), ("ty", "tid.y")):
        adds = re.findall(r'%"?' + var + r'(?:\.\d+)?"? = add i32 \S+ (%"?[\w.]+"?)', text)
        assert adds and all(regs.get(a) == reg for a in adds), (var, adds, regs)


def test_thread_loops_shorter_than_the_block_are_guarded():
    """The fill nest runs 18 threads in x, the compute nest 16: only the shorter is guarded
    (tid.x < 16), in the IR before optimization."""
    text = str(kernels_llvm([stencil(c(18 * 16))]))
    guards = re.findall(r"icmp slt i32 %[\w.\"]+, (\d+)", text)
    assert guards == ["16"]


def test_dynamic_shared_memory_where_the_size_is_not_constant():
    ptx = ptx_of([stencil(ops.binop("*", c(18), Var("bh")), name="blurdyn")])
    assert re.search(r"\.extern \.shared \.align 16 \.b8 \S+\[\]", ptx)
    assert "ld.shared" in body_of(ptx, "blurdyn")


def test_local_allocation_is_per_thread():
    """gpu_local: an array per thread in local memory (indexed at run time, so it stays there)."""
    i = Var("i")
    inner = Allocate("tmp", F32, c(4), Block((
        For("k", I0, c(4), "serial", Store("tmp", Var("k"), Load("x", ops.binop("+", i, Var("k")), F32))),
        Store("y", i, Load("tmp", ops.binop("%", Load("sel", i, I32), c(4)), F32)))), "gpu_local")
    body = For("bx", I0, Var("n"), "gpu_block", For("tx", I0, c(32), "gpu_thread",
               LetStmt("i", ops.binop("+", ops.binop("*", Var("bx"), c(32)), Var("tx")), inner)))
    kern = Kernel("localk", (buf("x", access="r"), buf("sel", I32, "r"), buf("y", access="w"), scalar("n")),
                  body, (c(32),), I0)
    ptx = ptx_of([kern])
    assert re.search(r"\.local \.align \d+ \.b8\s+\S+\[16\]", ptx) and "ld.local" in ptx
    assert ".shared" not in ptx


def test_every_kernel_of_a_pipeline_goes_into_one_module():
    ptx = ptx_of([saxpy("first"), saxpy("second")])
    assert ptx.count(".entry") == 2 and ".entry first(" in ptx and ".entry second(" in ptx


def test_print_in_a_kernel_is_cuda_printf_in_the_evaluators_format():
    """print(x(i), "at", i) as the CPU prints it (f32 with %f, integers as %lld), through
    CUDA's vprintf with the values in 8-byte slots."""
    from hdsl.ir.expr import Intrinsic

    def value(i):
        v = Load("x", i, F32)
        return Intrinsic("print", (v, i, ops.binop("<", i, c(3))), F32, ("at", None, None))
    kern = elementwise("printk", value, [buf("x", access="r"), buf("y")])
    text = str(kernels_llvm([kern]))
    assert 'c"%f at %lld %s\\0a\\00"' in text
    ptx = ptx_of([kern])
    assert re.search(r"call\.uni.*\s*vprintf", body_of(ptx, "printk"))


def test_a_per_thread_array_of_run_time_size_needs_ptx_7_3():
    """A gpu_local allocation whose size is known only at run time is a dynamic alloca, which
    PTX has from ISA 7.3 on: LLVM picks 6.3 for sm_75 and would stop the whole process on it
    (found by random GPU schedules). The module says .version 7.3 and ptxas takes it."""
    i, m = Var("i"), Var("m")
    inner = Allocate("tmp", F32, m, Block((
        For("k", I0, m, "serial", Store("tmp", Var("k"), Load("x", ops.binop("+", i, Var("k")), F32))),
        Store("y", i, Load("tmp", ops.binop("%", Load("sel", i, I32), m), F32)))), "gpu_local")
    body = For("bx", I0, Var("n"), "gpu_block", For("tx", I0, c(32), "gpu_thread",
               LetStmt("i", ops.binop("+", ops.binop("*", Var("bx"), c(32)), Var("tx")), inner)))
    kern = Kernel("dynlocal", (buf("x", access="r"), buf("sel", I32, "r"), buf("y", access="w"), scalar("n"),
                               scalar("m")), body, (c(32),), I0)
    ptx = ptx_of([kern])
    assert re.search(r"^\.version 7\.3$", ptx, re.M)
    assert "alloca" in body_of(ptx, "dynlocal")


def test_a_per_thread_array_of_run_time_size_in_a_loop_gives_its_stack_back():
    """A dynamic alloca inside a kernel's serial loop, between stacksave and stackrestore: each
    iteration's array is given back before the next. Without them every iteration took another
    array from the thread's stack, which on an H200 ran past the thread's local memory ("an
    illegal memory access was encountered": random GPU schedules of `sat` and `recursive`
    computing a Func of run-time size inside a thread's serial loop). The host-emulated
    kernels free theirs (hdsl/codegen/cpu.py), so only a real GPU showed it."""
    i, m, j = Var("i"), Var("m"), Var("j")
    inner = Allocate("tmp", F32, m, Block((
        For("k", I0, m, "serial", Store("tmp", Var("k"), Load("x", ops.binop("+", i, Var("k")), F32))),
        Store("y", ops.binop("+", ops.binop("*", i, c(8)), j), Load("tmp", ops.binop("%", j, m), F32)))), "gpu_local")
    body = For("bx", I0, Var("n"), "gpu_block", For("tx", I0, c(32), "gpu_thread",
               LetStmt("i", ops.binop("+", ops.binop("*", Var("bx"), c(32)), Var("tx")),
                       For("j", I0, c(8), "serial", inner))))
    kern = Kernel("looplocal", (buf("x", access="r"), buf("y", access="w"), scalar("n"), scalar("m")),
                  body, (c(32),), I0)
    text = body_of(ptx_of([kern]), "looplocal")
    lines = [ln.split()[0] for ln in text.splitlines() if ln.split() and ln.split()[0].rstrip(";") in
             ("stacksave.u64", "alloca.u64", "stackrestore.u64")]
    # (LLVM unrolls the loop: a save, an alloca and a restore per copy, in that order; the last
    # copy's restore is dropped, the kernel ending right after it)
    allocas = [k for k, op in enumerate(lines) if op == "alloca.u64"]
    assert len(allocas) >= 2
    for a, b in zip(allocas, allocas[1:]):
        assert lines[a - 1:b] == ["stacksave.u64", "alloca.u64", "stackrestore.u64", "stacksave.u64"][:b - a + 1]


def test_shared_allocations_in_an_unrolled_block_loop_are_one_each():
    """An unrolled loop at block level generates its body once per iteration: each copy's
    gpu_shared allocation is an array of its own (the second copy once failed on the name)."""
    tx = Var("tx")
    stage = lambda: Allocate("t", F32, c(32), Block((
        For("tx", I0, c(32), "gpu_thread", Store("t", tx, Load("x", tx, F32))),
        GpuBarrier(),
        For("tx", I0, c(32), "gpu_thread", Store("y", ops.binop("+", ops.binop("*", Var("k"), c(32)), tx),
                                                 Load("t", ops.binop("-", c(31), tx), F32))))), "gpu_shared")
    body = For("bx", I0, Var("n"), "gpu_block", For("k", I0, c(2), "unrolled", stage()))
    kern = Kernel("unrolledshared", (buf("x", access="r"), buf("y", access="w"), scalar("n")), body, (c(32),),
                  c(256))
    ptx = ptx_of([kern])
    assert len(re.findall(r"\.shared \.align 16 \.b8 \S+\[128\]", ptx)) == 2
    assert body_of(ptx, "unrolledshared").count("bar.sync") == 2


def test_over_48_kb_of_constant_shared_memory_is_dynamic():
    """ptxas refuses more than 48 KB of static .shared per kernel ("too much shared data");
    beyond it CUDA needs dynamic shared memory and an opt-in (NVIDIA's Ampere and Hopper
    tuning guides), which the runtime makes. A 72000-byte tile (18 x 1000 f32) is therefore
    the extern array, for sm_80 and sm_90 (whose blocks may have 163 and 227 KB)."""
    from hdsl.codegen.ptx import dynamic_shared_slack, static_shared_bytes
    k = stencil(c(18 * 1000), name="bigtile")
    ptx = ptx_of([k], sm=80)
    assert re.search(r"\.extern \.shared \.align 16 \.b8 \S+\[\]", ptx)
    assert not re.search(r"\.shared \.align 16 \.b8 \S+\[\d+\]", ptx)
    assert "ld.shared" in body_of(ptx, "bigtile")
    assert static_shared_bytes(k) == 0 and dynamic_shared_slack(k) == 16
    small = stencil(c(18 * 16))
    assert static_shared_bytes(small) == 18 * 16 * 4 and dynamic_shared_slack(small) is None
