"""Flat loop nest → LLVM IR (llvmlite), with the reference evaluator's semantics.

The generated function is

    i32 @NAME(ptr args, ptr err_info)

where args[k] points at input k's buffer struct, then at each param's value,
then at each output's buffer struct (in declaration order). A buffer struct is
`{ ptr host, i32 dims, i32 elem_bytes, i64 min[8], i64 extent[8], i64 stride[8] }`
(strides in elements). It returns 0, or an error code with four i64 values in
err_info (see hdsl/lower/loops.py for the codes).

Every operator is emitted with exactly the semantics of hdsl/interp/scalar.py:
Euclidean division with x / 0 == 0, wrapping integer arithmetic, defined
results for shifts and out-of-range float→int casts, IEEE floats with no
contraction (strict mode). Parallel loops are outlined into a task function
and run by the C thread pool (hdsl/runtime/thread_pool.c).
"""
from __future__ import annotations

from llvmlite import ir

from hdsl.diagnostics import InternalError
from hdsl.ir.expr import BinOp, Cast, Const, Expr, Intrinsic, Param, Select, Unary, Var, walk
from hdsl.ir.func import Pipeline
from hdsl.ir.stmt import (Allocate, Assert, Block, Evaluate, For, IfThenElse, LetStmt, Load, Stmt, Store)
from hdsl.ir.types import F32, F64, I32, I64, Type

MAX_DIMS = 8
I1T, I8T, I32T, I64T = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
BUFFER_T = ir.LiteralStructType([PTR, I32T, I32T, ir.ArrayType(I64T, MAX_DIMS), ir.ArrayType(I64T, MAX_DIMS),
                                 ir.ArrayType(I64T, MAX_DIMS)])
TASK_T = ir.FunctionType(I32T, [PTR, I32T])

LIBM1 = {"exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos",
         "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh"}


def llvm_type(t: Type, memory: bool = False) -> ir.Type:
    if t.is_bool():
        return I8T if memory else I1T
    if t.is_float():
        return {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}[t.bits]
    return ir.IntType(t.bits)


def _c(t: Type, v) -> ir.Constant:
    lt = llvm_type(t)
    if t.is_float():
        return ir.Constant(lt, float(v))
    if t.is_bool():
        return ir.Constant(lt, int(bool(v)))
    return ir.Constant(lt, int(v) & ((1 << t.bits) - 1))


class _Fn:
    """Codegen state for one LLVM function (the pipeline, or an outlined task)."""

    def __init__(self, cg: "CodeGen", fn: ir.Function):
        self.cg = cg
        self.fn = fn
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.syms: dict[str, tuple[ir.Value, Type | None]] = {}
        self.err_info = None
        self.fail_block = None


