"""Random inputs for the examples, sized for a quick comparison with the evaluator."""
from __future__ import annotations

from pathlib import Path

import numpy as np

import hdsl
from hdsl.ir.types import BY_NAME

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"

# example -> (output size, {input: shape in the (H, W[, C]) layout}, value range); None: the
# output's size from the first input
EXAMPLE_INPUTS = {
    "blur": (None, {"img": (23, 37)}, None),
    "unsharp": (None, {"img": (23, 37)}, None),
    "harris": (None, {"img": (21, 30, 3)}, None),
    "hist_equalize": (None, {"img": (23, 37)}, None),
    "local_laplacian": ((20, 14, 3), {"img": (14, 20, 3)}, None),
    "bilateral_grid": (None, {"img": (29, 35)}, (0.0, 1.0)),
    "interpolate": ((21, 17, 3), {"img": (17, 21, 4)}, (0.0, 1.0)),
    "camera_pipe": ((32, 24, 3), {"raw": (48, 64), "matrix_3200": (3, 4), "matrix_7000": (3, 4)}, None),
    "level_set": (None, {"img": (23, 37), "phi": (23, 37)}, (-2.0, 2.0)),
}


def example_args(p: hdsl.Pipeline, name: str, seed: int = 0):
    size, shapes, rng_range = EXAMPLE_INPUTS[name]
    rng = np.random.default_rng(seed)
    args = {}
    for b_name, t, dims in p.inputs:
        shape = shapes[b_name]
        dt = np.dtype(BY_NAME[t].dtype)
        if name == "camera_pipe" and b_name == "raw":
            a = rng.integers(0, 1024, shape).astype(dt)
        elif name == "camera_pipe":
            a = rng.uniform(-1.0, 2.0, shape).astype(dt)
        elif name == "level_set" and b_name == "phi":
            # a level set of +-2 (sin and cos of it: the C library's and NumPy's agree exactly;
            # elsewhere they are a few ulp apart, docs/compiler.md)
            a = np.where(rng.random(shape) < 0.5, -2.0, 2.0).astype(dt)
        elif dt.kind == "f":
            lo, hi = rng_range or (0.0, 1.0)
            a = rng.uniform(lo, hi, shape).astype(dt)
        else:
            info = np.iinfo(dt)
            a = rng.integers(info.min, int(info.max) + 1, shape, dtype=np.int64).astype(dt)
        args[b_name] = a
    return size, args
