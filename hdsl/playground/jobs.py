"""What the playground's worker processes do: check, run and show a program.

Each function takes a JSON-like request and returns a JSON-like answer; they run inside a
worker process with resource limits (hdsl/playground/sandbox.py), never in the server. A
user's mistake is an answer with `diagnostics` (the checker's positioned errors), not an
exception.

The program is checked as `playground.hl` in the examples folder (the worker's working
directory), so `use "halide_math.hl"` finds the examples' modules; a `use` of any other file
is refused before anything is read (`use NAME` reads only the stdlib).
"""
from __future__ import annotations

import base64
import io
import time
from pathlib import Path

import numpy as np

from hdsl.diagnostics import Diagnostic, HdslError

FILENAME = "playground.hl"
# caps on what one answer carries
MAX_TEXT = 1 << 20                 # a compiled form's characters
MAX_OUTPUT_ELEMENTS = 1 << 22      # an output's values (4 M: 2048 x 2048)
MAX_PRINTED = 64 << 10             # what `print` wrote


def targets() -> list[str]:
    """The targets the playground offers: the API's, less the x86-64 variants of host (the
    same machine with other instruction sets). A target added to hdsl.api.TARGETS (cuda,
    opengl) appears here by itself."""
    from hdsl.api import TARGETS
    names = [t for t in TARGETS if not t.startswith("x86-64")]
    return sorted(names, key=lambda t: t != "host")


def diagnostics_json(e: HdslError) -> list[dict]:
    """The checker's errors as the page shows them: 1-based line and column, end exclusive;
    an error in another file (a used module) is placed at the top, its file named."""
    out = []
    for d in e.diagnostics:
        where = d.span if d.span is not None and d.span.file == FILENAME else None
        text = d.message if where is not None or d.span is None else f"{d.span}: {d.message}"
        out.append({"message": text, "hint": d.hint, "severity": d.severity,
                    "line": where.line if where else 1, "col": where.col if where else 1,
                    "end_line": where.end_line if where else 1, "end_col": where.end_col if where else 1,
                    "text": d.render()})
    return out


def _refuse_foreign_uses(text: str, examples: Path | None) -> None:
    """`use "file.hl"` may name only the examples' modules (nothing is read before this)."""
    from hdsl.frontend import ast
    from hdsl.frontend.parse import parse
    found = []
    for item in parse(text, FILENAME).items:
        if not isinstance(item, ast.Use) or not item.is_path:
            continue
        path = (Path.cwd() / item.target).resolve()
        inside = examples is not None and path.is_relative_to(examples.resolve()) and path.suffix == ".hl"
        if not inside:
            found.append(Diagnostic(f"the playground reads no file but the examples' modules: "
                                    f"'{item.target}' is not one", item.target_span or item.span,
                                    "use a standard module (use filters) or an example's module "
                                    "(use \"halide_math.hl\")"))
    if found:
        raise HdslError(found)


def _load(text: str, examples: Path | None):
    from hdsl.api import loads
    _refuse_foreign_uses(text, examples)
    return loads(text, FILENAME)


def describe(p) -> dict:
    """What the page builds its controls from: inputs, params (sliders), schedules, outputs."""
    ir = p.ir
    return {
        "name": ir.name,
        "inputs": [{"name": b.name, "type": b.type.name, "dims": b.dims} for b in ir.inputs],
        "params": [{"name": q.name, "type": q.type.name,
                    "default": None if q.default is None else _scalar(q.default)} for q in ir.params],
        "schedules": [n for n in ir.schedules if n],
        "outputs": [{"name": f.name, "dims": f.dims} for f in ir.outputs],
    }


def _scalar(v):
    v = np.asarray(v)[()]
    return bool(v) if isinstance(v, np.bool_) else float(v) if isinstance(v, np.floating) else int(v)


def _json_number(v):
    """A value for JSON, which has no NaN or infinities: those as the text NumPy prints."""
    v = _scalar(v)
    return v if not isinstance(v, float) or np.isfinite(v) else str(v)


def check(req: dict, examples: Path | None) -> dict:
    """The checker's errors as you type, and the pipeline's declarations when there are none."""
    try:
        p = _load(req["source"], examples)
    except HdslError as e:
        return {"ok": False, "diagnostics": diagnostics_json(e)}
    return {"ok": True, "diagnostics": [], "pipeline": describe(p)}


# --- images -------------------------------------------------------------------------------

