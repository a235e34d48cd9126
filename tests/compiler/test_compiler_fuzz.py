"""Random valid schedules (tests/compiler/schedule_gen.py) for every corpus
pipeline: each must give exactly the evaluator's values.

The schedules use every CPU directive (schedule_gen.py: rfactor, bound and
reorder_storage included; GPU directives only in schedules that check that
the CPU target refuses them), on images of
up to MAX_W x MAX_H, for pipelines that read inputs without a boundary
condition (sized to what the evaluator reads) and multi-output pipelines
whose outputs feed each other. A schedule the native compiler refuses as
"not supported" fails (MAX_NOT_SUPPORTED). Known failures of other work's
bugs are strict xfails (FUZZ_KNOWN).

The CI-sized test runs 3 derandomized examples per pipeline (60 in all),
without shrinking (each example costs a JIT compile); `-m slow` runs 60
random ones per pipeline and shrinks failures. The failure message holds the
program's name, the image size, the input seed, the params and the schedule
block (set HDSL_FUZZ_ECHO=1 to have each one printed to stderr before it runs, for crashes):
rerun or minimise it with

    .venv/bin/python tests/compiler/repro.py NAME W H SEED 'schedule fuzz { ... }' [PARAMS_INDEX]
    .venv/bin/python tests/compiler/repro.py --min NAME W H SEED 'schedule fuzz { ... }' [PARAMS_INDEX]

(with HDSL_TEST_TARGET=cuda-emulate for a GPU schedule: its note says the target).
"""
from __future__ import annotations

import functools
import os
import sys

import pytest
from hypothesis import Phase, HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import hdsl
from compiler_corpus import (CORPUS, KNOWN_FAILURES, compare, for_schedule, load, names,
                             reference as corpus_reference)
from schedule_gen import DataChooser, PipelineInfo, generate
from tests.targets import GPU_TARGET, TARGET, requires

NOT_SUPPORTED = "not supported by the native compiler yet"
# How many generated schedules may the native compiler refuse as "not supported"? None: the
# generator emits only directives it implements (GPU directives only where refusal is the point), so any
# such refusal is a regression to report, not a case to skip.
MAX_NOT_SUPPORTED = 0
not_supported: list[str] = []

# the image sizes drawn: past every split factor the generator uses (9) and its products
MAX_W, MAX_H = 67, 37


@functools.lru_cache(maxsize=None)
def pipeline_info(name: str) -> PipelineInfo:
    spec = CORPUS[name]
    return PipelineInfo(load(spec).ir, spec.text, spec.no_inline)


@functools.lru_cache(maxsize=64)
def reference(name: str, w: int, h: int, seed: int, params_index: int):
    spec = CORPUS[name]
    return corpus_reference(spec, w, h, seed, spec.params[params_index])


def run_schedule(name: str, block: str, w: int, h: int, seed: int, params_index: int = 0, target: str = TARGET):
    """Compile `block` (a `schedule fuzz { ... }` block) for `target` and compare with the evaluator."""
    spec = CORPUS[name]
    try:
        p = load(spec, block)
    except hdsl.HdslError as e:
        raise AssertionError(f"schedule generator bug: hdsl rejects the schedule:\n{e}") from None
    try:
        c = p.compile(target, schedule="fuzz")
    except hdsl.HdslError as e:
        if NOT_SUPPORTED in str(e):
            not_supported.append(f"{name}: {str(e).splitlines()[0]}")
            event(f"not supported: {str(e).splitlines()[0][:80]}")
            assert len(not_supported) <= MAX_NOT_SUPPORTED, \
                f"{len(not_supported)} fuzzed schedules not supported natively:\n" + "\n".join(not_supported)
            return
        raise
    args, expected = reference(name, w, h, seed, params_index)
    got = c.realize(spec.sizes(w, h), **args)
    compare(for_schedule(spec, block, expected), got, expected, f"{name} {w}x{h} seed {seed}: ")


def output_sizes(spec, w: int, h: int) -> dict[str, list[int]]:
    sizes = spec.sizes(w, h)
    outs = load(spec).ir.outputs
    sizes = sizes if isinstance(sizes, list) else [sizes] * len(outs)     # (one size for all)
    return {f.name: list(sz) for f, sz in zip(outs, sizes)}


def bound_box(spec, w: int, h: int):
    """(min, extent) for bound() on intermediates: far past any region a schedule reads
    (256: histogram bins; split tails of up to three nested splits by 9 add < 9 * 9 * 9)."""
    return (-64, 64 + max(w, h, 256) + 729) if spec.bound_intermediates else None


