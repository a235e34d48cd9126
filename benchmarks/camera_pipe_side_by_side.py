"""camera_pipe side by side: examples/camera_pipe.hl and the same algorithm with fa20346's
schedule (taken from git) against Halide's faithful peer, interleaved in one process
(25 rounds, median and min, ratios to Halide). Run from the tree whose compiler is measured;
HDSL_BENCH_PEERS may point at another checkout's benchmarks/ for the peer and inputs.
Usage: python benchmarks/camera_pipe_side_by_side.py [--only-old]"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(os.environ.get("HDSL_BENCH_PEERS", Path(__file__).resolve().parent)).parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def main():
    import halide_peers
    import hdsl
    rw, rh = 2592, 1968
    w, h = (rw - 32) // 32 * 32, (rh - 24) // 32 * 32        # as Halide's process.cpp
    raw = np.random.RandomState(6).randint(0, 1024, (rh, rw)).astype(np.uint16)
    m3200 = np.load(ROOT / "examples" / "images" / "camera_matrix_3200.npy")
    m7000 = np.load(ROOT / "examples" / "images" / "camera_matrix_7000.npy")
    inputs = {"raw": raw, "matrix_3200": m3200, "matrix_7000": m7000}
    tmp = Path(tempfile.mkdtemp())
    old = tmp / "camera_pipe_fa20346.hl"
    for module in (ROOT / "examples").glob("*.hl"):      # the modules it uses, beside it
        if module.name != "camera_pipe.hl":
            (tmp / module.name).write_text(module.read_text())
    old.write_text(subprocess.run(["git", "show", "fa20346:examples/camera_pipe.hl"], cwd=ROOT,
                                  capture_output=True, text=True, check=True).stdout)
    files = [("fa20346_schedule", old)]
    if "--only-old" not in sys.argv:
        files.insert(0, ("camera_pipe.hl", ROOT / "examples" / "camera_pipe.hl"))
    fns = {}
    for name, path in files:
        c = hdsl.load(str(path)).compile("host")
        out = np.empty((3, h, w), np.uint8).transpose(1, 2, 0)
        fns[name] = (lambda c=c, out=out: c.realize_into(out, **inputs))
    fns["halide"] = halide_peers.camera_pipe(raw, m3200, m7000, w, h, target="host").run
    times = {k: [] for k in fns}
    for f in fns.values():
        f()
    for _ in range(25):
        for k, f in fns.items():
            t = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t)
    med = {k: float(np.median(v)) * 1e3 for k, v in times.items()}
    mn = {k: float(np.min(v)) * 1e3 for k, v in times.items()}
    for k in fns:
        print(f"{k:18s} median {med[k]:7.2f} ms  min {mn[k]:7.2f} ms  "
              f"/ halide: median {med[k] / med['halide']:.2f}  min {mn[k] / mn['halide']:.2f}")


if __name__ == "__main__":
    main()