def display_rgba(arr: np.ndarray) -> np.ndarray:
    """An output as the page draws it, (H, W, 4) u8, opaque. Channels: 1 gray, 3 or 4 RGB
    (alpha not drawn), otherwise the first. Values: u8 as they are; bool 0 or 255; other
    integer types scaled from 0 .. the type's largest value to 0 .. 255 (negative values
    drawn as 0); floats clamped to 0 .. 1 and scaled by 255. Rounded to nearest."""
    a = arr
    if a.ndim == 3 and a.shape[2] not in (3, 4):
        a = a[:, :, 0]
    if a.ndim == 3:
        a = a[:, :, :3]
    if a.dtype == np.uint8:
        v = a
    elif a.dtype == np.bool_:
        v = a.astype(np.uint8) * 255
    elif np.issubdtype(a.dtype, np.integer):
        top = float(np.iinfo(a.dtype).max)
        v = np.rint(np.clip(a.astype(np.float64), 0, top) * (255.0 / top)).astype(np.uint8)
    else:
        v = np.rint(np.clip(np.nan_to_num(a.astype(np.float64), nan=0.0), 0, 1) * 255).astype(np.uint8)
    if v.ndim == 2:
        v = np.repeat(v[:, :, None], 3, axis=2)
    out = np.full(v.shape[:2] + (4,), 255, np.uint8)
    out[:, :, :3] = v
    return out


