"""The OpenGL device: a headless context, compute shaders, and buffers with lazy copies.

Context. `context()` gives the process's OpenGL context, made once and kept: a window-system
context the caller already made current is used as it is (a user who imported PyOpenGL for
their own window); otherwise a headless one through EGL on Mesa's surfaceless platform
(`EGL_PLATFORM_SURFACELESS_MESA`, no display server needed: Mesa's llvmpipe on a machine
without a GPU, the vendor's EGL where one exists), OpenGL 4.5 core. PyOpenGL chooses its
platform when `OpenGL` is first imported, so `PYOPENGL_PLATFORM=egl` is set here, before that
import, and only when nobody has imported OpenGL yet and the user has not chosen a platform
(importing hdsl never imports OpenGL; only this module's functions do). A machine with no usable
OpenGL gets `OpenGLUnavailable`, one sentence saying why and what to install.

One context is current on one thread at a time: every use of it goes through `Context.use()`,
which holds a lock and makes it current on the calling thread.

Buffers. Every element lives on the device as one 32-bit word (GLSL 4.5 core has no 8- or
16-bit storage without extensions): u8/u16/u32/bool as `uint`, i8/i16/i32 as `int` (sign
extended), f32 as `float`. `DeviceBuffer` keeps a host array and a shader storage buffer with
Halide's dirty bits: copies happen only when the other side is newer.

Programs. Compiled programs are cached per context by their source text. A compile or link
error names the kernel and shows the generated line it points at (`GlslError`).
"""
from __future__ import annotations

import ctypes
import os
import re
import sys
import threading

import numpy as np

from hdsl.diagnostics import HdslError, InternalError

_EGL_PLATFORM_SURFACELESS_MESA = 0x31DD
_INSTALL_HINT = ("install PyOpenGL (pip install 'hdsl[opengl]') and Mesa's EGL and OpenGL drivers "
                 "(Debian/Ubuntu: apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri libgles2 libgl1 "
                 "libglx-mesa0), or run on another target (--target host)")


class OpenGLUnavailable(HdslError):
    """No usable OpenGL 4.3+ context on this machine (no PyOpenGL, no EGL, no driver)."""

    def __init__(self, why: str):
        super().__init__(f"target 'opengl' needs OpenGL 4.3 or newer, and none is usable here: {why}",
                         None, _INSTALL_HINT)


class GlslError(HdslError):
    """The OpenGL driver refused a generated shader (a bug in hdsl's GLSL generator, or a
    driver limit): the kernel, the driver's message and the generated line it names."""


def _import_gl():
    """PyOpenGL's GL and EGL modules, with EGL as the platform where nobody chose one yet."""
    if "OpenGL" not in sys.modules and not os.environ.get("PYOPENGL_PLATFORM"):
        os.environ["PYOPENGL_PLATFORM"] = "egl"
    try:
        from OpenGL import GL
    except ImportError as e:
        raise OpenGLUnavailable(f"PyOpenGL cannot be imported ({e})") from None
    except Exception as e:        # a platform library that will not load
        raise OpenGLUnavailable(f"PyOpenGL cannot load its OpenGL library ({_short(e)})") from None
    return GL


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


