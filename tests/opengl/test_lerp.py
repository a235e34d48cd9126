"""Integer lerp on OpenGL equals the reference evaluator's (Halide's exact rounding, src/Lerp.cpp,
hdsl/interp/scalar.py) for every weight value of u8 and u16 weights, and float weights in [0, 1],
with 8- and 16-bit ends, on both the compute and the fragment path."""
import numpy as np
import pytest

import hdsl

TEXT = """pipeline l
input  z: {t}[1]
input  o: {t}[1]
input  w: {w}[1]
output out: {t}[1]
algorithm {{
    var x
    out(x) = lerp(z(x), o(x), w(x))
}}
schedule opengl {{
    out.gpu_tile(x, xi, 64)
}}
"""


def _weights(wt, n):
    if wt == "f32":
        return np.linspace(0, 1, n, dtype=np.float32)
    return np.arange(n).astype(wt.replace("u", "uint"))


@pytest.mark.parametrize("wt", ["u8", "u16", "f32"])
@pytest.mark.parametrize("t", ["u8", "i8", "u16", "i16"])
def test_integer_lerp_equals_the_evaluator(gl, tmp_path, t, wt):
    path = tmp_path / "l.hl"
    path.write_text(TEXT.format(t=t, w=wt))
    p = hdsl.load(path)
    n = 256 if wt == "u8" else 65536
    w = _weights(wt, n)
    info = np.iinfo(t.replace("u", "uint") if t.startswith("u") else t.replace("i", "int"))
    rng = np.random.default_rng(5)
    # the ends: random, and the extremes among them
    z = rng.integers(info.min, info.max + 1, n).astype(info.dtype)
    o = rng.integers(info.min, info.max + 1, n).astype(info.dtype)
    z[:4], o[:4] = [info.min, info.max, info.min, info.max], [info.max, info.min, info.min, info.max]
    got = p.compile("opengl")(z=z, o=o, w=w)
    np.testing.assert_array_equal(got, p.compile("interp")(z=z, o=o, w=w))


def test_32_bit_lerp_is_refused_clearly(gl, tmp_path):
    path = tmp_path / "l.hl"
    path.write_text(TEXT.format(t="u32", w="u32"))
    with pytest.raises(hdsl.HdslError, match="64-bit products"):
        hdsl.load(path).compile("opengl")
