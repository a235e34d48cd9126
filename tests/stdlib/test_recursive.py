"""hdsl/stdlib/recursive.hl against SciPy and against float64 NumPy implementations
of the same recursions, written here from the papers' equations.

Every pipeline runs on the reference evaluator and compiled for the host
(`run_both`: bit for bit, except the Deriche outputs, whose coefficients use
exp, cos and sin, which the spec lets differ by a few ulp).

Tolerances. A recursion y[n] = b x[n] + sum_k a_k y[n - k] computed in f32
makes at most (2 + K) roundings per step, each of relative size eps = 2^-24
of a term bounded by max|x| (the filters here have unit or bounded gain);
an error made at step m reaches step n scaled by g[n - m], the impulse
response of 1 / (1 - sum a_k z^-k). So one pass is within
    (2 + K) eps max|x| sum_n |g[n]|
of the exact recursion with the same coefficients, and passes add up
(`bound`). The coefficients themselves are rounded to f32 (relative eps
each), which moves the result by the same order again: the tests allow
twice the accumulation bound. The recursive Gaussians are approximations of
the Gaussian by design; against `scipy.ndimage.gaussian_filter` they are
held to the approximation error measured here (stated per test), and the
tight comparison is with the recursion itself in float64.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as nd
import scipy.signal as ss

from .helpers import F32, run_both

EPS = 2.0 ** -24


def impulse_sum(feedback, n=200000):
    """sum_n |g[n]| for g the impulse response of 1 / (1 - a1 z^-1 - ... - aK z^-K)."""
    imp = np.zeros(n)
    imp[0] = 1.0
    g = ss.lfilter([1.0], np.concatenate([[1.0], -np.asarray(feedback, np.float64)]), imp)
    assert abs(g[-1]) < 1e-12 * np.abs(g).max(), "filter not stable or n too short"
    return np.abs(g).sum()


def bound(feedback, passes, scale):
    """The f32 error bound of the module docstring for `passes` passes of the recursion with the
    given feedback coefficients, inputs of magnitude `scale`; doubled for coefficient rounding."""
    return 2 * passes * (2 + len(feedback)) * EPS * scale * impulse_sum(feedback)


def filt(b, feedback, x, axis=-1, zi=None):
    """float64 y[n] = sum_k b_k x[n - k] + sum_k a_k y[n - k] along axis (scipy's lfilter, signs ours)."""
    return ss.lfilter(np.asarray(b, np.float64), np.concatenate([[1.0], -np.asarray(feedback, np.float64)]),
                      x, axis=axis, zi=zi)


def symmetric(b, feedback, x, axis, pad, mode):
    """A causal then an anticausal pass of the same recursion along axis over x extended by `pad`
    samples each side (np.pad mode), zero state at the ends of the extension; the extension
    stands in for the infinite one when |pole|^pad is negligible."""
    widths = [(0, 0)] * x.ndim
    widths[axis] = (pad, pad)
    xp = np.pad(x, widths, mode=mode)
    u = filt(b, feedback, xp, axis)
    v = np.flip(filt(b, feedback, np.flip(u, axis), axis), axis)
    return np.take(v, np.arange(pad, pad + x.shape[axis]), axis=axis)


SIZES = [(7, 9), (1, 1), (2, 3), (3, 2), (12, 31)]

# ----------------------------------------------------------------------------
# exponential smoothing

EXP = """pipeline exp_test
use recursive
input  img: f32[2]
param  a: f32 = 0.5
output cx: f32[2]
output ax: f32[2]
output sx: f32[2]
output cy: f32[2]
output ay: f32[2]
output sy: f32[2]
output s2: f32[2]
algorithm {
    cx = exp_causal_x(img, a, img.width)
    ax = exp_anticausal_x(img, a, img.width)
    sx = exp_smooth_x(img, a, img.width)
    cy = exp_causal_y(img, a, img.height)
    ay = exp_anticausal_y(img, a, img.height)
    sy = exp_smooth_y(img, a, img.height)
    s2 = exp_smooth(img, a, img.width, img.height)
}
schedule {
    sx.ema_c.compute_root()
    sy.ema_cy.compute_root()
    s2.ema_sx.compute_root()
    s2.ema_sx.ema_c.compute_root()
    s2.ema_cy.compute_root()
}
"""


@pytest.mark.parametrize("a,shape", [(0.0, (7, 9)), (0.5, (1, 1)), (0.5, (2, 3)), (0.9, (12, 31))])
def test_exponential_smoothing_against_scipy(rng, shape, a):
    """Causal: scipy.signal.lfilter started from the steady state of x[0]
    (lfilter_zi(b, a) * x[0], the repeat_edge history); anticausal: the same on the reversed
    signal; symmetric and 2-D: both passes over a long edge-padded extension (which checks the
    closed-form start of the anticausal pass)."""
    img = rng.uniform(-1, 1, shape).astype(F32)
    out = run_both(EXP, "exp_test.hl", img=img, a=a)
    x = img.astype(np.float64)
    a64 = float(F32(a))
    b, fb = [1 - a64], [a64]
    zi = ss.lfilter_zi(b, [1, -a64])
    causal = lambda v, axis: filt(b, fb, v, axis, zi=np.expand_dims(zi[0] * np.take(v, 0, axis), axis))[0]
    anti = lambda v, axis: np.flip(causal(np.flip(v, axis), axis), axis)
    pad = 400
    tol = bound(fb, 1, 1.0)
    np.testing.assert_allclose(out["cx"], causal(x, 1), rtol=0, atol=tol)
    np.testing.assert_allclose(out["ax"], anti(x, 1), rtol=0, atol=tol)
    np.testing.assert_allclose(out["cy"], causal(x, 0), rtol=0, atol=tol)
    np.testing.assert_allclose(out["ay"], anti(x, 0), rtol=0, atol=tol)
    np.testing.assert_allclose(out["sx"], symmetric(b, fb, x, 1, pad, "edge"), rtol=0, atol=2 * tol)
    np.testing.assert_allclose(out["sy"], symmetric(b, fb, x, 0, pad, "edge"), rtol=0, atol=2 * tol)
    two = symmetric(b, fb, symmetric(b, fb, x, 1, pad, "edge"), 0, pad, "edge")
    np.testing.assert_allclose(out["s2"], two, rtol=0, atol=4 * tol)


def test_exponential_smoothing_impulse_response(rng):
    """Away from the edges the symmetric filter's impulse response is ((1 - a)/(1 + a)) a^|n|."""
    img = np.zeros((1, 61), F32)
    img[0, 30] = 1
    a = 0.75
    out = run_both(EXP, "exp_test.hl", img=img, a=a)
    n = np.arange(61) - 30
    np.testing.assert_allclose(out["sx"][0], (1 - a) / (1 + a) * a ** np.abs(n), rtol=0, atol=1e-6)

# ----------------------------------------------------------------------------
# Young - van Vliet


YVV = """pipeline yvv_test
use recursive
input  img: f32[2]
param  sigma: f32 = 1.0
param  sigma2: f32 = 2.0
output gx: f32[2]
output gy: f32[2]
output g2: f32[2]
output dg: f32[2]
algorithm {
    gx = yvv_gaussian_x(img, sigma, img.width)
    gy = yvv_gaussian_y(img, sigma, img.height)
    g2 = yvv_gaussian(img, sigma, img.width, img.height)
    dg = dog(img, sigma, sigma2, img.width, img.height)
}
schedule {
    gx.yvv_u.compute_root()
    gy.yvv_uy.compute_root()
    g2.yvv_gx.compute_root()
    g2.yvv_gx.yvv_u.compute_root()
    g2.yvv_uy.compute_root()
    dg.dog_g1.compute_root()
    dg.dog_g1.yvv_gx.compute_root()
    dg.dog_g1.yvv_gx.yvv_u.compute_root()
    dg.dog_g1.yvv_uy.compute_root()
    dg.dog_g2.compute_root()
    dg.dog_g2.yvv_gx.compute_root()
    dg.dog_g2.yvv_gx.yvv_u.compute_root()
    dg.dog_g2.yvv_uy.compute_root()
}
"""


def yvv_coefs(sigma):
    """Young and van Vliet 1995, eqs. (11b), (8c), (10), in float64 from the f32 sigma."""
    s = float(F32(sigma))
    q = 0.98711 * s - 0.96330 if s >= 2.5 else 3.97156 - 4.14554 * np.sqrt(1 - 0.26891 * s)
    b0 = 1.57825 + 2.44413 * q + 1.4281 * q ** 2 + 0.422205 * q ** 3
    fb = np.array([2.44413 * q + 2.85619 * q ** 2 + 1.26661 * q ** 3, -(1.4281 * q ** 2 + 1.26661 * q ** 3),
                   0.422205 * q ** 3]) / b0
    return 1 - fb.sum(), fb


def yvv_ref(x, sigma, axes):
    """The YvV recursion in float64 over an edge extension long enough that the slowest pole's
    response is below 1e-13: the infinite repeat_edge extension that Triggs and Sdika's start
    values stand for, computed without them."""
    B, fb = yvv_coefs(sigma)
    pole = np.abs(np.roots(np.concatenate([[1.0], -fb]))).max()
    pad = int(np.ceil(np.log(1e-13) / np.log(pole)))
    for axis in axes:
        x = symmetric([B], fb, x, axis, pad, "edge")
    return x


@pytest.mark.parametrize("sigma,shape", [(0.5, (7, 9)), (0.8, (1, 1)), (2.0, (2, 3)), (3.0, (3, 2)),
                                         (7.5, (13, 40)), (2.0, (9, 17)), (64.0, (2, 300))])
def test_young_van_vliet_against_the_recursion_in_float64(rng, shape, sigma):
    img = rng.uniform(0, 1, shape).astype(F32)
    out = run_both(YVV, "yvv_test.hl", img=img, sigma=sigma, sigma2=1.5 * sigma)
    x = img.astype(np.float64)
    tol = bound(yvv_coefs(sigma)[1], 2, 1.0)
    np.testing.assert_allclose(out["gx"], yvv_ref(x, sigma, [1]), rtol=0, atol=tol)
    np.testing.assert_allclose(out["gy"], yvv_ref(x, sigma, [0]), rtol=0, atol=tol)
    np.testing.assert_allclose(out["g2"], yvv_ref(x, sigma, [1, 0]), rtol=0, atol=2 * tol)
    tol2 = bound(yvv_coefs(1.5 * sigma)[1], 2, 1.0)
    dog = yvv_ref(x, sigma, [1, 0]) - yvv_ref(x, 1.5 * sigma, [1, 0])
    np.testing.assert_allclose(out["dg"], dog, rtol=0, atol=2 * tol + 2 * tol2)


# The largest difference from scipy.ndimage.gaussian_filter1d / gaussian_filter (mode 'nearest',
# the exact sampled Gaussian) on uniform [0, 1) noise, 1-D and 2-D, as measured (0.048, 0.064 at
# sigma 0.5; 0.052, 0.052 at 1; 0.021, 0.015 at 2; 0.011, 0.0053 at 4; 0.0085, 0.0023 at 8), with
# a fifth added: the method's approximation error on white noise, the worst case (all
# frequencies), largest at small sigma where a third-order recursion fits the kernel least well.
YVV_VS_EXACT = {0.5: (0.06, 0.075), 1.0: (0.065, 0.065), 2.0: (0.026, 0.018), 4.0: (0.013, 0.0065),
                8.0: (0.01, 0.003)}


@pytest.mark.parametrize("sigma", sorted(YVV_VS_EXACT))
def test_young_van_vliet_against_the_exact_gaussian(rng, sigma):
    img = rng.uniform(0, 1, (40, 48)).astype(F32)
    out = run_both(YVV, "yvv_test.hl", img=img, sigma=sigma, sigma2=2 * sigma)
    ref = nd.gaussian_filter(img.astype(np.float64), sigma, mode="nearest", truncate=8)
    ref_x = nd.gaussian_filter1d(img.astype(np.float64), sigma, axis=1, mode="nearest", truncate=8)
    tol_1d, tol_2d = YVV_VS_EXACT[sigma]
    assert np.abs(out["gx"] - ref_x).max() <= tol_1d
    assert np.abs(out["g2"] - ref).max() <= tol_2d


def test_triggs_sdika_matrix_against_a_long_extension():
    """yvv_m's closed form (entries as documented) against the anticausal start values computed
    by running the recursion far past the end, for the coefficients of several sigmas."""
    def closed(a1, a2, a3):
        d = (1 + a1 - a2 + a3) * (1 + a2 + a1 * a3 - a3 * a3)
        return np.array([
            [a1 + a2 * a3, (1 - a2) * (a2 + a1 * a3), -a3 * (a1 * a3 + a2 + a3 * a3 - 1)],
            [a1 * a1 + a1 * a3 - a2 * a2 + a2, a1 * a2 - a1 * a3 ** 2 + a2 ** 2 * a3 - a2 * a3 - a3 ** 3 + a3,
             a3 * (a1 + a2 * a3)],
            [a1 ** 3 + a1 ** 2 * a3 - a1 * a2 ** 2 + 2 * a1 * a2 - a1 * a3 ** 2 + a2 ** 2 * a3 - a2 * a3 - a3 ** 3 + a3,
             a1 ** 2 * a2 + a1 * a2 * a3 + a1 * a3 - a2 ** 3 + a2 ** 2 + a2 * a3 ** 2,
             a3 * (a1 * a1 + a1 * a3 - a2 * a2 + a2)]]) / d
    for sigma in [0.5, 2.0, 6.0]:
        B, fb = yvv_coefs(sigma)
        L = 4000
        numeric = np.zeros((3, 3))
        for j in range(3):
            u = np.zeros(L + 3)
            u[2 - j] = 1.0                       # u[N - 1 - j] = 1, the other two 0
            for n in range(3, L + 3):            # the causal pass continued, zero input
                u[n] = fb[0] * u[n - 1] + fb[1] * u[n - 2] + fb[2] * u[n - 3]
            v = filt([B], fb, u[::-1])[::-1]     # the anticausal pass from far beyond
            numeric[:, j] = v[3:6]               # v[N], v[N + 1], v[N + 2]
        np.testing.assert_allclose(closed(*fb), numeric, rtol=1e-9, atol=1e-12)

# ----------------------------------------------------------------------------
# Deriche


DERICHE = """pipeline deriche_test
use boundary
use recursive
input  img: f32[2]
param  sigma: f32 = 1.0
output d0: f32[2]
output d1: f32[2]
output d2: f32[2]
output dy1: f32[2]
output dxy: f32[2]
algorithm {
    c = repeat_edge(img)
    d0 = deriche_x(c, sigma, 0, img.width)
    d1 = deriche_x(c, sigma, 1, img.width)
    d2 = deriche_x(c, sigma, 2, img.width)
    dy1 = deriche_y(c, sigma, 1, img.height)
    dxy = deriche(c, sigma, 1, 1, img.width, img.height)
}
schedule {
    d0.der_c.compute_root()
    d0.der_a.compute_root()
    d1.der_c.compute_root()
    d1.der_a.compute_root()
    d2.der_c.compute_root()
    d2.der_a.compute_root()
    dy1.der_cy.compute_root()
    dy1.der_ay.compute_root()
    dxy.der_x.compute_root()
    dxy.der_x.der_c.compute_root()
    dxy.der_x.der_a.compute_root()
    dxy.der_cy.compute_root()
    dxy.der_ay.compute_root()
}
"""

DERICHE_CONST = {0: (1.68, 3.735, 1.783, 1.723, -0.6803, -0.2598, 0.6318, 1.997),
                 1: (-0.6472, -4.531, 1.527, 1.516, 0.6494, 0.9557, 0.6719, 2.072),
                 2: (-1.331, 3.661, 1.24, 1.314, 0.3225, -1.738, 0.748, 2.166)}


def deriche_filter(sigma, order):
    """Deriche 1993's coefficients from the kernel's constants, in float64; normalized by the
    moments of the kernel computed by brute force (its impulse response), not in closed form."""
    a0, a1, b0, b1, c0, c1, w0, w1 = (float(F32(v)) for v in DERICHE_CONST[order])
    s = float(F32(sigma))
    e0, e1 = np.exp(-b0 / s), np.exp(-b1 / s)
    C0, S0, C1, S1 = np.cos(w0 / s), np.sin(w0 / s), np.cos(w1 / s), np.sin(w1 / s)
    n = np.array([a0 + c0,
                  e1 * (c1 * S1 - (c0 + 2 * a0) * C1) + e0 * (a1 * S0 - (2 * c0 + a0) * C0),
                  2 * e0 * e1 * ((a0 + c0) * C1 * C0 - a1 * C1 * S0 - c1 * C0 * S1) + c0 * e0 ** 2 + a0 * e1 ** 2,
                  e1 * e0 ** 2 * (c1 * S1 - c0 * C1) + e0 * e1 ** 2 * (a1 * S0 - a0 * C0)])
    d = np.array([-2 * e1 * C1 - 2 * e0 * C0, 4 * C1 * C0 * e0 * e1 + e1 ** 2 + e0 ** 2,
                  -2 * C0 * e0 * e1 ** 2 - 2 * C1 * e1 * e0 ** 2, e0 ** 2 * e1 ** 2]).astype(F32).astype(np.float64)
    sign = -1.0 if order == 1 else 1.0
    m = sign * np.array([0.0, n[1] - d[0] * n[0], n[2] - d[1] * n[0], n[3] - d[2] * n[0], -d[3] * n[0]])
    L = int(60 * s) + 50
    imp = np.zeros(2 * L + 1)
    imp[L] = 1
    h = filt(n, -d, imp) + filt(m, -d, imp[::-1])[::-1]
    k = np.arange(-L, L + 1)
    centre = 0.0 if order == 0 else -h.sum()
    h[L] += centre
    scale = 1 / h.sum() if order == 0 else -1 / (k * h).sum() if order == 1 else 2 / (k * k * h).sum()
    return n * scale, m * scale, -d, centre * scale


def deriche_ref(x, sigma, order, axis):
    """Both passes in float64 over the same repeat_edge padding P = ceil(10 sigma) + 4."""
    n, m, fb, centre = deriche_filter(sigma, order)
    pad = int(np.ceil(10 * F32(sigma))) + 4
    widths = [(0, 0)] * x.ndim
    widths[axis] = (pad, pad)
    xp = np.pad(x, widths, mode="edge")
    y = filt(n, fb, xp, axis) + np.flip(filt(m, fb, np.flip(xp, axis), axis), axis) + centre * xp
    return np.take(y, np.arange(pad, pad + x.shape[axis]), axis=axis)


# Deriche vs the exact sampled Gaussian (derivative), measured on smoothed noise (Gaussian of
# sigma 2, so that the derivatives stay of order 1 / sigma^k): the largest difference divided by
# the largest |exact| value.
DERICHE_VS_EXACT = {0: 2e-4, 1: 8e-3, 2: 6e-2}


@pytest.mark.parametrize("sigma", [3.0])
def test_deriche_against_the_recursion_and_the_exact_gaussian(rng, sigma):
    img = nd.gaussian_filter(rng.uniform(0, 1, (5, 70)), 2.0).astype(F32)
    # coefficients from exp, cos, sin: a few ulp apart on the two back ends; through the
    # recursion (sum |g| up to ~1e3 at sigma 10) that is below 1e-5 of the input
    names = ("d0", "d1", "d2", "dy1", "dxy")
    out = run_both(DERICHE, "deriche_test.hl", img=img, sigma=sigma, atol={n: 1e-5 for n in names})
    x = img.astype(np.float64)
    for order, name in enumerate(("d0", "d1", "d2")):
        fb = deriche_filter(sigma, order)[2]
        np.testing.assert_allclose(out[name], deriche_ref(x, sigma, order, 1), rtol=0, atol=bound(fb, 2, 1.0))
        exact = nd.gaussian_filter1d(x, sigma, axis=1, order=order, mode="nearest", truncate=12)
        rel = np.abs(out[name] - exact).max() / np.abs(exact).max()
        assert rel <= DERICHE_VS_EXACT[order], (order, rel)
    fb = deriche_filter(sigma, 1)[2]
    np.testing.assert_allclose(out["dy1"], deriche_ref(x, sigma, 1, 0), rtol=0, atol=bound(fb, 2, 1.0))
    both = deriche_ref(deriche_ref(x, sigma, 1, 1), sigma, 1, 0)
    np.testing.assert_allclose(out["dxy"], both, rtol=0, atol=2 * bound(fb, 2, 1.0))


def test_deriche_derivatives_of_polynomials():
    """Normalization: away from the edges, order 1 maps a ramp to its slope and order 2 maps
    x^2 / 2 to 1, and both map a constant to 0."""
    w = 100
    xs = np.arange(w, dtype=np.float64) - w / 2
    img = np.stack([np.full(w, 3.0), 0.5 * xs, xs * xs / 200.0]).astype(F32)
    out = run_both(DERICHE, "deriche_test.hl", img=img, sigma=3.0,
                   atol={n: 1e-5 for n in ("d0", "d1", "d2", "dy1", "dxy")})
    mid = slice(35, 65)
    np.testing.assert_allclose(out["d1"][0, mid], 0.0, atol=1e-5)
    np.testing.assert_allclose(out["d1"][1, mid], 0.5, atol=1e-4)
    np.testing.assert_allclose(out["d2"][0, mid], 0.0, atol=1e-5)
    np.testing.assert_allclose(out["d2"][2, mid], 0.01, atol=1e-4)   # (x^2 / 200)'' = 0.01
    np.testing.assert_allclose(out["d0"][0], 3.0, atol=1e-5)

# ----------------------------------------------------------------------------
# the B-spline prefilter, the box filter, second-order sections


OTHERS = """pipeline others_test
use boundary
use recursive
input  img: f32[2]
input  sos: f32[2]
param  r: i32 = 1
output bsx: f32[2]
output bsy: f32[2]
output bs2: f32[2]
output box_edge: f32[2]
output box_mirror: f32[2]
output box_interior: f32[2]
output box_zero: f32[2]
output box_wrap: f32[2]
output sosx: f32[2]
output sosy: f32[2]
output one: f32[2]
algorithm {
    bsx = bspline_prefilter_x(img, img.width)
    bsy = bspline_prefilter_y(img, img.height)
    bs2 = bspline_prefilter(img, img.width, img.height)
    box_edge = box_sat(repeat_edge(img), r, img.width, img.height)
    box_mirror = box_sat(mirror_image(img), r, img.width, img.height)
    box_interior = box_sat(mirror_interior(img), r, img.width, img.height)
    box_zero = box_sat(constant_exterior(img, 0.0f), r, img.width, img.height)
    box_wrap = box_sat(repeat_image(img), r, img.width, img.height)
    sosx = biquad_cascade_x(img, sos, 3, img.width)
    sosy = biquad_cascade_y(img, sos, 3, img.height)
    one = biquad_x(img, 0.5f, 0.25f, -0.125f, -0.5f, 0.25f, img.width)
}
schedule {
    bsx.bsp_c.compute_root()
    bsy.bsp_cy.compute_root()
    bs2.bsp_x.compute_root()
    bs2.bsp_x.bsp_c.compute_root()
    bs2.bsp_cy.compute_root()
    box_edge.sat_qy.compute_root()
    box_edge.sat_qx.compute_root()
    box_mirror.sat_qy.compute_root()
    box_mirror.sat_qx.compute_root()
    box_interior.sat_qy.compute_root()
    box_interior.sat_qx.compute_root()
    box_zero.sat_qy.compute_root()
    box_zero.sat_qx.compute_root()
    box_wrap.sat_qy.compute_root()
    box_wrap.sat_qx.compute_root()
}
"""


def box_bound(r, m):
    """box_sat's error bound (stdlib/recursive.hl): f32 running sums of nx = 256 + 2r + 1 and
    ny = 64 + 2r + 1 terms, each partial sum rounded once (Higham 2002, sec. 4.2), then the
    scaling by 1 / (2r + 1)^2; m = max |f|."""
    nx, ny = 256 + 2 * r + 1, 64 + 2 * r + 1
    return EPS * m * ((nx * nx + ny * ny + 4 * r + 2) / (2 * r + 1) + 2)


def sos_coefficients(rng):
    """Three stable sections: a 4th-order Butterworth low-pass (two sections) and a resonator."""
    sos = np.vstack([ss.butter(4, 0.2, output="sos"), [[0.3, -0.1, 0.05, 1.0, -0.9, 0.4]]])
    return sos.astype(F32)


@pytest.mark.parametrize("r,shape", [(0, (7, 9)), (1, (1, 1)), (3, (2, 3)), (8, (12, 31)), (2, (12, 31))])
def test_bspline_box_and_sections_against_scipy(rng, shape, r):
    img = rng.uniform(0, 1, shape).astype(F32)
    sos = sos_coefficients(rng)
    out = run_both(OTHERS, "others_test.hl", img=img, sos=sos, r=r)
    x = img.astype(np.float64)
    # B-spline: pole z = sqrt(3) - 2, gain 6 on a causal and an anticausal pass
    z = np.sqrt(3.0) - 2.0
    tol = bound([z], 2, 6.0)
    np.testing.assert_allclose(out["bsx"], nd.spline_filter1d(x, 3, axis=1, mode="mirror"), rtol=0, atol=tol)
    np.testing.assert_allclose(out["bsy"], nd.spline_filter1d(x, 3, axis=0, mode="mirror"), rtol=0, atol=tol)
    np.testing.assert_allclose(out["bs2"], nd.spline_filter(x, 3, mode="mirror"), rtol=0, atol=6 * tol)
    # box: the blocked f32 summed-area table, within the bound box_sat's comment derives
    size = 2 * r + 1
    for name, mode in [("box_edge", "nearest"), ("box_mirror", "reflect"), ("box_interior", "mirror"),
                       ("box_zero", "constant"), ("box_wrap", "wrap")]:
        if mode == "mirror" and min(shape) == 1:
            continue                            # scipy's 'mirror' needs two samples
        ref = nd.uniform_filter(x, size, mode=mode)
        np.testing.assert_allclose(out[name], ref, rtol=0, atol=box_bound(r, np.abs(x).max()), err_msg=name)
    # second-order sections: scipy's sosfilt from rest
    s64 = sos.astype(np.float64)
    tol = sum(bound([-s64[j, 4], -s64[j, 5]], 1, 1.0) for j in range(3)) * np.abs(s64[:, :3]).sum()
    np.testing.assert_allclose(out["sosx"], ss.sosfilt(s64, x, axis=1), rtol=0, atol=tol)
    np.testing.assert_allclose(out["sosy"], ss.sosfilt(s64, x, axis=0), rtol=0, atol=tol)
    one = ss.lfilter([0.5, 0.25, -0.125], [1.0, -0.5, 0.25], x, axis=1)
    np.testing.assert_allclose(out["one"], one, rtol=0, atol=bound([0.5, -0.25], 1, 1.0))


def test_bspline_coefficients_interpolate():
    """The cubic B-spline with the prefiltered coefficients passes through the samples:
    (c[n - 1] + 4 c[n] + c[n + 1]) / 6 == x[n] (mirrored coefficients at the ends)."""
    img = np.random.default_rng(7).uniform(0, 1, (3, 25)).astype(F32)
    out = run_both(OTHERS, "others_test.hl", img=img, sos=sos_coefficients(None), r=1)
    c = np.pad(out["bsx"].astype(np.float64), ((0, 0), (1, 1)), mode="reflect")
    np.testing.assert_allclose((c[:, :-2] + 4 * c[:, 1:-1] + c[:, 2:]) / 6, img, atol=1e-6)

# ----------------------------------------------------------------------------
# tile_iir on the stdlib filters


TILED = """pipeline tiled_test
use recursive
input  img: f32[2]
param  a: f32 = 0.7
param  sigma: f32 = 2.0
output s: f32[2]
output g: f32[2]
algorithm {
    s = exp_smooth(img, a, img.width, img.height)
    g = yvv_gaussian(img, sigma, img.width, img.height)
}
schedule tiled {
    s.compute_root().tile_iir(y, 8)
    s.ema_sx.compute_root().tile_iir(x, 8)
    s.ema_sx.ema_c.compute_root().tile_iir(x, 16)
    s.ema_cy.compute_root().tile_iir(y, 4)
    g.compute_root().tile_iir(y, 16)
    g.yvv_gx.compute_root().tile_iir(x, 8)
    g.yvv_gx.yvv_u.compute_root().tile_iir(x, 8)
    g.yvv_uy.compute_root().tile_iir(y, 8)
}
schedule x_tiled {
    s.ema_sx.compute_root().tile_iir(x, 8)
    s.ema_sx.ema_c.compute_root().tile_iir(x, 16)
    s.ema_cy.compute_root().update(0).split(x, xo, xi, 8).reorder(xi, y, xo).vectorize(xi, 4).parallel(xo)
    s.update(0).split(x, xo, xi, 8).reorder(xi, y, xo).vectorize(xi, 4).parallel(xo)
    g.yvv_gx.compute_root().tile_iir(x, 8)
    g.yvv_gx.yvv_u.compute_root().tile_iir(x, 8)
    g.yvv_uy.compute_root().update(0).split(x, xo, xi, 8).reorder(xi, y, xo).vectorize(xi, 4).parallel(xo)
    g.update(0).split(x, xo, xi, 8).reorder(xi, y, xo).vectorize(xi, 4).parallel(xo)
}
schedule serial {
    s.ema_sx.compute_root()
    s.ema_sx.ema_c.compute_root()
    s.ema_cy.compute_root()
    g.yvv_gx.compute_root()
    g.yvv_gx.yvv_u.compute_root()
    g.yvv_uy.compute_root()
}
"""


@pytest.mark.parametrize("shape", [(1, 1), (5, 7), (33, 17)])
def test_tiled_schedules_match_the_serial_filters(rng, shape):
    """tile_iir (Chaurasia et al. 2015) regroups the sums, so the tiled result agrees with the
    serial one to rounding: a few roundings per tile boundary crossed, each amplified as in the
    serial recursion (the same bound, applied twice)."""
    import hdsl
    img = rng.uniform(0, 1, shape).astype(F32)
    p = hdsl.loads(TILED, "tiled_test.hl")
    ref = p.compile("host", schedule="serial")(img=img)
    np.testing.assert_array_equal(np.stack(ref), np.stack(p(img=img)))   # serial native == evaluator
    tol_s = 2 * bound([0.7], 4, 1.0)
    tol_g = 2 * bound(yvv_coefs(2.0)[1], 4, 1.0)
    # every pass tiled; and the benchmarks' form, x passes tiled and y passes serial scans
    # vectorized across x (the scan loop of a fn's Func is named by its var, y)
    for schedule in ("tiled", "x_tiled"):
        got = p.compile("host", schedule=schedule)(img=img)
        np.testing.assert_allclose(got[0], ref[0], rtol=0, atol=tol_s)
        np.testing.assert_allclose(got[1], ref[1], rtol=0, atol=tol_g)


TILED_MORE = """pipeline tiled_more
use boundary
use recursive
input  img: f32[2]
input  sos: f32[2]
param  sigma: f32 = 2.0
output bs2: f32[2]
output der: f32[2]
output casc: f32[2]
algorithm {
    bs2 = bspline_prefilter(img, img.width, img.height)
    der = deriche_x(repeat_edge(img), sigma, 1, img.width)
    casc = biquad_cascade_x(img, sos, 3, img.width)
}
schedule tiled {
    bs2.compute_root().tile_iir(y, 4)
    bs2.bsp_x.compute_root().tile_iir(x, 8)
    bs2.bsp_x.bsp_c.compute_root().tile_iir(x, 8)
    bs2.bsp_cy.compute_root().tile_iir(y, 8)
    der.der_c.compute_root().tile_iir(x, 16)
    der.der_a.compute_root().tile_iir(x, 4)
    casc.compute_root().tile_iir(x, 8)
    casc.sos_stage[1].compute_root().tile_iir(x, 8)
    casc.sos_stage[2].compute_root().tile_iir(x, 4)
    casc.sos_stage[2].final0.parallel(x_tile)
}
schedule serial {
    bs2.bsp_x.compute_root()
    bs2.bsp_x.bsp_c.compute_root()
    bs2.bsp_cy.compute_root()
    der.der_c.compute_root()
    der.der_a.compute_root()
    casc.sos_stage[1].compute_root()
    casc.sos_stage[2].compute_root()
}
"""


@pytest.mark.parametrize("shape", [(1, 1), (6, 5), (19, 37)])
def test_more_tiled_schedules_match_the_serial_filters(rng, shape):
    """The 2-D B-spline prefilter, Deriche's derivative and a cascade of
    sections (each section named through the fn's array, `casc.sos_stage[1]`) tiled against
    the serial filters (native, equal to the evaluator), within twice each filter's f32 bound
    (both differ from the exact recursion by at most that bound)."""
    import hdsl
    img = rng.uniform(0, 1, shape).astype(F32)
    sos = sos_coefficients(rng)
    p = hdsl.loads(TILED_MORE, "tiled_more.hl")
    ref = p.compile("host", schedule="serial")(img=img, sos=sos)
    for a, b in zip(ref, p(img=img, sos=sos)):
        np.testing.assert_array_equal(a, b)                      # serial native == evaluator
    got = p.compile("host", schedule="tiled")(img=img, sos=sos)
    z = np.sqrt(3.0) - 2.0
    np.testing.assert_allclose(got[0], ref[0], rtol=0, atol=2 * 6 * bound([z], 2, 6.0))
    fb = deriche_filter(2.0, 1)[2]
    np.testing.assert_allclose(got[1], ref[1], rtol=0, atol=2 * bound(fb, 2, 1.0))
    s64 = sos.astype(np.float64)
    tol = sum(bound([-s64[j, 4], -s64[j, 5]], 1, 1.0) for j in range(3)) * np.abs(s64[:, :3]).sum()
    np.testing.assert_allclose(got[2], ref[2], rtol=0, atol=2 * tol)


TILED_BOX = """pipeline tiled_box
use boundary
use recursive
input  img: f32[2]
param  r: i32 = 2
output box: f32[2]
algorithm {
    box = box_sat(repeat_edge(img), r, img.width, img.height)
}
schedule tiled {
    box.split(y, yo, yi, 64).split(x, xo, xi, 256).reorder(xi, yi, xo, yo).vectorize(xi, 16).parallel(yo)
    box.sat_qy.compute_at(box, xo).vectorize(x, 16)
    box.sat_qy.update(0).reorder(x, yi).vectorize(x, 16)
    box.sat_qx.compute_at(box, xo).reorder_storage(y, xi, xt).vectorize(xi, 16)
    box.sat_qx.update(0).reorder(y, xi).vectorize(y, 16)
    box.sat_dx.compute_at(box, xo).reorder_storage(y, xi, xt).vectorize(y, 16)
}
schedule rows {
    box.split(y, yo, yi, 64).split(x, xo, xi, 256).split(xi, xio, xii, 16).reorder(xii, yi, xio, xo, yo).vectorize(xii).parallel(yo)
    box.sat_qy.compute_at(box, yo).vectorize(x, 16)
    box.sat_qy.update(0).reorder(x, yi).vectorize(x, 16)
    box.sat_qx.compute_at(box, xo).reorder_storage(y, xi, xt).split(xi, xio, xii, 16).reorder(xii, y, xio, xt).vectorize(xii)
    box.sat_qx.update(0).reorder(y, xi).vectorize(y, 16)
    box.sat_dx.compute_at(box, xo).reorder_storage(y, xi, xt).vectorize(y, 16)
}
schedule streamed {
    box.split(y, yo, yi, 64).split(x, xo, xi, 256).split(xi, xio, xii, 16).reorder(xii, yi, xio, xo, yo).vectorize(xii).parallel(yo)
    box.store_nontemporal()
    box.sat_qy.compute_at(box, yo).vectorize(x, 16)
    box.sat_qy.update(0).reorder(x, yi).vectorize(x, 16)
    box.sat_qx.compute_at(box, xo).reorder_storage(y, xi, xt).split(xi, xio, xii, 16).reorder(xii, y, xio, xt).vectorize(xii)
    box.sat_qx.update(0).reorder(y, xi).vectorize(y, 16)
    box.sat_dx.compute_at(box, xo).reorder_storage(y, xi, xt).vectorize(y, 16)
}
schedule serial {
    box.sat_qy.compute_root()
    box.sat_qx.compute_root()
}
"""


@pytest.mark.parametrize("r,shape", [(2, (1, 1)), (0, (19, 37)), (3, (150, 600)), (70, (150, 600))])
def test_tiled_box_matches_the_serial_box(rng, shape, r):
    """box_sat's blocked summed-area table computed per output tile of 256 x 64 (and with its y
    tables per row of tiles, the benchmark's schedule, benchmarks/cases/boxsat.hl) against its tables computed whole at the root: the
    same sums in the same order, so the same values. At (150, 600) there are 3 x 3 tiles, and
    r = 70 makes each tile's table reach past its neighbours. Both within box_sat's bound of
    SciPy's uniform_filter in f64 (the evaluator is checked at small sizes in
    test_bspline_box_and_sections_against_scipy)."""
    import hdsl
    img = rng.uniform(-1, 1, shape).astype(F32)
    p = hdsl.loads(TILED_BOX, "tiled_box.hl")
    ref = p.compile("host", schedule="serial")(img=img, r=r)
    got = p.compile("host", schedule="tiled")(img=img, r=r)
    np.testing.assert_array_equal(got, ref)
    # (the benchmark's: the y tables per row of tiles, the rest per tile, its transposes in
    # 16 x 16 register blocks)
    np.testing.assert_array_equal(p.compile("host", schedule="rows")(img=img, r=r), ref)
    # (and the benchmark's with store_nontemporal, into memory aligned to a cache line, where
    # its vectors are streamed, and into NumPy's own, where most are not: the same values)
    streamed = p.compile("host", schedule="streamed")
    raw = np.empty(img.size + 16, F32)
    skip = (-raw.ctypes.data % 64) // 4
    for off in (skip, skip + 4):
        out = raw[off:off + img.size].reshape(shape)
        streamed.realize_into(out, img=img, r=r)
        np.testing.assert_array_equal(out, ref)
    exact = nd.uniform_filter(img.astype(np.float64), 2 * r + 1, mode="nearest")
    np.testing.assert_allclose(got, exact, rtol=0, atol=box_bound(r, np.abs(img).max()))


STRIPS = """pipeline strips_test
use recursive
input  img: f32[2]
param  sigma: f32 = 2.0
output g: f32[2]
algorithm {
    g = yvv_gaussian(img, sigma, img.width, img.height)
}
schedule strips {
    g.yvv_gxs.compute_root().split(y, yo, yi, 64).vectorize(yi, 16).reorder(yi_i, x, yi, yo).parallel(yo)
    g.yvv_gx.yvv_u.compute_at(g.yvv_gxs, yo).reorder_storage(y, x).vectorize(y, 16).reorder(y_i, x, y)
    g.yvv_gx.yvv_u.update(0).vectorize(y, 16).unroll(y, 4).reorder(y_i, y_i2, x, y)
    g.yvv_gx.compute_at(g.yvv_gxs, yo).reorder_storage(y, x).vectorize(y, 16).unroll(y, 4).reorder(y_i, y_i2, x, y)
    g.yvv_gx.update(0).vectorize(y, 16).unroll(y, 4).reorder(y_i, y_i2, x, y)
    g.split(x, xo, xi, 64).reorder(xi, y, xo).vectorize(xi, 16).parallel(xo)
    g.yvv_uy.compute_at(g, xo).vectorize(x, 16)
    g.yvv_uy.update(0).vectorize(x, 16)
    g.update(0).split(x, xo, xi, 64).reorder(xi, y, xo).vectorize(xi, 16).parallel(xo)
}
"""


def test_the_strip_schedule_of_the_recursive_gaussian_equals_the_evaluator(rng):
    """yvv_gaussian with docs/stdlib.md's strip schedule (benchmarks/cases/rgauss.hl's): the x
    passes per strip of 64 rows in transposed strip storage (16 rows in the lanes, the image read
    and yvv_gxs written through 16 x 16 transposes), the y passes' causal scan per strip of 64
    columns. Every scan runs in the serial order, so the values are the evaluator's, bit for bit
    (which the evaluator's own agreement with the float64 recursion, above, ties to the papers'
    equations): on sizes smaller than a strip, a vector or a transposed block, on sizes that
    are not multiples of either (a shifted last strip), and on both of yvv_coef's formulas for
    q (sigma below and above 2.5)."""
    import hdsl
    p = hdsl.loads(STRIPS, "strips_test.hl")
    c = p.compile("host", schedule="strips")
    for shape in [(1, 1), (3, 2), (7, 5), (17, 33), (70, 133), (130, 67)]:
        img = rng.uniform(0, 1, shape).astype(F32)
        for sigma in (1.5, 6.0):
            np.testing.assert_array_equal(c(img=img, sigma=sigma), p(img=img, sigma=sigma),
                                          err_msg=f"shape {shape}, sigma {sigma}")


TILED_WIDE = """pipeline tiled_wide
use recursive
input  img: f32[2]
param  sigma: f32 = 64.0
output gx: f32[2]
algorithm {
    gx = yvv_gaussian_x(img, sigma, img.width)
}
schedule {
    gx.tile_iir(x, 64)
    gx.yvv_u.compute_root().tile_iir(x, 64)
}
"""


@pytest.mark.parametrize("sigma", [16.0, 64.0])
def test_tiled_young_van_vliet_at_large_sigma(rng, sigma):
    """Poles near 1 (q = 62 at sigma 64): the weights of the tiled form are large and the
    carried values nearly equal, so the chain over the tiles is summed in f64 (in f32 the
    result was off by up to 9 at sigma 64 on 512 points, measured). Tiled, the filter stays
    within the serial filter's bound of the float64 recursion."""
    import hdsl
    img = rng.uniform(0, 1, (3, 700)).astype(F32)
    got = hdsl.loads(TILED_WIDE, "tiled_wide.hl").compile("host")(img=img, sigma=sigma)
    tol = bound(yvv_coefs(sigma)[1], 2, 1.0)
    np.testing.assert_allclose(got, yvv_ref(img.astype(np.float64), sigma, [1]), rtol=0, atol=tol)


# Every tile size from 1 to one past the order: yvv_gaussian_x (order 3), biquad_y (order 2)
# and exp_smooth_x (order 1), each pass tiled by n. Tiles shorter than the order carry values
# from the tiles before (lower/tile_iir.py); they were wrong past the first tile (found by the
# slow schedule fuzzer: yvv_gaussian_x tiled by 2, 570 of 615 points wrong; biquad_y by 1).
TILED_SHORT = """pipeline tiled_short
use recursive
input  img: f32[2]
param  sigma: f32 = 2.0
param  a: f32 = 0.7
output gx: f32[2]
output by: f32[2]
output sx: f32[2]
algorithm {
    gx = yvv_gaussian_x(img, sigma, img.width)
    by = biquad_y(img, 0.5f, 0.25f, -0.125f, -0.5f, 0.25f, img.height)
    sx = exp_smooth_x(img, a, img.width)
}
""" + "".join(f"""schedule t{n} {{
    gx.tile_iir(x, {n})
    gx.yvv_u.compute_root().tile_iir(x, {n})
    by.tile_iir(y, {n})
    sx.tile_iir(x, {n})
    sx.ema_c.compute_root().tile_iir(x, {n})
}}
""" for n in range(1, 5))


def _check_tiled_short(rng, schedule):
    """Against the recursions in float64 (yvv_ref, lfilter, the edge-extended exponential
    pair) within twice each filter's f32 bound, as test_tiled_schedules_match_the_serial_filters
    (the serial filter is within the bound, the tiled one regroups the sums)."""
    import hdsl
    p = hdsl.loads(TILED_SHORT, "tiled_short.hl")
    c = p.compile("host", schedule=schedule)
    for shape in [(1, 1), (2, 3), (3, 2), (5, 7), (13, 12)]:
        img = rng.uniform(0, 1, shape).astype(F32)
        x = img.astype(np.float64)
        gx, by, sx = c(img=img)
        tol = 2 * bound(yvv_coefs(2.0)[1], 2, 1.0)
        np.testing.assert_allclose(gx, yvv_ref(x, 2.0, [1]), rtol=0, atol=tol, err_msg=f"gx {shape}")
        one = ss.lfilter([0.5, 0.25, -0.125], [1.0, -0.5, 0.25], x, axis=0)
        np.testing.assert_allclose(by, one, rtol=0, atol=2 * bound([0.5, -0.25], 1, 1.0),
                                   err_msg=f"by {shape}")
        a = float(F32(0.7))
        np.testing.assert_allclose(sx, symmetric([1 - a], [a], x, 1, 400, "edge"), rtol=0,
                                   atol=2 * 2 * bound([a], 1, 1.0), err_msg=f"sx {shape}")


def test_tiles_shorter_than_the_filters_order(rng):
    _check_tiled_short(rng, "t1")


@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["t2", "t3", "t4"])
def test_every_tile_size_from_one_to_past_the_order(rng, schedule):
    _check_tiled_short(rng, schedule)
