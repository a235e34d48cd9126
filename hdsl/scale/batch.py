"""Batches: one pipeline over many images (`hdsl run FILE --input img='photos/*.png' --output
'out/{stem}.png'`, `hdsl.batch(p, ...)`; docs/scale.md).

The images run in local processes (spawned, `workers` of them) or on a Dask cluster (a
`dask.distributed.Client` or a scheduler's address). The caller compiles the pipeline first, so
that a program error stops the batch before it starts and every worker builds its compiled
pipeline once, from the compile cache, on its first image. An image that fails (unreadable, of
the wrong type, too small for the pipeline) is reported with its name; the others go on.
Outputs are written whole or not at all (hdsl/runtime/files.py), so with `resume` an image
whose output files all exist is done and is skipped.
"""
from __future__ import annotations

import glob as globlib
import hashlib
import os
import string
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hdsl.diagnostics import HdslError

FIELDS = ("stem", "name", "parent", "index")


@dataclass(frozen=True)
class BatchSpec:
    """What a worker builds its compiled pipeline from (small, picklable)."""
    text: str
    filename: str
    schedule: str | None
    target: str

    @property
    def key(self) -> str:
        return hashlib.sha256("\0".join(["batch", self.text, self.filename, repr(self.schedule),
                                         self.target]).encode()).hexdigest()


@dataclass
class ItemResult:
    """One image's outcome: status 'done', 'skipped' (resume: its outputs exist) or 'failed'
    (error: the message); outputs: the files written, or the arrays when no output was named."""
    name: str
    status: str
    error: str | None = None
    outputs: object = None
    seconds: float = 0.0


@dataclass
class BatchResult:
    items: list[ItemResult] = field(default_factory=list)
    seconds: float = 0.0

    def _with(self, status):
        return [r for r in self.items if r.status == status]

    @property
    def done(self) -> list[ItemResult]:
        return self._with("done")

    @property
    def failed(self) -> list[ItemResult]:
        return self._with("failed")

    @property
    def skipped(self) -> list[ItemResult]:
        return self._with("skipped")

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)


_COMPILED: dict = {}


def _compiled(spec: BatchSpec):
    c = _COMPILED.get(spec.key)
    if c is None:
        import hdsl
        c = _COMPILED[spec.key] = hdsl.loads(spec.text, spec.filename).compile(spec.target, spec.schedule)
    return c


def load_input(b, path: str) -> np.ndarray:
    """Input b's image file as the pipeline takes it: a one-channel image for a 2-D input is
    its plane; a type other than the input's is the user's error."""
    from hdsl.runtime.images import ImageError, load_image
    try:
        arr = load_image(path)
    except ImageError as e:
        raise HdslError(e.message, None, e.hint) from None
    if arr.ndim == 3 and b.dims == 2 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.dtype != b.type.dtype:
        from hdsl.ir.types import from_dtype
        try:
            found = from_dtype(arr.dtype).name
        except ValueError:
            found = str(arr.dtype)
        raise HdslError(f"input '{b.name}' is {b.type} but {path} holds {arr.dtype} values", None,
                        f"declare the input as {found}, or convert the image first")
    return arr


def run_item(spec: BatchSpec, name: str, inputs: dict, params: dict, outputs: dict | None) -> ItemResult:
    """One image, in a worker: never raises for the image's own errors (they are its result)."""
    from hdsl.runtime.images import ImageError, save_image
    t0 = time.perf_counter()
    try:
        c = _compiled(spec)
        kwargs = dict(params)
        by_name = {b.name: b for b in c.ir.inputs}
        for k, v in inputs.items():
            kwargs[k] = load_input(by_name[k], v) if isinstance(v, (str, os.PathLike)) else v
        res = c(**kwargs)
        res = res if isinstance(res, tuple) else (res,)
        if outputs is None:
            return ItemResult(name, "done", outputs=res[0] if len(res) == 1 else res,
                              seconds=time.perf_counter() - t0)
        written = []
        for f, arr in zip(c.ir.outputs, res):
            path = outputs.get(f.name)
            if path is None:
                continue
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            try:
                save_image(path, arr)          # (through a temporary file renamed over it)
            except ImageError as e:
                raise HdslError(e.message, None, e.hint) from None
            written.append(path)
        return ItemResult(name, "done", outputs=written, seconds=time.perf_counter() - t0)
    except HdslError as e:
        return ItemResult(name, "failed", error=e.render(), seconds=time.perf_counter() - t0)
    except OSError as e:
        return ItemResult(name, "failed", error=f"error: {e.strerror or e}: {e.filename or ''}".rstrip(": "),
                          seconds=time.perf_counter() - t0)
    except Exception as e:          # a bug in hdsl: reported for this image, the batch goes on
        return ItemResult(name, "failed", error=f"internal compiler error: {type(e).__name__}: {e}",
                          seconds=time.perf_counter() - t0)


