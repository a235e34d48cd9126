"""`hdsl fmt`: the canonical layout of a .hl file, keeping its comments.

The layout (docs/editors.md):

- a statement starts 4 spaces deeper for each `{` it is inside; a line that starts with
  `}` closes one level first;
- between the tokens of a line, one space or none, by the token kinds: none inside ( ) and
  [ ], before `,` and after it one, none around `.` and `..`, none between a name and the
  `(` or `[` of a call or an index, none after a unary `- + ! ~`, one around binary
  operators, `=`, `?` and a ternary's `:`, none before a declaration's `:` (`img: u8[2]`);
- what the author chose is kept where it carries meaning: where lines break (a long
  expression continued inside brackets or after `\\`), the indentation of continuation
  lines relative to their statement (at least 4 deeper: alignment under an open
  parenthesis stays), the column of an `=` padded to line up with its neighbours, and the
  column of a trailing comment (at least two spaces after the code);
- in a run of consecutive `input` / `output` / `param` lines the names line up: each
  keyword is padded to the longest (`input  img`, `output out`);
- one blank line at most between items; none at the start or the end of the file, which
  ends with one newline; no trailing spaces; tabs become spaces.

Formatting never changes the program: the result is parsed again and must give the same
syntax tree (spans aside) and the same comments, or nothing is written. A file that does
not parse is refused with its syntax error (HdslError), as `hdsl check` reports it.
"""
from __future__ import annotations

import re
from dataclasses import fields

from hdsl.diagnostics import Diagnostic, HdslError, Span
from hdsl.frontend import ast
from hdsl.frontend.parse import parse

_TOKEN = re.compile(r"""
    (?P<ws>[\t\f ]+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"([^"\\\n]|\\.)*")
  | (?P<number>(\d+\.\d+([eE][+-]?\d+)?|\d+[eE][+-]?\d+)[fF]?|\d+[fF]|0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<cont>\\[\t\f ]*(?=\n|$))
  | (?P<op>\.\.|==|!=|<=|>=|<<|>>|&&|\|\||\+=|-=|\*=|/=|[-+*/%&|^~!<>=?:.,()\[\]{}])
""", re.X)
_WORD_KEYWORDS = {"pipeline", "input", "output", "param", "const", "use", "fn", "algorithm", "schedule",
                  "let", "var", "rdom", "for", "in", "return", "where"}
_VALUE_END = {"name", "number", "string"}      # kinds after which `(` `[` are a call / an index
_UNARY = {"-", "+", "!", "~"}
_DECL = ("input", "output", "param")
_ASSIGN = {"=", "+=", "-=", "*=", "/="}


class _Tok:
    __slots__ = ("kind", "text", "col", "unary")

    def __init__(self, kind, text, col):
        self.kind, self.text, self.col, self.unary = kind, text, col, False


def _tokens(line: str, filename: str, lineno: int) -> list[_Tok]:
    out, i = [], 0
    while i < len(line):
        m = _TOKEN.match(line, i)
        if m is None:
            raise HdslError(Diagnostic(f"unexpected character '{line[i]}'",
                                       Span(filename, lineno, i + 1, lineno, i + 2)))
        if m.lastgroup != "ws":
            out.append(_Tok(m.lastgroup, m.group(), i))
        i = m.end()
    return out


def _is_value_end(t: _Tok | None) -> bool:
    if t is None:
        return False
    if t.kind in _VALUE_END:
        return t.text not in _WORD_KEYWORDS
    return t.text in (")", "]")


def _gap(a: _Tok, b: _Tok, decl_colon: bool) -> str:
    """The space between two tokens on one line."""
    if b.kind == "cont":
        return " "
    if a.text in ("(", "[") or b.text in (")", "]", ","):
        return ""
    if a.text == ",":
        return " "
    if a.text in (".", "..") or b.text in (".", ".."):
        return ""
    if b.text in ("(", "[") and _is_value_end(a):
        return ""
    if a.kind == "op" and a.unary:
        return ""
    if b.text == ":" and decl_colon:
        return ""
    return " "


def _mark_unary(toks: list[_Tok], prev: _Tok | None) -> _Tok | None:
    for t in toks:
        if t.kind == "op" and t.text in _UNARY:
            t.unary = not _is_value_end(prev)
        if t.kind not in ("comment", "cont"):
            prev = t
    return prev


def format_source(text: str, filename: str = "<string>") -> str:
    """The canonical layout of `text` (HdslError if it does not parse)."""
    before = parse(text, filename)
    out = _layout(text, filename)
    try:
        after = parse(out, filename)
    except HdslError:
        after = None
    if after is None or not same_tree(before, after) or _comments(text) != _comments(out):
        raise HdslError(Diagnostic("the formatter would change this program; the file is left as it is",
                                   Span(filename, 1, 1, 1, 2),
                                   "this is a bug in hdsl fmt: please report it with the file"))
    # parse() remembers each file's text for diagnostics: the file on disk is still `text`
    parse(text, filename)
    return out


