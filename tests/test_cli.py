"""The command line: hdsl check | run | lower | compile, as a user types them."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from hdsl.cli import main
from hdsl.runtime.images import load_image, save_image

ROOT = Path(__file__).resolve().parents[1]
BLUR = ROOT / "examples" / "blur.hl"
GRAY16 = ROOT / "examples" / "images" / "gray16.png"

MULTI = """
pipeline two
input img: u8[3]
param gain: f32 = 2.0
param shift: i32
output gray: u8[2]
output scaled: f32[3]
algorithm {
    gray(x, y) = u8((u16(img(x, y, 0)) + u16(img(x, y, 1)) + u16(img(x, y, 2))) / 3)
    scaled(x, y, c) = f32(img(x, y, c)) * gain + f32(shift)
}
"""


def run(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out, out.err


def test_run_blur_native_and_interp_agree(tmp_path, capsys):
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    assert run(capsys, "run", BLUR, "--input", f"img={GRAY16}", "--output", a)[0] == 0
    assert run(capsys, "run", BLUR, "--input", f"img={GRAY16}", "--output", b, "--target", "interp")[0] == 0
    x, y = load_image(a), load_image(b)
    assert x.dtype == np.uint16 and x.shape == load_image(GRAY16).shape
    assert np.array_equal(x, y)


def test_multi_output_npy_params_and_size(tmp_path, capsys):
    prog = tmp_path / "two.hl"
    prog.write_text(MULTI)
    rgb = np.random.RandomState(1).randint(0, 256, (9, 13, 3)).astype(np.uint8)
    save_image(tmp_path / "in.png", rgb)
    g, s = tmp_path / "g.png", tmp_path / "s.npy"
    code, _, err = run(capsys, "run", prog, "--input", f"img={tmp_path / 'in.png'}", "--param", "shift=-4",
                       "--param", "gain=0.5", "--output", f"gray={g}", "--output", f"scaled={s}")
    assert code == 0, err
    gray = load_image(g)
    assert np.array_equal(gray, (rgb.astype(np.uint16).sum(axis=2) // 3).astype(np.uint8))
    assert np.array_equal(np.load(s), rgb.astype(np.float32) * np.float32(0.5) + np.float32(-4))
    # --size: a smaller region of both outputs
    code, _, err = run(capsys, "run", prog, "--input", f"img={tmp_path / 'in.png'}", "--param", "shift=0",
                       "--output", f"gray={g}", "--output", f"scaled={s}", "--size", "5,4")
    assert code == 0, err
    assert load_image(g).shape == (4, 5) and np.load(s).shape == (4, 5, 3)


def test_time_reports_compile_and_run_apart(tmp_path, capsys):
    code, out, _ = run(capsys, "run", BLUR, "--input", f"img={GRAY16}", "--output", tmp_path / "o.png", "--time", "3")
    assert code == 0
    assert out.splitlines()[0].startswith("compile: ")
    assert "run (host, 3 runs): median" in out and " min " in out


@pytest.mark.parametrize("args, message", [
    (["run", "nope.hl", "--output", "o.png"], "cannot read nope.hl"),
    (["run", BLUR, "--output", "o.png"], "input 'img' is missing"),
    (["run", BLUR, "--input", "im=x.png", "--output", "o.png"], "pipeline 'blur' has no input 'im'"),
    (["run", BLUR, "--input", f"img={GRAY16}", "--output", "o.gif"], "o.gif"),
    (["run", BLUR, "--input", f"img={GRAY16}", "--output", "o.png", "--schedule", "fast"],
     "pipeline 'blur' has no schedule 'fast'"),
    (["run", BLUR, "--input", f"img={GRAY16}", "--output", "o.png", "--param", "k=1"], "has no param 'k'"),
])
def test_user_errors_exit_1_without_traceback(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *args)
    assert code == 1
    assert message in err


def test_wrong_image_type_says_what_to_do(tmp_path, capsys):
    img8 = ROOT / "examples" / "images" / "gray8.png"
    code, _, err = run(capsys, "run", BLUR, "--input", f"img={img8}", "--output", tmp_path / "o.png")
    assert code == 1
    assert "input 'img' is u16 but" in err and "uint8" in err


def test_check_reports_every_file(tmp_path, capsys):
    bad = tmp_path / "bad.hl"
    bad.write_text("pipeline p\ninput img: u8[2]\noutput out: u8[2]\nalgorithm {\n    out(x, y) = imgg(x, y)\n}\n")
    code, _, err = run(capsys, "check", BLUR, bad)
    assert code == 1
    assert f"{bad}:5:17: error: 'imgg' is not defined; did you mean 'img'?" in err


SCHEDULE_ERRORS = """pipeline sched
input  img: u16[2]
output out: u16[2]
algorithm {
    f(x, y) = img(x, y) + 1
    g(x, y) = f(x, y) * 2
    out(x, y) = g(x, y) + g(x + 1, y)
}
schedule fine {
    g.compute_root()
    f.compute_at(g, y)
}
schedule inline_site {
    f.compute_at(g, y)
}
schedule store_site {
    f.compute_at(out, y).store_at(g, x)
}
"""


@pytest.fixture
def sched_file(tmp_path):
    path = tmp_path / "sched.hl"
    path.write_text(SCHEDULE_ERRORS)
    return path


def test_check_lowers_every_schedule(sched_file, capsys):
    """Errors only the compiler finds are errors of `hdsl check --lower`, at the directive that causes them."""
    path = sched_file
    code, _, err = run(capsys, "check", "--lower", path)
    assert code == 1
    assert (f"{path}:14:5: error: 'f' is computed at loop 'y' of 'g', but 'g' has no such loop "
            "(is it computed inline?)\n        f.compute_at(g, y)\n        ^^^^^^^^^^^^^^^^^^") in err
    assert f"{path}:17:5: error: 'f' is stored at loop 'x' of 'g', which has no such loop" in err
    assert err.count("error:") == 2                  # schedule 'fine' lowers
    code, _, err = run(capsys, "check", path)          # without --lower: the algorithm is fine
    assert code == 0 and err == ""
    path.write_text(SCHEDULE_ERRORS.split("schedule inline_site")[0])
    assert run(capsys, "check", "--lower", path)[0] == 0


def test_check_points_a_positionless_lowering_error_at_its_schedule(sched_file, capsys, monkeypatch):
    from hdsl.diagnostics import HdslError
    import hdsl.lower.lower as lower_module

    def lower(p, name, target):
        if name == "inline_site":
            raise HdslError("something only lowering sees", None, "a hint")
    monkeypatch.setattr(lower_module, "lower", lower)
    path = sched_file
    code, _, err = run(capsys, "check", "--lower", path)
    assert code == 1
    assert (f"{path}:13:1: error: schedule 'inline_site': something only lowering sees\n"
            "    schedule inline_site {\n    ^") in err
    assert "hint: a hint" in err


def test_lower_prints_passes(capsys):
    code, out, _ = run(capsys, "lower", BLUR, "--print-after", "schedule_functions")
    assert code == 0 and "parallel for out.s0.y" in out and "vectorized for out.s0.xi_i" in out
    code, out, _ = run(capsys, "lower", BLUR, "--emit", "llvm")
    assert code == 0 and "<16 x i16>" in out
    code, _, err = run(capsys, "lower", BLUR, "--print-after", "nothing")
    assert code == 1 and "unknown pass 'nothing'" in err


def test_lower_shows_the_shifted_form(capsys):
    """--shifted prints what the JIT runs on wide outputs: whole tiles of constant size."""
    code, out, _ = run(capsys, "lower", BLUR, "--shifted")
    assert code == 0 and "let blur_x.extent.0 = 256\n" in out and "let blur_x.extent.1 = 34\n" in out
    code, out, _ = run(capsys, "lower", BLUR)
    assert code == 0 and "let blur_x.extent.0 = 256\n" not in out


def test_lower_prints_shared_subexpressions_once(capsys):
    """camera_pipe inlines its demosaic into the colour correction: the expressions are DAGs
    whose trees are exponentially large (printing them took over ten minutes). Large
    statements print their shared parts as `let tN = …` lines first."""
    camera = Path(__file__).resolve().parents[1] / "examples" / "camera_pipe.hl"
    code, out, _ = run(capsys, "lower", camera)
    assert code == 0
    assert len(out) < 400_000 and "let t0 = " in out
    # every name is defined before the line that uses it
    defined = set()
    for line in out.splitlines():
        for used in re.findall(r"\bt(\d+)\b", line.split("=", 1)[1] if line.strip().startswith("let t") else line):
            assert f"t{used}" in defined, line[:120]
        m = re.match(r"\s*let (t\d+) = ", line)
        if m:
            defined.add(m.group(1))


def test_compile_writes_object_and_header(tmp_path, capsys):
    code, out, _ = run(capsys, "compile", BLUR, "-o", tmp_path, "--emit", "o,h,stmt")
    assert code == 0
    assert (tmp_path / "blur.o").stat().st_size > 0
    assert "int blur(struct hdsl_buffer *img, struct hdsl_buffer *out);" in (tmp_path / "blur.h").read_text()
    assert out.split() == [str(tmp_path / "blur.o"), str(tmp_path / "blur.h"), str(tmp_path / "blur.stmt")]


def test_check_says_ok(tmp_path, capsys):
    code, out, err = run(capsys, "check", BLUR)
    assert code == 0 and err == "" and out == f"{BLUR}: ok\n"
    code, out, _ = run(capsys, "check", "--lower", BLUR)
    assert code == 0 and out == f"{BLUR}: ok (every schedule lowers)\n"


LATIN1 = b"# caf\xe9 au lait\npipeline p\ninput img: u8[2]\noutput out: u8[2]\nalgorithm {\n    out(x, y) = img(x, y)\n}\n"


def test_a_file_that_is_not_utf8_is_a_positioned_error(tmp_path, capsys, monkeypatch):
    """`hdsl run` and `use "lib.hl"` read through the same check as `hdsl check`
    (tests/error/not_utf8.hl): the first bad byte's offset, line and column, no traceback."""
    monkeypatch.chdir(tmp_path)
    Path("bad.hl").write_bytes(LATIN1)
    code, _, err = run(capsys, "run", "bad.hl", "--input", f"img={GRAY16}", "--output", "o.png")
    assert code == 1
    assert err.startswith("bad.hl:1:6: error: this file is not UTF-8 text: byte 0xE9 at offset 5 (line 1) "
                          "cannot be decoded\n")
    Path("lib.hl").write_bytes(b"fn twice(v) {\n    return v * 2  # \xff\n}\n")
    Path("main.hl").write_text('use "lib.hl"\npipeline m\ninput img: u8[2]\noutput out: u8[2]\n'
                               "algorithm {\n    out(x, y) = twice(img(x, y))\n}\n")
    code, _, err = run(capsys, "check", "main.hl")
    assert code == 1 and "internal" not in err
    assert "lib.hl:2:21: error: this file is not UTF-8 text: byte 0xFF at offset 34 (line 2)" in err