# ------------------------------------------------------------------ what to run

def _expand(name: str, spec) -> list[str]:
    if isinstance(spec, (list, tuple)):
        return [os.fspath(s) for s in spec]
    text = os.fspath(spec)
    if globlib.has_magic(text):
        found = sorted(globlib.glob(text, recursive=True))
        if not found:
            raise HdslError(f"--input {name}='{text}' matches no file", None,
                            "check the pattern (quote it, so that hdsl and not the shell expands it)")
        return found
    return [text]


def plan_items(p, inputs, output) -> list[tuple[str, dict, dict | None]]:
    """(name, {input: path or array}, {output: path} or None) per image."""
    if isinstance(inputs, (list, tuple)):
        items = []
        for i, d in enumerate(inputs):
            paths = [v for v in d.values() if isinstance(v, (str, os.PathLike))]
            items.append((os.fspath(paths[0]) if paths else f"#{i}", dict(d), None))
        varying = None
    else:
        lists = {k: _expand(k, v) for k, v in inputs.items()}
        many = [k for k, v in lists.items() if len(v) > 1 or isinstance(inputs[k], (list, tuple))
                or globlib.has_magic(os.fspath(inputs[k]) if not isinstance(inputs[k], (list, tuple)) else "")]
        if len(many) > 1:
            raise HdslError(f"inputs {', '.join(many)} are each many files; a batch varies one input", None,
                            "give the others as single files, shared by every image")
        varying = many[0] if many else next(iter(lists), None)
        if varying is None:
            raise HdslError(f"pipeline '{p.name}' has no input to run over many images", None)
        fixed = {k: v[0] for k, v in lists.items() if k != varying}
        items = [(path, {**fixed, varying: path}, None) for path in lists[varying]]
    if output is None:
        return items
    templates = {p.ir.outputs[0].name: output} if isinstance(output, (str, os.PathLike)) else dict(output)
    out_names = [f.name for f in p.ir.outputs]
    for k in templates:
        if k not in out_names:
            raise HdslError(f"pipeline '{p.name}' has no output '{k}'", None, "its outputs: " + ", ".join(out_names))
    if len(out_names) > 1 and isinstance(output, (str, os.PathLike)):
        raise HdslError(f"pipeline '{p.name}' has {len(out_names)} outputs; name each one", None,
                        "--output " + " --output ".join(f"{n}=TEMPLATE" for n in out_names))
    for k, t in templates.items():
        used = {f for _, f, _, _ in string.Formatter().parse(os.fspath(t)) if f is not None}
        bad = used - set(FIELDS)
        if bad:
            raise HdslError(f"--output '{t}': unknown field {{{sorted(bad)[0]}}}", None,
                            "the fields: " + ", ".join("{" + f + "}" for f in FIELDS))
        if not used and len(items) > 1:
            raise HdslError(f"--output '{t}' would write every image to one file", None,
                            "put a field in it, e.g. 'out/{stem}.png' (the fields: "
                            + ", ".join("{" + f + "}" for f in FIELDS) + ")")
    planned, seen = [], {}
    for i, (name, ins, _) in enumerate(items):
        src = Path(name)
        fields = {"stem": src.stem, "name": src.name, "parent": src.parent.name, "index": i}
        outs = {k: os.fspath(t).format(**fields) for k, t in templates.items()}
        for path in outs.values():
            if path in seen:
                raise HdslError(f"--output: '{seen[path]}' and '{name}' would both be written to '{path}'", None,
                                "use {parent} or {index} in the template to tell them apart")
            seen[path] = name
        planned.append((name, ins, outs))
    return planned


# ------------------------------------------------------------------ running

