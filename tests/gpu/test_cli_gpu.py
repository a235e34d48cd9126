"""The command line with GPU targets: `hdsl run --target cuda-emulate` gives the evaluator's
image, `hdsl lower` shows the kernels and their launch bounds, `hdsl check --lower` lowers
`schedule cuda` blocks for cuda-emulate and reports their nesting errors at the directive."""
import numpy as np

from hdsl.cli import main
from hdsl.runtime.images import load_image
from tests.gpu.programs import BLUR, with_cuda_schedule


def run(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out, out.err


def run_emulated_and_evaluated(capsys, prog, img, tmp_path):
    """`hdsl run` of prog under cuda-emulate and the evaluator: the same image."""
    for target in ("cuda-emulate", "interp"):
        code, _, err = run(capsys, "run", prog, "--input", f"img={img}", "--output", tmp_path / f"{target}.npy",
                           "--target", target)
        assert code == 0, err
    assert np.array_equal(load_image(tmp_path / "cuda-emulate.npy"), load_image(tmp_path / "interp.npy"))


def test_run_lower_and_check_with_a_gpu_target(tmp_path, capsys):
    prog = tmp_path / "g.hl"
    prog.write_text(with_cuda_schedule(BLUR, "out.gpu_tile(x, y, xi, yi, 16, 8)\n    bx.compute_at(out, x)"
                                             ".gpu_threads(x, y)"))
    img = tmp_path / "img.npy"
    np.save(img, np.random.default_rng(1).integers(0, 65535, (21, 34), dtype=np.uint16))
    run_emulated_and_evaluated(capsys, prog, img, tmp_path)
    code, out, _ = run(capsys, "lower", prog, "--target", "cuda-emulate")
    assert code == 0
    assert ("launch kernel_out_0 on host_emulate: grid ((out.s0.x.max - out.s0.x.min + 16) / 16, "
            "(out.s0.y.max - out.s0.y.min + 8) / 8), threads (16, 10), shared (i64)320 bytes") in out
    assert "allocate bx: u16[bx.size] in gpu_shared" in out and "gpu_barrier" in out
    assert run(capsys, "check", "--lower", prog)[0] == 0


def test_check_lower_reports_a_gpu_nesting_error(tmp_path, capsys):
    prog = tmp_path / "g.hl"
    prog.write_text(with_cuda_schedule(BLUR, "out.gpu_threads(x, y)"))
    code, _, err = run(capsys, "check", "--lower", prog)
    assert code == 1
    assert err.startswith(f"{prog}:11:5: error: GPU thread loop 'y' of 'out' is not inside a GPU block loop\n")
    assert "hint: mark an outer loop gpu_blocks (gpu_tile does both)" in err


def test_lower_emits_the_host_code_of_a_gpu_target(tmp_path, capsys):
    """`hdsl lower --emit llvm --target cuda-emulate`: the host function and each kernel
    compiled for the host (the CPU code generator has no launches)."""
    prog = tmp_path / "g.hl"
    prog.write_text(with_cuda_schedule(BLUR, "out.gpu_tile(x, y, xi, yi, 16, 8)"))
    code, out, err = run(capsys, "lower", prog, "--target", "cuda-emulate", "--emit", "llvm")
    assert code == 0, err
    assert 'define i32 @"hdsl_g"(' in out and 'define internal i32 @"hdsl_g.kernel_out_0"(ptr' in out


def test_compile_and_lower_report_too_much_shared_memory_at_the_directive(tmp_path, capsys):
    """66560 bytes of shared memory per block: over sm_75's 64 KB (`hdsl compile --target
    cuda`, `hdsl lower --target cuda-emulate` exit 1 at bx's compute_at), within sm_80's."""
    from tests.gpu.test_gpu_lowering import BIG_TILE
    prog = tmp_path / "g.hl"
    prog.write_text(with_cuda_schedule(BLUR, BIG_TILE))
    for cmd in (["compile", prog, "--target", "cuda", "-o", tmp_path], ["lower", prog, "--target", "cuda-emulate"]):
        code, _, err = run(capsys, *cmd)
        assert code == 1
        assert err.startswith(f"{prog}:12:5: error: 'bx' in GPU shared memory needs 66560 bytes per block")
        assert "bx.compute_at(out, xo)" in err and "cuda-sm_80 (163 KB)" in err
    code, out, err = run(capsys, "lower", prog, "--target", "cuda-sm_80")
    assert code == 0, err
    assert "shared (i64)66560 bytes" in out


def test_schedule_prints_the_automatic_gpu_schedule(tmp_path, capsys):
    """`hdsl schedule FILE --target cuda`: the GPU rules' schedule, which pasted back into the
    file as `schedule cuda` runs under cuda-emulate with the evaluator's values."""
    prog = tmp_path / "g.hl"
    prog.write_text(BLUR)
    code, out, err = run(capsys, "schedule", prog, "--target", "cuda", "--name", "cuda")
    assert code == 0, err
    assert "out.gpu_tile(x, y, x_i, y_i, 16, 16)" in out and "bx.compute_at(out, x).gpu_threads(x, y)" in out
    prog.write_text(BLUR + out)
    img = tmp_path / "img.npy"
    np.save(img, np.random.default_rng(2).integers(0, 65535, (19, 37), dtype=np.uint16))
    run_emulated_and_evaluated(capsys, prog, img, tmp_path)
