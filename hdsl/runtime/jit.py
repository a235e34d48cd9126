"""Compile a lowered pipeline with LLVM and call it from Python.

A large module is compiled in parts (codegen.modules.split_module), each by its
own process at once (this one and forked children: llvmlite lets one thread
into LLVM at a time), and the JIT links their objects together.

The machine code is cached on disk twice over: keyed by the source texts, the
schedule, the target and a fingerprint of the compiler's own files (so a
second compile of the same program loads the objects without lowering it at
all), and by the LLVM IR (a program that lowers to the same code skips LLVM's
optimizer and code generator). The thread pool is a small C library built once
with the system's C compiler.

The cache is per user ($HDSL_CACHE_DIR, else $XDG_CACHE_HOME/hdsl, else
~/.cache/hdsl), never inside the installed package. Every file in it is
written whole through a temporary file and a rename, and carries a SHA-256 of
its contents that is checked before it is used: a damaged file (cut short,
emptied, overwritten) is compiled afresh, never handed to LLVM or the dynamic
loader. A location that cannot be used costs the cache (one warning), not the
compilation.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import hashlib
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path

import numpy as np

from hdsl.diagnostics import Diagnostic, HdslError, InternalError
from hdsl.runtime.files import write_atomic

MAX_DIMS = 8
_lock = threading.Lock()
_initialized = False
_runtime_path: Path | None = None


def cache_location() -> Path:
    """Where the compile cache belongs: $HDSL_CACHE_DIR, else $XDG_CACHE_HOME/hdsl (an
    absolute XDG_CACHE_HOME only, as the XDG base directory spec says), else ~/.cache/hdsl."""
    env = os.environ.get("HDSL_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "hdsl"
    return Path.home() / ".cache" / "hdsl"


_usable: set[str] = set()              # cache directories written to in this process
_warned: set[str] = set()
_cache_lock = threading.Lock()


def cache_warning(where, reason) -> None:
    """One line on stderr, once per location and process: the cache is an optimization, and a
    compilation without it still succeeds."""
    with _cache_lock:
        if str(where) in _warned:
            return
        _warned.add(str(where))
    msg = f"hdsl's compile cache at '{where}' cannot be used ({reason}); compiling without it"
    print(Diagnostic(msg, severity="warning").render(), file=sys.stderr)


def _reason(e: BaseException) -> str:
    return getattr(e, "strerror", None) or str(e) or type(e).__name__


def cache_dir() -> Path | None:
    """The compile cache's directory, made if need be; None (after one warning) when it cannot
    be made or written: a compilation then keeps nothing."""
    try:
        d = cache_location()
    except (RuntimeError, KeyError) as e:          # no home directory to be found
        cache_warning("~/.cache/hdsl", _reason(e))
        return None
    try:
        d.mkdir(parents=True, exist_ok=True)
        if str(d) not in _usable:
            # a real write, once per process (os.access says yes to root on a read-only mount)
            fd, probe = tempfile.mkstemp(dir=d, prefix=".probe-")
            os.close(fd)
            os.unlink(probe)
            _usable.add(str(d))
    except FileExistsError:                         # mkdir(exist_ok) on something else
        cache_warning(d, "not a directory")
        return None
    except OSError as e:
        cache_warning(d, _reason(e))
        return None
    return d


CHECKSUM_MAGIC = b"HDSLSUM1"


def seal(data: bytes) -> bytes:
    """`data` with a trailer: its SHA-256 and a magic number. The dynamic loader ignores bytes
    past an ELF file's headers and sections, so a sealed shared library still loads."""
    return data + hashlib.sha256(data).digest() + CHECKSUM_MAGIC


def unseal(data: bytes) -> bytes | None:
    """The data sealed by seal(); None if the trailer is missing or does not match."""
    n = len(CHECKSUM_MAGIC) + 32
    if len(data) < n or data[-len(CHECKSUM_MAGIC):] != CHECKSUM_MAGIC:
        return None
    body = data[:-n]
    return body if hashlib.sha256(body).digest() == data[-n:-len(CHECKSUM_MAGIC)] else None


