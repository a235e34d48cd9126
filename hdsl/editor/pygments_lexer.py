"""A Pygments lexer for hdsl, built from the same rules as the VS Code grammar
(hdsl/editor/tokens.py). Registered under the `pygments.lexers` entry point,
so `pygmentize -l hdsl FILE.hl`, Sphinx and MkDocs (```hdsl code blocks) find it."""
from __future__ import annotations

from pygments.lexer import RegexLexer, bygroups
from pygments.token import Text, string_to_tokentype

from hdsl.editor.tokens import rules


def _token(kind: str | None):
    return Text.Whitespace if kind is None else string_to_tokentype(kind)


def _root() -> list:
    root = [(r"\s+", Text.Whitespace)]
    for rule in rules():
        if len(rule.tokens) == 1:
            root.append((rule.regex, _token(rule.tokens[0])))
        else:
            root.append((rule.regex, bygroups(*(_token(k) for k in rule.tokens))))
    return root


class HdslLexer(RegexLexer):
    """hdsl, a Halide-like language for image-processing pipelines (.hl files)."""
    name = "hdsl"
    aliases = ["hdsl", "hl", "hl-fragment", "hl-error"]   # the docs' code-block names (tests/test_docs.py)
    filenames = ["*.hl"]
    mimetypes = ["text/x-hdsl"]
    tokens = {"root": _root()}
