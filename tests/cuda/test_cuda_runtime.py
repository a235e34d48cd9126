"""The cuda target around what needs a GPU (hdsl/runtime/cuda.py): the one-sentence error
where pycuda or a driver is missing (the path CI takes), the PTX module a pipeline loads,
its cache, and the packing of kernel arguments. pycuda's own calls run only on a machine
with an NVIDIA GPU, which the tests never have."""
from __future__ import annotations

import subprocess
import sys
import types

import numpy as np
import pytest

import hdsl
from hdsl.cli import main
from hdsl.diagnostics import HdslError
from hdsl.lower.lower import lower
from hdsl.runtime import cuda as cuda_rt
from hdsl.target import parse_target
from tests.cuda.ptxas_check import assembled
from tests.gpu.programs import BLUR, with_cuda_schedule

BLUR_CUDA = with_cuda_schedule(BLUR, "out.gpu_tile(x, y, xo, yo, xi, yi, 16, 16)\n    bx.compute_at(out, xo)\n"
                                     "    bx.gpu_threads(x, y)")


@pytest.fixture
def no_pycuda(monkeypatch):
    """pycuda as on a machine without it (CI): importing it fails."""
    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    monkeypatch.setattr(cuda_rt, "_context", None)


def test_importing_hdsl_never_imports_pycuda():
    code = ("import sys, hdsl, hdsl.cli, hdsl.api, hdsl.runtime.native, hdsl.runtime.device, hdsl.runtime.cuda, "
            "hdsl.codegen.ptx; assert 'pycuda' not in sys.modules, sorted(m for m in sys.modules if 'cuda' in m)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_compile_for_cuda_without_pycuda_is_one_sentence(no_pycuda):
    p = hdsl.loads(BLUR_CUDA, "blur.hl")
    with pytest.raises(HdslError) as e:
        p.compile("cuda")
    text = e.value.render()
    assert text.startswith("error: the cuda target runs only on a machine with an NVIDIA GPU")
    assert "pip install 'hdsl[cuda]'" in text and "--target cuda-emulate" in text
    assert text.count("\n") == 0


def test_hdsl_run_target_cuda_without_a_driver_exits_1(tmp_path, capsys, no_pycuda):
    src = tmp_path / "blur.hl"
    src.write_text(BLUR_CUDA)
    img = tmp_path / "in.npy"
    np.save(img, np.arange(64 * 48, dtype=np.uint16).reshape(48, 64))
    code = main(["run", str(src), "--target", "cuda", "--input", f"img={img}", "--output", str(tmp_path / "o.npy")])
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err and "internal" not in err
    assert err.strip().splitlines() == [err.strip()]            # one line
    assert "pip install 'hdsl[cuda]'" in err


def test_a_driver_without_a_gpu_is_the_same_sentence(monkeypatch):
    """pycuda imports (a driver library is there) but cuInit fails: no GPU."""
    class Error(Exception):
        pass

    def init():
        raise Error("cuInit failed: no CUDA-capable device is detected")
    driver = types.SimpleNamespace(Error=Error, init=init)
    monkeypatch.setitem(sys.modules, "pycuda", types.ModuleType("pycuda"))
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    sys.modules["pycuda"].driver = driver
    monkeypatch.setattr(cuda_rt, "_context", None)
    with pytest.raises(HdslError) as e:
        cuda_rt.CudaDevice()
    assert "no CUDA-capable device is detected" in e.value.render()
    assert "pip install 'hdsl[cuda]'" in e.value.render()


def test_a_pipelines_kernels_are_one_ptx_module_with_their_parameters():
    p = hdsl.loads(BLUR_CUDA, "blur.hl")
    target = parse_target("cuda-sm_80")
    low = lower(p.ir, None, target)
    code = cuda_rt.device_code(low.stmt, target)
    ptx = assembled(code.ptx)
    assert ".target sm_80" in ptx
    from hdsl.lower.gpu import kernels_of
    kernels = [k.kernel for k in kernels_of(low.stmt)]
    assert kernels and set(code.kernels) == {k.name for k in kernels}
    for k in kernels:
        assert f".entry {k.name}(" in ptx
        sizes = [8 if a.kind == "buffer" else a.type.bits // 8 for a in k.args]
        assert code.kernels[k.name]["params"] == sizes
        # the PTX's own parameter list: a .u64 .ptr per buffer, a parameter per scalar
        params = ptx.split(f".entry {k.name}(")[1].split(")")[0]
        assert params.count(".ptr") == len(k.buffers()) and params.count(".param") == len(k.args)


def test_device_code_is_cached_and_read_back(tmp_path):
    p = hdsl.loads(BLUR_CUDA, "blur.hl")
    target = parse_target("cuda")

    class Variant:
        name, lowered = "hdsl_g", lower(p.ir, None, target)
    Variant.target = target
    path = tmp_path / "k.cuda"
    first = cuda_rt.cached_device_code(Variant, path)
    assert path.exists()

    class Unlowerable(Variant):
        @property
        def lowered(self):
            raise AssertionError("lowered again although cached")
    again = cuda_rt.cached_device_code(Unlowerable(), path)
    assert again == first
    path.write_bytes(b"damaged")                # a damaged entry is made again
    assert cuda_rt.cached_device_code(Variant, path) == first


def test_kernel_arguments_from_the_host_slots():
    """Each 8-byte slot holds a device pointer, or a scalar stored in its own type at the slot's
    start (hdsl/runtime/device.py); the kernel takes each by its size in bytes."""
    f32 = int(np.array([1.5], "<f4").view("<u4")[0])             # 0x3fc00000
    slots = [0x7F00_1234_5678, 0xFFFF_FFFF, f32, 0xAB, 0xFFFF_FFFF_FFFF_FFFE]
    args = cuda_rt.pack_args(slots, [8, 4, 4, 1, 8])
    assert [a.dtype.itemsize for a in args] == [8, 4, 4, 1, 8]
    assert int(args[0]) == 0x7F00_1234_5678
    assert int(args[1]) == 0xFFFF_FFFF and np.array(args[1]).view("<i4") == -1
    assert np.array(args[2]).view("<f4") == np.float32(1.5)
    assert int(args[3]) == 0xAB
    assert np.array(args[4]).view("<i8") == -2


def test_a_cuda_pipeline_calls_the_device_with_its_ptx_kernels(monkeypatch):
    """Everything `Pipeline.compile("cuda")` does but the GPU's work: a device standing in for
    pycuda's (host memory, launches recorded, not run) is handed the compiled variant's PTX
    module before the call, and every launch names one of its kernels with one argument
    slot per parameter."""
    from hdsl.runtime.device import DEVICES, HostEmulatedDevice

    class Recording(HostEmulatedDevice):
        name = "cuda"
        code = None

        def use(self, code):
            self.code = code

        def launch(self, kernel, host_fn, grid, threads, shared_bytes, args):
            assert host_fn is None or host_fn == 0             # no host code for kernels on cuda
            assert kernel in self.code.kernels
            assert len(args) == len(self.code.kernels[kernel]["params"])
    monkeypatch.setitem(DEVICES, "cuda", Recording)
    p = hdsl.loads(BLUR_CUDA, "blur.hl")
    c = p.compile("cuda-sm_80", use_cache=False)
    c(img=np.arange(40 * 30, dtype=np.uint16).reshape(30, 40))
    dev = c.native.device
    assert isinstance(dev.code, cuda_rt.DeviceCode) and ".target sm_80" in assembled(dev.code.ptx)
    names = [launch[0] for launch in dev.launches]
    assert names and set(names) <= set(dev.code.kernels)
    # the grid covers the 40x30 output in 16x16 tiles; the block is the kernel's launch bound
    assert dev.launches[0][1] == (3, 2, 1)
    assert dev.counts["to_device"] == 1 and dev.counts["to_host"] == 1
