"""Gathers of one buffer whose indices differ by constants on every lane are loaded as one
short vector per lane and transposed (hdsl/codegen/gather_groups.py): the bilateral grid's
slicing reads c = 0, 1 at z and z + 1 of a grid stored (c, z, x), four consecutive floats.
Values: NumPy's (an independent oracle: the same sums over an array built by the same
formula, in integers that f32 holds exactly) and the evaluator's, for windows of 4 and 2
elements, a window with an unread hole, three neighbours (a window of two and one gather),
offsets below the first member, a member inside a select's arm (left a gather), 32- and
64-bit floats and integers, 16-bit elements (never grouped), 2 to 16 lanes with a tail, on
the host and on AVX2. The IR check fails without the grouping: its 16-byte row loads
replace the gathers."""
from __future__ import annotations

import re

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form

SRC = """
pipeline gg
input img: f32[2]
input tab: T[2]
output out: T[2]
algorithm {
    var x, y, z, c
    g(c, z, x) = tab(z, x) * T(c + 1) + T(c * 7)
    let k = clamp(i32(img(x, y)), LO, HI)
    out(x, y) = EXPR
}
schedule {
    g.compute_root().bound(c, 0, C).reorder_storage(c, z, x)
    out.vectorize(x, LANES)
}
"""

Z = 12          # z extent of the table
# (expression, channels C, the lowest and highest k, NumPy's value from g(c, z, x) = G[c][z, x])
CASES = {
    "window4": ("g(0, k, x / 4) + T(2) * g(1, k, x / 4) + T(3) * g(0, k + 1, x / 4) + T(5) * g(1, k + 1, x / 4)",
                2, 0, Z - 2, lambda G, k, q: G[0][k, q] + 2 * G[1][k, q] + 3 * G[0][k + 1, q] + 5 * G[1][k + 1, q]),
    "pair": ("g(0, k, x / 4) - g(1, k, x / 4)", 3, 0, Z - 1, lambda G, k, q: G[0][k, q] - G[1][k, q]),
    "hole": ("g(0, k, x / 4) + T(3) * g(3, k, x / 4)", 4, 0, Z - 1, lambda G, k, q: G[0][k, q] + 3 * G[3][k, q]),
    "three": ("g(0, k, x / 2) + T(2) * g(1, k, x / 2) + T(4) * g(2, k, x / 2)", 3, 0, Z - 1,
              lambda G, k, q: G[0][k, q] + 2 * G[1][k, q] + 4 * G[2][k, q]),
    "below": ("g(1, k, x / 4) * T(3) + g(0, k - 1, x / 4) + g(1, k - 1, x / 4) * T(2)", 2, 1, Z - 1,
              lambda G, k, q: 3 * G[1][k, q] + G[0][k - 1, q] + 2 * G[1][k - 1, q]),
    "select": ("select(k > 5, g(0, k, x / 4), g(1, k, x / 4)) + g(0, k + 1, x / 4) + g(1, k + 1, x / 4)", 2, 0, Z - 2,
               lambda G, k, q: np.where(k > 5, G[0][k, q], G[1][k, q]) + G[0][k + 1, q] + G[1][k + 1, q]),
}
DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "i16": np.int16}


def program(case, typ, lanes):
    expr, c, lo, hi, _ = CASES[case]
    src = SRC.replace("EXPR", expr).replace("LANES", str(lanes)).replace("LO", str(lo)).replace("HI", str(hi)) \
        .replace("C)", f"{c})").replace("T", typ)
    return hdsl.loads(src, "gg.hl")


