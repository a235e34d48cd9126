"""hdsl: Halide as a language of its own.

    p = hdsl.load("blur.hl")
    out = p(img=array)                 # outputs at the first input's size
    out = p.realize((W, H), img=array)
    lib = hdsl.load_library("libblur.so")     # an `hdsl compile --emit so` library, called alike
"""
import sys

# The IR is a tree walked recursively: a pipeline of many stages nests its loops, lets and
# allocations a few hundred levels deep, past Python's default limit of 1000 frames.
if sys.getrecursionlimit() < 20000:
    sys.setrecursionlimit(20000)

from hdsl.api import Pipeline, load, loads  # noqa: E402
from hdsl.diagnostics import HdslError, InternalError  # noqa: E402


def load_library(path, name=None):
    """An AOT shared library (`hdsl compile FILE --emit so`), called like a compiled Pipeline
    (hdsl/runtime/library.py)."""
    from hdsl.runtime.library import load_library as load
    return load(path, name)


__all__ = ["Pipeline", "load", "loads", "load_library", "batch", "HdslError", "InternalError"]
__version__ = "0.1.0"


def batch(p, inputs, output=None, params=None, **options):
    """Run a pipeline over many images, in local processes or on a Dask cluster
    (hdsl/scale/batch.py, docs/scale.md)."""
    from hdsl.scale.batch import batch as run
    return run(p, inputs, output, params, **options)
