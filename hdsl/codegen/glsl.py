"""GLSL code generation: one `Kernel` (hdsl/ir/kernel.py) -> one OpenGL 4.3 compute shader.

The kernel body is first rewritten by hdsl/lower/glsl_rewrites.py (Euclidean division, shifts,
saturating and out-of-range casts in terms of operations GLSL defines); this module then maps
the IR onto GLSL one node at a time:

- Types: bool -> bool; i8/i16/i32 -> int; u8/u16/u32 -> uint; f32 -> float. An 8- or 16-bit
  value is kept in canonical form in its 32-bit word (sign-extended for signed types, zero-
  extended for unsigned ones) and normalized after every operation that can leave that form
  (+ - * << unary - ~ and casts): `(x << 24) >> 24` for i8, `x & 0xffu` for u8. That is Halide's
  wrapping. 64-bit integers, f16 and f64 have no GLSL 4.3 type here: `GlslUnsupported`.
- Expressions are interned DAGs: every compound node becomes one temporary (`int t12 = ...;`),
  generated once per straight-line stretch and reused while it dominates; a select computes both
  sides (the rewrites make every operation safe to compute, taken or not).
- Floating point: temporaries are `precise` (no contraction into fma or other value-changing
  rewrites, GLSL 4.50 section 4.7.1), so + - * / and sqrt round as IEEE single precision does;
  with fast_math they are not, as the CPU's fast_math allows contraction. min/max are selects
  (a NaN operand gives the other one, as the evaluator), -x is 0 - x, float % is
  a - b * floor(a / b), round is roundEven.
- Loops: a "gpu_block" loop `v` is `v = min + gl_WorkGroupID[d] + hdsl_group_base[d]` (a grid
  larger than the driver's largest dispatch runs as several, each told its first group); a
  "gpu_thread" loop is
  `v = min + gl_LocalInvocationID[d]` under `if (gl_LocalInvocationID[d] < extent)`; dimension d
  counts the loops of the same kind nested inside (the innermost is x). Other loops are
  counted `for` loops. `GpuBarrier` is `memoryBarrierShared(); barrier();`.
- Buffers: each buffer argument is a std430 shader storage block (binding = its position among
  the buffer arguments) holding the host's bytes as they are: 32-bit elements as `int`, `uint`
  or `float` arrays, narrower ones (and bool, one byte as NumPy's) packed in `uint` words, read
  by shift and mask and written with atomicAnd/atomicOr on the element's bits (neighbouring
  elements of one word may be written by other threads at the same time). Read-only or
  write-only as the access says; scalars are uniforms; gpu_shared allocations are stretches of
  one `shared uint` array sized by the launch's shared bytes; a gpu_local one is a local array
  when its size is bounded by a constant, else a stretch of the invocation's part of a scratch
  storage buffer whose size per invocation (a bound over the kernel, an expression of its
  scalar arguments) is computed at each launch.
- Names: hdsl's names ('.' and '$' replaced) keep their spelling unless GLSL reserves them or
  they would hide a built-in function (`packed`, `min`, `exp`, ...): those get a prefix.
"""
from __future__ import annotations

import re

from dataclasses import dataclass

import numpy as np

from hdsl.diagnostics import HdslError, InternalError
from hdsl.ir.closure import mentioned_names
from hdsl.ir.expr import BinOp, Cast, Const, Expr, Intrinsic, Param, Select, Unary, Var
from hdsl.ir.kernel import Kernel
from hdsl.ir.stmt import (Allocate, Assert, Block, Evaluate, For, GpuBarrier, IfThenElse, Let, LetStmt, Load, Stmt,
                          Store)
from hdsl.ir.types import I32, Type
from hdsl.lower.glsl_rewrites import narrow_64bit, rewrite_stmt

GLSL_VERSION = "#version 430"
# GLSL 4.50's keywords and reserved words (section 3.6), the type names, and the built-in
# functions (a variable named like one would hide it): a name from hdsl that is one of these,
# starts with gl_ or holds "__" gets a prefix
_KEYWORDS = frozenset("""attribute const uniform varying buffer shared coherent volatile restrict readonly writeonly
atomic_uint layout centroid flat smooth noperspective patch sample break continue do for while switch case default
if else subroutine in out inout float double int void bool true false invariant precise discard return lowp mediump
highp precision struct common partition active asm class union enum typedef template this resource goto inline
noinline public static extern external interface long short half fixed unsigned superp input output hvec2 hvec3
hvec4 fvec2 fvec3 fvec4 filter sizeof cast namespace using packed main
vec2 vec3 vec4 ivec2 ivec3 ivec4 bvec2 bvec3 bvec4 uvec2 uvec3 uvec4 dvec2 dvec3 dvec4 mat2 mat3 mat4 mat2x2
mat2x3 mat2x4 mat3x2 mat3x3 mat3x4 mat4x2 mat4x3 mat4x4 dmat2 dmat3 dmat4 sampler1D sampler2D sampler3D samplerCube
image1D image2D image3D
radians degrees sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh pow exp log exp2 log2 sqrt inversesqrt
abs sign floor trunc round roundEven ceil fract mod modf min max clamp mix step smoothstep isnan isinf
floatBitsToInt floatBitsToUint intBitsToFloat uintBitsToFloat fma frexp ldexp packHalf2x16 unpackHalf2x16 length
distance dot cross normalize reflect refract uaddCarry usubBorrow umulExtended imulExtended bitfieldExtract
bitfieldInsert bitfieldReverse bitCount findLSB findMSB atomicAdd atomicMin atomicMax atomicAnd atomicOr atomicXor
atomicExchange atomicCompSwap barrier memoryBarrier memoryBarrierShared memoryBarrierBuffer groupMemoryBarrier
texelFetch texture any all not equal lessThan greaterThan hdsl_exp hdsl_shared hdsl_scratch hdsl_scratch_words hdsl_scratch_base hdsl_n hdsl_invocation hdsl_group_base hdsl_cut hdsl_status hdsl_kernel_code hdsl_cut_target hdsl_color""".split())
_MATH1 = {"sqrt": "sqrt", "exp": "hdsl_exp", "log": "log", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin",
          "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "floor": "floor",
          "ceil": "ceil", "trunc": "trunc", "round": "roundEven"}


