"""`schedule auto` / `--schedule auto` and `hdsl schedule`: the automatic schedule of every
example gives exactly the reference evaluator's values; its rules do what
hdsl/schedule/auto.py says on pipelines whose right answer is known by hand (the 2012
paper's tiled blur, a histogram, a look-up table); its printed text records to the same
directives and the same values."""
from __future__ import annotations

import re

import numpy as np
import pytest

import hdsl
from hdsl.cli import main
from hdsl.diagnostics import HdslError
from hdsl.schedule.auto import auto_genes, auto_text, rules_for, schedule_text

from .auto_inputs import EX, EXAMPLE_INPUTS, example_args

# the examples whose automatic schedule compiles in a few seconds (CI); the rest are `slow`
QUICK = ["blur", "unsharp", "harris", "hist_equalize", "bilateral_grid", "level_set"]


def _equal(a, b) -> bool:
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    return all(x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y, equal_nan=True)
               for x, y in zip(a, b))


def _directives(ir, sched) -> dict:
    """Each Func's recorded directives (stage, name, arguments as written, tail)."""
    from hdsl.schedule.auto import _arg_text
    return {ir.names[fid]: [(d.stage, d.name, [_arg_text(ir, a) for a in d.args], d.tail) for d in ds]
            for fid, ds in sched.directives.items()}


def _run(p, c, name, seed=0):
    size, args = example_args(p, name, seed)
    if size is None:
        return c(**args), p(**args)
    return c.realize(size, **args), p.realize(size, **args)


def _check_example(name):
    p = hdsl.load(EX / f"{name}.hl")
    c = p.compile("host", schedule="auto")
    got, want = _run(p, c, name)
    assert _equal(got, want), f"{name}: the automatic schedule's output differs from the evaluator's"


@pytest.mark.parametrize("name", QUICK)
def test_auto_schedule_equals_the_evaluator(name):
    _check_example(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(EXAMPLE_INPUTS) - set(QUICK)))
def test_auto_schedule_equals_the_evaluator_slow(name):
    _check_example(name)


def test_the_tiled_blur_of_the_2012_paper():
    """blur_x is read three times per point of out (a stencil): the 2018 rules checkpoint it,
    and being read by out alone, it is computed per tile of out (Ragan-Kelley et al. 2012,
    Fig. 1's tiled schedule), vectorized; out's tiles run in parallel. The boundary
    condition (a clamped load) is left to the defaults: inlined."""
    p = hdsl.load(EX / "blur.hl")
    genes = auto_genes(p.ir)
    assert genes["blur_x"][0].startswith("blur_x.compute_at(out, x).vectorize(x, ")
    assert re.fullmatch(r"out\.tile\(x, y, x_i, y_i, \d+, \d+\)\.vectorize\(x_i, \d+\)\.parallel\(y\)",
                        genes["out"][0])
    assert "clamped" not in genes


def test_reductions_and_tables_are_computed_at_the_root():
    """hist_equalize's histogram scatters (an update): checkpointed at the root. unsharp's
    Gaussian weights gauss_w(r.x) are read at the same 2R + 1 points by every pixel (a table
    of exponentials): computed once, at the root; the pointwise `sharp` is inlined."""
    p = hdsl.load(EX / "hist_equalize.hl")
    text = auto_text(p.ir)
    # (the stdlib's equalize: eq_hist a histogram, eq_cdf its running sum; `minimum`, an
    # inline reduction the compiler made, has no name of its own: the defaults schedule it)
    assert "e.eq_hist.compute_root()" in text and "e.eq_cdf.compute_root()" in text
    assert "minimum" not in text
    u = hdsl.load(EX / "unsharp.hl")
    genes = auto_genes(u.ir)
    assert genes["sharp.unsharp_blur.gauss_w"] == ["sharp.unsharp_blur.gauss_w.compute_root()"]
    assert genes["sharp"] == ["sharp.compute_inline()"]