def _comments(text: str) -> list[str]:
    out = []
    for n, line in enumerate(text.replace("\r\n", "\n").split("\n"), 1):
        out += [t.text.rstrip() for t in _tokens(line, "", n) if t.kind == "comment"]
    return out


def _layout(text: str, filename: str) -> str:
    lines = text.replace("\r\n", "\n").split("\n")
    pad = _declaration_widths(lines)
    out: list[str] = []
    kinds: list[str] = []          # per output line: 'blank', 'stmt', 'cont', 'comment'
    depth = 0                      # braces
    paren = 0                      # ( and [ inside the current statement
    continued = False              # the previous line ended with `\`
    prev: _Tok | None = None
    delta = 0                      # how far the current statement's first line moved
    for n, raw in enumerate(lines, 1):
        line = raw.expandtabs(4).rstrip()
        toks = _tokens(line, filename, n)
        if not toks:
            kinds.append("blank")
            out.append("")
            continue
        orig_indent = len(line) - len(line.lstrip())
        cont_line = paren > 0 or continued
        if not cont_line:
            prev = None
            closing = sum(1 for _ in _leading(toks, "}"))
            indent = 4 * max(0, depth - closing)
            delta = indent - orig_indent
        else:
            indent = max(orig_indent + delta, 4 * depth + 4)
        prev = _mark_unary(toks, prev)
        decl_colon = not cont_line and toks[0].text in _DECL
        parts = [" " * indent]
        width = indent
        code_toks = [t for t in toks if t.kind != "comment"]
        for i, t in enumerate(code_toks):
            if i > 0:
                g = _gap(code_toks[i - 1], t, decl_colon and t.text == ":" and paren == 0)
                if i == 1 and n in pad:
                    g = " " * (pad[n] - len(code_toks[0].text) + 1)
                if t.text in _ASSIGN and not cont_line and paren == 0 and g == " " and toks[0].text not in _DECL:
                    g = " " * max(1, t.col + delta - width)
                parts.append(g)
                width += len(g)
            if t.text == ":" and decl_colon:
                decl_colon = False
            parts.append(t.text)
            width += len(t.text)
            if t.text in ("(", "["):
                paren += 1
            elif t.text in (")", "]"):
                paren = max(0, paren - 1)
            elif t.text == "{":
                depth += 1
                paren = 0
            elif t.text == "}":
                depth = max(0, depth - 1)
                paren = 0
        comment = next((t for t in toks if t.kind == "comment"), None)
        if comment is not None:
            text_c = comment.text.rstrip()
            if code_toks:
                gap = max(2, comment.col + delta - width)
                parts.append(" " * gap)
            parts.append(text_c)
        continued = bool(code_toks) and code_toks[-1].kind == "cont"
        out.append("".join(parts).rstrip())
        kinds.append("comment" if not code_toks else "cont" if cont_line else "stmt")
    # blank lines: at most one in a row, none at the start or the end
    result: list[str] = []
    for line, kind in zip(out, kinds):
        if kind == "blank" and (not result or result[-1] == ""):
            continue
        result.append(line)
    while result and result[-1] == "":
        result.pop()
    return "\n".join(result) + "\n"


def _leading(toks: list[_Tok], text: str):
    for t in toks:
        if t.text != text:
            return
        yield t


def _declaration_widths(lines: list[str]) -> dict[int, int]:
    """{line number: width} for each run of consecutive top-level `input`/`output`/`param`
    lines: their keywords are padded to the longest of the run."""
    decl = re.compile(r"(input|output|param)[\t ]")
    pad: dict[int, int] = {}
    run: list[int] = []
    for n, line in enumerate(lines + [""], 1):
        if decl.match(line):
            run.append(n)
            continue
        width = max((len(decl.match(lines[k - 1]).group(1)) for k in run), default=0)
        pad.update({k: width for k in run})
        run = []
    return pad


def same_tree(a, b) -> bool:
    """Two syntax trees are the same program: the same nodes and values, spans aside."""
    if isinstance(a, ast.Node) or isinstance(b, ast.Node):
        if type(a) is not type(b):
            return False
        for f in fields(a):
            if f.name == "span" or f.name.endswith("_span") or f.name.endswith("_spans"):
                continue
            if not same_tree(getattr(a, f.name), getattr(b, f.name)):
                return False
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_tree(x, y) for x, y in zip(a, b))
    return a == b