# GLSL's exp on llvmpipe is exp2(x * log2(e)): the rounding of that product costs ~0.7 ulp per
# unit of |x| (60 ulp near 88). Cody-Waite reduction first (x = k ln2 + r, ln2 split in two so
# k * ln2_hi is exact), then exp2 of the small remainder, scaled by 2^k exactly: within 4 ulp of
# the correctly rounded result over the whole range (tests/opengl/test_glsl_kernels.py).
HELPERS = {"hdsl_exp": """float hdsl_exp(float x) {
    precise float k = roundEven(x * 1.4426950408889634);
    precise float r = (x - k * 0.693145751953125) - k * 1.428606765330187e-06;
    precise float m = exp2(r * 1.4426950408889634);
    int e = int(clamp(k, -300.0, 300.0));
    // 2^e in two halves: each stays a normal float while the product under- or overflows
    precise float y = m * exp2(float(e / 2)) * exp2(float(e - e / 2));
    return isinf(x) ? (x > 0.0 ? x : 0.0) : y;
}"""}

_FORMS = {"pow": "pow({0}, {1})", "atan2": "atan({0}, {1})", "is_nan": "isnan({0})", "is_inf": "isinf({0})",
          "is_finite": "!isnan({0}) && !isinf({0})"}


class GlslUnsupported(HdslError):
    """Something the kernel does that GLSL (as hdsl generates it) cannot do. `func`: the Func
    whose computation needs it, when known (check_kernels positions the error there)."""
    func: str | None = None


def glsl_type(t: Type, kernel: str = "?") -> str:
    if t.is_bool():
        return "bool"
    if t.is_float() and t.bits == 32:
        return "float"
    if t.is_integral() and t.bits <= 32:
        return "int" if t.is_int() else "uint"
    what = ("64-bit integers" if t.is_integral() else f"{t.bits}-bit floats")
    raise GlslUnsupported(f"kernel '{kernel}' computes with {t}, and OpenGL's GLSL has no {what}", None,
                          "use 32-bit types (i32/u32/f32) in the stages scheduled for the GPU")


def literal(t: Type, v) -> str:
    """A GLSL literal that means exactly `v` in type `t`."""
    if t.is_bool():
        return "true" if v else "false"
    if t.is_float():
        f = np.float32(v)
        if not np.isfinite(f) or (f != 0 and abs(f) < np.finfo(np.float32).tiny) or (f == 0 and np.signbit(f)):
            return f"uintBitsToFloat(0x{int(f.view(np.uint32)):08x}u)"
        # the double's shortest form: it names the f32 value exactly, so any correctly rounding
        # parser (to double or straight to float) gives that value back
        text = repr(float(f))
        text = text if ("." in text or "e" in text) else text + ".0"
        return f"({text})" if text.startswith("-") else text
    v = int(v)
    if t.is_uint():
        return f"{v & 0xFFFFFFFF}u"
    if v == -(1 << 31):
        return "(-2147483647 - 1)"
    return str(v) if v >= 0 else f"({v})"


def normalize(t: Type, s: str) -> str:
    """s (an int/uint GLSL expression) brought back to t's canonical form."""
    if t.is_bool() or t.is_float() or t.bits >= 32:
        return s
    if t.is_uint():
        return f"(({s}) & 0x{(1 << t.bits) - 1:x}u)"
    return f"((({s}) << {32 - t.bits}) >> {32 - t.bits})"


class _Names:
    """hdsl names (with '.' and '$') -> distinct GLSL identifiers."""

    def __init__(self):
        self.used: set[str] = set()

    def fresh(self, name: str) -> str:
        base = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_") or "v"
        base = re.sub(r"_+", "_", base)
        if base[0].isdigit() or base.startswith("gl_") or base in _KEYWORDS or re.fullmatch(r"t\d+", base):
            base = "h_" + base
        cand, n = base, 1
        while cand in self.used:
            n += 1
            cand = f"{base}_{n}"
        self.used.add(cand)
        return cand