def read_sealed(path: Path) -> bytes | None:
    """The checked contents of a cache file; None if it is absent, unreadable or damaged."""
    try:
        return unseal(path.read_bytes())
    except OSError:
        return None


def cache_write(path: Path | None, data: bytes) -> bool:
    """Keep `data` sealed at `path` in the cache; False (after one warning) if it cannot be."""
    if path is None:
        return False
    try:
        write_atomic(path, seal(data))
        return True
    except OSError as e:
        cache_warning(path.parent, _reason(e))
        return False


from hdsl.runtime.abi import BufferStruct  # noqa: E402 (the one buffer ABI)


def make_buffer(arr: np.ndarray, mins=None) -> BufferStruct:
    """A buffer struct over `arr`, already in [x, y, c, ...] index order, whose first element
    is at coordinates `mins` (default zeros)."""
    b = BufferStruct()
    b.host = arr.ctypes.data
    b.dims = arr.ndim
    b.elem_bytes = arr.itemsize
    for d in range(arr.ndim):
        b.min[d] = mins[d] if mins else 0
        b.extent[d] = arr.shape[d]
        b.stride[d] = arr.strides[d] // arr.itemsize
    if arr.ndim and arr.shape[0] == 1:
        b.stride[0] = 1         # x takes one value: its stride is never used
    return b


def runtime_sources() -> list[tuple[str, str]]:
    """The C sources of the runtime library, (file name, text): the thread pool, and the fast
    call path (call.c, with the buffer struct of runtime/abi.py written in)."""
    from hdsl.runtime.abi import c_buffer_struct
    here = Path(__file__).parent
    call = (here / "call.c").read_text().replace("/*HDSL_BUFFER_STRUCT*/", c_buffer_struct())
    return [("thread_pool.c", (here / "thread_pool.c").read_text()), ("call.c", call)]