def test_output_under_a_file_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "afile").write_text("not a folder")
    code, _, err = run(capsys, "run", BLUR, "--input", f"img={GRAY16}", "--output", tmp_path / "afile" / "u.png")
    assert code == 1 and "internal" not in err
    assert f"error: cannot write '{tmp_path / 'afile' / 'u.png'}': '{tmp_path / 'afile'}' is a file, not a folder" in err


@pytest.mark.parametrize("suffix", [".png", ".npy"])
def test_a_failed_write_leaves_the_old_output(tmp_path, capsys, monkeypatch, suffix):
    """A full disk mid-write (ENOSPC, simulated: the writer puts out part of the file, then
    fails) used to leave a truncated PNG or an empty .npy over the good file. Outputs are
    written to a temporary file in the same folder and renamed over the old one."""
    import errno
    from PIL import Image

    out = tmp_path / f"o{suffix}"
    assert run(capsys, "run", BLUR, "--input", f"img={GRAY16}", "--output", out)[0] == 0
    good = out.read_bytes()

    def full_disk(*args, **kwargs):
        f = next(a for a in args if hasattr(a, "write"))
        f.write(good[:100])
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(Image.Image, "save", lambda self, fp, **kw: full_disk(fp))
    monkeypatch.setattr(np, "save", lambda fp, arr, **kw: full_disk(fp))
    code, _, err = run(capsys, "run", BLUR, "--input", f"img={GRAY16}", "--output", out, "--target", "interp")
    assert code == 1
    assert f"error: cannot write '{out}': No space left on device" in err
    assert out.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]     # no temporary file left


