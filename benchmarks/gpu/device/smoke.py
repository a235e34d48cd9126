"""First contact with a real GPU: each small example's `schedule cuda` compiled for cuda (sm_75
PTX, JIT-compiled by the driver) and cuda-sm_90, run on the bundled images, compared with the
host target's output (which the test suite checks against the evaluator)."""
import sys
import time
import traceback

import numpy as np

import hdsl
from hdsl.runtime.images import load_image

EX = "examples"
import os
CASES = [("blur", "img", "gray16.png", {}), ("unsharp", "img", "gray8.png", {}),
         ("harris", "img", "rgb8.png", {}), ("hist_equalize", "img", "gray8.png", {}),
         ("local_laplacian", "img", "rgb16.png", {"alpha": 2.0})]
TARGETS = os.environ.get("SMOKE_TARGETS", "cuda,cuda-sm_90").split(",")
for name, inp, image, params in CASES:
    for target in TARGETS:
        try:
            p = hdsl.load(f"{EX}/{name}.hl")
            img = load_image(f"{EX}/images/{image}")
            t0 = time.perf_counter()
            c = p.compile(target)
            t1 = time.perf_counter()
            got = c(**{inp: img}, **params)
            t2 = time.perf_counter()
            ref = p.compile("host")(**{inp: img}, **params)
            same = np.array_equal(got, ref)
            diff = "" if same else f" max|diff| {np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64)))}" \
                f" differing {np.count_nonzero(got != ref)} of {got.size}"
            ts = []
            for _ in range(20):
                a = time.perf_counter(); c(**{inp: img}, **params); ts.append(time.perf_counter() - a)
            print(f"{name:14s} {target:11s} shape {got.shape} equal_to_host {same}{diff}  compile {t1-t0:.2f}s "
                  f"first call {t2-t1:.3f}s median call {1e3*np.median(ts):.3f} ms  launches "
                  f"{[(k, g, t) for k, g, t, s in c.native.device.launches[:3]]}", flush=True)
        except Exception:
            print(f"{name} {target}: FAILED", flush=True)
            traceback.print_exc(file=sys.stdout)
