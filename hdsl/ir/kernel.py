"""A GPU kernel: the loop nest under one outermost gpu_block loop, outlined by
hdsl/lower/gpu.py and launched by a LaunchKernel statement (hdsl/ir/stmt.py).

- `name`: unique in the pipeline ("kernel_blur_y_0").
- `args`: everything the body reads or writes that it does not define itself, by
  the host's names: buffers (kind "buffer": a flat pointer to elements of `type`,
  `access` "r", "w" or "rw") and scalars (kind "scalar": an i32/i64/float value).
- `body`: up to 3 nested "gpu_block" For loops, inside them up to 3 nested
  "gpu_thread" loops (several sibling nests, separated by GpuBarrier, may share a
  block's gpu_shared allocations), flat Load/Store on the args' buffers.
- `threads`: the block size per dim (x first), the largest extent of the body's
  thread loops of that dim, an expression of the scalar args only (device code
  guards `thread_index < extent` for shorter thread loops).
- `shared_bytes`: the gpu_shared memory one block needs (0 if none), an expression
  of the scalar args only.

The host-emulation device runs the very same Kernel: block loops as (parallel)
loops, thread loops as serial loops, each GpuBarrier a no-op since the thread-loop
nests it separates run one after another.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from hdsl.ir.expr import Expr
from hdsl.ir.types import Type


@dataclass(frozen=True, slots=True)
class KernelArg:
    name: str
    type: Type
    kind: str               # "buffer" | "scalar"
    access: str = ""        # buffers: "r", "w" or "rw"


@dataclass(frozen=True, slots=True, eq=False)
class Kernel:
    name: str
    args: tuple             # (KernelArg, ...)
    body: object            # Stmt
    threads: tuple          # (Expr, ...), x first
    shared_bytes: Expr
    # OpenGL's fragment path (a Func scheduled glsl(x, y, c)): (Func, channel loop var or "")
    fragment: tuple = ()

    def with_body(self, body, threads=None, shared_bytes=None) -> "Kernel":
        return replace(self, body=body, threads=self.threads if threads is None else threads,
                       shared_bytes=self.shared_bytes if shared_bytes is None else shared_bytes)

    def buffers(self) -> list[KernelArg]:
        return [a for a in self.args if a.kind == "buffer"]

    def scalars(self) -> list[KernelArg]:
        return [a for a in self.args if a.kind == "scalar"]