class Context:
    """One OpenGL context and what lives in it (programs; buffers hold their own handles)."""

    def __init__(self, GL, egl=None):
        self.GL = GL
        self._egl = egl                    # (EGL module, display, context) when we made it
        self.lock = threading.RLock()
        self.programs: dict[str, int] = {}
        self.renderer = GL.glGetString(GL.GL_RENDERER).decode(errors="replace")
        self.version = GL.glGetString(GL.GL_VERSION).decode(errors="replace")
        major = GL.glGetIntegerv(GL.GL_MAJOR_VERSION)
        minor = GL.glGetIntegerv(GL.GL_MINOR_VERSION)
        self.gl_version = (int(major), int(minor))
        self.max_group_size = tuple(int(GL.glGetIntegeri_v(GL.GL_MAX_COMPUTE_WORK_GROUP_SIZE, i)[0])
                                    for i in range(3))
        self.max_group_invocations = int(GL.glGetIntegerv(GL.GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS))
        self.max_shared_bytes = int(GL.glGetIntegerv(GL.GL_MAX_COMPUTE_SHARED_MEMORY_SIZE))

    def use(self):
        """A context manager: the lock held and this context current on the calling thread."""
        ctx = self

        class _Use:
            def __enter__(self_):
                ctx.lock.acquire()
                if ctx._egl is not None:
                    EGL, dpy, c = ctx._egl
                    if EGL.eglGetCurrentContext() != c:
                        EGL.eglMakeCurrent(dpy, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, c)
                return ctx.GL

            def __exit__(self_, *exc):
                ctx.lock.release()
                return False
        return _Use()

    def program(self, source: str, kernel: str) -> int:
        """The linked compute program for `source` (compiled once per context)."""
        prog = self.programs.get(source)
        if prog is not None:
            return prog
        GL = self.GL
        shader = GL.glCreateShader(GL.GL_COMPUTE_SHADER)
        GL.glShaderSource(shader, source)
        GL.glCompileShader(shader)
        if not GL.glGetShaderiv(shader, GL.GL_COMPILE_STATUS):
            log = _text(GL.glGetShaderInfoLog(shader))
            GL.glDeleteShader(shader)
            raise shader_error(kernel, "compile", log, source)
        prog = GL.glCreateProgram()
        GL.glAttachShader(prog, shader)
        GL.glLinkProgram(prog)
        GL.glDeleteShader(shader)
        if not GL.glGetProgramiv(prog, GL.GL_LINK_STATUS):
            log = _text(GL.glGetProgramInfoLog(prog))
            GL.glDeleteProgram(prog)
            raise shader_error(kernel, "link", log, source)
        self.programs[source] = prog
        return prog


def _text(log) -> str:
    return log.decode(errors="replace") if isinstance(log, bytes) else str(log)


def shader_error(kernel: str, stage: str, log: str, source: str) -> GlslError:
    """The driver's first message, with the generated line it names (Mesa writes `0:LINE(COL):`,
    NVIDIA `0(LINE) :`)."""
    first = next((ln.strip() for ln in log.splitlines() if ln.strip()), "(no message)")
    m = re.search(r"\b0[:(](\d+)", first)
    shown = ""
    if m:
        n = int(m.group(1))
        lines = source.splitlines()
        if 1 <= n <= len(lines):
            shown = f"\n  generated line {n}: {lines[n - 1].strip()}"
    return GlslError(f"OpenGL refused the {stage} of kernel '{kernel}': {first}{shown}", None,
                     "this is a bug in hdsl's GLSL generator or a limit of the driver; "
                     "`hdsl compile --target opengl --emit glsl` writes the shader")


_CONTEXT: Context | None = None
_CONTEXT_ERROR: OpenGLUnavailable | None = None
_CONTEXT_LOCK = threading.Lock()


def context() -> Context:
    """The process's OpenGL context (made on first use; the failure is remembered too)."""
    global _CONTEXT, _CONTEXT_ERROR
    with _CONTEXT_LOCK:
        if _CONTEXT is not None:
            return _CONTEXT
        if _CONTEXT_ERROR is not None:
            raise _CONTEXT_ERROR
        try:
            _CONTEXT = _make_context()
        except OpenGLUnavailable as e:
            _CONTEXT_ERROR = e
            raise
        return _CONTEXT


def available() -> bool:
    """Whether `context()` succeeds (tests skip the device checks where it does not)."""
    try:
        context()
        return True
    except OpenGLUnavailable:
        return False


