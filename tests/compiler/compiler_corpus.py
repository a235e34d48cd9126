"""The corpus of pipelines the native compiler is checked on, and how to run them.

Every program in pipelines/*.hl has an entry in CORPUS saying how to make its
inputs and params for an image of W x H pixels, which output sizes to ask
for, and how to compare (exactly, except `rtol` for outputs that go through
transcendental functions, a few ulp). The reference is always hdsl's own evaluator
(`Pipeline.realize` on the uncompiled pipeline), which ignores schedules.
"""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

import hdsl

PIPELINES = Path(__file__).parent / "pipelines"

# image sizes (W, H): odd ones, the tiniest, and ones smaller than the split
# factors of the default schedules (4, 8, 16)
SIZES = [(37, 23), (1, 1), (2, 3), (3, 2), (5, 3), (7, 9), (17, 1), (1, 11)]


def _img(rng, dtype, shape, lo=None, hi=None):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.uniform(-4.0 if lo is None else lo, 4.0 if hi is None else hi, shape).astype(dtype)
    info = np.iinfo(dtype)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    return rng.integers(lo, int(hi) + 1, shape, dtype=dtype)


@dataclass
class Spec:
    name: str
    # (rng, W, H) -> {input name: array in (H, W[, C]) layout}
    inputs: Callable
    # (W, H) -> size for every output, or a list with one size per output
    sizes: Callable = lambda w, h: (w, h)
    # param sets to try (the first is the defaults: {})
    params: list = field(default_factory=lambda: [{}])
    # (relative, absolute) tolerance per output index (exact when absent)
    rtol: dict = field(default_factory=dict)
    # fuzzer: Funcs that must not be inlined (inlining them all makes lowering
    # blow up: exponentially large expressions)
    no_inline: tuple = ()
    # inputs read without a boundary condition: `inputs` takes a fourth argument, how much
    # larger than W x H each input must be ({name: (dx, dy)}), found from the evaluator
    unbounded: bool = False
    # fuzzer: intermediates computed at the root may be given a bound() far larger than any
    # region read (not where they read inputs without a boundary condition)
    bound_intermediates: bool = True

    @property
    def path(self) -> Path:
        return PIPELINES / f"{self.name}.hl"

    @property
    def text(self) -> str:
        return self.path.read_text()


def _one(dtype, lo=None, hi=None, channels=None):
    def make(rng, w, h):
        shape = (h, w) if channels is None else (h, w, channels)
        return {"img": _img(rng, dtype, shape, lo, hi)}
    return make


def _multi_in(rng, w, h):
    return {"img": _img(rng, np.uint8, (h, w)), "other": _img(rng, np.int16, (h + 1, w + 2))}


def _one2(**dtypes):
    """W x H inputs of the given element types."""
    return lambda rng, w, h: {n: _img(rng, dt, (h, w)) for n, dt in dtypes.items()}


def _sized(**dtypes):
    """Inputs of the given element types, each (H + dy) x (W + dx) for the growth asked for."""
    def make(rng, w, h, grow):
        return {n: _img(rng, dt, (h + grow.get(n, (0, 0))[1], w + grow.get(n, (0, 0))[0]))
                for n, dt in dtypes.items()}
    return make


CORPUS: dict[str, Spec] = {s.name: s for s in [
    Spec("blur3x3_u16", _one(np.uint16)),
    Spec("gauss5_f32", _one(np.float32)),
    Spec("histogram", _one(np.uint8), sizes=lambda w, h: (256,)),
    Spec("scan_x", _one(np.uint8)),
    Spec("sat", _one(np.uint16)),
    Spec("iir", _one(np.float32, 0.0, 1.0),
         params=[{}, {"b0": 0.3, "a1": 0.7, "c0": 0.6, "c1": 0.5, "c2": -0.1}]),
    # the stdlib's recursive filters (tile_iir drawn on them: see for_schedule)
    # (the filters read img without a boundary condition: no wide bound() on intermediates)
    Spec("recursive", _one(np.float32, 0.0, 1.0), params=[{}, {"a": 0.3, "sigma": 3.0}], bound_intermediates=False),
    Spec("argmax_tuple", _one(np.uint8, 0, 7)),       # a small range: many ties
    Spec("multi_out", _one(np.uint8)),
    Spec("outputs_chain", _one(np.uint8)),
    Spec("multi_in", _multi_in,
         params=[{}, {"gain": -0.75, "bias": 100000, "shift": 5}, {"gain": 300.0, "bias": -7, "shift": 0}]),
    Spec("pyramid", _one(np.uint16), no_inline=("gp[1]", "gp[2]", "up[1]", "up[0]", "lp[0]", "lp[1]")),
    Spec("color", _one(np.uint8, channels=3), sizes=lambda w, h: (w, h, 3)),
    Spec("rdom_where", _one(np.uint8)),
    Spec("window_sum", _one(np.uint8)),
    Spec("divmod", _one(np.int16), params=[{}, {"d": 0, "e": -2}, {"d": 5, "e": 0}]),
    Spec("casts", _one(np.float32), params=[{}, {"k": -1.0}, {"k": 3.0e9}, {"k": 3.0e38}]),
    # out sums terms of magnitude up to ~25 (ulp ~2e-6) and may cancel to near 0: a few ulp
    # of the terms, absolute, as well as relative
    Spec("math_f32", _one(np.float32), rtol={0: (1e-5, 2e-5)}),
    # outputs feeding each other (issue 23 item 1)
    Spec("multi_feed", _one(np.uint8), sizes=lambda w, h: [(w, h), (w, h), (w, h), (h,)]),
    Spec("feed_chain", _one(np.uint8)),
    # no boundary conditions: the inputs are as large as the evaluator reads them; fs's float
    # sum is reassociated by rfactor, so fout is compared to a few ulp of its 12 terms (|t| < 20)
    Spec("unbounded", _sized(img=np.uint8, fimg=np.float32), unbounded=True, rtol={1: (1e-5, 1e-4)},
         bound_intermediates=False),
    Spec("rfactor_sums", _one2(img=np.uint8, fimg=np.float32), rtol={1: (1e-5, 1e-4)}),
]}


