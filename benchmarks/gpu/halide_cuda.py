"""Halide's side of the GPU benchmark, built on a machine without a GPU: each app's algorithm
(benchmarks/halide_peers.py, the ports checked against Halide's apps) with the GPU schedule of
Halide's own app (the `get_target().has_gpu_feature()` branch of apps/APP/APP_generator.cpp at
Halide's release tag v21.0.0, the halide 21 wheel's sources; line numbers below are that file's),
compiled ahead of time for CUDA into static libraries, and linked with harness.cpp into one
program, benchmarks/gpu/build/harness, that runs on the GPU machine without the halide package
(the Halide runtime is linked in and opens libcuda.so when it runs).

    .venv/bin/python benchmarks/gpu/halide_cuda.py            # build benchmarks/gpu/build/harness
    .venv/bin/python benchmarks/gpu/halide_cuda.py --check    # and run it here (no GPU: its error)

The target is Halide's highest CUDA capability, cuda_capability_86 (Halide 21's Target
features stop at 8.6): its PTX (ISA for sm_86) is compiled by the driver for the GPU at
hand, so it runs on sm_90 (H100, H200) by PTX's forward compatibility."""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import apps  # noqa: E402
import halide_peers  # noqa: E402

CUDA_TARGET = "x86-64-linux-cuda-cuda_capability_86"
BUILD = HERE / "build"
HALIDE_TAG = "v21.0.0"


def _hl():
    import halide as hl
    return hl


# ------------------------------------------------------------------ the apps' GPU schedules
# Each takes the namespace of Funcs and params halide_peers gives a callable schedule and
# applies the app's GPU schedule.

def local_laplacian_gpu(n):
    """apps/local_laplacian/local_laplacian_generator.cpp (v21.0.0), lines 103-135."""
    hl = _hl()
    x, y, k = n.x, n.y, n.k
    xi, yi = hl.Var("xi"), hl.Var("yi")
    n.remap.compute_root()                                                    # line 109
    n.output.compute_root().never_partition_all().gpu_tile(x, y, xi, yi, 16, 8)   # 111-113
    for j in range(n.J):                                                      # 114-134
        bw, bh = (16, 8) if j <= 3 else (2, 2)
        if j > 0:
            n.inG[j].compute_root().never_partition_all().gpu_tile(x, y, xi, yi, bw, bh)
            n.gP[j].compute_root().reorder(k, x, y).never_partition_all().gpu_tile(x, y, xi, yi, bw, bh)
        n.outG[j].compute_root().never_partition_all().gpu_tile(x, y, xi, yi, bw, bh)


def bilateral_grid_gpu(n):
    """apps/bilateral_grid/bilateral_grid_generator.cpp (v21.0.0), lines 85-119."""
    hl = _hl()
    x, y, z, c, r = n.x, n.y, n.z, n.c, n.r
    xi, yi, zi = hl.Var("xi"), hl.Var("yi"), hl.Var("zi")
    RoundUp = hl.TailStrategy.RoundUp
    n.blurz.compute_root().reorder(c, z, x, y).gpu_tile(x, y, xi, yi, 8, 8)                    # line 92
    n.histogram.reorder(c, z, x, y).compute_at(n.blurz, x).gpu_threads(x, y)                   # 100
    n.histogram.update().reorder(c, r.x, r.y, x, y).gpu_threads(x, y).unroll(c)                 # 101
    for f in (n.blurx, n.blury):                                                                # 104-117
        f.compute_root().reorder(c, x, y, z).reorder_storage(c, x, y, z).vectorize(c) \
            .unroll(y, 2, RoundUp).gpu_tile(x, y, z, xi, yi, zi, 32, 8, 1, RoundUp)
    n.out.compute_root().gpu_tile(x, y, xi, yi, 32, 8)                                          # 118
    n.interpolated.compute_at(n.out, xi).vectorize(c)                                           # 119