def test_estimates_change_the_plan(tmp_path):
    """Without estimates the outputs are planned at 1536x1024; `estimate` in a `schedule auto`
    block gives the sizes: a 32x32 output is too small to split into parallel tasks (the
    rule: at least 64x64 points), a large one is not."""
    src = (EX / "unsharp.hl").read_text()
    small = hdsl.loads(src + "\nschedule auto {\n    out.estimate(x, 0, 32).estimate(y, 0, 32)\n}\n",
                       str(EX / "unsharp.hl"))
    big = hdsl.loads(src + "\nschedule auto {\n    out.estimate(x, 0, 4000).estimate(y, 0, 3000)\n}\n",
                     str(EX / "unsharp.hl"))
    assert "parallel" not in auto_text(small.ir)
    assert "out.estimate(x, 0, 32)" in auto_text(small.ir)
    assert "parallel" in auto_text(big.ir)
    # and the block is what --schedule auto runs (no --schedule: the default block)
    c = small.compile("host", schedule="auto")
    img = np.random.default_rng(1).integers(0, 256, (19, 23)).astype(np.uint8)
    assert _equal(c(img=img), small(img=img))


def test_an_auto_block_holds_only_estimates():
    src = (EX / "blur.hl").read_text() + "\nschedule auto {\n    out.parallel(y)\n}\n"
    with pytest.raises(HdslError) as e:
        hdsl.loads(src, "blur.hl")
    msg = e.value.render()
    n = src.count("\n", 0, src.index("out.parallel(y)")) + 1
    assert f"blur.hl:{n}:5: error: 'schedule auto' holds only estimate(...) directives, not 'parallel'" in msg
    assert "hdsl schedule FILE --schedule auto" in msg


def test_gpu_targets_are_a_hook_not_a_silent_cpu_schedule():
    # (the GPU targets' rules: hdsl/schedule/auto_gpu.py, tests/gpu/test_auto_gpu.py,
    # tests/opengl/test_auto_opengl.py)
    assert rules_for("cuda") == rules_for("cuda-emulate") == "cuda"
    assert rules_for("opengl") == "opengl"
    with pytest.raises(HdslError, match="no rules for target 'interp'"):
        rules_for("interp")
    assert rules_for("x86-64-avx512-fast_math") == "cpu"


@pytest.mark.parametrize("name", ["blur", "unsharp", "bilateral_grid"])
def test_printed_schedule_round_trips(name, tmp_path, capsys):
    """`hdsl schedule FILE` prints a block; pasted into the file it records to the same
    directives (printed again, the same text) and computes the same values."""
    assert main(["schedule", str(EX / f"{name}.hl"), "--name", "pasted"]) == 0
    block = capsys.readouterr().out
    assert block.splitlines()[1] == "schedule pasted {"
    path = tmp_path / f"{name}.hl"
    # (the file's `use` of a sibling file resolves next to the copy)
    for other in EX.glob("*.hl"):
        (tmp_path / other.name).write_text(other.read_text())
    path.write_text((EX / f"{name}.hl").read_text() + "\n" + block)
    p = hdsl.load(path)
    pasted = p.ir.schedules["pasted"]
    from hdsl.lower.lower import choose_schedule
    auto = choose_schedule(p.ir, "auto")
    assert _directives(p.ir, pasted) == _directives(p.ir, auto) and _directives(p.ir, auto)
    # printed from its recorded directives and recorded again: the same directives
    again = p.ir.record_text(schedule_text(p.ir, pasted), "again")
    assert _directives(p.ir, again) == _directives(p.ir, pasted)
    a = p.compile("host", schedule="pasted")
    got, want = _run(p, a, name, seed=3)
    assert _equal(got, want)


def test_printing_a_block_of_the_file(capsys):
    """--schedule NAME prints that block's directives (its `for` loops unrolled)."""
    assert main(["schedule", str(EX / "interpolate.hl"), "--schedule", "default"]) == 0
    out = capsys.readouterr().out
    # examples/interpolate.hl's default block (the app's CPU schedule) sets every level by `for l in 1..L - 1`
    loop = "compute_root().reorder(x, c, y).split(y, yo, yi, 8).parallel(yo).vectorize(x, 16)\n"
    assert f"    ds[1].{loop}" in out and f"    ds[8].{loop}" in out
    assert "    it[8].store_at(out, yo).compute_at(out, yi).vectorize(x, 16)\n" in out
    assert "    for " not in out


