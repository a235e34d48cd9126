"""The one way the tests check PTX: every module they build is assembled by the project's own
ptxas (pip's nvidia-cuda-nvcc, found by hdsl/codegen/cuda_tools.py) for each architecture the
cuda targets name that can run it: PTX for sm_75 (the default) is assembled for sm_75, sm_80
and sm_90; PTX for sm_80 for sm_80 and sm_90 (ptxas refuses a .target above -arch). Tests
make PTX with `ptx_of(kernels)` (compile and assemble) or pass PTX they got otherwise (from
`hdsl compile --emit ptx`, a compiled pipeline) through `assembled(ptx)`."""
from __future__ import annotations

import re

from hdsl.codegen.cuda_tools import ptxas
from hdsl.codegen.ptx import compile_ptx
from hdsl.target import CUDA_ARCHS


def assembled(ptx: str) -> str:
    """ptx, after ptxas has accepted it for its .target and each later architecture (an
    HdslError with ptxas's messages otherwise); each cubin must be an ELF file."""
    target = int(re.search(r"^\.target sm_(\d+)", ptx, re.M).group(1))
    for sm in (a for a in CUDA_ARCHS if a >= target):
        cubin = ptxas(ptx, sm)
        assert cubin[:4] == b"\x7fELF", f"ptxas made no ELF cubin for sm_{sm}"
    return ptx


def ptx_of(kernels, **options) -> str:
    """compile_ptx(kernels, **options), assembled."""
    return assembled(compile_ptx(kernels, **options))
