"""The Halide side of the benchmarks, in Halide's Python API: the same algorithms and the same
schedules as the .hl cases. Each builder returns (run, output), where run() realizes into a
preallocated buffer (JIT-compiled beforehand) and output() gives the result as a NumPy
array in the user's (H, W[, C]) layout.

The four ports of Halide's apps (local_laplacian, bilateral_grid, camera_pipe, interpolate)
were checked line by line against the apps' generator sources at Halide commit
abbf7ff983dc19d9994d32c5a5d11a8cdda88ed8 (HALIDE_COMMIT); each docstring names the file and
lines it follows. The tests (tests/examples/test_*.py) also compare each of them with a NumPy
implementation written from those sources, so a slip shared by a peer and its example shows.

An app builder's `schedule` may also be a callable: it is then called with a namespace of
the pipeline's Funcs, Vars, RDoms, ImageParams and Params (by their names here) instead of
scheduling, and the builder returns what it returns, building no Peer (benchmarks/gpu/halide_cuda.py
schedules the apps for CUDA this way and compiles them ahead of time)."""
from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np

HALIDE_COMMIT = "abbf7ff983dc19d9994d32c5a5d11a8cdda88ed8"     # the Halide sources the app ports follow


def _hl():
    import halide as hl
    return hl


# Halide's target for each of hdsl's CPU targets: the host's JIT target, or Halide's x86-64
# AVX2 feature set (the features Halide's x86-64-avx2 target string names, src/Target.cpp)
HALIDE_TARGETS = {"host": None, "x86-64-avx2": "x86-64-linux-avx-avx2-f16c-fma-sse41"}


def halide_target(target: str = "host"):
    """Halide's Target for hdsl's CPU target name `target` ('host' or 'x86-64-avx2')."""
    hl = _hl()
    name = HALIDE_TARGETS[target]
    return hl.get_jit_target_from_environment() if name is None else hl.Target(name)


class Peer:
    def __init__(self, func, out_buf, inputs, to_numpy, strict: bool = False, target: str = "host"):
        hl = _hl()
        t = halide_target(target)
        if strict:      # no FMA contraction: the same bits as hdsl's default floating point
            t = t.with_feature(hl.TargetFeature.StrictFloat)
        t0 = time.perf_counter()
        func.compile_jit(t)
        self.compile_s = time.perf_counter() - t0
        self.func, self.out_buf, self.inputs, self.to_numpy = func, out_buf, inputs, to_numpy

    def run(self):
        self.func.realize(self.out_buf)

    def output(self) -> np.ndarray:
        return self.to_numpy(np.asarray(self.out_buf))


AUTOSCHEDULERS = {"Adams2019": "autoschedule_adams2019", "Mullapudi2016": "autoschedule_mullapudi2016"}


def autoschedule(name: str, out, out_extents, image_params, params=()) -> None:
    """Schedule the unscheduled pipeline ending in `out` with Halide's autoscheduler `name`
    (Adams2019 with the cost model's weights the wheel ships, or Mullapudi2016), given the
    estimates a generator would declare: the output's extents, each input's (ImageParam,
    extents) and each param's (Param, value) (Halide's Func::set_estimates,
    Param::set_estimate; Pipeline::apply_autoscheduler with parallelism = the threads used)."""
    import os
    hl = _hl()
    hl.load_plugin(os.path.join(os.path.dirname(hl.__file__), "lib64", f"lib{AUTOSCHEDULERS[name]}.so"))
    out.set_estimates([hl.Range(0, e) for e in out_extents])
    for ip, extents in image_params:
        ip.set_estimates([hl.Range(0, e) for e in extents])
    for prm, value in params:
        prm.set_estimate(value)
    threads = os.environ.get("HL_NUM_THREADS", "2")
    res = hl.Pipeline(out).apply_autoscheduler(hl.get_jit_target_from_environment(),
                                               hl.AutoschedulerParams(name, {"parallelism": threads}))
    if os.environ.get("HDSL_SHOW_HALIDE_SCHEDULE"):     # what it chose, as Halide C++ schedule source
        print(f"---- Halide {name} schedule of {out.name()}\n{res.schedule_source}", flush=True)


def blur(img: np.ndarray, auto: str | None = None, schedule=True) -> Peer:
    """3x3 box blur of u16, repeated edges, the 2012 paper's tiled schedule (examples/blur.hl).
    schedule: a callable schedules instead (as in the apps below)."""
    hl = _hl()
    h, w = img.shape
    inp = hl.ImageParam(hl.UInt(16), 2, "img")
    x, y, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi")
    c = hl.BoundaryConditions.repeat_edge(inp)
    bx, out = hl.Func("blur_x"), hl.Func("out")
    bx[x, y] = (c[x - 1, y] + c[x, y] + c[x + 1, y]) / 3
    out[x, y] = (bx[x, y - 1] + bx[x, y] + bx[x, y + 1]) / 3
    if auto:
        autoschedule(auto, out, [w, h], [(inp, [w, h])])
    elif callable(schedule):   # the caller schedules (every Func, Var and param by name) and takes over
        return schedule(SimpleNamespace(**locals()))
    else:
        out.tile(x, y, xi, yi, 256, 32).vectorize(xi, 16).parallel(y)
        bx.compute_at(out, x).vectorize(x, 16)
    inp.set(hl.Buffer(img))
    return Peer(out, hl.Buffer(hl.UInt(16), [w, h]), [img], lambda a: a)


