"""`hdsl check | run | compile | bench | lower | fmt | lsp`: the command line.

A user error prints `file:line:col: error: …` with the line, a caret and a
hint, and exits 1; only a bug in hdsl itself (InternalError or an unexpected
exception) prints a traceback, and only with --debug.
"""
from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from hdsl.diagnostics import HdslError, InternalError, read_source


def _parse_assignments(items, what) -> dict[str, str]:
    out = {}
    value = "PATH" if what == "input" else "VALUE"
    for item in items or []:
        if "=" not in item:
            raise HdslError(f"--{what} '{item}' should be NAME={value}", None)
        k, v = item.split("=", 1)
        k = k.strip()
        if k in out:
            raise HdslError(f"--{what} {k}=… is given twice ({k}={out[k]} and {k}={v})", None,
                            f"give each {what} once")
        out[k] = v
    return out


def _at_least(low: int):
    """An argparse type: a whole number of at least `low` (--time, --runs: 1; --workers: 0)."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
        if n < low:
            raise argparse.ArgumentTypeError(f"{n} is not a positive count (give 1 or more)" if low == 1
                                             else f"{n} is less than {low} (give {low} or more)")
        return n
    return parse


_positive_int = _at_least(1)
_count = _at_least(0)


def _int_list(option: str, text: str, form: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",")]
    except ValueError:
        raise HdslError(f"{option} '{text}' should be {form}", None) from None


def _param_value(p, text: str):
    t = p.type
    try:
        if t.is_bool():
            if text.lower() not in ("true", "false", "1", "0"):
                raise ValueError
            return text.lower() in ("true", "1")
        if t.is_float():
            return float(text)
        return int(text, 0)
    except ValueError:
        raise HdslError(f"--param {p.name}={text}: '{text}' is not a {t} value", None) from None


def cmd_check(args) -> int:
    from hdsl.frontend.elaborate import check_source
    status = 0
    for path in args.files:
        try:
            text = read_source(path)
            p = check_source(text, path)
            if p is not None and args.lower:
                lower_schedules(p)
        except OSError as e:
            print(f"error: cannot read {path}: {e.strerror}", file=sys.stderr)
            status = 1
        except HdslError as e:
            print(e.render(), file=sys.stderr)
            status = 1
        else:
            print(f"{path}: ok" + (" (every schedule lowers)" if args.lower and p is not None else ""))
    return status


def lower_schedules(p) -> None:
    """Lower every schedule block of `p` (no code generation), for `hdsl check --lower`: the
    errors only the compiler finds (a compute_at whose loop does not enclose every use, a
    store_at outside its compute_at, bounds it cannot infer...). Not by default: the reference
    evaluator runs programs the native compiler refuses, and lowering a deep pyramid left
    wholly inline (the default schedule) takes as long as compiling it. An error with no
    position of its own points at its schedule block. The blocks of GPU targets are lowered
    for them (`schedule cuda` for cuda-emulate, `schedule opengl` for opengl), with the GPU
    nesting rules."""
    from hdsl.diagnostics import Diagnostic
    from hdsl.ir.expr import clear_interned, no_collection
    from hdsl.lower.lower import lower
    from hdsl.schedule.record import GPU_SCHEDULES
    found = []
    for name in list(p.schedules) or [None]:
        block = p.schedules.get(name)
        target = {"cuda": "cuda-emulate", "opengl": "opengl"}.get(name, "host") if name in GPU_SCHEDULES else "host"
        try:
            with no_collection():
                lower(p, name, target)
        except HdslError as e:
            for d in e.diagnostics:
                if d.span is None and block is not None:
                    what = f"schedule '{name}'" if name else "the schedule"
                    d = Diagnostic(f"{what}: {d.message}", block.span, d.hint, d.severity)
                found.append(d)
        finally:
            clear_interned()
    if found:
        raise HdslError(found)


def inputs_and_params(p, args, random_size=None) -> dict:
    """The --input images and --param values as keyword arguments of the pipeline; with
    random_size and no --input at all, random inputs of that size."""
    from hdsl.runtime.images import ImageError, load_image
    kwargs = {}
    given_inputs = _parse_assignments(args.input, "input")
    input_names = {b.name: b for b in p.ir.inputs}
    for name, path in given_inputs.items():
        if name not in input_names:
            raise HdslError(f"pipeline '{p.name}' has no input '{name}'", None,
                            "its inputs: " + (", ".join(input_names) or "(none)"))
        try:
            arr = load_image(path)
        except ImageError as e:
            raise HdslError(e.message, None, e.hint) from None
        b = input_names[name]
        if arr.ndim == 3 and b.dims == 2 and arr.shape[2] == 1:
            arr = arr[:, :, 0]
        if arr.dtype != b.type.dtype:
            raise HdslError(f"input '{name}' is {b.type} but {path} holds {arr.dtype} values", None,
                            f"declare the input as {_type_of(arr.dtype)}, or convert the image first")
        kwargs[name] = arr
    missing = [b.name for b in p.ir.inputs if b.name not in given_inputs]
    if missing and random_size is not None and not given_inputs:
        kwargs.update(random_inputs(p.ir, random_size))
    elif missing:
        raise HdslError(f"input '{missing[0]}' is missing", None,
                        " ".join(f"--input {n}=PATH" for n in missing))
    params = {q.name: q for q in p.ir.params}
    for name, text in _parse_assignments(args.param, "param").items():
        if name not in params:
            raise HdslError(f"pipeline '{p.name}' has no param '{name}'", None,
                            "its params: " + (", ".join(params) or "(none)"))
        kwargs[name] = _param_value(params[name], text)
    missing = [q.name for q in p.ir.params if q.name not in kwargs and q.default is None]
    if missing:
        raise HdslError(f"param '{missing[0]}' has no default and is not given", None,
                        " ".join(f"--param {n}=VALUE" for n in missing))

    return kwargs


def _is_batch(args) -> bool:
    import glob
    ins = _parse_assignments(args.input, "input")
    return (any(glob.has_magic(v) for v in ins.values()) or args.scheduler is not None or args.resume
            or args.workers is not None or any("{" in o for o in args.output or []))


def _paths_and_params(p, args) -> tuple[dict, dict]:
    """The --input paths (or patterns), every input given once, and the --param values."""
    ins = _parse_assignments(args.input, "input")
    names = [b.name for b in p.ir.inputs]
    for k in ins:
        if k not in names:
            raise HdslError(f"pipeline '{p.name}' has no input '{k}'", None, "its inputs: " + (", ".join(names) or "(none)"))
    missing = [n for n in names if n not in ins]
    if missing:
        raise HdslError(f"input '{missing[0]}' is missing", None, " ".join(f"--input {n}=PATH" for n in missing))
    pdecl = {q.name: q for q in p.ir.params}
    params = {}
    for k, text in _parse_assignments(args.param, "param").items():
        if k not in pdecl:
            raise HdslError(f"pipeline '{p.name}' has no param '{k}'", None,
                            "its params: " + (", ".join(pdecl) or "(none)"))
        params[k] = _param_value(pdecl[k], text)
    return ins, params


def cmd_batch(args) -> int:
    """`hdsl run` over many images: an --input pattern and an --output template."""
    import hdsl
    from hdsl.scale.batch import batch, progress_printer
    for flag, given in (("--time", args.time), ("--size", args.size), ("--min", args.min)):
        if given:
            raise HdslError(f"{flag} does not go with a batch (an --input pattern or --output template)", None,
                            "run one image at a time for it")
    p = hdsl.load(args.file)
    p = p.compile(target=args.target, schedule=args.schedule, use_cache=not args.no_cache)
    ins, params = _paths_and_params(p, args)
    outs = args.output or []
    if not outs:
        raise HdslError("no --output given", None, "e.g. --output 'out/{stem}.png'")
    named = {}
    for spec in outs:
        if "=" in spec and spec.split("=", 1)[0].isidentifier():
            k, v = spec.split("=", 1)
            named[k] = v
        elif len(outs) == 1:
            named = spec
        else:
            raise HdslError(f"--output '{spec}': with several --output give each as NAME=TEMPLATE", None)
    result = batch(p, ins, named, params, scheduler=args.scheduler, workers=args.workers, resume=args.resume,
                   progress=progress_printer())
    failed = result.failed
    done, skipped = len(result.done), len(result.skipped)
    print(f"{len(result)} images: {done} done" + (f", {skipped} skipped (--resume: done before)" if skipped else "")
          + (f", {len(failed)} failed" if failed else "") + f" in {result.seconds:.1f} s")
    if failed:
        print(f"error: {len(failed)} of {len(result)} images failed: " + ", ".join(r.name for r in failed[:5])
              + (", ..." if len(failed) > 5 else ""), file=sys.stderr)
        print("hint: their errors are above; rerun with --resume to run only the images not done", file=sys.stderr)
        return 1
    return 0


LARGE = (".zarr", ".tif", ".tiff")


def _is_large(args) -> bool:
    paths = list(_parse_assignments(args.input, "input").values()) + \
        [o.split("=", 1)[1] if "=" in o and o.split("=", 1)[0].isidentifier() else o for o in args.output or []]
    return args.tile is not None or any(Path(q.rstrip("/")).suffix.lower() in LARGE for q in paths)


def cmd_large(args) -> int:
    """`hdsl run` on images larger than memory: zarr or TIFF in or out, computed tile by tile with
    p.on_dask (docs/scale.md), in threads here or on the Dask cluster of --scheduler."""
    import contextlib

    import hdsl
    try:
        import dask
        from hdsl.scale.io import open_image, save_image as save_large
    except ImportError as e:
        raise HdslError(f"zarr and TIFF images need Dask: {e}", None, "pip install 'hdsl[dask]'") from None
    if args.time or args.workers is not None or args.resume:
        raise HdslError("--time, --workers and --resume do not go with a large image (zarr or TIFF)", None)
    tile = _int_list("--tile", args.tile, "W,H") if args.tile else [2048, 2048]
    if len(tile) != 2 or min(tile) < 1:
        raise HdslError(f"--tile '{args.tile}' should be W,H (positive)", None)
    p = hdsl.load(args.file).compile(target=args.target, schedule=args.schedule, use_cache=not args.no_cache)
    given, params = _paths_and_params(p, args)
    kwargs = {**{k: open_image(v, chunks=tile[::-1]) for k, v in given.items()}, **params}
    outs = [f.name for f in p.ir.outputs]
    dests = {}
    for spec in args.output or []:
        if "=" in spec and spec.split("=", 1)[0] in outs:
            k, v = spec.split("=", 1)
            dests[k] = v
        elif len(outs) == 1:
            dests[outs[0]] = spec
        else:
            raise HdslError(f"pipeline '{p.name}' has {len(outs)} outputs; name each one", None,
                            "--output " + " --output ".join(f"{n}=PATH" for n in outs))
    if not dests:
        raise HdslError("no --output given", None, "e.g. --output out.zarr")
    size = _int_list("--size", args.size, "W[,H[,C]]") if args.size else None
    origin = _int_list("--min", args.min, "X[,Y[,C]]") if args.min else None
    t0 = time.perf_counter()
    result = p.on_dask(size=size, min=origin, tile=tuple(tile), **kwargs)
    result = result if isinstance(result, tuple) else (result,)
    client = None
    if args.scheduler:
        from distributed import Client
        try:
            client = Client(args.scheduler, timeout="10s")
        except (OSError, TimeoutError) as e:
            raise HdslError(f"cannot reach the Dask scheduler at {args.scheduler}: {e}", None,
                            "start one with `dask scheduler` and workers with `dask worker ADDRESS`") from None
    try:
        with dask.config.set(scheduler="threads") if client is None else contextlib.nullcontext():
            for name, arr in zip(outs, result):
                if name not in dests:
                    continue
                path = dests[name]
                if Path(path).suffix.lower() in LARGE + (".npy",):
                    save_large(arr, path)
                else:
                    from hdsl.runtime.images import ImageError, save_image
                    _save(path, arr.compute(), save_image, ImageError)
    finally:
        if client is not None:
            client.close()
    shape = "x".join(str(n) for n in result[0].shape[1::-1] + result[0].shape[2:])
    print(f"{', '.join(dests.values())}: {shape}, {result[0].npartitions} tiles, {time.perf_counter() - t0:.1f} s")
    return 0


def cmd_run(args) -> int:
    import hdsl
    from hdsl.runtime.images import ImageError, save_image
    if _is_large(args):
        return cmd_large(args)
    if _is_batch(args):
        return cmd_batch(args)

    t0 = time.perf_counter()
    p = hdsl.load(args.file)
    target = args.target
    p = p.compile(target=target, schedule=args.schedule, use_cache=not args.no_cache)
    compile_s = time.perf_counter() - t0

    kwargs = inputs_and_params(p, args, random_size=None)

    outputs = [(f.name, f) for f in p.ir.outputs]
    dests = {}
    for spec in args.output or []:
        if "=" in spec and not Path(spec).exists() and spec.split("=", 1)[0].isidentifier():
            name, path = spec.split("=", 1)
            if name not in dict(outputs):
                raise HdslError(f"pipeline '{p.name}' has no output '{name}'", None,
                                "its outputs: " + ", ".join(n for n, _ in outputs))
        else:
            if len(outputs) != 1:
                raise HdslError(f"pipeline '{p.name}' has {len(outputs)} outputs; name each one", None,
                                "--output " + " --output ".join(f"{n}=PATH" for n, _ in outputs))
            name, path = outputs[0][0], spec
        if name in dests:
            raise HdslError(f"output '{name}' is given twice (--output {dests[name]} and {path})", None,
                            "give each output one --output")
        dests[name] = path
    if not dests:
        raise HdslError("no --output given", None, "e.g. --output out.png")

    inputs, pvals = p._bind(kwargs)
    if args.size:
        size = _int_list("--size", args.size, "W[,H[,C]]")
        if any(s <= 0 for s in size):
            raise HdslError(f"--size '{args.size}': every extent must be positive", None)
        sizes = []
        for _, f in outputs:
            if len(size) < f.dims and inputs:
                first = next(iter(inputs.values()))
                size = size + list(first.shape[len(size):f.dims])
            sizes.append(size[:f.dims])
    else:
        sizes = p.default_sizes(inputs)
    origin = _int_list("--min", args.min, "X[,Y[,C]]") if args.min else None

    runs = args.time or 1
    times = []
    for _ in range(runs):
        t1 = time.perf_counter()
        result = p._run(inputs, pvals, sizes, origin)
        times.append(time.perf_counter() - t1)
    results = result if isinstance(result, tuple) else (result,)
    for (name, _), arr in zip(outputs, results):
        if name in dests:
            _save(dests[name], arr, save_image, ImageError)
    if args.time:
        cached = p.native is not None and p.native.timings.get("cached")
        print(f"compile: {compile_s * 1e3:.1f} ms" + (" (from the cache)" if cached else ""))
        print(f"run ({target}, {runs} runs): median {np.median(times) * 1e3:.2f} ms, min {min(times) * 1e3:.2f} ms")
    return 0


def _save(path: str, arr, save_image, ImageError) -> None:
    """Write one output, making its folder; a path through a file is the user's error."""
    folder = Path(path).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((q for q in [folder, *folder.parents] if q.exists() and not q.is_dir()), folder)
        raise HdslError(f"cannot write '{path}': '{blocker}' is a file, not a folder", None,
                        "choose another --output path, or move that file away") from None
    except OSError as e:
        raise HdslError(f"cannot write '{path}': cannot create the folder '{folder}': {e.strerror or e}",
                        None) from None
    try:
        save_image(path, arr)
    except ImageError as e:
        raise HdslError(e.message, None, e.hint) from None