def inputs(lanes, seed, quarter):
    rs = np.random.RandomState(seed)
    w = 3 * lanes + 5
    img = (rs.rand(7, w) * (Z + 4) - 2).astype(np.float32)     # k clamped at both ends too
    tab = rs.randint(-50, 50, (w // quarter + 2, Z))             # tab(z, x): x rows, z columns
    return img, tab


def by_numpy(case, img, tab, typ):
    expr, c, lo, hi, f = CASES[case]
    quarter = 2 if "x / 2" in expr else 4
    G = [tab.T.astype(np.int64) * (cc + 1) + cc * 7 for cc in range(c)]     # G[c][z, x]
    k = np.clip(np.trunc(img).astype(np.int64), lo, hi)
    q = np.broadcast_to(np.arange(img.shape[1]) // quarter, img.shape)
    return f(G, k, q).astype(DTYPES[typ])


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("typ, lanes", [("f32", 8), ("f32", 16), ("f32", 4), ("f32", 2), ("i32", 8),
                                        ("f64", 8), ("i64", 4), ("i16", 16)])
@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_grouped_gathers_give_numpys_and_the_evaluators_values(case, typ, lanes, target):
    quarter = 2 if "x / 2" in CASES[case][0] else 4
    img, tab = inputs(lanes, lanes * 7 + len(case), quarter)
    tab = tab.astype(DTYPES[typ])
    p = program(case, typ, lanes)
    got = p.compile(target).realize(img.shape[::-1], img=img, tab=tab)
    assert np.array_equal(got, by_numpy(case, img, tab, typ))
    assert np.array_equal(got, p.realize(img.shape[::-1], img=img, tab=tab))


def _ll(case, typ, lanes, target):
    return compiled_form(program(case, typ, lanes).ir, "llvm", target=target)


def _gathers(ll, every_lane=True, buffer=None):
    """Gathers of every lane (the masked ones are the guarded tail's, which keeps them:
    there the reads of g and the image are gathers), or all of them; of one buffer (by its
    TBAA tag) or of any."""
    names = dict(re.findall(r'^(!\d+) = !\{ !"hdsl\.(\w+)"', ll, re.M))
    tags = {tag: names.get(ty) for tag, ty in re.findall(r'^(!\d+) = !\{ (!\d+), !\d+, i64 0 \}', ll, re.M)}
    n = 0
    for line in ll.splitlines():
        if "call" in line and "masked.gather" in line and ("<i1 1," in line or not every_lane):
            tag = re.search(r"!tbaa (!\d+)", line)
            n += buffer is None or (tag is not None and tags.get(tag.group(1)) == buffer)
    return n


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_neighbouring_gathers_are_row_loads(target):
    """Four gathers of 8 f32 lanes at offsets 0..3: 8 loads of <4 x float> and no gather;
    f64: two windows of <2 x double>; a pair in a grid of 3 channels: <2 x float>."""
    ll = _ll("window4", "f32", 8, target)
    assert _gathers(ll) == 0 and ll.count("load <4 x float>") == 8
    ll = _ll("window4", "f64", 8, target)
    assert _gathers(ll) == 0 and ll.count("load <2 x double>") == 2 * 8
    ll = _ll("pair", "f32", 8, target)
    assert _gathers(ll) == 0 and ll.count("load <2 x float>") == 8


def test_what_is_not_grouped_stays_a_gather():
    """16-bit elements, a member in a select's arm, a third neighbour past a window of two."""
    ll = _ll("window4", "i16", 16, "host")
    assert "load <4 x i16>" not in ll and "load <2 x i16>" not in ll
    ll = _ll("select", "f32", 8, "host")           # (tail: the image and four reads of g)
    assert ll.count("load <2 x float>") == 8 and _gathers(ll, every_lane=False) == 1 + 4 + 2
    ll = _ll("three", "f32", 8, "host")
    assert ll.count("load <2 x float>") == 8 and _gathers(ll) == 1


def test_the_bilateral_grids_slicing_gathers_nothing():
    """examples/bilateral_grid.hl: the sixteen blury reads of a vector of pixels are four
    windows of four floats (c = 0, 1 at zj and zj + 1) per lane; only the guarded tail's
    (masked) sixteen gathers remain."""
    from pathlib import Path
    p = hdsl.load(str(Path(__file__).resolve().parents[2] / "examples" / "bilateral_grid.hl"))
    for target in ("x86-64-avx2", "host"):
        ll = compiled_form(p.ir, "llvm", target=target)
        assert _gathers(ll, buffer="blury") == 0 and _gathers(ll, every_lane=False, buffer="blury") == 16
