"""Issue 22's "Done when", judged from one `make bench` run: every row below is computed from
the measurements of that run (benchmarks/run.py's results and benchmarks/callpath.py's
callpath.json), never typed in.

- Halide's four apps, on the host target and on AVX2 (run.py's NAME and NAME@avx2 cases),
  hdsl strict and fast_math: hdsl's median over Halide's app, at most 1.0;
- the call overhead (callpath.py): each hdsl row's CPU time per call, at most 2 µs;
- the histograms (callpath.py): serial and rfactor, hdsl's median over Halide's, at most 1.0;
- the local Laplacian's cold compile (run.py's local_laplacian cases): hdsl's cold compile
  (an empty cache) at most Halide's JIT compile of its peer, measured in the same run (each
  the median of run.py's COMPILE_ROUNDS compiles, made in turns).

A row whose measurement is missing from the run (a case left out with --cases, no
callpath.json) is shown as not measured, and is not met.
"""
from __future__ import annotations

APPS = ("local_laplacian", "bilateral_grid", "camera_pipe", "interpolate")
TARGETS = (("host", ""), ("AVX2", "@avx2"))      # (column label, run.py case-name suffix)
MODES = ("strict", "fast_math")
APP_TARGET = 1.0
CALL_TARGET_US = 2.0
HIST_TARGET = 1.0


def _row(what: str, target: str, mine, theirs, value, limit: float, unit: str = "") -> dict:
    measured = value is not None
    return dict(what=what, target=target, hdsl=mine, peer=theirs, value=value, limit=limit, unit=unit,
                measured=measured, met=measured and value <= limit)


def judge(results: dict | None, callpath: dict | None) -> list[dict]:
    """The judged rows. results: run.py's results (its results.json); callpath: callpath.py's
    callpath.json; either may be None."""
    cases = {c["name"]: c for c in (results or {}).get("cases", [])}
    rows = []
    for app in APPS:
        for label, suffix in TARGETS:
            c = cases.get(app + suffix)
            for mode in MODES:
                ours = theirs = None
                if c is not None:
                    ours = next((r for r in c["results"] if r["impl"] == "hdsl" and r["mode"] == mode), None)
                    theirs = next((r for r in c["results"] if r["impl"] == "Halide"), None)
                ok = ours is not None and theirs is not None
                rows.append(_row(f"{app} {mode}", label, ours["median_ms"] if ok else None,
                                 theirs["median_ms"] if ok else None,
                                 ours["median_ms"] / theirs["median_ms"] if ok else None, APP_TARGET))
    call = (callpath or {}).get("call")
    hdsl_calls = [r for r in call["rows"] if r["impl"].startswith("hdsl")] if call else []
    if hdsl_calls:
        for r in hdsl_calls:
            rows.append(_row(f"call overhead: {r['impl']}", "host", r["cpu_us"], None, r["cpu_us"],
                             CALL_TARGET_US, " µs"))
    else:
        rows.append(_row("call overhead", "host", None, None, None, CALL_TARGET_US, " µs"))
    hists = (callpath or {}).get("histograms") or []
    for name in ("histogram serial", "histogram rfactor"):
        h = next((h for h in hists if h["case"] == name), None)
        rows.append(_row(name + (f" {h['size'][0]}x{h['size'][1]}" if h else ""), "host",
                         h["hdsl_ms"] if h else None, h["halide_ms"] if h else None,
                         h["hdsl_ms"] / h["halide_ms"] if h else None, HIST_TARGET))
    for label, suffix in TARGETS:
        c = cases.get("local_laplacian" + suffix)
        theirs = next((r for r in c["results"] if r["impl"] == "Halide"), None) if c else None
        for mode in MODES:
            ours = next((r for r in c["results"] if r["impl"] == "hdsl" and r["mode"] == mode), None) if c else None
            ok = ours is not None and theirs is not None and theirs.get("compile_cold_s")
            rows.append(_row(f"local_laplacian cold compile, {mode} (s; / Halide's JIT)", label,
                             ours["compile_cold_s"] if ok else None, theirs["compile_cold_s"] if ok else None,
                             ours["compile_cold_s"] / theirs["compile_cold_s"] if ok else None, 1.0))
    return rows


def _num(v, unit: str = "") -> str:
    return "-" if v is None else f"{v:.2f}{unit}"


def markdown(rows: list[dict], quick: bool = False, callpath_from: str | None = None) -> list[str]:
    met = sum(r["met"] for r in rows)
    missing = [r for r in rows if not r["measured"]]
    lines = ["## Issue 22: Done when (judged from this run)", "",
             "Each row: hdsl against Halide measured in this run (apps: hdsl's median ms over Halide's "
             "app's; call overhead: hdsl's CPU µs per call; histograms: hdsl's median ms over Halide's "
             "with the same schedule; compile: hdsl's cold compile s over Halide's JIT compile s of the "
             "same peer; in a full run each is the median of three compiles made in turns). `value` "
             "is the ratio, or the µs for the call rows; `met` is value <= limit."
             + (" A quick run (small sizes, few runs): the rows show that the table is built, not where "
                "hdsl stands." if quick else ""),
             ""]
    if callpath_from:
        lines += [f"Call overhead and histograms from {callpath_from}.", ""]
    lines += ["| row | target | hdsl | Halide | value | limit | met |",
              "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        unit = r["unit"] if r["unit"] else ""
        lines.append(f"| {r['what']} | {r['target']} | {_num(r['hdsl'])} | {_num(r['peer'])} | "
                     f"{_num(r['value'], unit)} | {r['limit']:.2f}{unit} | "
                     f"{'yes' if r['met'] else 'no' if r['measured'] else 'not measured'} |")
    lines += ["", f"Issue 22: {met} of {len(rows)} rows met"
              + (f"; {len(missing)} not measured in this run" if missing else "")
              + (": done." if met == len(rows) else ": not done."), ""]
    return lines
