"""Batches in local processes (issue 24): `hdsl.batch` and `hdsl run` with an --input pattern
give each image exactly what running it alone gives; a bad image is reported by name and the
others are done; --resume skips what is done; importing hdsl imports no Dask."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hdsl
from hdsl.cli import main
from hdsl.diagnostics import HdslError
from hdsl.runtime.images import load_image, save_image

ROOT = Path(__file__).resolve().parents[2]
BLUR = ROOT / "examples" / "blur.hl"


def _images(folder: Path, n: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        a = np.random.default_rng(i).integers(0, 65536, (20 + 3 * i, 31), dtype=np.uint16)
        save_image(folder / f"im{i}.png", a)
        paths.append(folder / f"im{i}.png")
    return paths


def test_batch_in_processes_equals_one_by_one(tmp_path):
    paths = _images(tmp_path / "in", 4)
    (tmp_path / "in" / "broken.png").write_bytes(b"not an image")
    seen = []
    r = hdsl.batch(str(BLUR), {"img": str(tmp_path / "in" / "*.png")}, str(tmp_path / "out" / "{stem}.png"),
                   workers=2, progress=lambda item, done, total: seen.append((done, total)))
    assert sorted(seen) == [(k, 5) for k in range(1, 6)]
    assert len(r.done) == 4
    (bad,) = r.failed
    assert bad.name.endswith("broken.png") and "not a PNG or JPEG image" in bad.error
    c = hdsl.load(BLUR).compile()
    for p in paths:
        assert np.array_equal(load_image(tmp_path / "out" / p.name), c(img=load_image(p)))
    assert not list((tmp_path / "out").glob(".*"))       # no temporary file left behind
    # in memory: a list of {input: array}, results returned
    arrays = [load_image(p) for p in paths]
    r = hdsl.batch(c, [{"img": a} for a in arrays], workers=0)
    for item, a in zip(r, arrays):
        assert np.array_equal(item.outputs, c(img=a))


def test_cli_batch_resume_and_errors(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _images(tmp_path / "photos", 3)
    argv = ["run", str(BLUR), "--input", "img=photos/*.png", "--output", "out/{stem}.png", "--workers", "0"]
    assert main(argv) == 0
    assert "3 images: 3 done" in capsys.readouterr().out
    first = (tmp_path / "out" / "im1.png").stat().st_mtime_ns
    (tmp_path / "out" / "im2.png").unlink()
    assert main(argv + ["--resume"]) == 0
    assert "1 done, 2 skipped" in capsys.readouterr().out
    assert (tmp_path / "out" / "im1.png").stat().st_mtime_ns == first and (tmp_path / "out" / "im2.png").exists()
    (tmp_path / "photos" / "zz.png").write_bytes(b"junk")
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "photos/zz.png: error: cannot read 'photos/zz.png'" in err
    assert "1 of 4 images failed: photos/zz.png" in err and "Traceback" not in err
    for output, message in [("out/x.png", "would write every image to one file"),
                            ("out/{stam}.png", "unknown field {stam}")]:
        assert main(argv[:5] + [output]) == 1
        assert message in capsys.readouterr().err
    assert main(["run", str(BLUR), "--input", "img=nothing/*.png", "--output", "o/{stem}.png"]) == 1
    assert "matches no file" in capsys.readouterr().err


def test_two_inputs_with_one_name_are_refused(tmp_path):
    _images(tmp_path / "a", 1)
    _images(tmp_path / "b", 1)
    with pytest.raises(HdslError, match="would both be written to"):
        hdsl.batch(str(BLUR), {"img": [str(tmp_path / "a" / "im0.png"), str(tmp_path / "b" / "im0.png")]},
                   str(tmp_path / "out" / "{stem}.png"), workers=0)


def test_importing_hdsl_imports_no_dask():
    code = ("import sys, hdsl; p = hdsl.load(sys.argv[1]); p.compile('interp'); "
            "assert not [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed', 'zarr', 'tifffile')]")
    subprocess.run([sys.executable, "-c", code, str(BLUR)], check=True)
