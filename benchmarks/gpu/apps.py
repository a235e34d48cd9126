"""The GPU benchmark's apps: their inputs (the very arrays benchmarks/run.py gives hdsl and
Halide, made from the same seeds), the hdsl example each runs, and the small raw format the
C++ harness (harness.cpp) reads its inputs from and writes its outputs to.

Needs only NumPy: run_device.py imports it on the GPU machine, where the halide package is
not installed.

The .hbuf format: int32 ndim, int32 extent[ndim] in Halide's order (x first), int32 a type
code (TYPES), then the elements, x fastest (a C-order NumPy array of shape
extent[::-1]). Little-endian throughout."""
from __future__ import annotations

from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

TYPES = {np.dtype(np.uint8): 1, np.dtype(np.uint16): 2, np.dtype(np.float32): 3}
DTYPES = {v: k for k, v in TYPES.items()}


def write_hbuf(path: Path, planar: np.ndarray) -> None:
    """Write `planar` (C order, x the last axis) as a .hbuf file."""
    a = np.ascontiguousarray(planar)
    header = np.array([a.ndim, *a.shape[::-1], TYPES[a.dtype]], dtype="<i4")
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())


def read_hbuf(path: Path) -> np.ndarray:
    """A .hbuf file as a C-order array (x the last axis)."""
    data = Path(path).read_bytes()
    ndim = int(np.frombuffer(data, "<i4", 1)[0])
    head = np.frombuffer(data, "<i4", ndim + 2)
    extents, dtype = [int(e) for e in head[1:ndim + 1]], DTYPES[int(head[ndim + 1])]
    body = np.frombuffer(data, dtype.newbyteorder("<"), offset=4 * (ndim + 2))
    if body.size != int(np.prod(extents)):
        raise ValueError(f"{path}: {body.size} elements, the header says {extents}")
    return body.reshape(extents[::-1]).astype(dtype)


class App:
    """One app: `inputs()` gives (hdsl's keyword inputs, hdsl's params, the Halide buffers in
    the harness's argument order as planar arrays, the output's (H, W[, C]) shape and dtype);
    `from_planar` turns Halide's planar output into hdsl's (H, W[, C]) layout."""

    def __init__(self, name, example, make, planar_out: bool):
        self.name, self.example, self.make, self.planar_out = name, EXAMPLES / example, make, planar_out

    def inputs(self, quick: bool = False):
        return self.make(quick)

    def from_planar(self, a: np.ndarray) -> np.ndarray:
        return a.transpose(1, 2, 0) if self.planar_out else a


# The inputs of benchmarks/run.py's cases (case_local_laplacian, case_bilateral_grid,
# case_camera_pipe, case_interpolate, case_blur): the same sizes, seeds and layouts.
def _local_laplacian(quick):
    w, h = (320, 192) if quick else (2560, 1536)
    planar = (np.random.RandomState(3).rand(3, h, w) * 65535).astype(np.uint16)
    return {"img": planar.transpose(1, 2, 0)}, {}, [planar], ((h, w, 3), np.uint16)


def _bilateral_grid(quick):
    w, h = (320, 192) if quick else (2560, 1536)
    rs = np.random.RandomState(5)
    yy, xx = np.mgrid[0:h, 0:w]
    img = (0.5 + 0.3 * np.sin(xx / 37.0) * np.cos(yy / 23.0) + rs.normal(0, 0.05, (h, w))).astype(np.float32)
    return {"img": img}, {"r_sigma": 0.1}, [img], ((h, w), np.float32)


def _camera_pipe(quick):
    rw, rh = (352, 280) if quick else (2592, 1968)
    w, h = (rw - 32) // 32 * 32, (rh - 24) // 32 * 32        # as Halide's process.cpp
    raw = np.random.RandomState(6).randint(0, 1024, (rh, rw)).astype(np.uint16)
    m3200 = np.load(EXAMPLES / "images" / "camera_matrix_3200.npy").astype(np.float32)
    m7000 = np.load(EXAMPLES / "images" / "camera_matrix_7000.npy").astype(np.float32)
    return ({"raw": raw, "matrix_3200": m3200, "matrix_7000": m7000}, {}, [raw, m3200, m7000],
            ((h, w, 3), np.uint8))


def _interpolate(quick):
    w, h = (256, 192) if quick else (1536, 1024)
    rng = np.random.RandomState(4)
    alpha = (rng.rand(h, w) < 0.1).astype(np.float32)[..., None]
    rgba = np.concatenate([rng.rand(h, w, 3).astype(np.float32) * alpha, alpha], axis=-1)
    planar = np.ascontiguousarray(rgba.transpose(2, 0, 1))
    return {"img": planar.transpose(1, 2, 0)}, {}, [planar], ((h, w, 3), np.float32)


def _blur(quick):
    w, h = (384, 256) if quick else (3072, 2048)
    img = (np.random.RandomState(0).rand(h, w) * 65535).astype(np.uint16)
    return {"img": img}, {}, [img], ((h, w), np.uint16)


APPS = {a.name: a for a in (
    App("bilateral_grid", "bilateral_grid.hl", _bilateral_grid, False),
    App("local_laplacian", "local_laplacian.hl", _local_laplacian, True),
    App("interpolate", "interpolate.hl", _interpolate, True),
    App("camera_pipe", "camera_pipe.hl", _camera_pipe, True),
    App("blur", "blur.hl", _blur, False),
)}


def write_inputs(app: App, directory: Path, quick: bool = False) -> None:
    """The app's Halide inputs as DIR/APP.inK.hbuf (K = 0, 1, ...: the harness's order)."""
    directory.mkdir(parents=True, exist_ok=True)
    for k, a in enumerate(app.inputs(quick)[2]):
        write_hbuf(directory / f"{app.name}.in{k}.hbuf", a)
