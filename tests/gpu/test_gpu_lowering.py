"""GPU lowering (hdsl/lower/gpu.py): loop kinds, shared/local memory, barriers, kernels and
their launch bounds, and the nesting rules as errors at the directive. The rules follow
Halide's (src/CanonicalizeGPUVars.cpp and src/FuseGPUThreadLoops.cpp: block loops outside
thread loops, at most 3 of each, Funcs computed at a block loop in shared memory with a
barrier between the producer's and the consumer's thread loops; a CUDA block has at most
1024 threads, CUDA C Programming Guide, 'Thread Hierarchy')."""
import pytest

import hdsl
from tests.gpu.programs import BLUR, with_cuda_schedule
from hdsl.diagnostics import HdslError
from hdsl.ir.printer import stmt_str
from hdsl.ir.stmt import Allocate, For, GpuBarrier, children
from hdsl.lower.gpu import kernels_of
from hdsl.lower.lower import lower

HEAD = BLUR


BIG_TILE = ("out.split(x, xo, xi, 256).split(y, yo, yi, 128).reorder(xi, yi, xo, yo).gpu_blocks(xo, yo)"
            ".gpu_threads(yi)\n    bx.compute_at(out, xo).gpu_threads(y)")
# bx's tile is a whole row of the image: its shared memory grows with the input's width
ROW_TILE = "out.split(y, yo, yi, 128).gpu_blocks(yo).gpu_threads(yi)\n    bx.compute_at(out, yo).gpu_threads(y)"


def low(sched: str, target="cuda-emulate"):
    return lower(hdsl.loads(with_cuda_schedule(HEAD, sched)).ir, "cuda", target)


def nodes(s, kind):
    out = [s] if isinstance(s, kind) else []
    for k in children(s):
        out += nodes(k, kind)
    return out


def test_a_func_computed_at_a_block_loop_is_in_shared_memory_behind_a_barrier():
    lo = low("out.gpu_tile(x, y, xi, yi, 16, 8)\n    bx.compute_at(out, x).gpu_threads(x, y)")
    (launch,) = kernels_of(lo.stmt)
    k = launch.kernel
    assert launch.device == "host_emulate"
    assert [a.memory for a in nodes(k.body, Allocate)] == ["gpu_shared"]
    assert len(nodes(k.body, GpuBarrier)) == 1
    kinds = [f.kind for f in nodes(k.body, For)]
    assert kinds.count("gpu_block") == 2 and kinds.count("gpu_thread") == 4
    # bx's tile is 16 x (8 + 2) (a row above and below): the block is as large as its largest
    # thread loops, x first; shared memory 16 * 10 u16
    assert [str(t) for t in map(stmt_str_expr, k.threads)] == ["16", "10"]
    assert stmt_str_expr(k.shared_bytes) == "(i64)320"
    assert {a.name: a.access for a in k.buffers()} == {"img": "r", "out": "w"}
    assert all(a.kind == "scalar" for a in k.args if a.name not in ("img", "out"))


def stmt_str_expr(e):
    from hdsl.ir.printer import expr_str
    return expr_str(e)


def test_a_func_computed_at_a_thread_loop_is_local():
    lo = low("out.gpu_tile(x, y, xi, yi, 8, 8)\n    bx.compute_at(out, xi)")
    (launch,) = kernels_of(lo.stmt)
    assert [a.memory for a in nodes(launch.kernel.body, Allocate)] == ["gpu_local"]
    assert nodes(launch.kernel.body, GpuBarrier) == []


def test_block_level_code_outside_thread_loops_runs_in_one_thread():
    """bx computed at out's block loop without gpu_threads of its own: one thread of the
    block computes it (a thread loop of extent 1, Halide's gpu_single_thread), a barrier
    before out's threads read it."""
    lo = low("out.gpu_tile(x, y, xi, yi, 16, 8)\n    bx.compute_at(out, x)")
    (launch,) = kernels_of(lo.stmt)
    singles = [f for f in nodes(launch.kernel.body, For) if f.var.startswith("gpu.single_thread")]
    assert len(singles) == 1 and singles[0].kind == "gpu_thread" and stmt_str_expr(singles[0].extent) == "1"
    assert [a.memory for a in nodes(launch.kernel.body, Allocate)] == ["gpu_shared"]
    assert len(nodes(launch.kernel.body, GpuBarrier)) == 1
    assert [stmt_str_expr(t) for t in launch.kernel.threads] == ["16", "8"]


