"""examples/bilateral_slice.hl, the bilateral slicing layer (HDRNet; Li et al. 2018 Sec. 6):
hdsl's forward equals benchmarks/bilateral_slice.py's NumPy one, and its *derived* gradient
(by grid, guide and img) equals the backward pass written there by hand from the formulas;
native and evaluator agree exactly."""
import numpy as np

from benchmarks.bilateral_slice import hdsl_layer, inputs, numpy_backward, numpy_forward


def test_forward_and_gradient_equal_the_numpy_reference():
    grid, guide, img, dout = inputs((24, 16), (4, 3, 5), seed=3)
    forward, gradient = hdsl_layer("host")
    out = forward(grid, guide, img)
    ref, _ = numpy_forward(grid, guide, img)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    got = gradient(grid, guide, img, dout)
    want = numpy_backward(grid, guide, img, dout)
    for name, g, w in zip(("grid", "guide", "img"), got, want):
        assert g.shape == w.shape, name
        # f32 sums in different orders: relative to the gradient's size
        assert np.abs(g - w).max() <= 1e-4 * (np.abs(w).max() + 1), name


def test_native_gradient_equals_the_evaluator():
    grid, guide, img, dout = inputs((12, 10), (3, 2, 4), seed=4)
    _, native = hdsl_layer("host")
    _, interp = hdsl_layer("interp")
    for g, w in zip(native(grid, guide, img, dout), interp(grid, guide, img, dout)):
        assert np.array_equal(g, w)
