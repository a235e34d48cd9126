"""An adversarial audit of round_up as Halide's TailStrategy::RoundUp (tests/compiler/
test_roundup_regions.py; lower/symbolic.py Required, lower/loops.py required_region): the
producers of a rounded-up stage are computed only over what the stage's region needs, their
storage covers what its rounded loops touch, and the extra lanes are never used.

Values are checked against NumPy (the algorithm written out by hand, u16 arithmetic wrapping)
and the reference evaluator, at sizes that are no multiple of the splits, with every input
exactly as large as the evaluator reads and placed at the end of an mmap'd region whose next
page is PROT_NONE: compiled code reading one element past an input faults instead of reading
the neighbouring heap (a look-up table of 256 entries indexed by a u8 Func whose extra lanes
hold whatever its storage held).

The audit also found that a Func stored outside the loop it is computed in (store_root,
store_at) passed check_uses_in_scope when another consumer read it outside that loop: the
check took the storage (Realize) for the computation, and the compiled code read values not
computed yet (every point wrong; the same before the round_up change). Halide refuses such a
schedule; so does hdsl now, with the error it gives without store_root.
"""
from __future__ import annotations

import ctypes
import mmap

import numpy as np
import pytest

import hdsl

_KEEP = []


def _guarded(arr: np.ndarray) -> np.ndarray:
    """A copy of arr whose last byte is the last before a page that cannot be read."""
    arr = np.ascontiguousarray(arr)
    page = mmap.PAGESIZE
    pages = (arr.nbytes + page - 1) // page + 1
    m = mmap.mmap(-1, pages * page, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    buf = (ctypes.c_char * (pages * page)).from_buffer(m)
    libc = ctypes.CDLL(None)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(ctypes.addressof(buf) + (pages - 1) * page, page, 0) == 0
    v = np.frombuffer(m, dtype=arr.dtype, count=arr.size,
                      offset=(pages - 1) * page - arr.nbytes).reshape(arr.shape)
    v[...] = arr
    _KEEP.append((m, buf))          # (kept mapped for the session: the views point into it)
    return v


ALG = """
pipeline audit
input inp: u16[2]
input lut: u16[1]
output out: u16[2]
algorithm {
    e(x, y) = inp(x, y) * 3 + inp(x + 1, y)
    d(x, y) = e(x, y - 1) + e(x, y + 1) * 2 + e(x + 1, y)
    k(x, y) = u8(d(x, y) % 253)
    c(x, y) = lut(i32(k(x, y))) + d(x + 1, y) + u16(k(x - 1, y))
    b(x, y) = c(x, y) + c(x, y + 1) / 2 + e(x, y)
    out(x, y) = b(x, y) + b(x + 1, y) * 2
}
schedule {
SCHED
}
"""


def _by_hand(inp, lut, w, h, x0, y0):
    i = inp.astype(np.int64)

    def e(x, y):
        return (i[y, x] * 3 + i[y, x + 1]) % 65536

    def d(x, y):
        return (e(x, y - 1) + e(x, y + 1) * 2 + e(x + 1, y)) % 65536

    def k(x, y):
        return d(x, y) % 253

    def c(x, y):
        return (lut[k(x, y)].astype(np.int64) + d(x + 1, y) + k(x - 1, y)) % 65536

    def b(x, y):
        return (c(x, y) + c(x, y + 1) // 2 + e(x, y)) % 65536
    xs = np.arange(x0, x0 + w)[None, :]
    ys = np.arange(y0, y0 + h)[:, None]
    return ((b(xs, ys) + b(xs + 1, ys) * 2) % 65536).astype(np.uint16)


SCHEDULES = {
    # producers per tile of a rounded-up stage, that stage per tile of another rounded-up one
    "nested_tiles": """
out.tile(x, y, xo, yo, xi, yi, 16, 8)
b.compute_at(out, xo).tile(x, y, xo, yo, xi, yi, 8, 3, round_up)
c.compute_at(b, xo).split(x, xo, xi, 4, round_up)
k.compute_at(c, xo).vectorize(x, 4, round_up)
d.compute_at(out, xo)
e.compute_root()""",
    # a split of a rounded-up split's outer loop, fused and parallel, producers at the root
    "split_of_outer": """
c.compute_root().split(x, xo, xi, 5, round_up).split(xo, xp, xq, 3, round_up).fuse(xp, y, t).parallel(t)
k.compute_at(c, xq)
d.compute_root()
e.compute_root()
b.compute_root().split(y, yo, yi, 4, round_up)""",
    # rounded-up splits under shift_inwards and guard_with_if, sliding producers per row
    "mixed_tails": """
out.split(y, yo, yi, 4)
b.compute_at(out, yi).store_at(out, yo).split(x, xo, xi, 16, shift_inwards).split(xi, xa, xb, 3, round_up)
c.compute_at(out, yi).store_at(out, yo).split(x, xo, xi, 7, guard_with_if).split(xi, xa, xb, 2, round_up)
k.compute_at(c, xa)
d.compute_at(out, yi).store_at(out, yo).vectorize(x, 8, round_up)
e.compute_root()""",
    # every stage rounded up at the root: each one's own reads of its producers are garbage
    # past their regions, k's looked up in lut
    "all_root": """
b.compute_root().tile(x, y, xo, yo, xi, yi, 7, 3, round_up).vectorize(xi)
c.compute_root().vectorize(x, 16, round_up)
k.compute_root().tile(x, y, xo, yo, xi, yi, 9, 2, round_up)
d.compute_root().split(y, yo, yi, 5, round_up)
e.compute_root()""",
}


@pytest.mark.parametrize("sched", sorted(SCHEDULES))
@pytest.mark.parametrize("w, h", [(1, 1), (11, 5), (29, 13)])
def test_rounded_up_stages_against_numpy_with_guarded_inputs(sched, w, h):
    """out at (2, 2) .. (w + 1, h + 1) reads inp at x 1 .. w + 5, y 1 .. h + 3 (allocated from
    0, exactly that far) and lut at 0 .. 252 (256 entries: k is a u8, its extra lanes any)."""
    p = hdsl.loads(ALG.replace("SCHED", SCHEDULES[sched]), "audit.hl")
    rng = np.random.default_rng(w * 31 + h)
    inp = rng.integers(0, 65536, (h + 4, w + 6)).astype(np.uint16)
    lut = rng.integers(0, 65536, 256).astype(np.uint16)
    want = _by_hand(inp, lut, w, h, 2, 2)
    assert np.array_equal(p.realize((w, h), min=(2, 2), inp=inp, lut=lut), want)
    got = p.compile("host").realize((w, h), min=(2, 2), inp=_guarded(inp), lut=_guarded(lut))
    assert np.array_equal(got, want)


MISPLACED = {
    # e is read by d, inlined into c (computed at the root, before b), and computed per x of b
    "store_root": ("b.compute_root()\nc.compute_root()\ne.compute_at(b, x).store_root()", "e", "c"),
    # d is read by k (computed per row of out, before c) and computed per x of c, stored per
    # strip of out
    "store_at": ("out.split(y, yo, yi, 4)\nc.compute_at(out, yi)\nk.compute_at(out, yi)\n"
                 "d.compute_at(c, x).store_at(out, yo)", "d", "k"),
    # d is computed per row of k (stored at the root) and read by c, inlined into out, after
    # k's loop: d's storage then holds the rows k needed, not the columns past them c reads
    "after_the_loop": ("k.compute_root()\nd.compute_at(k, y).store_root()", "d", "out"),
}


@pytest.mark.parametrize("case", sorted(MISPLACED))
def test_a_func_stored_outside_its_compute_loop_is_still_computed_before_every_use(case):
    """Storage hoisted out of the compute loop does not make the values exist outside it: the
    compiled code read them before they were computed (every point of out wrong). Refused with
    the error the same schedule gets without store_root / store_at; the evaluator, which knows
    no schedule, still runs."""
    text, func, user = MISPLACED[case]
    line = 15 + text.count("\n")              # (the schedule's last line, the misplaced Func's)
    p = hdsl.loads(ALG.replace("SCHED", text), "audit.hl")
    rng = np.random.default_rng(7)
    inp = rng.integers(0, 65536, (9, 12)).astype(np.uint16)
    lut = rng.integers(0, 65536, 256).astype(np.uint16)
    assert np.array_equal(p.realize((6, 5), min=(2, 2), inp=inp, lut=lut), _by_hand(inp, lut, 6, 5, 2, 2))
    with pytest.raises(hdsl.HdslError) as e:
        p.compile("host")
    lines = str(e.value).splitlines()
    assert lines[0] == f"audit.hl:{line}:1: error: '{func}' is used by '{user}' outside the loops it is computed in"
    assert lines[1].strip().startswith(f"{func}.compute_at(")
