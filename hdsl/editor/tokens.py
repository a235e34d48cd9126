"""The one description of hdsl's tokens that every editor grammar is built from.

`RULES` is an ordered list of regular expressions, each with its TextMate
scope (VS Code, editors/vscode/syntaxes/hdsl.tmLanguage.json, written by
`python -m hdsl.editor.textmate`) and its Pygments token type
(hdsl/editor/pygments_lexer.py). The first rule that matches at a position
wins, in both engines. The word lists come from where the compiler keeps them,
so a keyword, type, built-in, directive or stdlib fn added there reaches the
editors on the next generation (tests/editor checks the generated file is
current):

- keywords and the literal syntax of numbers, strings and comments: the
  grammar, grammar/hdsl.lark (read as text: importing this module must stay
  cheap, since Pygments loads it to look any lexer up);
- element types, casts, built-in functions, inline reductions and boundary
  conditions: hdsl/frontend/elaborate.py;
- schedule directives: hdsl/schedule/record.py (`SIGNATURES`);
- stdlib fns: the `fn` definitions of the stdlib's .hl files.

Every regular expression must mean the same in Python's `re` and in
Oniguruma (TextMate's engine): plain classes, `\\b`, groups and look-ahead only.
A rule with groups gives one scope per group; its groups must cover the whole
match, in order (Pygments' `bygroups`), and a scope of None marks whitespace.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from hdsl.frontend.elaborate import (BOUNDARY_FNS, BUILTIN_ARITY, CAST_NAMES, INLINE_REDUCTIONS,
                                     SAT_CAST_NAMES, STDLIB_DIR)
from hdsl.frontend.parse import GRAMMAR_PATH
from hdsl.schedule.record import SIGNATURES

# keywords that open a declaration or a block, and the rest (control flow and
# the words inside statements); tests/editor checks that together they are
# exactly the grammar's keyword literals
DECLARATION_KEYWORDS = ("pipeline", "input", "output", "param", "const", "use", "fn",
                        "algorithm", "schedule", "let", "var", "rdom")
CONTROL_KEYWORDS = ("for", "in", "return", "where")
CONSTANTS = ("true", "false")
# the methods of a Func besides schedule directives (the algorithm's `f.iir(...)`)
FUNC_METHODS = ("iir",)
# buffer properties: img.width, img.dim(0).extent (hdsl/frontend/elaborate.py)
BUFFER_PROPERTIES = ("width", "height", "channels", "dim", "min", "max", "extent")
BUILTIN_FUNCTIONS = tuple(sorted(set(BUILTIN_ARITY) | {"print", "derivative"}))
TYPES = tuple(sorted(CAST_NAMES))
SATURATING_CASTS = tuple(sorted(SAT_CAST_NAMES))
REDUCTIONS = tuple(sorted(INLINE_REDUCTIONS))
BOUNDARY_CONDITIONS = tuple(sorted(BOUNDARY_FNS))
DIRECTIVES = tuple(sorted(SIGNATURES))


def grammar_keywords() -> set[str]:
    """The grammar's keyword literals ("pipeline", "for", ...)."""
    return set(re.findall(r'"([A-Za-z_]+)"', GRAMMAR_PATH.read_text()))


def grammar_terminal(name: str) -> str:
    """The regular expression of terminal NAME in grammar/hdsl.lark."""
    m = re.search(rf"^{name}(?:\.\d+)?:\s*/(.*)/\s*$", GRAMMAR_PATH.read_text(), re.M)
    if m is None:
        raise LookupError(f"terminal {name} is not a regular expression in {GRAMMAR_PATH}")
    return m.group(1)


def stdlib_functions() -> tuple[str, ...]:
    """The names of the stdlib's top-level fns."""
    names = set()
    for path in STDLIB_DIR.glob("*.hl"):
        names.update(re.findall(r"^fn\s+([A-Za-z_]\w*)", path.read_text(), re.M))
    return tuple(sorted(names))


@dataclass(frozen=True)
class Rule:
    name: str
    regex: str
    scopes: tuple[str | None, ...]   # one per group, or one for the whole match
    tokens: tuple[str | None, ...]   # Pygments token types, dotted ("Keyword.Type"), same shape


def _words(words) -> str:
    # longest first, so that an alternative never stops at a prefix of another
    return r"\b(?:" + "|".join(sorted(words, key=lambda w: (-len(w), w))) + r")\b"


def _rule(name, regex, *pairs) -> Rule:
    return Rule(name, regex, tuple(p[0] for p in pairs), tuple(p[1] for p in pairs))


IDENT = r"[A-Za-z_]\w*"
WS = (None, None)


