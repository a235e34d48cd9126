"""The correctness corpus's float programs, differentiated (in f64) against central finite
differences: the loss is a random weighting of the output, sum(out(x, y) * weight(x, y))."""
import re

import numpy as np
import pytest

import hdsl
from tests.autodiff.helpers import check_gradient
from tests.correctness.helpers import PROGRAMS


def with_loss(name: str, output: str = "out", t: str = "f64") -> str:
    """The program in type t (f64 for finite differences), with an input `adw` and a loss()
    weighting `output` by it."""
    src = (PROGRAMS / f"{name}.hl").read_text()
    if t == "f64":
        src = re.sub(r"\bf32\b", "f64", src)
        src = re.sub(r"\b(\d+\.\d*)f\b", r"f64(\1)", src)
    src = src.replace("output ", f"input adw: {t}[2]\noutput ", 1)
    start = src.index("{", src.index("algorithm"))
    depth, i = 0, start
    while True:
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        if depth == 0:
            break
        i += 1
    loss = f"    rdom adr = adw\n    loss() = sum({output}(adr.x, adr.y) * adw(adr.x, adr.y))\n"
    return src[:i] + loss + src[i:]


@pytest.mark.parametrize("name,size,params", [
    ("gauss_sep", (5, 6), {}),                       # a separable stencil with mirror_image
    ("pyramid", (8, 8), {}),                         # downsampling (2*x) and upsampling (x/2) scatters
    ("bilateral_grid", (8, 8), {"r_sigma": 0.25}),   # a histogram with data-dependent bins, lerps
])
def test_corpus_program_gradient(name, size, params):
    rng = np.random.default_rng(7)
    img = rng.uniform(0.05, 0.95, size)
    check_gradient(with_loss(name), dict(img=img, adw=rng.uniform(-1, 1, size), **params),
                   ["img"] + list(params))


@pytest.mark.parametrize("name", ["pyramid", "gauss_sep"])
def test_native_equals_evaluator(name):
    """In f32, as written; gradient Funcs get the default schedule, the rest is inlined.
    (The corpus's unscheduled bilateral_grid does not compile natively even without a gradient:
    its inlined histogram's data-dependent z is unbounded.)"""
    rng = np.random.default_rng(8)
    kwargs = dict(img=rng.uniform(0.05, 0.95, (16, 12)).astype(np.float32),
                  adw=rng.uniform(-1, 1, (16, 12)).astype(np.float32))
    g = hdsl.loads(with_loss(name, t="f32")).gradient("loss", ["img"])
    ref, got = g(**kwargs), g.compile("host")(**kwargs)
    assert np.array_equal(got["img"], ref["img"]) and got["loss"] == ref["loss"]