def random_inputs(ir, size: list[int]) -> dict[str, np.ndarray]:
    """Random inputs of W x H (x C, default 3) for `hdsl bench` and `hdsl tune`, in the
    (H, W[, C]) layout (seeded: the same every run)."""
    rng = np.random.RandomState(0)
    inputs = {}
    for b in ir.inputs:
        shape = [size[1], size[0]] + ([size[2] if len(size) > 2 else 3] if b.dims > 2 else [])
        shape = shape[:b.dims] if b.dims >= 2 else [size[0]]
        dt = b.type.dtype
        if b.type.is_float():
            arr = rng.rand(*shape).astype(dt)
        elif b.type.is_bool():
            arr = rng.rand(*shape) < 0.5
        else:
            info = np.iinfo(dt)
            arr = rng.randint(max(info.min, -(1 << 30)), min(info.max, 1 << 30) + 1, shape).astype(dt)
        if arr.ndim >= 3:         # planar storage behind the (H, W, C) view: x has stride 1
            arr = np.ascontiguousarray(np.moveaxis(arr, 2, 0)).transpose(1, 2, 0)
        inputs[b.name] = arr
    return inputs


def _size_arg(flag: str, text: str) -> list[int]:
    try:
        size = [int(v) for v in text.split(",")]
    except ValueError:
        raise HdslError(f"{flag} '{text}' should be W,H[,C]", None) from None
    if len(size) < 2 or any(v <= 0 for v in size):
        raise HdslError(f"{flag} '{text}' needs a positive width and height", None)
    return size


