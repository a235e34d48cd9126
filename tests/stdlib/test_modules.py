"""The stdlib as a whole: every module passes `hdsl check`, all of them can be
used together in one program, every fn has a doc comment, and
docs/stdlib.md lists every fn."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import hdsl
from hdsl.cli import main

ROOT = Path(__file__).resolve().parents[2]
STDLIB = ROOT / "hdsl" / "stdlib"         # package data, shipped in the wheel
MODULES = sorted(STDLIB.glob("*.hl"))


def fns(path: Path) -> list[str]:
    return re.findall(r"^fn\s+(\w+)\s*\(", path.read_text(), re.M)


def test_the_modules_are_there():
    assert {p.stem for p in MODULES} >= {"pyramid", "resample", "color", "stats", "filters"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_hdsl_check(path, capsys):
    # On a library, `hdsl check` parses and checks the top-level items; fn bodies are
    # elaborated only when a program calls them, which the per-module tests do for every fn.
    code = main(["check", str(path)])
    assert code == 0, capsys.readouterr().err


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_every_fn_has_a_doc_comment(path):
    """Directly above each `fn NAME(...)` is a block of `#` lines that names NAME( ... )."""
    lines = path.read_text().splitlines()
    assert fns(path)
    for i, line in enumerate(lines):
        m = re.match(r"fn\s+(\w+)", line)
        if not m:
            continue
        j = i - 1
        while j >= 0 and lines[j].startswith("#"):
            j -= 1
        block = "\n".join(lines[j + 1:i])
        assert f"{m.group(1)}(" in block, f"{path.name}: fn {m.group(1)} has no doc comment naming it above it"


def test_docs_list_every_fn():
    doc = (ROOT / "docs" / "stdlib.md").read_text()
    for path in MODULES:
        assert f"stdlib/{path.name}" in doc or f"`use {path.stem}`" in doc, path.name
        for name in fns(path):
            assert f"`{name}(" in doc, f"docs/stdlib.md does not list {path.stem}.{name}"


ALL_MODULES = """pipeline everything
use boundary
use pyramid
use resample
use color
use stats
use filters
use recursive

input  img: u8[3]
output out: f32[2]

algorithm {
    gray = rgb_to_gray(img)
    g = repeat_edge(img)
    luma(x, y) = rgb_to_gray(g)(x, y) / 255.0f
    small = downsample(luma)
    big = bicubic(small, 2.0f, 2.0f)
    edges = sobel_magnitude(big)
    out(x, y) = linear_to_srgb(edges)(x, y) + gray(x, y) * 0.0f
}
"""


def test_all_modules_together():
    """No two modules define the same name, and fns from different modules compose."""
    p = hdsl.loads(ALL_MODULES, "everything.hl")
    img = np.random.default_rng(0).integers(0, 256, (7, 9, 3)).astype(np.uint8)
    out = p(img=img)
    assert out.shape == (7, 9) and np.isfinite(out).all()


def doc_examples() -> list[str]:
    return re.findall(r"```hl[^\n]*\n(.*?)```", (ROOT / "docs" / "stdlib.md").read_text(), re.S)


def test_docs_have_an_example_per_module():
    used = {m for ex in doc_examples() for m in re.findall(r"^use (\w+)", ex, re.M)}
    assert used >= {p.stem for p in MODULES}


@pytest.mark.parametrize("i", range(5))
def test_doc_examples_check_and_run(tmp_path, capsys, i):
    """Each example in docs/stdlib.md passes `hdsl check` and runs on the evaluator."""
    src = doc_examples()[i]
    path = tmp_path / "example.hl"
    path.write_text(src)
    assert main(["check", str(path)]) == 0, capsys.readouterr().err
    rng = np.random.default_rng(i)
    inputs = {}
    for name, t, dims in re.findall(r"^input\s+(\w+):\s*(\w+)\[(\d)\]", src, re.M):
        shape = (7, 9, 3)[:int(dims)]
        inputs[name] = (rng.integers(0, 256, shape) if t == "u8" else rng.uniform(0, 1, shape)).astype(
            np.uint8 if t == "u8" else np.float32)
    out = hdsl.loads(src, str(path))(**inputs)
    for a in (out if isinstance(out, tuple) else (out,)):
        assert a.shape[:2] == (7, 9)
        assert np.isfinite(a.astype(np.float64)).all()
