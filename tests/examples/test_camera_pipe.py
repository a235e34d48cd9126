"""examples/camera_pipe.hl: Halide's apps/camera_pipe, the Frankencamera pipeline, as in
apps/camera_pipe/camera_pipe_generator.cpp at Halide commit abbf7ff983dc19d9994d32c5a5d11a8cdda88ed8
(the lines each stage follows are in the example's header).

(a) against a NumPy implementation written here from the pipeline's description (planes of the
    Bayer mosaic as arrays, Halide's pow with its range reduction done by np.frexp), through
    the evaluator and the compiled schedule, exactly;
(b) `hdsl run` on the bundled mosaic writes what the API computes;
(c) `hdsl check` passes;
(d) bit for bit against the app itself, written below with Halide's Python bindings, realized
    with and without the strict_float target feature. Only the colour matrix and the tone
    curve are floating point; without strict_float LLVM may contract their arithmetic into
    FMAs, which can move an entry of the look-up table for some gammas (not for the two
    parameter sets here). The tone curve's pow is Halide's polynomial one, which the example
    spells out in examples/halide_math.hl.
"""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from hdsl.runtime.images import load_image

from .test_examples import EX, IMAGES, _cli, halide_output

F = np.float32
PATH = EX / "camera_pipe.hl"
DEFAULTS = dict(color_temp=3700.0, gamma=2.0, contrast=50.0, sharpen_strength=1.0, blackLevel=25, whiteLevel=1023)
OTHER = dict(color_temp=5200.0, gamma=1.8, contrast=30.0, sharpen_strength=2.5, blackLevel=40, whiteLevel=1000)
# sharpen_strength 7.9 (x32 = 252): the i16 product mask * strength wraps, as in Halide
STRONG = dict(color_temp=3000.0, gamma=2.2, contrast=90.0, sharpen_strength=7.9, blackLevel=10, whiteLevel=1000)


def bundled():
    return (load_image(IMAGES / "bayer16.png"), np.load(IMAGES / "camera_matrix_3200.npy"),
            np.load(IMAGES / "camera_matrix_7000.npy"))


