"""Float -> integer casts in native code against the evaluator, for every integer type,
scalar and vectorized (widths that split into 8- and 4-lane converts, and one that pads), on the values where the rules matter: fractions of both signs
(truncation toward zero), each type's exact bounds and the floats next to them, values
out of range, infinities and NaN (all of which give the type's minimum)."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl

INT_TYPES = ["u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64"]


def _specials(ftype) -> np.ndarray:
    vals = [0.0, -0.0, 0.5, -0.5, 0.999, -0.999, 1.0, -1.0, 1.5, -1.5, 2.5, 254.9, 255.0, 255.5, 256.0,
            -128.0, -128.5, -129.0, 127.9, 128.0, 32767.0, 32768.0, -32768.0, -32769.0, 65535.0, 65536.0,
            2.0 ** 31, -(2.0 ** 31), 2.0 ** 32, 2.0 ** 63, -(2.0 ** 63), 2.0 ** 64, 1e30, -1e30,
            np.inf, -np.inf, np.nan]
    out = []
    for v in vals:
        with np.errstate(over="ignore"):        # (f16 cannot hold the larger ones: inf)
            f = ftype(v)
        out += [f, np.nextafter(f, ftype(np.inf)), np.nextafter(f, ftype(-np.inf))]
    return np.array(out, dtype=ftype)


def _native_against_evaluator(src: str, dst: str, lanes: int):
    """Cast every special value of `src` to `dst` natively and in the evaluator; assert they
    agree and return the values with the evaluator's results as a dict."""
    text = f"""
pipeline cast
input  img: {src}[1]
output out: {dst}[1]
algorithm {{ out(x) = {dst}(img(x)) }}
schedule s {{ {f"out.vectorize(x, {lanes})" if lanes else "out.compute_root()"} }}
"""
    p = hdsl.loads(text, "cast.hl")
    vals = _specials({"f16": np.float16, "f32": np.float32, "f64": np.float64}[src])
    vals = np.concatenate([vals, np.zeros((-len(vals)) % 96, vals.dtype)])
    with np.errstate(all="ignore"):
        expected = p(img=vals)
    got = p.compile("host", schedule="s", use_cache=False)(img=vals)
    assert got.dtype == expected.dtype
    bad = np.nonzero(got != expected)[0]
    assert not len(bad), [(vals[i], got[i], expected[i]) for i in bad[:5]]
    return vals, expected


@pytest.mark.parametrize("src", ["f32", "f64"])
@pytest.mark.parametrize("dst", INT_TYPES)
@pytest.mark.parametrize("lanes", [0, 3, 8, 16, 32])
def test_float_to_int_cast_matches_the_evaluator(src, dst, lanes):
    vals, expected = _native_against_evaluator(src, dst, lanes)
    # and the rules themselves, on a few values a reader can check
    info = np.iinfo(expected.dtype)
    lookup = dict(zip(vals.tolist(), expected.tolist()))
    assert lookup[-1.5] == (-1 if info.min < 0 else info.min)      # toward zero; negative -> min for unsigned
    assert lookup[2.5] == 2
    assert lookup[float(info.max) + 1.0 if info.max < 2 ** 60 else 2.0 ** 64] == info.min
    nan = [g for v, g in zip(vals.tolist(), expected.tolist()) if v != v]
    assert nan and all(g == info.min for g in nan)


@pytest.mark.parametrize("dst", INT_TYPES)
@pytest.mark.parametrize("lanes", [0, 16])
def test_f16_to_int_cast_matches_the_evaluator(dst, lanes):
    """f16 sources: native code once failed to compile casts to i32, u16, u32, i64 and u64
    ("float too large to pack": the range checks were made in f16, which cannot hold 2^31)."""
    vals, expected = _native_against_evaluator("f16", dst, lanes)
    info = np.iinfo(expected.dtype)
    lookup = dict(zip(vals.tolist(), expected.tolist()))
    assert lookup[-1.5] == (-1 if info.min < 0 else info.min)
    assert lookup[254.875] == (254 if info.max >= 254 else info.min)   # the f16 nearest 254.9
    assert lookup[65504.0] == (65504 if info.max >= 65504 else info.min)   # f16's largest finite
    assert lookup[float("inf")] == info.min
