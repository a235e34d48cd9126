"""Compile a lowered pipeline with LLVM and call it from Python.

The machine code is cached on disk twice over: keyed by the source texts, the
schedule, the target and a fingerprint of the compiler's own files (so a
second compile of the same program loads the object without lowering it at
all), and by the LLVM IR (LLVM's object cache: a program that lowers to the
same code skips LLVM's optimizer and code generator). The thread pool is a
small C library built once with the system's C compiler.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import threading
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


def make_buffer(arr: np.ndarray) -> BufferStruct:
    """A buffer struct over `arr`, already in [x, y, c, ...] index order."""
    b = BufferStruct()
    b.host = arr.ctypes.data
    b.dims = arr.ndim
    b.elem_bytes = arr.itemsize
    for d in range(arr.ndim):
        b.min[d] = 0
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


def target_machine(target: str):
    from llvmlite import binding as llvm
    _init_llvm()
    t = llvm.Target.from_default_triple()
    if target == "host":
        cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    elif target in TARGET_FEATURES:
        cpu, features = TARGET_FEATURES[target]
    else:
        raise HdslError(f"unknown target '{target}'", None, "targets: host, x86-64-avx2, x86-64-avx512, interp")
    return t.create_target_machine(cpu=cpu, features=features, opt=3, reloc="pic", codemodel="jitdefault")


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


class _ObjectCache:
    def __init__(self, key: str):
        self.path = cache_dir() / f"{key}.o"

    def notify(self, module, data: bytes):
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.path)

    def get(self, module):
        try:
            return self.path.read_bytes()
        except OSError:
            return None


class CompiledFunction:
    def __init__(self, llvm_ir: str, name: str, target: str, use_cache: bool = True):
        from llvmlite import binding as llvm
        with _lock:
            runtime_library()
            tm = target_machine(target)
            key = hashlib.sha256((llvm_ir + "\0" + target + "\0" + tm.triple + _version()).encode()).hexdigest()[:32]
            self.cached = use_cache and (cache_dir() / f"{key}.o").exists()
            mod = llvm.parse_assembly(llvm_ir)
            mod.verify()
            if not self.cached:
                optimize(mod, tm)
            engine = llvm.create_mcjit_compiler(mod, tm)
            self.object_path = None
            if use_cache:
                cache = _ObjectCache(key)
                engine.set_object_cache(cache.notify, cache.get)
                self.object_path = cache.path
            engine.finalize_object()
            addr = engine.get_function_address(name)
            if not addr:
                raise InternalError(f"JIT: no function {name}")
            self._engine = engine      # keeps the code alive
            self._tm = tm
            self.fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)(addr)

    @classmethod
    def from_object(cls, path: Path, name: str, target: str) -> "CompiledFunction | None":
        """The function in a cached object file; None if it cannot be read or linked."""
        from llvmlite import binding as llvm
        try:
            data = path.read_bytes()
        except OSError:
            return None
        with _lock:
            runtime_library()
            tm = target_machine(target)
            engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
            engine.add_object_file(llvm.ObjectFileRef.from_data(data))
            engine.finalize_object()
            addr = engine.get_function_address(name)
            if not addr:
                return None
            self = cls.__new__(cls)
            self.cached = True
            self._engine, self._tm = engine, tm
            self.fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)(addr)
            return self

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
    from llvmlite import binding as llvm
    tm = target_machine(target)
    mod = llvm.parse_assembly(llvm_ir)
    mod.verify()
    optimize(mod, tm)
    return tm.emit_assembly(mod)
