"""What runs in a Dask worker or a batch process: the compiled pipeline, built once per
process (from the JIT cache when the client compiled it first), and the tasks."""
from __future__ import annotations

import numpy as np

_COMPILED: dict = {}


def compiled_tile_pipeline(spec):
    c = _COMPILED.get(spec.key)
    if c is None:
        from hdsl.scale.tiles import load_tile_pipeline
        c = _COMPILED[spec.key] = load_tile_pipeline(spec)
    return c


def run_tile(spec, plan, chunks) -> tuple:
    """One tile (or one piece of a reduction's rdom): the crops assembled from the input chunks
    it overlaps, then the compiled pipeline over the plan's box. Returns every output, in the
    user's (H, W[, C]) layout."""
    c = compiled_tile_pipeline(spec)
    kwargs = dict(plan.params)
    it = iter(chunks)
    for cut in plan.inputs:
        if len(cut.shape) == 3:      # planar storage behind the (H, W, C) view: what native code reads
            crop = np.empty((cut.shape[2],) + tuple(cut.shape[:2]), cut.dtype).transpose(1, 2, 0)
        else:
            crop = np.empty(cut.shape, cut.dtype)
        if cut.source is not None:
            crop[...] = cut.source[cut.at]
        for src, dst in cut.pieces:
            crop[dst] = np.asarray(next(it))[src]
        kwargs[cut.name] = crop
    out = c.realize(plan.sizes, min=plan.mins[0], **kwargs)
    return out if isinstance(out, tuple) else (out,)