def test_run_with_schedule_auto_from_the_command_line(tmp_path):
    img = np.random.default_rng(2).integers(0, 65536, (21, 34)).astype(np.uint16)
    np.save(tmp_path / "img.npy", img)
    assert main(["run", str(EX / "blur.hl"), "--schedule", "auto", "--input", f"img={tmp_path / 'img.npy'}",
                 "--output", str(tmp_path / "out.npy")]) == 0
    p = hdsl.load(EX / "blur.hl")
    assert np.array_equal(np.load(tmp_path / "out.npy"), p(img=img))


# a small pyramid: two levels down by 2, collapsed back up (x / 2) with a level picked by the
# data among 4 planes (k), as interpolate and local_laplacian do it
PYRAMID = """
pipeline pyr
use boundary
input  img: f32[2]
output out: f32[2]
algorithm {
    var x, y, k
    c = repeat_edge(img)
    planes(x, y, k) = c(x, y) * f32(k + 1) + 0.25f * f32(k)
    d1(x, y) = (c(2 * x, y) + c(2 * x + 1, y) + c(2 * x, y + 1) + c(2 * x + 1, y + 1)) * 0.25f
    d2(x, y) = (d1(2 * x, y) + d1(2 * x + 1, y) + d1(2 * x, y + 1) + d1(2 * x + 1, y + 1)) * 0.25f
    u1(x, y) = d1(x, y) + 0.5f * (d2(x / 2, y / 2) + d2((x + 1) / 2, (y + 1) / 2))
    pick(x, y) = planes(x, y, clamp(i32(c(x, y) * 4.0f), 0, 3))
    out(x, y) = pick(x, y) + 0.5f * (u1(x / 2, y / 2) + u1((x + 1) / 2, (y + 1) / 2))
}
"""


def test_a_level_picked_by_the_data_among_few_planes_is_inlined():
    """planes(x, y, k) is read at k = a computed index, but k spans 4 planes (at most SMALL):
    a choice among planes at the reader's own (x, y), so it is inlined like a pointwise read
    (local_laplacian's lp[j] read at the input's gray level: computed at the root, its 8
    full-size planes made the automatic schedule 1.8x slower than the hand-written one)."""
    p = hdsl.loads(PYRAMID, "pyr.hl")
    genes = auto_genes(p.ir)
    assert genes["planes"] == ["planes.compute_inline()"]
    ll = auto_genes(hdsl.load(EX / "local_laplacian.hl").ir)
    assert all(ll[f"lp[{j}]"] == [f"lp[{j}].compute_inline()"] for j in range(7))


def test_a_pyramid_level_reading_a_coarser_level_is_computed_at_the_root():
    """u1 reads d2 at (x / 2, y / 2), and out reads u1 so: a level of a pyramid collapsed
    upwards. Computed per tile of out, each tile recomputes the coarser levels' upsampling;
    measured on interpolate (it[1..5]) and local_laplacian (og[1..5]) at the root it is
    1.4-1.9x faster, so it stays at the root. camera_pipe's demosaic producers, read at
    x / 2 but themselves reading only their own resolution, stay per step of the output's
    strips (b_b, a half-resolution plane; b_gb, at the same resolution, is now inlined: it is
    read in one arm of a parity select, see `test_select_arms_on_a_channel_or_a_parity...`)."""
    p = hdsl.loads(PYRAMID, "pyr.hl")
    genes = auto_genes(p.ir)
    assert genes["u1"][0].startswith("u1.compute_root()")
    it = auto_genes(hdsl.load(EX / "interpolate.hl").ir)
    assert all(it[f"it[{j}]"][0].startswith(f"it[{j}].compute_root()") for j in range(1, 9))
    cam = auto_genes(hdsl.load(EX / "camera_pipe.hl").ir)
    assert cam["b_b"][0].startswith("b_b.compute_at(processed, y_i).store_at(processed, y)")


@pytest.mark.parametrize("w,h", [(37, 29), (64, 48)])
def test_the_pyramid_rules_equal_the_evaluator(w, h):
    p = hdsl.loads(PYRAMID, "pyr.hl")
    img = np.random.default_rng(w).random((h, w)).astype(np.float32)
    c = p.compile("host", schedule="auto")
    assert _equal(c(img=img), p(img=img))


