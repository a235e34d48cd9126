"""The project's own CUDA tools: `ptxas` and `libdevice.10.bc` from the pip packages
nvidia-cuda-nvcc and nvidia-nvvm (the `cuda-tools` extra), found inside the Python
environment's site-packages (under nvidia/cu13/…; nvidia/cuda_nvcc/… for CUDA 12's
packages). A toolkit that happens to be installed elsewhere (/usr/local/cuda) is never
used: what the tests check must be what the project installs.
"""
from __future__ import annotations

import importlib.util
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

from hdsl.diagnostics import HdslError

INSTALL_HINT = "install the CUDA tools with: pip install 'hdsl[cuda-tools]' (pip's nvidia-cuda-nvcc and nvidia-nvvm)"


def _nvidia_roots() -> list[Path]:
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(p) for p in spec.submodule_search_locations]


def _find(patterns: tuple[str, ...]) -> Path | None:
    for root in _nvidia_roots():
        for pattern in patterns:
            for p in sorted(root.glob(pattern), reverse=True):      # (cu13 before cu12)
                if p.is_file():
                    return p
    return None


@lru_cache(maxsize=None)
def ptxas_path() -> Path | None:
    return _find(("cu*/bin/ptxas", "cuda_nvcc/bin/ptxas"))


@lru_cache(maxsize=None)
def libdevice_path() -> Path | None:
    return _find(("cu*/nvvm/libdevice/libdevice.10.bc", "cuda_nvcc/nvvm/libdevice/libdevice.10.bc",
                  "nvvm/libdevice/libdevice.10.bc"))


def libdevice() -> bytes:
    path = libdevice_path()
    if path is None:
        raise HdslError("CUDA's libdevice (math functions for kernels) is not installed", None, INSTALL_HINT)
    return path.read_bytes()


def ptxas(ptx: str, sm: int) -> bytes:
    """The cubin that ptxas makes of `ptx` for sm_NN; an HdslError with ptxas's messages if it fails."""
    exe = ptxas_path()
    if exe is None:
        raise HdslError("ptxas is not installed", None, INSTALL_HINT)
    with tempfile.TemporaryDirectory(prefix="hdsl-ptxas-") as d:
        src, out = Path(d) / "kernels.ptx", Path(d) / "kernels.cubin"
        src.write_text(ptx)
        r = subprocess.run([str(exe), f"-arch=sm_{sm}", str(src), "-o", str(out)], capture_output=True, text=True)
        if r.returncode != 0:
            raise HdslError(f"ptxas rejected the PTX for sm_{sm}", None, (r.stderr or r.stdout).strip())
        return out.read_bytes()
