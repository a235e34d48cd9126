"""Every program in the language contract (../shared/spec/language.md) passes `hdsl check`.

Whole programs are checked as they are. The spec's fragments (a list of
statement forms, an algorithm without declarations, the IIR lines) are
checked inside the smallest program that gives their names a meaning; the
fragment's own text is kept verbatim.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from hdsl.cli import main

SPEC = Path(__file__).resolve().parents[1].parent / "shared" / "spec" / "language.md"


def spec_blocks() -> list[str]:
    text = SPEC.read_text()
    return re.findall(r"```hl\n(.*?)```", text, re.S)


def check(tmp_path, source: str, capsys) -> tuple[int, str]:
    path = tmp_path / "prog.hl"
    path.write_text(source)
    code = main(["check", str(path)])
    return code, capsys.readouterr().err


def test_spec_has_the_expected_blocks():
    blocks = spec_blocks()
    assert len(blocks) == 4
    assert blocks[0].lstrip().startswith("# blur.hl")


def test_whole_program(tmp_path, capsys):
    code, err = check(tmp_path, spec_blocks()[0], capsys)
    assert code == 0, err


# Section 3 lists definition forms, one per line; each is checked in the
# smallest program that defines what it reads. {line} is the spec's line, verbatim.
FORM_PROGRAMS = [
    # f(x, y) = expr
    "param expr: f32 = 1.0\nalgorithm {{\n{line}\n    out(x, y) = f(x, y)\n}}",
    # f(x, y) = (r, g, b)
    "algorithm {{\n    var x, y\n    let r = f32(x)\n    let g = f32(y)\n    let b = img(x, y)\n{line}\n"
    "    out(x, y) = f(x, y)[0] + f(x, y)[1] + f(x, y)[2]\n}}",
    # f(x, y) += expr
    "param expr: f32 = 1.0\nalgorithm {{\n    f(x, y) = img(x, y)\n{line}\n    out(x, y) = f(x, y)\n}}",
    # f(r.x, y) = f(r.x - 1, y) * a + f(r.x, y) * (1 - a)   # a scan over rdom r
    "param a: f32 = 0.5\nalgorithm {{\n    rdom r = [1..8]\n    f(x, y) = img(x, y)\n{line}\n    out(x, y) = f(x, y)\n}}",
    # hist(clamp(img(r.x, r.y), 0, 255)) += 1
    "algorithm {{\n    rdom r = img\n{line}\n    out(x, y) = img(x, y)\n}}",
    # let gx = f32(x) / sigma
    "param sigma: f32 = 2.0\nalgorithm {{\n    var x\n{line}\n    out(x, y) = img(x, y) * gx\n}}",
    # var x, y, c
    "algorithm {{\n{line}\n    let v = f32(x + y + c)\n    f(x, y, c) = v\n    out(x, y) = f(x, y, 0)\n}}",
    # rdom r = [-2..3, -2..3]
    "algorithm {{\n{line}\n    out(x, y) = sum(img(x + r.x, y + r.y))\n}}",
    # rdom s = img
    "algorithm {{\n{line}\n    out(x, y) = img(x, y) + sum(img(s.x, s.y))\n}}",
    # rdom t = [0..img.width] where t.x % 2 == 0
    "algorithm {{\n{line}\n    out(x, y) = img(x, y) + sum(img(t.x, 0))\n}}",
]
HEADER = "pipeline forms\ninput img: f32[2]\noutput out: f32[2]\n"


def form_lines() -> list[str]:
    return [line for line in spec_blocks()[1].splitlines() if line.strip()]


def test_form_count():
    assert len(form_lines()) == len(FORM_PROGRAMS)


@pytest.mark.parametrize("i", range(len(FORM_PROGRAMS)))
def test_definition_forms(tmp_path, capsys, i):
    line = form_lines()[i]
    source = HEADER + FORM_PROGRAMS[i].format(line=line)
    if i == 4:     # the histogram reads an integer image: the spec's `img` there is i32
        source = source.replace("input img: f32[2]", "input img: i32[2]").replace(
            "output out: f32[2]", "output out: i32[2]\noutput hist: i32[1]")
    code, err = check(tmp_path, source, capsys)
    assert code == 0, f"{line!r}\n{source}\n{err}"


def test_pyramid_fragment(tmp_path, capsys):
    frag = spec_blocks()[2]
    source = "pipeline pyr\ninput img: f32[2]\noutput out: f32[2]\n" + frag
    code, err = check(tmp_path, source, capsys)
    assert code == 0, err


def test_iir_fragment(tmp_path, capsys):
    frag = spec_blocks()[3]
    source = ("pipeline iir\ninput img: f32[2]\n"
              + "".join(f"param {p}: f32 = 0.5\n" for p in ("b0", "a1", "a2", "c0", "c1"))
              + "output rf: f32[2]\nalgorithm {\n" + frag + "}\n")
    code, err = check(tmp_path, source, capsys)
    assert code == 0, err


def test_a_wrong_program_fails(tmp_path, capsys):
    """The harness itself can fail: a misspelt Func is reported with a position."""
    src = spec_blocks()[0].replace("blur_x(x, y + 1)", "blur_y(x, y + 1)")
    code, err = check(tmp_path, src, capsys)
    assert code == 1
    assert "prog.hl:9:55: error:" in err
    assert "'blur_y' is not defined; did you mean 'blur_x'?" in err