def batch(p, inputs, output=None, params=None, *, scheduler=None, workers=None, resume=False,
          progress=None, target=None, schedule=None) -> BatchResult:
    """Run pipeline `p` (a Pipeline or a .hl path) over many images; returns a BatchResult.

    inputs: {input: a glob pattern, a list of paths or one path} (one input varies; the others
        are one file for every image), or a list of {input: array or path}, one per image.
    output: a path template ('out/{stem}.png'; fields {stem}, {name}, {parent}, {index}), or
        {output: template} for several outputs; None returns the arrays in the results.
    params: {param: value}, the same for every image.
    scheduler: None for local processes (`workers` of them, default the CPU count; 0: this
        process, one image after another), or a dask.distributed Client or its address
        ('tcp://host:8786'), whose workers must see the same files.
    resume: skip the images whose output files all exist (each is written whole or not at all).
    progress: called with (ItemResult, done, total) as each image ends.
    target, schedule: as in compile (default: p's own when compiled, else host)."""
    import hdsl
    if isinstance(p, (str, os.PathLike)):
        p = hdsl.load(p)
    if not p.ir.source_text:
        raise HdslError(f"pipeline '{p.name}' was not loaded from source, so workers cannot load it", None,
                        "load it with hdsl.load or hdsl.loads")
    target = target or (p.target if p.target != "interp" else "host")
    schedule = schedule if schedule is not None else p.schedule
    spec = BatchSpec(p.ir.source_text, p.ir.filename, schedule, target)
    _COMPILED[spec.key] = hdsl.loads(spec.text, spec.filename).compile(target, schedule)  # errors now; warms the cache
    params = dict(params or {})
    known = {q.name for q in p.ir.params}
    for k in params:
        if k not in known:
            raise HdslError(f"pipeline '{p.name}' has no param '{k}'", None,
                            "its params: " + (", ".join(sorted(known)) or "(none)"))
    items = plan_items(p, inputs, output)
    t0 = time.perf_counter()
    results: list[ItemResult | None] = [None] * len(items)
    todo = []
    done = 0
    for i, (name, ins, outs) in enumerate(items):
        if resume and outs and all(os.path.exists(q) for q in outs.values()):
            results[i] = ItemResult(name, "skipped", outputs=list(outs.values()))
            done += 1
            if progress:
                progress(results[i], done, len(items))
        else:
            todo.append(i)

    def finish(i, r):
        nonlocal done
        results[i] = r
        done += 1
        if progress:
            progress(r, done, len(items))

    if not todo:
        pass
    elif scheduler is not None:
        _run_dask(scheduler, spec, items, todo, params, finish)
    elif workers == 0:
        for i in todo:
            name, ins, outs = items[i]
            finish(i, run_item(spec, name, ins, params, outs))
    else:
        import concurrent.futures as cf
        import multiprocessing
        n = min(workers or os.cpu_count() or 1, len(todo))
        # spawned, not forked: a fork would copy this process's compiler and thread-pool state
        with cf.ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
            futs = {pool.submit(run_item, spec, *items[i][:2], params, items[i][2]): i for i in todo}
            ran = 0
            for fut in cf.as_completed(futs):
                i = futs[fut]
                try:
                    r = fut.result()
                    ran += 1
                except cf.process.BrokenProcessPool as e:
                    if not ran:
                        raise HdslError("the worker processes stopped before running any image", None,
                                        "a script that calls hdsl.batch must do so under "
                                        "`if __name__ == '__main__':` (the processes are spawned and "
                                        "import it), or pass workers=0 to run in this process") from None
                    r = ItemResult(items[i][0], "failed", error=f"error: its worker process died ({e})")
                finish(i, r)
    return BatchResult(results, time.perf_counter() - t0)


def _run_dask(scheduler, spec, items, todo, params, finish):
    try:
        from distributed import Client, as_completed
    except ImportError as e:
        raise HdslError(f"a Dask scheduler needs dask.distributed: {e}", None, "pip install 'hdsl[dask]'") from None
    own = None
    if isinstance(scheduler, str):
        try:
            own = client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError) as e:
            raise HdslError(f"cannot reach the Dask scheduler at {scheduler}: {e}", None,
                            "start one with `dask scheduler` and workers with `dask worker ADDRESS`") from None
    else:
        client = scheduler
    try:
        futs = {}
        for i in todo:
            name, ins, outs = items[i]
            f = client.submit(run_item, spec, name, ins, params, outs, pure=False, key=f"hdsl-batch-{i}-{os.getpid()}-{time.time_ns()}")
            futs[f] = i
        for fut in as_completed(list(futs)):
            i = futs[fut]
            try:
                r = fut.result()
            except Exception as e:
                r = ItemResult(items[i][0], "failed", error=f"error: the Dask task failed ({type(e).__name__}: {e})")
            finish(i, r)
    finally:
        if own is not None:
            own.close()


def progress_printer(stream=None):
    """The CLI's progress: a line that counts, and each failure on a line of its own."""
    start = time.monotonic()

    def show(r: ItemResult, done: int, total: int):
        out = stream or sys.stderr
        if r.status == "failed":
            out.write(f"\r\033[K{r.name}: {r.error}\n" if out.isatty() else f"{r.name}: {r.error}\n")
        if out.isatty() or done == total:
            out.write(f"\r{done}/{total} images, {time.monotonic() - start:.1f} s" + ("\n" if done == total else ""))
        out.flush()
    return show
