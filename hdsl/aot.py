"""Ahead-of-time compilation: `hdsl compile` → object file, shared library, C header.

The object holds the generated code, a C entry wrapper and the thread pool;
it needs only libc, libm and pthreads. Its only global symbols are the
pipeline's function, `<name>_error_message`, `<name>_arguments` and
`<name>_argv` (the function with its arguments in an array, which
`load_library` calls from Python through the fast call path); every
internal symbol is prefixed with `<name>__` and made local, so several
pipelines link into one program without clashes.
"""
from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from hdsl.api import TARGETS
from hdsl.target import parse_target
from hdsl.diagnostics import HdslError
from hdsl.ir.func import Pipeline

# the thread pool runtime's functions the generated code calls (renamed NAME__f in an object)
RUNTIME_FUNCTIONS = ("parallel_for", "num_threads", "malloc", "free")
EMIT_KINDS = ("o", "so", "h", "ll", "s", "stmt", "html", "ptx", "glsl")
# a cuda target's files: its kernels' PTX (one file, every kernel) and the loop nest
CUDA_EMIT_KINDS = ("ptx", "stmt", "html")


def _run(cmd: list[str], what: str):
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True)
    except FileNotFoundError:
        raise HdslError(f"cannot {what}: '{cmd[0]}' is not installed", None,
                        "hdsl compile needs a C compiler and binutils (gcc, ld, objcopy)") from None
    except subprocess.CalledProcessError as e:
        raise HdslError(f"cannot {what}: {' '.join(cmd[:2])} failed:\n{e.stderr.strip()}", None) from None


def c_name(p: Pipeline) -> str:
    name = re.sub(r"\W", "_", p.name)
    return name if not name[0].isdigit() else "_" + name


def compile_to_files(p: Pipeline, out_dir: str | Path, target: str = "host", schedule: str | None = None,
                     emit: tuple[str, ...] = ("o", "h"), name: str | None = None) -> dict[str, Path]:
    """Write the files `emit` asks for into `out_dir`. They are made in a temporary folder
    inside it and moved into place at the end: a compilation that fails leaves no file
    behind (and no file of an earlier run half overwritten)."""
    for k in emit:
        if k not in EMIT_KINDS:
            raise HdslError(f"unknown --emit kind '{k}'", None, "kinds: " + ", ".join(EMIT_KINDS))
    tgt = parse_target(target)
    native = [t for t in TARGETS if t not in ("interp", "opengl") and not t.startswith("cuda")]
    if tgt.arch == "interp":
        raise HdslError("'interp' is the reference evaluator: it runs pipelines but makes no code to "
                        "compile ahead of time", None,
                        "compile for " + ", ".join(native) + " (each may end in -fast_math); "
                        "`hdsl run --target interp` runs the evaluator")
    if tgt.arch == "opengl":
        wrong = [k for k in emit if k not in ("glsl", "stmt")]
        if wrong:
            raise HdslError(f"--emit {wrong[0]} is not made for target 'opengl': its code is GLSL shaders, "
                            "compiled by the OpenGL driver when the pipeline runs", None,
                            "use --emit glsl (the shaders) or --emit stmt (the loop nest)")
        return _write_staged(out_dir, name or c_name(p), lambda stage, nm: _glsl_into(p, stage, schedule, emit, nm))
    if "glsl" in emit:
        raise HdslError(f"--emit glsl is made for target 'opengl' only (not '{tgt.name}')", None,
                        "add --target opengl")
    if tgt.device == "cuda":
        other = [k for k in emit if k not in CUDA_EMIT_KINDS]
        if other:
            raise HdslError(f"hdsl compile makes no '{other[0]}' file for GPU target '{tgt.name}' yet", None,
                            "for a cuda target, --emit takes " + ", ".join(CUDA_EMIT_KINDS)
                            + " (the kernels' PTX and the loop nest); `hdsl run --target cuda` runs the pipeline")
    elif tgt.is_gpu:
        raise HdslError(f"hdsl compile makes no code for GPU target '{tgt.name}' yet", None,
                        "`hdsl run --target cuda-emulate` runs GPU schedules on the CPU; "
                        "compile for " + ", ".join(native))
    elif "ptx" in emit:
        raise HdslError("--emit ptx needs a cuda target", None,
                        "add --target cuda (or cuda-sm_80, cuda-sm_90) for the kernels' PTX")
    fast_math, base_target = tgt.fast_math, tgt.cpu
    if tgt.device == "cuda":
        return _write_staged(out_dir, name or c_name(p),
                             lambda stage, nm: _compile_cuda_into(p, stage, tgt, schedule, emit, nm))
    return _write_staged(out_dir, name or c_name(p),
                         lambda stage, nm: _compile_into(p, stage, base_target, fast_math, schedule, emit, nm))


