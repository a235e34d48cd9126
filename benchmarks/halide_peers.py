"""The Halide side of the benchmarks, in Halide's Python API: the same algorithms and the same
schedules as the .hl cases. Each builder returns (run, output), where run() realizes into a
preallocated buffer (JIT-compiled beforehand) and output() gives the result as a NumPy
array in the user's (H, W[, C]) layout."""
from __future__ import annotations

import time

import numpy as np


def _hl():
    import halide as hl
    return hl


class Peer:
    def __init__(self, func, out_buf, inputs, to_numpy, strict: bool = False):
        hl = _hl()
        target = hl.get_jit_target_from_environment()
        if strict:      # no FMA contraction: the same bits as hdsl's default floating point
            target = target.with_feature(hl.TargetFeature.StrictFloat)
        t0 = time.perf_counter()
        func.compile_jit(target)
        self.compile_s = time.perf_counter() - t0
        self.func, self.out_buf, self.inputs, self.to_numpy = func, out_buf, inputs, to_numpy

    def run(self):
        self.func.realize(self.out_buf)

    def output(self) -> np.ndarray:
        return self.to_numpy(np.asarray(self.out_buf))


def blur(img: np.ndarray) -> Peer:
    """3x3 box blur of u16, repeated edges, the 2012 paper's tiled schedule (examples/blur.hl)."""
    hl = _hl()
    h, w = img.shape
    inp = hl.ImageParam(hl.UInt(16), 2, "img")
    x, y, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi")
    c = hl.BoundaryConditions.repeat_edge(inp)
    bx, out = hl.Func("blur_x"), hl.Func("out")
    bx[x, y] = (c[x - 1, y] + c[x, y] + c[x + 1, y]) / 3
    out[x, y] = (bx[x, y - 1] + bx[x, y] + bx[x, y + 1]) / 3
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


