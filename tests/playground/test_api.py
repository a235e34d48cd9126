"""The playground's JSON API on a real server: the checker's positioned errors, runs that equal
the reference evaluator, the compiled forms `hdsl lower` prints, what a program may read, and
hostile programs that end with a clear message while the server goes on serving."""
from __future__ import annotations

import base64
import io
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

import hdsl
from hdsl.runtime.images import load_image

from tests.playground.conftest import CPU_SECONDS, ROOT

IMAGES = ROOT / "examples" / "images"

# a u8 program with a param; its line 6, column 45 names an undefined 'q' (counted by hand)
INVERT = """pipeline invert
input img: u8[2]
output out: u8[2]
param k: i32 = 10
algorithm {
out(x, y) = u8(clamp(255 - i32(img(x, y)) + k, 0, 255))
}
"""
BROKEN = INVERT.replace("+ k, 0", "+ q, 0")


def decode(data_url: str) -> np.ndarray:
    assert data_url.startswith("data:image/png;base64,")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data_url.split(",", 1)[1]))))


def evaluator(program: str, **kwargs) -> np.ndarray:
    return hdsl.loads(program)(**kwargs)


def test_check_positions_an_error_and_describes_a_good_program(server):
    status, a = server.post("/api/check", {"source": BROKEN})
    assert status == 200 and a["ok"] is False
    (d,) = a["diagnostics"]
    assert (d["line"], d["col"], d["end_line"], d["end_col"]) == (6, 45, 6, 46)
    assert BROKEN.split("\n")[5][44] == "q"
    assert "'q' is not defined" in d["message"]
    assert d["text"].startswith("playground.hl:6:45: error:") and "^" in d["text"]

    status, a = server.post("/api/check", {"source": INVERT})
    assert a["ok"] is True and a["diagnostics"] == []
    assert a["pipeline"]["params"] == [{"name": "k", "type": "i32", "default": 10}]
    assert a["pipeline"]["inputs"] == [{"name": "img", "type": "u8", "dims": 2}]


@pytest.mark.parametrize("target", ["host", "interp"])
def test_a_run_equals_the_reference_evaluator(server, target):
    img = load_image(IMAGES / "gray8.png")
    status, a = server.post("/api/run", {"source": INVERT, "target": target, "params": {"k": 30},
                                         "inputs": {"img": {"sample": "gray8.png"}}})
    assert status == 200 and a["ok"], a
    (out,) = a["outputs"]
    pixels = decode(out["png"])
    expected = evaluator(INVERT, img=img, k=30)
    assert pixels.shape == expected.shape + (4,)
    for c in range(3):                        # a u8 output is drawn as it is, gray
        assert np.array_equal(pixels[:, :, c], expected)
    assert (pixels[:, :, 3] == 255).all()
    assert (out["min"], out["max"], out["dtype"]) == (int(expected.min()), int(expected.max()), "uint8")
    assert a["target"] == target and a["compile_ms"] > 0 and a["run_ms"] > 0


def test_an_uploaded_image_is_an_input(server):
    data = (IMAGES / "gray8.png").read_bytes()
    status, a = server.post("/api/run", {"source": INVERT, "target": "interp",
                                         "inputs": {"img": {"upload": base64.b64encode(data).decode(),
                                                            "name": "mine.png"}}})
    assert a["ok"], a
    expected = evaluator(INVERT, img=load_image(IMAGES / "gray8.png"), k=10)
    assert np.array_equal(decode(a["outputs"][0]["png"])[:, :, 0], expected)


def test_inputs_must_fit_and_come_from_the_samples(server):
    _, a = server.post("/api/run", {"source": INVERT, "inputs": {"img": {"sample": "gray16.png"}}})
    assert not a["ok"]
    assert "input 'img' is u8[2] but the image holds u16 values" in a["diagnostics"][0]["message"]
    _, a = server.post("/api/run", {"source": INVERT, "inputs": {"img": {"sample": "../blur.hl"}}})
    assert not a["ok"] and "there is no sample image '../blur.hl'" in a["diagnostics"][0]["message"]


