"""benchmarks/callpath.py in its quick form: it runs, its outputs agree (it asserts that every
implementation's output equals NumPy's before timing), and it writes its two files with a row
for each implementation. No timing is asserted: the machine is shared and noisy."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quick_callpath_benchmark(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "callpath.py"), "--quick", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((tmp_path / "callpath.json").read_text())
    impls = [row["impl"] for row in res["call"]["rows"]]
    assert impls == ["hdsl realize_into (JIT)", "hdsl p(img=a), output allocated (JIT)",
                     "hdsl realize_into (AOT .so, load_library)", "Halide Callable, prebuilt halide.Buffer",
                     "Halide Callable, NumPy arrays wrapped per call"]
    assert all(row["cpu_us"] > 0 and row["wall_us"] > 0 for row in res["call"]["rows"])
    assert [h["case"] for h in res["histograms"]] == ["histogram serial", "histogram rfactor"]
    md = (tmp_path / "CALLPATH.md").read_text()
    assert "| hdsl realize_into (JIT) |" in md and "| histogram rfactor 512x512 |" in md