def local_laplacian(img_planar: np.ndarray, levels: int = 8, alpha: float = 1.0, beta: float = 1.0) -> Peer:
    """Halide's apps/local_laplacian structure and CPU schedule (J = 8). img_planar: (3, H, W) u16."""
    hl = _hl()
    J = 8
    _, h, w = img_planar.shape
    x, y, c, k, yo = [hl.Var(n) for n in ("x", "y", "c", "k", "yo")]
    inp = hl.ImageParam(hl.UInt(16), 3, "img")
    L = hl.Param(hl.Int(32), "levels", levels)
    A, B = hl.Param(hl.Float(32), "alpha", alpha), hl.Param(hl.Float(32), "beta", beta)
    f = hl.f32

    def down(g):
        dx, dy = hl.Func("dx"), hl.Func("dy")
        dx[x, y, hl._] = (g[2 * x - 1, y, hl._] + f(3.0) * (g[2 * x, y, hl._] + g[2 * x + 1, y, hl._])
                          + g[2 * x + 2, y, hl._]) / f(8.0)
        dy[x, y, hl._] = (dx[x, 2 * y - 1, hl._] + f(3.0) * (dx[x, 2 * y, hl._] + dx[x, 2 * y + 1, hl._])
                          + dx[x, 2 * y + 2, hl._]) / f(8.0)
        return dy

    def up(g):
        ux, uy = hl.Func("ux"), hl.Func("uy")
        ux[x, y, hl._] = hl.lerp(g[(x + 1) // 2, y, hl._], g[(x - 1) // 2, y, hl._], f((x % 2) * 2 + 1) / f(4.0))
        uy[x, y, hl._] = hl.lerp(ux[x, (y + 1) // 2, hl._], ux[x, (y - 1) // 2, hl._], f((y % 2) * 2 + 1) / f(4.0))
        return uy

    remap = hl.Func("remap")
    fx = f(x) / f(256.0)
    remap[x] = A * fx * hl.exp(-fx * fx / f(2.0))
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    floating = hl.Func("floating")
    floating[x, y, c] = f(clamped[x, y, c]) / f(65535.0)
    gray = hl.Func("gray")
    gray[x, y] = f(0.299) * floating[x, y, 0] + f(0.587) * floating[x, y, 1] + f(0.114) * floating[x, y, 2]
    gP = [hl.Func(f"gP{j}") for j in range(J)]
    level = f(k) / f(L - 1)
    idx = hl.clamp(hl.i32(gray[x, y] * f(L - 1) * f(256.0)), 0, (L - 1) * 256)
    gP[0][x, y, k] = B * (gray[x, y] - level) + level + remap[idx - 256 * k]
    for j in range(1, J):
        gP[j][x, y, k] = down(gP[j - 1])[x, y, k]
    lP = [hl.Func(f"lP{j}") for j in range(J)]
    lP[J - 1][x, y, k] = gP[J - 1][x, y, k]
    for j in range(J - 2, -1, -1):
        lP[j][x, y, k] = gP[j][x, y, k] - up(gP[j + 1])[x, y, k]
    iG = [hl.Func(f"iG{j}") for j in range(J)]
    iG[0][x, y] = gray[x, y]
    for j in range(1, J):
        iG[j][x, y] = down(iG[j - 1])[x, y]
    oL = [hl.Func(f"oL{j}") for j in range(J)]
    for j in range(J):
        lv = iG[j][x, y] * f(L - 1)
        li = hl.clamp(hl.i32(lv), 0, L - 2)
        lf = lv - f(li)
        oL[j][x, y] = hl.lerp(lP[j][x, y, li], lP[j][x, y, li + 1], lf)
    oG = [hl.Func(f"oG{j}") for j in range(J)]
    oG[J - 1][x, y] = oL[J - 1][x, y]
    for j in range(J - 2, -1, -1):
        oG[j][x, y] = up(oG[j + 1])[x, y] + oL[j][x, y]
    color = hl.Func("color")
    color[x, y, c] = oG[0][x, y] * (floating[x, y, c] + f(0.01)) / (gray[x, y] + f(0.01))
    out = hl.Func("out")
    out[x, y, c] = hl.u16(hl.clamp(color[x, y, c], f(0.0), f(1.0)) * f(65535.0))
    remap.compute_root()
    out.reorder(c, x, y).split(y, yo, y, 64).parallel(yo).vectorize(x, 8)
    gray.compute_root().parallel(y, 32).vectorize(x, 8)
    for j in range(1, 5):
        iG[j].compute_root().parallel(y, 32).vectorize(x, 8)
        gP[j].compute_root().reorder_storage(x, k, y).reorder(k, y).parallel(y, 8).vectorize(x, 8)
        oG[j].store_at(out, yo).compute_at(out, y).fold_storage(y, 4).vectorize(x, 8)
    oG[0].compute_at(out, y).vectorize(x, 8)
    for j in range(5, J):
        iG[j].compute_root()
        gP[j].compute_root().parallel(k)
        oG[j].compute_root()
    planar = np.ascontiguousarray(img_planar)      # NumPy (C, H, W) is Halide [x, y, c]
    inp.set(hl.Buffer(planar))                      # (the Buffer does not keep the array alive: Peer does)
    return Peer(out, hl.Buffer(hl.UInt(16), [w, h, 3]), [planar], lambda a: a.transpose(1, 2, 0))


def interpolate(rgba: np.ndarray, L: int = 10, strict: bool = False) -> Peer:
    """Halide's apps/interpolate (push-pull over L levels) with examples/interpolate.hl's schedule.
    rgba: (H, W, 4) f32. strict: compile with Halide's StrictFloat (tests compare bit for bit)."""
    hl = _hl()
    h, w, _ = rgba.shape
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    inp = hl.ImageParam(hl.Float(32), 3, "img")
    f = hl.f32
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    ds = [hl.Func(f"ds{l}") for l in range(L)]
    ds[0][x, y, c] = hl.select(c < 3, clamped[x, y, c] * clamped[x, y, 3], clamped[x, y, 3])
    for l in range(1, L):
        prev = ds[l - 1]
        if l == 4:
            mid = hl.Func("mid")
            mid[x, y, c] = prev[hl.clamp(x, 0, inp.width() // (1 << l)), hl.clamp(y, 0, inp.height() // (1 << l)), c]
            prev = mid
        dx = hl.Func(f"dx{l}")
        dx[x, y, c] = (prev[x * 2 - 1, y, c] + f(2.0) * prev[x * 2, y, c] + prev[x * 2 + 1, y, c]) * f(0.25)
        ds[l][x, y, c] = (dx[x, y * 2 - 1, c] + f(2.0) * dx[x, y * 2, c] + dx[x, y * 2 + 1, c]) * f(0.25)
    it = [hl.Func(f"it{l}") for l in range(L)]
    it[L - 1][x, y, c] = ds[L - 1][x, y, c]
    for l in range(L - 2, -1, -1):
        ux, uy = hl.Func(f"ux{l}"), hl.Func(f"uy{l}")
        ux[x, y, c] = (it[l + 1][x // 2, y, c] + it[l + 1][(x + 1) // 2, y, c]) / f(2.0)
        uy[x, y, c] = (ux[x, y // 2, c] + ux[x, (y + 1) // 2, c]) / f(2.0)
        it[l][x, y, c] = ds[l][x, y, c] + (f(1.0) - ds[l][x, y, 3]) * uy[x, y, c]
    out = hl.Func("out")
    out[x, y, c] = it[0][x, y, c] / it[0][x, y, 3]
    for l in range(1, L):
        ds[l].compute_root().parallel(y).vectorize(x, 8)
        if l < L - 1:
            it[l].compute_root().parallel(y).vectorize(x, 8)
    out.reorder(c, x, y).bound(c, 0, 3).parallel(y).vectorize(x, 8)
    planar = np.ascontiguousarray(rgba.transpose(2, 0, 1))
    inp.set(hl.Buffer(planar))
    return Peer(out, hl.Buffer(hl.Float(32), [w, h, 3]), [planar], lambda a: a.transpose(1, 2, 0), strict)
