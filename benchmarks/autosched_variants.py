"""Schedules of one app measured side by side (interleaved, one process): the evidence for
a rule of the automatic scheduler (issue 20, hdsl/schedule/auto.py).

    python benchmarks/autosched_variants.py APP [--quick] [--reps N] [--halide] VARIANT...

APP is one of benchmarks/autosched.py's apps (its inputs and sizes). A VARIANT is `auto`
(the automatic schedule as the compiler makes it now), `hand` (the example's own schedule),
auto[CONST=VALUE,...] (the automatic schedule with constants of
hdsl/schedule/auto.py changed: a rule before and after), or NAME=TEXT / NAME=@FILE: schedule text (the directives of a block, one chain a line, `;`
separating lines on the command line). --halide adds Halide's two autoschedulers. Each
variant is checked equal to the first one's output. Prints the median ms of each and its
ratio to the first.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import autosched  # noqa: E402
import run as bench  # noqa: E402


def variant_impl(app, target, spec):
    import hdsl
    from hdsl.frontend.elaborate import check_source
    from hdsl.schedule.auto import block_text
    out = app["out"]()
    kwargs = dict(app["inputs"], **app["params"])
    if spec.startswith("auto["):         # auto[NAME=VALUE,...]: the rules with constants changed
        import hdsl.schedule.auto as auto
        sets = dict(kv.split("=") for kv in spec[5:-1].split(","))
        old = {k: getattr(auto, k) for k in sets}
        p = hdsl.load(app["path"])
        try:
            for k, v in sets.items():
                setattr(auto, k, type(old[k])(eval(v)))
            text = auto.auto_text(p.ir, "host")
        finally:
            for k, v in old.items():
                setattr(auto, k, v)
        spec = f"{spec}={text}"
    if spec in ("auto", "hand"):
        c = hdsl.load(app["path"]).compile(target, schedule="auto" if spec == "auto" else None)
        name = spec
    else:
        name, text = spec.split("=", 1) if not spec.startswith("auto[") else spec.split("]=", 1)
        name = name + ("]" if spec.startswith("auto[") else "")
        text = Path(text[1:]).read_text() if text.startswith("@") else text.replace(";", "\n")
        text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        path = app["path"]
        q = hdsl.Pipeline(check_source(path.read_text() + "\n" + block_text(text, "variant"), str(path)))
        c = q.compile(target, schedule="variant")
    return bench.Impl(name, "", lambda: c.realize_into(out, **kwargs), lambda: out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("app", choices=list(autosched.APPS))
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--halide", action="store_true")
    ap.add_argument("--strict", action="store_true", help="float apps without fast_math (bit-exact across schedules)")
    ap.add_argument("--seconds", type=float, default=3.0, help="run each variant about this long in all")
    args = ap.parse_args(argv)
    app = autosched.APPS[args.app](args.quick)
    target = "host-fast_math" if app["float"] and not args.strict else "host"
    impls = [variant_impl(app, target, v) for v in args.variants]
    if args.halide:
        for a in autosched.AUTOS:
            im = bench.halide_impl(app["peer"](a))
            im.name = f"Halide {a}"
            impls.append(im)
    t0 = time.time()
    r = bench.measure(dict(name=args.app, what="", size=app["size"], impls=impls), args.reps,
                      min_seconds=0.0 if args.quick else args.seconds)
    import os
    first = r["results"][0]["median_ms"]
    for x in r["results"]:
        d = x["max_abs_diff_vs_hdsl"]
        print(f"{x['impl']:>24}: {x['median_ms']:9.2f} ms  x{x['median_ms'] / first:5.2f}  "
              f"(max diff vs first {d})")
    print(f"{time.time() - t0:.0f} s; load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