def test_use_reads_only_the_stdlib_and_the_examples(server):
    grammar = (ROOT / "hdsl" / "grammar" / "hdsl.lark").read_text().split("\n")[0]
    for target in ("../hdsl/grammar/hdsl.lark", "/etc/passwd", "../examples/../README.md"):
        program = f'pipeline p\nuse "{target}"\noutput o: u8[1]\nalgorithm {{ o(x) = u8(x) }}\n'
        _, a = server.post("/api/check", {"source": program})
        assert not a["ok"]
        (d,) = a["diagnostics"]
        assert (d["line"], d["col"]) == (2, 5)
        assert "the playground reads no file but the examples' modules" in d["message"]
        assert grammar not in str(a) and "root:" not in str(a)
    ok = 'pipeline p\nuse "halide_math.hl"\nuse filters\noutput o: f32[1]\nalgorithm { o(x) = f32(x) }\n'
    _, a = server.post("/api/check", {"source": ok})
    assert a["ok"], a


def test_the_compiled_forms_are_what_hdsl_lower_prints(server, tmp_path):
    program = (ROOT / "examples" / "blur.hl").read_text()
    path = tmp_path / "blur.hl"
    path.write_text(program)
    for after in ("schedule_functions", "flatten"):
        _, a = server.post("/api/view", {"source": program, "kind": "stmt", "after": after})
        cli = subprocess.run([sys.executable, "-m", "hdsl.cli", "lower", str(path), "--print-after", after],
                             capture_output=True, text=True, check=True).stdout
        assert a["ok"] and a["text"] == cli
        assert "for out.s0.y" in a["text"] or "out.s0.y" in a["text"]
    for kind, label in (("llvm", "define "), ("asm", "hdsl_blur:")):
        _, a = server.post("/api/view", {"source": program, "kind": kind})
        cli = subprocess.run([sys.executable, "-m", "hdsl.cli", "lower", str(path), "--emit", kind],
                             capture_output=True, text=True, check=True).stdout
        assert a["ok"] and a["text"] + "\n" == cli and label in a["text"]
    # a GPU target's kernels: PTX for cuda, GLSL for opengl, as `hdsl lower --emit` prints them
    for kind, target, label in (("ptx", "cuda", ".entry kernel_out_"), ("glsl", "opengl", "void main()")):
        _, a = server.post("/api/view", {"source": program, "kind": kind, "target": target})
        cli = subprocess.run([sys.executable, "-m", "hdsl.cli", "lower", str(path), "--emit", kind,
                              "--target", target], capture_output=True, text=True, check=True).stdout
        assert a["ok"] and a["text"] == cli and label in a["text"], a
    _, a = server.post("/api/view", {"source": program, "kind": "ptx", "target": "host"})
    assert not a["ok"] and "--emit ptx needs a cuda target" in a["diagnostics"][0]["message"]
    _, a = server.post("/api/view", {"source": program, "kind": "html"})
    # the report links loops to the source, and shows the source sent (no file on disk)
    assert a["ok"] and '<a href="#L' in a["text"] and "repeat_edge(img)" in a["text"]
    _, a = server.post("/api/view", {"source": program, "kind": "stmt", "after": "nonsense"})
    assert not a["ok"] and "unknown pass 'nonsense'" in a["diagnostics"][0]["message"]


