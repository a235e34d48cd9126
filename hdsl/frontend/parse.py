"""Text → AST. Lark (LALR) with a post-lexer that makes newlines inside
brackets insignificant, then a transformer that builds `ast` nodes with spans."""
from __future__ import annotations

import ast as pyast
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput

from hdsl.diagnostics import Diagnostic, HdslError, Span, register_source
from hdsl.frontend import ast

# package data: in the wheel as in a checkout, nothing is read from outside the package
GRAMMAR_PATH = Path(__file__).resolve().parents[1] / "grammar" / "hdsl.lark"


class _BracketNewlines:
    """Drop newline tokens while inside ( ) or [ ]; braces keep them."""
    always_accept = ("_NL",)

    def process(self, stream):
        depth = 0
        for tok in stream:
            if tok.type == "_NL":
                if depth > 0:
                    continue
            elif tok.type in ("LPAR", "LSQB"):
                depth += 1
            elif tok.type in ("RPAR", "RSQB"):
                depth = max(0, depth - 1)
            elif tok.type in ("LBRACE", "RBRACE"):
                depth = 0
            yield tok


# The LALR tables, built ahead from the grammar (Lark.save) and shipped beside it: building them
# is ~60-80 ms of the first compile in a process, loading them ~5 ms. Used only while they are
# the current grammar's, made by the installed Lark (the first line says which); otherwise the
# parser is built from the grammar as before. `make parser-tables` (write_tables) makes them
# again after the grammar changes (tests/frontend/test_parser_tables.py checks).
TABLES_PATH = GRAMMAR_PATH.with_name("hdsl_lalr.pickle")


def _build_parser(grammar: str) -> Lark:
    return Lark(grammar, parser="lalr", postlex=_BracketNewlines(),
                propagate_positions=True, maybe_placeholders=True)


def _tables_header(grammar: str) -> bytes:
    import hashlib

    import lark
    return f"hdsl-lalr {hashlib.sha256(grammar.encode()).hexdigest()} lark {lark.__version__}\n".encode()


def _load_tables(grammar: str) -> Lark | None:
    """The parser from TABLES_PATH, if they are this grammar's, by this Lark; else None."""
    try:
        with open(TABLES_PATH, "rb") as f:
            if f.readline() != _tables_header(grammar):
                return None
            return Lark.load(f)
    except Exception:       # (absent, unreadable, or from a Lark that reads them otherwise)
        return None


def write_tables() -> Path:
    """Build the parser from the grammar and keep its tables at TABLES_PATH."""
    grammar = GRAMMAR_PATH.read_text()
    import io
    buf = io.BytesIO()
    _build_parser(grammar).save(buf)
    TABLES_PATH.write_bytes(_tables_header(grammar) + buf.getvalue())
    return TABLES_PATH


@lru_cache(maxsize=1)
def _parser() -> Lark:
    grammar = GRAMMAR_PATH.read_text()
    return _load_tables(grammar) or _build_parser(grammar)


_READABLE = {
    "_NL": "end of line", "NAME": "a name", "INT": "an integer", "FLOAT": "a number",
    "STRING": "a string", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'",
    "LBRACE": "'{'", "RBRACE": "'}'", "COMMA": "','", "COLON": "':'", "EQUAL": "'='",
    "ASSIGN_OP": "'='", "$END": "end of file", "DOT": "'.'", "QMARK": "'?'",
}


def _describe(tok: Token | None) -> str:
    if tok is None or tok.type == "$END":
        return "end of file"
    if tok.type == "_NL":
        return "end of line"
    return f"'{tok.value}'"