def interpolate_gpu(n):
    """apps/interpolate/interpolate_generator.cpp (v21.0.0), lines 80-145."""
    hl = _hl()
    x, y, c, L = n.x, n.y, n.c, n.L
    xi, yi, xii, yii = hl.Var("xi"), hl.Var("yi"), hl.Var("xii"), hl.Var("yii")
    RoundUp = hl.TailStrategy.RoundUp

    def tiles_2x2(f):                      # the normalize / interpolated[l] tiling, lines 86-93, 108-115
        f.reorder(c, x, y).tile(x, y, xi, yi, 32, 32, RoundUp).tile(xi, yi, xii, yii, 2, 2) \
            .gpu_blocks(x, y).gpu_threads(xi, yi).unroll(xii).unroll(yii).unroll(c)

    n.out.never_partition_all().bound(x, 0, n.inp.width()).bound(y, 0, n.inp.height()).bound(c, 0, 3)  # 81-85
    tiles_2x2(n.out)
    for l in range(1, L):                                                     # 95-102
        n.ds[l].compute_root().never_partition_all().reorder(c, x, y).unroll(c).gpu_tile(x, y, xi, yi, 16, 16)
    for l in range(3, L, 2):                                                  # 104-116
        tiles_2x2(n.it[l].compute_root().never_partition_all())
    n.upsampledx[1].compute_at(n.out, x).never_partition_all().reorder(c, x, y).tile(x, y, xi, yi, 2, 1) \
        .unroll(xi).unroll(yi).unroll(c).gpu_threads(x, y)                    # 118-126
    n.it[1].compute_at(n.out, x).never_partition_all().reorder(c, x, y).tile(x, y, xi, yi, 2, 2) \
        .unroll(xi).unroll(yi).unroll(c).gpu_threads(x, y)                    # 128-136
    n.it[2].compute_at(n.out, x).never_partition_all().reorder(c, x, y).unroll(c).gpu_threads(x, y)  # 138-143


