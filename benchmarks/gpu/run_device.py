"""The GPU benchmark, run on the GPU machine from the repository root (hdsl importable, pycuda
installed; the halide package is not needed there: Halide's side is the prebuilt harness):

    python3 benchmarks/gpu/run_device.py --harness benchmarks/gpu/build/harness --out $OUT

For each app (benchmarks/gpu/apps.py: the inputs benchmarks/run.py uses) it
  1. compiles the hdsl example for the CUDA target (strict floating point unless --fast-math)
     and times `realize_into` end to end (NumPy in, NumPy out: the host <-> device copies are
     inside), the median of --calls calls after --warmup;
  2. runs the example compiled for the host on the same inputs: hdsl's CUDA output must equal
     it exactly (the correctness claim; floats compared bit for bit, NaNs equal);
  3. runs Halide's AOT-compiled CUDA pipeline with the app's own GPU schedule (the harness,
     built by halide_cuda.py) on the same inputs, end to end and device-resident, three ways
     (MODES: Halide's default floats, which allow FMA contraction; strict_float, hdsl's
     semantics; default floats with the device allocations reused between calls), and
     compares each output with hdsl's (max abs difference);
and writes results.json and GPU.md (a markdown table) to --out, after each app, so a late
failure or a timeout keeps what was measured. Each side of each app runs in a process of its
own (hdsl's: this script with --worker) under a wall-clock limit (--app-timeout): a kernel that
faults (spoiling its CUDA context) or never ends costs that app's side only.

Without a GPU: `--target cuda-emulate --quick` runs hdsl's side through the host-emulation
device and shows the harness's no-GPU message; this is how the script is tested."""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import apps  # noqa: E402


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def median_ms(fn, calls: int, warmup: int) -> tuple[float, list[float]]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times)), times


def compare(a: np.ndarray, b: np.ndarray) -> dict:
    """Exact equality (bit for bit for floats, NaNs equal), the number of differing values and
    the largest absolute difference."""
    if a.shape != b.shape:
        return {"equal": False, "error": f"shapes {a.shape} and {b.shape}"}
    if a.dtype.kind == "f":
        same = (a.view(np.uint32 if a.itemsize == 4 else np.uint64) ==
                b.astype(a.dtype).view(np.uint32 if a.itemsize == 4 else np.uint64)) | (np.isnan(a) & np.isnan(b))
    else:
        same = a == b
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    finite = diff[np.isfinite(diff)]
    return {"equal": bool(same.all()), "differing": int((~same).sum()), "of": int(a.size),
            "max_abs_diff": float(finite.max()) if finite.size else 0.0,
            "nan_mismatch": int((np.isnan(a) != np.isnan(b)).sum()) if a.dtype.kind == "f" else 0}


def run_hdsl(app, inputs, params, out_shape, target: str, calls: int, warmup: int, res: dict):
    import hdsl
    shape, dtype = out_shape
    pipe = hdsl.load(str(app.example))
    t0 = time.perf_counter()
    gpu = pipe.compile(target)
    res["hdsl_compile_s"] = time.perf_counter() - t0
    out = (np.empty(shape[2:] + shape[:2], dtype).transpose(1, 2, 0) if len(shape) == 3
           else np.empty(shape, dtype))
    t0 = time.perf_counter()
    gpu.realize_into(out, **inputs, **params)
    res["hdsl_first_call_s"] = time.perf_counter() - t0
    res["hdsl_e2e_ms"], res["hdsl_e2e_all_ms"] = median_ms(lambda: gpu.realize_into(out, **inputs, **params),
                                                           calls, warmup)
    log(f"  hdsl {target}: compile {res['hdsl_compile_s']:.1f} s, end to end {res['hdsl_e2e_ms']:.3f} ms")
    gpu_out = np.array(out)
    t0 = time.perf_counter()
    host_target = "host-fast_math" if target.endswith("-fast_math") else "host"   # (strict: must be equal)
    host = pipe.compile(host_target)
    res["host_compile_s"] = time.perf_counter() - t0
    ref = np.empty_like(out)
    host.realize_into(ref, **inputs, **params)
    res["hdsl_vs_host"] = compare(gpu_out, np.array(ref))
    log(f"  hdsl {target} vs hdsl {host_target}: {res['hdsl_vs_host']}")
    return gpu_out


# The harness's runs: the key of their results, its extra arguments, its output file's suffix.
MODES = {"halide": ([], ""),                                      # Halide's default floating point
         "halide_strict": (["strict"], ".strict"),                # strict_float: hdsl's semantics
         "halide_reuse": (["default", "reuse"], ".reuse")}        # default, device allocations reused
MODE_NAMES = {"halide": "", "halide_strict": " strict_float", "halide_reuse": ", allocations reused"}


