"""The VS Code grammar (editors/vscode/syntaxes/hdsl.tmLanguage.json), run by
VS Code's own tokenizer: vscode-textmate on the Oniguruma WebAssembly build."""
from __future__ import annotations

import json

import pytest

from hdsl.editor import textmate
from hdsl.editor.tokens import grammar_keywords, rules
from hdsl.frontend import elaborate
from tests.editor.conftest import REVIEWED, SAMPLE, find, known_words, source_files, tokenize_with_vscode


@pytest.fixture(scope="module")
def tokenized(tmp_path_factory):
    words = tmp_path_factory.mktemp("words") / "words.hl"
    words.write_text("".join(line + "\n" for line, _ in known_words()))
    files = source_files() + [words]
    return tokenize_with_vscode(textmate.GRAMMAR_FILE, files), words


def _tokens(line, toks):
    return [(line[s:e], scopes) for s, e, scopes in toks]


def test_generated_grammar_is_current():
    """The checked-in grammar is what hdsl/editor/tokens.py builds now (else run
    `python -m hdsl.editor.textmate`)."""
    assert textmate.GRAMMAR_FILE.read_text() == textmate.render()
    assert textmate.main(["--check"]) == 0


def test_check_reports_a_stale_grammar(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "hdsl.tmLanguage.json"
    stale.write_text(textmate.render().replace("support.function.directive", "variable.other"))
    monkeypatch.setattr(textmate, "GRAMMAR_FILE", stale)
    assert textmate.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err


def test_grammar_keywords_are_the_compilers():
    """The keyword literals of grammar/hdsl.lark are the elaborator's reserved words."""
    assert grammar_keywords() == elaborate.KEYWORDS


def test_the_package_points_at_the_grammar():
    pkg = json.loads((textmate.GRAMMAR_FILE.parents[1] / "package.json").read_text())
    (grammar,) = pkg["contributes"]["grammars"]
    assert (textmate.GRAMMAR_FILE.parents[1] / grammar["path"]).resolve() == textmate.GRAMMAR_FILE
    assert grammar["scopeName"] == json.loads(textmate.GRAMMAR_FILE.read_text())["scopeName"]
    assert pkg["contributes"]["languages"][0]["extensions"] == [".hl"]


def test_reviewed_tokens(tokenized):
    out, _ = tokenized
    lines = out[str(SAMPLE)]
    for lineno, text, occurrence, scope, _ in REVIEWED:
        line, toks = lines[lineno - 1]
        scopes = find(_tokens(line, toks), text, occurrence)
        assert scopes == ["source.hdsl", scope], (lineno, text, scopes)


def test_every_word_the_compiler_knows_is_highlighted(tokenized):
    """Keywords, directives, built-ins, casts, reductions, boundary conditions and
    stdlib fns, as listed by the compiler (not by hdsl/editor/tokens.py)."""
    out, words = tokenized
    cases = known_words()
    assert len(out[str(words)]) == len(cases) + 1
    for (line, toks), (_, word) in zip(out[str(words)], cases):
        scopes = find(_tokens(line, toks), word, 0)
        assert scopes[-1].startswith(("keyword.", "constant.language.", "support.")), (word, scopes)


@pytest.mark.parametrize("path", source_files(), ids=lambda p: p.name)
def test_no_text_is_left_unscoped_or_invalid(tokenized, path):
    out, _ = tokenized
    lines = out[str(path)]
    assert [line for line, _ in lines] == path.read_text().split("\n")
    for n, (line, toks) in enumerate(lines, 1):
        covered = "".join(line[s:e] for s, e, _ in toks)
        assert covered == line, (path.name, n)
        for text, scopes in _tokens(line, toks):
            assert not text.strip() or len(scopes) > 1, f"{path.name}:{n}: {text!r} has no scope"
            assert not any(s.startswith("invalid") for s in scopes), f"{path.name}:{n}: {text!r} {scopes}"


def test_a_stray_character_is_marked_invalid(tmp_path):
    """The catch-all rule: text no rule knows shows as an error, not as plain text."""
    bad = tmp_path / "bad.hl"
    bad.write_text('x = 1 @ $\ns = "open\n')
    out = tokenize_with_vscode(textmate.GRAMMAR_FILE, [bad])[str(bad)]
    toks = _tokens(*out[0])
    assert find(toks, "@", 0)[-1] == "invalid.illegal.character.hdsl"
    assert find(toks, "$", 0)[-1] == "invalid.illegal.character.hdsl"
    assert find(_tokens(*out[1]), '"open', 0)[-1] == "invalid.illegal.unterminated-string.hdsl"


def test_rules_have_one_scope_per_group():
    import re
    for rule in rules():
        groups = re.compile(rule.regex).groups
        assert len(rule.scopes) == len(rule.tokens)
        assert len(rule.scopes) == 1 or len(rule.scopes) == groups, rule.name


def test_vscode_and_pygments_agree_on_every_file(tokenized):
    """Both engines run the same rules, so each non-blank token of every file gets the same
    rule in both: the Pygments type that rule pairs with the scope VS Code gave."""
    from tests.editor.test_pygments import lines_of_tokens
    from pygments.token import string_to_tokentype
    pair = {f"{s}.hdsl": string_to_tokentype(k) for r in rules() for s, k in zip(r.scopes, r.tokens) if s}
    out, words = tokenized
    for path in source_files() + [words]:
        lines = out[str(path)]
        pyg = lines_of_tokens("\n".join(line for line, _ in lines))
        for n, ((line, toks), ptoks) in enumerate(zip(lines, pyg), 1):
            vs = [(text, pair[scopes[-1]]) for text, scopes in _tokens(line, toks) if text.strip()]
            assert vs == [(t, k) for t, k in ptoks if t.strip()], (path.name, n)
