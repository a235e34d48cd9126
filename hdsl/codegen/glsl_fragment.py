"""OpenGL's fragment path: a kernel of a Func scheduled `glsl(x, y, c)` as a GLSL ES 3.00
fragment shader (the design of Halide's OpenGL back end, 2016): one fragment per (x, y), the
Func's channels c (a constant extent of at most 4) in the components of one RGBA texel.

The shader is made by the compute path's generator (hdsl/codegen/glsl.py: the same typed
expressions, the same IR rewrites for the semantics GLSL lacks) with four things of its own:
- the block loops are the fragment's position: x = min + int(gl_FragCoord.x), y likewise;
- the buffers it reads are textures read with texelFetch: each holds its buffer's elements in
  order, `width` per row, one element per texel (so any layout, planar or interleaved, strides
  of any size, reads as it is, and the runtime copies the buffer into it on the device);
- the Func's store of channel c is component c of the fragment's color (`hdsl_color`), rendered
  into an RGBA texture of the formats below; the runtime copies each component into the
  output buffer where the store's index says, on the device (glReadPixels into the buffer);
- only what OpenGL ES 3.0 has: `#version 300 es`, no storage buffers, images or atomics; ES 3.00
  has no `precise` (a macro that is one where the driver has GL_EXT_gpu_shader5): the color is
  declared `invariant` instead, which makes the compiler compute everything it depends on
  exactly as written (Mesa: propagate_invariance marks those values precise).

Element type -> texture formats (input, render target), and how a value crosses:
  u8            R8 / RGBA8 (unsigned normalized): read v*255 rounded; written as u/255, which
                the store turns back into u exactly (it stores rint(clamp(v, 0, 1) * 255))
  i8, u16, i16  R8I, R16UI, R16I / RGBA8I, RGBA16UI, RGBA16I (integer textures, exact)
  i32, u32      R32I, R32UI / RGBA32I, RGBA32UI
  bool          R8UI / RGBA8UI (0 or 1)
  f32           R32F / RGBA32F: reading is core ES 3.0; rendering to it needs
                EXT_color_buffer_float on ES (core in desktop OpenGL, which llvmpipe runs)
  f16, f64, i64 refused (GLSL ES has none).
"""
from __future__ import annotations

from dataclasses import dataclass

from hdsl.codegen.glsl import GlslCodeGen, GlslKernel, GlslUnsupported, _Mem, _nested_count, inline
from hdsl.diagnostics import InternalError
from hdsl.ir.expr import Const, Expr
from hdsl.ir.kernel import Kernel
from hdsl.ir.stmt import Allocate, For, LetStmt, Stmt, Store
from hdsl.ir.types import Type
from hdsl.lower.glsl_rewrites import narrow_64bit, rewrite_stmt

ES_VERSION = "#version 300 es"
MAX_CHANNELS = 4

# element type -> (input texture's internal format, render target's, sampler prefix, pixel type)
_FORMATS = {
    ("uint", 8): ("R8", "RGBA8", "", "UNSIGNED_BYTE"),
    ("int", 8): ("R8I", "RGBA8I", "i", "BYTE"),
    ("uint", 16): ("R16UI", "RGBA16UI", "u", "UNSIGNED_SHORT"),
    ("int", 16): ("R16I", "RGBA16I", "i", "SHORT"),
    ("uint", 32): ("R32UI", "RGBA32UI", "u", "UNSIGNED_INT"),
    ("int", 32): ("R32I", "RGBA32I", "i", "INT"),
    ("float", 32): ("R32F", "RGBA32F", "", "FLOAT"),
    ("bool", 1): ("R8UI", "RGBA8UI", "u", "UNSIGNED_BYTE"),
}


def formats(t: Type, kernel: str = "?") -> tuple[str, str, str, str]:
    """(input texture format, render target format, sampler prefix, pixel type) of t."""
    kind = "bool" if t.is_bool() else "float" if t.is_float() else "int" if t.is_int() else "uint"
    f = _FORMATS.get((kind, 1 if t.is_bool() else t.bits))
    if f is None:
        what = "64-bit integers" if t.is_integral() else f"{t.bits}-bit floats"
        raise GlslUnsupported(f"kernel '{kernel}' computes with {t}, and GLSL ES has no {what}", None,
                              "use 8-, 16- or 32-bit integers or f32 in the stages scheduled glsl(...)")
    return f


@dataclass(frozen=True)
class FragmentLayout:
    """How a fragment kernel's color lands in its output buffer: the store's flat index as an
    expression of the kernel's scalars and the loop vars x, y, c (each from its min: the
    fragment at (i, j) is x = x_min + i, y = y_min + j; component k is c = c_min + k), and the
    type of the output. The runtime evaluates it at the launch's scalars."""
    output: str
    type: Type
    index: Expr
    x: tuple            # (var, min expr)
    y: tuple
    c: tuple | None     # (var, min expr) or None: one channel
    channels: int
    samplers: dict      # buffer read -> the sampler uniform of its texture


