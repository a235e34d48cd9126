"""Derivatives of hdsl pipelines against central finite differences (tests/autodiff/helpers.py
states the tolerance). The rules follow Li et al. 2018 and Halide's src/Derivative.cpp."""
import numpy as np
import pytest

import hdsl
from tests.autodiff.helpers import check_gradient

RNG = np.random.default_rng(21)


def rand(*shape, lo=0.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape)


STENCIL = """
pipeline stencil
use boundary
input img: f64[2]
input target: f64[2]
param gain: f64 = 1.5
output out: f64[2]
algorithm {
    c = repeat_edge(img)
    bx(x, y) = c(x - 1, y) + 2 * c(x, y) * c(x + 1, y)
    out(x, y) = gain * sin(bx(x, y - 1) + bx(x, y + 1))
    rdom r = target
    loss() = sum((out(r.x, r.y) - target(r.x, r.y)) * (out(r.x, r.y) - target(r.x, r.y)))
}
"""


def test_stencil_with_boundary_condition_and_param():
    """A stencil's adjoint is a gather (shifted reads); the boundary condition's clamp a scatter."""
    check_gradient(STENCIL, dict(img=rand(5, 6), target=rand(5, 6), gain=1.5), ["img", "gain"])


CONV = """
pipeline conv
use boundary
input img: f64[2]
input w: f64[2]
input target: f64[2]
output out: f64[2]
algorithm {
    c = constant_exterior(img, f64(0.25))
    rdom k = [-2..3, -2..3]
    out(x, y) = sum(w(k.x + 2, k.y + 2) * c(x + k.x, y + k.y))
    rdom r = target
    loss() = sum(pow(out(r.x, r.y) - target(r.x, r.y), 2.0))
}
"""


def test_convolution_over_an_rdom():
    """img's adjoint is the sheared gather sum_k d_out(x - k.x, y - k.y) * w(k); w's a scatter."""
    check_gradient(CONV, dict(img=rand(6, 7), w=rand(5, 5, lo=-1), target=rand(6, 7)), ["img", "w"])


MATH = """
pipeline mathops
input a: f64[1]
input b: f64[1]
param p: f64 = 0.7
output out: f64[1]
algorithm {
    u(x) = exp(a(x)) * log(b(x) + 1) + sqrt(b(x)) / (a(x) + 2) - pow(b(x), p) + atan2(a(x), b(x))
    v(x) = tanh(a(x)) + cos(b(x)) * tan(a(x) * 0.5) + abs(a(x) - 0.5) + absd(a(x), b(x)) + lerp(a(x), b(x), p)
    s(x) = select(a(x) > b(x), u(x), v(x) * 2) + clamp(a(x), 0.25, 0.75) + min(a(x), b(x)) * max(a(x), p)
    t(x) = f64(f64(s(x)) + asin(b(x) * 0.9) + acos(a(x) * 0.9) + atan(b(x)) + sinh(a(x)) + cosh(b(x)))
    out(x) = t(x)
    rdom r = a
    loss() = sum(t(r.x) * t(r.x) + floor(a(r.x) * 3) + f64(i32(b(r.x) * 4)))
}
"""


def test_math_builtins_select_clamp_min_max():
    check_gradient(MATH, dict(a=rand(9), b=rand(9), p=0.7), ["a", "b", "p"])


REDUCE = """
pipeline reduce
use boundary
input img: f64[2]
output out: f64[2]
algorithm {
    m = mirror_image(img)
    rdom k = [-1..2, -1..2]
    hi(x, y) = maximum(m(x + k.x, y + k.y))
    lo(x, y) = minimum(m(x + k.x, y + k.y))
    down(x, y) = hi(2 * x, 2 * y) - lo(2 * x + 1, 2 * y)
    up(x, y) = down(x / 2, y / 2) * img(x, y)
    acc(x, y) = up(x, y)
    acc(x, y) += 0.5 * hi(x, y)
    acc(x, y) -= lo(x, y) * lo(x, y)
    out(x, y) = acc(x, y)
    rdom r = img
    loss() = sum(acc(r.x, r.y) * acc(r.x, r.y))
}
"""


