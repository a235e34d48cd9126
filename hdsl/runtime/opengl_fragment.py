"""Running OpenGL's fragment path (hdsl/codegen/glsl_fragment.py): a kernel of a Func scheduled
glsl(x, y, c) is drawn as one triangle over a viewport of the grid's size, into an RGBA texture
(its channels in the components), and each component is copied into the output's storage buffer
where the Func's store puts it (glReadPixels into the buffer: on the device). The buffers it
reads become textures made from their storage buffers on the device (a pixel unpack from the
buffer), once per version of the buffer: a texture is made again only after something wrote
the buffer (a kernel, or a copy from the host), so a stage that several stages read is copied
once. The storage buffers stay what the host code's lazy copies (Halide's dirty bits) track."""
from __future__ import annotations

import ctypes

import numpy as np

from hdsl.diagnostics import HdslError, InternalError

VERTEX_SHADER = """#version 300 es
// one triangle that covers the viewport: (-1,-1), (3,-1), (-1,3)
void main() {
    vec2 p = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}
"""


def _type_size(t) -> int:
    return 1 if t.is_bool() else t.bits // 8


def _gl_enum(GL, name: str):
    return getattr(GL, "GL_" + name)


def _pixel_format(GL, t, channel: int | None = None):
    """The pixel transfer format of t's texture (one component, or component `channel`)."""
    integer = not t.is_float() and not (t.is_uint() and t.bits == 8 and not t.is_bool())
    comp = "RED" if channel is None else ("RED", "GREEN", "BLUE", "ALPHA")[channel]
    return _gl_enum(GL, comp + ("_INTEGER" if integer else ""))


class Textures:
    """Per context: each storage buffer's texture view, with the buffer's version it holds."""

    def __init__(self):
        self.versions: dict[int, int] = {}
        self.views: dict[int, tuple] = {}       # buffer -> (texture, version, type)
        self.vao = None
        self.fbo = None

    def touched(self, handle: int):
        self.versions[handle] = self.versions.get(handle, 0) + 1


def textures(ctx) -> Textures:
    t = getattr(ctx, "_textures", None)
    if t is None:
        t = ctx._textures = Textures()
    return t


def _buffer_bytes(GL, handle: int) -> int:
    GL.glBindBuffer(GL.GL_COPY_READ_BUFFER, handle)
    n = int(GL.glGetBufferParameteriv(GL.GL_COPY_READ_BUFFER, GL.GL_BUFFER_SIZE))
    GL.glBindBuffer(GL.GL_COPY_READ_BUFFER, 0)
    return n


def texture_of(ctx, GL, handle: int, t) -> int:
    """The texture holding the storage buffer's elements in order, a row of the driver's largest
    texture width each (made again only when the buffer changed since)."""
    from hdsl.codegen.glsl_fragment import formats
    tx = textures(ctx)
    version = tx.versions.get(handle, 0)
    hit = tx.views.get(handle)
    if hit is not None and hit[1] == version and hit[2] == t:
        return hit[0]
    if hit is not None:
        GL.glDeleteTextures(1, [hit[0]])
    size = _type_size(t)
    n = max(1, _buffer_bytes(GL, handle) // size)
    width = min(n, ctx.max_texture_size)
    rows, rest = divmod(n, width)
    if rows + (rest > 0) > ctx.max_texture_size:
        raise HdslError(f"a buffer of {n} elements is larger than the largest texture this OpenGL has "
                        f"({ctx.max_texture_size}x{ctx.max_texture_size})", None,
                        "run that stage with gpu_tile(...) (the compute path) instead of glsl(...)")
    internal, _, _, pixel = formats(t)
    fmt, typ = _pixel_format(GL, t), _gl_enum(GL, pixel)
    tex = int(GL.glGenTextures(1))
    GL.glActiveTexture(GL.GL_TEXTURE0 + ctx.max_texture_units - 1)    # (a unit no input uses)
    GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MIN_FILTER, GL.GL_NEAREST)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAG_FILTER, GL.GL_NEAREST)
    GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, _gl_enum(GL, internal), width, rows + (rest > 0), 0, fmt, typ, None)
    GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, handle)
    GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
    GL.glPixelStorei(GL.GL_UNPACK_ROW_LENGTH, 0)
    if rows:
        GL.glTexSubImage2D(GL.GL_TEXTURE_2D, 0, 0, 0, width, rows, fmt, typ, ctypes.c_void_p(0))
    if rest:
        GL.glTexSubImage2D(GL.GL_TEXTURE_2D, 0, 0, rows, rest, 1, fmt, typ, ctypes.c_void_p(rows * width * size))
    GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, 0)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    tx.views[handle] = (tex, version, t)
    return tex


