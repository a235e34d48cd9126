"""Bounds inference shares its let and loop eliminations across the Funcs of one lowering
(lower/symbolic.py's _eliminate, through ir.expr.memo_table): a pure cache, so the loop
nest must be exactly the one lowered without it, and it must actually be used."""
from __future__ import annotations

import hdsl
from hdsl.ir.printer import stmt_str
from hdsl.lower import symbolic
from hdsl.lower.lower import lower

# a three-level pyramid whose levels are computed inside tiles of the output: each level's
# box is found through the same loops and lets as the levels it reads
PYRAMID = """
pipeline pyr
use boundary
input  img: f32[2]
output out: f32[2]
algorithm {
    c = repeat_edge(img)
    d1(x, y) = (c(2*x - 1, y) + 2.0f * c(2*x, y) + c(2*x + 1, y)) / 4.0f
    d2(x, y) = (d1(2*x - 1, y) + 2.0f * d1(2*x, y) + d1(2*x + 1, y)) / 4.0f
    u1(x, y) = (d2(x / 2, y) + d2((x + 1) / 2, y)) / 2.0f
    out(x, y) = c(x, y) - d1(x / 2, y) + u1(x / 2, y)
}
schedule s {
    out.tile(x, y, xo, yo, xi, yi, 32, 8).vectorize(xi, 8).parallel(yo)
    d1.compute_at(out, xo).vectorize(x, 8)
    d2.compute_at(out, xo).vectorize(x, 8)
    u1.compute_at(out, xo)
}
"""


def test_shared_eliminations_change_no_bound(monkeypatch):
    p = hdsl.loads(PYRAMID, "pyr.hl")
    tables = []
    real = symbolic.memo_table

    def counting(name):
        t = real(name)
        tables.append(t)
        return t
    monkeypatch.setattr(symbolic, "memo_table", counting)
    shared = stmt_str(lower(p.ir, "s", shift_outputs=True).stmt)
    # the table was consulted and holds results reused by later Funcs' boxes
    assert tables and len(tables[-1]) > 0
    monkeypatch.setattr(symbolic, "memo_table", lambda name: {})     # every elimination afresh
    fresh = stmt_str(lower(p.ir, "s", shift_outputs=True).stmt)
    assert shared == fresh


def test_the_table_is_emptied_with_the_interned_nodes():
    """Its keys are ids of canonical nodes: they must not outlive them (clear_interned)."""
    from hdsl.ir.expr import clear_interned, memo_table
    memo_table("eliminate")[(1, "x", 2)] = None
    clear_interned()
    assert memo_table("eliminate") == {}


def test_an_expression_bounded_over_two_ranges_gets_each_range():
    """The table's key holds the binder: the same `v + 1` eliminated through two loops of
    different extents, or two lets of different values, gives each its own bound."""
    from hdsl.ir.expr import BinOp, Const, Var, clear_interned, intern
    from hdsl.ir.types import I32
    clear_interned()
    e = intern(BinOp("+", Var("v", I32), Const(I32, 1), I32))

    def box():
        b = symbolic._Box(1)
        b.add([(e, e)])
        return b

    def c(k):
        return intern(Const(I32, k))
    first = symbolic._eliminate(box(), "v", (c(0), c(9)))
    second = symbolic._eliminate(box(), "v", (c(0), c(99)))
    value = symbolic.const_value
    assert [value(first.lo[0]), value(first.hi[0])] == [1, 10]
    assert [value(second.lo[0]), value(second.hi[0])] == [1, 100]
    let3 = symbolic._eliminate(box(), "v", None, exact=c(3))
    let7 = symbolic._eliminate(box(), "v", None, exact=c(7))
    assert (value(let3.lo[0]), value(let7.hi[0])) == (4, 8)
    clear_interned()


FOLDED = """
pipeline fold
input img: i32[2]
output g: i32[2]
algorithm {
    f(x, y) = img(x, y) * 3 + 1
    h(x, y) = img(x, y) * 2
    g(x, y) = f(x, y) + f(x, y + 1) + h(x, y + 2) + h(x, y)
}
schedule {
    g.split(y, yo, yi, 16).parallel(yo)
    f.store_at(g, yo).compute_at(g, yi).fold_storage(y, 4)
    h.reorder_storage(y, x).compute_at(g, yo)
}
"""


def test_flattening_with_one_memo_gives_each_access_its_own_layout(monkeypatch):
    """lower/flatten.py shares one substitution memo across the loop nest: the same loop
    nest as flattening each expression afresh, for a folded Func and a Func stored y first
    (whose calls are addressed unlike the default layout). (h reads img, not f: h computed per
    yo reading f, computed per yi, read f before it was computed; check_uses_in_scope now says so.)"""
    from hdsl.lower import flatten
    texts = {}
    for src, name, schedule in ((FOLDED, "fold.hl", None), (PYRAMID, "pyr.hl", "s")):
        p = hdsl.loads(src, name)
        monkeypatch.undo()
        shared = stmt_str(lower(p.ir, schedule, shift_outputs=True).stmt)
        monkeypatch.setattr(flatten._Flattener, "expr",
                            lambda self, e: flatten.substitute(e, self._visit, {}))
        fresh = stmt_str(lower(p.ir, schedule, shift_outputs=True).stmt)
        assert shared == fresh
        texts[name] = shared
    assert "% 4" in texts["fold.hl"]            # (the folded layout is the one exercised)


def test_partition_substitution_table_keys_on_the_value():
    """lower/partition.py's _subst_var keeps its results for the lowering: the same
    expression with the same let name but another value is substituted afresh."""
    from hdsl.ir.expr import BinOp, Const, Var, clear_interned, intern
    from hdsl.ir.types import I32
    from hdsl.lower.partition import _subst_var
    clear_interned()
    e = intern(BinOp("*", Var("t", I32), Var("u", I32), I32))
    two, three = intern(Const(I32, 2)), intern(Const(I32, 3))
    assert str(_subst_var(e, "t", two)) == str(BinOp("*", two, Var("u", I32), I32))
    assert str(_subst_var(e, "t", three)) == str(BinOp("*", three, Var("u", I32), I32))
    assert str(_subst_var(e, "u", two)) == str(BinOp("*", Var("t", I32), two, I32))
    clear_interned()
