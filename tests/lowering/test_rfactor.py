"""rfactor: the factored reduction gives the evaluator's results (exactly for integers and max)."""
import numpy as np
import pytest

import hdsl

SRC = """
pipeline rf
input img: i32[2]
input fimg: f32[2]
output total: i32[1]
output mx: f32[1]
output fsum: f32[1]
algorithm {
    rdom r = img
    total(c) = 0
    total(c) += img(r.x, r.y) * (c + 1)
    mx(c) = -1000.0f
    mx(c) = max(mx(c), f32(img(r.x, r.y)) + f32(c))
    rdom s = fimg
    fsum(c) = 0.0f
    fsum(c) += fimg(s.x, s.y) * f32(c + 1)
}
schedule {
    total.update(0).rfactor(r.y, v)
    mx.update(0).rfactor(r.x, u)
    fsum.update(0).rfactor(s.y, w)
}
schedule predicated {
    total.update(0).rfactor(r.x, v)
}
"""


@pytest.fixture(scope="module")
def data():
    rs = np.random.RandomState(0)
    return dict(img=rs.randint(-1000, 1000, (23, 31)).astype(np.int32), fimg=rs.rand(17, 9).astype(np.float32))


@pytest.fixture(scope="module")
def pipe():
    return hdsl.loads(SRC, "rf.hl")


def test_rfactor_matches_the_evaluator(pipe, data):
    ref = pipe.realize([[4], [4], [4]], **data)
    got = pipe.compile("host").realize([[4], [4], [4]], **data)
    assert np.array_equal(got[0], ref[0])          # integer sums: exact
    assert np.array_equal(got[1], ref[1])          # max: exact
    assert np.allclose(got[2], ref[2], rtol=1e-5)  # float sums: reassociated
    assert np.array_equal(got[0], data["img"].sum() * np.arange(1, 5))


def test_rfactor_over_the_other_dimension(pipe, data):
    ref = pipe.realize([[4], [4], [4]], **data)
    got = pipe.compile("host", schedule="predicated").realize([[4], [4], [4]], **data)
    assert np.array_equal(got[0], ref[0])


def test_rfactor_of_a_non_associative_update_is_refused():
    src = """
pipeline bad
input img: i32[1]
output f: i32[1]
algorithm {
    rdom r = img
    f(x) = 1
    f(x) = f(x) * 2 - img(r.x)
}
schedule { f.update(0).rfactor(r.x, u) }
"""
    p = hdsl.loads(src, "bad.hl")
    with pytest.raises(hdsl.HdslError, match="rfactor needs an associative update"):
        p.compile("host")