class _Builder(Transformer):
    def __init__(self, filename: str):
        super().__init__()
        self.filename = filename

    def _span(self, meta) -> Span:
        return Span(self.filename, meta.line, meta.column, meta.end_line, meta.end_column)

    def _tspan(self, tok: Token) -> Span:
        return Span(self.filename, tok.line, tok.column, tok.end_line, tok.end_column)

    # ---- top level ----
    @v_args(meta=True)
    def start(self, meta, items):
        span = self._span(meta) if not meta.empty else Span(self.filename, 1, 1, 1, 1)
        return ast.Module(span, [i for i in items if isinstance(i, ast.Node)])

    @v_args(meta=True)
    def pipeline_decl(self, meta, c):
        return ast.PipelineDecl(self._span(meta), str(c[0]), self._tspan(c[0]))

    def _buffer(self, kind, meta, c):
        return ast.BufferDecl(self._span(meta), kind, str(c[0]), str(c[1]), self._tspan(c[1]), c[2],
                              self._tspan(c[0]))

    @v_args(meta=True)
    def input_decl(self, meta, c):
        return self._buffer("input", meta, c)

    @v_args(meta=True)
    def output_decl(self, meta, c):
        return self._buffer("output", meta, c)

    @v_args(meta=True)
    def param_decl(self, meta, c):
        return ast.ParamDeclNode(self._span(meta), str(c[0]), str(c[1]), self._tspan(c[1]), c[2],
                                 self._tspan(c[0]))

    @v_args(meta=True)
    def const_decl(self, meta, c):
        return ast.ConstDecl(self._span(meta), str(c[0]), c[1], self._tspan(c[0]))

    @v_args(meta=True)
    def use_decl(self, meta, c):
        tok = c[0]
        if tok.type == "STRING":
            return ast.Use(self._span(meta), pyast.literal_eval(str(tok)), True, self._tspan(tok))
        return ast.Use(self._span(meta), str(tok), False, self._tspan(tok))

    @v_args(meta=True)
    def fn_def(self, meta, c):
        toks = [p for p in c[1:-1] if p is not None]
        return ast.FnDef(self._span(meta), str(c[0]), [str(p) for p in toks], c[-1], self._tspan(c[0]),
                         [self._tspan(p) for p in toks])

    @v_args(meta=True)
    def algorithm(self, meta, c):
        return ast.AlgorithmBlock(self._span(meta), c[0])

    @v_args(meta=True)
    def schedule(self, meta, c):
        name = str(c[0]) if c[0] is not None else None
        # an unnamed block is pointed at by its keyword
        name_span = (self._tspan(c[0]) if c[0] is not None
                     else Span(self.filename, meta.line, meta.column, meta.line, meta.column + len("schedule")))
        return ast.ScheduleBlock(self._span(meta), name, c[1], name_span)

    def block(self, c):
        return [s for s in c if isinstance(s, ast.Node)]

    # ---- statements ----
    @v_args(meta=True)
    def assign(self, meta, c):
        return ast.Assign(self._span(meta), c[0], str(c[1]), c[2])

    @v_args(meta=True)
    def expr_stmt(self, meta, c):
        return ast.ExprStmt(self._span(meta), c[0])

    @v_args(meta=True)
    def let_stmt(self, meta, c):
        return ast.Let(self._span(meta), str(c[0]), c[1], self._tspan(c[0]))

    @v_args(meta=True)
    def var_decl(self, meta, c):
        return ast.VarDecl(self._span(meta), [str(t) for t in c], [self._tspan(t) for t in c])

    @v_args(meta=True)
    def rdom_decl(self, meta, c):
        return ast.RDomDecl(self._span(meta), str(c[0]), c[1], c[2], self._tspan(c[0]))

    @v_args(meta=True)
    def for_stmt(self, meta, c):
        return ast.For(self._span(meta), str(c[0]), c[1], c[2], c[3], self._tspan(c[0]))

    @v_args(meta=True)
    def return_stmt(self, meta, c):
        return ast.Return(self._span(meta), c[0])

    # ---- expressions ----
    @v_args(meta=True)
    def ternary(self, meta, c):
        return ast.Ternary(self._span(meta), c[0], c[1], c[2])

    def _bin(self, meta, c, op=None):
        tok = c[1] if op is None else None
        return ast.BinOp(self._span(meta), op or str(tok), c[0], c[-1],
                         self._tspan(tok) if tok is not None else None)

    @v_args(meta=True)
    def lor(self, meta, c):
        return self._bin(meta, c, "||")

    @v_args(meta=True)
    def land(self, meta, c):
        return self._bin(meta, c, "&&")

    @v_args(meta=True)
    def bor(self, meta, c):
        return self._bin(meta, c, "|")

    @v_args(meta=True)
    def bxor(self, meta, c):
        return self._bin(meta, c, "^")

    @v_args(meta=True)
    def band(self, meta, c):
        return self._bin(meta, c, "&")

    cmp = shift = sum = product = v_args(meta=True)(lambda self, meta, c: self._bin(meta, c))

    @v_args(meta=True)
    def unary(self, meta, c):
        return ast.UnaryOp(self._span(meta), str(c[0]), c[1])

    @v_args(meta=True)
    def call(self, meta, c):
        return ast.Call(self._span(meta), c[0], c[1] if c[1] is not None else [])

    @v_args(meta=True)
    def index(self, meta, c):
        return ast.Index(self._span(meta), c[0], c[1])

    @v_args(meta=True)
    def attr(self, meta, c):
        return ast.Attr(self._span(meta), c[0], str(c[1]), self._tspan(c[1]))

    def args(self, c):
        return list(c)

    @v_args(meta=True)
    def range(self, meta, c):
        return ast.Range(self._span(meta), c[0], c[1])

    @v_args(meta=True)
    def name(self, meta, c):
        return ast.Name(self._tspan(c[0]), str(c[0]))

    @v_args(meta=True)
    def int_lit(self, meta, c):
        text = str(c[0])
        # plain digits are decimal even with leading zeros (int(..., 0) refuses '08')
        return ast.IntLit(self._tspan(c[0]), int(text, 10) if text.isdigit() else int(text, 0))

    @v_args(meta=True)
    def float_lit(self, meta, c):
        text = str(c[0])
        return ast.FloatLit(self._tspan(c[0]), float(text.rstrip("fF")), text)

    @v_args(meta=True)
    def string(self, meta, c):
        return ast.StrLit(self._tspan(c[0]), pyast.literal_eval(str(c[0])))

    @v_args(meta=True)
    def true(self, meta, c):
        return ast.BoolLit(self._span(meta), True)

    @v_args(meta=True)
    def false(self, meta, c):
        return ast.BoolLit(self._span(meta), False)

    @v_args(meta=True)
    def tuple(self, meta, c):
        return ast.TupleLit(self._span(meta), [x for x in c if x is not None])

    @v_args(meta=True)
    def list(self, meta, c):
        return ast.ListLit(self._span(meta), c[0] if c and c[0] is not None else [])


