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

Buffers. A device buffer is a shader storage buffer holding the host's bytes as they are
(hdsl/codegen/glsl.py packs elements narrower than 32 bits in words), so copies are plain
byte copies. `OpenGLDevice` is the "opengl" entry of the device-interface table
(hdsl/runtime/device.py) that compiled pipelines call: the generated host code keeps Halide's
dirty bits and asks for copies only when the other side is newer. `DeviceBuffer` does the same
for kernels launched from Python (`launch`, `run_kernel`: the tests' hand-built kernels).

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

from hdsl.diagnostics import HdslError
from hdsl.runtime.device import Device

_EGL_PLATFORM_SURFACELESS_MESA = 0x31DD
# Mesa's llvmpipe ends every loop of a shader invocation once 65535 iterations of all its loops
# have run (LP_MAX_TGSI_LOOP_ITERATIONS, gallivm/lp_bld_limits.h, "shared between every loop"),
# with no error: the shaders detect it (codegen/glsl.py) and the launch raises
LLVMPIPE_LOOP_LIMIT = 65535
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
        self._scratch: tuple[int, int] | None = None      # (buffer, bytes)
        self._status: int | None = None                   # see status()
        self._launched: list[str] = []                    # kernels with loops since check_loops()
        self.renderer = GL.glGetString(GL.GL_RENDERER).decode(errors="replace")
        self.version = GL.glGetString(GL.GL_VERSION).decode(errors="replace")
        major = GL.glGetIntegerv(GL.GL_MAJOR_VERSION)
        minor = GL.glGetIntegerv(GL.GL_MINOR_VERSION)
        self.gl_version = (int(major), int(minor))
        self.max_group_size = tuple(int(GL.glGetIntegeri_v(GL.GL_MAX_COMPUTE_WORK_GROUP_SIZE, i)[0])
                                    for i in range(3))
        self.max_group_invocations = int(GL.glGetIntegerv(GL.GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS))
        self.max_group_count = tuple(int(GL.glGetIntegeri_v(GL.GL_MAX_COMPUTE_WORK_GROUP_COUNT, i)[0])
                                     for i in range(3))
        self.max_shared_bytes = int(GL.glGetIntegerv(GL.GL_MAX_COMPUTE_SHARED_MEMORY_SIZE))
        self.max_texture_size = int(GL.glGetIntegerv(GL.GL_MAX_TEXTURE_SIZE))
        self.max_texture_units = int(GL.glGetIntegerv(GL.GL_MAX_COMBINED_TEXTURE_IMAGE_UNITS))

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

    def scratch(self, GL, nbytes: int) -> int:
        """A buffer of at least nbytes for kernels' per-invocation storage (kept, grown)."""
        if self._scratch is None or self._scratch[1] < nbytes:
            if self._scratch is not None:
                GL.glDeleteBuffers(1, [self._scratch[0]])
            self._scratch = (_buffer(GL, max(nbytes, 4)), max(nbytes, 4))
        return self._scratch[0]

    def status(self, GL, kernel: str) -> tuple[int, int]:
        """(the word kernels set when the driver cut one of their loops short, the code this
        launch of `kernel` sets there). It is read lazily, by check_loops() before the next copy
        to the host: reading it after every launch would wait for each kernel."""
        if self._status is None:
            self._status = _buffer(GL, 4)
            _upload(GL, self._status, np.zeros(1, np.uint32).ctypes.data, 4)
        self._launched.append(kernel)
        return self._status, len(self._launched)

    def check_loops(self, GL):
        """Raise if a kernel launched since the last check had a loop cut short (then clear)."""
        if not self._launched:
            return
        word = np.zeros(1, np.uint32)
        _download(GL, word.ctypes.data, self._status, 4)
        launched, self._launched = self._launched, []
        if word[0]:
            _upload(GL, self._status, np.zeros(1, np.uint32).ctypes.data, 4)
            raise self.loops_cut_error(launched[int(word[0]) - 1] if int(word[0]) <= len(launched) else "?")

    def loops_cut_error(self, kernel: str) -> HdslError:
        return HdslError(f"kernel '{kernel}' runs more loop iterations in one invocation than this OpenGL "
                         f"({self.renderer}) carries out: it ended the loops early and the results are wrong "
                         f"(llvmpipe stops every loop of an invocation after {LLVMPIPE_LOOP_LIMIT} iterations "
                         "of them all)", None,
                         "give each GPU thread (or fragment) less work: larger gpu_blocks/gpu_threads extents, "
                         "compute the Funcs inside the kernel at the block (shared memory), or at the root")

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

def _buffer(GL, nbytes: int) -> int:
    """A new shader storage buffer of nbytes (rounded up to whole 32-bit words, at least one)."""
    h = int(GL.glGenBuffers(1))
    GL.glBindBuffer(GL.GL_SHADER_STORAGE_BUFFER, h)
    GL.glBufferData(GL.GL_SHADER_STORAGE_BUFFER, max(4, (int(nbytes) + 3) // 4 * 4), None, GL.GL_DYNAMIC_COPY)
    return h


def _upload(GL, handle: int, host: int, nbytes: int):
    if nbytes > 0:
        GL.glBindBuffer(GL.GL_SHADER_STORAGE_BUFFER, handle)
        GL.glBufferSubData(GL.GL_SHADER_STORAGE_BUFFER, 0, int(nbytes), ctypes.c_void_p(host))


def _download(GL, host: int, handle: int, nbytes: int):
    if nbytes > 0:
        GL.glMemoryBarrier(GL.GL_BUFFER_UPDATE_BARRIER_BIT)
        GL.glBindBuffer(GL.GL_SHADER_STORAGE_BUFFER, handle)
        ptr = GL.glMapBufferRange(GL.GL_SHADER_STORAGE_BUFFER, 0, int(nbytes), GL.GL_MAP_READ_BIT)
        if not ptr:
            raise RuntimeError("glMapBufferRange failed")
        ctypes.memmove(host, ptr, int(nbytes))
        GL.glUnmapBuffer(GL.GL_SHADER_STORAGE_BUFFER)


class DeviceBuffer:
    """A host array and its shader storage buffer, byte for byte (hdsl/codegen/glsl.py reads
    narrow elements packed in words), with dirty bits (Halide's halide_buffer_t discipline):
    `to_device()` copies in only when the host is newer, `to_host()` copies out only when the
    device is newer; a kernel that writes the buffer calls `written_on_device()`. Call them
    inside `Context.use()`."""

    def __init__(self, ctx: Context, host: np.ndarray, t):
        self.ctx = ctx
        self.host = np.ascontiguousarray(host)
        self.type = t
        self.handle = None
        self.host_dirty = True              # host newer than device
        self.device_dirty = False           # device newer than host
        self.copies_in = self.copies_out = 0

    def to_device(self) -> int:
        if self.handle is None:
            self.handle = _buffer(self.ctx.GL, self.host.nbytes)
        if self.host_dirty:
            _upload(self.ctx.GL, self.handle, self.host.ctypes.data, self.host.nbytes)
            _touched(self.ctx, self.handle)
            self.host_dirty = False
            self.copies_in += 1
        return self.handle

    def written_on_device(self):
        self.device_dirty = True

    def to_host(self) -> np.ndarray:
        self.ctx.check_loops(self.ctx.GL)
        if self.device_dirty:
            _download(self.ctx.GL, self.host.ctypes.data, self.handle, self.host.nbytes)
            self.copies_out += 1
        self.device_dirty = False
        return self.host

    def release(self):
        if self.handle is not None:
            with self.ctx.use() as GL:
                GL.glDeleteBuffers(1, [self.handle])
            self.handle = None


def _touched(ctx: Context, handle: int):
    """A storage buffer changed: a fragment stage's texture of it must be made again."""
    from hdsl.runtime.opengl_fragment import textures
    textures(ctx).touched(handle)


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


def launch(kernel, grid, buffers: dict, scalars: dict, threads=None, fast_math: bool = False,
           shared_bytes: int | None = None, shaders: dict | None = None):
    """Run `kernel` (an hdsl.ir.kernel.Kernel) over `grid` work groups (x first): each buffer
    argument from `buffers` (name -> DeviceBuffer, copied in if the host is newer), each scalar
    from `scalars` (name -> value); buffers the kernel writes become device-dirty."""
    from hdsl.codegen.glsl import compile_kernel
    from hdsl.ir.types import I32
    ctx = context()
    key = (id(kernel), threads, shared_bytes, fast_math)
    hit = shaders.get(key) if shaders is not None else None
    if hit is not None and hit[0] is kernel:
        gk = hit[1]
    else:
        gk = compile_kernel(kernel, fast_math, threads, shared_bytes)
        if shaders is not None:
            shaders[key] = (kernel, gk)      # (the kernel kept alive: its id stays its own)
    if gk.fragment is not None:
        from hdsl.runtime.opengl_fragment import render
        render(ctx, kernel, gk, grid, buffers, scalars)
        return
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
        if gk.scratch is not None:
            per = _evaluate(gk.scratch, scalars)
            _uniform(GL, GL.glGetUniformLocation(prog, "hdsl_scratch_words"), I32, per)
            words = per * n_threads * groups[0] * groups[1] * groups[2]
            GL.glBindBufferBase(GL.GL_SHADER_STORAGE_BUFFER, len(gk.buffers), ctx.scratch(GL, words * 4))
        if gk.loops:
            status, code = ctx.status(GL, kernel.name)
            GL.glBindBufferBase(GL.GL_SHADER_STORAGE_BUFFER, len(gk.buffers) + (gk.scratch is not None), status)
            loc = GL.glGetUniformLocation(prog, "hdsl_kernel_code")
            if loc >= 0:
                GL.glUniform1ui(loc, code)
        if all(g > 0 for g in groups):
            # grids beyond the driver's largest dispatch in chunks, each told its first group
            base_loc = GL.glGetUniformLocation(prog, "hdsl_group_base")
            m = ctx.max_group_count
            for bz in range(0, groups[2], m[2]):
                for by in range(0, groups[1], m[1]):
                    for bx in range(0, groups[0], m[0]):
                        if base_loc >= 0:
                            GL.glUniform3i(base_loc, bx, by, bz)
                        GL.glDispatchCompute(min(m[0], groups[0] - bx), min(m[1], groups[1] - by),
                                             min(m[2], groups[2] - bz))
                        GL.glMemoryBarrier(GL.GL_SHADER_STORAGE_BARRIER_BIT)
        GL.glMemoryBarrier(GL.GL_SHADER_STORAGE_BARRIER_BIT | GL.GL_BUFFER_UPDATE_BARRIER_BIT)
        for a in gk.buffers:
            if a.access != "r":
                buffers[a.name].written_on_device()
                _touched(ctx, buffers[a.name].to_device())


def _evaluate(e, scalars: dict) -> int:
    """An i32 expression of a kernel's scalar arguments, for their values at a launch."""
    from hdsl.ir.expr import Const, free_vars, subst_vars
    from hdsl.ir.simplify import simplify
    v = simplify(subst_vars(e, {n: Const(e.type, int(scalars[n])) for n in free_vars(e)}))
    if not isinstance(v, Const):
        raise RuntimeError(f"cannot evaluate {e} at launch")
    return max(0, int(v.value))


def run_kernel(kernel, grid, arrays: dict, scalars: dict | None = None, threads=None, fast_math: bool = False):
    """`launch` on NumPy arrays (flat, of each buffer argument's element type), copied back after."""
    ctx = context()
    types = {a.name: a.type for a in kernel.args if a.kind == "buffer"}
    bufs = {n: DeviceBuffer(ctx, np.array(arr, order="C"), types[n]) for n, arr in arrays.items()}
    try:
        launch(kernel, grid, bufs, scalars or {}, threads, fast_math)
        with ctx.use():
            out = {n: b.to_host() for n, b in bufs.items()}
    finally:
        for b in bufs.values():
            b.release()
    return out


# --- the device of compiled pipelines ----------------------------------------------------------

class OpenGLDevice(Device):
    """The "opengl" device of the device-interface table: buffers are shader storage buffers,
    a launch runs the kernel's compute shader (compiled once per block size and context).
    The kernels come from the compiled variant about to run (`use`, before each call)."""

    name = "opengl"

    def __init__(self):
        super().__init__()
        self.ctx = context()            # (no usable OpenGL: OpenGLUnavailable, before any compiling)
        self.handles: set[int] = set()
        self.kernels: dict = {}         # {name: Kernel} of the variant about to run
        self.shaders: dict = {}         # the generated shaders, by kernel and launch sizes

    def use(self, code) -> None:
        self.kernels = code

    def malloc(self, nbytes: int) -> int:
        with self.ctx.use() as GL:
            h = _buffer(GL, nbytes)
        self.handles.add(h)
        return h

    def free(self, handle: int) -> None:
        if handle in self.handles:
            self.handles.discard(handle)
            with self.ctx.use() as GL:
                GL.glDeleteBuffers(1, [handle])

    def copy_to_device(self, handle: int, host: int, nbytes: int) -> None:
        with self.ctx.use() as GL:
            _upload(GL, handle, host, nbytes)
        _touched(self.ctx, handle)

    def copy_to_host(self, host: int, handle: int, nbytes: int) -> None:
        with self.ctx.use() as GL:
            self.ctx.check_loops(GL)
            _download(GL, host, handle, nbytes)

    def launch(self, kernel, host_fn, grid, threads, shared_bytes, args) -> None:
        k = self.kernels[kernel]
        scalars = {}
        for a, slot in zip(k.args, args):
            if a.kind == "scalar":
                raw = np.array([slot], dtype=np.uint64).view(np.uint8)[:max(1, a.type.bits // 8)]
                scalars[a.name] = raw.view(a.type.dtype if not a.type.is_bool() else np.uint8)[0]
        buffers = {a.name: _Handle(int(slot)) for a, slot in zip(k.args, args) if a.kind == "buffer"}
        launch(k, grid, buffers, scalars, threads=tuple(int(t) for t in threads[:max(1, len(k.threads))]),
               shared_bytes=int(shared_bytes), shaders=self.shaders)

    def release(self) -> None:
        for h in list(self.handles):
            self.free(h)


class _Handle:
    """A device buffer of the generated host code, which keeps the dirty bits itself."""

    def __init__(self, handle: int):
        self.handle = handle

    def to_device(self) -> int:
        return self.handle

    def written_on_device(self):
        pass