def _write_staged(out_dir, name: str, make) -> dict[str, Path]:
    """`make(stage, name)` writes its files into a temporary folder inside out_dir; they are moved
    into out_dir when all are made."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=".tmp", dir=out))
    except OSError as e:
        raise HdslError(f"cannot write into '{out}': {e.strerror or e}", None,
                        "choose another output folder with -o DIR") from None
    try:
        made = make(stage, name)
        written = {}
        for kind, path in made.items():
            written[kind] = out / path.name
            os.replace(path, written[kind])
        return written
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _glsl_into(p: Pipeline, out: Path, schedule: str | None, emit: tuple[str, ...], name: str) -> dict[str, Path]:
    """Target opengl: NAME.glsl, every kernel's compute shader (hdsl/codegen/glsl.py), and the
    loop nest that launches them (NAME.stmt)."""
    from hdsl.codegen.glsl import glsl_listing
    from hdsl.ir.expr import no_collection
    from hdsl.ir.printer import stmt_str
    from hdsl.lower.lower import lower
    with no_collection():
        low = lower(p, schedule, parse_target("opengl"))
        written = {}
        if "glsl" in emit:
            written["glsl"] = out / f"{name}.glsl"
            written["glsl"].write_text(glsl_listing(low.stmt, p.name))
        if "stmt" in emit:
            written["stmt"] = out / f"{name}.stmt"
            written["stmt"].write_text(stmt_str(low.stmt))
    return written


def _compile_into(p: Pipeline, out: Path, base_target: str, fast_math: bool, schedule: str | None,
                  emit: tuple[str, ...], name: str) -> dict[str, Path]:
    from hdsl.codegen.c_header import header, wrapper
    from hdsl.codegen.cpu import generate
    from hdsl.codegen.modules import split_module
    from hdsl.ir.printer import stmt_str
    from hdsl.lower.lower import lower
    from hdsl.runtime.jit import compile_jobs, emit_objects, machine_code, optimize, target_machine

    from hdsl.ir.expr import no_collection
    from hdsl.lower.loops import check_shifted, shift_requirements
    with no_collection():
        low = lower(p, schedule, base_target)
        impl = f"{name}__impl"
        module = generate(p, low.stmt, impl, fast_math, runtime_prefix=f"{name}_", cpu=base_target,
                          nontemporal=low.nontemporal)
        llvm_ir = str(module)
        # outputs with split pure dims: a second function with the last tiles shifted inwards
        # (constant tile sizes, as the JIT runs them), called when the outputs are wide enough
        shifted = None
        # (the requirements of the schedule this target takes: `schedule avx2` on x86-64-avx2)
        if shift_requirements(p, schedule, base_target):
            low_s = lower(p, schedule, base_target, shift_outputs=True)
            shifted = (f"{name}__impl_shifted", check_shifted(low_s.shifted, p, schedule, base_target))
            module_shifted = generate(p, low_s.stmt, shifted[0], fast_math, runtime_prefix=f"{name}_", cpu=base_target,
                                       nontemporal=low_s.nontemporal)
            llvm_ir_shifted = str(module_shifted)
    written: dict[str, Path] = {}

    if "stmt" in emit:
        written["stmt"] = out / f"{name}.stmt"
        written["stmt"].write_text(stmt_str(low.stmt))
    if "html" in emit:
        written["html"] = out / f"{name}.html"
        written["html"].write_text(stmt_html(p, stmt_str(low.stages["schedule_functions"]), name))
    if "ll" in emit:
        written["ll"] = out / f"{name}.ll"
        written["ll"].write_text(llvm_ir if not shifted else llvm_ir + "\n" + llvm_ir_shifted)
    if "h" in emit or "o" in emit or "so" in emit:
        (out / f"{name}.h").write_text(header(p, name))      # (the C wrapper includes it)
        if "h" in emit:
            written["h"] = out / f"{name}.h"
    if not ({"o", "so", "s"} & set(emit)):
        return written

    tm = target_machine(base_target)
    if "s" in emit:
        from llvmlite import binding as llvm
        mod = llvm.parse_assembly(llvm_ir)
        if shifted:
            mod.link_in(llvm.parse_assembly(llvm_ir_shifted))
        mod.verify()
        optimize(mod, tm)
        written["s"] = out / f"{name}.s"
        written["s"].write_text(machine_code(tm, mod, assembly=True))
    if not ({"o", "so"} & set(emit)):
        return written
    # the code in parts compiled at once (as the JIT does), linked below by ld
    jobs = compile_jobs()
    texts = split_module(module, jobs) + (split_module(module_shifted, jobs) if shifted else [])
    objects = emit_objects(texts, tm, jobs)
    cc = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory(prefix="hdsl-aot-") as tmp:
        tmp = Path(tmp)
        code = [tmp / f"code{i}.o" for i in range(len(objects))]
        for path, data in zip(code, objects):
            path.write_bytes(data)
        (tmp / "wrapper.c").write_text(wrapper(p, name, impl, shifted))
        runtime = Path(__file__).resolve().parent / "runtime" / "thread_pool.c"
        renames = [f"-Dhdsl_{f}={name}__{f}" for f in RUNTIME_FUNCTIONS]
        _run([cc, "-O2", "-fPIC", "-c", "-I", str(out), "-o", str(tmp / "wrapper.o"), str(tmp / "wrapper.c")],
             "compile the C wrapper")
        _run([cc, "-O2", "-fPIC", "-pthread", "-c", *renames, "-o", str(tmp / "pool.o"), str(runtime)],
             "compile the thread pool")
        obj = tmp / f"{name}.o"
        _run(["ld", "-r", "-o", str(obj), *map(str, code), str(tmp / "wrapper.o"), str(tmp / "pool.o")],
             "link the object")
        hidden = [impl] + ([shifted[0]] if shifted else [])
        # the task functions of a module compiled in parts are global in their objects: local here
        _run(["objcopy", "--wildcard", *[f"--localize-symbol={h}" for h in hidden],
              *[f"--localize-symbol={h}.par*" for h in hidden],
              *[f"--localize-symbol={name}__{f}" for f in RUNTIME_FUNCTIONS],
              str(obj)], "hide internal symbols")
        if "o" in emit:
            written["o"] = out / f"{name}.o"
            shutil.copyfile(obj, written["o"])
        if "so" in emit:
            written["so"] = out / f"lib{name}.so"
            _run([cc, "-shared", "-o", str(written["so"]), str(obj), "-lm", "-pthread"], "link the shared library")
    return written


def _compile_cuda_into(p: Pipeline, out: Path, tgt, schedule: str | None, emit: tuple[str, ...],
                       name: str) -> dict[str, Path]:
    """A cuda target's files: NAME.ptx holds every kernel the pipeline launches (for the
    target's sm, as the cuda runtime loads it), NAME.stmt / NAME.html the loop nest with
    its kernels (their launch bounds and shared memory)."""
    from hdsl.ir.expr import no_collection
    from hdsl.ir.printer import stmt_str
    from hdsl.lower.lower import lower
    from hdsl.runtime.cuda import device_code
    with no_collection():
        low = lower(p, schedule, tgt)
        code = device_code(low.stmt, tgt, f"{name}_kernels") if "ptx" in emit else None
    written: dict[str, Path] = {}
    if code is not None:
        written["ptx"] = out / f"{name}.ptx"
        written["ptx"].write_text(code.ptx)
    if "stmt" in emit:
        written["stmt"] = out / f"{name}.stmt"
        written["stmt"].write_text(stmt_str(low.stmt))
    if "html" in emit:
        written["html"] = out / f"{name}.html"
        written["html"].write_text(stmt_html(p, stmt_str(low.stmt), name))
    return written


def compiled_form(p: Pipeline, emit: str, schedule: str | None = None, target: str = "host",
                  after: str | None = None, shifted: bool = False, low=None) -> str:
    """One compiled form of a pipeline as text, as `hdsl lower` prints it (and the playground
    shows it): "stmt", the loop nest after pass `after` (default the last); "llvm", LLVM IR;
    "asm", the assembly the JIT makes of it (a GPU target's host code); "ptx" (a cuda
    target's kernels), "glsl" (target opengl's shaders); "html", the loop-nest report of `hdsl compile
    --emit html`. `low`: the pipeline already lowered with these settings."""
    from hdsl.ir.printer import stmt_str
    from hdsl.lower.lower import PASSES, lower
    if after is not None and after not in PASSES:
        raise HdslError(f"unknown pass '{after}'", None,
                        "--print-after takes one of: " + ", ".join(PASSES) + " (in the order they run)")
    from hdsl.target import parse_target
    tgt = parse_target(target)
    low = low or lower(p, schedule, tgt, shift_outputs=shifted)
    if emit == "stmt":
        return stmt_str(low.stages[after or PASSES[-1]])
    if emit == "html":
        return stmt_html(p, stmt_str(low.stages["schedule_functions"]), c_name(p))
    if emit in ("llvm", "asm"):
        # the host code (for a GPU target with its launches and device copies, and the
        # emulated kernels for cuda-emulate)
        from hdsl.runtime.native import host_module
        module = str(host_module(p, low.stmt, "hdsl_" + p.name, tgt, low.nontemporal))
        if emit == "llvm":
            return module
        from hdsl.runtime.jit import assembly
        return assembly(module, tgt.cpu)
    if emit == "ptx":
        if tgt.device != "cuda":
            raise HdslError("--emit ptx needs a cuda target", None,
                            "add --target cuda (or cuda-sm_80, cuda-sm_90) for the kernels' PTX")
        from hdsl.runtime.cuda import device_code
        return device_code(low.stmt, tgt).ptx
    if emit == "glsl":
        if tgt.device != "opengl":
            raise HdslError("--emit glsl needs target opengl", None, "add --target opengl for the kernels' shaders")
        from hdsl.codegen.glsl import glsl_listing
        return glsl_listing(low.stmt, p.name)
    raise HdslError(f"unknown compiled form '{emit}'", None, "forms: stmt, llvm, asm, html, ptx, glsl")


def stmt_html(p: Pipeline, stmt_text: str, name: str) -> str:
    """The loop nest as a light page: each loop links to the line of the source that defines its Func."""
    from hdsl.diagnostics import registered_source
    text = registered_source(p.filename)
    if text is None:
        try:
            text = Path(p.filename).read_text()
        except OSError:
            text = ""
    src_lines = text.splitlines()
    lines_of = {}
    from hdsl.ir.func import topo_order
    for f in topo_order(p.outputs):
        if f.span is not None:
            lines_of[f.name] = f.span.line
    out = []
    for line in stmt_text.splitlines():
        m = re.match(r"\s*(?:\w+ )?for ([^ ]+)\.s\d+\.", line) or re.match(r"\s*realize ([^(]+)\(", line)
        esc = html.escape(line)
        if m and m.group(1) in lines_of:
            n = lines_of[m.group(1)]
            esc = f'<a href="#L{n}" title="{html.escape(m.group(1))}, line {n}">{esc}</a>'
        out.append(esc)
    src = "\n".join(f'<span id="L{i}">{i:4d}  {html.escape(l)}</span>' for i, l in enumerate(src_lines, 1))
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(name)}: lowered loop nest</title>
<style>body{{font-family:sans-serif;margin:1em}} pre{{font-size:13px;line-height:1.35}}
a{{color:#0645ad;text-decoration:none}} a:hover{{text-decoration:underline}} :target{{background:#ffef9e}}
.cols{{display:flex;gap:2em}} .cols>div{{overflow:auto;max-height:92vh}}</style></head>
<body><h2>{html.escape(p.name)}</h2><div class="cols">
<div><h3>loop nest</h3><pre>{chr(10).join(out)}</pre></div>
<div><h3>{html.escape(Path(p.filename).name)}</h3><pre>{src}</pre></div></div></body></html>
"""
