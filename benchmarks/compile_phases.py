"""CPU seconds per phase of a cold compile (issue 22, item 5): parse+elaborate, lowering,
LLVM IR generation (llvmlite) and printing, then LLVM's optimizer and code generator per part,
all in this process (no forked workers), so each phase's CPU time is its own. Targets are
measured interleaved, `--rounds` times, medians printed; Halide's JIT compile of the peer is
timed beside them (wall and process CPU: Halide compiles in this process).

    python benchmarks/compile_phases.py [--case local_laplacian] [--targets host,x86-64-avx2] [--rounds 3]

--ab NAME measures each target twice per round, with one of the compiler's switches (AB_SWITCHES)
off, then on (interleaved: an A/B under the same load).
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


def _share_tasks(on: bool):
    from hdsl.codegen.cpu import CodeGenCPU
    CodeGenCPU.SHARE_TASKS = on


# compiler switches an A/B can turn off: name -> a function setting it
def _bounded_folds(on: bool):
    import hdsl.lower.loops
    hdsl.lower.loops.BOUNDED_FOLDS = on


AB_SWITCHES = {"share_tasks": _share_tasks, "bounded_folds": _bounded_folds}


def cpu() -> float:
    return time.process_time()


def phases(path: Path, target: str, passes: bool = False) -> dict:
    import hdsl
    from hdsl.codegen.modules import split_module
    from hdsl.ir.expr import clear_interned, no_collection
    from hdsl.lower.lower import lower
    from hdsl.runtime import jit
    from hdsl.runtime.native import host_module
    from hdsl.target import parse_target
    from llvmlite import binding as llvm
    out = {}
    t = cpu()
    prog = hdsl.load(path)
    out["parse"] = cpu() - t
    tgt = parse_target(target)
    t = cpu()
    with no_collection():
        lowered = lower(prog.ir, None, tgt, shift_outputs=True)
        out["lower"] = cpu() - t
        t = cpu()
        mod = host_module(prog.ir, lowered.stmt, "hdsl_f", tgt)
        out["irgen"] = cpu() - t
        t = cpu()
        texts = split_module(mod, 2)
        out["print"] = cpu() - t
    del lowered, mod
    clear_interned()
    tm = jit.target_machine(tgt.cpu, "static")
    opt = cg = parse = 0.0
    for text in texts:
        t = cpu()
        m = llvm.parse_assembly(text)
        m.verify()
        parse += cpu() - t
        t = cpu()
        jit.optimize(m, tm)
        opt += cpu() - t
        t = cpu()
        jit.machine_code(tm, m)
        cg += cpu() - t
    out.update(llvm_parse=parse, optimize=opt, codegen=cg, parts=len(texts),
               ir_lines=sum(t.count("\n") for t in texts))
    out["total"] = sum(v for k, v in out.items() if k not in ("parts", "ir_lines"))
    return out


def cold_wall(path: Path, target: str) -> tuple[float, float]:
    """The compile row of benchmarks/run.py: wall seconds of a cold compile (empty cache,
    forked workers), and this process's CPU seconds for it (children not counted)."""
    import os
    from hdsl.bench import compile_cold_and_cached
    t, c = time.perf_counter(), cpu()
    r0 = os.times()
    compile_cold_and_cached(path, target)
    r1 = os.times()
    return time.perf_counter() - t, cpu() - c, (r1.children_user + r1.children_system) - (r0.children_user + r0.children_system)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="local_laplacian")
    ap.add_argument("--targets", default="host,x86-64-avx2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--halide", action="store_true", help="time Halide's JIT compile of the peer too")
    ap.add_argument("--wall", action="store_true", help="also the cold compile as benchmarks/run.py times it")
    ap.add_argument("--ab", choices=sorted(AB_SWITCHES), help="each target with this switch off, then on")
    a = ap.parse_args(argv)
    path = HERE.parent / "examples" / f"{a.case}.hl"
    targets = a.targets.split(",")
    runs = [(t, None) for t in targets] if a.ab is None else \
        [(t, on) for t in targets for on in (False, True)]
    label = {(t, on): t if on is None else f"{t}[{a.ab}={'on' if on else 'off'}]" for t, on in runs}
    rows: dict[str, list[dict]] = {label[r]: [] for r in runs}
    for r in range(a.rounds):
        for t, on in runs:
            if on is not None:
                AB_SWITCHES[a.ab](on)
            ph = phases(path, t)
            if a.wall:
                ph["wall_cold"], ph["cpu_parent"], ph["cpu_children"] = cold_wall(path, t)
            if a.halide:
                import numpy as np
                import halide_peers
                img = (np.random.RandomState(3).rand(3, 64, 64) * 65535).astype(np.uint16).transpose(1, 2, 0)
                c0 = cpu()
                peer = getattr(halide_peers, a.case)(img, target=t)
                ph["halide_wall"], ph["halide_cpu"] = peer.compile_s, cpu() - c0
            rows[label[t, on]].append(ph)
            print(label[t, on], " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in ph.items()),
                  flush=True)
    if a.ab is not None:
        AB_SWITCHES[a.ab](True)
    print("medians:")
    for t, got in rows.items():
        keys = got[0].keys()
        print(t, " ".join(f"{k}={statistics.median(r[k] for r in got):.3f}" for k in keys))


if __name__ == "__main__":
    main()