SPEC = ROOT / "tests" / "correctness" / "programs" / "spec_blur.hl"


def test_store_level_inside_the_compute_level_is_refused_everywhere(tmp_path, capsys):
    """It passed `check --lower` and then failed in codegen ("unbound variable blur_x.min.0").
    Halide's validate_schedule (src/ScheduleFunctions.cpp) accepts a store_at site only if it
    comes before the compute_at site among the loops around every use (the store level
    encloses the compute level), else "Func ... is computed at the following invalid
    location"; every command and target gives one positioned error."""
    prog = tmp_path / "s.hl"
    algorithm = SPEC.read_text().split("schedule {")[0]
    prog.write_text(algorithm + "schedule {\n    out.tile(x, y, xi, yi, 64, 32)\n"
                    "    blur_x.compute_at(out, yi).store_at(out, xi)\n}\n")
    line = algorithm.count("\n") + 3
    expected = (f"{prog}:{line}:32: error: 'blur_x' is stored at loop 'xi' of 'out', which does not enclose where it "
                "is computed (at loop 'yi' of 'out')\n"
                "        blur_x.compute_at(out, yi).store_at(out, xi)\n"
                "                                   ^^^^^^^^^^^^^^^^^\n")
    for args in (["check", "--lower", prog], ["compile", prog, "-o", tmp_path / "build"],
                 ["run", prog, "--input", f"img={GRAY16}", "--output", tmp_path / "o.png"],
                 ["run", prog, "--input", f"img={GRAY16}", "--output", tmp_path / "o.png", "--target", "interp"]):
        code, _, err = run(capsys, *args)
        assert code == 1 and err.startswith(expected), err
    assert not (tmp_path / "o.png").exists() and not (tmp_path / "build").exists()


