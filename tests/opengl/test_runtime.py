"""The OpenGL runtime: the program cache, lazy copies between launches, the errors a shader
or a kernel can give."""
import numpy as np
import pytest

import hdsl
from hdsl.codegen.glsl import GlslUnsupported, kernel_source
from hdsl.ir.expr import BinOp, Const, Intrinsic, Var
from hdsl.ir.kernel import Kernel, KernelArg
from hdsl.ir.stmt import Evaluate, For, Load, Store
from hdsl.ir.types import F32, F64, I32, I64
from hdsl.runtime import opengl


def add_one(t=I32, name="add_one"):
    """buf[i] += 1 over 64 work groups of 64 threads."""
    i = BinOp("+", BinOp("*", Var("blk"), Const(I32, 64), I32), Var("thr"), I32)
    one = Const(t, 1)
    body = For("blk", Const(I32, 0), Const(I32, 64), "gpu_block",
               For("thr", Const(I32, 0), Const(I32, 64), "gpu_thread",
                   Store("buf", i, BinOp("+", Load("buf", i, t), one, t))))
    return Kernel(name, (KernelArg("buf", t, "buffer", "rw"),), body, (Const(I32, 64),), Const(I32, 0))


def test_buffers_copy_only_when_the_other_side_is_newer(gl):
    """Three launches on one buffer: one copy in, one copy out (Halide's dirty bits)."""
    k = add_one()
    buf = opengl.DeviceBuffer(gl, np.arange(4096, dtype=np.int32), I32)
    for _ in range(3):
        opengl.launch(k, (64,), {"buf": buf}, {})
    with gl.use():
        out = buf.to_host().copy()
        assert np.array_equal(buf.to_host(), out)       # a second read copies nothing
    assert np.array_equal(out, np.arange(4096) + 3)
    assert (buf.copies_in, buf.copies_out) == (1, 1)
    buf.release()


def test_programs_are_cached_per_context(gl):
    k = add_one(name="cached_once")
    opengl.run_kernel(k, (64,), {"buf": np.zeros(4096, np.int32)})
    n = len(gl.programs)
    out = opengl.run_kernel(k, (64,), {"buf": np.ones(4096, np.int32)})["buf"]
    assert len(gl.programs) == n
    assert np.all(out == 2)


def test_a_refused_shader_names_the_kernel_and_the_generated_line(gl):
    source = "#version 430\nlayout(local_size_x = 1) in;\nvoid main() {\n    int x = undefined_name;\n}\n"
    with gl.use(), pytest.raises(opengl.GlslError) as e:
        gl.program(source, "kernel_blur_y_0")
    msg = e.value.diagnostics[0].message
    assert msg.startswith("OpenGL refused the compile of kernel 'kernel_blur_y_0': ")
    assert "undefined_name" in msg
    assert msg.endswith("generated line 4: int x = undefined_name;")


@pytest.mark.parametrize("t", [I64, F64])
def test_types_glsl_lacks_are_refused(t):
    with pytest.raises(GlslUnsupported) as e:
        kernel_source(add_one(t, "wide"))
    assert e.value.diagnostics[0].message == (
        f"kernel 'wide' computes with {t}, and OpenGL's GLSL has no "
        f"{'64-bit integers' if t == I64 else '64-bit floats'}")


def test_print_is_refused():
    body = For("blk", Const(I32, 0), Const(I32, 1), "gpu_block",
               Evaluate(Intrinsic("print", (Const(F32, 1.0),), F32, ("x",))))
    with pytest.raises(GlslUnsupported, match="print\\(\\) cannot run in an OpenGL shader"):
        kernel_source(Kernel("p", (), body, (Const(I32, 1),), Const(I32, 0)))


def test_work_groups_beyond_the_limit_are_refused(gl):
    k = add_one()
    big = k.with_body(k.body, threads=(Const(I32, gl.max_group_invocations * 2),))
    with pytest.raises(opengl.HdslError, match="more than this OpenGL allows"):
        opengl.run_kernel(big, (1,), {"buf": np.zeros(4096, np.int32)})


WIDE = """pipeline wide

input  img: u16[2]
output out: u16[2]

algorithm {
    big(x, y) = i64(img(x, y)) * 3
    out(x, y) = u16(big(x, y) / 2)
}

schedule opengl {
    out.gpu_tile(x, y, xi, yi, 16, 16)
    big.compute_at(out, x).gpu_threads(x, y)
}
"""