def png_data_url(arr: np.ndarray) -> str:
    from PIL import Image
    buf = io.BytesIO()
    Image.fromarray(display_rgba(arr), "RGBA").save(buf, "PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def load_input(spec: dict, images: Path | None, work: Path) -> np.ndarray:
    """An input: {"sample": NAME} (a file of the images folder) or {"upload": BASE64, "name": N}."""
    from hdsl.runtime.images import ImageError, load_image
    if "sample" in spec:
        name = spec["sample"]
        if images is None or "/" in name or "\\" in name or not (images / name).is_file():
            raise HdslError(f"there is no sample image '{name}'", None)
        path = images / name
    else:
        suffix = Path(str(spec.get("name", "upload.png"))).suffix.lower()
        if suffix not in (".png", ".npy", ".jpg", ".jpeg"):
            raise HdslError(f"an uploaded image must be .png, .jpg or .npy, not '{suffix}'", None)
        path = work / f"upload{suffix}"
        path.write_bytes(base64.b64decode(spec["upload"]))
    try:
        return load_image(path)
    except ImageError as e:
        raise HdslError(e.message, None, e.hint) from None


def _fit_input(arr: np.ndarray, b) -> np.ndarray:
    """An image as input `b`, which must have its type and dims (as on the command line);
    a gray image with one channel fits a 2-D input."""
    if arr.ndim == 3 and b.dims == 2 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim != b.dims or arr.dtype != np.dtype(b.type.dtype):
        from hdsl.ir.types import from_dtype
        try:
            held = from_dtype(arr.dtype).name
        except ValueError:
            held = str(arr.dtype)
        raise HdslError(f"input '{b.name}' is {b.type}[{b.dims}] but the image holds {held} values in "
                        f"{arr.ndim} dimensions {tuple(arr.shape)}", None,
                        f"choose a {b.type}[{b.dims}] image (the list shows each sample's type), or change "
                        f"the declaration")
    return np.ascontiguousarray(arr)


def sample_images(images: Path | None) -> list[dict]:
    """The sample images with their hdsl type and dims, so the page can offer matching ones."""
    from hdsl.ir.types import from_dtype
    from hdsl.runtime.images import ImageError, load_image
    out = []
    # (the plain photographs first: what the page offers by default for an input)
    order = lambda p: (not p.name.startswith(("gray", "rgb")), p.name)  # noqa: E731
    for path in sorted(images.iterdir(), key=order) if images is not None and images.is_dir() else []:
        if path.suffix.lower() not in (".png", ".npy", ".jpg", ".jpeg"):
            continue
        try:
            arr = load_image(path)
            t = from_dtype(arr.dtype).name
        except (ImageError, ValueError):
            continue
        out.append({"name": path.name, "type": t, "dims": arr.ndim, "shape": list(arr.shape)})
    return out


def _check_request(req: dict) -> None:
    """The shapes of a run request's fields (the page sends them right; anything else is told)."""
    ok = (isinstance(req.get("inputs") or {}, dict)
          and all(isinstance(v, dict) and ("sample" in v or "upload" in v) for v in (req.get("inputs") or {}).values())
          and isinstance(req.get("params") or {}, dict)
          and isinstance(req.get("size") or [], list)
          and all(isinstance(v, (str, type(None))) for v in (req.get("target"), req.get("schedule"))))
    if not ok:
        raise HdslError("the run request is malformed: inputs should be {NAME: {\"sample\": FILE} or "
                        "{\"upload\": BASE64, \"name\": FILE}}, params {NAME: VALUE}, size [W, H, ...], "
                        "target and schedule names", None)


def output_sizes(c, inputs, size) -> list[list[int]]:
    """Each output's extents: `size` ([W, H, C...], as --size; dims left out are the first
    input's), else the first input's (256 x 256 x 3 for a program without inputs)."""
    if size:
        if not all(isinstance(v, int) and v > 0 for v in size):
            raise HdslError(f"the output size {size} should be positive whole numbers", None)
        first = next(iter(inputs.values()), None)
        return [(list(size) + (list(first.shape[len(size):f.dims]) if first is not None else []))[:f.dims]
                for f in c.ir.outputs]
    if not c.ir.inputs:
        return [[256, 256, 3][:f.dims] for f in c.ir.outputs]
    return c.default_sizes(inputs)


def run(req: dict, examples: Path | None, images: Path | None, work: Path) -> dict:
    """Compile for the chosen target and schedule, run on the given inputs and params."""
    t0 = time.perf_counter()
    try:
        _check_request(req)
        p = _load(req["source"], examples)
        target = req.get("target") or "host"
        if target not in targets():
            raise HdslError(f"unknown target '{target}'", None, "targets: " + ", ".join(targets()))
        c = p.compile(target=target, schedule=req.get("schedule") or None)
        compile_s = time.perf_counter() - t0
        kwargs, shown = {}, {}
        given = req.get("inputs") or {}
        for b in p.ir.inputs:
            if b.name not in given:
                raise HdslError(f"input '{b.name}' has no image", None, "choose a sample or upload one")
            arr = _fit_input(load_input(given[b.name], images, work), b)
            kwargs[b.name] = arr
            shown[b.name] = png_data_url(arr)
        for q in p.ir.params:
            v = (req.get("params") or {}).get(q.name)
            if v is not None:
                kwargs[q.name] = v
        inputs, params = c._bind(kwargs)
        sizes = output_sizes(c, inputs, req.get("size"))
        for f, s in zip(p.ir.outputs, sizes):
            if int(np.prod(s)) > MAX_OUTPUT_ELEMENTS:
                raise HdslError(f"output '{f.name}' would have {int(np.prod(s))} values; the playground "
                                f"draws at most {MAX_OUTPUT_ELEMENTS}", None, "use a smaller input")
        t1 = time.perf_counter()
        result = c._run(inputs, params, sizes)
        run_s = time.perf_counter() - t1
    except HdslError as e:
        return {"ok": False, "diagnostics": diagnostics_json(e)}
    results = result if isinstance(result, tuple) else (result,)
    outputs = [{"name": f.name, "shape": list(r.shape), "dtype": str(r.dtype),
                "min": _json_number(r.min()), "max": _json_number(r.max()), "png": png_data_url(r)}
               for f, r in zip(p.ir.outputs, results)]
    cached = bool(c.native is not None and c.native.timings.get("cached"))
    return {"ok": True, "outputs": outputs, "inputs": shown, "compile_ms": compile_s * 1e3,
            "run_ms": run_s * 1e3, "cached": cached, "target": target, "pipeline": describe(p)}


def view(req: dict, examples: Path | None) -> dict:
    """A compiled form: the loop nest after a pass, LLVM IR, assembly, the HTML report, a cuda
    target's PTX or target opengl's GLSL (hdsl.aot.compiled_form, as `hdsl lower` prints them)."""
    from hdsl.aot import compiled_form
    from hdsl.ir.expr import clear_interned, no_collection
    kind = req.get("kind", "stmt")
    try:
        p = _load(req["source"], examples)
        target = req.get("target") or "host"
        if target.startswith("interp"):
            target = "host"      # (the evaluator has no compiled form: the CPU's)
        with no_collection():
            text = compiled_form(p.ir, kind, req.get("schedule") or None, target, req.get("after") or None)
        clear_interned()
    except HdslError as e:
        return {"ok": False, "diagnostics": diagnostics_json(e)}
    cut = len(text) > MAX_TEXT
    return {"ok": True, "kind": kind, "text": text[:MAX_TEXT], "truncated": cut}