class CodeGen:
    def __init__(self, pipeline: Pipeline, name: str, fast_math: bool = False):
        self.p = pipeline
        self.name = name
        self.fast_math = fast_math
        self.module = ir.Module(name=name)
        self.n_tasks = 0
        self.fn_main = ir.Function(self.module, ir.FunctionType(I32T, [PTR, PTR]), name=name)
        self._decls: dict[str, ir.Function] = {}

    # ------------------------------------------------------------ declarations
    def decl(self, name: str, ret: ir.Type, args: list[ir.Type], var_arg=False) -> ir.Function:
        f = self._decls.get(name)
        if f is None:
            f = self.module.globals.get(name)
            if f is None:
                f = ir.Function(self.module, ir.FunctionType(ret, args, var_arg=var_arg), name=name)
            self._decls[name] = f
        return f

    def intrinsic(self, name: str, t: ir.Type, nargs: int = 1) -> ir.Function:
        suffix = {"half": "f16", "float": "f32", "double": "f64"}.get(str(t), str(t))
        return self.decl(f"llvm.{name}.{suffix}", t, [t] * nargs)

    # ------------------------------------------------------------ entry
    def generate(self, stmt: Stmt) -> ir.Module:
        st = _Fn(self, self.fn_main)
        args_ptr, err_ptr = self.fn_main.args
        st.err_info = err_ptr
        b = st.b
        k = 0

        def arg(i):
            p = b.gep(args_ptr, [ir.Constant(I64T, i)], source_etype=PTR)
            return b.load(p, typ=PTR)

        for buf in self.p.inputs:
            self._bind_buffer(st, buf.name, arg(k), buf.dims)
            k += 1
        for prm in self.p.params:
            p = arg(k)
            t = prm.type
            v = b.load(p, typ=llvm_type(t, memory=True))
            if t.is_bool():
                v = b.icmp_unsigned("!=", v, ir.Constant(I8T, 0))
            st.syms[prm.name] = (v, t)
            k += 1
        for f in self.p.outputs:
            self._bind_buffer(st, f.name, arg(k), f.dims)
            k += 1
        self.stmt(st, stmt)
        if not b.block.is_terminated:
            b.ret(ir.Constant(I32T, 0))
        return self.module

    def _bind_buffer(self, st: _Fn, name: str, ptr, dims: int):
        b = st.b
        host = b.load(b.gep(ptr, [ir.Constant(I32T, 0), ir.Constant(I32T, 0)], source_etype=BUFFER_T), typ=PTR)
        st.syms[name] = (host, None)
        for d in range(dims):
            for field, what, t in ((3, "min", I32), (4, "extent", I32), (5, "stride", I64)):
                p = b.gep(ptr, [ir.Constant(I32T, 0), ir.Constant(I32T, field), ir.Constant(I32T, d)],
                          source_etype=BUFFER_T)
                v = b.load(p, typ=I64T)
                if t == I32:
                    v = b.trunc(v, I32T)
                st.syms[f"{name}.{what}.{d}"] = (v, t)

    # ------------------------------------------------------------ statements
    def stmt(self, st: _Fn, s: Stmt):
        b = st.b
        if isinstance(s, Block):
            for x in s.stmts:
                self.stmt(st, x)
        elif isinstance(s, LetStmt):
            v = self.expr(st, s.value)
            old = st.syms.get(s.name)
            st.syms[s.name] = (v, s.value.type)
            self.stmt(st, s.body)
            if old is None:
                del st.syms[s.name]
            else:
                st.syms[s.name] = old
        elif isinstance(s, For):
            if s.kind == "parallel":
                self.parallel_for(st, s)
            else:
                self.serial_for(st, s)
        elif isinstance(s, IfThenElse):
            c = self.expr(st, s.cond)
            if s.otherwise is None:
                with b.if_then(c):
                    self.stmt(st, s.then)
            else:
                with b.if_else(c) as (then, other):
                    with then:
                        self.stmt(st, s.then)
                    with other:
                        self.stmt(st, s.otherwise)
        elif isinstance(s, Store):
            t = s.value.type
            v = self.expr(st, s.value)
            if t.is_bool():
                v = b.zext(v, I8T)
            ptr = b.gep(self.buffer_ptr(st, s.buffer), [self.expr(st, s.index)], source_etype=llvm_type(t, True))
            b.store(v, ptr)
        elif isinstance(s, Allocate):
            size = b.mul(self.expr(st, s.size), ir.Constant(I64T, max(1, s.type.bits // 8)))
            size = b.select(b.icmp_signed(">", size, ir.Constant(I64T, 0)), size, ir.Constant(I64T, 1))
            malloc = self.decl("malloc", PTR, [I64T])
            mem = b.call(malloc, [size])
            ok = b.icmp_unsigned("!=", mem, ir.Constant(PTR, None))
            with b.if_then(b.not_(ok), likely=False):
                b.ret(ir.Constant(I32T, 4))          # out of memory
            old = st.syms.get(s.name)
            st.syms[s.name] = (mem, None)
            self.stmt(st, s.body)
            b.call(self.decl("free", ir.VoidType(), [PTR]), [mem])
            if old is None:
                del st.syms[s.name]
            else:
                st.syms[s.name] = old
        elif isinstance(s, Assert):
            c = self.expr(st, s.cond)
            with b.if_then(b.not_(c), likely=False):
                if st.err_info is not None:
                    for i, e in enumerate(s.info[:4]):
                        v = self.expr(st, e)
                        v = b.sext(v, I64T) if v.type != I64T else v
                        b.store(v, b.gep(st.err_info, [ir.Constant(I64T, i)], source_etype=I64T))
                b.ret(ir.Constant(I32T, s.code))
        elif isinstance(s, Evaluate):
            self.expr(st, s.value)
        else:
            raise InternalError(f"codegen: unexpected statement {type(s).__name__}")

    def buffer_ptr(self, st: _Fn, name: str):
        v = st.syms.get(name)
        if v is None:
            raise InternalError(f"codegen: unknown buffer {name}")
        return v[0]

    def serial_for(self, st: _Fn, s: For):
        b = st.b
        lo = self.expr(st, s.min)
        ext = self.expr(st, s.extent)
        hi = b.add(lo, ext)
        pre = b.block
        head = st.fn.append_basic_block(f"{s.var}.head")
        body = st.fn.append_basic_block(f"{s.var}.body")
        done = st.fn.append_basic_block(f"{s.var}.end")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I32T, name=s.var)
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", i, hi), body, done)
        b.position_at_end(body)
        old = st.syms.get(s.var)
        st.syms[s.var] = (i, I32)
        self.stmt(st, s.body)
        nxt = b.add(i, ir.Constant(I32T, 1))
        i.add_incoming(nxt, b.block)
        b.branch(head)
        b.position_at_end(done)
        if old is None:
            del st.syms[s.var]
        else:
            st.syms[s.var] = old

    def parallel_for(self, st: _Fn, s: For):
        """Outline the body into task(closure, i) and call hdsl_parallel_for."""
        b = st.b
        free = sorted(n for n in _free_names(s.body) if n != s.var and n in st.syms)
        types = [st.syms[n][0].type for n in free]
        closure_t = ir.LiteralStructType(types) if types else ir.LiteralStructType([I8T])
        closure = b.alloca(closure_t)
        for k, n in enumerate(free):
            b.store(st.syms[n][0], b.gep(closure, [ir.Constant(I32T, 0), ir.Constant(I32T, k)]))
        self.n_tasks += 1
        task = ir.Function(self.module, TASK_T, name=f"{self.name}.par{self.n_tasks}")
        task.linkage = "internal"
        inner = _Fn(self, task)
        inner.err_info = None
        cl, idx = task.args
        for k, n in enumerate(free):
            v = inner.b.load(inner.b.gep(cl, [ir.Constant(I32T, 0), ir.Constant(I32T, k)], source_etype=closure_t),
                             typ=types[k])
            inner.syms[n] = (v, st.syms[n][1])
        inner.syms[s.var] = (idx, I32)
        self.stmt(inner, s.body)
        if not inner.b.block.is_terminated:
            inner.b.ret(ir.Constant(I32T, 0))
        lo = self.expr(st, s.min)
        ext = self.expr(st, s.extent)
        pf = self.decl("hdsl_parallel_for", I32T, [PTR, PTR, I32T, I32T])
        r = b.call(pf, [task, closure, lo, ext])
        with b.if_then(b.icmp_signed("!=", r, ir.Constant(I32T, 0)), likely=False):
            b.ret(r)

    # ------------------------------------------------------------ expressions
    def expr(self, st: _Fn, e: Expr) -> ir.Value:
        b = st.b
        t = e.type
        if isinstance(e, Const):
            return _c(t, e.value)
        if isinstance(e, (Var, Param)):
            v = st.syms.get(e.name)
            if v is None:
                raise InternalError(f"codegen: unbound variable {e.name}")
            return v[0]
        if isinstance(e, Load):
            ptr = b.gep(self.buffer_ptr(st, e.buffer), [self.expr(st, e.index)], source_etype=llvm_type(t, True))
            v = b.load(ptr, typ=llvm_type(t, True))
            return b.icmp_unsigned("!=", v, ir.Constant(I8T, 0)) if t.is_bool() else v
        if isinstance(e, Cast):
            return self.cast(st, t, self.expr(st, e.value), e.value.type, e.saturate)
        if isinstance(e, BinOp):
            if e.op in ("<<", ">>"):
                return self.shift(st, e.op, self.expr(st, e.a), self.expr(st, e.b), e.a.type, e.b.type)
            return self.binop(st, e.op, self.expr(st, e.a), self.expr(st, e.b), e.a.type)
        if isinstance(e, Unary):
            a = self.expr(st, e.a)
            if e.op == "-":
                return b.fneg(a) if t.is_float() else b.sub(ir.Constant(a.type, 0), a)
            if e.op == "!":
                return b.not_(a)
            if e.op == "~":
                return b.not_(a)
        if isinstance(e, Select):
            c = self.expr(st, e.cond)
            return b.select(c, self.expr(st, e.t), self.expr(st, e.f))
        if isinstance(e, Intrinsic):
            return self.intrinsic_call(st, e)
        raise InternalError(f"codegen: unexpected expression {type(e).__name__}")

    # integer helpers
    def _widen(self, st, v, t: Type, to=I64T):
        if v.type == to:
            return v
        if t.is_int():
            return st.b.sext(v, to)
        return st.b.zext(v, to)

    def _fix_int(self, st, v, width: int):
        if v.type.width == width:
            return v
        return st.b.trunc(v, ir.IntType(width)) if v.type.width > width else st.b.sext(v, ir.IntType(width))

    def binop(self, st: _Fn, op: str, a, b_, t: Type):
        b = st.b
        flt = t.is_float()
        if op in ("+", "-", "*"):
            if flt:
                return {"+": b.fadd, "-": b.fsub, "*": b.fmul}[op](a, b_)
            if t.is_bool() and op == "*":
                return b.and_(a, b_)
            return {"+": b.add, "-": b.sub, "*": b.mul}[op](a, b_)
        if op in ("/", "%"):
            if flt:
                q = b.fdiv(a, b_)
                if op == "/":
                    return q
                fl = b.call(self.intrinsic("floor", a.type), [q])
                return b.fsub(a, b.fmul(b_, fl))
            return self.int_divmod(st, op, a, b_, t)
        if op in ("min", "max"):
            if flt:
                return b.call(self.intrinsic("minimum" if op == "min" else "maximum", a.type, 2), [a, b_])
            if t.is_int():
                c = b.icmp_signed("<" if op == "min" else ">", a, b_)
            else:
                c = b.icmp_unsigned("<" if op == "min" else ">", a, b_)
            return b.select(c, a, b_)
        if op in ("==", "!=", "<", "<=", ">", ">="):
            if flt:
                fop = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}[op]
                return b.fcmp_unordered(fop, a, b_) if op == "!=" else b.fcmp_ordered(fop, a, b_)
            if t.is_int():
                return b.icmp_signed(op, a, b_)
            return b.icmp_unsigned(op, a, b_)
        if op == "&&" or op == "&":
            return b.and_(a, b_)
        if op == "||" or op == "|":
            return b.or_(a, b_)
        if op == "^":
            return b.xor(a, b_)
        raise InternalError(f"codegen: operator {op}")

    def int_divmod(self, st: _Fn, op: str, a, b_, t: Type):
        b = st.b
        lt = a.type
        zero = ir.Constant(lt, 0)
        one = ir.Constant(lt, 1)
        is_zero = b.icmp_unsigned("==", b_, zero)
        if not t.is_int():
            safe = b.select(is_zero, one, b_)
            r = b.udiv(a, safe) if op == "/" else b.urem(a, safe)
            return b.select(is_zero, zero, r)
        minus_one = ir.Constant(lt, -1)
        is_m1 = b.icmp_signed("==", b_, minus_one)
        safe = b.select(b.or_(is_zero, is_m1), one, b_)
        q = b.sdiv(a, safe)
        r = b.srem(a, safe)
        neg = b.icmp_signed("<", r, zero)
        bpos = b.icmp_signed(">", safe, zero)
        # Euclidean: make the remainder non-negative
        q_fix = b.select(bpos, b.sub(q, one), b.add(q, one))
        r_fix = b.select(bpos, b.add(r, safe), b.sub(r, safe))
        q = b.select(neg, q_fix, q)
        r = b.select(neg, r_fix, r)
        if op == "/":
            q = b.select(is_m1, b.sub(zero, a), q)
            return b.select(is_zero, zero, q)
        r = b.select(is_m1, zero, r)
        return b.select(is_zero, zero, r)

    def shift(self, st: _Fn, op: str, a, amt, t: Type, amount_type: Type):
        b = st.b
        bits = t.bits
        amount = self._widen(st, amt, amount_type)
        if op == ">>":
            amount = b.sub(ir.Constant(I64T, 0), amount)
        zero64 = ir.Constant(I64T, 0)
        c63 = ir.Constant(I64T, 63)

        def clip(v):
            v = b.select(b.icmp_signed("<", v, zero64), zero64, v)
            return b.select(b.icmp_signed(">", v, c63), c63, v)
        left = clip(amount)
        right = clip(b.sub(zero64, amount))
        wide = self._widen(st, a, t)
        if t.is_int():
            sl = b.shl(wide, left)
            cap = ir.Constant(I64T, bits - 1)
            sr = b.ashr(wide, b.select(b.icmp_signed(">", right, cap), cap, right))
        else:
            sl = b.shl(wide, left)
            sr = b.select(b.icmp_signed(">=", right, ir.Constant(I64T, bits)), zero64, b.lshr(wide, right))
        out = b.select(b.icmp_signed(">=", amount, zero64), sl, sr)
        return b.trunc(out, a.type) if a.type.width < 64 else out

    def cast(self, st: _Fn, t: Type, v, src: Type, saturate: bool = False):
        b = st.b
        if saturate:
            v, src = self.saturate(st, t, v, src)
        if t == src:
            return v
        lt = llvm_type(t)
        if t.is_bool():
            if src.is_float():
                return b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))
            return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
        if t.is_float():
            if src.is_float():
                return b.fpext(v, lt) if t.bits > src.bits else b.fptrunc(v, lt)
            if src.is_int():
                return b.sitofp(v, lt)
            return b.uitofp(v, lt)
        if src.is_float():
            d = b.fpext(v, ir.DoubleType()) if src.bits < 64 else v
            tv = b.call(self.intrinsic("trunc", ir.DoubleType()), [d])
            lo = float(t.min_value())
            hi = 2.0 ** (t.bits if t.is_uint() else t.bits - 1)
            ok = b.and_(b.fcmp_ordered(">=", tv, ir.Constant(ir.DoubleType(), lo)),
                        b.fcmp_ordered("<", tv, ir.Constant(ir.DoubleType(), hi)))
            tv = b.select(ok, tv, ir.Constant(ir.DoubleType(), lo))
            if t.is_uint() and t.bits == 64:
                return b.fptoui(tv, lt)
            r = b.fptosi(tv, I64T)
            return b.trunc(r, lt) if t.bits < 64 else r
        # integer → integer
        sw, tw = v.type.width, lt.width
        if tw < sw:
            return b.trunc(v, lt)
        if tw > sw:
            return b.sext(v, lt) if src.is_int() else b.zext(v, lt)
        return v

    def saturate(self, st: _Fn, t: Type, v, src: Type):
        """Clamp into t's range (hdsl/interp/scalar.py: _saturate); returns (value, its type)."""
        b = st.b
        if t.is_float():
            if src.is_float() and src.bits > t.bits:
                import numpy as np
                big = float(np.finfo(t.dtype).max)
                lo, hi = ir.Constant(v.type, -big), ir.Constant(v.type, big)
                v = b.select(b.fcmp_ordered("<", v, lo), lo, v)
                v = b.select(b.fcmp_ordered(">", v, hi), hi, v)
            return v, src
        lo, hi = (0, 1) if t.is_bool() else (t.min_value(), t.max_value())
        if src.is_float():
            D = ir.DoubleType()
            w = b.fpext(v, D) if src.bits < 64 else v
            w = b.select(b.fcmp_unordered("uno", w, w), ir.Constant(D, 0.0), w)
            over = b.fcmp_ordered(">=", w, ir.Constant(D, float(hi)))
            under = b.fcmp_ordered("<=", w, ir.Constant(D, float(lo)))
            inner = self.cast(st, t if not t.is_bool() else Type("uint", 8), b.select(b.or_(over, under),
                                                                                    ir.Constant(D, 0.0), w), F64)
            lt = inner.type
            res = b.select(over, ir.Constant(lt, hi), inner)
            res = b.select(under, ir.Constant(lt, lo & ((1 << lt.width) - 1)), res)
            if t.is_bool():
                return res, Type("uint", 8)
            return res, t
        # integer → integer, compared in 64 bits
        if src.is_uint() or src.is_bool():
            w = b.zext(v, I64T) if v.type.width < 64 else v
            cap = ir.Constant(I64T, max(hi, 0))
            w = b.select(b.icmp_unsigned(">", w, cap), cap, w)
            return w, Type("uint", 64)
        w = b.sext(v, I64T) if v.type.width < 64 else v
        lo_c = ir.Constant(I64T, max(lo, -(2 ** 63)))
        hi_c = ir.Constant(I64T, min(hi, 2 ** 63 - 1))
        w = b.select(b.icmp_signed("<", w, lo_c), lo_c, w)
        w = b.select(b.icmp_signed(">", w, hi_c), hi_c, w)
        return w, I64

    def intrinsic_call(self, st: _Fn, e: Intrinsic):
        b = st.b
        t = e.type
        name = e.name
        args = [self.expr(st, a) for a in e.args]
        if name in ("sqrt", "floor", "ceil", "trunc"):
            return b.call(self.intrinsic(name, args[0].type), [args[0]])
        if name == "round":
            return b.call(self.intrinsic("roundeven", args[0].type), [args[0]])
        if name in LIBM1 or name in ("pow", "atan2"):
            base = LIBM1.get(name, name)
            x = args
            at = args[0].type
            if t.bits == 16:
                x = [b.fpext(a, ir.FloatType()) for a in args]
            ct = x[0].type
            fname = base + ("f" if str(ct) == "float" else "")
            fn = self.decl(fname, ct, [ct] * len(x))
            r = b.call(fn, x)
            return b.fptrunc(r, at) if t.bits == 16 else r
        if name == "is_nan":
            return b.fcmp_unordered("uno", args[0], args[0])
        if name == "abs":
            at = e.args[0].type
            a = args[0]
            if at.is_float():
                return b.call(self.intrinsic("fabs", a.type), [a])
            if at.is_int():
                return b.select(b.icmp_signed("<", a, ir.Constant(a.type, 0)), b.sub(ir.Constant(a.type, 0), a), a)
            return a
        if name == "absd":
            at = e.args[0].type
            x, y = args
            if at.is_float():
                return b.call(self.intrinsic("fabs", x.type), [b.fsub(x, y)])
            gt = b.icmp_signed(">", x, y) if at.is_int() else b.icmp_unsigned(">", x, y)
            return b.select(gt, b.sub(x, y), b.sub(y, x))
        if name == "lerp":
            return self.lerp(st, e, args)
        if name == "print":
            self.print_call(st, e, args)
            return args[0]
        raise InternalError(f"codegen: intrinsic {name}")

    def lerp(self, st: _Fn, e: Intrinsic, args):
        b = st.b
        t = e.type
        wt = e.args[2].type
        z, o, w = args
        if t.is_float():
            if wt.is_float():
                wv = self.cast(st, t, w, wt)
            else:
                wd = b.uitofp(w, ir.DoubleType())
                wv = self.cast(st, t, b.fdiv(wd, ir.Constant(ir.DoubleType(), float(2 ** wt.bits - 1))), F64)
            one = ir.Constant(z.type, 1.0)
            return b.fadd(b.fmul(z, b.fsub(one, wv)), b.fmul(o, wv))
        bits = t.bits
        if t.is_bool():
            if wt.is_float():
                c = b.fcmp_ordered(">", w, ir.Constant(w.type, 0.5))
            else:
                c = b.icmp_unsigned(">", w, ir.Constant(w.type, wt.max_value() // 2))
            return b.select(c, o, z)
        ct = ir.IntType(bits)
        bias = 0
        if t.is_int():
            bias = -(1 << (bits - 1))
            z = b.sub(z, ir.Constant(ct, bias))
            o = b.sub(o, ir.Constant(ct, bias))
        maxc = (1 << bits) - 1
        if wt.is_float():
            if bits == 32:
                wd = b.fpext(w, ir.DoubleType()) if wt.bits < 64 else w
                tw = b.fmul(ir.Constant(ir.DoubleType(), 65535.0 * 65537.0), wd)
                tw = b.call(self.intrinsic("trunc", ir.DoubleType()), [tw])
            else:
                wf = self.cast(st, F32, w, wt)
                tw = b.fmul(ir.Constant(ir.FloatType(), float(maxc)), wf)
                tw = b.fpext(b.call(self.intrinsic("trunc", ir.FloatType()), [tw]), ir.DoubleType())
            twi = b.trunc(b.fptosi(tw, I64T), ct) if bits < 64 else b.fptoui(tw, ct)
        else:
            wb = wt.bits
            if wb == bits:
                twi = w
            else:
                diff, left, shift, scale = wb - bits, abs(wb - bits), min(bits, wb), 1
                while left:
                    scale = scale + (scale << shift)
                    left -= shift
                    shift *= 2
                w64 = b.zext(w, I64T) if w.type.width < 64 else w
                if diff < 0:
                    twi = b.trunc(b.mul(w64, ir.Constant(I64T, scale)), ct)
                else:
                    twi = b.trunc(b.udiv(w64, ir.Constant(I64T, scale)), ct)
        inv = b.sub(ir.Constant(ct, maxc), twi)
        wide = ir.IntType(2 * bits)
        zu, ou = b.zext(z, wide), b.zext(o, wide)
        prod = b.add(b.add(b.mul(zu, b.zext(inv, wide)), b.mul(ou, b.zext(twi, wide))),
                     ir.Constant(wide, 1 << (bits - 1)))
        div = ir.Constant(wide, 1 << bits)
        divided = b.udiv(b.add(b.udiv(prod, div), prod), div)
        res = b.trunc(divided, ct)
        if t.is_int():
            res = b.add(res, ir.Constant(ct, bias))
        return res

    def print_call(self, st: _Fn, e: Intrinsic, args):
        b = st.b
        fmt, vals = [], []

        def add(v, t):
            if t.is_float():
                fmt.append("%g")
                vals.append(b.fpext(v, ir.DoubleType()) if t.bits < 64 else v)
            elif t.is_bool():
                fmt.append("%s")
                vals.append(b.select(v, self._cstr("true"), self._cstr("false")))
            else:
                fmt.append("%lld" if t.is_int() else "%llu")
                vals.append(self._widen(st, v, t))
        add(args[0], e.args[0].type)
        j = 1
        for piece in e.extra:
            if piece is None:
                add(args[j], e.args[j].type)
                j += 1
            else:
                fmt.append(piece.replace("%", "%%"))
        printf = self.decl("printf", I32T, [PTR], var_arg=True)
        b.call(printf, [self._cstr(" ".join(fmt) + "\n")] + vals)

    def _cstr(self, s: str):
        data = bytearray(s.encode()) + b"\0"
        name = f".str{len(self.module.globals)}"
        g = ir.GlobalVariable(self.module, ir.ArrayType(I8T, len(data)), name=name)
        g.global_constant = True
        g.linkage = "internal"
        g.initializer = ir.Constant(ir.ArrayType(I8T, len(data)), data)
        return g


def _free_names(s: Stmt) -> set[str]:
    """Every variable and buffer name a statement mentions (a superset of its free names)."""
    names: set[str] = set()

    def ex(e: Expr):
        for n in walk(e):
            if isinstance(n, (Var, Param)):
                names.add(n.name)
            elif isinstance(n, Load):
                names.add(n.buffer)

    def visit(x):
        if isinstance(x, Block):
            for y in x.stmts:
                visit(y)
        elif isinstance(x, LetStmt):
            ex(x.value)
            visit(x.body)
        elif isinstance(x, For):
            ex(x.min)
            ex(x.extent)
            visit(x.body)
        elif isinstance(x, IfThenElse):
            ex(x.cond)
            visit(x.then)
            if x.otherwise is not None:
                visit(x.otherwise)
        elif isinstance(x, Store):
            names.add(x.buffer)
            ex(x.index)
            ex(x.value)
        elif isinstance(x, Allocate):
            ex(x.size)
            visit(x.body)
        elif isinstance(x, Assert):
            ex(x.cond)
            for i in x.info:
                ex(i)
        elif isinstance(x, Evaluate):
            ex(x.value)
    visit(s)
    return names


def generate(pipeline: Pipeline, stmt: Stmt, name: str, fast_math: bool = False) -> ir.Module:
    return CodeGen(pipeline, name, fast_math).generate(stmt)


