"""fold_storage(v, n): a Func stored outside the loop it is computed in, whose region slides
along v with that loop, keeps only n slices of v, addressed modulo n (Halide's
Func::fold_storage, src/Func.h; its apps fold the stages of their sliding windows, e.g.
apps/camera_pipe/camera_pipe_generator.cpp lines 534 and 541). The values never change: a
window wider than n is refused at compile time when it is a constant, and by an assertion at
run time when it is not; the evaluator ignores the schedule and is the reference here, with
NumPy sums as an independent check."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl
from hdsl.ir.printer import stmt_str
from hdsl.lower.lower import lower

BLUR = """
pipeline fold
input img: i32[2]
param n: i32 = 2
output g: i32[2]
algorithm {
    f(x, y) = img(x, y) * 3 + 1
    g(x, y) = f(x, y) + f(x, y + 1) + f(x, y + READ)
}
schedule {
    g.split(y, yo, yi, 16).parallel(yo)
    f.store_at(g, yo).compute_at(g, yi)FOLD
}
"""


def program(fold=".fold_storage(y, 4)", read="2"):
    return hdsl.loads(BLUR.replace("FOLD", fold).replace("READ", read), "<fold>")


def by_numpy(img, n):
    f = img.astype(np.int64) * 3 + 1
    h = img.shape[0] - n
    return (f[:h] + f[1:h + 1] + f[n:n + h]).astype(np.int32)


def image(w, h, seed=0):
    return np.random.RandomState(seed).randint(-1000, 1000, (h, w)).astype(np.int32)


@pytest.mark.parametrize("fold", [".fold_storage(y, 3)", ".fold_storage(y, 4)", ".fold_storage(y, 8)", ""])
def test_folded_storage_gives_the_same_values(fold):
    """The window is 3 rows (y .. y + 2): folds of 3, 4 and 8 rows and none all equal the
    evaluator and NumPy, over several strips of 16 rows and a last partial one."""
    p = program(fold)
    img = image(37, 53)
    w, h = 37, 51
    want = by_numpy(img, 2)
    assert np.array_equal(p.realize((w, h), img=img), want)
    assert np.array_equal(p.compile("host").realize((w, h), img=img), want)


def test_the_loop_nest_keeps_n_rows():
    """f's rows are addressed modulo exactly n (3, where the automatic folding of this unsplit
    window takes the power of two above it, 4)."""
    text = stmt_str(lower(program(".fold_storage(y, 3)").ir, None, "host").stmt)
    assert "(g.s0.y + 2) % 3 * f.stride.1" in text and "% 4" not in text
    assert "(g.s0.y + 2) % 4 * f.stride.1" in stmt_str(lower(program("").ir, None, "host").stmt)


def errors(p, target="host", **args):
    with pytest.raises(hdsl.HdslError) as e:
        p.compile(target).realize((20, 20), img=image(20, 40), **args)
    return str(e.value)


def test_a_constant_window_wider_than_the_fold_is_refused_where_written():
    msg = errors(program(".fold_storage(y, 2)"))
    assert "fold_storage(y, 2) is too small: 'f' holds 3 slices along y at once" in msg
    assert "<fold>:12:" in msg and "^" in msg and "fold_storage(y, 3)" in msg


def test_a_window_known_at_run_time_is_checked_at_run_time():
    """f(x, y + n) with the param n: the window is n + 1 rows. With fold_storage(y, 4), n = 3
    runs (and equals NumPy); n = 4 would overwrite rows still to be read: an error naming the
    directive, not wrong values."""
    p = program(".fold_storage(y, 4)", read="n")
    img = image(20, 40)
    c = p.compile("host")
    assert np.array_equal(c.realize((20, 20), img=img, n=3), by_numpy(img, 3)[:20])
    msg = errors(p, n=4)
    assert "fold_storage" in msg and "too small" in msg


@pytest.mark.parametrize("fold, words", [
    # stored where computed: nothing slides
    ("", "stored where it is computed"),
    # a rounded-up split of y computes rows past the window
    (".split(y, yo2, yi2, 2, round_up).fold_storage(y, 4)", "rounded up"),
    (".fold_storage(y, 4).fold_storage(x, 4)", "more than one dimension"),
])
def test_folds_that_cannot_hold_are_refused(fold, words):
    text = BLUR.replace("READ", "2").replace("f.store_at(g, yo).compute_at(g, yi)FOLD",
                                             "f.store_at(g, yo).compute_at(g, yi)" + fold)
    if not fold:
        text = text.replace("f.store_at(g, yo).compute_at(g, yi)", "f.compute_at(g, yi).fold_storage(y, 4)")
    msg = errors(hdsl.loads(text, "<fold>"))
    assert words in msg and "<fold>:" in msg and "^" in msg


def test_fold_storage_is_a_whole_func_directive():
    text = BLUR.replace("READ", "2").replace("FOLD", "").replace(
        "g.split(y, yo, yi, 16).parallel(yo)", "g.split(y, yo, yi, 16).parallel(yo)\n    g.update(0).fold_storage(y, 4)")
    with pytest.raises(hdsl.HdslError) as e:
        hdsl.loads(text, "<fold>")
    assert "fold_storage" in str(e.value)