def _start_runtime_build(sources: list[tuple[str, str]], work: Path):
    """The C compiler started on the runtime's sources in `work` (not waited for): (the
    process, the library it writes, the compiler's name)."""
    out = work / "libhdsl_runtime.so"
    cc = os.environ.get("CC", "cc")
    paths = []
    for name, text in sources:
        (work / name).write_text(text)
        paths.append(str(work / name))
    try:
        proc = subprocess.Popen([cc, "-O2", "-fPIC", "-shared", "-pthread", "-o", str(out), *paths],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    except OSError as e:
        raise _runtime_build_error(cc, str(e)) from None
    return proc, out, cc


def _runtime_build_error(cc: str, detail: str) -> HdslError:
    return HdslError(f"cannot build hdsl's thread-pool runtime with '{cc}': {detail.strip()}", None,
                     "install a C compiler (gcc) or set CC")


def _finish_runtime_build(build) -> Path:
    proc, out, cc = build
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise _runtime_build_error(cc, err or f"exit status {proc.returncode}")
    return out


def _build_runtime(sources: list[tuple[str, str]], work: Path) -> Path:
    return _finish_runtime_build(_start_runtime_build(sources, work))


# A runtime build started ahead (prepare_runtime): (sources' key, work directory, the build,
# the process that started it: a forked child does not wait for its parent's compiler)
_runtime_pending = None
_runtime_lock = threading.RLock()


def _runtime_cached(sources) -> tuple[str, Path | None]:
    key = hashlib.sha256("\0".join(t for _, t in sources).encode()).hexdigest()[:16]
    cache = cache_dir()
    return key, (cache / f"libhdsl_runtime_{key}.so" if cache is not None else None)


def prepare_runtime() -> None:
    """Start building the C runtime in the background if it is neither loaded nor cached, so
    that the C compiler runs while the pipeline is lowered (a cold compile in a fresh process
    with an empty cache: about 0.2 s of wall time otherwise spent waiting for it). Any error
    is left for runtime_library() to report, where it was reported before."""
    global _runtime_pending
    with _runtime_lock:
        if _runtime_path is not None or _runtime_pending is not None:
            return
        try:
            sources = runtime_sources()
            key, cached = _runtime_cached(sources)
            if cached is not None and read_sealed(cached) is not None:
                return
            work = Path(tempfile.mkdtemp(prefix="hdsl-runtime-"))
        except (OSError, HdslError):
            return
        try:
            _runtime_pending = (key, work, _start_runtime_build(sources, work), os.getpid())
        except HdslError:
            shutil.rmtree(work, ignore_errors=True)
            return
        if not _runtime_atexit:
            atexit.register(_drop_pending_build)
            _runtime_atexit.append(True)


_runtime_atexit: list = []


def _drop_pending_build() -> None:
    """At exit: a build started ahead and never needed (the compile failed before linking)
    is finished and its directory removed."""
    global _runtime_pending
    with _runtime_lock:
        pending, _runtime_pending = _runtime_pending, None
        if pending is not None and pending[3] == os.getpid():
            _cancel_build(pending)


def runtime_library() -> Path:
    """Build (once per cache) and load the C runtime (the thread pool generated code calls, and
    the fast call path of runtime/fastcall.py); the
    path it was loaded from (without a cache, a temporary file already removed). The library
    is built in a private temporary directory and kept in the cache sealed (seal()); one
    whose checksum does not match is rebuilt, never loaded (a library cut short makes the
    loader map pages past the end of the file: SIGBUS)."""
    with _runtime_lock:
        return _runtime_library()


def _runtime_library() -> Path:
    global _runtime_path, _runtime_pending
    if _runtime_path is not None:
        return _runtime_path
    sources = runtime_sources()
    key, cached = _runtime_cached(sources)
    pending, _runtime_pending = _runtime_pending, None
    if pending is not None and pending[3] != os.getpid():
        pending = None                                  # (the parent's build, in a forked child)
    elif pending is not None and pending[0] != key:     # (the sources changed since: not this one)
        _cancel_build(pending)
        pending = None
    from llvmlite import binding as llvm
    if cached is not None and read_sealed(cached) is not None:
        lib = cached
        work = None
        if pending is not None:
            _cancel_build(pending)
    elif pending is not None:
        work = pending[1]
    else:
        try:
            work = Path(tempfile.mkdtemp(prefix="hdsl-runtime-"))
        except OSError as e:
            raise HdslError(f"cannot make a temporary directory to build hdsl's runtime in: {_reason(e)}",
                            None, "set TMPDIR to a writable directory") from None
    try:
        if work is not None:
            built = _finish_runtime_build(pending[2]) if pending is not None else _build_runtime(sources, work)
            lib = cached if cache_write(cached, built.read_bytes()) else built
        ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
        llvm.load_library_permanently(str(lib))
    finally:
        if work is not None:      # loaded (or failed): a loaded library outlives its file
            shutil.rmtree(work, ignore_errors=True)
    _runtime_path = lib
    return lib


def _cancel_build(pending) -> None:
    """A build started ahead and not used: waited for (a C compiler killed leaves its own
    temporary files behind), and its directory removed."""
    _, work, (proc, _, _), _ = pending
    proc.communicate()
    shutil.rmtree(work, ignore_errors=True)


def _init_llvm():
    global _initialized
    if _initialized:
        return
    from llvmlite import binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    _initialized = True


TARGET_FEATURES = {
    "x86-64-avx2": ("haswell", "+avx2,+fma,+f16c,+bmi2"),
    "x86-64-avx512": ("skylake-avx512", "+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx2,+fma,+f16c"),
}


def cpu_features(target: str) -> tuple[str, str]:
    """LLVM's CPU name and feature string for a target's CPU variant ("host", "x86-64-avx2", ...)."""
    from llvmlite import binding as llvm
    _init_llvm()
    if target == "host":
        return llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    if target in TARGET_FEATURES:
        return TARGET_FEATURES[target]
    raise HdslError(f"unknown target '{target}'", None, "targets: host, x86-64-avx2, x86-64-avx512, interp")


def target_machine(target: str, reloc: str = "pic"):
    """LLVM's target machine for `target`. Code for the JIT is compiled with static relocations
    (reloc="static"): the JIT's linker writes every address into the code, which is what lets
    it link a module compiled in parts (with "pic" and the large code model each object
    addresses its data through its own GOT, and LLVM's RuntimeDyld takes the first object's GOT
    for all of them). Objects for `hdsl compile` are position-independent."""
    from llvmlite import binding as llvm
    _init_llvm()
    t = llvm.Target.from_default_triple()
    cpu, features = cpu_features(target)
    return t.create_target_machine(cpu=cpu, features=features, opt=3, reloc=reloc, codemodel="jitdefault")


def optimize(mod, tm) -> None:
    from llvmlite import binding as llvm
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    # (unlike Halide, whose optimize_module turns LLVM's loop vectorizer and unroller off
    # unless EnableLLVMLoopOpt: an unscheduled hdsl loop is left to LLVM to vectorize, as the
    # tutorial says. Loops it must not touch say so in their metadata: llvm.CodeGenLLVM.serial_for)
    pto.loop_vectorization = True
    # hdsl vectorizes what the schedule says; LLVM's SLP vectorizer adds little to that and
    # failed an internal assertion (aborting the process) on a fuzzer-found schedule
    # (tests/compiler/test_compiler_bugs.py::test_llvm_slp_vectorizer_assertion_is_avoided)
    pto.slp_vectorization = False
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(mod, pb)


# LLVM's Loop Strength Reduction is left out of CPU code generation (-disable-lsr). It was
# the costliest pass of all: 0.37 s of the local Laplacian's 1.65 s of LLVM CPU time, 0.45 s
# with what it leaves for the passes after it (code generation 0.87 -> 0.42 s), on loops
# whose addresses the code generator already forms as base + 64-bit offset (x86 addressing
# modes take them whole). Time per run of the four apps without it, interleaved in one
# process with it, on both targets: the same within the noise of a loaded machine
# (docs/compiler.md, "Compile time"). cl::opt options are process-wide, so it is set only
# while hdsl emits code, and put back after.
CODEGEN_OPTIONS = ("-disable-lsr",)       # boolean flags: "=false" puts each back


def machine_code(tm, mod, assembly: bool = False):
    """The optimized module `mod` as an object file (or assembly text) for `tm`, with
    CODEGEN_OPTIONS in force."""
    from llvmlite import binding as llvm
    with _llvm_lock():       # (llvmlite's, reentrant: no other thread emits, or forks, meanwhile)
        for o in CODEGEN_OPTIONS:
            llvm.set_option("hdsl", o)
        try:
            return tm.emit_assembly(mod) if assembly else tm.emit_object(mod)
        finally:
            for o in CODEGEN_OPTIONS:
                llvm.set_option("hdsl", o + "=false")


OBJECTS_MAGIC = b"HDSLOBJ1"


def pack_objects(objects: list[bytes]) -> bytes:
    """Object files in one blob: magic, count, sizes, then the objects (sealed when cached)."""
    head = struct.pack(f"<I{len(objects)}Q", len(objects), *(len(o) for o in objects))
    return OBJECTS_MAGIC + head + b"".join(objects)


def unpack_objects(data: bytes) -> list[bytes] | None:
    """The objects of a blob from pack_objects; None if it is not one (or is cut short)."""
    m = len(OBJECTS_MAGIC)
    if len(data) < m + 4 or data[:m] != OBJECTS_MAGIC:
        return None
    (n,) = struct.unpack_from("<I", data, m)
    at = m + 4 + 8 * n
    if len(data) < at:
        return None
    sizes = struct.unpack_from(f"<{n}Q", data, m + 4)
    if at + sum(sizes) != len(data):
        return None
    out = []
    for size in sizes:
        out.append(data[at: at + size])
        at += size
    return out


def read_cached_objects(path: Path | None) -> list[bytes] | None:
    """The objects kept at `path`, if the file is there, whole and undamaged (its checksum
    matches): LLVM's JIT linker aborts the process on a malformed object."""
    data = read_sealed(path) if path is not None else None
    return unpack_objects(data) if data is not None else None


def compile_jobs() -> int:
    """How many processes compile one module's parts at once: HDSL_COMPILE_JOBS, else the
    cores this process may use (at most 4)."""
    env = os.environ.get("HDSL_COMPILE_JOBS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise HdslError(f"HDSL_COMPILE_JOBS must be a positive whole number, not '{env}'", None,
                            "HDSL_COMPILE_JOBS=1 compiles in this process only")
        return int(env)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, 4))