@lru_cache(maxsize=1)
def rules() -> tuple[Rule, ...]:
    name_decl = ("variable.other.declaration", "Name.Variable")
    decl = ("keyword.declaration", "Keyword.Declaration")
    accessor = ("punctuation.accessor", "Punctuation")
    return (
        _rule("comment", grammar_terminal("COMMENT"), ("comment.line.number-sign", "Comment.Single")),
        _rule("string", grammar_terminal("STRING"), ("string.quoted.double", "String.Double")),
        _rule("unterminated string", r'"[^\n]*', ("invalid.illegal.unterminated-string", "Error")),
        # declarations that name something, so the name and a type annotation's ':' are known
        _rule("input/output/param", rf"\b(input|output|param)([\t ]+)({IDENT})([\t ]*)(:)",
              decl, WS, name_decl, WS, ("punctuation.separator.type", "Punctuation")),
        _rule("fn", rf"\b(fn)([\t ]+)({IDENT})", decl, WS, ("entity.name.function", "Name.Function")),
        _rule("pipeline/use", rf"\b(pipeline|use)([\t ]+)({IDENT})",
              decl, WS, ("entity.name.namespace", "Name.Namespace")),
        _rule("schedule name", rf"\b(schedule)([\t ]+)({IDENT})", decl, WS, ("entity.name.section", "Name.Label")),
        _rule("const", rf"\b(const)([\t ]+)({IDENT})", decl, WS, ("variable.other.constant", "Name.Constant")),
        _rule("let/rdom", rf"\b(let|rdom)([\t ]+)({IDENT})", decl, WS, name_decl),
        _rule("declaration keyword", _words(DECLARATION_KEYWORDS), decl),
        _rule("control keyword", _words(CONTROL_KEYWORDS), ("keyword.control", "Keyword")),
        _rule("boolean", _words(CONSTANTS), ("constant.language.boolean", "Keyword.Constant")),
        # '..' before any '.' rule; numbers before '.' so that 1.5 stays one token
        _rule("range", r"\.\.", ("keyword.operator.range", "Operator")),
        _rule("float", rf"\b(?:{grammar_terminal('FLOAT')})\b", ("constant.numeric.float", "Number.Float")),
        _rule("integer", rf"\b(?:{grammar_terminal('INT')})\b", ("constant.numeric.integer", "Number.Integer")),
        _rule("directive", rf"(\.)([\t ]*)({_words(DIRECTIVES + FUNC_METHODS)})",
              accessor, WS, ("support.function.directive", "Name.Function.Magic")),
        _rule("buffer property", rf"(\.)([\t ]*)({_words(BUFFER_PROPERTIES)})",
              accessor, WS, ("support.variable.property", "Name.Attribute")),
        _rule("member", rf"(\.)([\t ]*)({IDENT})", accessor, WS, ("variable.other.member", "Name.Attribute")),
        _rule("type", _words(TYPES), ("support.type.primitive", "Keyword.Type")),
        _rule("saturating cast", _words(SATURATING_CASTS), ("support.function.cast", "Name.Builtin")),
        _rule("built-in function", _words(BUILTIN_FUNCTIONS), ("support.function.builtin", "Name.Builtin")),
        _rule("inline reduction", _words(REDUCTIONS), ("support.function.reduction", "Name.Builtin")),
        _rule("boundary condition", _words(BOUNDARY_CONDITIONS), ("support.function.boundary", "Name.Builtin")),
        _rule("stdlib fn", _words(stdlib_functions()), ("support.function.stdlib", "Name.Function")),
        _rule("identifier", grammar_terminal("NAME"), ("variable.other", "Name")),
        _rule("shift", r"<<|>>", ("keyword.operator.bitwise", "Operator")),
        _rule("comparison", r"==|!=|<=|>=|<|>", ("keyword.operator.comparison", "Operator")),
        _rule("logical", r"&&|\|\||!", ("keyword.operator.logical", "Operator")),
        _rule("assignment", r"\+=|-=|\*=|/=|=", ("keyword.operator.assignment", "Operator")),
        _rule("bitwise", r"[&|^~]", ("keyword.operator.bitwise", "Operator")),
        _rule("arithmetic", r"[-+*/%]", ("keyword.operator.arithmetic", "Operator")),
        _rule("ternary", r"[?:]", ("keyword.operator.ternary", "Operator")),
        _rule("parenthesis", r"[()]", ("punctuation.section.parens", "Punctuation")),
        _rule("bracket", r"[\[\]]", ("punctuation.section.brackets", "Punctuation")),
        _rule("brace", r"[{}]", ("punctuation.section.braces", "Punctuation")),
        _rule("comma", r",", ("punctuation.separator.comma", "Punctuation")),
        _rule("line continuation", r"\\(?=[\t \f]*$)", ("punctuation.separator.continuation", "Punctuation")),
        _rule("stray dot", r"\.", accessor),
        _rule("anything else", r"\S", ("invalid.illegal.character", "Error")),
    )
