"""Pipeline.realize_into: outputs written into caller-owned arrays."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl

TEXT = """
pipeline two
input  img: u8[3]
output gray: u16[2]
output swapped: u8[3]
algorithm {
    gray(x, y) = u16(img(x, y, 0)) + u16(img(x, y, 1)) + u16(img(x, y, 2))
    swapped(x, y, c) = img(x, y, 2 - c)
}
schedule s {
    gray.vectorize(x, 8)
    swapped.vectorize(x, 8)
}
"""


@pytest.mark.parametrize("target", ["interp", "host"])
def test_writes_into_the_given_arrays(target):
    p = hdsl.loads(TEXT, "two.hl")
    c = p.compile(target, schedule="s") if target != "interp" else p
    img = np.random.RandomState(0).randint(0, 255, (6, 11, 3)).astype(np.uint8)
    gray = np.full((6, 11), 7, np.uint16)
    planes = np.zeros((3, 6, 11), np.uint8)
    swapped = planes.transpose(1, 2, 0)          # (H, W, C) over planar storage
    got = c.realize_into((gray, swapped), img=img)
    assert got[0] is gray and got[1] is swapped
    assert np.array_equal(gray, img.astype(np.uint16).sum(axis=2))
    assert np.array_equal(swapped, img[:, :, ::-1])
    assert np.array_equal(planes[0], img[:, :, 2])        # it really wrote the caller's memory


def test_smaller_output_arrays_compute_a_smaller_region():
    p = hdsl.loads(TEXT, "two.hl").compile("host", schedule="s")
    img = np.random.RandomState(1).randint(0, 255, (6, 11, 3)).astype(np.uint8)
    gray = np.empty((4, 5), np.uint16)
    swapped = np.empty((3, 4, 5), np.uint8).transpose(1, 2, 0)
    p.realize_into((gray, swapped), img=img)
    assert np.array_equal(gray, img[:4, :5].astype(np.uint16).sum(axis=2))


def test_bad_arrays_are_refused_with_a_message():
    p = hdsl.loads(TEXT, "two.hl").compile("host", schedule="s")
    img = np.zeros((6, 11, 3), np.uint8)
    with pytest.raises(hdsl.HdslError, match="2 outputs, but 1 arrays"):
        p.realize_into(np.zeros((6, 11), np.uint16), img=img)
    with pytest.raises(hdsl.HdslError, match="needs a u16 array"):
        p.realize_into((np.zeros((6, 11), np.int32), np.zeros((6, 11, 3), np.uint8)), img=img)
    # interleaved colour: x has stride 3
    with pytest.raises(hdsl.HdslError, match="stride 1 in x"):
        p.realize_into((np.zeros((6, 11), np.uint16), np.zeros((6, 11, 3), np.uint8)), img=img)


def test_an_output_overlapping_an_input_is_refused():
    """Buffers must not overlap (an output written over an input that is still to be read
    would change what a stencil reads): writing into the input itself is an error."""
    import hdsl
    from hdsl.diagnostics import HdslError
    p = hdsl.loads("pipeline b\ninput img: f32[2]\noutput out: f32[2]\n"
                   "algorithm { out(x, y) = img(x, y) * 2.0f }\n", "b.hl")
    c = p.compile("host")
    img = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(HdslError, match="output 'out' overlaps input 'img' in memory"):
        c.realize_into(img, img=img)
    with pytest.raises(HdslError, match="overlaps"):
        c.realize_into(img[:, 1:], img=img[:, :3])
    out = np.empty_like(img)
    c.realize_into(out, img=img)
    assert np.array_equal(out, img * 2)
