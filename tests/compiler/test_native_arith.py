"""Native integer division and modulo by constants against the evaluator: powers of two are
compiled as a shift and a mask, other constants through sdiv/srem with the floor fix-up; both
must keep Halide's rules (quotient rounded down, remainder never negative) on negative values
and at the ends of each type's range."""
from __future__ import annotations

import numpy as np
import pytest

import hdsl

DIVISORS = [1, 2, 3, 8, 7, 256, -4]


@pytest.mark.parametrize("t", ["i8", "i16", "i32", "i64", "u8", "u32"])
@pytest.mark.parametrize("lanes", [0, 8])
def test_division_and_modulo_by_constants(t, lanes):
    dt = np.dtype({"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
                   "u8": np.uint8, "u32": np.uint32}[t])
    info = np.iinfo(dt)
    divs = [d for d in DIVISORS if (d > 0 or info.min < 0) and d <= info.max]
    outs = "\n".join(f"output q{i}: {t}[1]\noutput r{i}: {t}[1]" for i in range(len(divs)))
    defs = "\n".join(f"    q{i}(x) = a(x) / {t}({d})\n    r{i}(x) = a(x) % {t}({d})" for i, d in enumerate(divs))
    sched = "\n".join(f"    q{i}.vectorize(x, {lanes})\n    r{i}.vectorize(x, {lanes})" for i in range(len(divs))) \
        if lanes else "    q0.compute_root()"
    text = f"pipeline d\ninput a: {t}[1]\n{outs}\nalgorithm {{\n{defs}\n}}\nschedule s {{\n{sched}\n}}\n"
    p = hdsl.loads(text, "d.hl")
    vals = [0, 1, -1, 2, -2, 7, -7, 8, -8, 9, -9, 255, -255, 256, -257, info.min, info.min + 1, info.max, info.max - 1]
    a = np.array([v for v in vals if info.min <= v <= info.max] * 2, dtype=dt)[:32]
    a = np.concatenate([a, np.zeros((-len(a)) % 8, dt)])
    got = p.compile("host", schedule="s", use_cache=False)(a=a)
    want = p(a=a)
    for i, d in enumerate(divs):
        assert np.array_equal(got[2 * i], want[2 * i]), ("/", d)
        assert np.array_equal(got[2 * i + 1], want[2 * i + 1]), ("%", d)
        # the rules themselves, for a reader: floor quotient, remainder in [0, |d|)
        for v, q, r in zip(a.tolist(), want[2 * i].tolist(), want[2 * i + 1].tolist()):
            if info.min < 0 and v == info.min and d == -1:
                continue
            assert 0 <= r < abs(d)
            if d > 0:
                assert q == v // d