def camera_pipe_gpu(n):
    """apps/camera_pipe/camera_pipe_generator.cpp (v21.0.0): the CameraPipe generator's GPU
    branch, lines 444-499, the Demosaic's (lines 159-168, placed at (processed, x) by lines
    484-485), and the look-up tables': matrix.gpu_single_thread (274-277), curve.gpu_tile(x,
    xi, 32) (336-340), sharpen_strength_x32.gpu_single_thread (374-377); halide_peers has
    already made the three compute_root (lines 274, 336, 374)."""
    hl = _hl()
    x, y, c = n.x, n.y, n.c
    xi, yi = hl.Var("xi"), hl.Var("yi")
    n.matrix.gpu_single_thread()
    n.curve.gpu_tile(x, xi, 32)
    n.s32.gpu_single_thread()
    out = n.sharpened
    out.bound(c, 0, 3).bound(x, 0, (out.output_buffer().width() // 2) * 2) \
        .bound(y, 0, (out.output_buffer().height() // 2) * 2)                # 452-454
    out.compute_root().reorder(c, x, y).unroll(x, 2).gpu_tile(x, y, xi, yi, 28, 12)    # 460-474
    n.curved.compute_at(out, x).unroll(x, 2).gpu_threads(x, y)                # 476-478
    n.corrected.compute_at(out, x).unroll(x, 2).gpu_threads(x, y)             # 480-482
    for f in (n.g_r, n.g_b):                                                  # 161-163
        f.compute_at(out, x).gpu_threads(x, y)
    n.demosaiced.compute_at(out, x).unroll(x, 2).gpu_threads(x, y).reorder(c, x, y).unroll(c)   # 164-168
    n.denoised.compute_at(out, x).tile(x, y, xi, yi, 2, 2).unroll(xi).unroll(yi).gpu_threads(x, y)  # 487-491
    n.deinterleaved.compute_at(out, x).unroll(x, 2).gpu_threads(x, y).reorder(c, x, y).unroll(c)    # 493-497


def blur_gpu(n):
    """apps/blur/halide_blur_generator.cpp (v21.0.0) has four GPU schedules (lines 43-80); this
    is its `cache` one (lines 50-54: blur_x per block in shared memory), with the default
    tile_x = 32, tile_y = 8 (lines 28-29) -- examples/blur.hl's schedule cuda. (The app's
    default is slide_vector; its algorithm reads input(x + 2, y) with no boundary condition,
    halide_peers.blur is examples/blur.hl's, with repeat_edge.)"""
    hl = _hl()
    x, y = n.x, n.y
    xi, yi = hl.Var("xi_gpu"), hl.Var("yi_gpu")
    n.out.gpu_tile(x, y, xi, yi, 32, 8)
    n.bx.compute_at(n.out, x).gpu_threads(x, y)


# The output Func and the AOT arguments, in the order harness.cpp passes them.
IO = {
    "local_laplacian": lambda n: (n.output, [n.inp, n.p_levels, n.p_alpha, n.p_beta]),
    "bilateral_grid": lambda n: (n.out, [n.inp, n.rs]),
    "interpolate": lambda n: (n.out, [n.inp]),
    "camera_pipe": lambda n: (n.sharpened, [n.inp, n.mat32, n.mat70, n.p_ct, n.p_gamma, n.p_contrast, n.p_sharpen,
                                            n.p_black, n.p_white]),
    "blur": lambda n: (n.out, [n.inp]),
}

GPU_SCHEDULES = {"local_laplacian": local_laplacian_gpu, "bilateral_grid": bilateral_grid_gpu,
                 "interpolate": interpolate_gpu, "camera_pipe": camera_pipe_gpu, "blur": blur_gpu}


def _roots(*names):
    """A CPU schedule for checking the harness without a GPU: these stages at the root (as
    halide_peers' schedule=False), the rest inlined."""
    def schedule(n):
        for name in names:
            fs = getattr(n, name)
            for f in (fs[1:] if isinstance(fs, list) else [fs]):
                f.compute_root()
    return schedule


CPU_SCHEDULES = {"local_laplacian": _roots("remap", "gray", "inG", "gP", "outG"),
                 "bilateral_grid": _roots("histogram", "blurz", "blurx", "blury"),
                 "interpolate": _roots("ds", "it"), "camera_pipe": _roots("g_r", "g_b", "curved"),
                 "blur": _roots()}


def pipelines(schedules=None, only=None):
    """{app: (output Func, args)}, each app's algorithm from halide_peers with schedules[app]
    (default: the apps' GPU schedules) applied."""
    schedules = schedules or GPU_SCHEDULES
    builders = {
        "local_laplacian": lambda i, s: halide_peers.local_laplacian(i["img"], schedule=s),
        "bilateral_grid": lambda i, s: halide_peers.bilateral_grid(i["img"], 0.1, schedule=s),
        "interpolate": lambda i, s: halide_peers.interpolate(i["img"], schedule=s),
        "camera_pipe": lambda i, s: halide_peers.camera_pipe(i["raw"], i["matrix_3200"], i["matrix_7000"],
                                                             *apps.APPS["camera_pipe"].inputs(False)[3][0][1::-1],
                                                             schedule=s),
        "blur": lambda i, s: halide_peers.blur(i["img"], schedule=s),
    }
    out = {}
    for name, make in builders.items():
        if only and name not in only:
            continue
        inputs = apps.APPS[name].inputs(False)[0]       # full size: the builders read sizes from them
        out[name] = make(inputs, lambda n, name=name: (schedules[name](n), IO[name](n))[1])
    return out


def halide_dir() -> Path:
    return Path(_hl().__file__).resolve().parent


def build(out_dir: Path = BUILD, target: str = CUDA_TARGET, only=None, schedules=None) -> Path:
    """AOT-compile every app (static libraries without the runtime) and one standalone runtime,
    then link harness.cpp with them; returns the harness's path. Each app is compiled twice:
    APP_cuda with Halide's default floating point (which lets LLVM contract a * b + c into an
    FMA) and APP_cuda_strict with its strict_float feature (none: hdsl's default semantics).
    """
    hl = _hl()
    out_dir.mkdir(parents=True, exist_ok=True)
    t = hl.Target(target)
    names = []
    for name, (func, args) in pipelines(schedules, only).items():
        t0 = time.perf_counter()
        for suffix, tt in (("", t), ("_strict", t.with_feature(hl.TargetFeature.StrictFloat))):
            func.compile_to_static_library(str(out_dir / f"{name}_cuda{suffix}"), args, f"{name}_cuda{suffix}",
                                           tt.with_feature(hl.TargetFeature.NoRuntime))
        print(f"  {name}: compiled for {target} (and -strict_float) in {time.perf_counter() - t0:.1f} s", flush=True)
        names.append(name)
    hl.compile_standalone_runtime(str(out_dir / "halide_runtime_cuda.o"),       # (Halide refuses a strict_float
                                  t.without_feature(hl.TargetFeature.StrictFloat))  # runtime)
    link(out_dir, names, str(t))
    exe = out_dir / "harness"
    print(f"  {exe}: {exe.stat().st_size} bytes", flush=True)
    return exe


def build_cpu(out_dir: Path, only=None) -> Path:
    """The same harness with the apps compiled for this CPU (strict floats, CPU_SCHEDULES):
    what checks the harness, the .hbuf files and run_device.py's comparisons without a GPU
    (tests/test_bench_gpu.py)."""
    target = _hl().get_host_target().with_feature(_hl().TargetFeature.StrictFloat)
    return build(out_dir, str(target), only, CPU_SCHEDULES)


def embedded_ptx(lib: Path) -> str:
    """The PTX module Halide embeds in a CUDA pipeline's static library (a NUL-terminated
    string in its object file, from the `//` header before `.version` to the NUL)."""
    with tempfile.TemporaryDirectory(prefix="hdsl-ar-") as d:
        subprocess.run(["ar", "x", str(lib.resolve())], cwd=d, check=True)
        data = b"".join(p.read_bytes() for p in sorted(Path(d).iterdir()))
    at = data.find(b".version ")
    if at < 0:
        raise ValueError(f"{lib}: no PTX in it")
    start, end = data.rfind(b"\0", 0, at) + 1, data.find(b"\0", at)
    return data[start:end].decode()


def check_ptx(out_dir: Path, sm: int = 90) -> None:
    """Assemble each library's PTX for sm_NN with hdsl's ptxas (the cuda-tools extra), as the
    driver's JIT will on the GPU: a check that Halide's sm_86 PTX suits sm_90."""
    sys.path.insert(0, str(HERE.parents[1]))
    from hdsl.codegen.cuda_tools import ptxas, ptxas_path
    if ptxas_path() is None:
        print("  (no ptxas: the PTX is not checked)")
        return
    for lib in sorted(out_dir.glob("*_cuda*.a")):
        ptx = embedded_ptx(lib)
        cubin = ptxas(ptx, sm)
        print(f"  {lib.name}: PTX {len(ptx)} chars, assembled for sm_{sm} ({len(cubin)} bytes)", flush=True)


HEADERS = ("HalideBuffer.h", "HalideRuntime.h", "HalideRuntimeCuda.h")


def link(out_dir: Path, names, target: str) -> None:
    """Link harness.cpp with the apps' libraries and the runtime, by out_dir/rebuild.sh, a script
    that needs only g++ and out_dir (Halide's headers are copied into out_dir/include, the
    harness's source next to them): where the prebuilt harness does not run on the GPU
    machine (it needs glibc 2.34 and the libstdc++ of GCC 11 or newer), `sh rebuild.sh`
    there rebuilds it. libstdc++ is linked dynamically: statically, it asks for glibc 2.36."""
    inc = out_dir / "include"
    inc.mkdir(exist_ok=True)
    for h in HEADERS:
        shutil.copy(halide_dir() / "include" / h, inc / h)
    shutil.copy(HERE / "harness.cpp", out_dir / "harness.cpp")
    have = " ".join(f"-DHAVE_{n.upper()}" for n in names)
    libs = " ".join(f"{n}_cuda.a {n}_cuda_strict.a" for n in names)
    script = out_dir / "rebuild.sh"
    script.write_text("#!/bin/sh\n# the harness from these files alone (benchmarks/gpu/halide_cuda.py wrote it)\n"
                      "set -e\ncd \"$(dirname \"$0\")\"\n"
                      f"g++ -O2 -std=c++17 {have} -DHALIDE_TARGET='\"{target}\"' -Iinclude -I. -o harness harness.cpp {libs} "
                      "halide_runtime_cuda.o -ldl -lpthread\nstrip harness\n")
    print(f"  sh {script}", flush=True)
    subprocess.run(["sh", str(script)], check=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help=f"the build directory (default {BUILD}, with --cpu {BUILD}-cpu)")
    ap.add_argument("--only", nargs="*", help="these apps only")
    ap.add_argument("--check", action="store_true", help="then run the harness on quick inputs here")
    ap.add_argument("--cpu", action="store_true", help="the harness for this CPU instead (build_cpu)")
    a = ap.parse_args(argv)
    out = a.out or (Path(f"{BUILD}-cpu") if a.cpu else BUILD)
    exe = build_cpu(out, a.only) if a.cpu else build(out, only=a.only)
    if a.check and not a.cpu:
        check_ptx(out)
    if a.check:
        d = Path(tempfile.mkdtemp(prefix="hdsl-harness-check-"))
        for name in (a.only or apps.APPS):
            apps.write_inputs(apps.APPS[name], d, quick=True)
            r = subprocess.run([str(exe), name, str(d), str(d), "2", "1"], capture_output=True, text=True)
            print(f"  {name}: exit {r.returncode}\n    stdout: {r.stdout.strip()}\n    stderr: {r.stderr.strip()}")
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HL_NUM_THREADS", "2")
    sys.exit(main())
