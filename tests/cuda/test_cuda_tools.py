"""`hdsl compile --target cuda --emit ptx,stmt,html` and `hdsl lower --target cuda --emit ptx`;
the CUDA tools are the project's own (pip packages in site-packages)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hdsl.cli import main
from hdsl.codegen import cuda_tools
from hdsl.codegen.cuda_tools import libdevice_path, ptxas_path
from hdsl.codegen.ptx import compile_ptx
from hdsl.diagnostics import HdslError
from hdsl.ir import ops
from hdsl.ir.stmt import Load
from hdsl.ir.types import F32
from tests.cuda.ptxas_check import assembled
from tests.cuda.test_cuda_runtime import BLUR_CUDA
from tests.cuda.test_ptx import buf, elementwise, saxpy


def run(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out, out.err


def test_the_cuda_tools_are_the_projects_own():
    """ptxas and libdevice come from this environment's pip packages (never /usr/local/cuda)."""
    for path in (ptxas_path(), libdevice_path()):
        assert path is not None
        assert Path(sys.prefix).resolve() in path.resolve().parents
        assert "site-packages" in path.parts


def test_compile_cuda_writes_ptx_stmt_and_html(tmp_path, capsys):
    src = tmp_path / "blur.hl"
    src.write_text(BLUR_CUDA)
    code, out, err = run(capsys, "compile", src, "--target", "cuda-sm_80", "--emit", "ptx,stmt,html", "-o", tmp_path)
    assert code == 0, err
    assert out.split() == [str(tmp_path / f"g.{k}") for k in ("ptx", "stmt", "html")]
    ptx = assembled((tmp_path / "g.ptx").read_text())
    assert ".target sm_80" in ptx and ptx.count(".entry") == 1
    stmt = (tmp_path / "g.stmt").read_text()
    # the kernel the PTX holds, with its launch bounds, in the loop nest
    name = ptx.split(".entry ")[1].split("(")[0]
    assert f"launch {name} on cuda" in stmt and "threads (16, 18)" in stmt
    assert "gpu_barrier" in (tmp_path / "g.html").read_text()


def test_compile_cuda_emits_ptx_by_default_and_refuses_host_files(tmp_path, capsys):
    src = tmp_path / "blur.hl"
    src.write_text(BLUR_CUDA)
    code, out, _ = run(capsys, "compile", src, "--target", "cuda", "-o", tmp_path)
    assert code == 0 and out.split() == [str(tmp_path / "g.ptx")]
    assert ".target sm_75" in assembled((tmp_path / "g.ptx").read_text())
    code, _, err = run(capsys, "compile", src, "--target", "cuda", "--emit", "o,h", "-o", tmp_path / "x")
    assert code == 1 and "--emit takes ptx, stmt, html" in err
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())
    code, _, err = run(capsys, "compile", src, "--emit", "ptx", "-o", tmp_path / "y")
    assert code == 1 and "--emit ptx needs a cuda target" in err


def test_lower_prints_the_kernels_ptx(tmp_path, capsys):
    src = tmp_path / "blur.hl"
    src.write_text(BLUR_CUDA)
    code, out, _ = run(capsys, "lower", src, "--target", "cuda-sm_90", "--emit", "ptx")
    assert code == 0 and ".target sm_90" in assembled(out)
    code, _, err = run(capsys, "lower", src, "--emit", "ptx")
    assert code == 1 and "needs a cuda target" in err


def test_lower_emit_llvm_for_a_gpu_target_is_the_host_code_with_launches(tmp_path, capsys):
    """(It stopped with an internal error: the CPU's code generator met the launch.)"""
    src = tmp_path / "blur.hl"
    src.write_text(BLUR_CUDA)
    code, out, err = run(capsys, "lower", src, "--target", "cuda", "--emit", "llvm")
    assert code == 0, err
    kernel = run(capsys, "lower", src, "--target", "cuda", "--emit", "ptx")[1].split(".entry ")[1].split("(")[0]
    assert f'c"{kernel}\\00"' in out           # the kernel's name, handed to the device's launch


def test_missing_cuda_tools_say_how_to_install_them(monkeypatch):
    """Without the cuda-tools extra: kernels calling math functions need libdevice, checking
    PTX needs ptxas; each says which extra brings it."""
    monkeypatch.setattr(cuda_tools, "_nvidia_roots", lambda: [])
    cuda_tools.ptxas_path.cache_clear()
    cuda_tools.libdevice_path.cache_clear()
    try:
        exp = elementwise("expk", lambda i: ops.intrinsic("exp", [Load("x", i, F32)]), [buf("x", access="r"), buf("y")])
        with pytest.raises(HdslError) as e:
            compile_ptx([exp])
        assert "libdevice" in e.value.render() and "pip install 'hdsl[cuda-tools]'" in e.value.render()
        ptx = compile_ptx([saxpy()])                      # (no math: no libdevice needed)
        with pytest.raises(HdslError) as e:
            cuda_tools.ptxas(ptx, 75)
        assert "ptxas is not installed" in e.value.render() and "hdsl[cuda-tools]" in e.value.render()
    finally:
        cuda_tools.ptxas_path.cache_clear()
        cuda_tools.libdevice_path.cache_clear()
