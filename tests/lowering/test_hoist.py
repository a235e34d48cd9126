"""Loop-invariant loads leave short constant loops (lower/hoist.py): what moves, what must
not, and that the values stay the evaluator's."""
from __future__ import annotations

import numpy as np

import hdsl
from hdsl.ir.expr import walk
from hdsl.ir.stmt import For, IfThenElse, LetStmt, Load, Store
from hdsl.lower.lower import lower
from hdsl.lower.partition import _exprs, _kids

ALPHA = """
pipeline a
use boundary
input  img: f32[3]
output out: f32[3]
algorithm {
    c = repeat_edge(img)
    out(x, y, ch) = c(x, y, ch) / (c(x, y, 3) + 1.0f)
}
schedule s { out.reorder(ch, x, y).bound(ch, 0, 3).vectorize(x, 8) }
"""


def _all(s):
    yield s
    for k in _kids(s):
        yield from _all(k)


def _loads_in(s, buffer):
    return sum(1 for x in _all(s) for e in _exprs(x) for n in walk(e) if isinstance(n, Load) and n.buffer == buffer)


def test_a_channel_loop_reads_the_alpha_channel_once_per_pixel():
    """The divisor c(x, y, 3) does not depend on ch: computed before the channel loop (LLVM
    cannot move it, since the loop stores into `out`, which it cannot tell from `img`)."""
    p = hdsl.loads(ALPHA, "a.hl")
    stmt = lower(p.ir, "s", shift_outputs=True).stmt
    loops = [s for s in _all(stmt) if isinstance(s, For) and s.var == "out.s0.ch"]
    assert loops
    for loop in loops:
        assert _loads_in(loop, "img") == 1                      # c(x, y, ch) only
    hoisted = [s for s in _all(stmt) if isinstance(s, LetStmt) and ".inv" in s.name]
    assert len(hoisted) >= len(loops)
    c = p.compile("host", schedule="s", use_cache=False)
    for w in (1, 7, 8, 9, 30):
        img = np.random.RandomState(w).rand(4, 3, w).astype(np.float32).transpose(1, 2, 0)
        got, want = (np.empty((3, 3, w), np.float32).transpose(1, 2, 0) for _ in range(2))
        c.realize_into(got, img=img)
        p.realize_into(want, img=img)
        assert np.array_equal(got, want), w
        assert np.allclose(got, img[..., :3] / (img[..., 3:] + 1.0))


def test_loads_of_a_buffer_the_loop_writes_or_under_an_if_stay():
    """A load of a buffer stored to inside the loop may see the loop's own writes; one under
    an `if` (a split tail's guard) may be out of bounds when the guard is false. Neither
    moves, while a plain invariant load in the same loop does."""
    text = """
pipeline b
input  img: u8[2]
output out: u16[2]
algorithm {
    var x, y
    rdom r = [0..3]
    h(x, y) = u16(0)
    h(x, y) = h(x, y) + u16(img(x, y)) * u16(r.x + 1)
    out(x, y) = h(x, y) + u16(img(0, y))
}
schedule s {
    h.compute_root().update(0).reorder(r.x, x, y)
    out.split(x, xo, xi, 5)
}
"""
    p = hdsl.loads(text, "b.hl")
    stmt = lower(p.ir, "s").stmt          # (the guarded form: xi's tail is an if)
    hoisted = [s for s in _all(stmt) if isinstance(s, LetStmt) and ".inv" in s.name]
    # in h's update, img(x, y) leaves the r.x loop, h(x, y) does not
    assert any(s.name.startswith("h.s1.r.x") and any(isinstance(n, Load) and n.buffer == "img" for n in walk(s.value))
               for s in hoisted)
    assert not any(isinstance(n, Load) and n.buffer == "h" for s in hoisted for n in walk(s.value))
    # out's img(0, y) is invariant in xi but guarded by the tail's if: it stays under it
    # (the steady state, where no guard is left, does get it hoisted)
    guards = [s for s in _all(stmt) if isinstance(s, IfThenElse)
              and any(isinstance(x, Store) and x.buffer == "out" for x in _all(s))]
    assert guards and all(_loads_in(g, "img") == 1 for g in guards)
    assert any(s.name.startswith("out.s0.xi") for s in hoisted)
    c = p.compile("host", schedule="s", use_cache=False)
    for w in (1, 4, 5, 6, 13):
        img = np.random.RandomState(w).randint(0, 255, (4, w)).astype(np.uint8)
        assert np.array_equal(c(img=img), p(img=img)), w