class GlslCodeGen:
    precise_kw = "precise "        # (GLSL ES 3.00 has no `precise`: the fragment path's is a macro)

    def __init__(self, kernel: Kernel, fast_math: bool = False, threads: tuple[int, ...] | None = None,
                 shared_bytes: int | None = None):
        self.kernel = kernel
        self.fast_math = fast_math
        self.threads = threads
        self.names = _Names()
        self.lines: list[str] = []
        self.globals: list[str] = []
        self.indent = 1
        self.env: dict[str, tuple[str, Type]] = {}       # hdsl name -> (GLSL identifier, type)
        self.buffers: dict[str, _Mem] = {}             # hdsl buffer -> where its elements are
        self.cache: list[dict] = [{}]                   # id(expr) -> (expr, identifier), per scope
        self.reads: dict[int, bool] = {}                # id(expr) -> whether it loads from memory
        self.ntemp = 0
        self.uniforms: dict[str, tuple[str, Type]] = {}      # scalar argument -> (uniform, type)
        self.helpers: list[str] = []                          # HELPERS the kernel calls
        self.shared_bytes = shared_bytes
        self.current: str | None = None           # the buffer the statement being made stores to
        self.local_bounds = _local_bounds(kernel)  # per-invocation allocation -> its size's bound
        self.scratch_base: str | None = None      # set when an allocation lives in the scratch buffer
        self.scratch_top = "hdsl_scratch_base"
        self.shared_words: int | None = None      # set when the kernel has gpu_shared allocations
        self.shared_top = "0"
        self.shared_allocs = 0
        self.loops = False                         # whether the kernel has serial loops

    # --- errors ---
    def unsupported(self, what: str, hint: str | None = None) -> GlslUnsupported:
        e = GlslUnsupported(f"kernel '{self.kernel.name}': {what}", None, hint)
        e.func = self.current
        return e

    def type(self, t: Type) -> str:
        try:
            return glsl_type(t, self.kernel.name)
        except GlslUnsupported as e:
            e.func = self.current
            raise

    # --- output ---
    def emit(self, line: str):
        self.lines.append("    " * self.indent + line)

    def open(self, head: str):
        self.emit(head + " {" if head else "{")
        self.indent += 1
        self.cache.append({})
        self.forget_loads()         # (a loop body runs again after its own stores)

    def close(self, tail: str = "}"):
        self.cache.pop()
        self.indent -= 1
        self.emit(tail)
        self.forget_loads()         # (the block may have stored)

    def forget_loads(self):
        """Drop the cached values that read memory: after a store, a barrier (other invocations'
        stores), or a block that may have stored, a load must be made again."""
        for scope in self.cache:
            for k in [k for k, (e, _) in scope.items() if self.loads(e)]:
                del scope[k]

    def loads(self, e: Expr) -> bool:
        r = self.reads.get(id(e))
        if r is None:
            r = isinstance(e, Load) or any(self.loads(c) for c in e.children())
            self.reads[id(e)] = r
        return r

    def generate(self) -> str:
        k = self.kernel
        body = rewrite_stmt(narrow_64bit(k.body))
        header = [GLSL_VERSION, f"// kernel {k.name}: generated by hdsl (hdsl/codegen/glsl.py)"]
        sizes = self.group_size()
        header.append("layout(" + ", ".join(f"local_size_{d} = {n}" for d, n in zip("xyz", sizes)) + ") in;")
        header.append("uniform ivec3 hdsl_group_base;  // the first work group of this dispatch")
        binding = 0
        used = mentioned_names(body)
        for a in k.args:
            if a.kind == "scalar" and a.name not in used:
                continue        # (a launch bound the host maximized over the grid: not the shader's)
            if a.kind == "buffer":
                packed = _packed(a.type)
                word = "uint" if packed else self.type(a.type)
                block = self.names.fresh(a.name + "_block")
                inst = self.names.fresh(a.name)
                # (packed stores use atomics, which need a buffer that can be read)
                qual = {"r": "readonly ", "w": "" if packed else "writeonly ", "rw": ""}[a.access or "rw"]
                header.append(f"layout(std430, binding = {binding}) {qual}buffer {block} {{ {word} d[]; }} {inst};"
                              f"  // {a.name}: {a.type}")
                self.buffers[a.name] = _Mem(f"{inst}.d", a.type, "packed" if packed else "ssbo")
                binding += 1
            elif a.kind == "scalar":
                ident = self.names.fresh(a.name)
                header.append(f"uniform {self.type(a.type)} {ident};  // {a.name}: {a.type}")
                self.env[a.name] = (ident, a.type)
                self.uniforms[a.name] = (ident, a.type)
            else:
                raise InternalError(f"glsl: kernel argument kind {a.kind}")
        self.stmt(body)
        if self.scratch_base is not None:
            header.append(f"layout(std430, binding = {binding}) buffer hdsl_scratch_block {{ uint d[]; }} hdsl_scratch;"
                          "  // per-invocation storage of run-time size")
            header.append("uniform int hdsl_scratch_words;  // per invocation: scratch_words(), set at launch")
            self.lines[0:0] = [
                "    // this invocation's part of the scratch buffer",
                "    uvec3 hdsl_n = gl_NumWorkGroups * gl_WorkGroupSize;",
                "    int hdsl_invocation = int((gl_GlobalInvocationID.z * hdsl_n.y + gl_GlobalInvocationID.y) * hdsl_n.x"
                " + gl_GlobalInvocationID.x);",
                "    int hdsl_scratch_base = hdsl_invocation * hdsl_scratch_words;"]
        if self.loops:
            # (after the scratch buffer, the launch binds a word that the invocations whose loops
            # the driver cut short set: see `loop`)
            header.append(f"layout(std430, binding = {binding + (self.scratch_base is not None)}) buffer "
                          "hdsl_status_block { uint d[]; } hdsl_status;  // set when a loop was cut short")
            header.append("uniform uint hdsl_kernel_code;  // which launch this is, for the report")
            self.lines[0:0] = ["    bool hdsl_cut = false;"]
            self.lines.append("    if (hdsl_cut) atomicMax(hdsl_status.d[0], hdsl_kernel_code);")
        if self.shared_words is not None:
            self.globals.append(f"shared uint hdsl_shared[{self.shared_size()}];")
        helpers = [HELPERS[h] for h in self.helpers]
        return "\n".join(header + self.globals + helpers + ["void main() {"] + self.lines + ["}", ""])

    def shared_size(self) -> int:
        """Words of the shared array: the launch's shared bytes, plus one word per allocation
        for the rounding of each to whole words."""
        n = self.shared_bytes
        if n is None:
            if not isinstance(self.kernel.shared_bytes, Const):
                raise InternalError(f"glsl: kernel {self.kernel.name}'s shared memory {self.kernel.shared_bytes} "
                                    "is not a constant: pass the launch's size")
            n = int(self.kernel.shared_bytes.value)
        return max(1, (int(n) + 3) // 4 + self.shared_allocs)

    def group_size(self) -> tuple[int, int, int]:
        if self.threads is not None:
            sizes = list(self.threads)
        else:
            sizes = []
            for e in self.kernel.threads:
                if not isinstance(e, Const):
                    raise InternalError(f"glsl: kernel {self.kernel.name}'s block size {e} is not a constant: "
                                        "pass the launch's sizes")
                sizes.append(int(e.value))
        sizes = [max(1, int(n)) for n in sizes] + [1] * (3 - len(sizes))
        return tuple(sizes[:3])

    # --- statements ---
    def bind(self, name: str, value: str, t: Type, const: bool = False) -> str:
        ident = self.names.fresh(name)
        prec = self.precise_kw if t.is_float() and not self.fast_math else ""
        self.emit(f"{prec}{'const ' if const else ''}{self.type(t)} {ident} = {value};")
        if name in self.env:
            # a rebinding: values cached under the old meaning of the name are stale
            self.cache = [{} for _ in self.cache]
        return ident

    def scoped(self, name: str, ident: str, t: Type):
        old = self.env.get(name)
        self.env[name] = (ident, t)
        return old

    def restore(self, name: str, old):
        # values cached under this binding must not serve a later binding of the same name
        # (sibling lets and loops of one name, as partitioned loops make)
        from hdsl.ir.expr import free_vars
        for scope in self.cache:
            for k in [k for k, (e, _) in scope.items() if name in free_vars(e)]:
                del scope[k]
        if old is None:
            self.env.pop(name, None)
        else:
            self.env[name] = old

    def stmt(self, s: Stmt):
        if isinstance(s, Block):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, LetStmt):
            v = self.expr(s.value)
            ident = self.bind(s.name, v, s.value.type)
            old = self.scoped(s.name, ident, s.value.type)
            self.stmt(s.body)
            self.restore(s.name, old)
        elif isinstance(s, For):
            self.loop(s)
        elif isinstance(s, IfThenElse):
            c = self.expr(s.cond)
            self.open(f"if ({c})")
            self.stmt(s.then)
            if s.otherwise is not None:
                self.close("}")
                self.lines.pop()
                self.open("} else")
                self.stmt(s.otherwise)
            self.close()
        elif isinstance(s, Store):
            self.current = s.buffer
            idx = self.expr(s.index)
            val = self.expr(s.value)
            self.store(s.buffer, idx, val)
            self.forget_loads()
        elif isinstance(s, Allocate):
            self.allocate(s)
        elif isinstance(s, GpuBarrier):
            self.emit("memoryBarrierShared();")
            self.emit("barrier();")
            self.forget_loads()
        elif isinstance(s, Evaluate):
            if any(isinstance(n, Intrinsic) and n.name == "print" for n in _walk(s.value)):
                raise self.unsupported("print() cannot run in an OpenGL shader",
                                       "print from a stage that runs on the CPU, or run with --target host")
            self.expr(s.value)
        elif isinstance(s, Assert):
            raise self.unsupported("a run-time check cannot stop an OpenGL shader")
        else:
            raise InternalError(f"glsl: unexpected statement {type(s).__name__}")

    def loop(self, s: For):
        if s.kind in ("gpu_block", "gpu_thread"):
            dim = _nested_count(s.body, s.kind)
            if dim > 2:
                raise self.unsupported(f"more than 3 nested {s.kind} loops")
            builtin = ("gl_WorkGroupID" if s.kind == "gpu_block" else "gl_LocalInvocationID") + "." + "xyz"[dim]
            lo = self.expr(s.min)
            if s.kind == "gpu_thread":
                ext = self.expr(s.extent)
                self.open(f"if (int({builtin}) < {ext})")
                index = f"int({builtin})"
            else:
                self.open("")
                # (a grid larger than the driver's largest dispatch runs as several dispatches,
                # each told where its groups start)
                index = f"(int({builtin}) + hdsl_group_base.{'xyz'[dim]})"
            ident = self.bind(s.var, f"{lo} + {index}", s.min.type)
            old = self.scoped(s.var, ident, s.min.type)
            self.stmt(s.body)
            self.restore(s.var, old)
            self.close()
            return
        lo = self.expr(s.min)
        ext = self.expr(s.extent)
        i = self.names.fresh(s.var + "_i")
        # counted from 0 to extent: no overflow of min + extent, and no iteration for extent <= 0.
        # The counter outlives the loop: a loop that stopped before its extent was cut short by the
        # driver (llvmpipe ends every loop of an invocation after 65535 iterations of them all,
        # silently), which the invocation reports in hdsl_status for the launch to raise
        self.emit(f"int {i} = 0;")
        self.open(f"for (; {i} < {ext}; ++{i})")
        ident = self.bind(s.var, f"{lo} + {i}", s.min.type)
        old = self.scoped(s.var, ident, s.min.type)
        self.stmt(s.body)
        self.restore(s.var, old)
        self.close()
        self.emit(f"if ({i} < {ext}) hdsl_cut = true;")
        self.loops = True

    def allocate(self, s: Allocate):
        memory = getattr(s, "memory", "heap")
        self.current = s.name
        old = self.buffers.get(s.name)
        if memory == "gpu_shared":
            # a stretch of the one shared array, from the words the enclosing allocations left
            # free (the launch's shared bytes bound them all, plus a word each for alignment)
            if self.shared_words is None:
                self.shared_words = 0
            size = self.expr(s.size)
            base = self.bind(s.name + ".base", self.shared_top, I32)
            old_top = self.shared_top
            words = f"({size} * {max(1, s.type.bits // 8)} + 3) / 4" if s.type.bits >= 8 else f"({size} + 3) / 4"
            self.shared_top = self.bind(s.name + ".end", f"{base} + max({words}, 0)", I32)
            self.shared_allocs += 1
            self.buffers[s.name] = _Mem("hdsl_shared", s.type, "shared", base)
            self.stmt(s.body)
            self.shared_top = old_top
        elif memory in ("gpu_local", "stack"):
            bound = self.local_bounds.get(s.name)
            if bound is None:
                from hdsl.ir.printer import expr_str
                raise self.unsupported(f"'{s.name}' is computed per thread with a size ({expr_str(s.size)}) "
                                       "that cannot be bounded when the kernel is launched",
                                       "compute it at the GPU block loop (shared memory) instead")
            if isinstance(bound, Const):
                word = self.type(s.type)
                ident = self.names.fresh(s.name)
                self.emit(f"{word} {ident}[{max(1, int(bound.value))}];  // {s.name}: {s.type}")
                self.buffers[s.name] = _Mem(ident, s.type, "array")
                self.stmt(s.body)
            else:
                # a size known at launch: a stretch of this invocation's part of the scratch buffer
                # (the launch allocates scratch_words() words per invocation)
                if self.scratch_base is None:
                    self.scratch_base = "hdsl_scratch_base"
                size = self.expr(s.size)
                base = self.bind(s.name + ".base", self.scratch_top, I32)
                old_top = self.scratch_top
                words = f"({size} * {max(1, s.type.bits // 8)} + 3) / 4" if s.type.bits >= 8 else f"({size} + 3) / 4"
                self.scratch_top = self.bind(s.name + ".end", f"{base} + max({words}, 0)", I32)
                self.buffers[s.name] = _Mem("hdsl_scratch.d", s.type, "shared", base)
                self.stmt(s.body)
                self.scratch_top = old_top
        else:
            raise self.unsupported(f"'{s.name}' needs heap memory, which a shader cannot allocate",
                                   "compute the Func at the GPU block or thread loops")
        if old is None:
            del self.buffers[s.name]
        else:
            self.buffers[s.name] = old

    def mem(self, name: str) -> "_Mem":
        m = self.buffers.get(name)
        if m is None:
            raise InternalError(f"glsl: kernel {self.kernel.name} uses buffer {name}, which is not its argument")
        return m

    def load(self, name: str, idx: str) -> str:
        m = self.mem(name)
        t = m.type
        if m.kind in ("ssbo", "array"):
            return f"{m.array}[{idx}]"
        if m.base is not None:
            idx = self.expr_text(f"{m.base} * {32 // _packing(t)[1]} + {idx}", "int") if _packed(t) else \
                self.expr_text(f"{m.base} + {idx}", "int")
        if not _packed(t):           # a 32-bit element in the shared uint array
            w = f"{m.array}[{idx}]"
            return f"uintBitsToFloat({w})" if t.is_float() else f"int({w})" if t.is_int() else w
        per, bits = _packing(t)
        w = f"{m.array}[{idx} >> {per.bit_length() - 1}]"
        shift = self.expr_text(f"uint({idx} & {per - 1}) * {bits}u", "uint")
        if t.is_bool():
            return f"(({w} >> {shift}) & 0xffu) != 0u"
        if t.is_uint():
            return f"({w} >> {shift}) & 0x{(1 << bits) - 1:x}u"
        return f"int({w} << ({32 - bits}u - {shift})) >> {32 - bits}"

    def store(self, name: str, idx: str, val: str):
        m = self.mem(name)
        t = m.type
        if m.kind in ("ssbo", "array"):
            self.emit(f"{m.array}[{idx}] = {val};")
            return
        if m.base is not None:
            idx = self.expr_text(f"{m.base} * {32 // _packing(t)[1]} + {idx}", "int") if _packed(t) else \
                self.expr_text(f"{m.base} + {idx}", "int")
        if not _packed(t):
            v = f"floatBitsToUint({val})" if t.is_float() else f"uint({val})"
            self.emit(f"{m.array}[{idx}] = {v};")
            return
        # the element's bits of its word replaced; other threads may write the word's other
        # elements at the same time, each its own bits: two atomics suffice
        per, bits = _packing(t)
        word = self.expr_text(f"{idx} >> {per.bit_length() - 1}", "int")
        shift = self.expr_text(f"uint({idx} & {per - 1}) * {bits}u", "uint")
        mask = f"0x{(1 << bits) - 1:x}u"
        v = f"uint({val})" if t.is_bool() else f"(uint({val}) & {mask})"
        self.emit(f"atomicAnd({m.array}[{word}], ~({mask} << {shift}));")
        self.emit(f"atomicOr({m.array}[{word}], {v} << {shift});")

    # --- expressions ---
    def expr(self, e: Expr) -> str:
        """An identifier or literal holding e's value (compound nodes become temporaries)."""
        if isinstance(e, Const):
            self.type(e.type)
            return literal(e.type, e.value)
        if isinstance(e, (Var, Param)):
            v = self.env.get(e.name)
            if v is None:
                raise InternalError(f"glsl: unbound variable {e.name} in kernel {self.kernel.name}")
            return v[0]
        for scope in reversed(self.cache):
            hit = scope.get(id(e))
            if hit is not None:
                return hit[1]
        if isinstance(e, Let):
            v = self.expr(e.value)
            ident = self.bind(e.name, v, e.value.type)
            old = self.scoped(e.name, ident, e.value.type)
            r = self.expr(e.body)
            self.restore(e.name, old)
            return r
        text = self.compute(e)
        prec = self.precise_kw if (e.type.is_float() or _float_compare(e)) and not self.fast_math else ""
        ident = self.expr_text(text, f"{prec}{self.type(e.type)}")
        self.cache[-1][id(e)] = (e, ident)
        return ident

    def expr_text(self, text: str, glsl_t: str) -> str:
        """A fresh temporary `t<n>` (a name no one uses) holding a GLSL expression; `glsl_t` is
        its declared type, with `precise` where strict floating point needs it."""
        self.ntemp += 1
        ident = f"t{self.ntemp}"
        while ident in self.names.used:
            self.ntemp += 1
            ident = f"t{self.ntemp}"
        self.names.used.add(ident)
        self.emit(f"{glsl_t} {ident} = {text};")
        return ident

    def compute(self, e: Expr) -> str:
        t = e.type
        self.type(t)
        if isinstance(e, Load):
            return self.load(e.buffer, self.expr(e.index))
        if isinstance(e, Cast):
            return self.cast(t, self.expr(e.value), e.value.type)
        if isinstance(e, BinOp):
            return self.binop(e)
        if isinstance(e, Unary):
            a = self.expr(e.a)
            if e.op == "!":
                return f"!{a}"
            if e.op == "~":
                return normalize(t, f"~{a}")
            if t.is_float():
                return f"0.0 - {a}"
            return normalize(t, f"0u - {a}" if t.is_uint() else f"-{a}")
        if isinstance(e, Select):
            c, x, y = self.expr(e.cond), self.expr(e.t), self.expr(e.f)
            return f"{c} ? {x} : {y}"
        if isinstance(e, Intrinsic):
            return self.intrinsic(e)
        raise InternalError(f"glsl: unexpected expression {type(e).__name__}")

    def cast(self, t: Type, v: str, src: Type) -> str:
        if t == src:
            return v
        if t.is_bool():
            return f"{v} != {literal(src, 0)}"
        if t.is_float():
            return f"float({v})"
        # to an integer: from a float in range and truncated (glsl_rewrites), from another
        # integer by its bits, then to t's width
        return normalize(t, f"{self.type(t)}({v})")

    def binop(self, e: BinOp) -> str:
        o, t = e.op, e.a.type
        a, b = self.expr(e.a), self.expr(e.b)
        if t.is_float():
            if o in ("+", "-", "*", "/"):
                return f"{a} {o} {b}"
            if o == "%":
                return f"{a} - {b} * floor({a} / {b})"
            if o in ("min", "max"):
                return f"{a} {'<' if o == 'min' else '>'} {b} ? {a} : {b}"
            if o in ("==", "!=", "<", "<=", ">", ">="):
                return f"{a} {o} {b}"
        elif t.is_bool():
            if o in ("&&", "&", "*"):
                return f"{a} && {b}"
            if o in ("||", "|"):
                return f"{a} || {b}"
            if o in ("^", "!="):
                return f"{a} != {b}"
            if o == "==":
                return f"{a} == {b}"
            if o in ("<", "<=", ">", ">=", "min", "max", "+", "-"):
                # (through 0/1: bool arithmetic is 1-bit unsigned)
                if o in ("<", "<=", ">", ">="):
                    return f"int({a}) {o} int({b})"
                return f"{a} {'&&' if o == 'min' else '||'} {b}" if o in ("min", "max") else \
                    f"{a} != {b}"
        else:
            if o in ("+", "-", "*"):
                return normalize(t, f"{a} {o} {b}")
            if o in ("min", "max"):
                return f"{o}({a}, {b})"
            if o in ("==", "!=", "<", "<=", ">", ">=", "&", "|", "^"):
                return f"{a} {o} {b}"
        if o in ("&&", "||"):
            return f"{a} {o} {b}"
        raise InternalError(f"glsl: operator {o} on {t} (not rewritten?)")

    def intrinsic(self, e: Intrinsic) -> str:
        name, t = e.name, e.type
        if name == "print":
            raise self.unsupported("print() cannot run in an OpenGL shader",
                                   "print from a stage that runs on the CPU, or run with --target host")
        args = [self.expr(a) for a in e.args]
        at = e.args[0].type if e.args else t
        if name in ("glsl_tdiv", "glsl_tmod"):
            a, b = args
            q = f"{a} / {b}"
            if name == "glsl_tdiv":
                return normalize(t, q)       # (only i8 -128 / -1 could leave the range: excluded)
            # GLSL's % is undefined for negative operands: a - (a / b) * b
            return f"{a} - ({a} / {b}) * {b}"
        if name in ("glsl_shl", "glsl_shr"):
            a, n = args        # (GLSL lets the amount's signedness differ from the value's)
            return normalize(t, f"{a} << {n}") if name == "glsl_shl" else f"{a} >> {n}"
        if name in _MATH1:
            fn = _MATH1[name]
            if fn in HELPERS and fn not in self.helpers:
                self.helpers.append(fn)
            return f"{fn}({args[0]})"
        if name in _FORMS:
            return _FORMS[name].format(*args)
        if name == "abs":
            if at.is_float():
                return f"abs({args[0]})"
            if at.is_int():
                return f"uint({args[0]} < 0 ? -{args[0]} : {args[0]})"
            return args[0]
        if name == "absd":
            a, b = args
            if at.is_float():
                return f"abs({a} - {b})"
            if at.is_int():
                return normalize(t, f"{a} > {b} ? uint({a}) - uint({b}) : uint({b}) - uint({a})")
            return f"{a} > {b} ? {a} - {b} : {b} - {a}"
        if name == "lerp":
            z, o, w = args
            wt = e.args[2].type
            if not t.is_float():
                return self.integer_lerp(t, z, o, w, wt)
            if not wt.is_float():
                w = f"(float({w}) / {literal(t, float(2 ** wt.bits - 1))})"
            return f"{z} * (1.0 - {w}) + {o} * {w}"
        raise self.unsupported(f"the built-in {name}() has no GLSL form yet")

    def integer_lerp(self, t: Type, z: str, o: str, w: str, wt: Type) -> str:
        """Halide's integer lerp (src/Lerp.cpp, as hdsl/interp/scalar.py's _lerp): the weight
        scaled to t's width, then (p / 2^b + p) / 2^b of p = z * (max - w) + o * w + 2^(b-1),
        in unsigned words with the carry of p kept by hand (p needs 2b + 1 bits)."""
        if t.is_bool():
            half = "0.5" if wt.is_float() else literal(wt, wt.max_value() // 2)
            return f"{w} > {half} ? {o} : {z}"
        bits = t.bits
        if bits > 16:
            raise self.unsupported(f"lerp of {t} values needs 64-bit products, which GLSL has not",
                                   "lerp 8- or 16-bit integers or floats on OpenGL, or compute the stage on the CPU")
        maxc = (1 << bits) - 1
        bias = f" ^ {1 << (bits - 1)}u" if t.is_int() else ""       # (the signed range moved to unsigned)
        zu = self.expr_text(f"(uint({z}){bias}) & {maxc}u", "uint")
        ou = self.expr_text(f"(uint({o}){bias}) & {maxc}u", "uint")
        if wt.is_float():
            tw = self.expr_text(f"uint(int(trunc({literal(wt, float(maxc))} * {w}))) & {maxc}u", "uint")
        elif wt.bits == bits:
            tw = self.expr_text(f"uint({w})", "uint")
        else:
            diff = wt.bits - bits
            left, shift, scale = abs(diff), min(bits, wt.bits), 1
            while left:
                scale = scale + (scale << shift)
                left -= shift
                shift *= 2
            tw = self.expr_text(f"(uint({w}) * {scale & 0xFFFFFFFF}u) & {maxc}u" if diff < 0
                                else f"uint({w}) / {scale}u", "uint")
        a = self.expr_text(f"{zu} * ({maxc}u - {tw})", "uint")
        b = self.expr_text(f"{ou} * {tw}", "uint")
        p = self.expr_text(f"{a} + {b}", "uint")
        c1 = self.expr_text(f"{p} < {a} ? 1u : 0u", "uint")
        p2 = self.expr_text(f"{p} + {1 << (bits - 1)}u", "uint")
        c2 = self.expr_text(f"{c1} + ({p2} < {p} ? 1u : 0u)", "uint")        # p = c2 * 2^32 + p2
        q = self.expr_text(f"({c2} << {32 - bits}u) | ({p2} >> {bits}u)", "uint")      # p / 2^b
        s = self.expr_text(f"{p2} + {q}", "uint")
        c3 = self.expr_text(f"{c2} + ({s} < {p2} ? 1u : 0u)", "uint")       # p + q = c3 * 2^32 + s
        r = f"(({c3} << {32 - bits}u) | ({s} >> {bits}u)) & {maxc}u"
        if t.is_int():
            return normalize(t, f"int(({r}){bias})")
        return r


@dataclass(frozen=True)
class _Mem:
    """Where a buffer's elements are: `array` (GLSL) of `kind` "ssbo" (typed 32-bit elements),
    "packed" (narrow elements packed in uint words), "shared" (the one shared uint array, from
    word `base`, 32-bit elements punned and narrow ones packed) or "array" (a local array)."""
    array: str
    type: Type
    kind: str
    base: str | None = None


def inline(x: Expr, lets: dict) -> Expr:
    """x with the kernel's lets (name -> value) substituted, to a fixed point."""
    from hdsl.ir.expr import free_vars, subst_vars
    from hdsl.ir.simplify import simplify
    for _ in range(64):
        names = [n for n in free_vars(x) if n in lets]
        if not names:
            break
        x = simplify(subst_vars(x, {n: lets[n] for n in names}))
    return x


def _local_bounds(kernel: Kernel) -> dict:
    """Each per-invocation (gpu_local or stack) allocation's size in elements bounded over the
    kernel: a Const, an expression of the kernel's scalar arguments (known at launch), or None
    (no such bound). Computed on the kernel as outlined (before the GLSL rewrites, which the
    bounds analysis does not know), with the lets inside the kernel substituted."""
    from hdsl.ir.expr import free_vars, subst_vars
    from hdsl.ir.simplify import simplify
    from hdsl.ir.stmt import children
    from hdsl.lower.glsl_rewrites import to32
    from hdsl.lower.gpu import _cancel_mins       # (as gpu.py bounds shared memory)
    from hdsl.lower.symbolic import expr_bounds
    scalars = {a.name for a in kernel.args if a.kind == "scalar"}
    out: dict = {}

    def visit(s: Stmt, lets: dict, ranges: dict):
        if isinstance(s, LetStmt):
            lets = {**lets, s.name: s.value}
        elif isinstance(s, For):
            last = simplify(BinOp("-", BinOp("+", s.min, s.extent, s.min.type), Const(s.min.type, 1), s.min.type))
            ranges = {**ranges, s.var: (s.min, last)}
        elif isinstance(s, Allocate) and getattr(s, "memory", "heap") in ("gpu_local", "stack"):
            e = simplify(_cancel_mins(inline(s.size, lets)))
            if e.type.bits == 64:
                e = simplify(to32(e, I32) or Cast(I32, e))
            hi = e
            for _ in range(4):
                if isinstance(hi, Const) or free_vars(hi) <= scalars:
                    break
                scope = {v: (inline(lo, lets), inline(h, lets)) for v, (lo, h) in ranges.items()}
                hi = expr_bounds(hi, scope)[1]
                hi = simplify(hi) if hi is not None else None
                if hi is None:
                    break
            ok = hi is not None and (isinstance(hi, Const) or free_vars(hi) <= scalars)
            out[s.name] = hi if ok else None
        for k in children(s):
            visit(k, lets, ranges)
    visit(kernel.body, {}, {})
    return out


def scratch_words(kernel: Kernel, bounds: dict | None = None) -> Expr:
    """Words of scratch buffer one invocation needs: its run-time sized per-invocation
    allocations' bounds (a word per element at most, one more for the rounding), added up."""
    from hdsl.ir.simplify import simplify
    bounds = _local_bounds(kernel) if bounds is None else bounds
    total: Expr = Const(I32, 0)
    for name, b in bounds.items():
        if b is None or isinstance(b, Const):
            continue
        # (at most a word per element: GLSL types are 32 bits at most, narrower ones packed)
        b = b if b.type == I32 else Cast(I32, b)
        total = BinOp("+", total, BinOp("+", BinOp("max", b, Const(I32, 0), I32), Const(I32, 1), I32), I32)
    return simplify(total)


def _packed(t: Type) -> bool:
    """Elements narrower than 32 bits are packed in the buffer's 32-bit words, as on the host."""
    return t.bits < 32 or t.is_bool()


def _packing(t: Type) -> tuple[int, int]:
    """(elements per word, bits per element); bool is a byte, as NumPy's."""
    bits = 8 if t.is_bool() else t.bits
    return 32 // bits, bits


def _float_compare(e: Expr) -> bool:
    return isinstance(e, BinOp) and e.a.type.is_float()


def _walk(e: Expr):
    from hdsl.ir.expr import walk
    return walk(e)


def _nested_count(s: Stmt, kind: str) -> int:
    """How many loops of `kind` s is or holds, along its deepest chain."""
    from hdsl.ir.stmt import children
    own = 1 if isinstance(s, For) and s.kind == kind else 0
    return own + max((_nested_count(c, kind) for c in children(s)), default=0)


@dataclass(frozen=True)
class GlslKernel:
    """A kernel's shader and how to feed it: the uniform of each scalar argument, the buffer
    arguments in binding order, and (when it has per-invocation storage of run-time size) the
    words of scratch buffer each invocation needs, an expression of the scalar arguments, bound
    after the buffers."""
    name: str
    source: str
    uniforms: dict
    buffers: tuple
    group_size: tuple
    scratch: Expr | None = None
    loops: bool = False
    fragment: object = None      # a fragment shader's FragmentLayout (hdsl/codegen/glsl_fragment.py)


def compile_kernel(kernel: Kernel, fast_math: bool = False, threads: tuple[int, ...] | None = None,
                   shared_bytes: int | None = None) -> GlslKernel:
    """The compute shader for `kernel` (threads, shared_bytes: the launch's block size and shared
    memory, when the kernel's are not constants)."""
    if getattr(kernel, "fragment", ()):
        from hdsl.codegen.glsl_fragment import compile_fragment
        return compile_fragment(kernel, fast_math)
    cg = GlslCodeGen(kernel, fast_math, threads, shared_bytes)
    source = cg.generate()
    scratch = scratch_words(kernel, cg.local_bounds) if cg.scratch_base is not None else None
    return GlslKernel(kernel.name, source, cg.uniforms, tuple(a for a in kernel.args if a.kind == "buffer"),
                      cg.group_size(), scratch, cg.loops)


def kernel_source(kernel: Kernel, fast_math: bool = False, threads: tuple[int, ...] | None = None,
                  shared_bytes: int | None = None) -> str:
    return compile_kernel(kernel, fast_math, threads, shared_bytes).source


def glsl_listing(stmt: Stmt, pipeline: str) -> str:
    """Every kernel of a lowered pipeline as its compute shader, one after another (what
    `hdsl compile --target opengl --emit glsl` writes). A block size or shared size that is not a
    constant is known only at each launch, where the runtime compiles the shader for it: the
    listing says so and shows the shader for 1 thread (or no shared memory) there."""
    from hdsl.ir.printer import expr_str
    from hdsl.lower.gpu import kernels_of
    ks = kernels_of(stmt)
    frag = sum(1 for lk in ks if lk.kernel.fragment)
    parts = [f"// pipeline {pipeline}: {len(ks) - frag} OpenGL compute shader(s) and {frag} fragment shader(s) "
             "(OpenGL ES 3.0), generated by hdsl"]
    for lk in ks:
        k = lk.kernel
        if k.fragment:
            parts.append(f"// rendered over ({', '.join(expr_str(g) for g in lk.grid)}) fragments (x, y) into an "
                         "RGBA texture, its channels in the components\n" + kernel_source(k))
            continue
        notes = [f"// launched over a grid of ({', '.join(expr_str(g) for g in lk.grid)}) work groups"]
        threads = []
        for e in k.threads:
            if isinstance(e, Const):
                threads.append(int(e.value))
            else:
                threads.append(1)
                notes.append(f"// the block size {expr_str(e)} is known at launch: the shader is compiled "
                             "for it then (shown here for 1)")
        shared = int(k.shared_bytes.value) if isinstance(k.shared_bytes, Const) else 0
        if not isinstance(k.shared_bytes, Const):
            notes.append(f"// the shared memory, {expr_str(k.shared_bytes)} bytes, is known at launch "
                         "(shown here for 0)")
        parts.append("\n".join(notes) + "\n" + kernel_source(k, threads=tuple(threads), shared_bytes=shared))
    return "\n\n".join(parts)


# OpenGL 4.3's least limits on a work group (GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS and _SIZE),
# used where no context exists to ask
MIN_GROUP_INVOCATIONS = 1024
MIN_GROUP_SIZE = (1024, 1024, 64)


def group_limits() -> tuple[int, tuple]:
    """(invocations per work group, sizes per dimension) of this machine's OpenGL, queried once
    where a context can be made, else OpenGL 4.3's minimums."""
    global _LIMITS
    if _LIMITS is None:
        try:
            from hdsl.runtime.opengl import context
            c = context()
            _LIMITS = (c.max_group_invocations, tuple(c.max_group_size))
        except Exception:       # (no OpenGL here: compiling still works, against the minimums)
            _LIMITS = (MIN_GROUP_INVOCATIONS, MIN_GROUP_SIZE)
    return _LIMITS


_LIMITS = None


def check_group_size(k: Kernel, schedule) -> None:
    """A kernel whose constant work group is larger than OpenGL allows is an error at the
    gpu_tile / gpu_threads directive that made its thread loops (sizes known only at launch are
    checked there)."""
    from hdsl.ir.stmt import children
    from hdsl.lower.gpu import _directive
    sizes = [int(t.value) if isinstance(t, Const) else None for t in k.threads]
    if not sizes or any(n is None for n in sizes):
        return
    most, per = group_limits()
    total = 1
    for n in sizes:
        total *= n
    over = [d for d, (n, m) in enumerate(zip(sizes, per)) if n > m]
    if total <= most and not over:
        return
    var = None
    stack = [k.body]
    while stack and var is None:
        s = stack.pop()
        if isinstance(s, For) and s.kind == "gpu_thread":
            var = s.var
        stack.extend(children(s))
    d = _directive(schedule, var) if var is not None else None
    shape = "x".join(map(str, sizes))
    what = (f"{total} invocations, more than the {most} this OpenGL allows" if total > most else
            f"{sizes[over[0]]} along {'xyz'[over[0]]}, more than the {per[over[0]]} this OpenGL allows there")
    raise HdslError(f"work groups of {shape} threads are {what}", d.span if d is not None else None,
                    "use smaller gpu_tile / gpu_threads factors (OpenGL 4.3 promises 1024 invocations, "
                    "1024x1024x64)")


def check_kernels(stmt: Stmt, pipeline, schedule) -> None:
    """Generate every kernel's shader once at compile time (for one thread and no shared memory
    where those are decided at launch), so that what GLSL cannot do is an error before anything
    runs, positioned at the definition of the Func that needs it (else at the schedule block)."""
    from hdsl.diagnostics import Diagnostic
    from hdsl.lower.gpu import kernels_of
    for lk in kernels_of(stmt):
        k = lk.kernel
        if not k.fragment:
            check_group_size(k, schedule)
        try:
            kernel_source(k, threads=tuple(int(t.value) if isinstance(t, Const) else 1 for t in k.threads),
                          shared_bytes=int(k.shared_bytes.value) if isinstance(k.shared_bytes, Const) else 0)
        except GlslUnsupported as e:
            f = next((f for f in pipeline.funcs if f.name == e.func), None) if e.func else None
            span = f.span if f is not None and f.span is not None else (schedule.span if schedule else None)
            if k.fragment:
                # (the fragment path's limits are the directive's: the error is there)
                from hdsl.lower.fragment import glsl_directives
                d = glsl_directives(schedule).get(k.fragment[0])
                span = d.span if d is not None and d.span is not None else span
            d = e.diagnostics[0]
            what = f"'{e.func}' runs on OpenGL: " if f is not None else ""
            raise HdslError(Diagnostic(what + d.message, span, d.hint)) from None
