"""`print` output, and the run-time errors of section 7 of the spec."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import hdsl
from .helpers import assert_same, load, program, rand_image

BLUR_NO_BOUNDARY = """
pipeline blur_raw
input img: u8[2]
param k: i32
output out: u8[2]
algorithm {
    out(x, y) = img(x - 1, y) / 2 + img(x + 1, y + k) / 2
}
"""


def printed(capfd) -> list[str]:
    """Lines printed so far, by Python (the evaluator) or by native code through C's stdio."""
    ctypes.CDLL(None).fflush(None)
    return capfd.readouterr().out.splitlines()


@pytest.mark.parametrize("target", ["interp", "host"])
def test_print_text(capfd, target):
    p = program("""
pipeline printer
input img: i32[2]
output out: i32[2]
algorithm {
    out(x, y) = print(img(x, y) * 2, "at", x, y, x > y)
}
""").compile(target)
    img = np.array([[3, -4, 5], [0, 7, -1]], np.int32)
    out = p(img=img)
    assert_same(out, img * 2)
    lines = printed(capfd)
    expected = [f"{img[y, x] * 2} at {x} {y} {'true' if x > y else 'false'}" for y in range(2) for x in range(3)]
    assert sorted(lines) == sorted(expected)
    assert lines == expected            # Halide's serial order: x innermost


@pytest.mark.parametrize("target", ["interp", "host"])
def test_print_floats_like_halide(capfd, target):
    """Halide prints f32 with six decimals and f64 in scientific notation."""
    p = program("""
pipeline printf
input v: f32[1]
output out: f32[1]
algorithm {
    out(i) = print(v(i), f64(v(i)) * 1000.0)
}
""").compile(target)
    v = np.array([1.5, -0.25, 3.0], np.float32)
    assert_same(p(v=v), v)
    assert printed(capfd) == [
        "1.500000 1.500000e+03", "-0.250000 -2.500000e+02", "3.000000 3.000000e+03"]


@pytest.mark.parametrize("target", ["interp", "host"])
def test_print_formats_agree_on_every_type(capfd, target):
    """Native code once printed floats with %g ("0.333333" vs "1e+20") and could not print a
    bool at all; every type now prints as the evaluator (and Halide's runtime: f32 and f16
    with six decimals, f64 in scientific notation, bool as true/false)."""
    p = program("""
pipeline printall
input v: f32[1]
output out: f32[1]
algorithm {
    out(i) = print(v(i), f64(v(i)), f16(v(i)), v(i) > 0.0f, i8(i) - 3, u64(i), f32(i) * -0.0f)
}
""").compile(target)
    inf = np.float32(np.inf)
    v = np.array([1.0 / 3.0, 1e20, -inf, 65504.0], np.float32)
    assert_same(p(v=v), v)
    assert printed(capfd) == [
        "0.333333 3.333333e-01 0.333252 true -3 0 -0.000000",
        "100000002004087734272.000000 1.000000e+20 inf true -2 1 -0.000000",
        "-inf -inf -inf false -1 2 -0.000000",
        "65504.000000 6.550400e+04 65504.000000 true 0 3 -0.000000",
    ]


def test_input_too_small_message_of_the_spec():
    """Section 1's program on a 3072-wide input gives section 7's message, word for word."""
    p = load("spec_blur")
    img = np.zeros((4, 3072), np.uint16)
    with pytest.raises(hdsl.HdslError) as e:
        p(img=img)
    assert str(e.value) == (
        "error: input 'img' is read at x = -1 .. 3072, but the buffer covers x = 0 .. 3071\n"
        "hint: shrink the output, or wrap the input in a boundary condition:\n"
        "      `use boundary` and `clamped = repeat_edge(img)`")


def test_input_too_small_message():
    p = program(BLUR_NO_BOUNDARY, "blur_raw.hl")
    img = np.zeros((11, 13), np.uint8)
    with pytest.raises(hdsl.HdslError) as e:
        p(img=img, k=0)
    assert str(e.value) == (
        "error: input 'img' is read at x = -1 .. 13, but the buffer covers x = 0 .. 12\n"
        "hint: shrink the output, or wrap the input in a boundary condition:\n"
        "      `use boundary` and `clamped = repeat_edge(img)`")


def test_input_too_small_in_y_and_for_a_larger_output():
    p = program(BLUR_NO_BOUNDARY.replace("x - 1", "x").replace("x + 1", "x"), "blur_raw.hl")
    img = np.zeros((11, 13), np.uint8)
    with pytest.raises(hdsl.HdslError) as e:
        p(img=img, k=2)
    assert "input 'img' is read at y = 0 .. 12, but the buffer covers y = 0 .. 10" in str(e.value)
    with pytest.raises(hdsl.HdslError) as e:
        p.realize((14, 11), img=img, k=0)
    assert "input 'img' is read at x = 0 .. 13, but the buffer covers x = 0 .. 12" in str(e.value)
    # exactly the input's size works
    assert p(img=img, k=0).shape == (11, 13)