def test_a_failed_compile_leaves_no_files(tmp_path, capsys, monkeypatch):
    """A C compiler that is missing made `hdsl compile` fail after writing the header: a lone
    blur.h. Files are made in a temporary folder and moved at the end; older files stay."""
    out = tmp_path / "build"
    out.mkdir()
    (out / "blur.h").write_text("the old header")
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    code, _, err = run(capsys, "compile", BLUR, "-o", out, "--emit", "o,h,stmt")
    assert code == 1 and "cannot compile the C wrapper" in err
    assert [p.name for p in out.iterdir()] == ["blur.h"] and (out / "blur.h").read_text() == "the old header"
    monkeypatch.delenv("CC")
    code, _, _ = run(capsys, "compile", BLUR, "-o", out, "--emit", "h")
    assert code == 0 and "int blur(" in (out / "blur.h").read_text()
    assert [p.name for p in out.iterdir()] == ["blur.h"]


def test_compile_for_interp_says_what_to_do(tmp_path, capsys):
    code, _, err = run(capsys, "compile", BLUR, "-o", tmp_path, "--target", "interp")
    assert code == 1
    assert err == ("error: 'interp' is the reference evaluator: it runs pipelines but makes no code to compile "
                   "ahead of time\nhint: compile for host, x86-64-avx2, x86-64-avx512 (each may end in "
                   "-fast_math); `hdsl run --target interp` runs the evaluator\n")
    assert list(tmp_path.iterdir()) == []


