"""Parallel loops whose bodies are the same up to names share one task function, and serial
loop nests of the same shape are outlined into one function (hdsl/codegen/cpu.py
CodeGenCPU.outline, task_key and repeated_nests; hdsl/ir/closure.py shape_key).

The local Laplacian's pyramid levels are each one loop nest over other buffers: 13 task
functions were 6 distinct ones, and its five coarsest levels, computed serially in the entry
function, two. Each caller fills the shared task's closure with its own
values, field by field in the first body's order (the names sort differently in each body).
The expected values are worked out with NumPy, and each case is also compiled with the
sharing off (the same values, more functions): a closure filled in the wrong order, or two
bodies that differ by a constant taken as one, gives other numbers.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form
from hdsl.codegen.cpu import CodeGenCPU
from hdsl.ir.closure import shape_key
from hdsl.ir.expr import BinOp, Const, Var
from hdsl.ir.stmt import Block, For, Load, Provide, Store
from hdsl.ir.types import I32

TWINS = """
pipeline twins
input a: i32[2]
input b: i32[2]
output out: i32[2]
algorithm {
    var x, y
    f(x, y) = a(x, y) * 3 + b(x, y)
    g(x, y) = b(x, y) * 3 + a(x, y)
    k(x, y) = a(x, y) * 5 + b(x, y)
    h(x, y) = f(x, y) * 7 + g(x, y)
    out(x, y) = h(x, y) - k(x, y)
}
schedule {
    f.compute_root().vectorize(x, 8).parallel(y)
    g.compute_root().vectorize(x, 8).parallel(y)
    k.compute_root().vectorize(x, 8).parallel(y)
    h.compute_root().vectorize(x, 8).parallel(y)
    out.vectorize(x, 8).parallel(y)
}
"""


def _tasks(p, target="host") -> list[str]:
    return re.findall(r'define internal i32 @"([^"]+\.par\d+)"', compiled_form(p.ir, "llvm", target=target))


def test_bodies_equal_up_to_names_share_a_task_and_others_do_not(monkeypatch):
    p = hdsl.loads(TWINS, "twins.hl")
    # f and g (the same loop nest over a, b, with the roles of a and b swapped) share one;
    # k differs from f by a constant only, and keeps its own
    assert len(_tasks(p)) == 4
    monkeypatch.setattr(CodeGenCPU, "SHARE_TASKS", False)
    assert len(_tasks(p)) == 5


SERIAL = TWINS.replace(".parallel(y)", "").replace("pipeline twins", "pipeline serial")


def test_serial_nests_of_one_shape_call_one_function(monkeypatch):
    p = hdsl.loads(SERIAL, "serial.hl")
    ir = compiled_form(p.ir, "llvm")
    # f and g have one shape: outlined, into one function; k (another constant) stays inline
    assert len(_tasks(p)) == 1
    assert len(re.findall(r'call i32 @"hdsl_serial\.par1"', ir)) == 2
    assert "noinline" in re.search(r'define internal i32 @"hdsl_serial\.par1"[^{]*', ir).group(0)
    monkeypatch.setattr(CodeGenCPU, "SHARE_TASKS", False)
    assert _tasks(p) == []


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
@pytest.mark.parametrize("share", [True, False])
@pytest.mark.parametrize("src", [TWINS, SERIAL], ids=["parallel", "serial"])
def test_shared_functions_give_numpys_values(src, target, share, monkeypatch):
    monkeypatch.setattr(CodeGenCPU, "SHARE_TASKS", share)
    p = hdsl.loads(src, "shared.hl").compile(target, use_cache=False)
    rng = np.random.default_rng(5)
    for h, w in ((5, 13), (17, 40), (1, 3)):
        a = rng.integers(-1000, 1000, (h, w)).astype(np.int32)
        b = rng.integers(-1000, 1000, (h, w)).astype(np.int32)
        f, g, k = a * 3 + b, b * 3 + a, a * 5 + b
        assert np.array_equal(p(a=a, b=b), f * 7 + g - k)


def test_the_local_laplacians_pyramid_levels_share_their_tasks(monkeypatch):
    from pathlib import Path
    p = hdsl.load(Path(__file__).resolve().parents[2] / "examples" / "local_laplacian.hl")
    # 13 parallel loops (6 distinct), and 5 serial coarse levels (2 distinct)
    assert len(_tasks(p)) == 8
    monkeypatch.setattr(CodeGenCPU, "SHARE_TASKS", False)
    assert len(_tasks(p)) == 13


def _nest(buf: str, src: str, var: str, k: int):
    x = Var(var, I32)
    return For(var, Const(I32, 0), Var(f"{buf}.extent", I32), "serial",
               Store(buf, x, BinOp("*", Load(src, x, I32), Const(I32, k), I32)))


def test_shape_keys_are_equal_exactly_up_to_a_consistent_renaming():
    one, names = shape_key(_nest("f", "a", "x", 3))
    two, names2 = shape_key(_nest("g", "b", "y", 3))
    assert one == two and names == ["x", "f.extent", "f", "a"] and names2 == ["y", "g.extent", "g", "b"]
    assert shape_key(_nest("f", "a", "x", 4))[0] != one           # another constant
    assert shape_key(_nest("f", "f", "x", 3))[0] != one           # one buffer where there were two
    # names given first keep their index whatever the order of first use
    assert shape_key(_nest("f", "a", "x", 3), ("a",))[1][0] == "a"
    # lowering's nodes (before flattening) have no key
    assert shape_key(Block((Provide(object(), (), ()),))) is None


HUGE_TWINS = """
pipeline huge
input img: u8[2]
output out: u8[2]
algorithm {
    f(x, y) = img(x % 4, y % 4) + u8(x)
    g(x, y) = f(y * 50000, x * 50000) + f(0, 0)
    f2(x, y) = img(x % 4, y % 4) + u8(x)
    g2(x, y) = f2(y * 50000, x * 50000) + f2(0, 0)
    out(x, y) = g(x, y) + g2(x, y)
}
schedule {
    g.compute_root()
    g2.compute_root()
    f.compute_at(g, y)
    f2.compute_at(g2, y)
}
"""


def test_an_outlined_serial_nest_reports_its_errors_values():
    """f's storage is allocated inside g's serial y loop, a nest outlined with g2's: at y = 1
    it would span 50001 x 50001 elements. The message names the count, as the entry function
    reports it (tests/runtime/test_buffer_limits.py): the error values reach the caller."""
    p = hdsl.loads(HUGE_TWINS, "huge.hl")
    assert len(_tasks(p)) == 1
    c = p.compile("host", use_cache=False)
    img = np.arange(1, 17, dtype=np.uint8).reshape(4, 4)
    # out(x, 0) = g + g2 = 2 * (f(0, x * 50000) + f(0, 0)) = 4 * img[0, 0] (50000 % 4 == 0)
    assert np.array_equal(c.realize((2, 1), img=img), np.full((1, 2), 4, np.uint8))
    with pytest.raises(hdsl.HdslError) as e:
        c.realize((2, 2), img=img)
    assert "intermediate buffer spans 2500100001 elements" in str(e.value)