def _index_at(layout, scalars: dict, i: int, j: int, k: int) -> int:
    """The output's flat index of fragment (i, j)'s component k."""
    from hdsl.ir.expr import BinOp, Const, free_vars, subst_vars
    from hdsl.ir.simplify import simplify
    from hdsl.ir.types import I32
    at = {layout.x[0]: BinOp("+", layout.x[1], Const(I32, i), I32),
          layout.y[0]: BinOp("+", layout.y[1], Const(I32, j), I32)}
    if layout.c is not None:
        at[layout.c[0]] = BinOp("+", layout.c[1], Const(I32, k), I32)
    e = subst_vars(layout.index, at)
    e = subst_vars(e, {n: Const(I32, int(scalars[n])) for n in free_vars(e) if n in scalars})
    v = simplify(e)
    if not isinstance(v, Const):
        raise InternalError(f"glsl: the fragment store's index {v} is not known at launch")
    return int(v.value)


def program(ctx, GL, source: str, kernel: str) -> int:
    prog = ctx.programs.get(source)
    if prog is not None:
        return prog
    from hdsl.runtime.opengl import shader_error, _text
    shaders = []
    for stage, kind, text in (("vertex", GL.GL_VERTEX_SHADER, VERTEX_SHADER), ("fragment", GL.GL_FRAGMENT_SHADER, source)):
        sh = GL.glCreateShader(kind)
        GL.glShaderSource(sh, text)
        GL.glCompileShader(sh)
        if not GL.glGetShaderiv(sh, GL.GL_COMPILE_STATUS):
            log = _text(GL.glGetShaderInfoLog(sh))
            raise shader_error(kernel, f"{stage} shader compile", log, text)
        shaders.append(sh)
    prog = GL.glCreateProgram()
    for sh in shaders:
        GL.glAttachShader(prog, sh)
    GL.glLinkProgram(prog)
    for sh in shaders:
        GL.glDeleteShader(sh)
    if not GL.glGetProgramiv(prog, GL.GL_LINK_STATUS):
        log = _text(GL.glGetProgramInfoLog(prog))
        raise shader_error(kernel, "link", log, source)
    ctx.programs[source] = prog
    return prog