def test_compute_root_on_the_gpu_is_a_kernel_of_its_own():
    lo = low("out.gpu_tile(x, y, xi, yi, 8, 8)\n    bx.compute_root().gpu_tile(x, y, xi, yi, 32, 4)")
    names = [k.kernel.name for k in kernels_of(lo.stmt)]
    assert names == ["kernel_bx_0", "kernel_out_1"]
    # bx is allocated on the host (one buffer both kernels use): no GPU memory kind
    assert [a.memory for a in nodes(lo.stmt, Allocate)] == ["heap"]
    text = stmt_str(lo.stmt)
    assert "launch kernel_bx_0 on host_emulate: grid (" in text and "threads (32, 4)" in text
    assert text.rstrip().endswith("device_sync out to_host")


def test_no_gpu_loop_is_left_outside_kernels_and_a_cpu_target_refuses_them():
    lo = low("out.gpu_tile(x, y, xi, yi, 16, 8)")
    host_loops = [f.kind for f in nodes(lo.stmt, For)]
    assert "gpu_block" not in host_loops and "gpu_thread" not in host_loops
    with pytest.raises(HdslError):
        low("out.gpu_tile(x, y, xi, yi, 16, 8)", "host")


@pytest.mark.parametrize("sched, line, message", [
    ("out.gpu_threads(x, y)", 11, "GPU thread loop 'y' of 'out' is not inside a GPU block loop"),
    ("out.split(x, xo, xi, 4).gpu_threads(xo).gpu_blocks(xi)", 11,
     "GPU thread loop 'xo' of 'out' is not inside a GPU block loop"),
    ("out.gpu_tile(x, y, xi, yi, 64, 32)", 11,
     "a GPU block of 2048 threads (at loop 'xi' of 'out'): at most 1024 threads per block"),
    ("out.split(y, yo, yi, 8).parallel(yo).gpu_blocks(yi)", 11,
     "GPU loop 'yi' of 'out' is inside parallel loop 'yo' of 'out'"),
    ("out.gpu_tile(x, y, xi, yi, 16, 8)\n    bx.compute_at(out, x).parallel(y)", 12,
     "parallel loop 'y' of 'bx' is inside a GPU kernel (of block loop 'y' of 'out')"),
    ("out.gpu_tile(x, y, xi, yi, 16, 8)\n    bx.compute_at(out, x).gpu_tile(x, y, xi, yi, 4, 4)", 12,
     "GPU block loop 'y' of 'bx' is inside the kernel of GPU block loop 'y' of 'out'"),
    ("out.split(x, x, xi, 2).split(xi, xi, xii, 2).split(y, y, yi, 2).gpu_blocks(x, y, xi).gpu_blocks(yi)", 11,
     "more than 3 GPU block dims"),
    # a Func with thread loops inside another Func's thread loop: its threads write what the
    # outer loop's thread reads, which needs a barrier inside a (guarded) thread loop
    ("out.gpu_tile(x, y, xi, yi, 16, 8)\n    bx.compute_at(out, xi).gpu_threads(x)", 12,
     "GPU thread loop 'x' of 'bx' is inside GPU thread loop 'yi' of 'out'"),
    ("out.split(x, xo, xi, 8).gpu_blocks(y).gpu_threads(xo)\n    bx.compute_at(out, xi).gpu_threads(x)", 12,
     "GPU thread loop 'x' of 'bx' is inside GPU thread loop 'xo' of 'out'"),
    # shared memory over a block's 64 KB on sm_75 (cuda-emulate's): 256 x 130 u16 = 66560 bytes
    (BIG_TILE, 12, "'bx' in GPU shared memory needs 66560 bytes per block (kernel kernel_out_0), more than the "
                   "65536 (64 KB) a block may have on sm_75"),
])
def test_illegal_gpu_schedules_are_errors_at_the_directive(sched, line, message):
    with pytest.raises(HdslError) as e:
        low(sched)
    d = e.value.diagnostics[0]
    assert message in d.message
    assert d.span is not None and d.span.line == line