def cmd_bench(args) -> int:
    """Time one pipeline on random inputs: compile cold and from the cache, then runs."""
    import hdsl
    size = _size_arg("--size", args.size)
    p0 = hdsl.load(args.file)
    inputs = random_inputs(p0.ir, size)
    from hdsl.api import to_buffer_layout
    from hdsl.bench import compile_cold_and_cached, output_arrays
    c, cold, cached = compile_cold_and_cached(args.file, args.target, args.schedule)
    osize = _int_list("--output-size", args.output_size, "W[,H[,C]]") if args.output_size else []
    if any(v <= 0 for v in osize):
        raise HdslError(f"--output-size '{args.output_size}': every extent must be positive", None)
    if all(len(osize) >= f.dims for f in c.ir.outputs):
        sizes = [osize[:f.dims] for f in c.ir.outputs]
    else:       # dims left out keep the default: the first input's extents
        sizes = c.default_sizes({k: to_buffer_layout(v, v.ndim) for k, v in inputs.items()})
        sizes = [(osize + s[len(osize):])[:len(s)] for s in sizes]
    arrays = output_arrays(c, sizes)
    target = tuple(arrays) if len(arrays) > 1 else arrays[0]
    c.realize_into(target, **inputs)
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        c.realize_into(target, **inputs)
        times.append(time.perf_counter() - t0)
    out_size = sizes[0][:2]
    if out_size != size[:2]:
        print(f"{args.file}: input {size[0]}x{size[1]}, output {'x'.join(map(str, sizes[0]))}, "
              f"target {args.target}, {len(times)} runs")
        size = out_size + [1] * (2 - len(out_size))
    else:
        print(f"{args.file}: {size[0]}x{size[1]}, target {args.target}, {len(times)} runs")
    mp = size[0] * size[1] / 1e6          # (of the first output)
    med = float(np.median(times))
    print(f"compile: cold {cold:.2f} s, from the cache {cached * 1e3:.1f} ms")
    print(f"run: median {med * 1e3:.2f} ms, min {min(times) * 1e3:.2f} ms, {med * 1e3 / mp:.3f} ms per megapixel")
    return 0


