"""The language server's name index (hdsl/editor/index.py) in-process: it answers on files cut
or broken anywhere, and every directive the compiler knows has a meaning to show."""
from __future__ import annotations

import random

import pytest

from hdsl.editor.directives import MEANING, arg_kinds
from hdsl.editor.index import DocIndex, parse_recovering
from hdsl.schedule.record import SIGNATURES
from tests.editor.conftest import ROOT

pytest.importorskip("pygls")
from hdsl.editor import lsp  # noqa: E402


def test_every_directive_has_a_meaning():
    assert set(MEANING) == set(SIGNATURES)
    assert all(MEANING.values())


def test_argument_kinds_follow_the_signature_table():
    """record.py: tile with 6 arguments names two new inner loops; with 8, four new loops;
    reorder repeats 'var'."""
    assert arg_kinds("tile", 6) == ["var", "var", "new", "new", "int", "int"]
    assert arg_kinds("tile", 8)[2:6] == ["new"] * 4
    assert arg_kinds("reorder", 4) == ["var"] * 4
    assert arg_kinds("compute_at", 2) == ["func", "var_of"]


def test_a_broken_line_is_blanked_and_the_rest_kept():
    text = (ROOT / "examples" / "blur.hl").read_text()
    broken = text.replace("    blur_x.compute_at", "    out.tile(x, y,\n    blur_x.compute_at")
    mod, blanked = parse_recovering(broken, "b.hl")
    assert mod is not None and blanked == [broken.split("\n").index("    out.tile(x, y,") + 1]
    idx = DocIndex(broken, "b.hl")
    assert {"clamped", "blur_x", "out"} <= set(idx.visible())
    assert idx.info["blur_x"] == "Func blur_x(x, y): u16, 2-D"


@pytest.mark.parametrize("name", ["examples/camera_pipe.hl", "examples/local_laplacian.hl",
                                  "hdsl/stdlib/filters.hl"])
def test_any_cut_or_insertion_answers_without_raising(name):
    """Cut files, files with a span deleted and files with a stray character inserted, at random
    places: indexing, completion, hover and the outline raise nothing."""
    text = (ROOT / name).read_text()
    rng = random.Random(name)
    for _ in range(6):
        cut = rng.randrange(len(text))
        for v in (text[:cut], text[:cut] + text[cut + rng.randrange(1, 40):],
                  text[:cut] + rng.choice(["(", "{", ".", "\n}", "out.", "=", '"', "#é"]) + text[cut:]):
            idx = DocIndex(v, name)
            lines = v.split("\n")
            line = rng.randrange(1, len(lines) + 1)
            col = rng.randrange(1, len(lines[line - 1]) + 2)
            assert isinstance(lsp.completions(idx, idx.lines, line, col), list)
            occ = idx.occurrence_at(line, col)
            if occ is not None:
                assert occ.symbol.name in lsp.hover_symbol(idx, occ.symbol)
            lsp.document_symbols(idx)


def test_completion_after_an_rdom_and_an_input():
    """`r.` offers an rdom's dimensions, `img.` an input's properties (docs/language.md)."""
    text = ("pipeline p\ninput img: u8[2]\noutput out: i32[1]\nalgorithm {\n    rdom r = img\n"
            "    out(x) = 0\n    out(x) += i32(img(r.x, r.y))\n    w = img.\n}\n")
    idx = DocIndex(text, "p.hl")
    lines = text.split("\n")
    n = next(i for i, line in enumerate(lines, 1) if "img(r.x" in line)
    col = lines[n - 1].index("r.x") + 3
    assert {i.label for i in lsp.completions(idx, lines, n, col)} == set("xyzw")
    n = next(i for i, line in enumerate(lines, 1) if line.endswith("img."))
    labels = {i.label for i in lsp.completions(idx, lines, n, len(lines[n - 1]) + 1)}
    assert {"width", "height", "dim"} <= labels and "tile" not in labels