PARAMS = """pipeline needs
input img: u8[2]
input mask: u8[2]
param k: i32
param gain: f32 = 2.0
output out: u8[2]
algorithm {
    out(x, y) = img(x, y) + mask(x, y) + u8(k)
}
"""


def test_hints_speak_cli(tmp_path, capsys, monkeypatch):
    """The Python API's hints say `pass k=<value>`; on the command line they name options."""
    monkeypatch.chdir(tmp_path)
    Path("needs.hl").write_text(PARAMS)
    save_image("a.png", np.zeros((4, 5), np.uint8))
    code, _, err = run(capsys, "run", "needs.hl", "--output", "o.png")
    assert code == 1 and err == "error: input 'img' is missing\nhint: --input img=PATH --input mask=PATH\n"
    code, _, err = run(capsys, "run", "needs.hl", "--input", "img=a.png", "--input", "mask=a.png", "--output", "o.png")
    assert code == 1 and err == "error: param 'k' has no default and is not given\nhint: --param k=VALUE\n"
    code, _, err = run(capsys, "run", "needs.hl", "--input", "img=a.png", "--input", "mask=a.png",
                       "--param", "k", "--output", "o.png")
    assert code == 1 and err == "error: --param 'k' should be NAME=VALUE\n"
    # a repeated option is an error, not the last one silently winning
    code, _, err = run(capsys, "run", "needs.hl", "--input", "img=a.png", "--input", "img=b.png",
                       "--input", "mask=a.png", "--param", "k=1", "--output", "o.png")
    assert code == 1 and "error: --input img=… is given twice (img=a.png and img=b.png)" in err
    code, _, err = run(capsys, "run", "needs.hl", "--input", "img=a.png", "--input", "mask=a.png",
                       "--param", "k=1", "--output", "o.png", "--output", "p.png")
    assert code == 1 and "error: output 'out' is given twice (--output o.png and p.png)" in err
    assert not Path("o.png").exists()


@pytest.mark.parametrize("args", [["run", BLUR, "--time", "0"], ["run", BLUR, "--time", "-3"],
                                  ["bench", BLUR, "--runs", "0"]])
def test_counts_must_be_positive(capsys, args):
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    assert e.value.code == 2
    assert "is not a positive count (give 1 or more)" in capsys.readouterr().err


def test_every_option_has_help():
    import argparse
    from hdsl.cli import build_parser
    ap = build_parser()
    subs = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for name, parser in [("hdsl", ap)] + list(subs.choices.items()):
        for action in parser._actions:
            if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) and not action.help:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, missing
    assert {"check", "run", "compile", "bench", "lower"} <= set(subs.choices)


def test_print_after_lists_the_passes(capsys):
    from hdsl.lower.lower import PASSES
    with pytest.raises(SystemExit):
        main(["lower", "--help"])
    assert ", ".join(PASSES).replace(" ", "") in capsys.readouterr().out.replace(" ", "").replace("\n", "")
    code, _, err = run(capsys, "lower", BLUR, "--print-after", "nothing")
    assert code == 1 and err == ("error: unknown pass 'nothing'\nhint: --print-after takes one of: "
                                 + ", ".join(PASSES) + " (in the order they run)\n")


