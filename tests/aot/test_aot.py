"""Ahead-of-time objects: a C program written to the headers alone, gcc, and ctypes."""
from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import hdsl
from hdsl.aot import compile_to_files
from hdsl.runtime.jit import BufferStruct, make_buffer

HERE = Path(__file__).parent
EXAMPLES = HERE.parents[1] / "examples"
W, H = 45, 29


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.fail("gcc is needed to test ahead-of-time compilation")
    d = tmp_path_factory.mktemp("aot")
    blur = hdsl.load(EXAMPLES / "blur.hl")
    multi = hdsl.load(HERE / "multi.hl")
    files = compile_to_files(blur.ir, d, emit=("o", "h", "so"))
    files.update({"multi_" + k: v for k, v in compile_to_files(multi.ir, d, emit=("o", "h", "so")).items()})
    exe = d / "driver"
    subprocess.run(["gcc", "-O1", "-Wall", "-Werror", "-I", str(d), "-o", str(exe), str(HERE / "driver.c"),
                    str(files["o"]), str(files["multi_o"]), "-lm", "-pthread"], check=True)
    rs = np.random.RandomState(11)
    img = rs.randint(0, 21000, (H, W)).astype(np.uint16)
    a = rs.randint(0, 256, (H, W)).astype(np.uint8)
    b = rs.randn(H, W).astype(np.float32)
    img.tofile(d / "img.u16")
    a.tofile(d / "a.u8")
    b.tofile(d / "b.f32")
    run = subprocess.run([str(exe), str(W), str(H), str(d / "img.u16"), str(d / "a.u8"), str(d / "b.f32"), str(d)],
                         capture_output=True, text=True)
    return dict(dir=d, files=files, run=run, img=img, a=a, b=b, blur=blur, multi=multi)


def test_c_program_links_two_pipelines_and_runs(built):
    assert built["run"].returncode == 0, built["run"].stdout + built["run"].stderr


def test_blur_from_c_matches_the_evaluator(built):
    got = np.fromfile(built["dir"] / "blur.out", dtype=np.uint16).reshape(H, W)
    assert np.array_equal(got, built["blur"](img=built["img"]))


def test_multi_from_c_matches_the_evaluator(built):
    mixed, hist = built["multi"].realize([[W, H], [16]], a=built["a"], b=built["b"], gain=0.75, offset=-2, flip=True)
    got_mixed = np.fromfile(built["dir"] / "mixed.out", dtype=np.float32).reshape(H, W)
    got_hist = np.fromfile(built["dir"] / "hist.out", dtype=np.int32)
    assert np.array_equal(got_mixed, mixed)
    assert np.array_equal(got_hist, hist)
    assert got_hist.sum() == W * H


def test_argument_description(built):
    lines = [l for l in built["run"].stdout.splitlines() if l.startswith("arg ")]
    assert lines == ["arg a kind 0 type 1 bits 8 dims 2", "arg b kind 0 type 2 bits 32 dims 2",
                     "arg gain kind 1 type 2 bits 32 dims 0", "arg offset kind 1 type 0 bits 32 dims 0",
                     "arg flip kind 1 type 3 bits 1 dims 0", "arg mixed kind 2 type 2 bits 32 dims 2",
                     "arg hist kind 2 type 0 bits 32 dims 1"]


def test_error_codes_and_messages(built):
    out = built["run"].stdout
    assert f"small a: 1 input 'a' is read at y = 0 .. {H - 1}, but the buffer covers y = 0 .. 3" in out
    assert f"small b: 1 input 'b' is read at y = 0 .. {H - 1}, but the buffer covers y = 0 .. 3" in out
    assert "short hist: 2 output 'hist' is written at x = 0 .. 15, but the buffer covers x = 0 .. 7" in out
    assert "wrong type: 5 buffer 'img' must be u16[2] (dims 2, elem_bytes 4 given)" in out


def test_only_the_public_symbols_are_global(built):
    nm = subprocess.run(["nm", "-g", "--defined-only", str(built["files"]["o"])], capture_output=True, text=True)
    names = sorted(line.split()[-1] for line in nm.stdout.splitlines())
    assert names == ["blur", "blur_arguments", "blur_argv", "blur_error_message"]


