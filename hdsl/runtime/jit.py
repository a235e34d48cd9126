"""Compile a lowered pipeline with LLVM and call it from Python.

A large module is compiled in parts (codegen.llvm.split_module), each by its
own process at once (this one and forked children: llvmlite lets one thread
into LLVM at a time), and the JIT links their objects together.

The machine code is cached on disk twice over: keyed by the source texts, the
schedule, the target and a fingerprint of the compiler's own files (so a
second compile of the same program loads the objects without lowering it at
all), and by the LLVM IR (a program that lowers to the same code skips LLVM's
optimizer and code generator). The thread pool is a small C library built once
with the system's C compiler.
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import signal
import struct
import subprocess
import threading
import warnings
from pathlib import Path

import numpy as np

from hdsl.diagnostics import HdslError, InternalError

MAX_DIMS = 8
_lock = threading.Lock()
_initialized = False
_runtime_path: Path | None = None


def cache_dir() -> Path:
    d = Path(os.environ.get("HDSL_CACHE_DIR") or Path.home() / ".cache" / "hdsl")
    d.mkdir(parents=True, exist_ok=True)
    return d


class BufferStruct(ctypes.Structure):
    _fields_ = [("host", ctypes.c_void_p), ("dims", ctypes.c_int32), ("elem_bytes", ctypes.c_int32),
                ("min", ctypes.c_int64 * MAX_DIMS), ("extent", ctypes.c_int64 * MAX_DIMS),
                ("stride", ctypes.c_int64 * MAX_DIMS)]


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


def runtime_library() -> Path:
    """Build (once) and load the C thread pool so generated code can call it."""
    global _runtime_path
    if _runtime_path is not None:
        return _runtime_path
    src = Path(__file__).with_name("thread_pool.c")
    text = src.read_bytes()
    key = hashlib.sha256(text).hexdigest()[:16]
    out = cache_dir() / f"libhdsl_runtime_{key}.so"
    if not out.exists():
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        cc = os.environ.get("CC", "cc")
        try:
            subprocess.run([cc, "-O2", "-fPIC", "-shared", "-pthread", "-o", str(tmp), str(src)],
                           check=True, capture_output=True, text=True)
        except (OSError, subprocess.CalledProcessError) as e:
            detail = getattr(e, "stderr", "") or str(e)
            raise HdslError(f"cannot build hdsl's thread-pool runtime with '{cc}': {detail.strip()}", None,
                            "install a C compiler (gcc) or set CC") from None
        os.replace(tmp, out)
    from llvmlite import binding as llvm
    ctypes.CDLL(str(out), mode=ctypes.RTLD_GLOBAL)
    llvm.load_library_permanently(str(out))
    _runtime_path = out
    return out


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


def target_machine(target: str, reloc: str = "pic"):
    """LLVM's target machine for `target`. Code for the JIT is compiled with static relocations
    (reloc="static"): the JIT's linker writes every address into the code, which is what lets
    it link a module compiled in parts (with "pic" and the large code model each object
    addresses its data through its own GOT, and LLVM's RuntimeDyld takes the first object's GOT
    for all of them). Objects for `hdsl compile` are position-independent."""
    from llvmlite import binding as llvm
    _init_llvm()
    t = llvm.Target.from_default_triple()
    if target == "host":
        cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    elif target in TARGET_FEATURES:
        cpu, features = TARGET_FEATURES[target]
    else:
        raise HdslError(f"unknown target '{target}'", None, "targets: host, x86-64-avx2, x86-64-avx512, interp")
    return t.create_target_machine(cpu=cpu, features=features, opt=3, reloc=reloc, codemodel="jitdefault")


def optimize(mod, tm) -> None:
    from llvmlite import binding as llvm
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    # hdsl vectorizes what the schedule says; LLVM's SLP vectorizer adds little to that and
    # failed an internal assertion (aborting the process) on a fuzzer-found schedule
    # (tests/compiler/test_compiler_bugs.py::test_llvm_slp_vectorizer_assertion_is_avoided)
    pto.slp_vectorization = False
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(mod, pb)


OBJECTS_MAGIC = b"HDSLOBJ1"


def pack_objects(objects: list[bytes]) -> bytes:
    """Object files in one blob: magic, count, sizes, then the objects."""
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


def write_atomic(path: Path, data: bytes) -> None:
    """Write through a temporary file and a rename: a reader sees the old file or the new one."""
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


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
        out.append(tm.emit_object(mod))
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
    from hdsl.codegen.llvm import balance
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
    """Native code for one LLVM module, given whole or as parts (codegen.llvm.split_module)
    that are compiled in parallel and linked by the JIT."""

    def __init__(self, llvm_ir: str | list[str], name: str, target: str, use_cache: bool = True):
        texts = [llvm_ir] if isinstance(llvm_ir, str) else list(llvm_ir)
        with _lock:
            runtime_library()
            tm = target_machine(target, "static")
            text = "\0".join(texts + [target, tm.triple, _version()])
            key = hashlib.sha256(text.encode()).hexdigest()[:32]
            self.object_path = cache_dir() / f"{key}.o" if use_cache else None
            objects = None
            if self.object_path is not None:
                try:
                    objects = unpack_objects(self.object_path.read_bytes())
                except OSError:
                    pass
            self.cached = objects is not None
            if objects is None:
                objects = emit_objects(texts, tm, compile_jobs())
                if self.object_path is not None:
                    try:
                        write_atomic(self.object_path, pack_objects(objects))
                    except OSError:
                        self.object_path = None      # the cache is an optimization
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
        self.fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)(addr)
        return True

    @classmethod
    def from_object(cls, path: Path, name: str, target: str) -> "CompiledFunction | None":
        """The function in a cached file of objects; None if it cannot be read or linked."""
        try:
            objects = unpack_objects(path.read_bytes())
        except OSError:
            return None
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
        files = sorted(root.rglob("*.py")) + sorted(root.rglob("*.c")) + sorted(root.parent.glob("grammar/*.lark"))
        for f in files:
            h.update(str(f.relative_to(root.parent)).encode())
            h.update(f.read_bytes())
        _fingerprint = h.hexdigest()[:16]
    return _fingerprint


def source_cache_path(source_key: str, schedule: str | None, target: str) -> Path:
    """Where the object compiled from these sources, schedule and target is kept."""
    from llvmlite import binding as llvm
    _init_llvm()
    cpu = f"{llvm.get_host_cpu_name()}:{llvm.get_host_cpu_features().flatten()}" if target.startswith("host") else ""
    text = "\0".join([source_key, repr(schedule), target, cpu, llvm.get_default_triple(), _version()])
    return cache_dir() / f"src-{hashlib.sha256(text.encode()).hexdigest()[:32]}.o"


def assembly(llvm_ir: str, target: str) -> str:
    """The module's assembly, as the JIT compiles it (static relocations)."""
    from llvmlite import binding as llvm
    tm = target_machine(target, "static")
    mod = llvm.parse_assembly(llvm_ir)
    mod.verify()
    optimize(mod, tm)
    return tm.emit_assembly(mod)