_OPENERS = {"(": ")", "[": "]", "{": "}"}
_TOP_KEYWORDS = ("pipeline", "input", "output", "param", "const", "use", "fn", "algorithm", "schedule")
_DECL_FORMS = {
    "pipeline": "a pipeline is named as 'pipeline NAME'",
    "input": "an input is declared as 'input NAME: TYPE[DIMS]', e.g. input img: u8[2]",
    "output": "an output is declared as 'output NAME: TYPE[DIMS]', e.g. output out: u8[2]",
    "param": "a param is declared as 'param NAME: TYPE = DEFAULT', e.g. param gain: f32 = 1.5",
    "const": "a const is declared as 'const NAME = INTEGER', e.g. const J = 8",
    "use": "write 'use NAME' for a standard module or 'use \"path.hl\"' for a file",
}
_EXPR_START = {"NAME", "INT", "FLOAT", "STRING", "LPAR", "LSQB", "UNARY_OP", "TRUE", "FALSE"}


def _open_brackets(text: str, line: int, col: int) -> list[tuple[str, int, int]]:
    """The brackets still open just before (line, col): (char, line, col), innermost last.

    Comments and strings are skipped; a closer that does not match the innermost
    opener is ignored, except that '}' also closes any ( or [ left open inside it."""
    stack: list[tuple[str, int, int]] = []
    ln, cn, i, n = 1, 1, 0, len(text)
    while i < n and (ln, cn) < (line, col):
        ch = text[i]
        if ch == "#":
            while i < n and text[i] != "\n":
                i += 1
                cn += 1
            continue
        if ch == '"':
            i += 1
            cn += 1
            while i < n and text[i] not in '"\n':
                step = 2 if text[i] == "\\" else 1
                i += step
                cn += step
            if i < n and text[i] == '"':
                i += 1
                cn += 1
            continue
        if ch == "\n":
            ln, cn = ln + 1, 1
            i += 1
            continue
        if ch in _OPENERS:
            stack.append((ch, ln, cn))
        elif ch in ")]" and stack and _OPENERS[stack[-1][0]] == ch:
            stack.pop()
        elif ch == "}":
            while stack and stack[-1][0] != "{":
                stack.pop()
            if stack:
                stack.pop()
        i += 1
        cn += 1
    return stack


def _first_on_line(text_lines: list[str], line: int, col: int) -> bool:
    return 1 <= line <= len(text_lines) and not text_lines[line - 1][:col - 1].strip()


def _first_word(text_lines: list[str], line: int) -> str:
    if not 1 <= line <= len(text_lines):
        return ""
    words = text_lines[line - 1].split()
    return words[0] if words else ""


