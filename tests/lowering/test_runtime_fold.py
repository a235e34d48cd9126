"""Run-time folds (hdsl/lower/loops.py RUNTIME_FOLDS, lower.py runtime_fold, flatten.py
_Flattener.runtime_fold): a Func stored outside a serial loop and slid along it, whose
window (the rows its consumers read in one iteration) no rule bounds by a constant, keeps
n rows, n the smallest power of two at least its largest window, found by a loop over the
sliding loop's iterations before the storage is allocated; row y lives in slice
(y - min) & (n - 1). camera_pipe's denoise and deinterleave are such Funcs (their windows
follow the rounded-up tone curve's slid start: 10 and 5 rows at a strip's first pair of
rows, 2 and 1 after); before, they held the whole strip (38 and 19 rows), which Halide's
app folds to 4 rows (camera_pipe_generator.cpp lines 534 and 541). The fold is sound for
any n at least the largest window: fold_check's induction in loops.py.

Pipelines: test_slide_checked's `slide2` (p and g slid behind the run-time check, c a
rounded-up tile, which is never folded) and camera_pipe's AVX2 schedule. Values against
the reference evaluator and NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
import hdsl.lower.loops as loops
from hdsl.aot import compiled_form
from hdsl.lower import flatten as flatten_mod

from test_slide_checked import SRC, _numpy


def _stmt(src=SRC, name="slide2.hl", schedule="strips", target="host"):
    return compiled_form(hdsl.loads(src, name).ir, "stmt", schedule=schedule, target=target)


def test_checked_slides_fold_at_run_time():
    """p and g keep min(n, extent) rows, addressed (y - min) & mask; c, whose y loop is a
    rounded-up tile (it computes rows past its window), keeps every row."""
    stmt = _stmt()
    for f in ("p", "g"):
        assert f"let {f}.size = (i64)1 * i64({f}.extent.0) * i64(min({f}.fold.mask + 1, {f}.extent.1))" in stmt, f
        assert f"({f}.s0.y - {f}.min.1 & {f}.fold.mask) * {f}.stride.1" in stmt, f
        # the largest window over the sliding loop's iterations, before the storage
        assert f"for {f}.fold.out.s0.yi in 0 .. 7:" in stmt, f
    assert "c.fold" not in stmt
    assert "let c.size = (i64)1 * i64(c.extent.0) * i64(c.extent.1)" in stmt


def test_without_the_rule_the_planes_hold_the_strip(monkeypatch):
    monkeypatch.setattr(loops, "RUNTIME_FOLDS", False)
    stmt = _stmt()
    assert "fold.mask" not in stmt
    assert "let p.size = (i64)1 * i64(p.extent.0) * i64(p.extent.1)" in stmt


@pytest.mark.parametrize("strip", [8, 16])
@pytest.mark.parametrize("h, y0", [(32, 4), (29, 4), (13, 5), (8, 3), (3, 6), (1, 2)])
def test_run_time_folds_give_the_evaluators_values(h, y0, strip):
    """Strips of 8 and 16 rows (n = 8 < the strip's 12 and 20 rows of p: folded), a last
    partial strip, outputs of 3 and 1 rows (n at least the extent: not folded)."""
    prog = hdsl.loads(SRC.replace("split(y, yo, yi, 8)", f"split(y, yo, yi, {strip})"), "slide2.hl")
    w = 19
    img = np.random.RandomState(11 * h + y0 + strip).randint(-1000, 1000, (y0 + h + 8, w + 9)).astype(np.int32)
    got = prog.compile("host", schedule="strips").realize((w, h), min=(0, y0), img=img)
    assert np.array_equal(got, _numpy(img, 0, y0, w, h))
    assert np.array_equal(got, prog.realize((w, h), min=(0, y0), img=img))


def test_a_fold_smaller_than_the_largest_window_would_be_caught(monkeypatch):
    """The values test above can fail: with n one power of two too small (the mask's top bit
    dropped) p's 5-row window no longer fits its 4 slices and the output differs."""
    real = flatten_mod._Flattener.runtime_fold

    def halved(self, name, k, body):
        from hdsl.ir.expr import BinOp, Const, Var
        from hdsl.ir.stmt import LetStmt
        from hdsl.ir.types import I32
        mask = Var(f"{name}.fold.mask", I32)
        return real(self, name, k, LetStmt(f"{name}.fold.mask", BinOp(">>", mask, Const(I32, 1), I32), body))
    monkeypatch.setattr(flatten_mod._Flattener, "runtime_fold", halved)
    prog = hdsl.loads(SRC.replace("split(y, yo, yi, 8)", "split(y, yo, yi, 16)"), "slide2.hl")
    w, h, y0 = 19, 32, 4
    img = np.random.RandomState(3).randint(-1000, 1000, (y0 + h + 8, w + 9)).astype(np.int32)
    got = prog.compile("host", schedule="strips", use_cache=False).realize((w, h), min=(0, y0), img=img)
    assert not np.array_equal(got, _numpy(img, 0, y0, w, h))


def test_camera_pipes_planes_fold_at_run_time():
    """The denoise and the deinterleave (no fold_storage in the example: the app's 4 rows are
    too few for hdsl's first iteration) fold at run time; g_r and g_b keep their explicit
    fold of 4, the tone curve (a rounded-up tile) its whole strip."""
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "examples" / "camera_pipe.hl"
    stmt = compiled_form(hdsl.load(path).ir, "stmt", target="x86-64-avx2")
    for f in ("denoised", "deinterleaved"):
        assert f"{f}.fold.mask" in stmt, f
    for f in ("g_r", "g_b", "curved"):
        assert f"{f}.fold.mask" not in stmt, f
    assert "let g_r.size = (i64)1 * i64(g_r.extent.0) * (i64)4" in stmt
