"""Timing helpers shared by `hdsl bench` and benchmarks/run.py."""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import numpy as np


def compile_cold_and_cached(path: str | Path, target: str = "host", schedule: str | None = None):
    """Compile `path` with an empty compile cache, then again from that cache.
    Returns (the compiled Pipeline, cold seconds, cached seconds); the user's cache is untouched."""
    import hdsl
    with tempfile.TemporaryDirectory(prefix="hdsl-bench-cache-") as cache:
        old = os.environ.get("HDSL_CACHE_DIR")
        os.environ["HDSL_CACHE_DIR"] = cache
        try:
            t0 = time.perf_counter()
            hdsl.load(path).compile(target, schedule=schedule)
            cold = time.perf_counter() - t0
            t0 = time.perf_counter()
            compiled = hdsl.load(path).compile(target, schedule=schedule)
            cached = time.perf_counter() - t0
        finally:
            if old is None:
                del os.environ["HDSL_CACHE_DIR"]
            else:
                os.environ["HDSL_CACHE_DIR"] = old
    return compiled, cold, cached


def output_arrays(pipeline, sizes) -> list[np.ndarray]:
    """Arrays to realize into, one per output, in the user's (H, W[, C]) layout with x at
    stride 1 as native code writes it (colour planar behind the view); sizes are (W, H[, C])."""
    arrays = []
    for f, size in zip(pipeline.ir.outputs, sizes):
        dtype = f.values[0].type.dtype
        if len(size) == 3:
            arrays.append(np.empty((size[2], size[1], size[0]), dtype).transpose(1, 2, 0))
        else:
            arrays.append(np.empty(list(reversed(size[:2])) + list(size[2:]), dtype))
    return arrays