def test_the_shared_memory_limit_is_the_targets():
    """A block may have 64 KB of shared memory on sm_75, 163 KB on sm_80, 227 KB on sm_90
    (NVIDIA's Turing, Ampere and Hopper tuning guides; hdsl/target.py): the 66560-byte tile
    refused for sm_75 is a kernel for sm_80 and sm_90."""
    from hdsl.target import parse_target
    assert [parse_target(t).shared_memory_limit for t in ("cuda", "cuda-sm_80", "cuda-sm_90", "cuda-emulate")] == \
        [65536, 163 * 1024, 227 * 1024, 65536]
    assert parse_target("host").shared_memory_limit is None
    for t in ("cuda-sm_80", "cuda-sm_90"):
        k, = kernels_of(low(BIG_TILE, t).stmt)
        assert k.kernel.shared_bytes.value == 256 * 130 * 2
    with pytest.raises(HdslError, match="cuda-sm_80 \\(163 KB\\), cuda-sm_90 \\(227 KB\\)"):
        low(BIG_TILE, "cuda")


def test_shared_memory_that_depends_on_the_input_is_checked_before_the_launch():
    """Where the shared memory of a block depends on run-time sizes, the host checks it
    before the launch and reports it at the directive; within the limit the kernel runs."""
    import numpy as np
    p = hdsl.loads(with_cuda_schedule(HEAD, ROW_TILE))
    c = p.compile("cuda-emulate")
    narrow = (np.arange(40 * 100) % 997).astype(np.uint16).reshape(40, 100)     # 100 x 130 u16: 26000 bytes
    assert np.array_equal(c(img=narrow), p(img=narrow))
    wide = (np.arange(40 * 300) % 997).astype(np.uint16).reshape(40, 300)       # 300 x 130 u16: 78000 bytes
    with pytest.raises(HdslError) as e:
        c(img=wide)
    d = e.value.diagnostics[0]
    assert "'bx' in GPU shared memory needs 78000 bytes per block at these sizes" in d.message
    assert d.span is not None and d.span.line == 12 and "bound()" in d.hint
    assert c.native.device.counts["launch"] == 1         # (the narrow call's: none for the wide one)


VOLUME = """pipeline v
input  vol: f32[3]
output out: f32[3]
algorithm {
    out(x, y, z) = vol(x, y, z) * 2.0f + f32(x - y * z)
}
schedule cuda {
    SCHED
}
"""


@pytest.mark.parametrize("sched", ["out.gpu_tile(x, y, z, xi, yi, zi, 8, 4, 2, round_up)",
                                   "out.gpu_tile(x, y, z, xo, yo, zo, xi, yi, zi, 8, 4, 2)"])