def test_an_updates_channels_run_inside_its_reduction():
    """bilateral_grid's histogram(x, y, zi, c) += ... over an 8x8 rdom r: by default its loops
    are c outermost, then y, x, and r innermost, so each of the two channels sweeps the image
    and the parallel loop starts once per channel. The rule puts the channel-like pure dim c
    (2 wide) innermost, the rdom inside the large pure dims, and y in parallel: the order of
    Halide's hand-written schedule (bilateral_grid_generator.cpp, line 132), which hdsl's
    checks accept for an update whose pure dims are written at pure positions."""
    genes = auto_genes(hdsl.load(EX / "bilateral_grid.hl").ir)
    assert "histogram.update(0).reorder(c, r.x, r.y, x, y).parallel(y)" in genes["histogram"]


HALFRES = """
pipeline halfres
use boundary

input  raw: u16[2]
output out: u16[2]

algorithm {
    var x, y
    shifted(x, y) = repeat_edge(raw)(x, y)
    den(x, y) = min(shifted(x, y), max(shifted(x - 2, y), shifted(x + 2, y), shifted(x, y - 2), shifted(x, y + 2)))
    plane(x, y) = den(2 * x, 2 * y) / 2 + den(2 * x + 1, 2 * y + 1) / 2
    up(x, y) = plane(x / 2, y / 2) / 2 + plane(x / 2 + 1, y / 2 + 1) / 2
    out(x, y) = up(x, y - 1) / 4 + up(x, y) / 2 + up(x, y + 1) / 4
}
"""


def test_half_resolution_planes_slide_down_strips_two_rows_a_step():
    """plane is a half-resolution plane (den read at 2 * x, 2 * y: camera_pipe's deinterleave)
    computed inside the full-resolution output's tiles, read back at x / 2 (its interleave):
    the output runs in strips of TILE_Y rows in parallel, two rows a step (one row of the
    plane per step), and up and plane are computed per step and stored per strip, so that
    they slide (Halide's camera_pipe schedule, camera_pipe_generator.cpp lines 499-564:
    split(y, yo, yi, 2) inside strips of 32 rows, the stages compute_at yi, store_at yo).
    A full-resolution stencil (blur) keeps its tiles, and a channel index `4 * co`
    (bilateral_slice) is no resampling."""
    from hdsl.schedule.auto import TILE_Y
    genes = auto_genes(hdsl.loads(HALFRES, "halfres.hl").ir)
    assert genes["out"] == [f"out.split(y, y, y_ii, 2).split(y, y, y_i, {TILE_Y // 2}).vectorize(x, 32).parallel(y)"]
    for name in ("up", "plane"):
        assert genes[name][0].startswith(f"{name}.compute_at(out, y_i).store_at(out, y)")
    assert genes["den"] == ["den.compute_inline()"]
    cam = auto_genes(hdsl.load(EX / "camera_pipe.hl").ir)
    assert cam["processed"][0].startswith("processed.reorder(c, x, y).split(y, y, y_ii, 2).split(y, y, y_i, ")
    assert all(".store_at(processed, y)" in cam[n][0] for n in ("g_gr", "g_r", "curved", "unsharp_y"))
    assert "split(" not in auto_genes(hdsl.load(EX / "blur.hl").ir)["out"][0]
    assert "split(" not in auto_genes(hdsl.load(EX / "bilateral_slice.hl").ir)["out"][0]


@pytest.mark.parametrize("w,h", [(37, 29), (70, 67)])
def test_the_strips_equal_the_evaluator(w, h):
    """Strips that end inside a step and inside a strip (29, 67 rows), and a width that is no
    multiple of the vector."""
    p = hdsl.loads(HALFRES, "halfres.hl")
    raw = np.random.default_rng(w).integers(0, 65536, (h, w)).astype(np.uint16)
    c = p.compile("host", schedule="auto")
    assert _equal(c(raw=raw), p(raw=raw))