class FragmentCodeGen(GlslCodeGen):
    precise_kw = "HDSL_PRECISE "

    def __init__(self, kernel: Kernel, fast_math: bool = False):
        super().__init__(kernel, fast_math, (1, 1, 1), 0)
        self.func, self.cvar = kernel.fragment
        self.channel: str | None = None          # the GLSL identifier of the component index
        self.channels = 1
        self.output: str | None = None
        self.lets: dict[str, Expr] = {}           # the IR lets around the store, for its layout
        self.block_vars: list[tuple] = []         # (var, min) of the block loops, outermost first
        self.c_loop: tuple | None = None
        self.store_index: Expr | None = None
        self._store_expr: Expr | None = None       # the index of the Store being generated
        self.color_vec = "vec4"

    def unsupported(self, what: str, hint: str | None = None) -> GlslUnsupported:
        e = super().unsupported(what, hint)
        e.func = self.func
        return e

    def generate(self) -> str:
        k = self.kernel
        body = rewrite_stmt(narrow_64bit(k.body))
        if _nested_count(body, "gpu_block") != 2:
            raise self.unsupported("the fragment path renders a 2-D grid of (x, y); this kernel's "
                                   f"has {_nested_count(body, 'gpu_block')} dimension(s)")
        header = [ES_VERSION,
                  f"// kernel {k.name}: a fragment shader of OpenGL ES 3.0, generated by hdsl "
                  "(hdsl/codegen/glsl_fragment.py)",
                  "#ifdef GL_EXT_gpu_shader5",
                  "#extension GL_EXT_gpu_shader5 : enable",
                  "#define HDSL_PRECISE precise",
                  "#else",
                  "#define HDSL_PRECISE",
                  "#endif",
                  "precision highp float;", "precision highp int;", "precision highp sampler2D;",
                  "precision highp isampler2D;", "precision highp usampler2D;"]
        used = _mentioned(body)
        writes = [a for a in k.args if a.kind == "buffer" and a.access != "r"]
        if len(writes) != 1 or writes[0].access != "w":
            raise self.unsupported("a fragment writes only its own Func's value, but this kernel "
                                   f"writes {', '.join(a.name for a in writes) or 'nothing'}"
                                   + (" and reads it" if writes and writes[0].access == "rw" else ""))
        for a in k.args:
            if a.kind == "scalar":
                if a.name not in used:
                    continue
                ident = self.names.fresh(a.name)
                header.append(f"uniform {self.type(a.type)} {ident};  // {a.name}: {a.type}")
                self.env[a.name] = (ident, a.type)
                self.uniforms[a.name] = (ident, a.type)
            elif a.access == "r":
                internal, _, prefix, _ = formats(a.type, k.name)
                ident = self.names.fresh(a.name)
                header.append(f"uniform highp {prefix}sampler2D {ident};  // {a.name}: {a.type}, "
                              f"{internal}, its elements in order, a row of textureSize(.).x each")
                width = self.names.fresh(a.name + "_width")
                self.emit(f"int {width} = textureSize({ident}, 0).x;")
                self.buffers[a.name] = _Mem(ident, a.type, "texture", width)
            else:
                _, target, prefix, _ = formats(a.type, k.name)
                vec = {"": "vec4", "i": "ivec4", "u": "uvec4"}[prefix]
                # (invariant: the compiler must compute it the same way everywhere, which Mesa
                # does by making every value it depends on `precise`: no a*b+c contracted into
                # an fma, no select turned into a min that drops NaN; ES 3.00 has no `precise`)
                header.append(f"invariant layout(location = 0) out highp {vec} hdsl_color;  // {a.name}: "
                              f"{a.type}, rendered to {target}")
                self.buffers[a.name] = _Mem("hdsl_color", a.type, "color")
                self.output = a.name
                self.color_vec = vec
        self.lines.insert(0, f"    hdsl_color = {self.color_vec}(0);")
        self.stmt(body)
        if self.store_index is None:
            raise self.unsupported("this kernel stores no value of its Func")
        if self.loops:
            # (the compute path's check after each loop sets hdsl_cut: here a second render
            # target, 1 where the fragment's loops were cut short, which the launch reads)
            header.append("layout(location = 1) out highp uint hdsl_cut_target;  // 1: a loop was cut short")
            self.lines[0:0] = ["    bool hdsl_cut = false;"]
            self.lines.append("    hdsl_cut_target = hdsl_cut ? 1u : 0u;")
        return "\n".join(header + self.globals + [_helper(h) for h in self.helpers]
                         + ["void main() {"] + self.lines + ["}", ""])

    # --- statements ---
    def stmt(self, s: Stmt):
        if isinstance(s, LetStmt):
            self.lets[s.name] = s.value
        elif isinstance(s, Store):
            self._store_expr = s.index
        if isinstance(s, Allocate) and getattr(s, "memory", "heap") == "gpu_shared":
            raise self.unsupported(f"'{s.name}' is computed per work group (shared memory), which a fragment "
                                   "shader has not", f"compute '{s.name}' at the root (its own glsl(...) stage, "
                                   "or on the CPU) or inline it")
        super().stmt(s)

    def loop(self, s: For):
        if s.kind == "gpu_block":
            dim = _nested_count(s.body, "gpu_block")
            lo = self.expr(s.min)
            ident = self.bind(s.var, f"{lo} + int(gl_FragCoord.{'xy'[dim]})", s.min.type)
            self.block_vars.append((s.var, s.min))
        elif s.kind == "gpu_thread":
            if not (isinstance(s.extent, Const) and int(s.extent.value) == 1):
                raise self.unsupported("a fragment is one invocation: gpu_threads cannot be used with glsl()")
            ident = self.bind(s.var, self.expr(s.min), s.min.type)
        elif s.var == self.cvar:
            if not isinstance(s.extent, Const) or not 1 <= int(s.extent.value) <= MAX_CHANNELS:
                from hdsl.ir.printer import expr_str
                raise self.unsupported(
                    f"the channels c of glsl(x, y, c) are the components of one RGBA texel: their extent must "
                    f"be a constant of at most {MAX_CHANNELS}, not {expr_str(s.extent)}",
                    f"bound it: {self.func}.bound({self.cvar.rsplit('.', 1)[1]}, 0, 3).glsl(...)"
                    if not isinstance(s.extent, Const) else "split the channels over two Funcs")
            self.channels = int(s.extent.value)
            self.c_loop = (s.var, s.min)
            lo = self.expr(s.min)
            i = self.names.fresh(s.var + "_i")
            self.open(f"for (int {i} = 0; {i} < {self.channels}; ++{i})")
            ident = self.bind(s.var, f"{lo} + {i}", s.min.type)
            old = self.scoped(s.var, ident, s.min.type)
            self.channel = i
            self.stmt(s.body)
            self.channel = None
            self.restore(s.var, old)
            self.close()
            return
        else:
            # a serial loop: the compute path's, which reports a loop the driver cut short (in a
            # second render target here: a fragment shader has no storage buffer)
            return super().loop(s)
        old = self.scoped(s.var, ident, s.min.type)
        self.stmt(s.body)
        self.restore(s.var, old)

    def allocate(self, s: Allocate):
        if getattr(s, "memory", "heap") in ("gpu_local", "stack") and not isinstance(self.local_bounds.get(s.name),
                                                                                     Const):
            raise self.unsupported(f"'{s.name}' is computed per fragment with a size that is not a constant, "
                                   "which a fragment shader cannot hold", f"compute '{s.name}' at the root")
        super().allocate(s)

    # --- memory ---
    def load(self, name: str, idx: str) -> str:
        m = self.mem(name)
        if m.kind != "texture":
            return super().load(name, idx)
        t = m.type
        w = m.base
        texel = f"texelFetch({m.array}, ivec2({idx} % {w}, {idx} / {w}), 0).r"
        if t.is_bool():
            return f"{texel} != 0u"
        if t.is_float():
            return texel
        if t.is_uint() and t.bits == 8:
            # (R8 reads u / 255 rounded to float: times 255 it is within 2^-16 of u)
            return f"uint({texel} * 255.0 + 0.5)"
        return texel

    def store(self, name: str, idx: str, val: str):
        m = self.mem(name)
        if m.kind != "color":
            return super().store(name, idx, val)
        if self.store_index is not None:
            raise self.unsupported("a fragment stores its Func's value once per channel; this kernel stores more")
        self.store_index = self._store_expr
        t = m.type
        comp = self.channel if self.channel is not None else "0"
        v = f"float({val}) / 255.0" if (t.is_uint() and t.bits == 8) else f"uint({val})" if t.is_bool() else val
        self.emit(f"hdsl_color[{comp}] = {v};")


