"""OpenGL's fragment path (`glsl(x, y, c)`, hdsl/codegen/glsl_fragment.py) on llvmpipe: each
pipeline's values equal the reference evaluator's exactly (integers, + - * /, the RGBA8 store's
rounding), the shaders are OpenGL ES 3.0, and what the path cannot run is an error at the
directive."""
import numpy as np
import pytest

import hdsl

BLUR3 = """pipeline g
use boundary
input  img: u8[3]
output out: u8[3]
algorithm {
    var x, y, c
    e = repeat_edge(img)
    out(x, y, c) = u8((u16(e(x - 1, y, c)) + 2 * u16(e(x, y, c)) + u16(e(x + 1, y, c))) / 4)
}
schedule opengl {
    out.bound(c, 0, 3).glsl(x, y, c)
}
"""

# two fragment stages, f32 between them: the second reads the first's texture
TWO_STAGES = """pipeline two
use boundary
input  img: u16[2]
output out: f32[2]
algorithm {
    var x, y
    e = repeat_edge(img)
    g(x, y) = f32(e(x, y)) * 0.5 + 1.25
    out(x, y) = (g(x - 1, y) + g(x + 1, y)) / 3.0 - g(x, y - 1) * g(x, y + 1)
}
schedule opengl {
    g.compute_root().glsl(x, y)
    out.glsl(x, y)
}
"""

# every integer type as a stage's element, through an RGBA texture of its own format
TYPES = """pipeline types
use boundary
input  img: i32[2]
output out: i32[2]
algorithm {
    var x, y, c
    e = repeat_edge(img)
    a(x, y, c) = i8(e(x, y) * (c + 1))
    b(x, y, c) = u16(e(x, y) * 37 + c)
    d(x, y, c) = i16(e(x, y) * -91 + c)
    u(x, y, c) = u32(e(x, y)) * u32(40503) * u32(65599) + u32(c)
    t(x, y, c) = e(x, y) % 3 == c
    out(x, y) = i32(a(x, y, 0)) + i32(a(x + 1, y, 3)) + i32(b(x, y, 1)) - i32(d(x, y - 1, 2)) + i32(u(x, y, 1) >> 7) + select(t(x, y, 1), 1000, 0)
}
schedule opengl {
    a.compute_root().bound(c, 0, 4).glsl(x, y, c)
    b.compute_root().bound(c, 0, 2).glsl(x, y, c)
    d.compute_root().bound(c, 0, 3).glsl(x, y, c)
    u.compute_root().bound(c, 0, 2).glsl(x, y, c)
    t.compute_root().bound(c, 0, 2).glsl(x, y, c)
    out.glsl(x, y)
}
"""

# u8 from floats: the RGBA8 target stores rint(clamp(v, 0, 1) * 255), which must give back the
# value hdsl's u8(...) conversion computed (truncation after the clamp) for every input value
ROUNDING = """pipeline rounding
input  img: u8[2]
output out: u8[2]
algorithm {
    var x, y
    out(x, y) = u8(clamp(f32(img(x, y)) * 1.37 - 20.6, 0.0, 255.0))
}
schedule opengl {
    out.glsl(x, y)
}
"""


def _load(tmp_path, text, name="p"):
    path = tmp_path / f"{name}.hl"
    path.write_text(text)
    return hdsl.load(path)


def _same(p, **kw):
    got = np.asarray(p.compile("opengl")(**kw))
    want = np.asarray(p.compile("interp")(**kw))
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    return got


@pytest.mark.parametrize("shape", [(37, 53, 3), (1, 5, 3), (64, 1, 3)])
def test_three_channels_in_rgba8(gl, tmp_path, shape):
    p = _load(tmp_path, BLUR3)
    img = np.random.default_rng(1).integers(0, 256, shape).astype(np.uint8)
    _same(p, img=img)


def test_two_float_stages(gl, tmp_path):
    p = _load(tmp_path, TWO_STAGES)
    img = np.random.default_rng(2).integers(0, 65536, (29, 41)).astype(np.uint16)
    _same(p, img=img)


def test_integer_types(gl, tmp_path):
    p = _load(tmp_path, TYPES)
    img = np.random.default_rng(3).integers(-(1 << 20), 1 << 20, (23, 31)).astype(np.int32)
    _same(p, img=img)