ARMS = """
pipeline arms
use boundary

input  img: u16[2]
output out: u16[3]

algorithm {
    var x, y, c
    e = repeat_edge(img)
    a(x, y) = (e(x, y) * 3 + 1) / 5 + (e(x, y) * 7 + 2) / 9 + (e(x, y) * 11 + 3) / 13 + (e(x, y) ^ 5) / 3 + (e(x, y) | 4) / 7
    b(x, y) = (e(x, y) * 5 + 1) / 3 + (e(x, y) * 9 + 2) / 7 + (e(x, y) * 13 + 3) / 11 + (e(x, y) ^ 3) / 5 + (e(x, y) & 4) / 7
    lo(x, y) = (e(2 * x, y) * 3 + 1) / 5 + (e(2 * x, y) * 7 + 2) / 9 + (e(2 * x, y) * 11 + 3) / 13 + (e(2 * x, y) ^ 5) / 3
    hi(x, y) = (e(2 * x + 1, y) * 5 + 1) / 3 + (e(2 * x + 1, y) * 9 + 2) / 7 + (e(2 * x + 1, y) * 13 + 3) / 11 + (e(2 * x + 1, y) ^ 3) / 5
    full(x, y) = select(x % 2 == 0, lo(x / 2, y), hi(x / 2, y))
    out(x, y, c) = select(c == 0, a(x, y), select(c == 1, b(x, y), full(x, y)))
}
"""


def test_select_arms_on_a_channel_or_a_parity_count_where_chosen(monkeypatch):
    """out(x, y, c) reads a only where c == 0 and b only where c == 1 (Halide's mux, as
    camera_pipe's demosaiced), and full reads lo at even x and hi at odd x (camera_pipe's
    interleaves): each is evaluated once per point it gives, so a, b and full are inlined
    (`_arm_weights`). Counted in every arm, a and b would be evaluated 4 times per (x, y)
    (out's 4 estimated channels) and full twice, and all three would be computed per step
    of the strips. camera_pipe's demosaic stages (r_gr, b_gb, r, g, b) are inlined so too."""
    import hdsl.schedule.auto as auto
    p = hdsl.loads(ARMS, "arms.hl")
    genes = auto_genes(p.ir)
    assert [genes[n] for n in ("a", "b", "full")] == [[f"{n}.compute_inline()"] for n in ("a", "b", "full")]
    cam = auto_genes(hdsl.load(EX / "camera_pipe.hl").ir)
    assert all(cam[n] == [f"{n}.compute_inline()"] for n in ("r_gr", "b_gb", "r_b", "r", "g", "b"))
    monkeypatch.setattr(auto, "SELECT_ARMS", False)
    genes = auto_genes(p.ir)
    assert all(genes[n][0].startswith(f"{n}.compute_at(out, y_i)") for n in ("a", "b", "full"))
    img = np.random.default_rng(3).integers(0, 65536, (29, 37)).astype(np.uint16)
    monkeypatch.setattr(auto, "SELECT_ARMS", True)
    c = p.compile("host", schedule="auto")
    assert _equal(c.realize((37, 29, 3), img=img), p.realize((37, 29, 3), img=img))


PERVEC = """
pipeline pervec
use boundary

input  raw: u16[2]
output out: u16[3]

algorithm {
    var x, y, c
    shifted(x, y) = SHIFTED
    den(x, y) = min(shifted(x, y), max(shifted(x - 2, y), shifted(x + 2, y), shifted(x, y - 2), shifted(x, y + 2)))
    lo(x, y) = den(2 * x, 2 * y) / 2 + den(2 * x + 1, 2 * y + 1) / 2
    hi(x, y) = den(2 * x + 1, 2 * y) / 2 + den(2 * x, 2 * y + 1) / 2
    full(x, y) = select(x % 2 == 0, lo(x / 2, y / 2), hi(x / 2, y / 2))
    dem(x, y, c) = select(c == 0, full(x, y), select(c == 1, full(x, y) / 2 + lo(x / 2, y / 2) / 2, full(x, y) / 2 + hi(x / 2, y / 2) / 2))
    mix(x, y, c) = dem(x, y, 0) / 4 + dem(x, y, 1) / 4 + dem(x, y, 2) / 4 + u16(c)
    curved(x, y, c) = mix(x, y, c) / 3 + u16(1)
    out(x, y, c) = curved(x, y - 1, c) / 4 + curved(x, y, c) / 2 + curved(x, y + 1, c) / 4
}
"""


