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
