"""Shared by the editor tests: the .hl files every grammar must cover, a
reviewed list of tokens with the scope each engine must give them, and VS
Code's real tokenizer (node + vscode-textmate + vscode-oniguruma, installed
with `npm ci` from editors/vscode/package-lock.json; `make test` does that)."""
from __future__ import annotations

import fcntl
import os
import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VSCODE = ROOT / "editors" / "vscode"
SAMPLE = Path(__file__).resolve().parent / "sample.hl"


def source_files() -> list[Path]:
    """Every example and stdlib file (the stdlib under stdlib/ or hdsl/stdlib/), and sample.hl."""
    files = sorted(ROOT.glob("examples/*.hl")) + sorted(ROOT.glob("stdlib/*.hl")) \
        + sorted(ROOT.glob("hdsl/stdlib/*.hl")) + [SAMPLE]
    assert len(files) > 10, files
    return files


# (line of sample.hl, token text, which occurrence on that line, TextMate scope, Pygments token type),
# each checked by hand against the language (docs/language.md) and the standard scope names.
REVIEWED = [
    (1, "# sample.hl: one of each kind of token, for tests/editor (checked by `hdsl check`)", 0,
     "comment.line.number-sign.hdsl", "Comment.Single"),
    (2, "pipeline", 0, "keyword.declaration.hdsl", "Keyword.Declaration"),
    (2, "sample", 0, "entity.name.namespace.hdsl", "Name.Namespace"),
    (3, "use", 0, "keyword.declaration.hdsl", "Keyword.Declaration"),
    (3, "boundary", 0, "entity.name.namespace.hdsl", "Name.Namespace"),
    (6, "input", 0, "keyword.declaration.hdsl", "Keyword.Declaration"),
    (6, "img", 0, "variable.other.declaration.hdsl", "Name.Variable"),
    (6, ":", 0, "punctuation.separator.type.hdsl", "Punctuation"),
    (6, "u16", 0, "support.type.primitive.hdsl", "Keyword.Type"),
    (6, "[", 0, "punctuation.section.brackets.hdsl", "Punctuation"),
    (6, "2", 0, "constant.numeric.integer.hdsl", "Number.Integer"),
    (7, "param", 0, "keyword.declaration.hdsl", "Keyword.Declaration"),
    (7, "f32", 0, "support.type.primitive.hdsl", "Keyword.Type"),
    (7, "=", 0, "keyword.operator.assignment.hdsl", "Operator"),
    (7, "1.5f", 0, "constant.numeric.float.hdsl", "Number.Float"),
    (8, "0x0F", 0, "constant.numeric.integer.hdsl", "Number.Integer"),
    (9, "output", 0, "keyword.declaration.hdsl", "Keyword.Declaration"),
    (12, "const", 0, "keyword.declaration.hdsl", "Keyword.Declaration"),
    (12, "K", 0, "variable.other.constant.hdsl", "Name.Constant"),
    (12, "0b101", 0, "constant.numeric.integer.hdsl", "Number.Integer"),
    (14, "fn", 0, "keyword.declaration.hdsl", "Keyword.Declaration"),
    (14, "twice", 0, "entity.name.function.hdsl", "Name.Function"),
    (15, "let", 0, "keyword.declaration.hdsl", "Keyword.Declaration"),
    (15, "two", 0, "variable.other.declaration.hdsl", "Name.Variable"),
    (16, "tw", 0, "variable.other.hdsl", "Name"),
    (16, "*", 0, "keyword.operator.arithmetic.hdsl", "Operator"),
    (17, "return", 0, "keyword.control.hdsl", "Keyword"),
    (20, "algorithm", 0, "keyword.declaration.hdsl", "Keyword.Declaration"),
    (20, "{", 0, "punctuation.section.braces.hdsl", "Punctuation"),
    (21, "var", 0, "keyword.declaration.hdsl", "Keyword.Declaration"),
    (21, ",", 0, "punctuation.separator.comma.hdsl", "Punctuation"),
    (22, "mirror_image", 0, "support.function.boundary.hdsl", "Name.Builtin"),
    (22, "(", 0, "punctuation.section.parens.hdsl", "Punctuation"),
    (23, "gaussian", 0, "support.function.stdlib.hdsl", "Name.Function"),
    (23, "2.0f", 0, "constant.numeric.float.hdsl", "Number.Float"),
    (24, "rdom", 0, "keyword.declaration.hdsl", "Keyword.Declaration"),
    (24, "r", 0, "variable.other.declaration.hdsl", "Name.Variable"),
    (24, "..", 0, "keyword.operator.range.hdsl", "Operator"),
    (24, "0", 0, "constant.numeric.integer.hdsl", "Number.Integer"),
    (24, "3", 0, "constant.numeric.integer.hdsl", "Number.Integer"),
    (24, "where", 0, "keyword.control.hdsl", "Keyword"),
    (24, ".", 0, "punctuation.accessor.hdsl", "Punctuation"),
    (24, "x", 0, "variable.other.member.hdsl", "Name.Attribute"),
    (24, "%", 0, "keyword.operator.arithmetic.hdsl", "Operator"),
    (24, "==", 0, "keyword.operator.comparison.hdsl", "Operator"),
    (24, "&&", 0, "keyword.operator.logical.hdsl", "Operator"),
    (24, "!=", 0, "keyword.operator.comparison.hdsl", "Operator"),
    (25, "sum", 0, "support.function.reduction.hdsl", "Name.Builtin"),
    (25, "1e-3", 0, "constant.numeric.float.hdsl", "Number.Float"),
    (26, "select", 0, "support.function.builtin.hdsl", "Name.Builtin"),
    (26, ">=", 0, "keyword.operator.comparison.hdsl", "Operator"),
    (26, "0.5", 0, "constant.numeric.float.hdsl", "Number.Float"),
    (26, "u8_sat", 0, "support.function.cast.hdsl", "Name.Builtin"),
    (26, "u8", 0, "support.type.primitive.hdsl", "Keyword.Type"),
    (26, "\\", 0, "punctuation.separator.continuation.hdsl", "Punctuation"),
    (27, "|", 0, "keyword.operator.bitwise.hdsl", "Operator"),
    (27, "<<", 0, "keyword.operator.bitwise.hdsl", "Operator"),
    (27, ">>", 0, "keyword.operator.bitwise.hdsl", "Operator"),
    (27, "^", 0, "keyword.operator.bitwise.hdsl", "Operator"),
    (27, "~", 0, "keyword.operator.bitwise.hdsl", "Operator"),
    (29, "iir", 0, "support.function.directive.hdsl", "Name.Function.Magic"),
    (29, "+", 0, "keyword.operator.arithmetic.hdsl", "Operator"),
    (29, "dim", 0, "support.variable.property.hdsl", "Name.Attribute"),
    (29, "extent", 0, "support.variable.property.hdsl", "Name.Attribute"),
    (29, "0.25", 0, "constant.numeric.float.hdsl", "Number.Float"),
    (30, "twice", 0, "variable.other.hdsl", "Name"),
    (30, "<", 0, "keyword.operator.comparison.hdsl", "Operator"),
    (30, "||", 0, "keyword.operator.logical.hdsl", "Operator"),
    (30, "width", 0, "support.variable.property.hdsl", "Name.Attribute"),
    (30, "height", 0, "support.variable.property.hdsl", "Name.Attribute"),
    (30, "?", 0, "keyword.operator.ternary.hdsl", "Operator"),
    (30, ":", 0, "keyword.operator.ternary.hdsl", "Operator"),
    (31, "print", 0, "support.function.builtin.hdsl", "Name.Builtin"),
    (31, '"w = \\"w\\""', 0, "string.quoted.double.hdsl", "String.Double"),
    (31, "3f", 0, "constant.numeric.float.hdsl", "Number.Float"),
    (33, "clamp", 0, "support.function.builtin.hdsl", "Name.Builtin"),
    (33, "i32", 0, "support.type.primitive.hdsl", "Keyword.Type"),
    (33, "+=", 0, "keyword.operator.assignment.hdsl", "Operator"),
    (36, "schedule", 0, "keyword.declaration.hdsl", "Keyword.Declaration"),
    (36, "tiled", 0, "entity.name.section.hdsl", "Name.Label"),
    (37, "tile", 0, "support.function.directive.hdsl", "Name.Function.Magic"),
    (37, "vectorize", 0, "support.function.directive.hdsl", "Name.Function.Magic"),
    (37, "parallel", 0, "support.function.directive.hdsl", "Name.Function.Magic"),
    (38, "for", 0, "keyword.control.hdsl", "Keyword"),
    (38, "in", 0, "keyword.control.hdsl", "Keyword"),
    (39, "compute_at", 0, "support.function.directive.hdsl", "Name.Function.Magic"),
]