def gauss5(img: np.ndarray) -> Peer:
    hl = _hl()
    h, w = img.shape
    inp = hl.ImageParam(hl.Float(32), 2, "img")
    x, y, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi")
    c = hl.BoundaryConditions.repeat_edge(inp)
    bx, out = hl.Func("bx"), hl.Func("out")
    f4, f6, f16 = hl.f32(4.0), hl.f32(6.0), hl.f32(16.0)
    bx[x, y] = (c[x - 2, y] + f4 * c[x - 1, y] + f6 * c[x, y] + f4 * c[x + 1, y] + c[x + 2, y]) / f16
    out[x, y] = (bx[x, y - 2] + f4 * bx[x, y - 1] + f6 * bx[x, y] + f4 * bx[x, y + 1] + bx[x, y + 2]) / f16
    out.tile(x, y, xi, yi, 256, 32).vectorize(xi, 16).parallel(y)
    bx.compute_at(out, x).vectorize(x, 16)
    inp.set(hl.Buffer(img))
    return Peer(out, hl.Buffer(hl.Float(32), [w, h]), [img], lambda a: a)


def iir(img: np.ndarray, b0: float = 0.5, a1: float = 0.5) -> Peer:
    """Causal and anticausal first-order filters along x, then y (values outside are 0)."""
    hl = _hl()
    h, w = img.shape
    inp = hl.ImageParam(hl.Float(32), 2, "img")
    x, y, xi, yi, xo, yo = [hl.Var(n) for n in ("x", "y", "xi", "yi", "xo", "yo")]
    rf, out = hl.Func("rf"), hl.Func("out")
    rf[x, y] = inp[x, y]
    rx, ry = hl.RDom([(0, w)]), hl.RDom([(0, h)])
    B, A = hl.f32(b0), hl.f32(a1)
    zero = hl.f32(0.0)
    rf[rx.x, y] = B * rf[rx.x, y] + A * hl.select(rx.x > 0, rf[hl.max(rx.x - 1, 0), y], zero)
    ax = w - 1 - rx.x
    rf[ax, y] = B * rf[ax, y] + A * hl.select(ax < w - 1, rf[hl.min(ax + 1, w - 1), y], zero)
    rf[x, ry.x] = B * rf[x, ry.x] + A * hl.select(ry.x > 0, rf[x, hl.max(ry.x - 1, 0)], zero)
    ay = h - 1 - ry.x
    rf[x, ay] = B * rf[x, ay] + A * hl.select(ay < h - 1, rf[x, hl.min(ay + 1, h - 1)], zero)
    out[x, y] = rf[x, y]
    rf.compute_root().split(y, yo, yi, 64).parallel(yo).vectorize(x, 16)
    for k in (0, 1):
        rf.update(k).split(y, yo, yi, 16).reorder(yi, rx.x, yo).vectorize(yi).parallel(yo)
    for k in (2, 3):
        rf.update(k).split(x, xo, xi, 16).reorder(xi, ry.x, xo).vectorize(xi).parallel(xo)
    out.split(y, yo, yi, 64).parallel(yo).vectorize(x, 16)
    inp.set(hl.Buffer(img))
    return Peer(out, hl.Buffer(hl.Float(32), [w, h]), [img], lambda a: a)


def iir1d(sig: np.ndarray, b0: float = 0.5, a1: float = 0.5) -> Peer:
    """A causal first-order filter over one signal, Halide's best serial scan: the pure
    definition vectorized and parallel, the update one serial loop (a recursion's RDom
    loop cannot be split across threads or lanes in Halide: Func::parallel / vectorize of
    an RVar that carries a dependence is refused, src/Func.cpp)."""
    hl = _hl()
    n = sig.shape[0]
    inp = hl.ImageParam(hl.Float(32), 1, "sig")
    x, xo, xi = hl.Var("x"), hl.Var("xo"), hl.Var("xi")
    out = hl.Func("out")
    out[x] = inp[x]
    r = hl.RDom([(0, n)])
    out[r.x] = hl.f32(b0) * out[r.x] + hl.f32(a1) * hl.select(r.x > 0, out[hl.max(r.x - 1, 0)], hl.f32(0.0))
    out.split(x, xo, xi, 1 << 16).parallel(xo).vectorize(xi, 16)
    inp.set(hl.Buffer(sig))
    return Peer(out, hl.Buffer(hl.Float(32), [n]), [sig], lambda a: a)


