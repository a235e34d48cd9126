"""The IR verifier catches malformed loop nests (and accepts real ones)."""
import pytest

import hdsl
from hdsl.diagnostics import InternalError
from hdsl.ir.expr import BinOp, Const, Var
from hdsl.ir.stmt import Block, For, LetStmt, Store
from hdsl.ir.types import I32, I64, U8
from hdsl.ir.verify import verify
from hdsl.lower.lower import lower

SRC = """
pipeline p
input img: u8[1]
output out: u8[1]
algorithm { out(x) = img(x) }
"""


@pytest.fixture(scope="module")
def pipe():
    return hdsl.loads(SRC, "p.hl").ir


def test_real_lowering_verifies(pipe):
    low = lower(pipe)
    verify(low.stages["schedule_functions"], pipe, flat=False)
    verify(low.stmt, pipe, flat=True)


def test_unbound_variable_is_caught(pipe):
    bad = Store("out", Const(I64, 0), BinOp("+", Var("nowhere", U8), Const(U8, 1), U8))
    with pytest.raises(InternalError, match="unbound variable nowhere"):
        verify(bad, pipe, flat=True)


def test_mismatched_operands_are_caught(pipe):
    bad = LetStmt("v", BinOp("+", Const(I32, 1), Const(U8, 1), I32), Block(()))
    with pytest.raises(InternalError, match="types i32 and u8"):
        verify(bad, pipe, flat=True)


def test_vectorized_loop_needs_constant_extent(pipe):
    bad = For("i", Const(I32, 0), Var("out.extent.0", I32), "vectorized", Block(()))
    with pytest.raises(InternalError, match="non-constant extent"):
        verify(bad, pipe, flat=True)