def fuzz_one(name: str, data, target: str = TARGET, gpu: bool = False, fragment: bool = False) -> None:
    """gpu: GPU schedules (schedule_gen's gpu_valid) for a GPU target (cuda-emulate: run by the
    host-emulation device)."""
    spec = CORPUS[name]
    w = data.draw(st.integers(1, MAX_W), label="W")
    h = data.draw(st.integers(1, MAX_H), label="H")
    # (the CUDA targets' fuzz draws wider GPU schedules than OpenGL's: schedule_gen's gpu_wide)
    g = generate(pipeline_info(name), DataChooser(data), output_sizes=output_sizes(spec, w, h),
                 bound_box=bound_box(spec, w, h), gpu_valid=gpu, fragment=fragment,
                 gpu_wide=gpu and target != "opengl")
    block = g.block("fuzz")
    seed = data.draw(st.integers(0, 3), label="seed")
    params_index = data.draw(st.integers(0, len(spec.params) - 1), label="params")
    note(f"repro: {name} {w} {h} {seed} {params_index}  (params {spec.params[params_index]}, target {target})"
         f"\n{block}")
    if os.environ.get("HDSL_FUZZ_ECHO"):
        # before running: a crash (SIGSEGV) of the compiled code loses Hypothesis's report
        print(f"repro: {name} {w} {h} {seed} {params_index}\n{block}", file=sys.stderr, flush=True)
    run_schedule(name, block, w, h, seed, params_index, target)


NAMES = sorted(CORPUS)
# Known failures of random schedules: unbounded where native code asks for more of an input
# without a boundary condition than the evaluator reads (issue 23 items 2 and 4; minimal case in
# test_compiler_bugs.py). Strict in the derandomized form (its examples fail today), not in the
# random sweep (it may draw none).
FUZZ_KNOWN = dict(KNOWN_FAILURES)
COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                     HealthCheck.filter_too_much])


@pytest.mark.parametrize("name", names(FUZZ_KNOWN))
@settings(max_examples=3, derandomize=True, database=None, phases=[Phase.generate], **COMMON)
@given(data=st.data())
def test_random_schedules(name, data):
    fuzz_one(name, data)


@pytest.mark.slow
@pytest.mark.parametrize("name", names(FUZZ_KNOWN, strict=False))
@settings(max_examples=60, **COMMON)
@given(data=st.data())
def test_random_schedules_slow(name, data):
    fuzz_one(name, data)


# GPU schedules (gpu_tile, gpu_blocks + gpu_threads, Funcs computed at block and thread loops)
# for GPU_TARGET (cuda-emulate in CI): 2 derandomized examples per pipeline, 30 random ones with -m slow
@requires(GPU_TARGET)
@pytest.mark.parametrize("name", names(FUZZ_KNOWN, strict=False))
@settings(max_examples=2, derandomize=True, database=None, phases=[Phase.generate], **COMMON)
@given(data=st.data())
def test_random_gpu_schedules(name, data):
    fuzz_one(name, data, GPU_TARGET, gpu=True)


# the same with each block's threads run last to first under cuda-emulate (a result that
# depends on the threads' order is a race a GPU may show: tests/gpu/test_thread_order.py)
@pytest.mark.skipif(GPU_TARGET != "cuda-emulate", reason="the thread order is cuda-emulate's")
@pytest.mark.parametrize("name", names(FUZZ_KNOWN, strict=False))
@settings(max_examples=2, derandomize=True, database=None, phases=[Phase.generate], **COMMON)
@given(data=st.data())
def test_random_gpu_schedules_threads_reversed(name, data):
    from tests.gpu.test_thread_order import reversed_threads
    with reversed_threads():
        fuzz_one(name, data, GPU_TARGET, gpu=True)


# GPU schedules as OpenGL compute shaders (llvmpipe in CI; issue 16), 2 derandomized examples
# per pipeline: they found GLSL's reserved words among Func names, per-invocation storage of
# run-time size and grids larger than one dispatch. Where a schedule puts on the GPU what GLSL
# lacks, it must be refused with that error (and any other schedule equal the evaluator):
# `recursive`'s tiled filters chain the tiles in f64.
OPENGL_REFUSED = {"recursive": "GLSL has no 64-bit floats"}
# a schedule may give one invocation more loop iterations than llvmpipe carries out (65535 of
# all its loops): the launch must then say so (tests/opengl/test_loop_limit.py), never return
# wrong values; `iir`'s scans per invocation do on some draws
OPENGL_LIMIT = "more loop iterations in one invocation"
# the fragment path's refusals at the glsl() directive (docs/opengl.md): an unscheduled
# reduction the generator leaves inside a rendered Func may need storage of run-time size there
OPENGL_FRAGMENT_REFUSED = ("computed per fragment with a size that is not a constant",)


