"""Batches and huge images (issue 24, docs/scale.md): throughput of hdsl.batch in 1 and 2 local
processes, on a Dask LocalCluster of 1 and 2 workers, and of a plain ProcessPoolExecutor doing
the same by hand; a huge image (32768 x 32768 u16 by default) blurred on one machine in memory
and with p.on_dask on 1 and 2 workers from a zarr store; Dask's cost per task and hdsl's
planning cost per tile. Writes benchmarks/SCALE.md and benchmarks/SCALE.json.

    .venv/bin/python benchmarks/scale.py                 # 200 images of 512x512, a 32768^2 image
    .venv/bin/python benchmarks/scale.py --quick         # 20 images, a 4096^2 image (a smoke run)

Each configuration runs once (the machine is shared: see the numbers' note), in one process,
one after another, with the compile cache warm (compiles are not timed)."""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BLUR = ROOT / "examples" / "blur.hl"

import hdsl  # noqa: E402
from hdsl.runtime.images import load_image, save_image  # noqa: E402

_PLAIN = {}


def _plain_init(path):
    _PLAIN["c"] = hdsl.load(path).compile()


def _plain_one(src, dst):
    save_image(dst, _PLAIN["c"](img=load_image(src)))
    return dst


def bench_batch(n: int, side: int, work: Path) -> list[dict]:
    from distributed import Client, LocalCluster
    src = work / "in"
    src.mkdir()
    rng = np.random.default_rng(0)
    for i in range(n):
        save_image(src / f"im{i:04d}.png", rng.integers(0, 65536, (side, side), dtype=np.uint16))
    hdsl.load(BLUR).compile()
    rows = []

    def record(what, fn):
        out = work / f"out-{len(rows)}"
        t0 = time.perf_counter()
        fn(out)
        dt = time.perf_counter() - t0
        assert len(list(out.glob("*.png"))) == n, what
        rows.append({"what": what, "seconds": dt, "images_per_s": n / dt})
        print(f"  {what}: {dt:.2f} s, {n / dt:.1f} images/s", flush=True)

    pattern = {"img": str(src / "*.png")}
    record("hdsl.batch, in this process (workers=0)",
           lambda out: hdsl.batch(str(BLUR), pattern, str(out / "{stem}.png"), workers=0))
    for k in (1, 2):
        record(f"hdsl.batch, {k} local process{'es' if k > 1 else ''}",
               lambda out, k=k: hdsl.batch(str(BLUR), pattern, str(out / "{stem}.png"), workers=k))
    for k in (1, 2):
        def plain(out, k=k):
            out.mkdir()
            with cf.ProcessPoolExecutor(k, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_plain_init, initargs=(str(BLUR),)) as pool:
                list(pool.map(_plain_one, sorted(src.glob("*.png")), [out / p.name for p in sorted(src.glob("*.png"))]))
        record(f"plain ProcessPoolExecutor, {k} process{'es' if k > 1 else ''}", plain)
    for k in (1, 2):
        t0 = time.perf_counter()
        with LocalCluster(n_workers=k, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            start = time.perf_counter() - t0
            record(f"hdsl.batch on a Dask LocalCluster, {k} worker{'s' if k > 1 else ''} "
                   f"(cluster start {start:.1f} s, not counted)",
                   lambda out: hdsl.batch(str(BLUR), pattern, str(out / "{stem}.png"), scheduler=client))
    return rows


def bench_big(side: int, tile: int, work: Path) -> dict:
    import dask
    import dask.array as da
    import zarr
    from distributed import Client, LocalCluster

    from hdsl.scale.io import open_image
    res = {"side": side, "tile": tile}
    store = str(work / "big.zarr")
    t0 = time.perf_counter()
    src = da.random.default_rng(1).integers(0, 65536, (side, side), dtype=np.uint16, chunks=tile)
    with dask.config.set(scheduler="threads", num_workers=2):
        da.to_zarr(src, store)
    res["write_input_s"] = time.perf_counter() - t0
    print(f"  input written: {res['write_input_s']:.1f} s", flush=True)
    p = hdsl.load(BLUR)
    c = p.compile()
    size, mn = (side - 2, side - 2), (1, 1)

    t0 = time.perf_counter()
    img = zarr.open_array(store, mode="r")[...]
    res["one_machine_read_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = c.realize(size, min=mn, img=img)
    res["one_machine_run_s"] = time.perf_counter() - t0
    checksum = int(out.sum(dtype=np.uint64))
    del out, img
    print(f"  one machine: read {res['one_machine_read_s']:.1f} s, run {res['one_machine_run_s']:.1f} s", flush=True)
    for k in (1, 2):
        with LocalCluster(n_workers=k, threads_per_worker=1, processes=True, dashboard_address=None,
                          memory_limit="6GiB") as cluster, Client(cluster) as client:
            t0 = time.perf_counter()
            d = p.on_dask(size=size, min=mn, tile=(tile, tile), img=open_image(store))
            plan = time.perf_counter() - t0
            t0 = time.perf_counter()
            total = int(client.compute(d.sum(dtype=np.uint64)).result())
            run = time.perf_counter() - t0
            assert total == checksum, "on_dask's result differs from the one-machine result"
            tiles = int(np.prod(d.numblocks))
            res[f"dask_{k}"] = {"plan_s": plan, "run_s": run, "tiles": tiles,
                                "megapixels_per_s": side * side / 1e6 / run}
            print(f"  on_dask, {k} worker(s): plan {plan:.2f} s ({plan / tiles * 1e3:.1f} ms a tile), "
                  f"read + run + sum {run:.1f} s, {tiles} tiles", flush=True)
            # Dask's own cost per task: as many tasks doing nothing on tiny blocks
            tiny = da.zeros((tiles, 1), chunks=(1, 1)).map_blocks(lambda b: b + 1)
            t0 = time.perf_counter()
            client.compute(tiny.sum()).result()
            res[f"dask_{k}"]["empty_task_ms"] = (time.perf_counter() - t0) / tiles * 1e3
    return res


def write(results: dict, path: Path) -> None:
    b, g = results["batch"], results["big"]
    lines = [
        "# Batches and huge images on Dask",
        "",
        f"`benchmarks/scale.py` on {results['machine']}, {results['when']}. "
        "**Noisy**: the machine's 2 cores were shared with other jobs (load average "
        f"{results['load']:.1f} when it started); each configuration ran once, one after another. "
        "Compare the rows with caution; the compile cache was warm (no compile is timed).",
        "",
        f"## A batch of {results['n']} images ({results['side']}x{results['side']} u16 PNG, examples/blur.hl)",
        "",
        "| how | seconds | images/s |",
        "| --- | ---: | ---: |",
    ] + [f"| {r['what']} | {r['seconds']:.2f} | {r['images_per_s']:.1f} |" for r in b] + [
        "",
        f"## One {g['side']}x{g['side']} u16 image (examples/blur.hl, tiles of {g['tile']}^2, input in a zarr store "
        f"of {g['tile']}^2 chunks: each tile reads its region from the store; the output is summed, not stored)",
        "",
        f"- one machine, in memory: reading the store {g['one_machine_read_s']:.1f} s, the pipeline "
        f"{g['one_machine_run_s']:.1f} s (native thread pool on both cores)",
    ]
    for k in (1, 2):
        d = g[f"dask_{k}"]
        lines.append(f"- `p.on_dask`, {k} worker{'s' if k > 1 else ''}: planning {d['plan_s']:.2f} s "
                     f"({d['plan_s'] / d['tiles'] * 1e3:.1f} ms a tile, bounds inference per tile), reading, "
                     f"running and summing {d['run_s']:.1f} s for {d['tiles']} tiles "
                     f"({d['megapixels_per_s']:.0f} megapixels/s); Dask's cost per empty tile (a tiny block made, mapped and summed: about three tasks) "
                     f"{d['empty_task_ms']:.2f} ms")
    lines += ["", "The result of each Dask run equals the one-machine result (its checksum is asserted).", ""]
    path.write_text("\n".join(lines))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="20 images and a 4096^2 image")
    ap.add_argument("--images", type=int)
    ap.add_argument("--side", type=int)
    ap.add_argument("--big", type=int)
    ap.add_argument("--tile", type=int, default=2048)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "SCALE.md"))
    a = ap.parse_args()
    n = a.images or (20 if a.quick else 200)
    side = a.side or 512
    big = a.big or (4096 if a.quick else 32768)
    res = {"n": n, "side": side, "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
           "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="hdsl-scale-") as tmp:
        print(f"batch of {n} images of {side}x{side}:", flush=True)
        (Path(tmp) / "b").mkdir()
        res["batch"] = bench_batch(n, side, Path(tmp) / "b")
        print(f"one {big}x{big} image:", flush=True)
        (Path(tmp) / "g").mkdir()
        res["big"] = bench_big(big, min(a.tile, big), Path(tmp) / "g")
    Path(a.out).with_suffix(".json").write_text(json.dumps(res, indent=1))
    write(res, Path(a.out))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