def _type_of(dtype) -> str:
    from hdsl.ir.types import from_dtype
    try:
        return from_dtype(dtype).name
    except ValueError:
        return str(dtype)


def cmd_lower(args) -> int:
    import hdsl
    from hdsl.aot import compiled_form
    from hdsl.ir.printer import stmt_str
    from hdsl.lower.lower import PASSES, lower
    from hdsl.target import parse_target
    target = parse_target(args.target)
    p = hdsl.load(args.file)
    if args.emit in ("llvm", "asm", "ptx", "glsl"):
        text = compiled_form(p.ir, args.emit, args.schedule, target, shifted=args.shifted)
        print(text, end="" if args.emit in ("ptx", "glsl") else "\n")
        return 0
    low = lower(p.ir, args.schedule, target, shift_outputs=args.shifted)
    if args.debug_level:
        # every pass's result in order (with --debug 2, its time too)
        for name in PASSES:
            print(f"# after {name}" + (f" ({low.timings[name] * 1e3:.2f} ms)" if args.debug_level > 1 else ""))
            print(stmt_str(low.stages[name]), end="")
        return 0
    print(compiled_form(p.ir, "stmt", args.schedule, args.target, args.print_after, low=low), end="")
    if args.timings:
        for name in PASSES:
            print(f"# {name}: {low.timings[name] * 1e3:.2f} ms", file=sys.stderr)
    return 0