def test_max_min_reductions_updates_and_resampling():
    """maximum/minimum send the adjoint to the extreme element; 2*x and x/2 reads are scatters;
    `+=` and `-=` updates pass the adjoint through."""
    check_gradient(REDUCE, dict(img=rand(6, 6)), ["img"])


HIST = """
pipeline hist
input img: f64[2]
input wt: f64[1]
output out: f64[1]
algorithm {
    h(i) = f64(0)
    h(clamp(i32(img(r.x, r.y) * 4), 0, 3)) += img(r.x, r.y) * img(r.x, r.y)
    rdom r = img
    rdom s = [0..4]
    loss() = sum(h(s.x) * wt(s.x))
    out(x) = h(x)
}
"""


def test_scatter_update_with_a_data_dependent_coordinate():
    """A `+=` into a computed coordinate: the adjoint reads the adjoint of h there."""
    check_gradient(HIST.replace("    h(clamp", "    rdom r = img\n    h(clamp").replace(
        "    rdom r = img\n    rdom s", "    rdom s"), dict(img=rand(4, 5), wt=rand(4, lo=-1)), ["img", "wt"])


COLOR = """
pipeline color
use boundary
input img: f64[3]
input mix: f64[2]
output out: f64[3]
algorithm {
    c = repeat_edge(img)
    rdom ch = [0..3]
    out(x, y, k) = sum(mix(k, ch.x) * c(x, y + 1, ch.x)) + c(x - 1, y, k)
    rdom r = [0..img.width, 0..img.height, 0..3]
    loss() = sum(sqrt(out(r.x, r.y, r.z) * out(r.x, r.y, r.z) + 1))
}
"""


def test_three_dimensional_color_mix():
    check_gradient(COLOR, dict(img=rand(4, 5, 3), mix=rand(3, 3, lo=-1)), ["img", "mix"])


def test_language_syntax_equals_python_api():
    """`grad = derivative(loss)` and `grad(img)` / `grad(gain)` as outputs give the Python API's values."""
    src = STENCIL.replace("output out: f64[2]", "output dimg: f64[2]\noutput dgain: f64[1]").replace(
        "}\n", "    grad = derivative(loss)\n    dimg = grad(img)\n    dgain(x) = grad(gain)\n}\n")
    p = hdsl.loads(src)
    img, target = rand(5, 6), rand(5, 6)
    dimg, dgain = p.realize([[6, 5], [1]], img=img, target=target, gain=1.5)
    api = hdsl.loads(STENCIL).gradient("loss", ["img", "gain"])(img=img, target=target, gain=1.5)
    assert np.array_equal(dimg, api["img"])
    assert dgain[0] == api["gain"]


def test_unused_input_has_zero_gradient():
    src = STENCIL.replace("input target: f64[2]", "input target: f64[2]\ninput unused: f64[2]")
    got = hdsl.loads(src).gradient("loss", ["unused"])(img=rand(3, 3), target=rand(3, 3), unused=rand(3, 3))
    assert np.array_equal(got["unused"], np.zeros((3, 3)))


@pytest.mark.parametrize("name,kwargs,wrt", [
    ("stencil", dict(img=rand(5, 6), target=rand(5, 6), gain=1.5), ["img", "gain"]),
    ("conv", dict(img=rand(6, 7), w=rand(5, 5, lo=-1), target=rand(6, 7)), ["img", "w"]),
    ("reduce", dict(img=rand(6, 6)), ["img"]),
])
def test_native_gradients_equal_the_evaluator(name, kwargs, wrt):
    """Gradient Funcs get a default schedule (compute_root, parallel, vectorized); native code
    gives exactly the evaluator's values."""
    src = {"stencil": STENCIL, "conv": CONV, "reduce": REDUCE}[name]
    g = hdsl.loads(src).gradient("loss", wrt)
    ref = g(**kwargs)
    got = g.compile("host")(**kwargs)
    for w in ["loss"] + wrt:
        assert np.array_equal(np.asarray(got[w]), np.asarray(ref[w])), w


