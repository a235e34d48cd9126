"""benchmarks/gpu without a GPU (the GPU run itself is done by hand on a GPU machine:
benchmarks/gpu/README.md).

- The harness built with the apps compiled for this CPU (halide_cuda.build_cpu: Halide's own
  compile of the apps' algorithms, benchmarks/halide_peers.py, strict floats), driven by
  run_device.py against hdsl's host target: Halide's outputs, read back from the .hbuf files
  the harness writes, equal hdsl's bit for bit. This checks the whole path the GPU run takes
  (inputs written, read by the harness, outputs written, read back in hdsl's layout, compared,
  tabulated), with Halide as the independent side.
- The CUDA harness on a machine without a GPU ends with Halide's runtime error as JSON and
  exit status 2, not an abort; the PTX Halide embeds in it assembles for sm_90."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "benchmarks" / "gpu"

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the harness is C++: needs g++")


def _halide_cuda():
    sys.path[:0] = [str(GPU), str(ROOT / "benchmarks")]
    try:
        import halide_cuda
    finally:
        del sys.path[:2]
    return halide_cuda


def test_cpu_harness_equals_hdsl_through_run_device(tmp_path):
    hc = _halide_cuda()
    apps = ["bilateral_grid", "camera_pipe"]       # a 2-D f32 output with a param; a 3-D u8 one of three inputs
    exe = hc.build_cpu(tmp_path / "build", only=apps)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(GPU / "run_device.py"), "--target", "host", "--quick", "--harness",
                        str(exe), "--out", str(out), "--calls", "2", "--warmup", "1", "--apps", *apps],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())["results"]
    assert [x["app"] for x in res] == apps
    for x in res:
        assert "hdsl_error" not in x and "halide_error" not in x, x
        for key in ("halide", "halide_strict", "halide_reuse"):     # (on the CPU both builds are strict_float)
            assert x[f"hdsl_vs_{key}"]["equal"] and x[f"hdsl_vs_{key}"]["of"] > 0, x
            assert x[f"{key}_e2e_ms"] > 0 and x[f"{key}_resident_ms"] > 0
            assert len(x[f"{key}_e2e_all_ms"]) == 2
        assert x["hdsl_vs_host"]["equal"] and len(x["hdsl_e2e_all_ms"]) == 2
        assert x["halide_target"].endswith("strict_float") and "cuda" not in x["halide_target"]
    md = (out / "GPU.md").read_text()
    assert "| bilateral_grid | 320x192 |" in md and "| camera_pipe | 320x256 |" in md


def test_cuda_harness_without_a_gpu_reports_halide_error(tmp_path):
    hc = _halide_cuda()
    exe = hc.build(tmp_path / "build", only=["blur"])
    # Halide's PTX (capability 8.6, its newest) assembles for sm_90, as the driver's JIT will
    from hdsl.codegen.cuda_tools import ptxas
    ptx = hc.embedded_ptx(tmp_path / "build" / "blur_cuda.a")
    assert ".target sm_86" in ptx and len(ptxas(ptx, 90)) > 0
    hc.apps.write_inputs(hc.apps.APPS["blur"], tmp_path, quick=True)
    r = subprocess.run([str(exe), "blur", str(tmp_path), str(tmp_path), "2", "1"], capture_output=True, text=True,
                       timeout=120)
    res = json.loads(r.stdout.strip().splitlines()[-1])
    if r.returncode == 0:                          # a machine with a GPU: it ran there
        assert res["e2e_ms"] > 0 and (tmp_path / "blur.out.hbuf").exists()
        assert res["target"] == hc.CUDA_TARGET
    else:
        assert r.returncode == 2, r.stderr
        assert res["error"].startswith("Halide error -"), res
        assert "Halide runtime: " in r.stderr