def run_harness(harness: Path, app, work: Path, calls: int, warmup: int, timeout: float, res: dict,
                key: str = "halide"):
    """Halide's side: the harness on the app's inputs (written to `work` first) in mode `key`
    (MODES), its times and errors in res under KEY_*; returns its output in hdsl's layout, or
    None."""
    extra, suffix = MODES[key]
    if not (work / f"{app.name}.in0.hbuf").exists():
        apps.write_inputs(app, work, quick=res["quick"])
    cmd = [str(harness), app.name, str(work), str(work), str(calls), str(warmup)] + extra
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        res[f"{key}_error"] = f"the harness ran past {timeout:g} s"
        return None
    except OSError as e:
        res[f"{key}_error"] = f"the harness did not start: {e}"
        return None
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if lines:
        res.setdefault("halide_target", json.loads(lines[-1]).get("target"))
    if p.returncode != 0 or not lines:
        msg = json.loads(lines[-1]).get("error") if lines else None
        res[f"{key}_error"] = msg or f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-500:]}"
        return None
    r = json.loads(lines[-1])
    res.update({f"{key}_e2e_ms": r["e2e_ms"], f"{key}_resident_ms": r["resident_ms"],
                f"{key}_e2e_all_ms": r["e2e_all_ms"], f"{key}_resident_all_ms": r["resident_all_ms"]})
    log(f"  Halide{MODE_NAMES[key]}: end to end {r['e2e_ms']:.3f} ms, device-resident {r['resident_ms']:.3f} ms")
    return app.from_planar(apps.read_hbuf(work / f"{app.name}{suffix}.out.hbuf"))