def test_input_too_small_through_an_update_and_an_rdom():
    p = program("""
pipeline sums
input img: i32[1]
output out: i32[1]
algorithm {
    rdom r = [0..4]
    out(x) = 0
    out(x) += img(x + r.x)
}
""")
    with pytest.raises(hdsl.HdslError) as e:
        p(img=np.zeros(9, np.int32))
    assert "input 'img' is read at x = 0 .. 11, but the buffer covers x = 0 .. 8" in str(e.value)
    out = p.realize((6,), img=np.arange(9, dtype=np.int32))
    assert_same(out, np.array([sum(range(i, i + 4)) for i in range(6)], np.int32))


@pytest.mark.parametrize("target", ["interp", "host"])
def test_print_in_an_update_natively_too(capfd, target):
    """Each point of an update's rdom prints once, in the rdom's order, on both targets."""
    p = program("""
pipeline printupd
input v: i32[1]
output out: i32[1]
algorithm {
    rdom r = [0..3]
    total(i) = 0
    total(0) += print(v(r.x), "r.x =", r.x)
    out(i) = total(0)
}
""").compile(target)
    assert_same(p.realize((1,), v=np.array([4, 5, 6], np.int32)), np.array([15], np.int32))
    assert printed(capfd) == ["4 r.x = 0", "5 r.x = 1", "6 r.x = 2"]


@pytest.mark.parametrize("target", ["interp", "host"])
def test_print_of_integers_of_several_widths(capfd, target):
    """i16, u8 and i64 values (one past i32's range) print the same lines in Halide's serial order."""
    img = np.array([[3, -4, 5], [0, 7, -32768]], np.int16)
    p = program("""
pipeline printer2
input img: i16[2]
output out: i16[2]
algorithm {
    out(x, y) = print(img(x, y), "at", u8(x), i64(y) - 5000000000)
}
""").compile(target)
    assert_same(p(img=img), img)
    assert printed(capfd) == [f"{img[y, x]} at {x} {y - 5000000000}" for y in range(2) for x in range(3)]


def test_wrong_dtype():
    p = program(BLUR_NO_BOUNDARY, "blur_raw.hl")
    with pytest.raises(hdsl.HdslError) as e:
        p.realize((3, 3), img=np.zeros((11, 13)), k=0)
    assert "input 'img' is u8 but the array holds float64" in str(e.value)
    with pytest.raises(hdsl.HdslError) as e:
        p.realize((3, 3), img=np.zeros((11, 13), np.int8), k=0)
    assert "input 'img' is u8 but the array holds int8" in str(e.value)


def test_wrong_dimensionality():
    p = program(BLUR_NO_BOUNDARY, "blur_raw.hl")
    with pytest.raises(hdsl.HdslError) as e:
        p.realize((3, 3), img=np.zeros((11, 13, 3), np.uint8), k=0)
    assert "input 'img' has 2 dimensions but the array has 3" in str(e.value)


def test_missing_param_and_input():
    p = program(BLUR_NO_BOUNDARY, "blur_raw.hl")
    img = np.zeros((11, 13), np.uint8)
    with pytest.raises(hdsl.HdslError) as e:
        p.realize((3, 3), img=img)
    assert "param 'k' has no default and is not given" in str(e.value)
    with pytest.raises(hdsl.HdslError) as e:
        p.realize((3, 3), k=1)
    assert "input 'img' is missing" in str(e.value)
    with pytest.raises(hdsl.HdslError) as e:
        p.realize((3, 3), img=img, k=1, gain=2)
    assert "has no input or param 'gain'" in str(e.value)


def test_param_value_that_does_not_fit():
    p = program(BLUR_NO_BOUNDARY, "blur_raw.hl")
    img = np.zeros((11, 13), np.uint8)
    with pytest.raises(hdsl.HdslError) as e:
        p.realize((3, 3), img=img, k=2.5)
    assert "param 'k' is i32" in str(e.value)


def test_cyclic_dependency_through_an_update_is_an_error():
    """A ring of reads through an update is refused by the checker, so `check`, the evaluator
    and native code agree (native code once compiled it and ran). Halide refuses it too, at
    the update: "Func f cannot be given a new update definition, because it has already been
    realized or used in the definition of another Func" (Function::define_update)."""
    text = """
pipeline cyc
input v: i32[1]
output a: i32[1]
algorithm {
    f(x) = v(x)
    g(x) = f(x) * 2
    f(x) = f(x) + g(x)
    a(x) = f(x)
}
"""
    with pytest.raises(hdsl.HdslError) as e:
        program(text, "cyc.hl")
    assert str(e.value).startswith("cyc.hl:8:5: error: 'f' and 'g' depend on each other: "
                                   "this update of 'f' reads 'g', which reads 'f'")
    longer = text.replace("g(x) = f(x) * 2", "h(x) = f(x) * 2\n    g(x) = h(x - 1)")
    with pytest.raises(hdsl.HdslError) as e:
        program(longer, "cyc.hl")
    assert "cyc.hl:9:5: error: 'f' and 'g' depend on each other: this update of 'f' reads 'g', " \
        "which reads 'f' through 'h'" in str(e.value)