def test_shared_library_through_ctypes(built):
    lib = ctypes.CDLL(str(built["files"]["so"]))
    lib.blur.argtypes = [ctypes.POINTER(BufferStruct), ctypes.POINTER(BufferStruct)]
    lib.blur.restype = ctypes.c_int
    lib.blur_error_message.restype = ctypes.c_char_p
    img = built["img"]
    out = np.zeros_like(img)
    bin_, bout = make_buffer(img.T), make_buffer(out.T)
    assert lib.blur(ctypes.byref(bin_), ctypes.byref(bout)) == 0
    assert np.array_equal(out, built["blur"](img=img))
    flat = np.zeros(6, np.uint16)
    bflat = make_buffer(flat)
    assert lib.blur(ctypes.byref(bflat), ctypes.byref(bout)) == 5
    assert lib.blur_error_message().decode() == "buffer 'img' must be u16[2] (dims 1, elem_bytes 2 given)"
    # x must have stride 1 (the code loads rows as dense vectors): a column view is refused
    bcol = make_buffer(np.ascontiguousarray(img.T).T.T)    # [x, y] with x the slow dim
    assert bcol.stride[0] != 1
    assert lib.blur(ctypes.byref(bcol), ctypes.byref(bout)) == 5
    assert lib.blur_error_message().decode().startswith("buffer 'img' must have stride 1 in x")
    # offsets are 32-bit: a buffer whose rows lie 2^31 elements apart is refused before any access
    # (the host pointer is never dereferenced, so a small array stands in for the huge one)
    bhuge = make_buffer(img.T)
    bhuge.stride[1] = 2 ** 31
    assert lib.blur(ctypes.byref(bhuge), ctypes.byref(bout)) == 6
    assert lib.blur_error_message().decode() == \
        f"buffer 'img' spans {(H - 1) * 2 ** 31 + W} elements; offsets are 32-bit (at most 2147483647 elements)"


def test_nonzero_buffer_mins_are_honoured(built, tmp_path):
    """A caller's buffer may start anywhere: the output's (min, extent) selects the region computed."""
    p = hdsl.load(HERE / "blur_plain.hl")
    files = compile_to_files(p.ir, tmp_path, emit=("so",))
    lib = ctypes.CDLL(str(files["so"]))
    img = built["img"]
    out = np.zeros((H - 2, W - 2), np.uint16)
    bin_, bout = make_buffer(img.T), make_buffer(out.T)
    bout.min[0], bout.min[1] = 1, 1          # out covers x = 1 .. W-2, y = 1 .. H-2
    assert lib.blur(ctypes.byref(bin_), ctypes.byref(bout)) == 0
    bx = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) // 3          # u16 arithmetic wraps, as in hdsl
    ref = (bx[:-2] + bx[1:-1] + bx[2:]) // 3
    assert np.array_equal(out, ref)
    # one column wider than the input allows
    bout.min[0] = 2
    assert lib.blur(ctypes.byref(bin_), ctypes.byref(bout)) == 1


def test_emit_kinds(tmp_path):
    p = hdsl.load(EXAMPLES / "blur.hl")
    files = compile_to_files(p.ir, tmp_path, emit=("ll", "s", "stmt", "html"))
    assert "define i32 @\"blur__impl\"" in files["ll"].read_text() or "define i32 @blur__impl" in files["ll"].read_text()
    assert "blur__impl" in files["s"].read_text()
    assert "for out.s0" in files["stmt"].read_text()
    page = files["html"].read_text()
    assert '<a href="#L' in page and 'id="L11"' in page


def test_split_outputs_get_a_shifted_form_chosen_by_size(built, tmp_path):
    """Like the JIT, an object holds two forms of a pipeline whose outputs are split: last
    tiles shifted inwards (every tile whole) and, for outputs narrower than a tile, last
    tiles guarded. The entry point picks by the outputs' extents; both are local symbols
    and both give the evaluator's values on either side of the tile size (256 x 32)."""
    p = built["blur"]
    nm = subprocess.run(["nm", str(built["files"]["o"])], capture_output=True, text=True).stdout
    local = {line.split()[-1] for line in nm.splitlines() if line.split()[-2] == "t"}
    assert {"blur__impl", "blur__impl_shifted"} <= local
    wrapper_c = __import__("hdsl.codegen.c_header", fromlist=["wrapper"]).wrapper(
        p.ir, "blur", "blur__impl", ("blur__impl_shifted", [(0, 0, 256), (0, 1, 32)]))
    assert "(out->extent[0] >= 256 && out->extent[1] >= 32) ? blur__impl_shifted(hdsl__args, hdsl__info)" in wrapper_c
    lib = ctypes.CDLL(str(built["files"]["so"]))
    lib.blur.argtypes = [ctypes.POINTER(BufferStruct), ctypes.POINTER(BufferStruct)]
    rs = np.random.RandomState(3)
    for w, h in [(255, 40), (256, 32), (257, 31), (300, 33), (529, 70)]:
        img = rs.randint(0, 60000, (h, w)).astype(np.uint16)
        out = np.zeros_like(img)
        assert lib.blur(ctypes.byref(make_buffer(img.T)), ctypes.byref(make_buffer(out.T))) == 0
        assert np.array_equal(out, p(img=img)), (w, h)