def hdsl_worker(name: str, work: Path, target: str, a, res: dict):
    """hdsl's side of one app in a process of its own (--worker), under --app-timeout: a CUDA
    error that spoils the context, or a kernel that never ends, costs that app only. Returns
    hdsl's CUDA output, or None (res["hdsl_error"] says why)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--work", str(work), "--target", target,
           "--calls", str(a.calls), "--warmup", str(a.warmup), "--out", str(work)] + (["--quick"] if a.quick else [])
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.app_timeout)
        stdout, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        stdout, rc = (e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout) or "", None
        res["hdsl_error"] = f"ran past {a.app_timeout:g} s"
    lines = stdout.splitlines()
    for ln in lines:
        if not ln.startswith("RESULT "):
            print(ln, flush=True)
    got = [json.loads(ln[len("RESULT "):]) for ln in lines if ln.startswith("RESULT ")]
    if got:
        res.update(got[-1])
    elif "hdsl_error" not in res:
        res["hdsl_error"] = f"the worker ended with status {rc} and no result: {(p.stderr or '').strip()[-1000:]}"
    if "hdsl_error" in res:
        log(f"  hdsl: {res['hdsl_error']}")
        return None
    return np.load(work / f"{name}.hdsl.npy")


def worker(a) -> int:
    """--worker APP: run_hdsl for one app; its result as a line `RESULT {json}`, hdsl's CUDA
    output in WORK/APP.hdsl.npy."""
    app = apps.APPS[a.worker]
    res = {}
    try:
        inputs, params, _, out_shape = app.inputs(a.quick)
        gpu_out = run_hdsl(app, inputs, params, out_shape, a.target, a.calls, a.warmup, res)
        np.save(a.work / f"{app.name}.hdsl.npy", gpu_out)
    except Exception as e:      # noqa: BLE001 -- reported in the table
        res["hdsl_error"] = f"{type(e).__name__}: {str(e).strip()[:1000]}"
        res["hdsl_traceback"] = traceback.format_exc()[-3000:]
    print("RESULT " + json.dumps(res), flush=True)
    return 0


def fmt(v, spec=".3f"):
    return "—" if v is None else format(v, spec)


def _cmp_cell(c: dict | None) -> str:
    if c is None:
        return "—"
    if "of" not in c:
        return c.get("error", "?")
    return "equal" if c["equal"] else f"{c['max_abs_diff']:.3g} ({c['differing']} of {c['of']} differ)"


def markdown(meta: dict, results: list[dict]) -> str:
    ht = next((r["halide_target"] for r in results if r.get("halide_target")), "?")
    lines = [f"Device: {meta['device']}; hdsl target `{meta['target']}`; Halide 21, target "
             f"`{ht}`, the app's own GPU schedule, built with its default floating point "
             f"and with `strict_float`; medians of {meta['calls']} calls after {meta['warmup']}; {meta['date']}.",
             "",
             "| app | size | hdsl e2e ms | Halide e2e ms | hdsl / Halide | Halide strict e2e ms "
             "| hdsl / Halide strict | Halide resident ms | Halide strict resident ms "
             "| Halide resident ms, allocations reused | hdsl CUDA = hdsl host "
             "| hdsl vs Halide | hdsl vs Halide strict | hdsl compile s |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | ---: |"]
    for r in results:
        he, ha, hs = r.get("hdsl_e2e_ms"), r.get("halide_e2e_ms"), r.get("halide_strict_e2e_ms")
        vh = r.get("hdsl_vs_host")
        eq = "—" if vh is None else ("yes" if vh["equal"] else f"**no**: {vh['differing']} of {vh['of']} "
                                      f"differ, max {vh['max_abs_diff']:.3g}")
        lines.append(f"| {r['app']} | {r.get('size', '')} | {fmt(he)} | {fmt(ha)} | "
                     f"{fmt(he / ha if he and ha else None, '.2f')} | {fmt(hs)} | "
                     f"{fmt(he / hs if he and hs else None, '.2f')} | {fmt(r.get('halide_resident_ms'))} | "
                     f"{fmt(r.get('halide_strict_resident_ms'))} | {fmt(r.get('halide_reuse_resident_ms'))} | {eq} | {_cmp_cell(r.get('hdsl_vs_halide'))} | "
                     f"{_cmp_cell(r.get('hdsl_vs_halide_strict'))} | {fmt(r.get('hdsl_compile_s'), '.1f')} |")
    errors = [(r["app"], k, r[k]) for r in results for k in ["hdsl_error"] + [f"{m}_error" for m in MODES]
              if r.get(k)]
    errors += [(r["app"], "halide_reuse_error", f"its output differs from the default run's "
                f"({_cmp_cell(r['hdsl_vs_halide_reuse'])} from hdsl's)") for r in results
               if "hdsl_vs_halide_reuse" in r and "hdsl_vs_halide" in r
               and r["hdsl_vs_halide_reuse"] != r["hdsl_vs_halide"]]
    if errors:
        lines += ["", "Errors:", ""] + [f"- {a}, {k[:-len('_error')]}: {msg}" for a, k, msg in errors]
    lines += ["", "e2e: NumPy arrays (hdsl) or host buffers (Halide) in and out: the host -> device copies of the "
              "inputs and the device -> host copy of the output are inside. resident (Halide only; hdsl has no "
              "API for it): the inputs already on the device, the output left there, then halide_device_sync; "
              "allocations reused: with halide_reuse_device_allocations on (otherwise Halide's runtime allocates "
              "and frees its intermediates' device memory in each call, as hdsl does). "
              "hdsl vs Halide: the largest absolute difference of the outputs (equal: bit for bit)."]
    return "\n".join(lines) + "\n"


def device_name() -> str:
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        if p.returncode == 0 and p.stdout.strip():
            return p.stdout.strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return f"no nvidia-smi ({platform.processor() or platform.machine()})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="where results.json and GPU.md go")
    ap.add_argument("--harness", type=Path, default=HERE / "build" / "harness",
                    help="Halide's side (halide_cuda.py builds it); 'none' skips it")
    ap.add_argument("--target", default="cuda", help="hdsl's target: cuda, cuda-sm_90, cuda-emulate (no GPU)")
    ap.add_argument("--fast-math", action="store_true", help="hdsl's -fast_math variant of --target")
    ap.add_argument("--apps", nargs="*", default=["bilateral_grid", "local_laplacian", "interpolate", "camera_pipe",
                                                  "blur"])
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--app-timeout", type=float, default=60.0, help="seconds per app, each side")
    ap.add_argument("--quick", action="store_true", help="small inputs (benchmarks/run.py --quick's)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        return worker(a)
    target = a.target + ("-fast_math" if a.fast_math else "")
    a.out.mkdir(parents=True, exist_ok=True)
    meta = {"device": device_name(), "target": target,
            "calls": a.calls, "warmup": a.warmup, "quick": a.quick, "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "harness": str(a.harness)}
    log(f"device: {meta['device']}; hdsl target {target}")
    results = []
    work = Path(tempfile.mkdtemp(prefix="hdsl-gpubench-"))
    t_all = time.perf_counter()
    for name in a.apps:
        app = apps.APPS[name]
        res = {"app": name, "quick": a.quick}
        results.append(res)
        log(f"{name}")
        h, w = app.inputs(a.quick)[3][0][:2]
        res["size"] = f"{w}x{h}"
        gpu_out = hdsl_worker(name, work, target, a, res)
        if str(a.harness) != "none":
            for key in MODES:
                try:
                    halide_out = run_harness(a.harness, app, work, a.calls, a.warmup, a.app_timeout, res, key)
                    if halide_out is None:
                        log(f"  Halide: {res.get(key + '_error')}")
                except Exception as e:  # noqa: BLE001
                    res[f"{key}_error"] = f"{type(e).__name__}: {e}"
                    log(f"  Halide failed: {res[key + '_error']}")
                    halide_out = None
                if gpu_out is not None and halide_out is not None:
                    res[f"hdsl_vs_{key}"] = compare(gpu_out, halide_out)
                    log(f"  hdsl vs Halide{MODE_NAMES[key]}: {res['hdsl_vs_' + key]}")
            for f in work.glob(f"{name}.*"):
                f.unlink()
        meta["total_s"] = time.perf_counter() - t_all
        (a.out / "results.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
        (a.out / "GPU.md").write_text(markdown(meta, results))
    shutil.rmtree(work, ignore_errors=True)
    log(f"done in {time.perf_counter() - t_all:.0f} s: {a.out / 'GPU.md'}")
    print((a.out / "GPU.md").read_text(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