def test_a_strips_pointwise_read_producer_is_computed_per_vector_of_its_reader(monkeypatch):
    """dem is computed (mix reads it at three channels) per step of out's strips, and read
    only at its reader's own (x, y), through mix (inlined), by curved (per step too): it is
    computed per vector of curved, and so is mix; curved's tiles are a vector wide and a
    step (2 rows) high, rounded up, channels innermost (camera_pipe's demosaic and colour
    correction inside its tone curve: Halide's camera_pipe schedule, camera_pipe_generator.cpp
    lines 499-564, `curved.tile(x, y, xi, yi, vec, 2).unroll(yi)`, `demosaiced` and
    `corrected` at `curved, x`). The rounded-up tiles compute past curved's region, but the
    Funcs computed outside them are computed only over what that region needs (round_up is
    Halide's RoundUp), so the input needs no boundary condition where only those read it
    (camera_pipe reads raw raw, as the app does); where a Func computed in the tiles reads
    the input itself, it does: no per-vector placement then; nor where a Func between them
    is read at a neighbour's coordinates."""
    import hdsl.schedule.auto as auto
    genes = auto_genes(hdsl.loads(PERVEC.replace("SHIFTED", "repeat_edge(raw)(x, y)"), "pervec.hl").ir)
    assert re.fullmatch(r"curved\.compute_at\(out, y_i\)\.store_at\(out, y\)\.reorder\(c, x, y\)\.tile\(x, y, x, y, "
                        r"x_i, y_i, \d+, 2, round_up\)\.vectorize\(x_i\)\.unroll\(y_i\)", genes["curved"][0])
    for n in ("dem", "mix"):
        assert genes[n] == [f"{n}.compute_at(curved, x).reorder(c, x, y).vectorize(x).unroll(y)"]
    cam = auto_genes(hdsl.load(EX / "camera_pipe.hl").ir)
    for n in ("demosaiced", "corrected"):
        assert cam[n][0].startswith(f"{n}.compute_at(curved, x).reorder(c, x, y)")
    assert ".tile(x, y, x, y, x_i, y_i, " in cam["curved"][0]
    bare = auto_genes(hdsl.loads(PERVEC.replace("SHIFTED", "raw(x, y)"), "pervec.hl").ir)
    assert ".tile(x, y, x, y, x_i, y_i, " in bare["curved"][0] and "compute_at(curved, x)" in bare["dem"][0]
    # mix, computed in curved's tiles, reads raw itself: its rounded-up lanes would read past it
    inside = PERVEC.replace("SHIFTED", "raw(x, y)").replace("+ u16(c)", "+ raw(x, y) / 8 + u16(c)")
    genes = auto_genes(hdsl.loads(inside, "pervec.hl").ir)
    assert "tile(" not in genes["curved"][0] and "compute_at(curved" not in genes["dem"][0]
    genes = auto_genes(hdsl.loads(inside.replace("raw(x, y) / 8", "repeat_edge(raw)(x, y) / 8"), "pervec.hl").ir)
    assert ".tile(x, y, x, y, x_i, y_i, " in genes["curved"][0] and "compute_at(curved, x)" in genes["dem"][0]
    # mix read at x + 1 by curved: its vector would need a neighbour's dem (not per vector)
    shift = PERVEC.replace("SHIFTED", "repeat_edge(raw)(x, y)").replace("mix(x, y, c) / 3", "mix(x + 1, y, c) / 3")
    genes = auto_genes(hdsl.loads(shift, "pervec.hl").ir)
    assert "compute_at(curved" not in genes["dem"][0] and "tile(" not in genes["curved"][0]
    monkeypatch.setattr(auto, "PER_VECTOR", False)
    genes = auto_genes(hdsl.loads(PERVEC.replace("SHIFTED", "repeat_edge(raw)(x, y)"), "pervec.hl").ir)
    assert genes["dem"][0].startswith("dem.compute_at(out, y_i)") and genes["mix"] == ["mix.compute_inline()"]


