"""Rerun one fuzzed schedule, or hunt for failing ones with seeded random schedules.

    .venv/bin/python tests/compiler/repro.py NAME W H SEED 'schedule fuzz { ... }' [PARAMS_INDEX]
    .venv/bin/python tests/compiler/repro.py --min NAME W H SEED 'schedule fuzz { ... }' [PARAMS_INDEX]
    HUNT_EXCLUDE=fuse .venv/bin/python tests/compiler/repro.py --hunt NAME [COUNT] [FIRST_SEED]

Uses a temporary HDSL_CACHE_DIR unless one is set. HDSL_TEST_TARGET chooses the target
(default host); a GPU target (cuda-emulate) also makes --hunt generate GPU schedules.
"""
from __future__ import annotations

import os
import sys
import tempfile
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("HDSL_CACHE_DIR", tempfile.mkdtemp(prefix="hdsl-cache-"))

import hdsl  # noqa: E402
from compiler_corpus import CORPUS, compare, for_schedule, load, reference  # noqa: E402
from schedule_gen import PipelineInfo, RandomChooser, generate  # noqa: E402


TARGET = os.environ.get("HDSL_TEST_TARGET", "host")


def run(name, block, w, h, seed, params_index=0):
    spec = CORPUS[name]
    p = load(spec, block)
    c = p.compile(TARGET, schedule="fuzz")
    args, expected = reference(spec, w, h, seed, spec.params[params_index])
    got = c.realize(spec.sizes(w, h), **args)
    compare(for_schedule(spec, block, expected), got, expected, f"{name} {w}x{h} seed {seed}: ")


EXCLUDE = tuple(x for x in os.environ.get("HUNT_EXCLUDE", "").split(",") if x)


def hunt(name, count, first):
    spec = CORPUS[name]
    pi = PipelineInfo(load(spec).ir, spec.text, spec.no_inline)
    failures = 0
    for s in range(first, first + count):
        ch = RandomChooser(f"{name}-{s}")
        gpu = TARGET.startswith("cuda")
        block = generate(pi, ch, exclude=EXCLUDE, gpu_valid=gpu, gpu_wide=gpu).block("fuzz")
        w, h, seed = ch.int(1, 19), ch.int(1, 13), ch.int(0, 3)
        pidx = ch.int(0, len(spec.params) - 1)
        if os.environ.get("HUNT_ECHO"):
            print(f"... running {name} {w} {h} {seed} {pidx} (hunt seed {s})\n{block.strip()}", flush=True)
        try:
            run(name, block, w, h, seed, pidx)
        except Exception as e:  # noqa: BLE001
            if "not supported by the native compiler yet" in str(e):
                continue
            failures += 1
            print(f"--- FAIL {name} {w} {h} {seed} params={pidx} (hunt seed {s})")
            print(block.strip())
            print(type(e).__name__, str(e).splitlines()[0][:300] if str(e) else "")
            sys.stdout.flush()
    print(f"{name}: {failures} failures in {count}")


def minimise(name, block, w, h, seed, params_index=0):
    """Drop schedule lines and shrink the size while the failure persists."""
    def fails(lines, w, h):
        b = "\nschedule fuzz {\n" + "".join(f"    {l}\n" for l in lines) + "}\n"
        try:
            load(CORPUS[name], b)
        except hdsl.HdslError:
            return None             # no longer a valid schedule
        try:
            run(name, b, w, h, seed, params_index)
            return None
        except Exception as e:  # noqa: BLE001
            if "not supported by the native compiler yet" in str(e):
                return None
            return f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
    lines = [l.strip() for l in block.strip().splitlines()[1:-1]]
    first = fails(lines, w, h)
    assert first, "does not fail"
    kind = first.split(":")[0]
    changed = True
    while changed:
        changed = False
        for i in range(len(lines)):
            trial = lines[:i] + lines[i + 1:]
            r = fails(trial, w, h)
            if r and r.split(":")[0] == kind:
                lines, changed = trial, True
                break
        for nw, nh in ((w - 1, h), (w, h - 1), (w // 2, h), (w, h // 2)):
            if nw >= 1 and nh >= 1 and (nw, nh) != (w, h):
                r = fails(lines, nw, nh)
                if r and r.split(":")[0] == kind:
                    w, h, changed = nw, nh, True
                    break
    b = "schedule fuzz {\n" + "".join(f"    {l}\n" for l in lines) + "}"
    print(f"minimal: {name} {w} {h} {seed} params={params_index}\n{b}\n{fails(lines, w, h)}")
    return lines, w, h


if __name__ == "__main__":
    if sys.argv[1] == "--min":
        name, w, h, seed, block = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
        minimise(name, block, w, h, seed, int(sys.argv[7]) if len(sys.argv) > 7 else 0)
    elif sys.argv[1] == "--hunt":
        hunt(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 50,
             int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    else:
        name, w, h, seed, block = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
        pidx = int(sys.argv[6]) if len(sys.argv) > 6 else 0
        try:
            run(name, block, w, h, seed, pidx)
            print("same as the evaluator")
        except Exception:  # noqa: BLE001
            traceback.print_exc(limit=3)
            sys.exit(1)

