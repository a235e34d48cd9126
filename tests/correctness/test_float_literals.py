"""f32 literals are rounded once, from their exact decimal value, as C's strtof does.

The oracle is the C library's strtof (C11 7.22.1.3: the result is the nearest representable
value, ties to even in the default rounding mode), called through ctypes; not our code.
Rounding the text to f64 first and then to f32 gives the wrong f32 when the f64 lands exactly
halfway between two f32s: 1.00000005960464477539062500000001 is just above the midpoint
1 + 2^-24, so it rounds up to 1 + 2^-23, but its f64 rounding is the midpoint itself, which
then rounds to even (1.0)."""
import ctypes
import random
from fractions import Fraction

import numpy as np
import pytest

import hdsl

_libc = ctypes.CDLL(None)
_libc.strtof.restype = ctypes.c_float
_libc.strtof.argtypes = [ctypes.c_char_p, ctypes.c_void_p]


def strtof(text: str) -> np.float32:
    return np.float32(_libc.strtof(text.encode(), None))


def _tricky_literals():
    texts = ["1.00000005960464477539062500000001",   # just above a midpoint: rounds up
             "1.00000005960464477539062499999999",   # just below it: rounds down
             "1.000000059604644775390625",           # the midpoint itself: ties to even
             "1.000000178813934326171875",           # a midpoint whose even neighbour is above
             "0.1", "3.4028234e38", "1e-45", "7.0064923216240861e-46", "1.17549435e-38"]
    rng = random.Random(7)
    for _ in range(40):   # random f32 midpoints nudged by a tiny decimal amount either way
        m = np.float32(rng.uniform(-1e6, 1e6))
        nxt = np.nextafter(m, np.float32(np.inf))
        mid = (Fraction(float(m)) + Fraction(float(nxt))) / 2
        digits = f"{float(mid.numerator) / mid.denominator:.30e}"
        texts.append(digits)
    return texts


@pytest.mark.parametrize("target", ["interp", "host"])
def test_f32_literals_round_once_like_strtof(target):
    texts = _tricky_literals()
    body = "\n".join(f"  out({i}) = {t}f" for i, t in enumerate(texts))
    src = f"""pipeline lits
output out: f32[1]
algorithm {{
  var x
  out(x) = 0.0f
{body}
}}
"""
    p = hdsl.loads(src, "lits.hl")
    run = p if target == "interp" else p.compile("host")
    got = run.realize((len(texts),))
    got = got[0] if isinstance(got, (list, tuple)) else got
    want = np.array([strtof(t) for t in texts], dtype=np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), \
        [(t, g, w) for t, g, w in zip(texts, got, want) if g != w]