def cmd_compile(args) -> int:
    import hdsl
    from hdsl.aot import compile_to_files
    p = hdsl.load(args.file)
    from hdsl.target import parse_target
    tgt = parse_target(args.target)
    kinds = args.emit if args.emit is not None else \
        ("ptx" if tgt.device == "cuda" else "glsl" if tgt.arch == "opengl" else "o,h")
    emit = tuple(k.strip() for k in kinds.split(",") if k.strip())
    written = compile_to_files(p.ir, args.o, args.target, args.schedule, emit)
    for kind in emit:
        print(written[kind])
    return 0


def _version() -> str:
    from hdsl import __version__
    return __version__


def cmd_fmt(args) -> int:
    """Rewrite each file in the canonical layout (hdsl/editor/fmt.py); with --check, only say
    which files it would change. `-` reads standard input and writes the result out."""
    import os
    from hdsl.editor.fmt import format_source
    from hdsl.runtime.files import write_atomic
    status = 0
    for path in args.files:
        try:
            text = sys.stdin.read() if path == "-" else read_source(path)
            new = format_source(text, "<stdin>" if path == "-" else path)
        except OSError as e:
            print(f"error: cannot read {path}: {e.strerror}", file=sys.stderr)
            status = 1
            continue
        except HdslError as e:
            print(e.render(), file=sys.stderr)
            status = 1
            continue
        if path == "-":
            sys.stdout.write(new)
        elif new != text and args.check:
            print(f"{path}: would reformat", file=sys.stderr)
            status = 1
        elif new != text:
            try:
                write_atomic(path, new.encode("utf-8"), os.stat(path).st_mode & 0o7777)
            except OSError as e:
                print(f"error: cannot write {path}: {e.strerror}", file=sys.stderr)
                status = 1
                continue
            print(f"{path}: formatted")
    return status

def cmd_schedule(args) -> int:
    """Print a schedule as schedule text: the automatic one (the default) or a block of the file."""
    import hdsl
    from hdsl.lower.lower import choose_schedule
    from hdsl.schedule.auto import block_text, schedule_text
    p = hdsl.load(args.file)
    name = args.schedule or "auto"
    # `--schedule default`: the unnamed block (unless a block is named so)
    sched = choose_schedule(p.ir, None if name == "default" and name not in p.ir.schedules else name, args.target)
    text = schedule_text(p.ir, sched) if sched is not None else ""
    what = "the automatic schedule" if name == "auto" else f"schedule '{name}'" if sched.name else "the default schedule"
    print(block_text(text, args.name, f"{what} of {args.file} for {args.target}"), end="")
    return 0


