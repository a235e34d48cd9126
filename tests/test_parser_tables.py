"""The parser's LALR tables are shipped built (hdsl/grammar/hdsl_lalr.pickle, Lark.save) so a
first parse in a process loads them (~5 ms) instead of building them from the grammar (~60-80
ms). They must be the current grammar's, and parse every program exactly as a parser built
from the grammar does; tables of another grammar, or a damaged file, are not used."""
from __future__ import annotations

import hashlib
from pathlib import Path

import lark
import pytest

from hdsl.frontend import parse as ps

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = sorted((ROOT / "examples").glob("*.hl")) + sorted((ROOT / "hdsl" / "stdlib").glob("*.hl"))


def _header_fields() -> list[str]:
    with open(ps.TABLES_PATH, "rb") as f:
        return f.readline().decode().split()


def test_the_shipped_tables_are_the_current_grammars():
    fields = _header_fields()
    assert fields[:2] == ["hdsl-lalr", hashlib.sha256(ps.GRAMMAR_PATH.read_text().encode()).hexdigest()], \
        "the grammar changed: run `make parser-tables` and commit hdsl/grammar/hdsl_lalr.pickle"


@pytest.mark.skipif(_header_fields()[3:] != [lark.__version__],
                    reason="tables written by another Lark version: the parser is built from the grammar")
def test_the_parser_is_loaded_from_the_tables():
    ps._parser.cache_clear()
    try:
        assert ps._parser().source_path == "<deserialized>"      # (Lark's mark of a loaded parser)
    finally:
        ps._parser.cache_clear()


def _tokens(tree):
    return [(t.type, str(t), t.line, t.column, t.end_line, t.end_column)
            for t in tree.scan_values(lambda v: isinstance(v, lark.Token))]


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_loaded_and_built_parsers_give_the_same_trees(path):
    grammar = ps.GRAMMAR_PATH.read_text()
    loaded = ps._load_tables(grammar)
    if loaded is None:
        pytest.skip("tables not usable with this Lark version")
    built = ps._build_parser(grammar)
    src = path.read_text()
    src = src if src.endswith("\n") else src + "\n"
    a, b = loaded.parse(src), built.parse(src)
    assert a == b and _tokens(a) == _tokens(b)
    assert (a.meta.line, a.meta.end_line) == (b.meta.line, b.meta.end_line)


def test_tables_of_another_grammar_or_damaged_are_not_used(tmp_path, monkeypatch):
    good = ps.TABLES_PATH.read_bytes()
    grammar = ps.GRAMMAR_PATH.read_text()
    fake = tmp_path / "t.pickle"
    monkeypatch.setattr(ps, "TABLES_PATH", fake)
    fake.write_bytes(good)
    assert (ps._load_tables(grammar) is not None) == (_header_fields_of(good)[3:] == [lark.__version__])
    assert ps._load_tables(grammar + "\n// changed\n") is None
    fake.write_bytes(good[: len(good) // 2])
    assert ps._load_tables(grammar) is None
    fake.unlink()
    assert ps._load_tables(grammar) is None


def _header_fields_of(data: bytes) -> list[str]:
    return data.split(b"\n", 1)[0].decode().split()