def test_bound_too_small_names_the_func_and_region_from_c(tmp_path):
    """Error code 3 from C names the Func, its var and the region needed, as the JIT and the
    evaluator do (tests/correctness/test_bounds.py)."""
    p = hdsl.loads("""pipeline bounded
input img: u8[2]
output out: u8[2]
algorithm {
    f(x, y) = img(x, y) + 1
    out(x, y) = f(x, y) + f(x + 1, y)
}
schedule {
    f.compute_root().bound(x, 0, 8)
}
""", "bounded.hl")
    lib = ctypes.CDLL(str(compile_to_files(p.ir, tmp_path, emit=("so",))["so"]))
    lib.bounded_error_message.restype = ctypes.c_char_p
    img = np.arange(80, dtype=np.uint8).reshape(8, 10)
    out = np.zeros((8, 8), np.uint8)
    bin_, bout = make_buffer(img.T), make_buffer(out.T)
    assert lib.bounded(ctypes.byref(bin_), ctypes.byref(bout)) == 3
    assert lib.bounded_error_message().decode() == \
        "'f' is needed at x = 0 .. 8, more than its bound() directive covers"
    out7 = np.zeros((8, 7), np.uint8)
    bout = make_buffer(out7.T)
    assert lib.bounded(ctypes.byref(bin_), ctypes.byref(bout)) == 0
    assert np.array_equal(out7, (img[:, :7] + np.uint8(1)) + (img[:, 1:8] + np.uint8(1)))


def test_names_of_the_entry_points_own_locals_are_free_for_arguments(tmp_path):
    """Inputs, params and outputs may be named like the C entry point's locals (r, b, d,
    args, info, names, bufs): `hdsl compile` of benchmarks/cases/boxsat.hl, whose param is
    `r`, failed with "'r' redeclared as different kind of symbol". The library gives the
    evaluator's values, and its bounds message names the buffer."""
    p = hdsl.loads("""pipeline clash
input args: f32[2]
input b: f32[2]
param r: i32 = 1
param d: f32 = 2.0
param info: i32 = 3
output names: f32[2]
algorithm {
    names(x, y) = args(x + r, y) * d + b(x, y) + f32(info)
}
""", "clash.hl")
    lib = hdsl.load_library(compile_to_files(p.ir, tmp_path, emit=("so",))["so"])
    rs = np.random.RandomState(1)
    a, bb = rs.rand(6, 9).astype(np.float32), rs.rand(6, 8).astype(np.float32)
    out = np.empty((6, 8), np.float32)
    lib.realize_into(out, args=a, b=bb, r=1, d=0.5, info=2)
    assert np.array_equal(out, p.realize([8, 6], args=a, b=bb, r=1, d=0.5, info=2))
    with pytest.raises(hdsl.HdslError) as e:
        lib.realize_into(out, args=a, b=bb, r=2, d=0.5, info=2)
    assert "clash: input 'args' is read at x = 2 .. 9, but the buffer covers x = 0 .. 8" in str(e.value)


# ------------------------------------------------------------ loaded from Python (hdsl.load_library)

