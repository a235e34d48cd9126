"""Library modules are scoped, and a fn can return a point-wise combination of Funcs."""
import numpy as np

import hdsl


def test_library_fns_do_not_see_the_programs_names():
    # color.rgb_to_ycbcr has locals of its own; a program param of the same name
    # must neither clash with them nor leak into them
    src = """
pipeline scoped
use color
input img: f32[3]
param y: f32 = 100.0
param g: f32 = 2.0
output out: f32[2]
algorithm {
    out(x, yy) = rgb_to_gray(img)(x, yy) * g
}
"""
    p = hdsl.loads(src, "scoped.hl")
    img = np.random.RandomState(0).rand(3, 4, 3).astype(np.float32)
    gray = (np.float32(0.299) * img[..., 0] + np.float32(0.587) * img[..., 1]) + np.float32(0.114) * img[..., 2]
    assert np.allclose(p(img=img), gray * np.float32(2.0), rtol=1e-6)


def test_fn_returning_a_pointwise_expression_of_funcs():
    src = """
pipeline sq
input img: f32[2]
output out: f32[2]
fn sq(v) { return v * v + 1.0f }
algorithm {
    out = sq(img)
}
"""
    p = hdsl.loads(src, "sq.hl")
    img = np.random.RandomState(1).rand(5, 6).astype(np.float32)
    assert np.array_equal(p(img=img), img * img + np.float32(1.0))
    assert np.array_equal(p.compile("host")(img=img), img * img + np.float32(1.0))
