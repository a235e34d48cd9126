"""The fast call path (hdsl/runtime/fastcall.py, runtime/call.c): a compiled pipeline called
with NumPy arrays gives the values NumPy computes (the oracle here: `img + k` and a 3-tap sum
written with slicing), reads in place what the compiled code can read (broadcast views, row
strides, flipped rows), hands everything else to the general path (copies, or the same
errors as ever), and is safe to call from several threads at once."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import hdsl
from hdsl.runtime import fastcall

SRC = """
pipeline inc
input img: u8[2]
param k: u8 = 1
output out: u8[2]
algorithm {
    out(x, y) = img(x, y) + k
}
"""

STENCIL = """
pipeline sum3
input img: i32[2]
param flip: bool = false
output out: i32[2]
algorithm {
    s(x, y) = img(x - 1, y) + img(x, y) + img(x + 1, y)
    out(x, y) = select(flip, -s(x, y), s(x, y))
}
schedule { out.split(x, xo, xi, 8) }
"""

SPLIT = """
pipeline split
input img: i32[2]
output out: i32[2]
algorithm {
    out(x, y) = img(x, y) * 3
}
schedule { out.split(x, xo, xi, 8) }
"""

COLOUR = """
pipeline gain
input img: f32[3]
param g: f32 = 2.0
output out: f32[3]
algorithm {
    out(x, y, c) = img(x, y, c) * g
}
"""


@pytest.fixture(scope="module")
def inc():
    return hdsl.loads(SRC, "inc.hl").compile("host")


@pytest.fixture(scope="module")
def img():
    return np.random.RandomState(3).randint(0, 200, (13, 21)).astype(np.uint8)


def test_this_process_has_a_fast_path(inc):
    """The object layout is found (CPython and NumPy as installed), so calls take the fast path."""
    assert fastcall.probe_layout() is not None
    assert inc._fast is not None


def test_values_and_the_path_taken(inc, img):
    out = np.empty_like(img)
    assert inc._fast.call(out, {"img": img}) == 0                  # the fast path ran it
    assert np.array_equal(out, img + 1)
    assert inc._fast.call(out, {"img": img, "k": 7}) == 0
    assert np.array_equal(out, img + 7)
    assert inc.realize_into(out, img=img, k=np.uint8(9)) is out
    assert np.array_equal(out, img + 9)
    got = inc(img=img, k=3)
    assert got.shape == img.shape and got.flags.c_contiguous and np.array_equal(got, img + 3)


@pytest.mark.parametrize("view", ["broadcast_rows", "every_other_row", "flipped_rows", "row_of_a_wider_array"])
def test_inputs_read_in_place(inc, img, view):
    """Views whose x has stride 1 are passed as they are (no copy): a row broadcast down the
    image (y stride 0), every other row, rows in reverse order, a window of a wider array."""
    arr = {"broadcast_rows": np.broadcast_to(img[4], img.shape),
           "every_other_row": img[::2],
           "flipped_rows": img[::-1],
           "row_of_a_wider_array": np.ascontiguousarray(np.tile(img, (1, 3)))[:, 5:5 + img.shape[1]]}[view]
    out = np.empty(arr.shape, np.uint8)
    assert inc._fast.call(out, {"img": arr, "k": 2}) == 0
    assert np.array_equal(out, arr + 2)


@pytest.mark.parametrize("view", ["columns_strided", "transposed", "big_endian", "fortran"])
def test_inputs_the_general_path_converts(view):
    """x not at stride 1, another byte order: the fast path hands the call back untouched and
    the general path copies the input; the values are the same."""
    p = hdsl.loads(SRC.replace("u8", "u16"), "inc16.hl").compile("host")
    base = np.random.RandomState(5).randint(0, 65536, (9, 40)).astype(np.uint16)
    arr = {"columns_strided": base[:, ::2], "transposed": base[:, :9].T, "big_endian": base.astype(">u2"),
           "fortran": np.asfortranarray(base)}[view]
    want = np.asarray(arr).astype(np.uint16) + np.uint16(5)
    out = np.full(want.shape, 7, np.uint16)
    assert p._fast.call(out, {"img": arr, "k": 5}) == fastcall.FALLBACK
    assert (out == 7).all()                                      # handed back before anything ran
    p.realize_into(out, img=arr, k=5)
    assert np.array_equal(out, want)


def err(fn, **kw):
    with pytest.raises(hdsl.HdslError) as e:
        fn(**kw)
    return str(e.value)


def test_user_errors_are_messages_not_crashes(inc, img):
    out = np.empty_like(img)
    assert "input 'img' is u8 but the array holds float32" in err(inc.realize_into, out=out,
                                                                   img=img.astype(np.float32))
    assert "input 'img' has 2 dimensions but the array has 3" in err(inc.realize_into, out=out, img=img[..., None])
    assert "no input or param 'kk'" in err(inc.realize_into, out=out, img=img, kk=1)
    assert "input 'img' is missing" in err(inc.realize_into, out=out)
    assert "param 'k' is u8; 300 does not fit" in err(inc.realize_into, out=out, img=img, k=300)
    assert "param 'k' is u8; 2.5 does not fit" in err(inc.realize_into, out=out, img=img, k=2.5)
    assert "output 'out' needs a u8 array with 2 dimensions" in err(inc.realize_into, out=out.astype(np.int16),
                                                                    img=img)
    ro = out.copy()
    ro.flags.writeable = False
    assert "the array for output 'out' is read-only" in err(inc.realize_into, out=ro, img=img)
    assert "output 'out' overlaps input 'img'" in err(inc.realize_into, out=img, img=img)
    assert "output 'out' overlaps input 'img'" in err(inc.realize_into, out=img[1:], img=img[:-1])
    assert "must have stride 1 in x" in err(inc.realize_into, out=np.empty((13, 42), np.uint8)[:, ::2], img=img)
    # too large an output: the compiled code's own bounds check, its message
    big = np.empty((13, 30), np.uint8)
    assert "input 'img' is read at x = 0 .. 29, but the buffer covers x = 0 .. 20" in err(
        inc.realize_into, out=big, img=img)
    assert "input 'img' is read at x = 0 .. 29" in err(inc.realize_into, out=(big,), img=img)


def test_a_bool_param_takes_only_truth_values():
    p = hdsl.loads(STENCIL, "s.hl").compile("host")
    a = np.arange(30, dtype=np.int32).reshape(3, 10)
    out = np.empty((3, 8), np.int32)
    want = a[:, :-2] + a[:, 1:-1] + a[:, 2:]
    assert np.array_equal(p.realize((8, 3), min=(1, 0), img=a, flip=True), -want)
    assert "param 'flip' is bool; 2 does not fit" in err(p.realize_into, out=out, img=a, flip=2)


def test_narrow_outputs_take_the_guarded_form():
    """`split(x, xo, xi, 8)`: outputs at least 8 wide run the form whose last tile is shifted
    inwards; a narrower one needs the guarded form, compiled on its first use (the fast path
    hands that call back), after which the fast path takes narrow calls too."""
    p = hdsl.loads(SPLIT, "split.hl").compile("host")
    a = np.random.RandomState(2).randint(-50, 50, (6, 30)).astype(np.int32)
    assert p.native._guarded is None
    for w in (20, 5, 3, 20, 1):
        out = np.empty((6, w), np.int32)
        narrow_known = p.native._guarded is not None
        code = p._fast.call(out, {"img": a})
        assert code == (0 if w >= 8 or narrow_known else fastcall.FALLBACK)
        p.realize_into(out, img=a)
        assert np.array_equal(out, a[:, :w] * 3)
    assert p.native._guarded is not None


def test_colour_planar_arrays():
    p = hdsl.loads(COLOUR, "c.hl").compile("host")
    planar = np.random.RandomState(1).rand(3, 7, 11).astype(np.float32)
    img = planar.transpose(1, 2, 0)                               # (H, W, C), x at stride 1
    out = np.empty((3, 7, 11), np.float32).transpose(1, 2, 0)
    assert p._fast.call(out, {"img": img, "g": 0.5}) == 0
    assert np.array_equal(out, img * np.float32(0.5))
    got = p(img=img)
    assert got.shape == (7, 11, 3) and got.flags.c_contiguous and np.array_equal(got, img * np.float32(2))
    interleaved = np.ascontiguousarray(img)                      # x stride 3: copied, same values
    assert np.array_equal(p(img=interleaved, g=3.0), img * np.float32(3))


def test_concurrent_calls_share_nothing(inc):
    """One compiled pipeline called from 8 threads at once, each with its own arrays and param,
    and half of them failing (an output too large): every result and every message is the
    thread's own (descriptors on each call's stack; error info per thread)."""
    rs = np.random.RandomState(0)
    errors, wrong = [], []

    def work(t):
        a = rs.randint(0, 100, (17, 23)).astype(np.uint8) if t == 0 else np.full((17, 23), t, np.uint8)
        out = np.empty_like(a)
        for i in range(300):
            if (i + t) % 2:
                inc.realize_into(out, img=a, k=t)
                if not np.array_equal(out, a + t):
                    wrong.append(t)
            else:
                big = np.empty((17, 23 + t + 1), np.uint8)
                try:
                    inc.realize_into(big, img=a, k=t)
                except hdsl.HdslError as e:
                    if f"x = 0 .. {23 + t}," not in str(e):
                        errors.append(str(e))
                else:
                    errors.append("no error")
    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not wrong and not errors


def test_no_fast_path_when_disabled(monkeypatch, img):
    monkeypatch.setenv("HDSL_NO_FAST_CALL", "1")
    p = hdsl.loads(SRC, "inc.hl").compile("host")
    assert p._fast is None
    assert np.array_equal(p(img=img, k=4), img + 4)


def test_gpu_targets_take_the_general_path(img):
    p = hdsl.loads(SRC, "inc.hl").compile("cuda-emulate")
    assert p._fast is None
    assert np.array_equal(p(img=img, k=5), img + 5)