def test_load_library_calls_like_a_compiled_pipeline(built):
    """A shared library made by `hdsl compile --emit so` loaded from Python: its arguments from
    its own table, calls through the fast path (runtime/fastcall.py) to blur_argv, the
    evaluator's values; several inputs, params of three types and two outputs too."""
    lib = hdsl.load_library(built["files"]["so"])
    assert lib.inputs == [("img", "u16", 2)] and lib.outputs == [("out", "u16", 2)]
    img = built["img"]
    out = np.zeros_like(img)
    assert lib.fast is not None and lib.fast.call(out, {"img": img}) == 0
    assert np.array_equal(out, built["blur"](img=img))
    assert np.array_equal(lib(img=img[::-1]), built["blur"](img=img[::-1]))
    # an input x-strided (a Fortran-order array): the general path copies it, same values
    assert np.array_equal(lib(img=np.asfortranarray(img)), built["blur"](img=img))
    multi = hdsl.load_library(built["files"]["multi_so"])
    assert [n for n, _, _ in multi.params] == ["gain", "offset", "flip"]
    mixed, hist = np.empty((H, W), np.float32), np.empty(16, np.int32)
    multi.realize_into((mixed, hist), a=built["a"], b=built["b"], gain=0.75, offset=-2, flip=True)
    want = built["multi"].realize([[W, H], [16]], a=built["a"], b=built["b"], gain=0.75, offset=-2, flip=True)
    assert np.array_equal(mixed, want[0]) and np.array_equal(hist, want[1])


def test_load_library_errors(built, tmp_path):
    lib = hdsl.load_library(built["files"]["so"])
    img = built["img"]

    def message(fn, **kw):
        with pytest.raises(hdsl.HdslError) as e:
            fn(**kw)
        return str(e.value)
    # checked in Python, with the compiled Pipeline's messages
    assert "input 'img' is u16 but the array holds uint8" in message(lib, img=img.astype(np.uint8))
    out = np.zeros_like(img)
    assert "overlaps input 'img'" in message(lib.realize_into, out=img, img=img)
    ro = np.zeros_like(img)
    ro.flags.writeable = False
    assert "is read-only" in message(lib.realize_into, out=ro, img=img)
    # found by the library: its own message
    multi = hdsl.load_library(built["files"]["multi_so"])
    small = np.zeros((4, W), np.uint8)
    assert f"multi: input 'a' is read at y = 0 .. {H - 1}, but the buffer covers y = 0 .. 3" in message(
        multi.realize_into, out=(np.empty((H, W), np.float32), np.empty(16, np.int32)), a=small, b=built["b"],
        gain=1.0, offset=0, flip=False)
    assert "param 'gain' has no default" in message(multi, a=built["a"], b=built["b"], offset=0, flip=False)
    assert "param 'offset' is i32; 2.5 does not fit" in message(multi, a=built["a"], b=built["b"], gain=1.0,
                                                                  offset=2.5, flip=False)
    # not a library of this name
    assert "holds no hdsl pipeline named 'nope'" in message(hdsl.load_library, path=built["files"]["so"], name="nope")
    (tmp_path / "libjunk.so").write_bytes(b"not an ELF file")
    assert "cannot load" in message(hdsl.load_library, path=tmp_path / "libjunk.so")


def test_avx2_target_takes_its_own_schedules_shifted_form(tmp_path):
    """A pipeline with a `schedule avx2` whose output splits differ from the unnamed schedule's
    (interpolate.hl's: tiles of 8 under AVX2, 16 under AVX-512): compiled ahead of time for
    x86-64-avx2, its shifted form's size requirements are the avx2 schedule's. (They were read
    from the host's schedule: an internal error on an AVX-512 host, no library at all.) The
    library gives the evaluator's values on both sides of the 8-wide tile."""
    src = """
pipeline two
input  img: f32[2]
output out: f32[2]
algorithm { out(x, y) = img(x, y) * 2.0f + 1.0f }
schedule { out.split(x, xo, xi, 16).vectorize(xi) }
schedule avx2 { out.split(x, xo, xi, 8).vectorize(xi) }
"""
    p = hdsl.loads(src, "two.hl")
    files = compile_to_files(p.ir, tmp_path, emit=("so", "h"), target="x86-64-avx2")
    lib = ctypes.CDLL(str(files["so"]))
    lib.two.argtypes = [ctypes.POINTER(BufferStruct), ctypes.POINTER(BufferStruct)]
    rs = np.random.RandomState(5)
    for w in (5, 8, 13, 40):
        img = rs.rand(3, w).astype(np.float32)
        out = np.zeros_like(img)
        assert lib.two(ctypes.byref(make_buffer(img.T)), ctypes.byref(make_buffer(out.T))) == 0
        assert np.array_equal(out, p(img=img)), w
