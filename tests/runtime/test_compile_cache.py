"""The compile cache: a second compile of the same sources loads the object without lowering;
a change to the program, a module it uses, the schedule or the target compiles afresh."""
from __future__ import annotations

import numpy as np

import hdsl

LIB = """
fn bump(f) {
    g(x, y) = f(x, y) + K
    return g
}
const K = 1
"""

PROG = """
pipeline cached
use "lib.hl"
input  img: i32[2]
output out: i32[2]
algorithm { out(x, y) = bump(img)(x, y) * 2 }
schedule a { out.vectorize(x, 4) }
schedule b { out.parallel(y) }
"""


def _compile(path, **kw):
    c = hdsl.load(path).compile("host", **kw)
    return c, c.native.timings


def test_second_compile_skips_lowering(tmp_path, monkeypatch):
    monkeypatch.setenv("HDSL_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "lib.hl").write_text(LIB)
    prog = tmp_path / "prog.hl"
    prog.write_text(PROG)
    img = np.arange(24, dtype=np.int32).reshape(4, 6)

    first, t1 = _compile(prog, schedule="a")
    assert not t1["cached"] and t1["lower"] > 0
    again, t2 = _compile(prog, schedule="a")
    assert t2["cached"] and t2["lower"] == 0.0
    assert np.array_equal(again(img=img), (img + 1) * 2)
    assert np.array_equal(first(img=img), (img + 1) * 2)

    # another schedule, another target: lowered afresh (then cached in turn)
    assert _compile(prog, schedule="b")[1]["lower"] > 0
    assert _compile(prog, schedule="b")[1]["lower"] == 0.0
    avx2 = hdsl.load(prog).compile("x86-64-avx2", schedule="a")
    assert avx2.native.timings["lower"] > 0
    assert np.array_equal(avx2(img=img), (img + 1) * 2)

    # editing the used module changes the result: nothing stale is loaded
    (tmp_path / "lib.hl").write_text(LIB.replace("const K = 1", "const K = 5"))
    edited, t3 = _compile(prog, schedule="a")
    assert t3["lower"] > 0
    assert np.array_equal(edited(img=img), (img + 5) * 2)


def test_no_cache_always_compiles(tmp_path, monkeypatch):
    monkeypatch.setenv("HDSL_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "lib.hl").write_text(LIB)
    prog = tmp_path / "prog.hl"
    prog.write_text(PROG)
    _compile(prog, schedule="a")
    c, t = _compile(prog, schedule="a", use_cache=False)
    assert not t["cached"] and t["lower"] > 0
