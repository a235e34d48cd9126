"""hdsl: Halide as a language of its own.

    p = hdsl.load("blur.hl")
    out = p(img=array)                 # outputs at the first input's size
    out = p.realize((W, H), img=array)
"""
from hdsl.api import Pipeline, load, loads
from hdsl.diagnostics import HdslError, InternalError

__all__ = ["Pipeline", "load", "loads", "HdslError", "InternalError"]
__version__ = "0.1.0"
