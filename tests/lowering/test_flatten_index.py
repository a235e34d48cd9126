"""Storage flattening gives each access one spelling of its offset (lower/flatten.py), so an
element read twice in one statement - bilateral_grid's pixel, once in the bin it scatters to
(the store's index) and once in the value it adds - is one load in the generated code, not two
(codegen shares a value only between identical expressions)."""
from __future__ import annotations

import numpy as np

import hdsl
from hdsl.ir.expr import walk
from hdsl.ir.stmt import Load
from hdsl.lower.lower import lower
from hdsl.lower.partition import _exprs, _kids

SCATTER = """
pipeline s
input  img: f32[2]
output out: f32[1]
algorithm {
    rdom r = [0..8, 0..4]
    let v = clamp(img(r.x + 1, r.y), 0.0f, 1.0f)
    out(i) = 0.0f
    out(clamp(i32(v * 10.0f + 0.5f), 0, 10)) += v
}
"""


def _all(s):
    yield s
    for k in _kids(s):
        yield from _all(k)


def test_an_element_read_by_the_index_and_the_value_of_a_store_is_one_load():
    p = hdsl.loads(SCATTER, "s.hl")
    stmt = lower(p.ir, None, shift_outputs=True).stmt
    loads = {id(n): n for x in _all(stmt) for e in _exprs(x) for n in walk(e)
             if isinstance(n, Load) and n.buffer == "img"}
    assert len(loads) == 1, [str(n) for n in loads.values()]
    # values: the evaluator's, and NumPy's histogram of the same bins (np.add.at)
    img = np.random.RandomState(3).rand(4, 10).astype(np.float32) * 1.2 - 0.1
    got, want = np.empty(11, np.float32), np.empty(11, np.float32)
    p.compile("host", use_cache=False).realize_into(got, img=img)
    p.realize_into(want, img=img)
    assert np.array_equal(got, want)
    v = np.clip(img[:, 1:9], 0.0, 1.0)
    ref = np.zeros(11, np.float32)
    np.add.at(ref, np.clip((v * np.float32(10.0) + np.float32(0.5)).astype(np.int32), 0, 10), v)
    assert np.allclose(got, ref)
