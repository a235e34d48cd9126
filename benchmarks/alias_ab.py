"""Run time of the apps with and without alias information (CodeGenCPU.ALIAS_INFO: each
buffer's TBAA tag, the allocator's memory attributes), both compiled in this process and
run interleaved: median wall and CPU ms per run (HDSL_NUM_THREADS=1 makes the CPU time the
work itself, the measure to trust on a loaded machine) (issue 22). --switch SHARE_TASKS
compares the same way with and without shared task functions (CodeGenCPU.SHARE_TASKS: loop
nests that are the same up to names compiled once, serial ones outlined); IN_LANE_PICKS
(strided loads picked within 128-bit halves on AVX2, gather_groups.pick),
SHARE_STRIDED_AVX2 (strided taps sharing their dense vectors on AVX2 too; off: it measured
1-2% slower on interpolate), BOUNDED_FOLDS (hdsl.lower.loops: sliding windows of
varying height bounded by a constant, and windows of producers split along another dim,
folded) and REQUIRED_REGIONS (LoopBuilder.REQUIRED_REGIONS: the producers of rounded-up
stages computed over what the stages' regions need, as Halide's RoundUp, or over their
rounded loops), RUNTIME_FOLDS (hdsl.lower.loops: sliding windows that no rule bounds folded
by a power of two found at run time) and SHARE_PHASES (CodeGenCPU.SHARE_PHASES: the phases
of one stride, a deinterleave's x * 2 and x * 2 + 1, read from shared vectors, and on AVX2
picked by packs); HOIST_BASES (CodeGenLLVM.hoisted_base: the loop-invariant terms of an
access's offset summed into a pointer LLVM hoists out of the loop) and WIDE_INTERLEAVE
(CodeGenLLVM._wide_interleave: `f(x / 2)`'s interleaved indices addressed in 64 bits),
PARITY_LOADS (CodeGenCPU.parity_load: `f(x / 2)` on AVX2 as one in-lane permute of its two
half-vectors, controlled by the first lane's parity).

    python benchmarks/alias_ab.py [--apps local_laplacian,camera_pipe,...] [--target host] [--reps 15]
                                  [--switch ALIAS_INFO|SHARE_TASKS|IN_LANE_PICKS|SHARE_STRIDED_AVX2|
                                            BOUNDED_FOLDS|LET_RESIDUES|REQUIRED_REGIONS|RUNTIME_FOLDS|
                                            SHARE_PHASES|HOIST_BASES|WIDE_INTERLEAVE|PARITY_LOADS]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


def main(argv=None):
    import run as bench
    from hdsl.codegen.cpu import CodeGenCPU
    ap = argparse.ArgumentParser()
    ap.add_argument("--apps", default="local_laplacian,camera_pipe,interpolate,bilateral_grid,unsharp")
    ap.add_argument("--target", default="host")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--switch", choices=("ALIAS_INFO", "SHARE_TASKS", "IN_LANE_PICKS", "SHARE_STRIDED_AVX2",
                                         "BOUNDED_FOLDS", "LET_RESIDUES", "REQUIRED_REGIONS", "RUNTIME_FOLDS",
                                         "SHARE_PHASES", "HOIST_BASES", "WIDE_INTERLEAVE", "PARITY_LOADS"),
                    default="ALIAS_INFO")
    a = ap.parse_args(argv)
    import hdsl.lower.loops
    # (the switch's owner: code generation's, or lowering's for BOUNDED_FOLDS, RUNTIME_FOLDS and
    # REQUIRED_REGIONS)
    owner = {"BOUNDED_FOLDS": hdsl.lower.loops, "RUNTIME_FOLDS": hdsl.lower.loops,
             "REQUIRED_REGIONS": hdsl.lower.loops.LoopBuilder}.get(a.switch, CodeGenCPU)
    import hdsl
    for app in a.apps.split(","):
        case = bench.CASES[app](False) if a.target == "host" else bench.CASES[app](False, target=a.target)
        hd = case["impls"][0]
        path = HERE.parent / "examples" / f"{app}.hl"
        if not path.exists():
            path = HERE / "cases" / f"{app}.hl"
        # the case's own call (its inputs and output arrays), with the pipeline swapped
        call = hd.run
        cell = call.__closure__
        forms = {}
        default = getattr(owner, a.switch)
        for flag in (False, True):
            setattr(owner, a.switch, flag)
            forms[flag] = hdsl.load(path).compile(a.target, use_cache=False)
        setattr(owner, a.switch, default)
        kw = [c.cell_contents for c in cell if isinstance(c.cell_contents, dict)][0]
        out = [c.cell_contents for c in cell if not isinstance(c.cell_contents, dict)
               and not hasattr(c.cell_contents, "realize_into")][0]
        times = {False: [], True: []}
        cpu = {False: [], True: []}
        results = {}
        for r in range(a.reps + 2):
            for flag in ((False, True) if r % 2 else (True, False)):
                t0, c0 = time.perf_counter(), time.process_time()
                forms[flag].realize_into(out, **kw)
                dt, dc = time.perf_counter() - t0, time.process_time() - c0
                if r >= 2:
                    times[flag].append(dt)
                    cpu[flag].append(dc)
                import numpy as np
                results[flag] = np.array(out, copy=True)
        same = bool((results[False] == results[True]).all())
        print(f"{app} {a.target} {a.switch}: without {statistics.median(times[False]) * 1e3:.2f} ms, with "
              f"{statistics.median(times[True]) * 1e3:.2f} ms, ratio "
              f"{statistics.median(times[True]) / statistics.median(times[False]):.3f}; CPU ms per run "
              f"{statistics.median(cpu[False]) * 1e3:.2f} / {statistics.median(cpu[True]) * 1e3:.2f}, ratio "
              f"{statistics.median(cpu[True]) / statistics.median(cpu[False]):.3f}; same output: {same}", flush=True)


if __name__ == "__main__":
    main()
