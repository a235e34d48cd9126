"""hdsl: Halide as a language of its own.

    p = hdsl.load("blur.hl")
    out = p(img=array)                 # outputs at the first input's size
    out = p.realize((W, H), img=array)
"""
import sys

# The IR is a tree walked recursively: a pipeline of many stages nests its loops, lets and
# allocations a few hundred levels deep, past Python's default limit of 1000 frames.
if sys.getrecursionlimit() < 20000:
    sys.setrecursionlimit(20000)

from hdsl.api import Pipeline, load, loads  # noqa: E402
from hdsl.diagnostics import HdslError, InternalError  # noqa: E402

__all__ = ["Pipeline", "load", "loads", "batch", "HdslError", "InternalError"]
__version__ = "0.1.0"


def batch(p, inputs, output=None, params=None, **options):
    """Run a pipeline over many images, in local processes or on a Dask cluster
    (hdsl/scale/batch.py, docs/scale.md)."""
    from hdsl.scale.batch import batch as run
    return run(p, inputs, output, params, **options)
