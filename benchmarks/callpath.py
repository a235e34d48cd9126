"""Call overhead and scatters: hdsl against Halide in one process, interleaved (issue 22, items 3 and 4).

    python benchmarks/callpath.py [--quick] [--out DIR]

Call overhead: a one-input, one-output pipeline (`out(x, y) = img(x, y) + 1`, u8, 16x16, no
schedule) called from Python, per call:
  - hdsl `realize_into(out, img=array)` (NumPy arrays, the output preallocated) and
    `p(img=array)` (the output allocated by the call), JIT-compiled;
  - hdsl's ahead-of-time library of the same pipeline (`hdsl compile --emit so`) loaded with
    `hdsl.load_library`, `realize_into`;
  - Halide's Callable (`Pipeline.compile_to_callable`) with prebuilt `halide.Buffer`s, and with
    the NumPy arrays wrapped in new `halide.Buffer`s on every call.
Each is timed in chunks of calls, all in turns, over many rounds; a row is the median over
rounds of each chunk's time per call. Two clocks: the calling thread's CPU time (what the call
costs; on a machine shared by other processes the wall clock also counts the time this process
waits for a core) and the wall clock.

Scatters: a 256-bin histogram of a 4096x4096 u8 image (benchmarks/cases/histogram.hl), serial
(r.x innermost) and factored (`split(r.y, ryo, ryi, 64).rfactor(ryo, u)`: partial histograms of
64-row strips in parallel, then summed), against Halide with the same algorithm and schedule
(`rfactor` + `compute_root` + `parallel(u)` on both stages of the intermediate, as hdsl's
rfactor does); wall-clock median over interleaved runs, 2 threads each.

Writes CALLPATH.md and callpath.json to --out (default: this folder).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HDSL_NUM_THREADS", "2")
os.environ.setdefault("HL_NUM_THREADS", "2")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from issue22 import CALL_TARGET_US, HIST_TARGET  # noqa: E402

INC = """
pipeline inc
input img: u8[2]
output out: u8[2]
algorithm {
    out(x, y) = img(x, y) + 1
}
"""


def _halide_inc():
    import halide as hl
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.ImageParam(hl.UInt(8), 2, "img")
    f = hl.Func("out")
    f[x, y] = inp[x, y] + 1
    return hl, hl.Pipeline(f).compile_to_callable([inp], hl.get_jit_target_from_environment())


def call_overhead(quick: bool) -> dict:
    import hdsl
    from hdsl.aot import compile_to_files
    hl, callable_ = _halide_inc()
    p = hdsl.loads(INC, "inc.hl")
    jit = p.compile("host")
    tmp = tempfile.mkdtemp(prefix="hdsl-callpath-")
    lib = hdsl.load_library(compile_to_files(p.ir, tmp, emit=("so",))["so"])
    a = np.random.RandomState(0).randint(0, 255, (16, 16)).astype(np.uint8)
    o_jit, o_aot, o_hl, o_hl2 = (np.empty_like(a) for _ in range(4))
    hb_in, hb_out = hl.Buffer(a), hl.Buffer(o_hl)
    Buffer = hl.Buffer
    impls = {
        "hdsl realize_into (JIT)": lambda: jit.realize_into(o_jit, img=a),
        "hdsl p(img=a), output allocated (JIT)": lambda: jit(img=a),
        "hdsl realize_into (AOT .so, load_library)": lambda: lib.realize_into(o_aot, img=a),
        "Halide Callable, prebuilt halide.Buffer": lambda: callable_(hb_in, hb_out),
        "Halide Callable, NumPy arrays wrapped per call": lambda: callable_(Buffer(a), Buffer(o_hl2)),
    }
    want = a + np.uint8(1)
    for f in impls.values():
        f()
    assert all(np.array_equal(o, want) for o in (o_jit, o_aot, o_hl, o_hl2)) and np.array_equal(jit(img=a), want)
    n, rounds = (200, 15) if quick else (2000, 60)
    cpu = {k: [] for k in impls}
    wall = {k: [] for k in impls}
    names = list(impls)
    for r in range(rounds):
        k0 = r % len(names)
        for name in names[k0:] + names[:k0]:
            f = impls[name]
            w0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(n):
                f()
            c1, w1 = time.thread_time(), time.perf_counter()
            cpu[name].append((c1 - c0) / n * 1e6)
            wall[name].append((w1 - w0) / n * 1e6)
    rows = [dict(impl=k, cpu_us=statistics.median(cpu[k]), wall_us=statistics.median(wall[k])) for k in names]
    return dict(size=[16, 16], calls_per_chunk=n, rounds=rounds, rows=rows)


def _halide_histogram(img: np.ndarray, factored: bool):
    import halide as hl
    h, w = img.shape
    inp = hl.ImageParam(hl.UInt(8), 2, "img")
    r = hl.RDom(inp)
    i, u = hl.Var("i"), hl.Var("u")
    hist = hl.Func("hist")
    hist[i] = 0
    hist[hl.i32(inp[r.x, r.y])] += 1
    if factored:
        ryo, ryi = hl.RVar("ryo"), hl.RVar("ryi")
        hist.update().split(r.y, ryo, ryi, 64)
        intm = hist.update().rfactor(ryo, u)
        intm.compute_root().parallel(u)
        intm.update().parallel(u)
    inp.set(hl.Buffer(img))
    out = hl.Buffer(hl.Int(32), [256])
    hist.compile_jit(hl.get_jit_target_from_environment())
    return (lambda: hist.realize(out)), (lambda: np.asarray(out))


def histograms(quick: bool) -> list[dict]:
    import hdsl
    n = 512 if quick else 4096
    img = np.random.RandomState(0).randint(0, 256, (n, n)).astype(np.uint8)
    want = np.bincount(img.ravel(), minlength=256).astype(np.int32)
    p = hdsl.load(HERE / "cases" / "histogram.hl")
    out = []
    for name, schedule in (("histogram serial", None), ("histogram rfactor", "rfactor")):
        c = p.compile("host", schedule=schedule)
        o = np.empty(256, np.int32)
        ours = lambda: c.realize_into(o, img=img)       # noqa: E731
        theirs, theirs_out = _halide_histogram(img, schedule is not None)
        ours()
        theirs()
        assert np.array_equal(o, want) and np.array_equal(theirs_out(), want), name
        t_ours, t_theirs = [], []
        for k in range(10 if quick else 60):
            for f, t in ((ours, t_ours), (theirs, t_theirs)) if k % 2 else ((theirs, t_theirs), (ours, t_ours)):
                t0 = time.perf_counter()
                f()
                t.append(time.perf_counter() - t0)
        out.append(dict(case=name, size=[n, n], hdsl_ms=statistics.median(t_ours) * 1e3,
                        halide_ms=statistics.median(t_theirs) * 1e3, runs=len(t_ours)))
    return out


def markdown(res: dict) -> str:
    c = res["call"]
    by = {r["impl"]: r for r in c["rows"]}
    hl_pre = by["Halide Callable, prebuilt halide.Buffer"]
    hl_wrap = by["Halide Callable, NumPy arrays wrapped per call"]
    lines = ["# Call overhead and scatters (benchmarks/callpath.py)", "",
             f"{res['date']}, {res['cpu']}, load average {res['load'][0]:.1f} / {res['load'][1]:.1f} / "
             f"{res['load'][2]:.1f} at the start and {res['load_end'][0]:.1f} at the end "
             f"(other processes share the machine).", "",
             f"## Calling a compiled pipeline from Python (16x16 u8, `out = img + 1`; {c['rounds']} interleaved "
             f"rounds of {c['calls_per_chunk']} calls; medians)", "",
             f"Target (issue 22): at most {CALL_TARGET_US:.0f} µs of the calling thread's CPU time per call.", "",
             "| row | µs per call, CPU | µs per call, wall | / Halide prebuilt | / Halide wrapping | target met |",
             "| --- | ---: | ---: | ---: | ---: | --- |"]
    for r in c["rows"]:
        ours = r["impl"].startswith("hdsl")
        met = ("yes" if r["cpu_us"] <= CALL_TARGET_US else "no") if ours else "-"
        lines.append(f"| {r['impl']} | {r['cpu_us']:.2f} | {r['wall_us']:.2f} | "
                     f"{r['cpu_us'] / hl_pre['cpu_us']:.2f} | {r['cpu_us'] / hl_wrap['cpu_us']:.2f} | {met} |")
    lines += ["", f"## Scatters (256-bin histogram, u8; interleaved runs, wall-clock medians, 2 threads each)", "",
              f"Target (issue 22): at most {HIST_TARGET:.1f}x Halide's time with the same schedule.", "",
              "| row | hdsl ms | Halide ms | ratio | target met |", "| --- | ---: | ---: | ---: | --- |"]
    for h in res["histograms"]:
        ratio = h["hdsl_ms"] / h["halide_ms"]
        lines.append(f"| {h['case']} {h['size'][0]}x{h['size'][1]} | {h['hdsl_ms']:.2f} | {h['halide_ms']:.2f} | "
                     f"{ratio:.2f} | {'yes' if ratio <= HIST_TARGET else 'no'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer calls, a 512x512 histogram (a smoke test)")
    ap.add_argument("--out", default=str(HERE))
    args = ap.parse_args(argv)
    cpu = "unknown"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    res = dict(date=time.strftime("%Y-%m-%d %H:%M"), cpu=cpu, load=list(os.getloadavg()), quick=args.quick)
    res["call"] = call_overhead(args.quick)
    res["histograms"] = histograms(args.quick)
    res["load_end"] = list(os.getloadavg())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "callpath.json").write_text(json.dumps(res, indent=1))
    md = markdown(res)
    (out / "CALLPATH.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