def cmd_tune(args) -> int:
    """The 2013 paper's stochastic search; the best schedule is written into the file."""
    import datetime

    import hdsl
    from hdsl.schedule.tune import progress_line, tune, write_block, genome_text
    text = read_source(args.file)
    p = hdsl.load(args.file)
    size = _size_arg("--size", args.size)
    kwargs = inputs_and_params(p, args, random_size=size)
    inputs = {b.name: kwargs[b.name] for b in p.ir.inputs}
    params = {k: v for k, v in kwargs.items() if k not in inputs}
    sizes = p.default_sizes({k: hdsl.api.to_buffer_layout(v, v.ndim) for k, v in inputs.items()}) \
        if p.ir.inputs else [size[:f.dims] for f in p.ir.outputs]
    if args.output_size:
        osize = _size_arg("--output-size", args.output_size)
        sizes = [(osize + s[len(osize):])[:len(s)] for s in sizes]
    print(f"tuning {args.file} on {'x'.join(map(str, sizes[0]))}: computing the reference with the evaluator",
          file=sys.stderr)
    expected = p.realize(sizes if len(sizes) > 1 else sizes[0], **kwargs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    best, history = tune(p.ir, text, args.file, inputs, params, sizes if len(sizes) > 1 else sizes[0], expected,
                         trials=args.trials, minutes=args.minutes, seed=args.seed, limit_s=args.timeout,
                         progress=progress_line(args.trials), file_seeds=not args.no_file_seeds)
    print(file=sys.stderr)
    if best is None or best.time_ms == float("inf"):
        reasons = sorted({r.why for r in history})[:3]
        raise HdslError(f"no candidate schedule of '{p.name}' ran correctly", None,
                        "; ".join(reasons) or "give a larger budget (--trials, --minutes)")
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    comment = (f"hdsl tune: {best.time_ms:.3f} ms (median) on {'x'.join(map(str, sizes[0]))}, host, {when}; "
               f"best of {len(history)} candidates (from {best.origin})" +
               (f", median of {len(best.rounds)} rounds interleaved with the seeds and the best" if best.rounds else ""))
    write_block(args.file, genome_text(p.ir, best.genome), args.name, comment)
    ok = sum(r.time_ms < float("inf") for r in history)
    print(f"{args.file}: wrote schedule {args.name}: {best.time_ms:.3f} ms ({ok} of {len(history)} candidates "
          f"ran correctly); use it with --schedule {args.name}")
    return 0


def cmd_lsp(args) -> int:
    try:
        from hdsl.editor.lsp import main as serve
    except ImportError as e:
        raise HdslError(f"hdsl lsp needs the language server library: {e}", None,
                        "pip install 'hdsl[lsp]' (pygls)") from None
    return serve()


def cmd_playground(args) -> int:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        raise HdslError(f"hdsl playground needs a web server library: {e}", None,
                        "pip install 'hdsl[playground]' (Starlette and uvicorn)") from None
    from hdsl.playground.sandbox import Limits
    from hdsl.playground.server import BUNDLE, default_examples, missing_bundle_message, serve
    if not BUNDLE.is_file():
        raise HdslError(missing_bundle_message(), None)
    examples = Path(args.examples) if args.examples else default_examples()
    if examples is not None and not examples.is_dir():
        raise HdslError(f"--examples {args.examples}: no such folder", None)
    wall = args.wall_seconds or args.cpu_seconds * 1.5 + 5
    serve(args.host, args.port, examples, Limits(cpu_s=args.cpu_seconds, wall_s=wall, memory_mb=args.memory_mb),
          args.workers)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from hdsl.lower.lower import PASSES
    native = "host (default), x86-64-avx2 or x86-64-avx512 (each may end in -fast_math)"
    gpu = "; GPU: cuda, cuda-sm_80, cuda-sm_90, cuda-emulate (GPU schedules run on the CPU), opengl"
    ap = argparse.ArgumentParser(prog="hdsl", description="hdsl: image-processing pipelines, Halide-style.")
    ap.add_argument("--debug", action="store_true", help="show Python tracebacks for internal errors")
    ap.add_argument("--version", action="version", version=f"hdsl {_version()}", help="print hdsl's version and exit")
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="check .hl files and print diagnostics")
    c.add_argument("files", nargs="+", metavar="FILE", help="the .hl files to check")
    c.add_argument("--lower", action="store_true",
                   help="also lower every schedule block (no code generation): report what the native "
                        "compiler would refuse")
    c.set_defaults(fn=cmd_check)
    r = sub.add_parser("run", help="run a pipeline on image files (or a batch of them: an --input pattern)")
    r.add_argument("file", metavar="FILE", help="the .hl program")
    r.add_argument("--input", action="append", metavar="NAME=PATH",
                   help="the image (.png, .jpg, .npy) for input NAME; one per input; a quoted pattern "
                        "(img='photos/*.png') runs a batch, one image after another or in parallel")
    r.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="a value for param NAME (params with a default may be left out)")
    r.add_argument("--output", action="append", metavar="PATH|NAME=PATH",
                   help="where to write the output (.png, .jpg, .npy); NAME=PATH for each output of a "
                        "multi-output pipeline")
    r.add_argument("--size", metavar="W[,H[,C]]",
                   help="the outputs' extents (default: the first input's)")
    r.add_argument("--min", metavar="X[,Y[,C]]",
                   help="the outputs' first coordinates (default 0,0): --min 1,1 --size W-2,H-2 runs a "
                        "3x3 stencil that has no boundary condition (negative ones: --min=-4,-4)")
    r.add_argument("--target", default="host", metavar="T", help=native + ", or interp (the reference evaluator)" + gpu)
    r.add_argument("--schedule", metavar="NAME", help="the schedule block to use (default: the unnamed one; "
                                                      "auto: the automatic scheduler's)")
    r.add_argument("--time", type=_positive_int, metavar="N", help="run N times; print median and min")
    r.add_argument("--no-cache", action="store_true", help="compile afresh, ignoring the on-disk cache")
    r.add_argument("--workers", type=_count, metavar="N",
                   help="a batch (an --input pattern such as img='photos/*.png' and an --output template "
                        "such as 'out/{stem}.png', fields {stem} {name} {parent} {index}): run it in N local "
                        "processes (default: one per CPU; 0: in this process)")
    r.add_argument("--scheduler", metavar="ADDRESS",
                   help="run a batch on the Dask cluster at ADDRESS (tcp://host:8786; needs "
                        "pip install 'hdsl[dask]'; the workers must see the same files)")
    r.add_argument("--tile", metavar="W,H",
                   help="an image larger than memory (an --input or --output that is .zarr, .tif or .tiff): "
                        "compute it in tiles of W x H output pixels (default 2048,2048), each from the input "
                        "region bounds inference gives, in threads or on --scheduler's cluster (needs "
                        "pip install 'hdsl[dask]')")
    r.add_argument("--resume", action="store_true",
                   help="in a batch, skip the images whose outputs exist (each is written whole or not at all)")
    r.set_defaults(fn=cmd_run)
    co = sub.add_parser("compile", help="compile ahead of time to an object file, shared library and C header")
    co.add_argument("file", metavar="FILE", help="the .hl program")
    co.add_argument("--target", default="host", metavar="T", help=native)
    co.add_argument("--schedule", metavar="NAME", help="the schedule block to use (default: the unnamed one)")
    co.add_argument("-o", default=".", metavar="DIR", help="output directory (default: .)")
    co.add_argument("--emit", default=None, metavar="KINDS",
                    help="comma-separated: o,so,h,ll,s,stmt,html (default o,h); for a cuda target ptx,stmt,html "
                         "(default ptx: every kernel in one PTX file); for opengl glsl,stmt (default glsl)")
    co.set_defaults(fn=cmd_compile)
    be = sub.add_parser("bench", help="time a pipeline on random inputs (compile cold, cached, and runs)")
    be.add_argument("file", metavar="FILE", help="the .hl program")
    be.add_argument("--size", default="1024,1024", metavar="W,H[,C]",
                    help="the random inputs' extents (default 1024,1024; C defaults to 3)")
    be.add_argument("--output-size", metavar="W[,H[,C]]",
                    help="the outputs' extents (default: the first input's), e.g. for a pipeline whose "
                         "output is smaller than its input")
    be.add_argument("--target", default="host", metavar="T", help=native + gpu)
    be.add_argument("--schedule", metavar="NAME", help="the schedule block to use (default: the unnamed one)")
    be.add_argument("--runs", type=_positive_int, default=10, metavar="N", help="timed runs (default 10)")
    be.set_defaults(fn=cmd_bench)
    lo = sub.add_parser("lower", help="print the lowered loop nest (or LLVM IR / assembly)")
    lo.add_argument("file", metavar="FILE", help="the .hl program")
    lo.add_argument("--schedule", metavar="NAME", help="the schedule block to use (default: the unnamed one)")
    lo.add_argument("--target", default="host", metavar="T",
                    help="the target to lower for: " + native + gpu + " (a GPU target shows its kernels)")
    lo.add_argument("--print-after", metavar="PASS",
                    help="show the loop nest after this pass: " + ", ".join(PASSES) + f" (default {PASSES[-1]})")
    lo.add_argument("--shifted", action="store_true",
                    help="the form the JIT runs when every split output is at least a tile wide: last "
                         "tiles shifted inwards, not guarded")
    lo.add_argument("--timings", action="store_true", help="per-pass timings on stderr")
    lo.add_argument("--debug", dest="debug_level", type=int, default=0, metavar="N",
                    help="print the loop nest after every pass (N >= 2: with timings)")
    lo.add_argument("--emit", choices=["stmt", "llvm", "asm", "ptx", "glsl"], default="stmt",
                    help="stmt: the loop nest (default; a GPU target's with its kernels, their launch bounds "
                         "and shared memory); llvm: LLVM IR; asm: assembly; ptx: a cuda target's kernels; "
                         "glsl: target opengl's shaders")
    lo.set_defaults(fn=cmd_lower)
    fm = sub.add_parser("fmt", help="rewrite .hl files in the canonical layout (comments kept)")
    fm.add_argument("files", nargs="+", metavar="FILE", help="the .hl files to format ('-': stdin to stdout)")
    fm.add_argument("--check", action="store_true",
                    help="change nothing; exit 1 and name the files that are not in the canonical layout")
    fm.set_defaults(fn=cmd_fmt)

    sc = sub.add_parser("schedule", help="print a schedule as text to paste into the file (default: the "
                                         "automatic scheduler's)")
    sc.add_argument("file", metavar="FILE", help="the .hl program")
    sc.add_argument("--schedule", metavar="NAME", help="the schedule to print: auto (default), a block's name, or default (the "
                                                       "unnamed block)")
    sc.add_argument("--target", default="host",
                    choices=["host", "x86-64-avx2", "x86-64-avx512", "cuda", "cuda-sm_80", "cuda-sm_90", "cuda-emulate",
                             "opengl"],
                    help="the target to schedule for (default host; the cuda targets and opengl: GPU rules, "
                         "docs/gpu.md, docs/opengl.md)")
    sc.add_argument("--name", default="mine", metavar="BLOCK", help="the printed block's name (default mine)")
    sc.set_defaults(fn=cmd_schedule)
    tu = sub.add_parser("tune", help="search for a fast schedule (the 2013 paper's genetic search) and write "
                                     "the best into FILE as a named schedule block")
    tu.add_argument("file", metavar="FILE", help="the .hl program (the block is added to it)")
    tu.add_argument("--input", action="append", metavar="NAME=PATH",
                    help="an image to tune on (default: random inputs of --size)")
    tu.add_argument("--param", action="append", metavar="NAME=VALUE", help="a value for param NAME")
    tu.add_argument("--size", default="512,512", metavar="W,H[,C]",
                    help="the random inputs' extents without --input (default 512,512; C defaults to 3)")
    tu.add_argument("--output-size", metavar="W[,H[,C]]", help="the outputs' extents (default: the first input's)")
    tu.add_argument("--trials", type=_positive_int, default=40, metavar="N",
                    help="candidates to measure at most (default 40)")
    tu.add_argument("--minutes", type=float, metavar="M", help="stop after M minutes")
    tu.add_argument("--timeout", type=float, default=60.0, metavar="S",
                    help="the time limit of one candidate (compile, check and runs; default 60 s)")
    tu.add_argument("--seed", type=int, default=0, metavar="N", help="the search's random seed (default 0)")
    tu.add_argument("--name", default="tuned", metavar="BLOCK", help="the written block's name (default tuned)")
    tu.add_argument("--no-file-seeds", action="store_true",
                    help="start from the automatic schedule only, not from the file's schedule blocks")
    tu.set_defaults(fn=cmd_tune)
    pg = sub.add_parser("playground", help="serve the playground: edit, run and inspect programs in a "
                                           "browser (needs pip install 'hdsl[playground]')")
    pg.add_argument("--host", default="127.0.0.1",
                    help="the address to listen on (default 127.0.0.1: this machine only)")
    pg.add_argument("--port", type=int, default=8000, help="the port (default 8000)")
    pg.add_argument("--examples", metavar="DIR",
                    help="the examples folder to offer (default: the examples hdsl carries)")
    pg.add_argument("--cpu-seconds", type=_positive_int, default=20, metavar="S",
                    help="CPU time each compile or run may use (default 20)")
    pg.add_argument("--wall-seconds", type=_positive_int, metavar="S",
                    help="seconds each compile or run may take (default 1.5 x CPU seconds + 5)")
    pg.add_argument("--memory-mb", type=_positive_int, default=3072, metavar="M",
                    help="memory each compile or run may use (default 3072)")
    pg.add_argument("--workers", type=_positive_int, default=2, metavar="N",
                    help="compiles and runs at once (default 2); 32 more may wait")
    pg.set_defaults(fn=cmd_playground)
    ls = sub.add_parser("lsp", help="run the language server on stdin/stdout (for editors; needs pygls: "
                                    "pip install 'hdsl[lsp]')")
    ls.set_defaults(fn=cmd_lsp)
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.debug:
        import os
        os.environ["HDSL_VERIFY"] = "1"
    try:
        return args.fn(args)
    except HdslError as e:
        print(e.render(), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except (InternalError, Exception) as e:     # a bug in hdsl, never the user's fault
        print(f"internal compiler error: {type(e).__name__}: {e}", file=sys.stderr)
        print("this is a bug in hdsl; please report it with the program that triggered it"
              + ("" if args.debug else " (rerun with --debug for a traceback)"), file=sys.stderr)
        if args.debug:
            traceback.print_exc()
        return 2


if __name__ == "__main__":
    sys.exit(main())
