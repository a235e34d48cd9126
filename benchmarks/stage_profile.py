"""Where does a case's time go, stage by stage, in hdsl and in Halide? A tool for finding
the gaps that benchmarks/run.py reports, not part of `make bench`.

    python benchmarks/stage_profile.py CASE [--runs N] [--perf]

Both implementations are compiled ahead of time into shared libraries (hdsl with
`hdsl compile --emit so`, Halide's peer from halide_peers.py with `compile_to_file` and
linked with cc), then called through ctypes in turns, in one process, on the same
inputs; the medians and their ratio are printed. Compiled ahead of time, each side's
parallel loop bodies are named functions (hdsl's NAME__impl_shifted.parK, Halide's
NAME_par_for_STAGE_...), so with --perf the run happens under `perf record` and the
report lists both sides' stages in one profile, their shares directly comparable
(the JIT-compiled peer that run.py times has no symbols for perf). Cases: blur,
unsharp, bilateral_grid, interpolate, camera_pipe; --target x86-64-avx2 builds both sides for AVX2. Threads: 2 for both, as in run.py.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HDSL_NUM_THREADS", "2")
os.environ.setdefault("HL_NUM_THREADS", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))


def _case(name: str, target: str = "host"):
    """(example file, inputs as arrays in [x, y, c] order, params, peer, output shape in numpy
    order and dtype) at the benchmark's sizes."""
    import halide_peers as hp
    if name == "blur":
        img = (np.random.RandomState(0).rand(2048, 3072) * 65535).astype(np.uint16)
        return "blur.hl", [img.T], {}, hp.blur(img), (img.shape, img.dtype)
    if name == "unsharp":
        img = (np.random.RandomState(7).rand(2048, 3072) * 255).astype(np.uint8)
        return "unsharp.hl", [img.T], {"sigma": 1.5, "amount": 1.0}, hp.unsharp(img, 1.5, 1.0), (img.shape, img.dtype)
    if name == "bilateral_grid":
        h, w = 1536, 2560
        yy, xx = np.mgrid[0:h, 0:w]
        img = (0.5 + 0.3 * np.sin(xx / 37.0) * np.cos(yy / 23.0)
               + np.random.RandomState(5).normal(0, 0.05, (h, w))).astype(np.float32)
        return "bilateral_grid.hl", [img.T], {"r_sigma": 0.1}, hp.bilateral_grid(img, 0.1), (img.shape, img.dtype)
    if name == "interpolate":
        h, w = 1024, 1536
        rng = np.random.RandomState(4)
        alpha = (rng.rand(h, w) < 0.1).astype(np.float32)[..., None]
        rgba = np.concatenate([rng.rand(h, w, 3).astype(np.float32) * alpha, alpha], axis=-1)
        planar = np.ascontiguousarray(rgba.transpose(2, 0, 1))
        return "interpolate.hl", [planar.T], {}, hp.interpolate(rgba, target=target), ((3, h, w), np.dtype(np.float32))
    if name == "camera_pipe":
        rw, rh = 2592, 1968
        w, h = (rw - 32) // 32 * 32, (rh - 24) // 32 * 32
        raw = np.random.RandomState(6).randint(0, 1024, (rh, rw)).astype(np.uint16)
        m3200 = np.load(ROOT / "examples" / "images" / "camera_matrix_3200.npy").astype(np.float32)
        m7000 = np.load(ROOT / "examples" / "images" / "camera_matrix_7000.npy").astype(np.float32)
        params = {"color_temp": 3700.0, "gamma": 2.0, "contrast": 50.0, "sharpen_strength": 1.0,
                  "blackLevel": 25, "whiteLevel": 1023}
        return ("camera_pipe.hl", [raw.T, m3200.T, m7000.T], params,
                hp.camera_pipe(raw, m3200, m7000, w, h, target=target), ((3, h, w), np.dtype(np.uint8)))
    raise SystemExit(f"stage_profile: unknown case '{name}' (blur, unsharp, bilateral_grid, interpolate, "
                     "camera_pipe)")


# Halide's halide_buffer_t (HalideRuntime.h), for calling the peer's library
class _HDim(ctypes.Structure):
    _fields_ = [("min", ctypes.c_int32), ("extent", ctypes.c_int32), ("stride", ctypes.c_int32),
                ("flags", ctypes.c_uint32)]


