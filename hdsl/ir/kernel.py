"""Kernels: the GPU code a `LaunchKernel` runs (the shapes of /GPU_CONTRACT, shared by the CUDA,
OpenGL and host-emulation back ends).

PROVISIONAL COPY on branch `opengl`: branch `gpu` owns this module (and `GpuBarrier`, which
belongs in hdsl/ir/stmt.py); when its kernel outlining lands, its version replaces this one.

- Kernel.body: a loop nest whose outer loops are "gpu_block" For loops (at most 3; the innermost
  is dimension x), inside them "gpu_thread" loops (likewise), flat Load/Store on the buffers
  named by `args`.
- Kernel.threads: the block size per dimension (x first), expressions of the args only.
- Kernel.shared_bytes: the gpu_shared memory per block.
- KernelArg: kind "buffer" (a flat array of `type`, `access` "r", "w" or "rw") or "scalar".
"""
from __future__ import annotations

from dataclasses import dataclass

from hdsl.ir.expr import Const, Expr
from hdsl.ir.stmt import Stmt
from hdsl.ir.types import I32, Type


@dataclass(frozen=True, slots=True, eq=False)
class GpuBarrier(Stmt):
    """Every thread of the block waits here (GLSL barrier(), PTX bar.sync 0)."""


@dataclass(frozen=True, slots=True)
class KernelArg:
    name: str
    type: Type
    kind: str               # "buffer" | "scalar"
    access: str = "r"       # buffers: "r", "w" or "rw"


@dataclass(frozen=True, slots=True, eq=False)
class Kernel:
    name: str
    args: tuple
    body: Stmt
    threads: tuple
    shared_bytes: Expr = Const(I32, 0)