# corpus pipelines that fail natively for a known reason fixed on another branch (the tests
# run them as strict xfails, so that they show when the fix is merged): none today
KNOWN_FAILURES: dict[str, str] = {}


def names(known: dict[str, str] | None = None, strict: bool = True) -> list:
    """The corpus's names as pytest params, the known failures marked xfail."""
    known = KNOWN_FAILURES if known is None else known
    import pytest
    return [pytest.param(n, marks=pytest.mark.xfail(strict=strict, reason=known[n])) if n in known else n
            for n in sorted(CORPUS)]


def seed_of(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def make_args(spec: Spec, w: int, h: int, seed: int, params: dict | None = None, grow=None) -> dict:
    rng = np.random.default_rng(seed)
    args = dict(spec.inputs(rng, w, h, grow or {}) if spec.unbounded else spec.inputs(rng, w, h))
    args.update(params or {})
    return args


_READ_AT = re.compile(r"input '(\w+)' is read at ([xy]) = (-?\d+) \.\. (-?\d+), but the buffer covers")


def reference(spec: Spec, w: int, h: int, seed: int, params: dict | None = None):
    """(args, the evaluator's result) for a W x H image. Inputs read without a boundary
    condition (spec.unbounded) grow until they cover the region the evaluator reads."""
    p, grow = load(spec), {}
    while True:
        args = make_args(spec, w, h, seed, params, grow)
        try:
            return args, p.realize(spec.sizes(w, h), **args)
        except hdsl.HdslError as e:
            m = _READ_AT.search(str(e))
            if not (spec.unbounded and m and int(m[3]) >= 0):
                raise
            name, d, hi = m[1], "xy".index(m[2]), int(m[4])
            g = list(grow.get(name, (0, 0)))
            assert g[d] < hi + 1 - (w, h)[d], f"{spec.name}: the evaluator's message did not change: {e}"
            g[d] = hi + 1 - (w, h)[d]
            grow[name] = tuple(g)


def as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def for_schedule(spec: Spec, block: str, expected) -> Spec:
    """The spec to compare a schedule's results with: tile_iir sums in another order, so
    its float outputs agree with the serial filter to rounding, not bit for bit."""
    if "tile_iir" not in block or spec.rtol:
        return spec
    from dataclasses import replace
    return replace(spec, rtol={k: (1e-4, 1e-5) for k, e in enumerate(as_tuple(expected))
                               if np.asarray(e).dtype.kind == "f"})


def compare(spec: Spec, got, expected, context: str = "") -> None:
    """Exact equality (bitwise for floats, NaN == NaN), or `rtol` where the spec says."""
    got, expected = as_tuple(got), as_tuple(expected)
    assert len(got) == len(expected)
    for k, (a, b) in enumerate(zip(got, expected)):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, \
            f"{context}output {k}: {a.dtype}{a.shape} != expected {b.dtype}{b.shape}"
        if k in spec.rtol:
            rtol, atol = spec.rtol[k]
            bad = ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
            # the same infinities are fine
            bad &= ~((a == b) | (np.isnan(a) & np.isnan(b)))
        elif a.dtype.kind == "f":
            bad = a.view(f"u{a.itemsize}") != b.view(f"u{b.itemsize}")
        else:
            bad = a != b
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise AssertionError(f"{context}output {k}: {int(bad.sum())} of {bad.size} values differ from the "
                                 f"evaluator; first at {idx} (row, col, ...): native {a[idx]!r}, "
                                 f"evaluator {b[idx]!r}")


def load(spec: Spec, extra: str = "") -> hdsl.Pipeline:
    return hdsl.loads(spec.text + extra, str(spec.path))