class _HType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _HBuffer(ctypes.Structure):
    _fields_ = [("device", ctypes.c_uint64), ("device_interface", ctypes.c_void_p), ("host", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("type", _HType), ("dimensions", ctypes.c_int32),
                ("dim", ctypes.POINTER(_HDim)), ("padding", ctypes.c_void_p)]


def _halide_buffer(a: np.ndarray) -> _HBuffer:
    code = 2 if a.dtype.kind == "f" else (1 if a.dtype.kind == "u" else 0)
    dims = (_HDim * a.ndim)(*[_HDim(0, a.shape[d], a.strides[d] // a.itemsize, 0) for d in range(a.ndim)])
    b = _HBuffer(0, None, a.ctypes.data, 0, _HType(code, a.itemsize * 8, 1), a.ndim, dims, None)
    b._keep = (dims, a)
    return b


class _HdslArgument(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int32), ("type_code", ctypes.c_int32),
                ("bits", ctypes.c_int32), ("dims", ctypes.c_int32)]


def _scalar(type_code: int, bits: int, value):
    if type_code == 2:
        return ctypes.c_float(value) if bits == 32 else ctypes.c_double(value)
    return {8: ctypes.c_int8, 16: ctypes.c_int16, 32: ctypes.c_int32, 64: ctypes.c_int64}[bits](int(value))


def build(case: str, work: Path, target: str = "host"):
    """Both libraries for `case`, and a zero-argument callable for each side."""
    from hdsl.runtime.jit import make_buffer
    example, inputs, params, peer, (out_shape, out_dtype) = _case(case, target)
    hl = __import__("halide")
    stem = Path(example).stem
    subprocess.run([sys.executable, "-m", "hdsl.cli", "compile",
                    str(ROOT / "examples" / example), "-o", str(work), "--emit", "so,h", "--target", target],
                   check=True, stdout=subprocess.DEVNULL)
    hd_lib = ctypes.CDLL(str(work / f"lib{stem}.so"))
    count = ctypes.c_int()
    args_fn = getattr(hd_lib, f"{stem}_arguments")
    args_fn.restype = ctypes.POINTER(_HdslArgument)
    table = args_fn(ctypes.byref(count))
    hd_out, h_out = np.empty(out_shape, out_dtype), np.empty(out_shape, out_dtype)
    hd_args, pending = [], list(inputs)
    for k in range(count.value):
        a = table[k]
        if a.kind == 0:
            hd_args.append(ctypes.byref(make_buffer(pending.pop(0))))
        elif a.kind == 1:
            hd_args.append(_scalar(a.type_code, a.bits, params[a.name.decode()]))
        else:
            hd_args.append(ctypes.byref(make_buffer(hd_out.T)))
    hd_fn = getattr(hd_lib, stem)

    h_name = f"halide_{stem}"
    arguments = peer.func.infer_arguments()
    from halide_peers import halide_target
    # (ahead of time: the host target without the JIT feature, so the library has Halide's runtime)
    h_target = hl.get_host_target() if target == "host" else halide_target(target)
    peer.func.compile_to_file(str(work / h_name), arguments, h_name, h_target)
    subprocess.run(["cc", "-shared", "-o", str(work / f"lib{h_name}.so"), str(work / f"{h_name}.o"),
                    "-lpthread", "-ldl"], check=True)
    h_lib = ctypes.CDLL(str(work / f"lib{h_name}.so"))
    h_args, pending = [], list(inputs)
    for a in arguments:
        if a.kind == hl.ArgumentKind.InputBuffer:
            h_args.append(ctypes.byref(_halide_buffer(pending.pop(0))))
        else:
            t = a.type
            h_args.append(_scalar(2 if t.is_float() else 0, t.bits(), params[a.name]))
    h_args.append(ctypes.byref(_halide_buffer(h_out.T)))
    h_fn = getattr(h_lib, h_name)

    def run_hdsl():
        r = hd_fn(*hd_args)
        if r != 0:
            raise SystemExit(f"stage_profile: hdsl's {stem} returned error {r}")

    def run_halide():
        r = h_fn(*h_args)
        if r != 0:
            raise SystemExit(f"stage_profile: Halide's {h_name} returned error {r}")
    return run_hdsl, run_halide, hd_out, h_out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("case")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--target", default="host", help="host (default) or x86-64-avx2, for both sides")
    ap.add_argument("--perf", action="store_true", help="run under perf record and print its per-function report")
    args = ap.parse_args(argv)
    if args.perf:
        # (the libraries stay in the run's folder: perf report reads their symbols)
        work = Path(tempfile.mkdtemp(prefix="hdsl_stage_"))
        data = work / "perf.data"
        subprocess.run(["perf", "record", "-q", "-o", str(data), sys.executable, __file__, args.case,
                        "--runs", str(args.runs), "--target", args.target], check=True, env=dict(os.environ, HDSL_STAGE_DIR=str(work)))
        report = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--sort", "dso,sym"],
                                check=True, capture_output=True, text=True).stdout
        rows = [r for r in report.splitlines() if r.strip() and not r.startswith("#")]
        print("\n".join(rows[:40]))
        print(f"(perf data and libraries: {work})")
        return 0
    with tempfile.TemporaryDirectory(prefix="hdsl_stage_") as d:
        run_hdsl, run_halide, hd_out, h_out = build(args.case, Path(os.environ.get("HDSL_STAGE_DIR") or d), args.target)
        for _ in range(3):
            run_hdsl()
            run_halide()
        diff = np.abs(hd_out.astype(np.float64) - h_out.astype(np.float64)).max()
        th, tp = [], []
        for _ in range(args.runs):
            t = time.perf_counter()
            run_hdsl()
            th.append(time.perf_counter() - t)
            t = time.perf_counter()
            run_halide()
            tp.append(time.perf_counter() - t)
        mh, mp = np.median(th) * 1e3, np.median(tp) * 1e3
        print(f"{args.case}: hdsl {mh:.3f} ms, Halide {mp:.3f} ms (medians of {args.runs}, ahead-of-time "
              f"libraries, called in turns), hdsl/Halide {mh / mp:.3f}, max difference {diff:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