def test_what_glsl_cannot_do_is_an_error_at_the_func_before_running(gl, tmp_path):
    """An i64 Func computed in a kernel: refused when compiled, at its definition (line 7)."""
    path = tmp_path / "wide.hl"
    path.write_text(WIDE)
    p = hdsl.load(path)
    with pytest.raises(opengl.HdslError) as e:
        p.compile("opengl", use_cache=False)
    d = e.value.diagnostics[0]
    assert (d.span.line, d.span.col) == (7, 5)
    assert d.message == ("'big' runs on OpenGL: kernel 'kernel_out_0' computes with i64, and OpenGL's GLSL "
                         "has no 64-bit integers")


def _one_thread(body, args):
    return Kernel("k", args, For("blk", Const(I32, 0), Const(I32, 1), "gpu_block",
                                 For("thr", Const(I32, 0), Const(I32, 1), "gpu_thread", body)),
                  (Const(I32, 1),), Const(I32, 0))


def test_a_load_after_a_store_reads_memory_again(gl):
    """buf[0] read, buf[0] = 7 stored, buf[0] read again (the same IR node): the second read
    must not reuse the first's value."""
    from hdsl.ir.expr import intern
    from hdsl.ir.stmt import Block
    load = intern(Load("buf", Const(I32, 0), I32))
    body = Block((Store("out", Const(I32, 0), load), Store("buf", Const(I32, 0), Const(I32, 7)),
                  Store("out", Const(I32, 1), load)))
    k = _one_thread(body, (KernelArg("buf", I32, "buffer", "rw"), KernelArg("out", I32, "buffer", "w")))
    out = opengl.run_kernel(k, (1,), {"buf": np.array([3], np.int32), "out": np.zeros(2, np.int32)})["out"]
    assert out.tolist() == [3, 7]


def test_sibling_lets_of_one_name_do_not_share_values(gl):
    """let a = 1 in out[0] = a * 2; let a = 5 in out[1] = a * 2 (the same interned a * 2)."""
    from hdsl.ir.expr import intern
    from hdsl.ir.stmt import Block, LetStmt
    twice = intern(BinOp("*", Var("a"), Const(I32, 2), I32))
    body = Block((LetStmt("a", Const(I32, 1), Store("out", Const(I32, 0), twice)),
                  LetStmt("a", Const(I32, 5), Store("out", Const(I32, 1), twice))))
    k = _one_thread(body, (KernelArg("out", I32, "buffer", "w"),))
    out = opengl.run_kernel(k, (1,), {"out": np.zeros(2, np.int32)})["out"]
    assert out.tolist() == [2, 10]


BIG_GROUP = """pipeline biggroup
input  img: u16[2]
output out: u16[2]
algorithm {
    out(x, y) = img(x, y) + 1
}
schedule opengl {
    out.gpu_tile(x, y, xi, yi, {w}, {h})
}
"""


@pytest.mark.parametrize("w,h,says", [(32, 16, "512 invocations, more than the 256"),
                                      (1, 128, "128 along y, more than the 64")])
def test_work_group_limits_are_errors_at_the_directive(gl, tmp_path, w, h, says):
    """Checked when the pipeline is compiled, against the limits queried once from the context,
    at the gpu_tile directive, not at launch. llvmpipe allows 1024 invocations (1024x1024x64),
    which the GPU lowering's own 1024-thread rule already covers: a smaller driver's limits
    (256 invocations, 64 along y, as OpenGL ES 3.1's minimums are 128 and 128x128x64) are
    set for the check here."""
    from hdsl.codegen import glsl
    old = glsl._LIMITS
    glsl._LIMITS = (256, (256, 64, 64))
    path = tmp_path / "b.hl"
    path.write_text(BIG_GROUP.replace("{w}", str(w)).replace("{h}", str(h)))
    try:
        with pytest.raises(hdsl.HdslError) as e:
            hdsl.load(path).compile("opengl")
    finally:
        glsl._LIMITS = old
    d = e.value.diagnostics[0]
    assert says in d.message
    assert d.span is not None and d.span.line == 8       # the gpu_tile line


def test_group_limits_come_from_the_context(gl):
    from hdsl.codegen import glsl
    assert glsl.group_limits() == (gl.max_group_invocations, tuple(gl.max_group_size))