def test_rgba8_rounding_against_the_evaluators_u8(gl, tmp_path):
    p = _load(tmp_path, ROUNDING)
    img = np.arange(256, dtype=np.uint8).reshape(16, 16)
    got = _same(p, img=img)
    # and independently of hdsl: numpy's float32 of the same expression, truncated
    want = np.clip(img.astype(np.float32) * np.float32(1.37) - np.float32(20.6), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(got, want)


def test_a_stage_read_twice_is_copied_once(gl, tmp_path):
    """Lazy copies: the texture of g is made once for out's call, and again only after g changes."""
    from hdsl.runtime import opengl_fragment as F
    p = _load(tmp_path, TWO_STAGES)
    f = p.compile("opengl")
    img = np.random.default_rng(4).integers(0, 65536, (9, 11)).astype(np.uint16)
    made = []
    orig = F.texture_of.__wrapped__ if hasattr(F.texture_of, "__wrapped__") else F.texture_of

    def counting(ctx, GL, handle, t):
        before = F.textures(ctx).views.get(handle)
        tex = orig(ctx, GL, handle, t)
        if before is None or before[0] != tex:
            made.append(handle)
        return tex
    F.texture_of = counting
    try:
        f(img=img)
    finally:
        F.texture_of = orig
    assert len(made) == 2        # img's texture, g's texture (out reads g: once, not per read)


def test_emit_glsl_writes_es3_fragment_shaders(gl, tmp_path):
    from hdsl.aot import compiled_form
    p = _load(tmp_path, TWO_STAGES)
    text = compiled_form(p.ir, "glsl", target="opengl")
    assert text.count("#version 300 es") == 2
    assert "texelFetch(" in text and "gl_FragCoord" in text
    assert "buffer" not in text.replace("// ", "")          # no storage buffers in ES 3.0 fragment shaders


ERRORS = [
    # (schedule line, algorithm, what the error says)
    ("out.bound(c, 0, 5).glsl(x, y, c)", "out(x, y, c) = img(x, y) + c", "at most 4"),
    ("out.glsl(x, y, c)", "out(x, y, c) = img(x, y) + c", "must be a constant"),
    ("out.glsl(x, y)", "out(x, y, c) = img(x, y) + c\n    out(x, y, c) += 1", None),
]


def _errors_at(tmp_path, sched, algo, dims=3):
    text = f"""pipeline bad
input  img: i32[2]
output out: i32[{dims}]
algorithm {{
    var x, y, c
    {algo}
}}
schedule opengl {{
    {sched}
}}
"""
    path = tmp_path / "bad.hl"
    path.write_text(text)
    with pytest.raises(hdsl.HdslError) as e:
        hdsl.load(path).compile("opengl")(img=np.zeros((4, 4), np.int32))
    d = e.value.diagnostics[0]
    return d, text.splitlines()


@pytest.mark.parametrize("sched,algo,says", ERRORS[:2])
def test_channel_errors_are_at_the_directive(gl, tmp_path, sched, algo, says):
    d, lines = _errors_at(tmp_path, sched, algo)
    assert says in d.message
    assert d.span is not None and "glsl(" in lines[d.span.line - 1][d.span.col - 1:]


def test_a_scattering_update_is_refused_at_the_directive(tmp_path):
    path = tmp_path / "s.hl"
    path.write_text("""pipeline s
input  img: i32[1]
output out: i32[2]
algorithm {
    var x, y
    rdom r = [0..8]
    out(x, y) = 0
    out(img(r.x), y) += 1
}
schedule opengl {
    out.glsl(x, y)
}
""")
    with pytest.raises(hdsl.HdslError) as e:
        hdsl.load(path)
    d = e.value.diagnostics[0]
    assert "scattered across fragments" in d.message and d.span.line == 11


def test_f64_is_refused_at_the_directive(gl, tmp_path):
    d, lines = _errors_at(tmp_path, "out.glsl(x, y)", "out(x, y) = i32(f64(img(x, y)) * 0.5)", dims=2)
    assert "64-bit floats" in d.message
    assert "glsl(" in lines[d.span.line - 1]


def test_glsl_on_another_gpu_target_is_an_error(tmp_path):
    path = tmp_path / "c.hl"
    path.write_text(BLUR3.replace("schedule opengl", "schedule cuda"))
    with pytest.raises(hdsl.HdslError, match="fragment path"):
        hdsl.load(path).compile("cuda-emulate")


def test_the_shaders_compile_on_an_opengl_es_context(gl, tmp_path):
    """Every fragment shader of the examples and of these tests compiles on an OpenGL ES context
    (Mesa's, through EGL), as `#version 300 es`: the shaders would run on a phone."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    from hdsl.aot import compiled_form
    root = Path(__file__).resolve().parents[2]
    irs = [hdsl.load(root / "examples" / f"{n}.hl").ir for n in ("blur", "unsharp", "harris", "camera_pipe")]
    irs += [_load(tmp_path, t, f"p{i}").ir for i, t in enumerate((BLUR3, TWO_STAGES, TYPES, ROUNDING))]
    files = []
    for ir in irs:
        for k, shader in enumerate(re.split(r"(?=#version 300 es)", compiled_form(ir, "glsl", target="opengl"))[1:]):
            files.append(tmp_path / f"{ir.name}_{k}.frag")
            files[-1].write_text(shader)
    assert len(files) >= 12
    r = subprocess.run([sys.executable, str(Path(__file__).with_name("es_compile.py"))] + [str(f) for f in files],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("context: OpenGL ES 3.") and r.stdout.count(" ok\n") == len(files)


def test_no_contraction_into_fma(gl, tmp_path):
    """s + (a * 0.75 + b * 0.25) as written: ES 3.00 has no `precise`; without the invariant
    color, llvmpipe fused it into fma's, one ulp off (found by the fuzzer on math_f32)."""
    p = _load(tmp_path, """pipeline fma
use boundary
input  img: f32[2]
output out: f32[2]
algorithm {
    c = repeat_edge(img)
    out(x, y) = sqrt(abs(c(x, y))) + lerp(c(x, y), c(x - 1, y), 0.25f)
}
schedule opengl {
    out.glsl(x, y)
}
""")
    img = (np.random.default_rng(0).standard_normal((15, 39)) * 10).astype(np.float32)
    got = _same(p, img=img)
    # and NumPy's float32, operation by operation (x - 1 clamped at the left edge)
    left = np.concatenate([img[:, :1], img[:, :-1]], axis=1)
    want = np.sqrt(np.abs(img)) + (img * np.float32(0.75) + left * np.float32(0.25))
    np.testing.assert_array_equal(got, want)
