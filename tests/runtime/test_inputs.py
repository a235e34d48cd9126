"""NumPy arrays as inputs and outputs: byte order, read-only outputs, and views whose
sizes only look small (broadcast dimensions of stride 0). Each case once went wrong in
native code (wrong values, a write into read-only memory, a truncated extent, or a full
copy of a huge broadcast before any size check)."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import hdsl
from hdsl import HdslError

TARGETS = ["interp", "host"]

SCALE = """
pipeline scale
input  img: u16[2]
output out: u32[2]
algorithm { out(x, y) = u32(img(x, y)) * 3 + u32(x) }
"""


def compiled(text: str, target: str):
    p = hdsl.loads(text, "t.hl")
    return p.compile(target) if target != "interp" else p


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("layout", ["row-major", "transposed"])
def test_big_endian_inputs_are_read_by_value(target, layout):
    """A '>u2' array holds the same numbers as a '<u2' one; native code once read its bytes
    in the machine's order (258 for 513)."""
    values = np.array([[1, 513, 65535], [256, 2, 4660]], np.uint16)
    big = values.astype(">u2")
    if layout == "transposed":              # the same values stored column by column: x is
        big = big.T.copy().T                # not of stride 1, so native code copies it first
    expected = values.astype(np.uint32) * 3 + np.arange(values.shape[1], dtype=np.uint32)
    got = compiled(SCALE, target)(img=big)
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("target", TARGETS)
def test_realize_into_refuses_a_read_only_array(target):
    p = compiled(SCALE, target)
    img = np.arange(12, dtype=np.uint16).reshape(3, 4)
    out = np.zeros((3, 4), np.uint32)
    out.flags.writeable = False
    with pytest.raises(HdslError) as e:
        p.realize_into(out, img=img)
    assert "the array for output 'out' is read-only" in str(e.value)
    assert not out.any()                    # nothing was written


@pytest.mark.parametrize("target", TARGETS)
def test_an_extent_of_2_to_the_31_in_a_broadcast_dimension_is_refused(target):
    """A row broadcast to 2^31 rows takes no memory, but the extent does not fit the i32
    that coordinates and buffer extents are (native code once truncated it to -2^31)."""
    row = np.arange(4, dtype=np.uint16)
    tall = np.broadcast_to(row, (2 ** 31, 4))
    with pytest.raises(HdslError) as e:
        compiled(SCALE, target).realize((4, 2), img=tall)
    assert f"input 'img' has shape {(2 ** 31, 4)}; an extent may be at most 2^31 - 1" in str(e.value)
    # one row fewer is fine, on both targets: the two rows read are the same row
    ok = np.broadcast_to(row, (2 ** 31 - 1, 4))
    assert np.array_equal(compiled(SCALE, target).realize((4, 2), img=ok),
                          np.broadcast_to(row.astype(np.uint32) * 4, (2, 4)))


def test_a_huge_broadcast_along_x_is_refused_before_it_is_copied():
    """x of stride 0 must be copied for native code (it reads x with stride 1); a view of
    2^31 elements is refused first instead of being copied (2 GiB here)."""
    col = np.arange(2, dtype=np.uint16)[:, None]
    wide = np.broadcast_to(col, (2, 2 ** 30))
    p = compiled(SCALE, "host")
    tracemalloc.start()
    try:
        with pytest.raises(HdslError) as e:
            p.realize((4, 2), img=wide)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"buffer 'img' spans {2 ** 31} elements" in str(e.value)
    assert peak < 2 ** 24
    # a small broadcast is copied and read right
    small = np.broadcast_to(col, (2, 5))
    assert np.array_equal(p.realize((4, 2), img=small),
                          np.array([[0, 1, 2, 3], [3, 4, 5, 6]], np.uint32))