@requires("opengl")
@pytest.mark.parametrize("name", names(FUZZ_KNOWN, strict=False))
@settings(max_examples=2, derandomize=True, database=None, phases=[Phase.generate], **COMMON)
@given(data=st.data())
def test_random_gpu_schedules_on_opengl(name, data):
    try:
        fuzz_one(name, data, "opengl", gpu=True)
    except hdsl.HdslError as e:
        if OPENGL_LIMIT in e.render() or any(m in e.render() for m in OPENGL_FRAGMENT_REFUSED):
            return
        if name not in OPENGL_REFUSED or OPENGL_REFUSED[name] not in e.render():
            raise


# ... and with OpenGL's fragment path where a Func fits (glsl(x, y): pure 2-D Funcs of one
# value at the root), 2 derandomized examples per pipeline of 2-D stages (the others have none
# to render, or draw host loops of a million launches here, too slow for the default run)
GLSL_FUZZ = ["blur3x3_u16", "casts", "color", "divmod", "feed_chain", "gauss5_f32", "math_f32", "multi_feed",
             "multi_in", "outputs_chain", "window_sum"]


@requires("opengl")
@pytest.mark.parametrize("name", [n for n in names(FUZZ_KNOWN, strict=False)
                                  if (n.values[0] if hasattr(n, "values") else n) in GLSL_FUZZ])
@settings(max_examples=2, derandomize=True, database=None, phases=[Phase.generate], **COMMON)
@given(data=st.data())
def test_random_glsl_schedules_on_opengl(name, data):
    try:
        fuzz_one(name, data, "opengl", gpu=True, fragment=True)
    except hdsl.HdslError as e:
        if OPENGL_LIMIT in e.render() or any(m in e.render() for m in OPENGL_FRAGMENT_REFUSED):
            return
        raise


@pytest.mark.slow
@requires(GPU_TARGET)
@pytest.mark.parametrize("name", names(FUZZ_KNOWN, strict=False))
@settings(max_examples=30, **COMMON)
@given(data=st.data())
def test_random_gpu_schedules_slow(name, data):
    fuzz_one(name, data, GPU_TARGET, gpu=True)


def test_generator_is_valid():
    """Many generated schedules, checked only (no compiling): hdsl accepts every one."""
    from schedule_gen import RandomChooser
    for name in NAMES:
        spec = CORPUS[name]
        pi = pipeline_info(name)
        for seed in range(10):
            block = generate(pi, RandomChooser(f"{name}-{seed}"), output_sizes=output_sizes(spec, 23, 11),
                             bound_box=bound_box(spec, 23, 11)).block("fuzz")
            try:
                load(spec, block)
            except hdsl.HdslError as e:
                raise AssertionError(f"{name} seed {seed}: hdsl rejects\n{block}\n{e}") from None


def test_gpu_directives_are_refused_on_the_cpu():
    """Random schedules with GPU directives (gpu_blocks, gpu_threads, gpu_tile) among the others:
    until a GPU back end exists, compiling for the host refuses them with a positioned error at
    a GPU directive (issue 14 item 4), never runs them serially on the CPU or fails inside."""
    import re
    from schedule_gen import RandomChooser
    for name in NAMES:
        spec = CORPUS[name]
        for seed in range(2):
            block = generate(pipeline_info(name), RandomChooser(f"gpu-{name}-{seed}"), gpu=True,
                             output_sizes=output_sizes(spec, 23, 11), bound_box=bound_box(spec, 23, 11)
                             ).block("fuzz")
            p = load(spec, block)
            with pytest.raises(hdsl.HdslError) as e:
                p.compile("host", schedule="fuzz")
            msg = str(e.value)
            m = re.match(r"(.*):(\d+):(\d+): error: '(gpu_\w+)' maps loops onto a GPU, but target 'host' is a CPU",
                         msg)
            assert m, f"{name}:\n{block}\n{msg}"
            line = (spec.text + block).splitlines()[int(m[2]) - 1]      # the line it points at
            assert f".{m[4]}(" in line and int(m[3]) == len(line) - len(line.lstrip()) + 1, (line, msg)
