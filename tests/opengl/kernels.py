"""Hand-built kernels in the GPU contract's shapes (hdsl/ir/kernel.py) for the OpenGL tests:
an element-wise kernel computing many expressions of two inputs `a` and `b` at once."""
import numpy as np

from hdsl.ir.expr import BinOp, Const, Var, walk
from hdsl.ir.kernel import Kernel, KernelArg
from hdsl.ir.stmt import Block, For, LetStmt, Load, Store
from hdsl.ir.types import I32

from tests.opengl.ir_eval import evaluate

GROUP = 64


def elementwise(name: str, exprs: list, n: int, inputs: dict) -> Kernel:
    """out_<type>[j * n + i] = exprs[j](a[i], b[i], ...) for the j-th expression of each result
    type; `inputs` maps input names to their types (the expressions read them as Vars)."""
    idx = BinOp("+", BinOp("*", Var("blk"), Const(I32, GROUP), I32), Var("thr"), I32)
    by_type: dict = {}
    for e in exprs:
        by_type.setdefault(e.type, []).append(e)
    stores = []
    for t, es in by_type.items():
        for j, e in enumerate(es):
            e = _read_inputs(e, inputs)
            at = BinOp("+", Var("i"), Const(I32, j * n), I32)
            stores.append(Store(f"out_{t}", at, e))
    body = LetStmt("i", idx, Block(tuple(stores)))
    body = For("blk", Const(I32, 0), Const(I32, n // GROUP), "gpu_block",
               For("thr", Const(I32, 0), Const(I32, GROUP), "gpu_thread", body))
    args = tuple(KernelArg(k, t, "buffer", "r") for k, t in inputs.items()) + \
        tuple(KernelArg(f"out_{t}", t, "buffer", "w") for t in by_type)
    return Kernel(name, args, body, (Const(I32, GROUP),), Const(I32, 0))


def _read_inputs(e, inputs):
    from hdsl.ir.expr import substitute
    return substitute(e, lambda x: Load(x.name, Var("i"), x.type) if isinstance(x, Var) and x.name in inputs else None)


def run_and_expect(exprs: list, env: dict, inputs: dict, name="k"):
    """(got, want) per expression: run on OpenGL, and evaluate with hdsl/interp/scalar.py."""
    from hdsl.runtime.opengl import run_kernel
    n = len(next(iter(env.values())))
    assert n % GROUP == 0
    k = elementwise(name, exprs, n, inputs)
    by_type: dict = {}
    for e in exprs:
        by_type.setdefault(e.type, []).append(e)
    outs = {f"out_{t}": np.zeros(len(es) * n, t.dtype) for t, es in by_type.items()}
    got = run_kernel(k, (n // GROUP,), {**{k_: env[k_] for k_ in inputs}, **outs})
    pos = {t: 0 for t in by_type}
    result = []
    for e in exprs:
        j = pos[e.type]
        pos[e.type] += 1
        want = np.broadcast_to(evaluate(e, env), (n,))
        result.append((e, got[f"out_{e.type}"][j * n:(j + 1) * n], want))
    return result