def _unclosed(filename: str, opener: tuple[str, int, int], hint: str) -> HdslError:
    ch, line, col = opener
    return HdslError(Diagnostic(f"'{ch}' is not closed", Span(filename, line, col, line, col + 1), hint))


def _syntax_error(exc: UnexpectedInput, filename: str, text: str) -> HdslError:
    line, col = exc.line, exc.column
    text_lines = text.split("\n")
    if isinstance(exc, UnexpectedCharacters):
        ch = text_lines[line - 1][col - 1: col] if line >= 1 else "?"
        if ch in "'`":
            hint = "strings use double quotes"
        elif ch == ";":
            hint = "statements end at the end of the line; no ';' is needed"
        else:
            hint = ("remove it; hdsl's operators are + - * / % & | ^ ~ << >> ! && || == != < <= > >= "
                    "and ?:")
        return HdslError(Diagnostic(f"unexpected character '{ch}'",
                                    Span(filename, line, col, line, col + 1), hint))
    tok = getattr(exc, "token", None)
    expected = set(getattr(exc, "expected", None) or getattr(exc, "accepts", None) or [])
    what = _describe(tok)
    if tok is None or tok.type == "$END" or isinstance(exc, UnexpectedEOF):
        lines = text.rstrip("\n").split("\n")
        line = len(lines)
        col = len(lines[-1]) + 1
        still_open = _open_brackets(text, line + 1, 1)
        if still_open:
            close = _OPENERS[still_open[-1][0]]
            return _unclosed(filename, still_open[-1], f"the file ends before its '{close}'")
        return HdslError(Diagnostic("unexpected end of file", Span(filename, line, max(1, col - 1), line, col),
                                    "the last statement is not complete"))
    # An error on a later line than a bracket that is still open is usually that
    # bracket's fault: newlines inside ( and [ do not end the statement, and a
    # missing '}' makes the next top-level item part of the block.
    still_open = _open_brackets(text, tok.line, tok.column)
    first = _first_on_line(text_lines, tok.line, tok.column)
    if still_open:
        ch, oline, _ = still_open[-1]
        if ch in "([" and oline < tok.line and (tok.type == "RBRACE" or first):
            return _unclosed(filename, still_open[-1],
                             f"add '{_OPENERS[ch]}' to close it; line {tok.line} is still inside it")
        word = _first_word(text_lines, tok.line)
        if ch == "{" and oline < tok.line and word in _TOP_KEYWORDS and text_lines[tok.line - 1].startswith(word):
            return _unclosed(filename, still_open[-1],
                             f"add '}}' to close the block before '{word}' on line {tok.line}")
    span = Span(filename, tok.line, tok.column, tok.end_line or tok.line,
                tok.end_column or tok.column + 1)
    if tok.type == "_NL":
        span = Span(filename, tok.line, tok.column, tok.line, tok.column + 1)
    hint = None
    names = sorted(_READABLE.get(e, f"'{e.lower()}'") for e in expected if not e.startswith("__"))
    word = _first_word(text_lines, tok.line)
    before = text_lines[tok.line - 1][:tok.column - 1].rstrip() if 1 <= tok.line <= len(text_lines) else ""
    if tok.type in ("RPAR", "RSQB") and not any(o[0] == ("(" if tok.type == "RPAR" else "[")
                                                 for o in still_open):
        hint = f"this '{tok.value}' has no matching '{'(' if tok.type == 'RPAR' else '['}'"
    elif tok.type == "RBRACE" and "_NL" in expected:
        hint = "put the closing '}' on a line of its own"
    elif tok.type == "ASSIGN_OP" and str(tok) == "=" and "CMP_OP" not in expected and word not in _DECL_FORMS:
        hint = "use '==' to compare; '=' defines a Func"
    elif word in _DECL_FORMS and tok.column > 1:
        hint = _DECL_FORMS[word]
    elif tok.type == "_NL" and expected & _EXPR_START:
        hint = f"an expression is missing after '{before.split()[-1]}'" if before else "an expression is missing"
    elif len(names) <= 6 and names:
        hint = "expected " + ", ".join(names[:-1]) + (" or " if len(names) > 1 else "") + names[-1]
    return HdslError(Diagnostic(f"unexpected {what}", span, hint))


def parse(text: str, filename: str = "<string>") -> ast.Module:
    register_source(filename, text)
    src = text if text.endswith("\n") else text + "\n"
    try:
        tree = _parser().parse(src)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, filename, src) from None
    return _Builder(filename).transform(tree)