def _make_context() -> Context:
    GL = _import_gl()
    platform = os.environ.get("PYOPENGL_PLATFORM", "")
    if platform != "egl":
        # the user's own window-system context, if one is current on this thread
        try:
            if GL.glGetString(GL.GL_VERSION):
                return _checked(Context(GL))
        except Exception as e:
            raise OpenGLUnavailable(f"PyOpenGL's platform is '{platform or 'default'}' and no OpenGL "
                                    f"context is current ({_short(e)}); leave PYOPENGL_PLATFORM unset "
                                    "to use EGL") from None
        raise OpenGLUnavailable(f"PyOpenGL's platform is '{platform or 'default'}' and no OpenGL context is "
                                "current; leave PYOPENGL_PLATFORM unset to use EGL")
    try:
        from OpenGL import EGL
        dpy = EGL.eglGetPlatformDisplayEXT(_EGL_PLATFORM_SURFACELESS_MESA, EGL.EGL_DEFAULT_DISPLAY, None)
        if not dpy:
            dpy = EGL.eglGetDisplay(EGL.EGL_DEFAULT_DISPLAY)
        major, minor = EGL.EGLint(), EGL.EGLint()
        if not dpy or not EGL.eglInitialize(dpy, ctypes.byref(major), ctypes.byref(minor)):
            raise OpenGLUnavailable("EGL found no display (no EGL driver such as Mesa's libegl-mesa0)")
        if not EGL.eglBindAPI(EGL.EGL_OPENGL_API):
            raise OpenGLUnavailable("the EGL driver offers no desktop OpenGL")
        attrs = (EGL.EGLint * 3)(EGL.EGL_RENDERABLE_TYPE, EGL.EGL_OPENGL_BIT, EGL.EGL_NONE)
        cfg, n = EGL.EGLConfig(), EGL.EGLint()
        ok = EGL.eglChooseConfig(dpy, attrs, ctypes.byref(cfg), 1, ctypes.byref(n))
        cattrs = (EGL.EGLint * 7)(EGL.EGL_CONTEXT_MAJOR_VERSION, 4, EGL.EGL_CONTEXT_MINOR_VERSION, 3,
                                  EGL.EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL.EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
                                  EGL.EGL_NONE)
        ctx = EGL.eglCreateContext(dpy, cfg if ok and n.value else EGL.EGLConfig(), EGL.EGL_NO_CONTEXT, cattrs)
        if not ctx:
            raise OpenGLUnavailable("the EGL driver cannot make an OpenGL 4.3 core context")
        if not EGL.eglMakeCurrent(dpy, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, ctx):
            raise OpenGLUnavailable("the EGL driver cannot make a context current without a surface")
    except OpenGLUnavailable:
        raise
    except Exception as e:
        op = getattr(getattr(e, "baseOperation", None), "__name__", None)
        err = str(getattr(e, "err", "")).split(" ")[0]
        if op is not None:
            raise OpenGLUnavailable(f"EGL's {op} failed ({err}): no EGL driver such as Mesa's libegl-mesa0 "
                                    "answered") from None
        raise OpenGLUnavailable(f"EGL failed ({_short(e)})") from None
    return _checked(Context(GL, (EGL, dpy, ctx)))


def _checked(c: Context) -> Context:
    if c.gl_version < (4, 3):
        raise OpenGLUnavailable(f"the context is OpenGL {c.version} ({c.renderer}), which has no compute shaders")
    return c


# --- buffers ------------------------------------------------------------------------------

def device_dtype(t) -> np.dtype:
    """The 32-bit word an element of hdsl type `t` is stored in on the device."""
    if t.is_float():
        if t.bits != 32:
            raise InternalError(f"opengl: no device storage for {t}")
        return np.dtype(np.float32)
    if t.bits > 32:
        raise InternalError(f"opengl: no device storage for {t}")
    return np.dtype(np.int32 if t.is_int() else np.uint32)


class DeviceBuffer:
    """A host array and its shader storage buffer, with dirty bits (Halide's halide_buffer_t
    discipline): `to_device()` copies in only when the host is newer, `to_host()` copies out
    only when the device is newer; a kernel that writes the buffer calls `written_on_device()`."""

    def __init__(self, ctx: Context, host: np.ndarray, t):
        self.ctx = ctx
        self.host = host                    # flat, in hdsl's element type
        self.type = t
        self.words = device_dtype(t)
        self.handle = None
        self.host_dirty = True              # host newer than device
        self.device_dirty = False           # device newer than host
        self.copies_in = self.copies_out = 0

    def to_device(self):
        GL = self.ctx.GL
        if self.handle is None:
            self.handle = int(GL.glGenBuffers(1))
        if self.host_dirty:
            data = np.ascontiguousarray(self.host.reshape(-1).astype(self.words))
            GL.glBindBuffer(GL.GL_SHADER_STORAGE_BUFFER, self.handle)
            # (at least one word: a zero-sized buffer cannot be bound)
            GL.glBufferData(GL.GL_SHADER_STORAGE_BUFFER, max(4, data.nbytes),
                            data if data.nbytes else None, GL.GL_DYNAMIC_COPY)
            self.host_dirty = False
            self.copies_in += 1
        return self.handle

    def written_on_device(self):
        self.device_dirty = True

    def to_host(self) -> np.ndarray:
        if self.device_dirty and self.host.size:
            GL = self.ctx.GL
            GL.glMemoryBarrier(GL.GL_BUFFER_UPDATE_BARRIER_BIT)
            GL.glBindBuffer(GL.GL_SHADER_STORAGE_BUFFER, self.handle)
            raw = GL.glGetBufferSubData(GL.GL_SHADER_STORAGE_BUFFER, 0, self.host.size * 4)
            words = np.frombuffer(bytes(raw) if not isinstance(raw, np.ndarray) else raw.tobytes(),
                                  dtype=self.words, count=self.host.size)
            flat = self.host.reshape(-1)
            with np.errstate(all="ignore"):
                flat[...] = (words != 0) if self.type.is_bool() else words.astype(self.host.dtype)
            self.copies_out += 1
        self.device_dirty = False
        return self.host

    def release(self):
        if self.handle is not None:
            with self.ctx.use() as GL:
                GL.glDeleteBuffers(1, [self.handle])
            self.handle = None