def test_a_3d_gpu_tile_makes_three_block_and_three_thread_dims(sched):
    """Halide's gpu_tile(x, y, z, [xo, yo, zo,] xi, yi, zi, w, h, d): block dims x, y, z over
    the tiles, thread dims over each tile; a RoundUp tail on an input whose size is a
    multiple of the tile, a guarded one (the default for an output) otherwise."""
    import numpy as np
    p = hdsl.loads(VOLUME.replace("SCHED", sched))
    k, = kernels_of(lower(p.ir, "cuda", "cuda-emulate").stmt)
    assert [t.value for t in k.kernel.threads] == [8, 4, 2]
    assert len(k.grid) == 3
    shape = (16, 8, 4) if "round_up" in sched else (13, 7, 3)    # (x, y, z) sizes
    # (a 3-D array is (y, x, z), as an image's (rows, columns, channels))
    vol = np.random.default_rng(1).random((shape[1], shape[0], shape[2]), dtype=np.float32)
    c = p.compile("cuda-emulate")
    assert np.array_equal(c(vol=vol), p(vol=vol))
    (_, grid, threads, _), = c.native.device.launches
    assert threads == (8, 4, 2) and grid == tuple(-(-n // t) for n, t in zip(shape, (8, 4, 2)))


def test_a_3d_gpu_tile_names_three_different_loops():
    with pytest.raises(HdslError, match="gpu_tile needs 3 different loops"):
        hdsl.loads(VOLUME.replace("SCHED", "out.gpu_tile(x, y, x, xi, yi, zi, 8, 4, 2)"))


def test_a_block_of_run_time_size_is_checked_before_the_launch():
    """gpu_threads over a whole row: the block's threads are the image's width, known at run
    time; within 1024 the kernel runs, beyond it the host stops before the launch with the
    error at the directive (a GPU would refuse the launch)."""
    import numpy as np
    p = hdsl.loads(with_cuda_schedule(HEAD, "out.gpu_blocks(y).gpu_threads(x)"))
    c = p.compile("cuda-emulate")
    img = (np.arange(5 * 300) % 997).astype(np.uint16).reshape(5, 300)
    assert np.array_equal(c(img=img), p(img=img))
    with pytest.raises(HdslError) as e:
        c(img=np.zeros((3, 1500), np.uint16))
    d = e.value.diagnostics[0]
    assert "a GPU block of 1500 threads at these sizes (the kernel of 'out'): at most 1024" in d.message
    assert d.span is not None and d.span.line == 11


def test_a_thread_dim_longer_than_cudas_is_an_error_at_the_directive():
    """CUDA's block may be 1024 threads along x and y but only 64 along z (the CUDA C++
    Programming Guide's table of compute capabilities, 'maximum z-dimension of a block'); a
    GPU refuses the launch ("invalid argument") where the host emulation would run it."""
    p = hdsl.loads(VOLUME.replace("SCHED", "out.gpu_tile(x, y, z, xi, yi, zi, 2, 2, 128)"))
    with pytest.raises(HdslError) as e:
        lower(p.ir, "cuda", "cuda-emulate")
    d = e.value.diagnostics[0]
    assert "a GPU block 128 threads long along z (the kernel of 'out'): CUDA allows at most 64" in d.message
    assert d.span is not None and "gpu_tile" in VOLUME.replace("SCHED", "out.gpu_tile").splitlines()[d.span.line - 1]
    k, = kernels_of(lower(hdsl.loads(VOLUME.replace("SCHED", "out.gpu_tile(x, y, z, xi, yi, zi, 2, 2, 64)")).ir,
                          "cuda", "cuda-emulate").stmt)
    assert [t.value for t in k.kernel.threads] == [2, 2, 64]


def test_a_grid_longer_than_cudas_is_checked_before_the_launch():
    """A grid may be 2^31 - 1 blocks along x but only 65535 along y and z (the same table): a
    one-row tile over 70002 rows needs 70002 blocks along y, refused before the launch at the
    directive; the same tiles along x run."""
    import numpy as np
    p = hdsl.loads(with_cuda_schedule(HEAD, "out.gpu_tile(x, y, xi, yi, 1, 1)"))
    c = p.compile("cuda-emulate")
    tall = np.zeros((70002, 1), np.uint16)
    with pytest.raises(HdslError) as e:
        c(img=tall)
    d = e.value.diagnostics[0]
    assert "a GPU grid of 70002 blocks along y at these sizes (the kernel of 'out'): CUDA allows at most 65535" \
        in d.message
    src = with_cuda_schedule(HEAD, "out.gpu_tile(x, y, xi, yi, 1, 1)").splitlines()
    assert d.span is not None and src[d.span.line - 1].strip() == "out.gpu_tile(x, y, xi, yi, 1, 1)"
    assert "innermost" in d.hint and c.native.device.counts["launch"] == 0
    wide = (np.arange(3 * 70000) % 997).astype(np.uint16).reshape(3, 70000)
    assert np.array_equal(c(img=wide), p(img=wide))
