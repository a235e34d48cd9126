"""Offsets into buffers are 32-bit (as in Halide): every buffer must span fewer than 2^31
elements. Inputs and outputs are checked on entry and intermediates before they are
allocated; either way the user gets a message, not a wrong address."""
import numpy as np
import pytest

import hdsl
from hdsl.diagnostics import HdslError

HUGE_INTERMEDIATE = """
pipeline huge
input  img: u8[2]
output out: u8[2]
algorithm {
    f(x, y) = img(x % 4, y % 4) + u8(x)
    out(x, y) = f(x * 50000, y * 50000)
}
schedule s { f.compute_root() }
"""


def test_an_intermediate_of_2_to_the_31_elements_is_refused_before_allocation():
    p = hdsl.loads(HUGE_INTERMEDIATE, "huge.hl")
    c = p.compile("host", schedule="s")
    img = np.arange(16, dtype=np.uint8).reshape(4, 4)
    # 1x1 output: f covers one point, fine
    assert c.realize((1, 1), img=img)[0, 0] == img[0, 0]
    # 2x2: f's region is 50001 x 50001 = 2.5e9 elements (2.5 GB): refused, not allocated
    with pytest.raises(HdslError) as e:
        c.realize((2, 2), img=img)
    assert "intermediate buffer spans 2500100001 elements" in str(e.value)
    assert "32-bit offsets" in str(e.value)


def test_an_input_view_spanning_2_to_the_31_elements_is_refused():
    p = hdsl.loads("pipeline id\ninput img: u8[2]\noutput out: u8[2]\nalgorithm { out(x, y) = img(x, y) }\n",
                   "id.hl")
    c = p.compile("host")
    base = np.zeros(64, np.uint8)
    # two rows 2^31 bytes apart (never read: the check comes first)
    view = np.lib.stride_tricks.as_strided(base, shape=(2, 4), strides=(2 ** 31, 1))
    with pytest.raises(HdslError) as e:
        c.realize((4, 1), img=view)
    assert f"buffer 'img' spans {2 ** 31 + 4} elements" in str(e.value)
    # the same rows 8 bytes apart are fine
    ok = np.lib.stride_tricks.as_strided(np.arange(64, dtype=np.uint8), shape=(2, 4), strides=(8, 1))
    assert np.array_equal(c.realize((4, 2), img=ok), ok)
