"""Compile fragment shaders (the files given) on an OpenGL ES context made with EGL on Mesa's
surfaceless platform, in a process of its own (tests/opengl/test_fragment.py runs it): the
shaders say `#version 300 es`, so the compiler holds them to GLSL ES 3.00's rules, not to the
desktop context's ARB_ES3_compatibility. Prints one line per file; exit status 1 if any fails."""
import ctypes, os, sys
os.environ["PYOPENGL_PLATFORM"] = "egl"
from OpenGL import EGL
from OpenGL import GLES3 as GL
dpy = EGL.eglGetPlatformDisplayEXT(0x31DD, EGL.EGL_DEFAULT_DISPLAY, None)
major, minor = EGL.EGLint(), EGL.EGLint()
assert EGL.eglInitialize(dpy, ctypes.byref(major), ctypes.byref(minor))
assert EGL.eglBindAPI(EGL.EGL_OPENGL_ES_API)
attrs = (EGL.EGLint * 3)(EGL.EGL_RENDERABLE_TYPE, 0x4, EGL.EGL_NONE)   # EGL_OPENGL_ES2_BIT (ES 3 contexts from it)
cfg, n = EGL.EGLConfig(), EGL.EGLint()
ok = EGL.eglChooseConfig(dpy, attrs, ctypes.byref(cfg), 1, ctypes.byref(n))
cattrs = (EGL.EGLint * 5)(EGL.EGL_CONTEXT_MAJOR_VERSION, 3, EGL.EGL_CONTEXT_MINOR_VERSION, 0, EGL.EGL_NONE)
ctx = EGL.eglCreateContext(dpy, cfg if ok and n.value else EGL.EGLConfig(), EGL.EGL_NO_CONTEXT, cattrs)
assert ctx
assert EGL.eglMakeCurrent(dpy, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, ctx)
print("context:", ctypes.string_at(GL.glGetString(GL.GL_VERSION)).decode() if not isinstance(GL.glGetString(GL.GL_VERSION), bytes) else GL.glGetString(GL.GL_VERSION))
bad = 0
for path in sys.argv[1:]:
    src = open(path).read()
    sh = GL.glCreateShader(GL.GL_FRAGMENT_SHADER)
    GL.glShaderSource(sh, src)
    GL.glCompileShader(sh)
    ok = GL.glGetShaderiv(sh, GL.GL_COMPILE_STATUS)
    print(path, "ok" if ok else "FAILED: " + str(GL.glGetShaderInfoLog(sh)))
    bad += not ok
sys.exit(1 if bad else 0)
