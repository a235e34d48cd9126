"""`hdsl compile --target cuda --emit ptx,stmt,html` and `hdsl lower --target cuda --emit ptx`;
the CUDA tools are the project's own (pip packages in site-packages)."""
from __future__ import annotations

import sys
from pathlib import Path

from hdsl.cli import main
from hdsl.codegen.cuda_tools import libdevice_path, ptxas_path
from tests.cuda.ptxas_check import assembled
from tests.cuda.test_cuda_runtime import BLUR_CUDA


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