def known_words() -> list[tuple[str, str]]:
    """(a line using a word the compiler knows, that word), from the compiler's own tables and
    grammar, not from hdsl/editor/tokens.py: a word added there must reach the editors."""
    from hdsl.frontend import elaborate
    from hdsl.schedule.record import SIGNATURES
    from hdsl.editor.tokens import grammar_keywords, stdlib_functions
    lines = [(f"{k} ", k) for k in sorted(grammar_keywords() | elaborate.KEYWORDS)]
    lines += [(f"f.{d}(x)", d) for d in sorted(SIGNATURES)]
    lines += [(f"{b}(x)", b) for b in sorted(elaborate.BUILTINS | elaborate.BOUNDARY_FNS)]
    lines += [(f"{s}(x)", s) for s in stdlib_functions()]
    return lines


def tokenize_with_vscode(grammar: Path, files: list[Path]) -> dict[str, list]:
    """{file: [(line, [(start, end, scopes), ...]), ...]} from VS Code's tokenizer."""
    need_node_packages()
    out = subprocess.run(["node", str(VSCODE / "test" / "tokenize.js"), str(grammar), *map(str, files)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def need_node_packages() -> None:
    """Node, npm and editors/vscode's node packages (installed once with `npm ci`)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        # (a developer's machine without Node may skip; CI has Node, and `make test` installs
        # the tokenizer, so there a missing tool is a failure, not a silent skip)
        if os.environ.get("CI"):
            pytest.fail("node and npm are needed for VS Code's tokenizer, and CI must run it")
        pytest.skip("node and npm are needed for VS Code's tokenizer")
    with open(VSCODE / ".npm-ci.lock", "w") as lock:   # pytest-xdist workers install once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (VSCODE / "node_modules" / "vscode-textmate").exists():
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=VSCODE,
                           check=True, capture_output=True)


def find(tokens: list[tuple[str, object]], text: str, occurrence: int):
    """The payload of the occurrence-th token whose text is `text`."""
    hits = [payload for t, payload in tokens if t == text]
    assert len(hits) > occurrence, f"no token {text!r} (#{occurrence}) among {[t for t, _ in tokens]}"
    return hits[occurrence]
