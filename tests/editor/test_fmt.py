"""`hdsl fmt` (hdsl/editor/fmt.py): the canonical layout, comments kept, idempotent, and the
same program after formatting. "Same program" is checked with oracles the formatter does not
use: the parser's own Lark tree (token values, no positions), the comments as the Pygments
lexer finds them, and the reference evaluator's output."""
from __future__ import annotations

import os
import re
import stat

import numpy as np
import pytest
from pygments.lexers import get_lexer_by_name
from pygments.token import Comment

import hdsl
from hdsl.cli import main
from hdsl.diagnostics import HdslError
from hdsl.editor.fmt import format_source
from hdsl.frontend.parse import _parser
from tests.editor.conftest import ROOT, source_files


def lark_tree(text: str):
    src = text if text.endswith("\n") else text + "\n"
    return _parser().parse(src)


def comments(text: str) -> list[str]:
    lexer = get_lexer_by_name("hdsl", stripnl=False, ensurenl=False)
    return [v.rstrip() for kind, v in lexer.get_tokens(text) if kind in Comment]


def messed_up(text: str) -> str:
    """The same program laid out badly: no indentation, spaces squeezed out of or added to lines
    without strings or comments, blank lines doubled."""
    out = []
    for line in text.split("\n"):
        line = line.strip()
        if '"' not in line and "#" not in line and not line.endswith("\\"):
            line = re.sub(r"\s*,\s*", " ,", line)
            line = re.sub(r" ([-+*/%]) (?=\w)", r"\1", line)      # `a + b` -> `a+b`
            line = re.sub(r"\(", "( ", line)
        out.append(line)
        if not line:
            out.append("")
    return "\n".join(out) + "\n\n\n"


@pytest.mark.parametrize("path", source_files(), ids=lambda p: p.name)
def test_every_example_and_stdlib_file_is_its_own_fixed_point(path):
    text = path.read_text()
    assert format_source(text, str(path)) == text


@pytest.mark.parametrize("path", source_files(), ids=lambda p: p.name)
def test_a_messed_up_file_formats_to_the_same_program(path):
    """Formatting a badly laid out copy gives the same parse tree and comments as the original,
    and is idempotent."""
    text = path.read_text()
    bad = messed_up(text)
    assert bad != text
    assert lark_tree(bad) == lark_tree(text)          # (the perturbation itself keeps the program)
    good = format_source(bad, str(path))
    assert lark_tree(good) == lark_tree(text)
    assert comments(good) == comments(text)
    assert format_source(good, str(path)) == good


def test_the_canonical_layout():
    """Each rule of docs/editors.md on one file, the expected layout written by hand."""
    bad = (
        "\n\n# a program\n"
        "pipeline   p\n"
        "use boundary\n"
        "input img:u8[2]\n"
        "param gain : f32=1.5f   # the gain\n"
        "output out:u8[ 2 ]\n"
        "\n\n\n"
        "algorithm{\n"
        "  c=repeat_edge( img )\n"
        "\tblur (x,y)=( c(x-1,y)+c(x , y)* -2 +c(x+1,y) )/3\n"
        "  short(x, y)   = blur(x, y)\n"
        "  longer(x, y) = select(blur(x, y) > 3, 1,\n"
        "                        0)\n"
        "  out(x,y)=u8(f32(longer(x,y)+short(x,y))*gain) \\\n"
        "      + u8(!(x<2)&&y>=0)\n"
        "}\n"
        "schedule {\n"
        "        # a comment\n"
        "    for j in 0 .. 2 {\n"
        "  out.split(x,x,xi,8).vectorize( xi )   # fast\n"
        "    }\n"
        "}\n\n")
    good = (
        "# a program\n"
        "pipeline p\n"
        "use boundary\n"
        "input  img: u8[2]\n"
        "param  gain: f32 = 1.5f  # the gain\n"
        "output out: u8[2]\n"
        "\n"
        "algorithm {\n"
        "    c = repeat_edge(img)\n"
        "    blur(x, y) = (c(x - 1, y) + c(x, y) * -2 + c(x + 1, y)) / 3\n"
        "    short(x, y)   = blur(x, y)\n"
        "    longer(x, y) = select(blur(x, y) > 3, 1,\n"
        "                          0)\n"
        "    out(x, y) = u8(f32(longer(x, y) + short(x, y)) * gain) \\\n"
        "        + u8(!(x < 2) && y >= 0)\n"
        "}\n"
        "schedule {\n"
        "    # a comment\n"
        "    for j in 0..2 {\n"
        "        out.split(x, x, xi, 8).vectorize(xi)  # fast\n"
        "    }\n"
        "}\n")
    assert format_source(bad, "p.hl") == good
    assert format_source(good, "p.hl") == good


def test_a_formatted_program_computes_the_same(tmp_path):
    """The reference evaluator gives the same output for blur.hl and its messed-up, reformatted copy."""
    text = (ROOT / "examples" / "blur.hl").read_text()
    again = format_source(messed_up(text), "blur.hl")
    img = np.random.RandomState(1).randint(0, 65536, (20, 24)).astype(np.uint16)
    a = hdsl.loads(text, "blur.hl")(img=img)
    b = hdsl.loads(again, "blur.hl")(img=img)
    assert a.shape == (20, 24) and np.array_equal(a, b)


def test_a_file_that_does_not_parse_is_refused():
    with pytest.raises(HdslError) as e:
        format_source("pipeline p\nalgorithm {\n    out(x) = 1 +\n}\n", "bad.hl")
    assert e.value.diagnostics[0].message == "unexpected end of line"


def test_cli_check_rewrite_and_errors(tmp_path, capsys):
    good = (ROOT / "examples" / "blur.hl").read_text()
    a, b, c = tmp_path / "a.hl", tmp_path / "b.hl", tmp_path / "c.hl"
    a.write_text(good)
    b.write_text(messed_up(good))
    c.write_text("pipeline p\ninput img: u8[2\n")
    os.chmod(b, 0o640)
    bad_b = b.read_text()

    assert main(["fmt", "--check", str(a), str(b)]) == 1
    err = capsys.readouterr().err
    assert f"{b}: would reformat" in err and str(a) not in err
    assert b.read_text() == bad_b                       # --check changes nothing

    assert main(["fmt", str(a), str(b)]) == 0
    assert capsys.readouterr().out == f"{b}: formatted\n"
    assert b.read_text() == format_source(bad_b, str(b))
    assert stat.S_IMODE(os.stat(b).st_mode) == 0o640     # the file keeps its permissions
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.hl", "b.hl", "c.hl"]   # no temporary left
    assert main(["fmt", "--check", str(a), str(b)]) == 0

    assert main(["fmt", str(c)]) == 1
    err = capsys.readouterr().err
    assert f"{c}:2:" in err and "error:" in err and "Traceback" not in err
    assert c.read_text() == "pipeline p\ninput img: u8[2\n"