def _emit(texts: list[str], tm) -> list[bytes]:
    from llvmlite import binding as llvm
    out = []
    for text in texts:
        mod = llvm.parse_assembly(text)
        mod.verify()
        optimize(mod, tm)
        out.append(machine_code(tm, mod))
    return out


def _llvm_lock():
    """llvmlite's own lock (private): held across fork, so that no other thread is inside
    LLVM when the child is made."""
    try:
        from llvmlite.binding import ffi
        return ffi.lib._lock
    except (ImportError, AttributeError):
        return contextlib.nullcontext()


def _fork_emit(texts: list[str], tm):
    """A child process compiling `texts`; returns (pid, read end of its pipe), or None if no
    process can be made. The child writes b"O" + the packed objects, or b"E" + a message."""
    r, w = os.pipe()
    try:
        # Python 3.12 warns about fork in a process with threads (the child could block on a
        # lock another thread held): the child only runs LLVM, with llvmlite's lock held across
        # the fork, writes to its pipe and leaves with os._exit
        with _llvm_lock(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:                         # the child: LLVM, the pipe, and out (no Python exit handlers)
        code = 0
        try:
            os.close(r)
            try:
                data = b"O" + pack_objects(_emit(texts, tm))
            except Exception as e:
                data, code = b"E" + f"{type(e).__name__}: {e}".encode(errors="replace"), 1
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
        except BaseException:
            code = 2
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _collect(pid: int, r: int) -> list[bytes]:
    chunks = []
    try:
        while chunk := os.read(r, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(r)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:        # SIGCHLD ignored by the application: reaped already
            status = 0
    data = b"".join(chunks)
    if data[:1] == b"O" and (objects := unpack_objects(data[1:])) is not None:
        return objects
    if data[:1] == b"E":
        raise InternalError(f"LLVM failed: {data[1:].decode(errors='replace')}")
    if os.WIFSIGNALED(status):
        raise InternalError(f"LLVM's compiler process died of signal {os.WTERMSIG(status)}")
    raise InternalError(f"LLVM's compiler process failed (status {status})")


def emit_objects(texts: list[str], tm, jobs: int = 1) -> list[bytes]:
    """Optimize and compile each LLVM IR text to an object file, in up to `jobs` processes at
    once: this one and forked children (LLVM serializes the threads of one process). The
    texts are shared out longest first; objects come back in the order of `texts`."""
    jobs = max(1, min(jobs, len(texts))) if hasattr(os, "fork") else 1
    if jobs == 1:
        return _emit(texts, tm)
    from hdsl.codegen.modules import balance
    groups = balance([len(t) for t in texts], jobs)
    children, mine = [], list(groups[0])
    try:
        for g in groups[1:]:
            child = _fork_emit([texts[i] for i in g], tm)
            if child is None:
                mine += g                # no process to be had: compiled here
            else:
                children.append((g, child))
        objects: list[bytes | None] = [None] * len(texts)
        for i, o in zip(mine, _emit([texts[i] for i in mine], tm)):
            objects[i] = o
        while children:
            g, (pid, r) = children.pop(0)
            for i, o in zip(g, _collect(pid, r)):
                objects[i] = o
    finally:
        for _, (pid, r) in children:     # an error or an interrupt here: no child is left behind
            try:
                os.kill(pid, signal.SIGKILL)
                os.close(r)
                os.waitpid(pid, 0)
            except OSError:
                pass
    return objects


class CompiledFunction:
    """Native code for one LLVM module, given whole or as parts (codegen.modules.split_module)
    that are compiled in parallel and linked by the JIT."""

    def __init__(self, llvm_ir: str | list[str], name: str, target: str, use_cache: bool = True):
        texts = [llvm_ir] if isinstance(llvm_ir, str) else list(llvm_ir)
        with _lock:
            runtime_library()
            tm = target_machine(target, "static")
            text = "\0".join(texts + [target, tm.triple, _version()])
            key = hashlib.sha256(text.encode()).hexdigest()[:32]
            cache = cache_dir() if use_cache else None
            self.object_path = cache / f"{key}.o" if cache is not None else None
            objects = read_cached_objects(self.object_path)
            self.cached = objects is not None
            if objects is None:
                objects = emit_objects(texts, tm, compile_jobs())
                if not cache_write(self.object_path, pack_objects(objects)):
                    self.object_path = None
            if not self._link(objects, name, tm):
                raise InternalError(f"JIT: no function {name}")

    def _link(self, objects: list[bytes], name: str, tm) -> bool:
        from llvmlite import binding as llvm
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        for o in objects:
            engine.add_object_file(llvm.ObjectFileRef.from_data(o))
        engine.finalize_object()
        addr = engine.get_function_address(name)
        if not addr:
            return False
        self._engine, self._tm = engine, tm       # the engine keeps the code alive
        self.n_objects = len(objects)
        self.address = addr
        self.fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)(addr)
        return True

    @classmethod
    def from_object(cls, path: Path | None, name: str, target: str) -> "CompiledFunction | None":
        """The function in a cached file of objects; None if it is absent, damaged or cannot be
        linked."""
        objects = read_cached_objects(path)
        if objects is None:
            return None
        with _lock:
            runtime_library()
            self = cls.__new__(cls)
            self.cached, self.object_path = True, path
            return self if self._link(objects, name, target_machine(target, "static")) else None

    def __call__(self, arg_ptrs: list[int]) -> tuple[int, list[int]]:
        args = (ctypes.c_void_p * max(1, len(arg_ptrs)))(*arg_ptrs)
        info = (ctypes.c_int64 * 4)()
        code = self.fn(ctypes.addressof(args), ctypes.addressof(info))
        return code, list(info)


_fingerprint: str | None = None


def _version() -> str:
    """hdsl's version and a hash of its compiler's files: a changed compiler never reuses
    an object compiled by another."""
    global _fingerprint
    if _fingerprint is None:
        import hdsl
        root = Path(hdsl.__file__).resolve().parent
        h = hashlib.sha256(getattr(hdsl, "__version__", "0").encode())
        # the compiler's sources, its runtime and its grammar (the stdlib modules a program
        # uses are in the program's source key)
        files = sorted(f for f in root.rglob("*") if f.suffix in (".py", ".c", ".lark") and f.is_file())
        for f in files:
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
        _fingerprint = h.hexdigest()[:16]
    return _fingerprint


def source_cache_path(source_key: str, schedule: str | None, target: str) -> Path | None:
    """Where the object compiled from these sources, schedule and target is kept (None
    without a usable cache)."""
    from llvmlite import binding as llvm
    _init_llvm()
    cpu = f"{llvm.get_host_cpu_name()}:{llvm.get_host_cpu_features().flatten()}" if target.startswith("host") or "#cpu=host" in target \
        else ""
    from hdsl.runtime.device import THREAD_ORDER
    order = [THREAD_ORDER] if THREAD_ORDER != "forward" and "emulate" in target else []
    text = "\0".join([source_key, repr(schedule), target, cpu, llvm.get_default_triple(), _version(), *order])
    cache = cache_dir()
    return cache / f"src-{hashlib.sha256(text.encode()).hexdigest()[:32]}.o" if cache is not None else None


def assembly(llvm_ir: str, target: str) -> str:
    """The module's assembly, as the JIT compiles it (static relocations)."""
    from llvmlite import binding as llvm
    tm = target_machine(target, "static")
    mod = llvm.parse_assembly(llvm_ir)
    mod.verify()
    optimize(mod, tm)
    return machine_code(tm, mod, assembly=True)