def _mentioned(body: Stmt) -> set:
    from hdsl.ir.closure import mentioned_names
    return mentioned_names(body)


def _helper(name: str) -> str:
    """A helper function of the compute path's, its `precise` temporaries ES's macro."""
    from hdsl.codegen.glsl import HELPERS
    return HELPERS[name].replace("precise ", "HDSL_PRECISE ")


def compile_fragment(kernel: Kernel, fast_math: bool = False) -> GlslKernel:
    """The fragment shader of a glsl-scheduled kernel, and how its color lands in its buffer."""
    cg = FragmentCodeGen(kernel, fast_math)
    source = cg.generate()
    if len(cg.block_vars) != 2:
        raise InternalError(f"glsl: fragment kernel {kernel.name} has {len(cg.block_vars)} block loops")
    (yv, ymin), (xv, xmin) = cg.block_vars      # (outermost first: y, then x)
    index = inline(cg.store_index, cg.lets)
    layout = FragmentLayout(cg.output, next(a.type for a in kernel.args if a.name == cg.output), index,
                            (xv, inline(xmin, cg.lets)), (yv, inline(ymin, cg.lets)),
                            (cg.c_loop[0], inline(cg.c_loop[1], cg.lets)) if cg.c_loop else None, cg.channels,
                            {n: m.array for n, m in cg.buffers.items() if m.kind == "texture"})
    bufs = tuple(a for a in kernel.args if a.kind == "buffer")
    return GlslKernel(kernel.name, source, cg.uniforms, bufs, (1, 1, 1), None, cg.loops, layout)
