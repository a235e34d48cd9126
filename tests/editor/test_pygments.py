"""The Pygments lexer (hdsl/editor/pygments_lexer.py), found through its entry point."""
from __future__ import annotations

import subprocess
import sys

import pytest
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.token import Error, Text, string_to_tokentype

from hdsl.editor.pygments_lexer import HdslLexer
from hdsl.editor.tokens import rules
from tests.editor.conftest import REVIEWED, SAMPLE, find, known_words, source_files


def lines_of_tokens(text: str) -> list[list[tuple[str, object]]]:
    """[(text, token type), ...] per line, from the lexer found by name as a user's tool finds it."""
    lexer = get_lexer_by_name("hdsl", stripnl=False, ensurenl=False)
    lines = [[] for _ in text.split("\n")]
    for index, kind, value in lexer.get_tokens_unprocessed(text):
        line = text.count("\n", 0, index)
        for k, part in enumerate(value.split("\n")):
            if part:
                lines[line + k].append((part, kind))
    return lines


def test_found_by_name_alias_and_file_name():
    assert type(get_lexer_by_name("hdsl")) is HdslLexer
    assert type(get_lexer_by_name("hl")) is HdslLexer
    assert type(get_lexer_for_filename("blur.hl")) is HdslLexer


def test_pygmentize_uses_it():
    """`pygmentize -l hdsl` (the console script's module) highlights a keyword and a directive."""
    out = subprocess.run([sys.executable, "-m", "pygments", "-l", "hdsl", "-f", "html", str(SAMPLE)],
                         check=True, capture_output=True, text=True).stdout
    assert '<span class="kd">pipeline</span>' in out
    assert '<span class="fm">compute_at</span>' in out


def test_reviewed_tokens():
    lines = lines_of_tokens(SAMPLE.read_text())
    for lineno, text, occurrence, _, kind in REVIEWED:
        assert find(lines[lineno - 1], text, occurrence) is string_to_tokentype(kind), (lineno, text)


def test_every_word_the_compiler_knows_is_highlighted():
    cases = known_words()
    lines = lines_of_tokens("".join(line + "\n" for line, _ in cases))
    for toks, (_, word) in zip(lines, cases):
        kind = find(toks, word, 0)
        assert str(kind).startswith(("Token.Keyword", "Token.Name.Builtin", "Token.Name.Function")), (word, kind)
        assert kind is not string_to_tokentype("Name")


@pytest.mark.parametrize("path", source_files(), ids=lambda p: p.name)
def test_no_error_tokens(path):
    text = path.read_text()
    lexer = get_lexer_by_name("hdsl", stripnl=False, ensurenl=False)
    toks = list(lexer.get_tokens_unprocessed(text))
    assert "".join(v for _, _, v in toks) == text
    for index, kind, value in toks:
        where = f"{path.name}:{text.count(chr(10), 0, index) + 1}: {value!r}"
        assert kind not in Error, where
        assert kind is not Text or not value.strip(), where   # everything but whitespace has a type


def test_an_error_token_for_a_stray_character():
    kinds = [k for _, k, v in get_lexer_by_name("hdsl").get_tokens_unprocessed("x = 1 @ 2\n") if v == "@"]
    assert kinds == [Error]


def test_each_scope_has_one_pygments_type():
    """The two engines' names correspond one to one per rule group, so the same token
    never gets two different kinds of colour in VS Code and in the docs."""
    seen: dict[str, str] = {}
    for rule in rules():
        for scope, kind in zip(rule.scopes, rule.tokens):
            assert seen.setdefault(scope, kind) == kind, (scope, kind, seen[scope])


def test_the_docs_code_blocks_lex_without_errors():
    """Every ```hl and ```hl-fragment block of docs/*.md and README.md (the names the docs
    use; an ```hl-error block may hold a deliberate stray character)."""
    from tests.editor.conftest import ROOT
    import re
    count = 0
    for doc in sorted(ROOT.glob("docs/*.md")) + [ROOT / "README.md"]:
        for lang, body in re.findall(r"^```(hl|hl-fragment)(?![-\w])[^\n]*\n(.*?)^```", doc.read_text(), re.M | re.S):
            lexer = get_lexer_by_name(lang)
            assert type(lexer) is HdslLexer
            bad = [v for _, k, v in lexer.get_tokens_unprocessed(body) if k in Error]
            assert not bad, (doc.name, body[:200], bad)
            count += 1
    assert count >= 30