HOSTILE = {
    # 10^10 points per output pixel, each reading somewhere else: only the CPU limit ends it
    "rdom": """pipeline slow
input img: u8[2]
output out: u8[2]
algorithm {
    rdom r = [0 .. 100000, 0 .. 100000]
    out(x, y) = u8(sum(i32(img((r.x ^ x) % 64, (r.y ^ y) % 64))) % 256)
}
""",
    # a compute_root buffer of 256*200 x 192*40 f64 values (3 GiB)
    "buffer": """pipeline mem
input img: u8[2]
output out: u8[2]
algorithm {
    big(x, y) = f64(img(x % 10, y % 10))
    out(x, y) = u8(big(x * 200, y * 40))
}
schedule { big.compute_root() }
""",
    # forty stencil levels, all inline: an expression of 3^40 terms to lower
    "pyramid": "pipeline pyr\ninput img: u8[2]\noutput out: u8[2]\nuse boundary\nalgorithm {\n"
               "    g0 = repeat_edge(img)\n"
               + "".join(f"    g{i}(x, y) = g{i - 1}(x - 1, y) + g{i - 1}(x + 1, y) + g{i - 1}(x, y + 1)\n"
                         for i in range(1, 40))
               + "    out(x, y) = g39(x, y)\n}\n",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_program_gets_a_clear_answer_and_the_server_stays_up(server, kind):
    status, a = server.post("/api/run", {"source": HOSTILE[kind], "target": "host",
                                         "inputs": {"img": {"sample": "gray8.png"}}})
    assert status == 200 and a["ok"] is False, a
    words = a.get("error") or a["diagnostics"][0]["message"]
    if kind == "buffer":
        assert words in ("out of memory",) or a.get("limit") in ("memory", "crash"), a
    else:
        assert a["limit"] in ("cpu", "wall"), a
        assert f"more than its {CPU_SECONDS} s of CPU time" in words or "took longer than" in words
        assert "rdom" in a["hint"]
    assert server.get("/")[0] == 200
    _, ok = server.post("/api/check", {"source": INVERT})
    assert ok["ok"]


def test_malformed_and_oversized_requests(server):
    req = __import__("urllib.request").request
    r = req.Request(server.url + "/api/run", b"not json", {"Content-Type": "application/json"})
    with pytest.raises(__import__("urllib.error").error.HTTPError) as e:
        req.urlopen(r, timeout=30)
    assert e.value.code == 400
    status, a = server.post("/api/check", {"source": "#" * (13 << 20)})
    assert status == 413 and "larger than 12 MiB" in a["error"]


def test_the_output_size_and_the_samples_offered(server):
    img = load_image(IMAGES / "gray8.png")
    _, a = server.post("/api/run", {"source": INVERT, "target": "interp", "size": [100, 50],
                                    "inputs": {"img": {"sample": "gray8.png"}}})
    assert a["ok"], a
    expected = hdsl.loads(INVERT).realize((100, 50), img=img, k=10)
    assert expected.shape == (50, 100)
    assert np.array_equal(decode(a["outputs"][0]["png"])[:, :, 0], expected)
    _, meta = server.get("/api/meta")
    import json
    meta = json.loads(meta)
    offered = {s["name"]: (s["type"], s["dims"]) for s in meta["images"]}
    # every input of the examples has a sample of its type (camera_pipe's colour matrices too)
    assert offered["gray8.png"] == ("u8", 2) and offered["camera_matrix_3200.npy"] == ("f32", 2)
    assert offered["rgb16.png"] == ("u16", 3) and offered["shapes_mask.npy"] == ("bool", 2)
    assert meta["targets"][:2] == ["host", "interp"] and "blur" in meta["examples"]
    assert "filters" in meta["stdlib"]


def test_the_target_list_follows_the_api(monkeypatch):
    """A target added to hdsl.api.TARGETS (cuda, opengl) reaches the page; x86-64 variants don't."""
    from hdsl.playground import jobs
    monkeypatch.setattr("hdsl.api.TARGETS", ("interp", "host", "x86-64-avx2", "cuda"))
    assert jobs.targets() == ["host", "interp", "cuda"]


def test_outputs_are_drawn_by_the_documented_mapping():
    """jobs.display_rgba: u8 as is; other integers scaled from 0 .. type max to 0 .. 255
    (negatives 0); floats clamped to 0 .. 1 times 255; bool 0/255; rounded to nearest.
    Expected values worked out by hand."""
    from hdsl.playground.jobs import display_rgba
    cases = [
        (np.array([[0, 7, 255]], np.uint8), [0, 7, 255]),
        (np.array([[0, 257, 65535, 32896]], np.uint16), [0, 1, 255, 128]),
        (np.array([[-5, 32767, 128]], np.int16), [0, 255, 1]),
        (np.array([[-1.0, 0.5, 2.0, np.nan, 0.2]], np.float32), [0, 128, 255, 0, 51]),
        (np.array([[True, False]]), [255, 0]),
    ]
    for arr, gray in cases:
        out = display_rgba(arr)
        assert out.shape == arr.shape + (4,)
        for c in range(3):
            assert out[0, :, c].tolist() == gray, (arr.dtype, out[0, :, c])
        assert (out[:, :, 3] == 255).all()
    rgba = np.array([[[10, 20, 30, 0]]], np.uint8)        # colour: RGB drawn, alpha not
    assert display_rgba(rgba)[0, 0].tolist() == [10, 20, 30, 255]
    two = np.array([[[9, 200]]], np.uint8)                 # two channels: the first, gray
    assert display_rgba(two)[0, 0].tolist() == [9, 9, 9, 255]


SCHEDULED = """pipeline blur3
use boundary
input img: u8[2]
output out: u8[2]
algorithm {
    c = repeat_edge(img)
    bx(x, y) = (u16(c(x - 1, y)) + u16(c(x, y)) + u16(c(x + 1, y))) / 3
    out(x, y) = u8((bx(x, y - 1) + bx(x, y) + bx(x, y + 1)) / 3)
}
schedule tiled {
    out.tile(x, y, xi, yi, 32, 16).vectorize(xi, 8).parallel(y)
    bx.compute_at(out, x)
}
schedule rooted { bx.compute_root() }
"""


def test_a_named_schedule_is_offered_run_and_shown(server):
    _, a = server.post("/api/check", {"source": SCHEDULED})
    assert a["pipeline"]["schedules"] == ["tiled", "rooted"]
    expected = hdsl.loads(SCHEDULED)(img=load_image(IMAGES / "gray8.png"))
    for name in ("tiled", "rooted"):
        _, a = server.post("/api/run", {"source": SCHEDULED, "schedule": name, "target": "host",
                                        "inputs": {"img": {"sample": "gray8.png"}}})
        assert a["ok"], a
        assert np.array_equal(decode(a["outputs"][0]["png"])[:, :, 0], expected)
    _, tiled = server.post("/api/view", {"source": SCHEDULED, "schedule": "tiled", "kind": "stmt",
                                         "after": "schedule_functions"})
    _, rooted = server.post("/api/view", {"source": SCHEDULED, "schedule": "rooted", "kind": "stmt",
                                          "after": "schedule_functions"})
    assert "parallel for out.s0.y" in tiled["text"] and "parallel" not in rooted["text"]
    _, a = server.post("/api/run", {"source": SCHEDULED, "schedule": "nope",
                                    "inputs": {"img": {"sample": "gray8.png"}}})
    assert not a["ok"] and "has no schedule 'nope'" in a["diagnostics"][0]["message"]


def test_an_output_with_nan_and_infinities(server):
    """JSON has no NaN: the caption's extremes come as text, and NaN is drawn as 0."""
    program = ("pipeline roots\ninput img: u8[2]\noutput out: f32[2]\n"
               "algorithm { out(x, y) = select(x == 1, 1.0f / 0.0f, sqrt(f32(x) - 2.0f) / 8.0f) }\n")
    status, a = server.post("/api/run", {"source": program, "target": "interp",
                                         "inputs": {"img": {"sample": "gray8.png"}}})
    assert status == 200 and a["ok"], a
    (out,) = a["outputs"]
    assert out["min"] == "nan" and out["max"] == "nan"     # (NumPy's min and max propagate NaN)
    pixels = decode(out["png"])[:, :, 0]
    assert pixels[0, 0] == 0 and pixels[0, 1] == 255 and pixels[0, 2] == 0     # NaN, inf, 0
    assert pixels[0, 66] == 255 and pixels[0, 18] == round(255 * 0.5)          # sqrt(64)/8, sqrt(16)/8


def test_the_starter_program_runs_without_inputs(server):
    """What an installed wheel (no examples folder) opens: no input, a 256 x 256 RGB output,
    params with defaults; the same values as the evaluator's."""
    status, text = server.get("/api/source/starter/rings")
    program = text.decode()
    assert status == 200 and "param" in program
    _, a = server.post("/api/run", {"source": program, "target": "host", "params": {"scale": 0.1}})
    assert a["ok"], a
    expected = hdsl.loads(program).realize((256, 256, 3), scale=0.1)
    assert np.array_equal(decode(a["outputs"][0]["png"])[:, :, :3], expected)


def test_a_malformed_run_request_is_told_so(server):
    for bad in ({"inputs": ["gray8.png"]}, {"inputs": {"img": "gray8.png"}}, {"params": [1]}, {"size": "10"}):
        _, a = server.post("/api/run", {"source": INVERT, **bad})
        assert not a["ok"] and "the run request is malformed" in a["diagnostics"][0]["message"], bad