def local_laplacian(img: np.ndarray, levels: int = 8, alpha: float = 1.0, beta: float = 1.0,
                    strict: bool = False, schedule=True, auto: str | None = None,
                    target: str = "host") -> Peer:
    """Halide's apps/local_laplacian at commit abbf7ff9 (HALIDE_COMMIT): the algorithm of
    apps/local_laplacian/local_laplacian_generator.cpp lines 18-87 with its downsample and
    upsample (lines 266-282), J = pyramid_levels = 8 (line 10); levels, alpha and beta are the
    generator's Inputs (lines 13-15; the app's process.cpp, line 31, passes alpha / (levels - 1)).
    schedule=True: the app's CPU schedule (lines 136-199) as examples/local_laplacian.hl has
    it: without gPyramid[0].clone_in (lines 184-188), never_partition, hoist_storage and the
    RoundUp tail strategy, which hdsl lacks (fold_storage is kept: hdsl folds by itself).
    schedule=False: the pyramid levels compute_root, the rest inlined. img: (H, W, 3) u16."""
    hl = _hl()
    J = 8
    x, y, c, k, yo = hl.Var("x"), hl.Var("y"), hl.Var("c"), hl.Var("k"), hl.Var("yo")
    inp = hl.ImageParam(hl.UInt(16), 3, "input")
    p_levels = hl.Param(hl.Int(32), "levels", levels)
    p_alpha = hl.Param(hl.Float(32), "alpha", alpha)
    p_beta = hl.Param(hl.Float(32), "beta", beta)

    def downsample(f, dims):
        downx, downy = hl.Func(), hl.Func()
        if dims == 3:
            downy[x, y, k] = (f[x, 2 * y - 1, k] + 3.0 * (f[x, 2 * y, k] + f[x, 2 * y + 1, k]) + f[x, 2 * y + 2, k]) / 8.0
            downx[x, y, k] = (downy[2 * x - 1, y, k] + 3.0 * (downy[2 * x, y, k] + downy[2 * x + 1, y, k])
                              + downy[2 * x + 2, y, k]) / 8.0
        else:
            downy[x, y] = (f[x, 2 * y - 1] + 3.0 * (f[x, 2 * y] + f[x, 2 * y + 1]) + f[x, 2 * y + 2]) / 8.0
            downx[x, y] = (downy[2 * x - 1, y] + 3.0 * (downy[2 * x, y] + downy[2 * x + 1, y]) + downy[2 * x + 2, y]) / 8.0
        return downx

    def upsample(f, dims):
        upx, upy = hl.Func(), hl.Func()
        if dims == 3:
            upx[x, y, k] = hl.lerp(f[(x + 1) // 2, y, k], f[(x - 1) // 2, y, k], ((x % 2) * 2 + 1) / hl.f32(4.0))
            upy[x, y, k] = hl.lerp(upx[x, (y + 1) // 2, k], upx[x, (y - 1) // 2, k], ((y % 2) * 2 + 1) / hl.f32(4.0))
        else:
            upx[x, y] = hl.lerp(f[(x + 1) // 2, y], f[(x - 1) // 2, y], ((x % 2) * 2 + 1) / hl.f32(4.0))
            upy[x, y] = hl.lerp(upx[x, (y + 1) // 2], upx[x, (y - 1) // 2], ((y % 2) * 2 + 1) / hl.f32(4.0))
        return upy

    remap = hl.Func("remap")
    fx = hl.cast(hl.Float(32), x) / 256.0
    remap[x] = p_alpha * fx * hl.exp(-fx * fx / 2.0)
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    floating = hl.Func("floating")
    floating[x, y, c] = clamped[x, y, c] / hl.f32(65535.0)
    gray = hl.Func("gray")
    gray[x, y] = hl.f32(0.299) * floating[x, y, 0] + hl.f32(0.587) * floating[x, y, 1] + hl.f32(0.114) * floating[x, y, 2]
    gP = [hl.Func(f"gPyramid{j}") for j in range(J)]
    level = k * (hl.f32(1.0) / (p_levels - 1))
    idx = gray[x, y] * hl.cast(hl.Float(32), p_levels - 1) * 256.0
    idx = hl.clamp(hl.cast(hl.Int(32), idx), 0, (p_levels - 1) * 256)
    gP[0][x, y, k] = p_beta * (gray[x, y] - level) + level + remap[idx - 256 * k]
    for j in range(1, J):
        gP[j][x, y, k] = downsample(gP[j - 1], 3)[x, y, k]
    lP = [hl.Func(f"lPyramid{j}") for j in range(J)]
    lP[J - 1][x, y, k] = gP[J - 1][x, y, k]
    for j in range(J - 2, -1, -1):
        lP[j][x, y, k] = gP[j][x, y, k] - upsample(gP[j + 1], 3)[x, y, k]
    inG = [hl.Func(f"inGPyramid{j}") for j in range(J)]
    inG[0][x, y] = gray[x, y]
    for j in range(1, J):
        inG[j][x, y] = downsample(inG[j - 1], 2)[x, y]
    outL = [hl.Func(f"outLPyramid{j}") for j in range(J)]
    for j in range(J):
        lv = inG[j][x, y] * hl.cast(hl.Float(32), p_levels - 1)
        li = hl.clamp(hl.cast(hl.Int(32), lv), 0, p_levels - 2)
        lf = lv - hl.cast(hl.Float(32), li)
        outL[j][x, y] = (1.0 - lf) * lP[j][x, y, li] + lf * lP[j][x, y, li + 1]
    outG = [hl.Func(f"outGPyramid{j}") for j in range(J)]
    outG[J - 1][x, y] = outL[J - 1][x, y]
    for j in range(J - 2, -1, -1):
        outG[j][x, y] = upsample(outG[j + 1], 2)[x, y] + outL[j][x, y]
    color = hl.Func("color")
    eps = hl.f32(0.01)
    color[x, y, c] = inp[x, y, c] * (outG[0][x, y] + eps) / (gray[x, y] + eps)
    output = hl.Func("output")
    output[x, y, c] = hl.cast(hl.UInt(16), hl.clamp(color[x, y, c], 0.0, 65535.0))

    h, w, _ = img.shape
    if auto:                   # Halide's autoscheduler instead (auto: its name)
        autoschedule(auto, output, [w, h, 3], [(inp, [w, h, 3])], [(p_levels, levels), (p_alpha, alpha),
                                                                   (p_beta, beta)])
    elif callable(schedule):   # the caller schedules (every Func, Var and param by name) and takes over
        return schedule(SimpleNamespace(**locals()))
    elif schedule:             # the app's CPU schedule
        remap.compute_root()
        output.reorder(c, x, y).split(y, yo, y, 64).parallel(yo).vectorize(x, 8)
        gray.compute_root().parallel(y, 32).vectorize(x, 8)
        for j in range(1, 5):
            inG[j].compute_root().parallel(y, 32).vectorize(x, 8)
            gP[j].compute_root().reorder_storage(x, k, y).reorder(k, y).parallel(y, 8).vectorize(x, 8)
            outG[j].store_at(output, yo).compute_at(output, y).fold_storage(y, 4).vectorize(x, 8)
        outG[0].compute_at(output, y).vectorize(x, 8)
        for j in range(5, J):
            inG[j].compute_root()
            gP[j].compute_root().parallel(k)
            outG[j].compute_root()
    else:
        remap.compute_root()
        gray.compute_root()
        for j in range(1, J):
            inG[j].compute_root()
            gP[j].compute_root()
            outG[j].compute_root()
    h, w, _ = img.shape
    planar = np.array(img.transpose(2, 0, 1), order="C")        # (c, y, x): x innermost
    inp.set(hl.Buffer(planar))                 # (the Buffer does not keep the array alive: Peer does)
    return Peer(output, hl.Buffer(hl.UInt(16), [w, h, 3]), [planar], lambda a: a.transpose(1, 2, 0), strict, target)


def bilateral_grid(img: np.ndarray, r_sigma: float = 0.1, strict: bool = False, schedule=True,
                   auto: str | None = None, target: str = "host") -> Peer:
    """Halide's apps/bilateral_grid at commit abbf7ff9 (HALIDE_COMMIT): the algorithm of
    apps/bilateral_grid/bilateral_grid_generator.cpp lines 14-67, s_sigma = 8 (line 8), r_sigma an
    Input (line 11; its estimate and the app's Makefile use 0.1). schedule=True: the app's CPU
    schedule, lines 128-149, directive for directive (examples/bilateral_grid.hl has it less the
    update's unroll(c) and store_in(Stack), which hdsl refuses or lacks); else the grid's stages
    compute_root. img: (H, W) f32."""
    hl = _hl()
    S = 8
    h, w = img.shape
    x, y, z, c = hl.Var("x"), hl.Var("y"), hl.Var("z"), hl.Var("c")
    inp = hl.ImageParam(hl.Float(32), 2, "input")
    rs = hl.Param(hl.Float(32), "r_sigma", r_sigma)
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    r = hl.RDom([(0, S), (0, S)])
    val = hl.clamp(clamped[x * S + r.x - S // 2, y * S + r.y - S // 2], hl.f32(0.0), hl.f32(1.0))
    zi = hl.i32(val * (hl.f32(1.0) / rs) + hl.f32(0.5))
    histogram = hl.Func("histogram")
    histogram[x, y, z, c] = hl.f32(0.0)
    histogram[x, y, zi, c] += hl.mux(c, [val, hl.f32(1.0)])
    blurz, blurx, blury = hl.Func("blurz"), hl.Func("blurx"), hl.Func("blury")
    blurz[x, y, z, c] = (histogram[x, y, z - 2, c] + histogram[x, y, z - 1, c] * 4 + histogram[x, y, z, c] * 6
                         + histogram[x, y, z + 1, c] * 4 + histogram[x, y, z + 2, c])
    blurx[x, y, z, c] = (blurz[x - 2, y, z, c] + blurz[x - 1, y, z, c] * 4 + blurz[x, y, z, c] * 6
                         + blurz[x + 1, y, z, c] * 4 + blurz[x + 2, y, z, c])
    blury[x, y, z, c] = (blurx[x, y - 2, z, c] + blurx[x, y - 1, z, c] * 4 + blurx[x, y, z, c] * 6
                         + blurx[x, y + 1, z, c] * 4 + blurx[x, y + 2, z, c])
    v = hl.clamp(inp[x, y], hl.f32(0.0), hl.f32(1.0))
    zv = v * (hl.f32(1.0) / rs)
    zj = hl.i32(zv)
    zf = zv - zj
    xf = hl.f32(x % S) / S
    yf = hl.f32(y % S) / S
    xi, yi = x / S, y / S
    interpolated = hl.Func("interpolated")
    interpolated[x, y, c] = hl.lerp(
        hl.lerp(hl.lerp(blury[xi, yi, zj, c], blury[xi + 1, yi, zj, c], xf),
                hl.lerp(blury[xi, yi + 1, zj, c], blury[xi + 1, yi + 1, zj, c], xf), yf),
        hl.lerp(hl.lerp(blury[xi, yi, zj + 1, c], blury[xi + 1, yi, zj + 1, c], xf),
                hl.lerp(blury[xi, yi + 1, zj + 1, c], blury[xi + 1, yi + 1, zj + 1, c], xf), yf),
        zf)
    out = hl.Func("bilateral_grid")
    out[x, y] = interpolated[x, y, 0] / interpolated[x, y, 1]
    if auto:
        autoschedule(auto, out, [w, h], [(inp, [w, h])], [(rs, r_sigma)])
    elif callable(schedule):   # the caller schedules (every Func, Var and param by name) and takes over
        return schedule(SimpleNamespace(**locals()))
    elif schedule:
        blurz.compute_at(blurx, y).reorder(c, z, x, y).vectorize(x, 8).unroll(c)
        histogram.compute_at(blurz, y)
        histogram.update().reorder(c, r.x, r.y, x, y).unroll(c)
        blurx.compute_root().reorder(c, x, z, y).parallel(y).vectorize(x, 8).unroll(c)
        blury.compute_at(out, y).store_in(hl.MemoryType.Stack).reorder(c, x, y, z) \
             .reorder_storage(c, z, x, y).vectorize(x, 8).unroll(c)
        out.compute_root().parallel(y, 8).vectorize(x, 8)
    else:
        for f in (histogram, blurz, blurx, blury):
            f.compute_root()
    arr = np.array(img, dtype=np.float32, order="C")
    inp.set(hl.Buffer(arr))                        # (H, W) array -> a W x H buffer
    return Peer(out, hl.Buffer(hl.Float(32), [w, h]), [arr], lambda a: a, strict, target)


def camera_pipe(raw: np.ndarray, m3200: np.ndarray, m7000: np.ndarray, w: int, h: int, color_temp: float = 3700.0,
                gamma: float = 2.0, contrast: float = 50.0, sharpen_strength: float = 1.0, blackLevel: int = 25,
                whiteLevel: int = 1023, strict: bool = False, schedule=True, auto: str | None = None,
                target: str = "host") -> Peer:
    """Halide's apps/camera_pipe at commit abbf7ff9 (HALIDE_COMMIT), followed line by line in
    apps/camera_pipe/camera_pipe_generator.cpp: avg, blur121 and the interleaves (lines 15-35),
    the Demosaic generator's algorithm (48-152), hot-pixel suppression (240-249), deinterleave
    (251-261), colour correction (263-295; matrix.compute_root, 273-274), the tone curve with
    lutResample = 1 as on x86 (297-367; curve.compute_root, 334-336), sharpening (369-404;
    sharpen_strength_x32.compute_root, 373-374) and generate() (406-425), raw read as the app
    reads it (line 412: no boundary condition); the params' defaults are the estimates (lines
    433-438), also the values of the app's Makefile and process.cpp (lines 59-65). Output
    w x h x 3 u8 from raw (H, W) u16.
    schedule=True: the app's CPU schedule, directive for directive (lines 499-564 and the
    Demosaic's, 169-186, which lines 562-564 place): vec = the target's natural vector size
    of u16 (line 517: 16 on AVX2, 32 on AVX-512), strips of 32 rows in parallel (line 513)
    computed two rows at a time, every stage up to the tone curve stored per strip and folded
    to 4 rows (fold_storage), g_b computed with g_r (compute_with, lines 179-181), the input
    prefetched two rows ahead (line 533), the demosaic and colour correction per vector of
    the curve; the output bound to multiples of 2 * vec columns and 32 rows (lines 574-577),
    so w must be a multiple of 2 * vec and h of 32. (Left out: the HVX branches and the trace
    tags, which change nothing on x86.) schedule=False: the look-up tables compute_root as in
    the app, the green planes and curved too, the rest inlined.
    target: hdsl's CPU target name ('host' or 'x86-64-avx2', HALIDE_TARGETS)."""
    hl = _hl()
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")

    def avg(a, b):                                           # lines 15-19
        a = a if isinstance(a, hl.Expr) else hl.Expr(a)
        t = a.type()
        wider = t.with_bits(t.bits() * 2)
        return hl.cast(t, (hl.cast(wider, a) + b + 1) // 2)

    def blur121(a, b, c_):                                   # lines 21-23
        return avg(avg(a, c_), b)

    def interleave_x(a, b):                                  # lines 25-29
        f = hl.Func()
        f[x, y] = hl.select((x % 2) == 0, a[x // 2, y], b[x // 2, y])
        return f

    def interleave_y(a, b):                                  # lines 31-35
        f = hl.Func()
        f[x, y] = hl.select((y % 2) == 0, a[x, y // 2], b[x, y // 2])
        return f

    inp = hl.ImageParam(hl.UInt(16), 2, "input")
    mat32 = hl.ImageParam(hl.Float(32), 2, "matrix_3200")
    mat70 = hl.ImageParam(hl.Float(32), 2, "matrix_7000")
    p_ct = hl.Param(hl.Float(32), "color_temp", color_temp)
    p_gamma = hl.Param(hl.Float(32), "gamma", gamma)
    p_contrast = hl.Param(hl.Float(32), "contrast", contrast)
    p_sharpen = hl.Param(hl.Float(32), "sharpen_strength", sharpen_strength)
    p_black = hl.Param(hl.Int(32), "blackLevel", blackLevel)
    p_white = hl.Param(hl.Int(32), "whiteLevel", whiteLevel)

    shifted = hl.Func("shifted")                             # line 412
    shifted[x, y] = inp[x + 16, y + 12]
    denoised = hl.Func("denoised")                           # lines 240-249
    a = hl.max(hl.max(shifted[x - 2, y], shifted[x + 2, y]), hl.max(shifted[x, y - 2], shifted[x, y + 2]))
    denoised[x, y] = hl.clamp(shifted[x, y], 0, a)
    deinterleaved = hl.Func("deinterleaved")                 # lines 251-261
    deinterleaved[x, y, c] = hl.mux(c, [denoised[2 * x, 2 * y], denoised[2 * x + 1, 2 * y],
                                        denoised[2 * x, 2 * y + 1], denoised[2 * x + 1, 2 * y + 1]])
    g_gr, r_r, b_b, g_gb = (hl.Func(n) for n in ("g_gr", "r_r", "b_b", "g_gb"))      # lines 55-60
    g_gr[x, y] = deinterleaved[x, y, 0]
    r_r[x, y] = deinterleaved[x, y, 1]
    b_b[x, y] = deinterleaved[x, y, 2]
    g_gb[x, y] = deinterleaved[x, y, 3]
    g_r, g_b = hl.Func("g_r"), hl.Func("g_b")                # lines 62-85
    g_r[x, y] = hl.select(hl.absd(g_gr[x + 1, y], g_gr[x, y]) < hl.absd(g_gb[x, y - 1], g_gb[x, y]),
                          avg(g_gr[x + 1, y], g_gr[x, y]), avg(g_gb[x, y - 1], g_gb[x, y]))
    g_b[x, y] = hl.select(hl.absd(g_gb[x - 1, y], g_gb[x, y]) < hl.absd(g_gr[x, y + 1], g_gr[x, y]),
                          avg(g_gb[x - 1, y], g_gb[x, y]), avg(g_gr[x, y + 1], g_gr[x, y]))
    r_gr, b_gr, r_gb, b_gb, r_b, b_r = (hl.Func(n) for n in ("r_gr", "b_gr", "r_gb", "b_gb", "r_b", "b_r"))
    r_gr[x, y] = (g_gr[x, y] - avg(g_r[x, y], g_r[x - 1, y])) + avg(r_r[x - 1, y], r_r[x, y])   # 87-102
    b_gr[x, y] = (g_gr[x, y] - avg(g_b[x, y], g_b[x, y - 1])) + avg(b_b[x, y], b_b[x, y - 1])
    r_gb[x, y] = (g_gb[x, y] - avg(g_r[x, y], g_r[x, y + 1])) + avg(r_r[x, y], r_r[x, y + 1])
    b_gb[x, y] = (g_gb[x, y] - avg(g_b[x, y], g_b[x + 1, y])) + avg(b_b[x, y], b_b[x + 1, y])
    rp_b = (g_b[x, y] - avg(g_r[x, y], g_r[x - 1, y + 1])) + avg(r_r[x, y], r_r[x - 1, y + 1])   # 104-133
    rpd_b = hl.absd(r_r[x, y], r_r[x - 1, y + 1])
    rn_b = (g_b[x, y] - avg(g_r[x - 1, y], g_r[x, y + 1])) + avg(r_r[x - 1, y], r_r[x, y + 1])
    rnd_b = hl.absd(r_r[x - 1, y], r_r[x, y + 1])
    r_b[x, y] = hl.select(rpd_b < rnd_b, rp_b, rn_b)
    bp_r = (g_r[x, y] - avg(g_b[x, y], g_b[x + 1, y - 1])) + avg(b_b[x, y], b_b[x + 1, y - 1])
    bpd_r = hl.absd(b_b[x, y], b_b[x + 1, y - 1])
    bn_r = (g_r[x, y] - avg(g_b[x + 1, y], g_b[x, y - 1])) + avg(b_b[x + 1, y], b_b[x, y - 1])
    bnd_r = hl.absd(b_b[x + 1, y], b_b[x, y - 1])
    b_r[x, y] = hl.select(bpd_r < bnd_r, bp_r, bn_r)
    r = interleave_y(interleave_x(r_gr, r_r), interleave_x(r_b, r_gb))                # 135-141
    g = interleave_y(interleave_x(g_gr, g_r), interleave_x(g_b, g_gb))
    b = interleave_y(interleave_x(b_gr, b_r), interleave_x(b_b, b_gb))
    demosaiced = hl.Func("demosaiced")                       # line 146
    demosaiced[x, y, c] = hl.cast(hl.Int(16), hl.mux(c, [r[x, y], g[x, y], b[x, y]]))
    alpha = (hl.f32(1.0) / p_ct - hl.f32(1.0) / 3200) / (hl.f32(1.0) / 7000 - hl.f32(1.0) / 3200)   # 263-295
    matrix = hl.Func("matrix")
    matrix[x, y] = hl.cast(hl.Int(16), (mat32[x, y] * alpha + mat70[x, y] * (1 - alpha)) * hl.f32(256.0))
    ir, ig, ib = (hl.cast(hl.Int(32), demosaiced[x, y, k]) for k in range(3))
    rows = [matrix[3, k] + matrix[0, k] * ir + matrix[1, k] * ig + matrix[2, k] * ib for k in range(3)]
    corrected = hl.Func("corrected")
    corrected[x, y, c] = hl.mux(c, [hl.cast(hl.Int(16), v // 256) for v in rows])
    min_raw, max_raw = 0 + p_black, p_white                  # lines 297-367
    inv_range = hl.f32(1.0) / (max_raw - min_raw)
    cb = hl.f32(2.0) - hl.pow(hl.f32(2.0), p_contrast / hl.f32(100.0))
    ca = hl.f32(2.0) - hl.f32(2.0) * cb
    xf = hl.clamp(hl.cast(hl.Float(32), x - min_raw) * inv_range, hl.f32(0.0), hl.f32(1.0))
    gg = hl.pow(xf, hl.f32(1.0) / p_gamma)
    z = hl.select(gg > hl.f32(0.5), hl.f32(1.0) - (ca * (hl.f32(1.0) - gg) * (hl.f32(1.0) - gg) + cb * (hl.f32(1.0) - gg)),
                  ca * gg * gg + cb * gg)
    val = hl.cast(hl.UInt(8), hl.clamp(z * hl.f32(255.0) + hl.f32(0.5), hl.f32(0.0), hl.f32(255.0)))
    curve = hl.Func("curve")
    curve[x] = hl.select(x <= min_raw, hl.u8(0), hl.select(x > max_raw, hl.u8(255), val))
    curved = hl.Func("curved")
    curved[x, y, c] = curve[hl.clamp(corrected[x, y, c], 0, 1023)]
    s32 = hl.Func("sharpen_strength_x32")                    # lines 369-404
    s32[()] = hl.u8_sat(p_sharpen * 32)
    unsharp_y, unsharp, mask, sharpened = (hl.Func(n) for n in ("unsharp_y", "unsharp", "mask", "processed"))
    unsharp_y[x, y, c] = blur121(curved[x, y - 1, c], curved[x, y, c], curved[x, y + 1, c])
    unsharp[x, y, c] = blur121(unsharp_y[x - 1, y, c], unsharp_y[x, y, c], unsharp_y[x + 1, y, c])
    mask[x, y, c] = hl.cast(hl.Int(16), curved[x, y, c]) - hl.cast(hl.Int(16), unsharp[x, y, c])
    sharpened[x, y, c] = hl.u8_sat(curved[x, y, c] + (mask[x, y, c] * s32[()]) // 32)

    if auto:
        rh, rw = raw.shape
        autoschedule(auto, sharpened, [w, h, 3], [(inp, [rw, rh]), (mat32, [4, 3]), (mat70, [4, 3])],
                     [(p_ct, color_temp), (p_gamma, gamma), (p_contrast, contrast),
                      (p_sharpen, sharpen_strength), (p_black, blackLevel), (p_white, whiteLevel)])
    else:
        for f in (matrix, curve, s32):                       # lines 274, 336, 374
            f.compute_root()
    if auto:
        pass
    elif callable(schedule):   # the caller schedules (every Func, Var and param by name) and takes over
        return schedule(SimpleNamespace(**locals()))
    elif schedule:             # the app's CPU schedule (lines 499-564; the Demosaic's, 169-186)
        ht = halide_target(target)
        strip_size = 32                                      # lines 512-515
        vec = ht.natural_vector_size(hl.UInt(16))            # line 517
        yi, yo, yii, xi = hl.Var("yi"), hl.Var("yo"), hl.Var("yii"), hl.Var("xi")
        RoundUp = hl.TailStrategy.RoundUp
        sharpened.compute_root().reorder(c, x, y).split(y, yi, yii, 2, RoundUp) \
            .split(yi, yo, yi, strip_size // 2).vectorize(x, 2 * vec, RoundUp).unroll(c).parallel(yo)  # 521-528
        denoised.compute_at(sharpened, yi).store_at(sharpened, yo).prefetch(inp, y, y, 2) \
            .fold_storage(y, 4).tile(x, y, x, y, xi, yi, 2 * vec, 2).vectorize(xi).unroll(yi)        # 530-537
        deinterleaved.compute_at(sharpened, yi).store_at(sharpened, yo).fold_storage(y, 4) \
            .reorder(c, x, y).vectorize(x, 2 * vec, RoundUp).unroll(c)                              # 539-544
        curved.compute_at(sharpened, yi).store_at(sharpened, yo).reorder(c, x, y) \
            .tile(x, y, x, y, xi, yi, 2 * vec, 2, RoundUp).vectorize(xi).unroll(yi).unroll(c)         # 546-552
        corrected.compute_at(curved, x).reorder(c, x, y).vectorize(x).unroll(c)                    # 554-558
        for f in (g_r, g_b):                                 # 173-178 at (sharpened, yi) / (sharpened, yo)
            f.compute_at(sharpened, yi).store_at(sharpened, yo).vectorize(x, 2 * vec, RoundUp).fold_storage(y, 4)
        g_b.compute_with(g_r, x, [(x, hl.LoopAlignStrategy.AlignStart), (y, hl.LoopAlignStrategy.AlignStart)])
        demosaiced.compute_at(curved, x).vectorize(x).unroll(y).reorder(c, x, y).unroll(c)         # 182-186
        sharpened.bound(c, 0, 3).bound(x, 0, (w // (2 * vec)) * (2 * vec)) \
            .bound(y, 0, (h // strip_size) * strip_size)                                           # 574-577
        if w % (2 * vec) or h % strip_size:
            raise ValueError(f"the app's schedule makes outputs of a multiple of {2 * vec} x {strip_size}, "
                             f"not {w} x {h}")
    else:
        for f in (g_r, g_b, curved):
            f.compute_root()
    keep = [np.array(raw, order="C"), np.array(m3200, dtype=np.float32, order="C"),
            np.array(m7000, dtype=np.float32, order="C")]
    if auto:
        # Adams2019's schedule over-computes tiles past the output's top edge and reads raw
        # there (at y = -6: the app reads raw with no boundary condition, line 412); the
        # app's own input (process.cpp) is a whole sensor image, so its reads land on
        # pixels. Here raw gets a margin of edge pixels outside [0, w) x [0, h), which
        # only tiles' discarded points read.
        pad = 32
        keep[0] = np.pad(keep[0], pad, mode="edge")
        raw_buf = hl.Buffer(keep[0])
        raw_buf.set_min([-pad, -pad])
        inp.set(raw_buf)
    else:
        inp.set(hl.Buffer(keep[0]))
    mat32.set(hl.Buffer(keep[1]))
    mat70.set(hl.Buffer(keep[2]))
    return Peer(sharpened, hl.Buffer(hl.UInt(8), [w, h, 3]), keep, lambda a: a.transpose(1, 2, 0), strict, target)


def unsharp(img: np.ndarray, sigma: float = 1.5, amount: float = 1.0, strict: bool = False,
            auto: str | None = None) -> Peer:
    """examples/unsharp.hl (stdlib's separable Gaussian, radius ceil(3 sigma), weights
    exp(-k^2 / 2 sigma^2) summed then normalized by their sum squared) with its schedule.
    img: (H, W) u8."""
    hl = _hl()
    h, w = img.shape
    x, y, k, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("k"), hl.Var("xi"), hl.Var("yi")
    inp = hl.ImageParam(hl.UInt(8), 2, "img")
    p_sigma = hl.Param(hl.Float(32), "sigma", sigma)
    p_amount = hl.Param(hl.Float(32), "amount", amount)
    c = hl.BoundaryConditions.repeat_edge(inp)
    radius = hl.i32(hl.ceil(hl.f32(3.0) * p_sigma))
    r = hl.RDom([(-radius, 2 * radius + 1)])
    weight = hl.Func("gauss_w")
    weight[k] = hl.exp(-hl.f32(k * k) / (hl.f32(2.0) * p_sigma * p_sigma))
    norm = hl.sum(weight[r.x])
    gx, blur, sharp, out = hl.Func("gauss_x"), hl.Func("unsharp_blur"), hl.Func("sharp"), hl.Func("out")
    gx[x, y] = hl.sum(weight[r.x] * hl.f32(c[x + r.x, y]))
    blur[x, y] = hl.sum(weight[r.x] * gx[x, y + r.x]) / (norm * norm)
    sharp[x, y] = hl.f32(c[x, y]) + p_amount * (hl.f32(c[x, y]) - blur[x, y])
    out[x, y] = hl.u8(hl.clamp(hl.round(sharp[x, y]), hl.f32(0.0), hl.f32(255.0)))
    if auto:
        autoschedule(auto, out, [w, h], [(inp, [w, h])], [(p_sigma, sigma), (p_amount, amount)])
    else:
        out.tile(x, y, xi, yi, 128, 64).vectorize(xi, 8).parallel(y)
        weight.compute_root()
        blur.compute_at(out, x).vectorize(x, 8)
        gx.compute_at(out, x).vectorize(x, 8)
    arr = np.array(img, order="C")          # (a writable copy: Halide refuses read-only arrays)
    inp.set(hl.Buffer(arr))
    return Peer(out, hl.Buffer(hl.UInt(8), [w, h]), [arr], lambda a: a, strict)


def interpolate(rgba: np.ndarray, L: int = 10, strict: bool = False, auto: str | None = None,
                schedule=True, target: str = "host") -> Peer:
    """Halide's apps/interpolate at commit abbf7ff9 (HALIDE_COMMIT), followed line by line in
    apps/interpolate/interpolate_generator.cpp: the algorithm of lines 20-72 (push-pull over
    L = levels = 10 levels, line 15; before level 4 the previous level is clamped to
    [0, width / (1 << (l - 1))] = [0, width / 8], lines 39-47). schedule=True: the app's CPU
    schedule, lines 146-198, directive for directive: vec = the target's natural vector size
    of f32 (line 149: 8 on AVX2, 16 on AVX-512); downsampled levels 1 .. L - 2 at the root in
    parallel strips of 8 rows (155-161); downsampled[0] cloned into downx[1] and computed per
    row of downsampled[1]'s strips (169-176); the output in parallel strips of 32 rows, every
    interpolated level computed per row of the strip and stored per strip (178-196), the
    output bound to the input's size and 3 channels (179-181). schedule=False: every level at
    the root in parallel rows of 8-wide vectors. rgba: (H, W, 4) f32.
    strict: compile with Halide's StrictFloat (tests compare bit for bit).
    target: hdsl's CPU target name ('host' or 'x86-64-avx2', HALIDE_TARGETS)."""
    hl = _hl()
    h, w, _ = rgba.shape
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    inp = hl.ImageParam(hl.Float(32), 3, "img")
    inp.dim(2).set_bounds(0, 4)                                               # line 24
    f = hl.f32
    clamped = hl.BoundaryConditions.repeat_edge(inp)                         # line 32
    ds = [hl.Func(f"downsampled_{l}") for l in range(L)]
    downx = [hl.Func(f"downx_{l}") for l in range(L)]
    ds[0][x, y, c] = hl.select(c < 3, clamped[x, y, c] * clamped[x, y, 3], clamped[x, y, 3])   # line 34
    for l in range(1, L):                                                     # lines 36-57
        prev = ds[l - 1]
        if l == 4:
            mid = hl.Func("mid")
            mid[x, y, c] = prev[hl.clamp(x, 0, inp.width() // (1 << (l - 1))), hl.clamp(y, 0, inp.height() // (1 << (l - 1))), c]
            prev = mid
        downx[l][x, y, c] = (prev[x * 2 - 1, y, c] + f(2.0) * prev[x * 2, y, c] + prev[x * 2 + 1, y, c]) * f(0.25)
        ds[l][x, y, c] = (downx[l][x, y * 2 - 1, c] + f(2.0) * downx[l][x, y * 2, c] + downx[l][x, y * 2 + 1, c]) * f(0.25)
    it = [hl.Func(f"interpolated_{l}") for l in range(L)]
    upsampledx = {}
    it[L - 1][x, y, c] = ds[L - 1][x, y, c]                                   # lines 58-69
    for l in range(L - 2, -1, -1):
        ux, uy = hl.Func(f"upsampledx_{l}"), hl.Func(f"upsampled_{l}")
        upsampledx[l] = ux
        ux[x, y, c] = (it[l + 1][x // 2, y, c] + it[l + 1][(x + 1) // 2, y, c]) / f(2.0)
        uy[x, y, c] = (ux[x, y // 2, c] + ux[x, (y + 1) // 2, c]) / f(2.0)
        it[l][x, y, c] = ds[l][x, y, c] + (f(1.0) - ds[l][x, y, 3]) * uy[x, y, c]
    out = hl.Func("normalize")                                                # lines 71-72
    out[x, y, c] = it[0][x, y, c] / it[0][x, y, 3]
    if auto:
        autoschedule(auto, out, [w, h, 3], [(inp, [w, h, 4])])
    elif callable(schedule):   # the caller schedules (every Func, Var and param by name) and takes over
        return schedule(SimpleNamespace(**locals()))
    elif schedule:             # the app's CPU schedule, lines 146-198
        vec = halide_target(target).natural_vector_size(hl.Float(32))        # line 149
        xo, xi, yo, yi = hl.Var("xo"), hl.Var("xi"), hl.Var("yo"), hl.Var("yi")
        for l in range(1, L - 1):                                             # lines 150-162
            ds[l].compute_root().never_partition([x]).reorder(x, c, y).split(y, yo, yi, 8).parallel(yo) \
                .vectorize(x, vec)
        ds[0].clone_in(downx[1]).store_at(ds[1], yo).compute_at(ds[1], yi).reorder(c, x, y).unroll(c) \
            .vectorize(x, vec).never_partition([y])                             # lines 169-176
        out.bound(x, 0, inp.width()).bound(y, 0, inp.height()).bound(c, 0, 3).never_partition([y]) \
            .split(x, xo, xi, vec).split(y, yo, yi, 32).reorder(xi, c, xo, yi, yo).unroll(c) \
            .vectorize(xi).parallel(yo)                                       # lines 178-188
        for l in range(1, L):                                                 # lines 190-196
            it[l].store_at(out, yo).compute_at(out, yi).never_partition_all().vectorize(x, vec)
    else:
        for l in range(1, L):
            ds[l].compute_root().parallel(y).vectorize(x, 8)
            if l < L - 1:
                it[l].compute_root().parallel(y).vectorize(x, 8)
        out.reorder(c, x, y).bound(c, 0, 3).parallel(y).vectorize(x, 8)
    planar = np.ascontiguousarray(rgba.transpose(2, 0, 1))
    inp.set(hl.Buffer(planar))
    return Peer(out, hl.Buffer(hl.Float(32), [w, h, 3]), [planar], lambda a: a.transpose(1, 2, 0), strict, target)
