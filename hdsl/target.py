"""What a pipeline is compiled for, parsed once from a target string.

Target strings (the CLI's --target, `Pipeline.compile(target)`):
- `interp`: the reference evaluator (no code is made);
- `host`, `x86-64-avx2`, `x86-64-avx512`: native CPU code (host = this machine's CPU);
- `cuda`, `cuda-sm_80`, `cuda-sm_90`: NVIDIA GPUs through PTX (default sm_75);
- `cuda-emulate`: the very kernels the CUDA target makes, compiled for the host and run
  by the host-emulation device (device memory is separate host memory, so copies happen);
- `opengl`: OpenGL compute/fragment shaders.
Any native one may end in `-fast_math` (`host-fast_math`, `cuda-sm_80-fast_math`).

A Target's `.name` is its canonical string (the cache key's part), `.arch` one of "interp",
"host", "cuda", "opengl", `.device` None (the CPU only), "cuda", "host_emulate" or "opengl",
`.cpu` the LLVM CPU variant its host code is compiled for, `.features` a frozenset such as
{"fast_math", "sm_80"}. `.schedule` is the schedule block chosen by default ("cuda" for the
CUDA targets and cuda-emulate, "opengl" for opengl, None for the CPU).
"""
from __future__ import annotations

from dataclasses import dataclass

from hdsl.diagnostics import HdslError

CPU_VARIANTS = ("host", "x86-64-avx2", "x86-64-avx512")
CUDA_ARCHS = (75, 80, 90)
DEFAULT_SM = 75
# Shared memory one block may have, by compute capability, in bytes: the opt-in maxima of the
# CUDA C++ Programming Guide's table of technical specifications per compute capability
# ("maximum amount of shared memory per thread block": 64 KB for 7.5, 163 KB for 8.0, 227 KB
# for 9.0; the Turing, Ampere and Hopper tuning guides give the same numbers). Beyond
# STATIC_SHARED_LIMIT (48 KB) a kernel must use dynamic shared memory and opt in with
# cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) (same guides).
SHARED_MEMORY_LIMIT = {75: 64 * 1024, 80: 163 * 1024, 90: 227 * 1024}
STATIC_SHARED_LIMIT = 48 * 1024
TARGET_NAMES = ("interp", *CPU_VARIANTS, "cuda", "cuda-sm_80", "cuda-sm_90", "cuda-emulate", "opengl")


@dataclass(frozen=True)
class Target:
    name: str                    # canonical: "host-fast_math", "cuda-sm_80", "cuda-emulate"
    arch: str                    # "interp" | "host" | "cuda" | "opengl"
    device: str | None           # None | "cuda" | "host_emulate" | "opengl"
    cpu: str                     # the CPU variant of the host code: "host", "x86-64-avx2", ...
    features: frozenset = frozenset()

    @property
    def fast_math(self) -> bool:
        return "fast_math" in self.features

    @property
    def sm(self) -> int | None:
        """The CUDA compute capability (75, 80, 90) of a cuda target."""
        for f in self.features:
            if f.startswith("sm_"):
                return int(f[3:])
        return None

    @property
    def shared_memory_limit(self) -> int | None:
        """The bytes of shared memory one GPU block may use (a cuda target's, cuda-emulate's
        that of its sm_75); None where hdsl does not check it (CPU, OpenGL: its runtime asks
        the driver)."""
        return SHARED_MEMORY_LIMIT.get(self.sm) if self.arch == "cuda" else None

    @property
    def is_gpu(self) -> bool:
        """Whether GPU schedules (gpu_blocks, gpu_threads, gpu_tile) can run on it."""
        return self.device is not None

    @property
    def native(self) -> bool:
        return self.arch != "interp"

    @property
    def schedule(self) -> str | None:
        """The schedule block chosen for this target when none is named."""
        return {"cuda": "cuda", "opengl": "opengl"}.get(self.arch)

    @property
    def base(self) -> str:
        """The name without -fast_math."""
        return self.name[: -len("-fast_math")] if self.fast_math else self.name

    def __str__(self) -> str:
        return self.name


def parse_target(target: "str | Target") -> Target:
    """The Target a string names; an HdslError listing the targets when it names none."""
    if isinstance(target, Target):
        return target
    text = target.strip()
    fast = text.endswith("-fast_math") and text != "interp-fast_math"
    base = text[: -len("-fast_math")] if fast else text
    features = {"fast_math"} if fast else set()
    if base == "interp" and not fast:
        return Target("interp", "interp", None, "host")
    if base in CPU_VARIANTS:
        return Target(text, "host", None, base, frozenset(features))
    if base == "cuda-emulate":
        return Target(text, "cuda", "host_emulate", "host", frozenset(features | {f"sm_{DEFAULT_SM}"}))
    if base == "cuda" or (base.startswith("cuda-sm_") and base[8:].isdigit() and int(base[8:]) in CUDA_ARCHS):
        sm = int(base[8:]) if base != "cuda" else DEFAULT_SM
        return Target(text, "cuda", "cuda", "host", frozenset(features | {f"sm_{sm}"}))
    if base == "opengl" and not fast:
        return Target("opengl", "opengl", "opengl", "host")
    raise HdslError(f"unknown target '{target}'", None,
                    "targets: " + ", ".join(TARGET_NAMES) + " (a native one may end in -fast_math)")


HOST = parse_target("host")