def random_raw(w, h, seed):
    rs = np.random.RandomState(seed)
    raw = rs.randint(0, 1024, size=(h, w))
    raw = np.where(rs.rand(h, w) < 0.5, raw // 4 + 100, raw)     # some smooth-ish, some wild
    raw[rs.rand(h, w) < 0.01] = 1023                                # hot pixels
    return raw.astype(np.uint16)


def out_size(raw):
    """The app's output size (process.cpp): the mosaic less 32 x 24, down to multiples of 32."""
    h, w = raw.shape
    return ((w - 32) // 32) * 32, ((h - 24) // 32) * 32


# --- NumPy -----------------------------------------------------------------------------------

def np_exp(v):
    """Halide's exp (f32): v = k ln2 + r, a degree-7 polynomial in r (even and odd coefficients
    in r^2), times 2^k."""
    v = np.asarray(v, F)
    k = np.floor(v * (F(1) / F(np.log(2.0))))
    r = v - k * F(0.6931457519)
    r = r - k * F(1.4286067653e-6)
    c = [F(t) for t in (0.00031965933071842413, 0.00119156835564003744, 0.00848988645943932717,
                        0.04160188091348320655, 0.16667983794100929562, 0.49999899033463041098, 1.0, 1.0)]
    r2 = r * r
    even = ((c[0] * r2 + c[2]) * r2 + c[4]) * r2 + c[6]
    odd = ((c[1] * r2 + c[3]) * r2 + c[5]) * r2 + c[7]
    return ((even * r + odd) * np.ldexp(F(1), k.astype(np.int32))).astype(F)


def np_log(v):
    """Halide's log (f32) of v > 0: v = m 2^e with m in [0.75, 1.5), a degree-9 polynomial in
    m - 1, plus e ln 2; -inf at 0."""
    v = np.asarray(v, F)
    safe = np.where(v > 0, v, F(1))
    m, e = np.frexp(safe)                 # m in [0.5, 1)
    m, e = (m * F(2)).astype(F), e - 1    # m in [1, 2)
    hi = m >= F(1.5)
    m = np.where(hi, m / F(2), m).astype(F)
    e = np.where(hi, e + 1, e)
    x = m - F(1)
    x2 = x * x
    c = [F(t) for t in (0.05111976432738144643, -0.11793923497136414580, 0.14971993724699017569,
                        -0.16862004708254804686, 0.19980668101718729313, -0.24991211576292837737,
                        0.33333435275479328386, -0.50000106292873236491, 1.0)]
    even = (((c[0] * x2 + c[2]) * x2 + c[4]) * x2 + c[6]) * x2 + c[8]
    odd = (((c[1] * x2 + c[3]) * x2 + c[5]) * x2 + c[7]) * x2
    res = (even * x + odd + e.astype(F) * F(np.log(2.0))).astype(F)
    return np.where(v == 0, F(-np.inf), res)


def np_pow(a, b):
    """Halide's pow for a >= 0: exp(log(a) b), 0 at a = 0 (b != 0)."""
    a, b = np.asarray(a, F), np.asarray(b, F)
    with np.errstate(all="ignore"):
        p = np_exp(np_log(a) * b)
    return np.where(a > 0, p, np.where(b == 0, F(1), F(0))).astype(F)


def np_tone_curve(gamma, contrast, black, white, pow_=np_pow):
    """FCam's look-up table: linear luminance from the black and white levels, gamma, then a
    piecewise quadratic contrast curve, to 8 bits (rounded), 0 at and below black, 255 above white."""
    i = np.arange(1024)
    xf = np.clip((i - black).astype(F) * (F(1) / F(white - black)), F(0), F(1))
    g = pow_(xf, F(1) / F(gamma))
    b = F(2) - pow_(F(2), F(contrast) / F(100))
    a = F(2) - F(2) * b
    h = F(1) - g
    z = np.where(g > F(0.5), F(1) - (a * h * h + b * h), a * g * g + b * g).astype(F)
    val = np.clip(z * F(255) + F(0.5), F(0), F(255)).astype(np.uint8)
    return np.where(i <= black, 0, np.where(i > white, 255, val)).astype(np.uint8)


def numpy_camera_pipe(raw, m3200, m7000, w, h, color_temp, gamma, contrast, sharpen_strength,
                      blackLevel, whiteLevel):
    R = np.pad(raw.astype(np.int64), 2, mode="edge")
    # hot pixels: no sample above the largest of its four same-colour neighbours
    neighbours = np.maximum.reduce([R[2:-2, :-4], R[2:-2, 4:], R[:-4, 2:-2], R[4:, 2:-2]])
    den = np.minimum(R[2:-2, 2:-2], neighbours)
    # the four colour planes at half resolution; the output's origin is raw (16, 12); plane
    # arrays start O half-resolution pixels before it
    O = 4
    s = den[12 - 2 * O:, 16 - 2 * O:]
    planes = {"gr": s[0::2, 0::2], "r": s[0::2, 1::2], "b": s[1::2, 0::2], "gb": s[1::2, 1::2]}
    nx, ny = w // 2 + 3, h // 2 + 3            # half-res block from -1, one more at each end

    def at(name, dx=0, dy=0):
        p = planes[name]
        return p[O - 1 + dy:O - 1 + dy + ny, O - 1 + dx:O - 1 + dx + nx]

    def avg(a, b):
        return (a + b + 1) // 2

    def pick(d1, d2, v1, v2):                  # the interpolation along the smaller difference
        return np.where(d1 < d2, v1, v2)

    # green at red (blue) sites: horizontally or vertically
    def g_r(dx=0, dy=0):
        a, b = at("gr", dx + 1, dy), at("gr", dx, dy)
        u, v = at("gb", dx, dy - 1), at("gb", dx, dy)
        return pick(abs(a - b), abs(u - v), avg(a, b), avg(u, v))

    def g_b(dx=0, dy=0):
        a, b = at("gb", dx - 1, dy), at("gb", dx, dy)
        u, v = at("gr", dx, dy + 1), at("gr", dx, dy)
        return pick(abs(a - b), abs(u - v), avg(a, b), avg(u, v))

    def corrected(green, g1, g2, c1, c2):      # interpolate c, add green's interpolation error
        return (green - avg(g1, g2) + avg(c1, c2)) % 65536

    r_gr = corrected(at("gr"), g_r(), g_r(-1, 0), at("r", -1, 0), at("r"))
    b_gr = corrected(at("gr"), g_b(), g_b(0, -1), at("b"), at("b", 0, -1))
    r_gb = corrected(at("gb"), g_r(), g_r(0, 1), at("r"), at("r", 0, 1))
    b_gb = corrected(at("gb"), g_b(), g_b(1, 0), at("b"), at("b", 1, 0))
    r_b = pick(abs(at("r") - at("r", -1, 1)), abs(at("r", -1, 0) - at("r", 0, 1)),
               corrected(g_b(), g_r(), g_r(-1, 1), at("r"), at("r", -1, 1)),
               corrected(g_b(), g_r(-1, 0), g_r(0, 1), at("r", -1, 0), at("r", 0, 1)))
    b_r = pick(abs(at("b") - at("b", 1, -1)), abs(at("b", 1, 0) - at("b", 0, -1)),
               corrected(g_r(), g_b(), g_b(1, -1), at("b"), at("b", 1, -1)),
               corrected(g_r(), g_b(1, 0), g_b(0, -1), at("b", 1, 0), at("b", 0, -1)))

    def interleave(even_even, odd_even, even_odd, odd_odd):   # (x parity, y parity)
        out = np.empty((2 * ny, 2 * nx), np.int64)
        out[0::2, 0::2], out[0::2, 1::2] = even_even, odd_even
        out[1::2, 0::2], out[1::2, 1::2] = even_odd, odd_odd
        return out

    rgb = [interleave(r_gr, at("r"), r_b, r_gb), interleave(at("gr"), g_r(), g_b(), at("gb")),
           interleave(b_gr, b_r, at("b"), b_gb)]
    rgb = [np.where(v >= 32768, v - 65536, v) for v in rgb]      # u16 reinterpreted as i16
    # colour matrix, interpolated in 1 / kelvin, Q8.8
    alpha = (F(1) / F(color_temp) - F(1) / F(3200)) / (F(1) / F(7000) - F(1) / F(3200))
    m = ((m3200 * alpha + m7000 * (F(1) - alpha)) * F(256)).astype(np.int16).astype(np.int64)
    corr = [(m[c, 3] + m[c, 0] * rgb[0] + m[c, 1] * rgb[1] + m[c, 2] * rgb[2]) // 256 for c in range(3)]
    corr = [((v + 32768) % 65536) - 32768 for v in corr]          # to i16
    lut = np_tone_curve(gamma, contrast, blackLevel, whiteLevel).astype(np.int64)
    curved = np.stack([lut[np.clip(v, 0, 1023)] for v in corr], axis=-1)   # full res, origin (-2, -2)
    # unsharp mask: 1-2-1 (averages rounding up) in y, then in x
    cy = avg(avg(curved[:-2], curved[2:]), curved[1:-1])
    blur = avg(avg(cy[:, :-2], cy[:, 2:]), cy[:, 1:-1])            # origin (-1, -1)
    centre = curved[2:2 + h, 2:2 + w]
    mask = centre - blur[1:1 + h, 1:1 + w]
    s32 = int(np.clip(F(sharpen_strength) * F(32), 0, 255))
    # (the generator's line 401: mask (i16) * s32 (u8) is i16 arithmetic in Halide, and wraps
    # for sharpen_strength above about 4)
    weighted = ((mask * s32 + 32768) % 65536) - 32768
    return np.clip(centre + weighted // 32, 0, 255).astype(np.uint8)


# --- Halide ----------------------------------------------------------------------------------

def halide_camera_pipe(raw, m3200, m7000, w, h, color_temp, gamma, contrast, sharpen_strength,
                       blackLevel, whiteLevel, strict=True, schedule=False):
    """apps/camera_pipe/camera_pipe_generator.cpp in Halide's Python bindings
    (benchmarks/halide_peers.py, the benchmark's peer): the look-up tables compute_root as in the
    app, the green planes and curved too, everything else inlined, raw read as the app reads it;
    or (schedule=True) the app's CPU schedule."""
    return halide_output("camera_pipe", raw, m3200, m7000, w, h, color_temp, gamma, contrast, sharpen_strength,
                         blackLevel, whiteLevel, strict=strict, schedule=schedule)


# --- tests -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pipe():
    p = hdsl.load(PATH)
    return p, p.compile("host")


def test_tone_curve_pow_is_halides():
    """The NumPy stand-in for Halide's pow (used by the reference's look-up table) is a few ulp
    from the true power, and its table equals the one with NumPy's own pow at the defaults."""
    xs = np.linspace(0.001, 1, 5000).astype(F)
    for e in (0.5, 1 / 1.8, 2.0):
        got, want = np_pow(xs, F(e)), np.power(xs.astype(np.float64), np.float64(F(e)))
        assert np.max(np.abs(got - want) / want) < 2e-6
    def true_pow(a, b):
        return np.power(np.asarray(a, np.float64), np.float64(b)).astype(F)
    assert np.array_equal(np_tone_curve(2.0, 50.0, 25, 1023), np_tone_curve(2.0, 50.0, 25, 1023, true_pow))


@pytest.mark.parametrize("params", [DEFAULTS, OTHER, STRONG], ids=["defaults", "other", "strong"])
def test_camera_pipe_against_numpy(pipe, params):
    p, native = pipe
    raw, m32, m70 = bundled()
    if params is not DEFAULTS:
        raw = random_raw(160, 120, seed=5)
    w, h = out_size(raw)
    expected = numpy_camera_pipe(raw, m32, m70, w, h, **params)
    kw = dict(raw=raw, matrix_3200=m32, matrix_7000=m70, **params)
    got_native = native.realize((w, h, 3), **kw)
    got_interp = p.realize((w, h, 3), **kw)
    assert got_native.shape == (h, w, 3) and got_native.dtype == np.uint8
    assert np.array_equal(got_interp, expected)
    assert np.array_equal(got_native, expected)


@pytest.mark.parametrize("strict", [True, False], ids=["strict_float", "fast_math"])
@pytest.mark.parametrize("params", [DEFAULTS, OTHER, STRONG], ids=["defaults", "other", "strong"])
def test_camera_pipe_matches_halide_bit_for_bit(pipe, params, strict):
    _, native = pipe
    raw, m32, m70 = bundled()
    if params is not DEFAULTS:
        raw = random_raw(160, 120, seed=6)
    w, h = out_size(raw)
    got = native.realize((w, h, 3), raw=raw, matrix_3200=m32, matrix_7000=m70, **params)
    expected = halide_camera_pipe(raw, m32, m70, w, h, strict=strict, **params)
    assert np.array_equal(got, expected)
    # the peer itself (the benchmark's) against the NumPy implementation
    assert np.array_equal(expected, numpy_camera_pipe(raw, m32, m70, w, h, **params))


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_camera_pipe_reads_raw_where_the_app_does(target):
    """raw is read without a boundary condition, as the app reads it (line 412): the
    schedule's rounded-up vectors and tiles compute past the stages' regions, but their
    producers only over what the regions need (round_up is Halide's RoundUp), so a W x H
    output reads raw at x 10 .. W + 21 and y 6 .. H + 17, what the algorithm itself needs
    (the evaluator's region; the app, 2560 x 1920 from process.cpp's 2592 x 1968 mosaic,
    reads up to x 2581 and y 1937 in Halide 21). The mosaic cropped to that: the same
    pixels as from the whole mosaic; a column or row less: the evaluator's error."""
    raw, m32, m70 = bundled()
    w, h = out_size(raw)
    native = hdsl.load(PATH).compile(target)
    full = native.realize((w, h, 3), raw=raw, matrix_3200=m32, matrix_7000=m70)
    crop = np.ascontiguousarray(raw[:h + 18, :w + 22])
    assert np.array_equal(native.realize((w, h, 3), raw=crop, matrix_3200=m32, matrix_7000=m70), full)
    p = hdsl.load(PATH)
    for less, what in ((crop[:, :-1], f"x = 10 .. {w + 21}, but the buffer covers x = 0 .. {w + 20}"),
                       (crop[:-1], f"y = 6 .. {h + 17}, but the buffer covers y = 0 .. {h + 16}")):
        less = np.ascontiguousarray(less)
        msgs = []
        for run in (native.realize, p.realize):
            with pytest.raises(hdsl.HdslError) as e:
                run((w, h, 3), raw=less, matrix_3200=m32, matrix_7000=m70)
            msgs.append(str(e.value).splitlines()[0])
        assert msgs[0] == msgs[1] == f"error: input 'raw' is read at {what}"


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_camera_pipe_matches_the_app_scheduled_as_the_app(target):
    """The benchmark's pair: the example (its schedule for the target: the app's, with the
    target's natural vector size) and the peer with the app's own CPU schedule
    (camera_pipe_generator.cpp lines 499-577: fold_storage, compute_with, prefetch, rounded-up
    strips), same bits, at a size the app's schedule takes (a multiple of 2 * vec columns and
    of 32 rows; process.cpp's mosaic margins of 32 x 48)."""
    p = hdsl.load(PATH)
    native = p.compile(target)
    w, h = 256, 64
    raw = random_raw(w + 32, h + 48, seed=8)
    _, m32, m70 = bundled()
    got = native.realize((w, h, 3), raw=raw, matrix_3200=m32, matrix_7000=m70, **DEFAULTS)
    want = halide_output("camera_pipe", raw, m32, m70, w, h, strict=True, target=target, **DEFAULTS)
    assert np.array_equal(got, want)
    assert np.array_equal(want, numpy_camera_pipe(raw, m32, m70, w, h, **DEFAULTS))


def test_camera_pipe_runs_from_the_command_line(pipe, tmp_path):
    r = _cli("check", str(PATH))
    assert r.returncode == 0, r.stderr
    out = tmp_path / "camera_pipe.png"
    r = _cli("run", str(PATH), "--input", f"raw={IMAGES / 'bayer16.png'}",
             "--input", f"matrix_3200={IMAGES / 'camera_matrix_3200.npy'}",
             "--input", f"matrix_7000={IMAGES / 'camera_matrix_7000.npy'}",
             "--size", "256,192,3", "--output", str(out))
    assert r.returncode == 0, r.stderr
    written = load_image(out)
    raw, m32, m70 = bundled()
    expected = pipe[1].realize((256, 192, 3), raw=raw, matrix_3200=m32, matrix_7000=m70)
    assert written.shape == (192, 256, 3) and written.dtype == np.uint8
    assert np.array_equal(written, expected)