@pytest.mark.parametrize("w,h", [(37, 29), (70, 67)])
def test_per_vector_producers_equal_the_evaluator(w, h):
    """Tiles rounded up past a width that is no multiple of the vector, and a last strip and
    step cut short (29, 67 rows)."""
    p = hdsl.loads(PERVEC.replace("SHIFTED", "repeat_edge(raw)(x, y)"), "pervec.hl")
    raw = np.random.default_rng(w).integers(0, 65536, (h, w)).astype(np.uint16)
    c = p.compile("host", schedule="auto")
    assert _equal(c.realize((w, h, 3), raw=raw), p.realize((w, h, 3), raw=raw))


@pytest.mark.parametrize("w,h", [(37, 29), (70, 67)])
def test_per_vector_producers_without_a_boundary_condition(w, h):
    """The same tiles over raw read bare (per vector all the same): the output where its
    footprint lies in raw (from (4, 5): den reads two pixels around, lo and hi a pixel more)
    equals the evaluator's, and native code reads raw along x exactly where the evaluator
    does (the tiles' extra lanes, up to 31 past the region, are computed from storage that
    den never wrote there, and read no raw: before, raw was read up to 28 columns further)."""
    p = hdsl.loads(PERVEC.replace("SHIFTED", "raw(x, y)"), "pervec.hl")
    assert "compute_at(curved, x)" in auto_genes(p.ir)["dem"][0]
    raw = np.random.default_rng(w).integers(0, 65536, (h + 10, w + 7)).astype(np.uint16)
    c = p.compile("host", schedule="auto")
    want = p.realize((w, h, 3), min=(4, 5, 0), raw=raw)
    assert _equal(c.realize((w, h, 3), min=(4, 5, 0), raw=raw), want)
    narrow = np.zeros((h + 10, 3), np.uint16)
    msgs = []
    for run in (c.realize, p.realize):
        with pytest.raises(hdsl.HdslError) as e:
            run((w, h, 3), min=(4, 5, 0), raw=narrow)
        msgs.append(str(e.value).splitlines()[0])
    assert msgs[0] == msgs[1] and "input 'raw' is read at x = 2 .. " in msgs[0]


CHANS = """
pipeline chans
use boundary
input  img: f32[3]
output out: f32[3]
algorithm {
    var x, y, c
    e = repeat_edge(img)
    d1(x, y, c) = (e(2 * x, 2 * y, c) + e(2 * x + 1, 2 * y, c) + e(2 * x, 2 * y + 1, c) + e(2 * x + 1, 2 * y + 1, c)) * 0.25f
    d2(x, y, c) = (d1(2 * x, 2 * y, c) + d1(2 * x + 1, 2 * y, c) + d1(2 * x, 2 * y + 1, c) + d1(2 * x + 1, 2 * y + 1, c)) * 0.25f
    out(x, y, c) = e(x, y, c) + 0.5f * d1(x / 2, y / 2, c) + 0.25f * d2(x / 4, y / 4, c)
}
"""


def test_a_root_stages_channels_run_between_its_vectors_and_its_rows(monkeypatch):
    """d2 (a pyramid level, at the root, 4 estimated channels) computes and stores a row's
    channels together, inside its parallel rows: `reorder_storage(x, c, y).reorder(x, c, y)`,
    as Halide's interpolate schedule (`downsampled[l].reorder(x, c, y)`) and local_laplacian's
    (`gPyramid[j].reorder_storage(x, k, y).reorder(k, y)`) do. Channels outermost, the
    parallel loop starts once per channel."""
    import hdsl.schedule.auto as auto
    p = hdsl.loads(CHANS, "chans.hl")
    assert auto_genes(p.ir)["d2"] == ["d2.compute_root().reorder_storage(x, c, y).reorder(x, c, y)"
                                      ".vectorize(x, 16).parallel(y, 3)"]
    it = auto_genes(hdsl.load(EX / "interpolate.hl").ir)
    assert it["ds[2]"][0].startswith("ds[2].compute_root().reorder_storage(x, c, y).reorder(x, c, y).")
    img = np.random.default_rng(5).random((29, 37, 3)).astype(np.float32)
    c = p.compile("host", schedule="auto")
    assert _equal(c.realize((37, 29, 3), img=img), p.realize((37, 29, 3), img=img))
    monkeypatch.setattr(auto, "ROOT_CHANNELS_INSIDE", False)
    assert auto_genes(p.ir)["d2"] == ["d2.compute_root().vectorize(x, 16).parallel(y, 3)"]
