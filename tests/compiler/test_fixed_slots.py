"""A buffer of constant size allocated inside a loop (a tile's intermediate: camera_pipe's
demosaic and colour correction, once per 32x2 tile) takes a fixed slot of the function's stack
frame (hdsl/codegen/cpu.py, allocate) instead of a stack save, a run-time size check and a
stack restore per iteration; up to FIXED_STACK_LIMIT bytes per function, the rest as before.
Values: NumPy's (the 3x3 box sum written with array slicing, an independent oracle) and the
evaluator's, for tiles of 8x8 to 32x4 with two such intermediates each, inside a parallel
loop and not, on the host and on x86-64-avx2. IR: the slots are allocas in the entry block,
no stack save in the task, and a tile too large for the limit keeps the save and restore."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form

SRC = """
pipeline boxes
input img: i32[2]
output out: i32[2]
algorithm {
    var x, y
    bx(x, y) = img(x - 1, y) + img(x, y) + img(x + 1, y)
    by(x, y) = bx(x, y - 1) + bx(x, y) + bx(x, y + 1)
    out(x, y) = by(x, y) * 2 - bx(x, y)
}
schedule {
    out.tile(x, y, xi, yi, TX, TY)PAR
    bx.compute_at(out, x)
    by.compute_at(out, x)
}
"""


def program(tx, ty, parallel):
    src = SRC.replace("TX", str(tx)).replace("TY", str(ty)).replace("PAR", ".parallel(y)" if parallel else "")
    return hdsl.loads(src, "boxes.hl")


def by_numpy(img, w, h):
    """out over [1, 1 + w) x [1, 1 + h) of img (indexed [y, x])."""
    bx = img[:, :-2] + img[:, 1:-1] + img[:, 2:]              # bx at x = 1 .. W - 2
    by = bx[:-2] + bx[1:-1] + bx[2:]                          # by at y = 1 .. H - 2
    return (by * 2 - bx[1:-1])[:h, :w].astype(np.int32)


@pytest.mark.parametrize("tx, ty, parallel", [(8, 8, False), (16, 2, True), (32, 4, True), (128, 64, False)])
@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_tile_buffers_give_numpys_and_the_evaluators_values(tx, ty, parallel, target):
    p = program(tx, ty, parallel)
    img = np.random.RandomState(tx + ty).randint(-10 ** 6, 10 ** 6, (2 * ty + 9, 3 * tx + 7)).astype(np.int32)
    w, h = img.shape[1] - 2, img.shape[0] - 2
    got = p.compile(target).realize((w, h), min=(1, 1), img=img)
    assert np.array_equal(got, by_numpy(img, w, h))
    assert np.array_equal(got, p.realize((w, h), min=(1, 1), img=img))


def _task(ir: str) -> str:
    return next(f for f in ir.split("\ndefine ")[1:] if ".par" in f.split("(")[0])


def test_tile_buffers_take_fixed_frame_slots():
    """Tiles of 16x2: bx is 16x4 i32 (256 bytes), by 16x2 (128): two allocas in the task's
    entry block, no stack save; tiles of 128x64 (bx: 33 KB) keep it."""
    task = _task(compiled_form(program(16, 2, True).ir, "llvm", shifted=True))
    entry = task.split("\n\n")[0] if "\n\n" in task else task.split("br ")[0]
    assert "alloca i8, i32 256, align 64" in entry and "alloca i8, i32 128, align 64" in entry
    assert "llvm.stacksave" not in task
    task = _task(compiled_form(program(128, 64, True).ir, "llvm", shifted=True))
    assert "llvm.stacksave" in task