def render(ctx, kernel, gk, grid, buffers: dict, scalars: dict):
    """Launch a fragment kernel: draw its grid into an RGBA texture, copy it into the output."""
    from hdsl.codegen.glsl_fragment import formats
    from hdsl.runtime.opengl import _uniform
    layout = gk.fragment
    W, H = (int(g) for g in list(grid)[:2])
    if W <= 0 or H <= 0:
        return
    if max(W, H) > ctx.max_texture_size:
        raise HdslError(f"kernel '{kernel.name}' renders {W}x{H} fragments, more than the largest texture "
                        f"this OpenGL has ({ctx.max_texture_size} per side)", None,
                        "run this stage with gpu_tile(...) (the compute path) instead of glsl(...)")
    tx = textures(ctx)
    with ctx.use() as GL:
        prog = program(ctx, GL, gk.source, kernel.name)
        GL.glUseProgram(prog)
        for name, (ident, t) in gk.uniforms.items():
            _uniform(GL, GL.glGetUniformLocation(prog, ident), t, scalars[name])
        unit = 0
        for a in gk.buffers:
            if a.access != "r":
                continue
            tex = texture_of(ctx, GL, buffers[a.name].to_device(), a.type)
            loc = GL.glGetUniformLocation(prog, layout.samplers[a.name])
            GL.glActiveTexture(GL.GL_TEXTURE0 + unit)
            GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
            if loc >= 0:
                GL.glUniform1i(loc, unit)
            unit += 1
        # the render target
        internal_in, internal, _, pixel = formats(layout.type)
        target = int(GL.glGenTextures(1))
        GL.glActiveTexture(GL.GL_TEXTURE0 + ctx.max_texture_units - 1)
        GL.glBindTexture(GL.GL_TEXTURE_2D, target)
        GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, _gl_enum(GL, internal), W, H)
        if tx.vao is None:
            tx.vao = int(GL.glGenVertexArrays(1))
            tx.fbo = int(GL.glGenFramebuffers(1))
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, tx.fbo)
        GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, target, 0)
        cut = None
        if gk.loops:
            # (a fragment whose loops the driver cut short writes 1 here: see glsl_fragment.py)
            cut = int(GL.glGenTextures(1))
            GL.glBindTexture(GL.GL_TEXTURE_2D, cut)
            GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_R8UI, W, H)
            GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT1, GL.GL_TEXTURE_2D, cut, 0)
            GL.glDrawBuffers(2, [GL.GL_COLOR_ATTACHMENT0, GL.GL_COLOR_ATTACHMENT1])
        else:
            GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT1, GL.GL_TEXTURE_2D, 0, 0)
            GL.glDrawBuffers(1, [GL.GL_COLOR_ATTACHMENT0])
        status = GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER)
        if status != GL.GL_FRAMEBUFFER_COMPLETE:
            raise HdslError(f"this OpenGL cannot render to {internal} textures (kernel '{kernel.name}')", None,
                            "on OpenGL ES, rendering to float textures needs EXT_color_buffer_float")
        GL.glViewport(0, 0, W, H)
        GL.glDisable(GL.GL_BLEND)
        GL.glDisable(GL.GL_DEPTH_TEST)
        GL.glBindVertexArray(tx.vao)
        GL.glDrawArrays(GL.GL_TRIANGLES, 0, 3)
        GL.glBindVertexArray(0)
        # each component where the store puts it: rows of W at the store's y stride
        out = buffers[layout.output].to_device()
        size = _type_size(layout.type)
        f0 = _index_at(layout, scalars, 0, 0, 0)
        if W > 1 and _index_at(layout, scalars, 1, 0, 0) - f0 != 1:
            raise InternalError(f"glsl: kernel {kernel.name}'s output is not dense along x")
        row = _index_at(layout, scalars, 0, 1, 0) - f0 if H > 1 else W
        if row < W:
            raise InternalError(f"glsl: kernel {kernel.name}'s output rows overlap ({row} < {W})")
        GL.glReadBuffer(GL.GL_COLOR_ATTACHMENT0)
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, out)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
        GL.glPixelStorei(GL.GL_PACK_ROW_LENGTH, row)
        for k in range(layout.channels):
            start = _index_at(layout, scalars, 0, 0, k)
            GL.glReadPixels(0, 0, W, H, _pixel_format(GL, layout.type, k), _gl_enum(GL, pixel),
                            ctypes.c_void_p(start * size))
        GL.glPixelStorei(GL.GL_PACK_ROW_LENGTH, 0)
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
        was_cut = False
        if cut is not None:
            flags = np.zeros((H, W), np.uint8)
            GL.glReadBuffer(GL.GL_COLOR_ATTACHMENT1)
            GL.glReadPixels(0, 0, W, H, GL.GL_RED_INTEGER, GL.GL_UNSIGNED_BYTE, flags.ctypes.data_as(ctypes.c_void_p))
            was_cut = bool(flags.any())
            GL.glDeleteTextures(1, [cut])
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
        GL.glDeleteTextures(1, [target])
        for u in range(unit):
            GL.glActiveTexture(GL.GL_TEXTURE0 + u)
            GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        buffers[layout.output].written_on_device()
        tx.touched(out)
        if was_cut:
            raise ctx.loops_cut_error(kernel.name)