def test_run_with_an_origin(tmp_path, capsys):
    """--min X,Y: the spec's first program (no boundary condition) over the input's interior,
    in native code and the evaluator, equal to NumPy (u16 arithmetic wraps, as in hdsl).
    (At least one 256x32 tile of the spec's schedule wide: narrower, its vectorized blur_x
    reads past the input, as Halide's would.)"""
    img = np.random.RandomState(5).randint(0, 65536, (66, 300)).astype(np.uint16)
    np.save(tmp_path / "in.npy", img)
    spec = SPEC
    for target in ("host", "interp"):
        out = tmp_path / f"{target}.npy"
        code, _, err = run(capsys, "run", spec, "--input", f"img={tmp_path / 'in.npy'}", "--min", "1,1",
                           "--size", "298,64", "--output", out, "--target", target)
        assert code == 0, err
        bx = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) // 3
        assert np.array_equal(np.load(out), (bx[:-2] + bx[1:-1] + bx[2:]) // 3)
    code, _, err = run(capsys, "run", spec, "--input", f"img={tmp_path / 'in.npy'}", "--min", "1,x",
                       "--output", tmp_path / "o.npy")
    assert code == 1 and err == "error: --min '1,x' should be X[,Y[,C]]\n"


def test_bench_takes_output_sizes(capsys):
    """camera_pipe's output is smaller than its raw input (the demosaic reads around each
    pixel): with the input's size it cannot be benched; --output-size gives it its own."""
    camera = ROOT / "examples" / "camera_pipe.hl"
    code, out, err = run(capsys, "bench", camera, "--size", "160,128", "--output-size", "128,96,3", "--runs", "2")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"{camera}: input 160x128, output 128x96x3, target host, 2 runs"
    assert lines[2].startswith("run: median ")
    code, _, err = run(capsys, "bench", camera, "--size", "160,128", "--runs", "1")
    assert code == 1 and "internal" not in err


GPU = """pipeline g
input  img: u16[2]
output out: u16[2]
algorithm {
    out(x, y) = img(x, y) * 2
}
schedule {
    out.tile(x, y, xi, yi, 16, 8).parallel(y)
}
schedule gpu {
    out.gpu_tile(x, y, xi, yi, 16, 16)
}
schedule blocks {
    out.split(y, yo, yi, 4).gpu_blocks(yo).gpu_threads(yi)
}
schedule auto
"""


def test_gpu_directives_and_schedule_auto_are_refused_on_the_cpu(tmp_path, capsys):
    """They ran serially on the CPU, in silence. A CPU target refuses GPU directives at the
    directive (GPU targets take them), and `schedule auto` until an autoscheduler exists; the
    evaluator ignores schedules."""
    prog = tmp_path / "g.hl"
    prog.write_text(GPU)
    io = ["--input", f"img={GRAY16}", "--output", tmp_path / "o.png"]
    code, _, err = run(capsys, "run", prog, *io, "--schedule", "gpu")
    assert code == 1
    assert err.startswith(f"{prog}:11:5: error: 'gpu_tile' maps loops onto a GPU, but target 'host' is a CPU\n"
                          "        out.gpu_tile(x, y, xi, yi, 16, 16)\n")
    code, _, err = run(capsys, "run", prog, *io, "--schedule", "blocks")
    assert code == 1 and err.count("maps loops onto a GPU") == 2
    code, _, err = run(capsys, "run", prog, *io, "--schedule", "auto")
    assert code == 1 and err.startswith(f"{prog}:16:1: error: 'schedule auto' asks for the automatic scheduler, "
                                        "which hdsl does not have yet")
    code, _, err = run(capsys, "check", "--lower", prog)
    assert code == 1 and err.count("error:") == 4
    code, _, err = run(capsys, "compile", prog, "--schedule", "gpu", "-o", tmp_path / "build")
    assert code == 1 and "maps loops onto a GPU" in err
    # the evaluator and the CPU schedule run
    assert run(capsys, "run", prog, *io, "--schedule", "gpu", "--target", "interp")[0] == 0
    assert run(capsys, "run", prog, *io)[0] == 0
    assert np.array_equal(load_image(tmp_path / "o.png"), load_image(GRAY16) * np.uint16(2))


def test_the_spec_programs_cuda_block_is_not_run_on_the_cpu(capsys, tmp_path):
    """Section 1's program has `schedule cuda { out.gpu_tile(...) }`: chosen only when
    compiling for a GPU target (`check --lower` lowers it for cuda-emulate), refused when named
    for the CPU."""
    spec = SPEC
    assert run(capsys, "check", "--lower", spec)[0] == 0
    code, _, err = run(capsys, "run", spec, "--input", f"img={GRAY16}", "--output", tmp_path / "o.png",
                       "--schedule", "cuda")
    assert code == 1 and "hint: this block is for a GPU target: run the CPU schedule instead" in err