def compile_pipeline(pipeline, schedule: str | None):
    """`Pipeline.compile("opengl")`: needs a usable context first (one clear sentence when there
    is none). Running whole pipelines waits for the GPU lowering (kernel outlining and the host
    side of a launch, branch `gpu`); until then this target compiles hand-built kernels only."""
    context()
    raise HdslError("target 'opengl' cannot run whole pipelines yet: it needs the GPU lowering "
                    "(kernel outlining) that the CUDA back end brings", None,
                    "run on --target host or --target interp meanwhile")


# --- launching kernels --------------------------------------------------------------------

def _uniform(GL, loc: int, t, value):
    if loc < 0:
        return              # (a uniform the shader does not use is optimized away)
    if t.is_float():
        GL.glUniform1f(loc, float(np.float32(value)))
    elif t.is_uint():
        GL.glUniform1ui(loc, int(value) & 0xFFFFFFFF)
    else:
        GL.glUniform1i(loc, int(value))


def launch(kernel, grid, buffers: dict, scalars: dict, threads=None, fast_math: bool = False):
    """Run `kernel` (an hdsl.ir.kernel.Kernel) over `grid` work groups (x first): each buffer
    argument from `buffers` (name -> DeviceBuffer, copied in if the host is newer), each scalar
    from `scalars` (name -> value); buffers the kernel writes become device-dirty."""
    from hdsl.codegen.glsl import compile_kernel
    ctx = context()
    gk = compile_kernel(kernel, fast_math, threads)
    sizes = gk.group_size
    n_threads = sizes[0] * sizes[1] * sizes[2]
    if n_threads > ctx.max_group_invocations or any(s > m for s, m in zip(sizes, ctx.max_group_size)):
        raise HdslError(f"kernel '{kernel.name}' asks for work groups of {sizes[0]}x{sizes[1]}x{sizes[2]} "
                        f"threads, more than this OpenGL allows ({ctx.max_group_invocations} in all, "
                        f"{'x'.join(map(str, ctx.max_group_size))} per dimension)", None,
                        "use smaller gpu_threads / gpu_tile factors")
    groups = [int(g) for g in grid] + [1] * (3 - len(grid))
    with ctx.use() as GL:
        prog = ctx.program(gk.source, kernel.name)
        GL.glUseProgram(prog)
        for name, (ident, t) in gk.uniforms.items():
            _uniform(GL, GL.glGetUniformLocation(prog, ident), t, scalars[name])
        for binding, a in enumerate(gk.buffers):
            GL.glBindBufferBase(GL.GL_SHADER_STORAGE_BUFFER, binding, buffers[a.name].to_device())
        if all(g > 0 for g in groups):
            GL.glDispatchCompute(*groups)
        GL.glMemoryBarrier(GL.GL_SHADER_STORAGE_BARRIER_BIT | GL.GL_BUFFER_UPDATE_BARRIER_BIT)
        for a in gk.buffers:
            if a.access != "r":
                buffers[a.name].written_on_device()


def run_kernel(kernel, grid, arrays: dict, scalars: dict | None = None, threads=None, fast_math: bool = False):
    """`launch` on NumPy arrays (flat, of each buffer argument's element type), copied back after."""
    ctx = context()
    types = {a.name: a.type for a in kernel.args if a.kind == "buffer"}
    bufs = {n: DeviceBuffer(ctx, np.array(arr, order="C").reshape(-1), types[n]) for n, arr in arrays.items()}
    try:
        launch(kernel, grid, bufs, scalars or {}, threads, fast_math)
        with ctx.use():
            out = {n: b.to_host().reshape(np.shape(arrays[n])) for n, b in bufs.items()}
    finally:
        for b in bufs.values():
            b.release()
    return out
