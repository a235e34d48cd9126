"""Alias information and the code generator's scoped reuse of values (hdsl/codegen/cpu.py
CodeGenCPU.alias_info, hdsl/codegen/llvm.py CodeGenLLVM.stmt and cached).

- Each buffer's loads and stores carry a TBAA tag of their own, so LLVM keeps a value loaded
  from one buffer across stores to another: a loop-invariant load from an internal buffer
  (a compute_root scalar, as camera_pipe's colour matrix and sharpen strength) leaves the
  loop. Checked in the optimized LLVM IR, with the tags taken away as the control (the load
  then stays in the loop: the check can fail).
- Buffers never overlap: arrays that share one allocation but not one element are fine (the
  values test below), overlapping ones are refused by every call path
  (tests/runtime/test_realize_into.py, test_fast_call.py, tests/aot/test_aot.py).
- A value generated once is reused in the scopes it dominates, but never after a store that
  may have changed what it read: the expected values are worked out by hand (NumPy), not by
  the evaluator alone. Three updates of a scalar in a row used to give 0 + img instead of
  3 + img on native targets (each update's load was taken from before the previous store).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import hdsl
from hdsl.aot import compiled_form
from hdsl.codegen.cpu import CodeGenCPU

GAIN = """
pipeline gain
input img: i32[2]
param k: i32 = 3
output out: i32[2]
algorithm {
    var x, y
    coef() = k * 7 + 1
    out(x, y) = img(x, y) * coef() + y
}
schedule {
    coef.compute_root()
    out.vectorize(x, 8).parallel(y)
}
"""


def _optimized_ir(p, target="host") -> str:
    from llvmlite import binding as llvm
    from hdsl.runtime import jit
    m = llvm.parse_assembly(compiled_form(p.ir, "llvm", target=target))
    jit.optimize(m, jit.target_machine(target, "static"))
    return str(m)


def _loads_beside_vector_stores(ir: str) -> int:
    """The i32 loads in the basic blocks that store a vector of out (the x loop's body)."""
    blocks = re.split(r"\n(?=[^\s;!][^\n]*:)", ir)
    return sum(len(re.findall(r"= load i32,", b)) for b in blocks if "store <8 x i32>" in b)


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_a_loop_invariant_load_from_an_internal_buffer_leaves_the_loop(target, monkeypatch):
    p = hdsl.loads(GAIN, "gain.hl")
    ir = _optimized_ir(p, target)
    assert re.search(r'!"hdsl\.coef"', ir) and re.search(r'!"hdsl\.out"', ir)
    assert _loads_beside_vector_stores(ir) == 0
    # the control: without the tags, coef() is loaded again beside every store of out
    monkeypatch.setattr(CodeGenCPU, "ALIAS_INFO", False)
    assert _loads_beside_vector_stores(_optimized_ir(p, target)) > 0


def test_each_buffer_has_its_own_tag_and_descriptors_have_none():
    ir = compiled_form(hdsl.loads(GAIN, "gain.hl").ir, "llvm")
    types = dict(re.findall(r'(![0-9]+) = !\{ !"hdsl\.(\w+)"', ir))
    assert sorted(types.values()) == ["coef", "img", "out"]
    # (the loads of buffer descriptor fields and of the param carry no tag)
    assert re.search(r"load i64, ptr %\S+\n", ir)
    assert "!tbaa" in ir


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_arrays_sharing_an_allocation_but_no_element_give_the_right_values(target):
    p = hdsl.loads(GAIN, "gain.hl").compile(target)
    base = np.zeros((2, 7, 21), np.int32)
    base[0] = np.arange(7 * 21).reshape(7, 21) - 50
    img, out = base[0], base[1]                 # one block of memory, two disjoint halves
    p.realize_into(out, img=img, k=2)
    assert np.array_equal(out, (np.arange(7 * 21).reshape(7, 21) - 50) * 15 + np.arange(7)[:, None])
    assert np.array_equal(base[0], np.arange(7 * 21).reshape(7, 21) - 50)     # the input untouched
    with pytest.raises(hdsl.HdslError, match="overlaps"):
        p.realize_into(base[0], img=base[0])


UPDATES = """
pipeline upd
input img: i32[1]
output out: i32[1]
algorithm {
    s() = 0
    s() = s() + 1
    s() = s() + 1
    s() = s() + 1
    out(x) = img(x) + s()
}
"""


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_a_value_loaded_before_a_store_to_its_buffer_is_loaded_again(target):
    p = hdsl.loads(UPDATES, "upd.hl")
    img = np.arange(-3, 9, dtype=np.int32)
    assert np.array_equal(p.compile(target, use_cache=False)(img=img), img + 3)
    assert np.array_equal(p(img=img), img + 3)


SCAN = """
pipeline scan
input img: i32[1]
output out: i32[1]
algorithm {
    var x
    rdom r = [1..8]
    f(x) = img(x)
    f(r.x) = f(r.x - 1) * 2 + f(0)
    out(x) = f(x) + f(0)
}
schedule {
    f.compute_root()
}
"""


@pytest.mark.parametrize("target", ["host", "x86-64-avx2"])
def test_values_read_before_a_loop_that_writes_their_buffer_are_read_again_inside(target):
    """f(0) is read before the scan and in every iteration; the scan writes f (not f(0), but
    the code generator cannot tell): every read must see what the stores left."""
    p = hdsl.loads(SCAN, "scan.hl")
    img = np.array([5, -1, 2, 7, 0, 3, 1, 4, 9], np.int32)
    f = img.astype(np.int64).copy()
    for i in range(1, 8):
        f[i] = f[i - 1] * 2 + f[0]
    want = (f + f[0]).astype(np.int32)
    assert np.array_equal(p.compile(target, use_cache=False)(img=img), want)
    assert np.array_equal(p(img=img), want)


def test_the_entry_function_reuses_bounds_across_scopes():
    """The local Laplacian's entry function computed its bounds again in every scope (11900
    LLVM instructions for ~1700 distinct operations); now each is made once where it
    dominates its uses."""
    from pathlib import Path
    src = Path(__file__).resolve().parents[2] / "examples" / "local_laplacian.hl"
    ir = compiled_form(hdsl.load(src).ir, "llvm", shifted=True)
    entry = ir.split("\ndefine ")[1]
    n = sum(1 for line in entry.split("\n") if re.match(r'\s+(%"[^"]+" = )?[a-z]', line))
    assert n < 6000, n