IIR = """
pipeline iir
input img: f64[2]
input wt: f64[2]
param a1: f64 = 0.5
output out: f64[2]
algorithm {
    rf(x, y) = img(x, y) * img(x, y)
    rf.iir(+x, 0..img.width, 1 - a1, [a1])
    rf.iir(-x, 1..img.width - 1, f64(0.3), [f64(0.4), f64(0.3)])
    rf.iir(+y, 0..img.height, f64(0.6), [f64(0.4)])
    rf(x, y) += img(x, y)
    out(x, y) = rf(x, y)
    rdom r = wt
    loss() = sum(rf(r.x, r.y) * wt(r.x, r.y))
}
"""


def test_recursive_filters_reverse():
    """The adjoint of a causal filter is the anticausal one with the same feedback (and b0 applied
    inside its range); three filters along x, x (on a sub-range) and y, then a `+=`."""
    check_gradient(IIR, dict(img=rand(6, 7), wt=rand(6, 7, lo=-1), a1=0.5), ["img"])


def test_recursive_filter_native_equals_evaluator():
    kwargs = dict(img=rand(9, 13), wt=rand(9, 13, lo=-1), a1=0.5)
    g = hdsl.loads(IIR).gradient("loss", ["img"])
    assert np.array_equal(g.compile("host")(**kwargs)["img"], g(**kwargs)["img"])


def test_recursive_filter_coefficient_gradient_is_refused():
    with pytest.raises(hdsl.HdslError, match="coefficients of this filter of 'rf'"):
        hdsl.loads(IIR).gradient("loss", ["a1"])


PREDICATED = """
pipeline predicated
use boundary
input img: f64[1]
input w: f64[1]
output out: f64[1]
algorithm {
    c = mirror_interior(img)
    var x
    rdom k = [0..5] where (k.x + x) % 3 != 0
    out(x) = sum(w(k.x) * c(x + k.x - 2))
    rdom r = img
    loss() = sum(out(r.x) * out(r.x) * img(r.x))
}
"""


def test_predicated_rdom_depending_on_a_pure_var():
    """The `where` condition travels with the gather (it names the reading Func's pure var x,
    which the gather replaces by x' - (k.x - 2))."""
    check_gradient(PREDICATED, dict(img=rand(11), w=rand(5, lo=-1)), ["img", "w"])


def test_python_api_errors_name_what_exists():
    p = hdsl.loads(STENCIL)
    with pytest.raises(hdsl.HdslError, match="no Func named 'los'") as e:
        p.gradient("los", ["img"])
    assert "loss" in str(e.value)
    with pytest.raises(hdsl.HdslError, match="no input, param or Func named 'imgg'") as e:
        p.gradient("loss", ["imgg"])
    assert "img" in str(e.value)
    with pytest.raises(hdsl.HdslError, match="must be a single float value with no coordinates"):
        p.gradient("out", ["img"])


def test_gradient_by_an_intermediate_func_is_the_chain_rule_factor():
    """d loss / d bx, pushed through bx's own definition by hand, equals d loss / d img:
    bx(x, y) = c(x - 1, y) + 2 c(x, y) c(x + 1, y) with c = repeat_edge(img), so away from the
    border (in x, and in y, where out reads bx at rows -1 and H, which repeat_edge folds onto
    img's first and last rows) d img(x) = d bx(x + 1) + 2 d bx(x) c(x + 1) + 2 d bx(x - 1) c(x - 1)."""
    img, target = rand(5, 7), rand(5, 7)
    g = hdsl.loads(STENCIL).gradient("loss", ["bx", "img"])(img=img, target=target, gain=1.5)
    dbx, dimg = g["bx"], g["img"]          # (H, W) arrays: [y, x]
    inner = dbx[:, 2:] + 2 * dbx[:, 1:-1] * img[:, 2:] + 2 * dbx[:, :-2] * img[:, :-2]
    np.testing.assert_allclose(dimg[1:-1, 1:-1], inner[1:-1], rtol=1e-12, atol=1e-12)
