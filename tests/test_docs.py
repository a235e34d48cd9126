"""Every program in the docs is checked; the runnable ones are run.

The fenced blocks of docs/*.md follow one convention (stated in docs/language.md):

    ```hl                   a complete program: `hdsl check` passes
    ```hl run [size=W,H] [close]
                            also run: on random inputs, native code with every CPU
                            schedule block gives exactly the reference evaluator's
                            values (`close`: to a few ulp, for programs calling the
                            C library's exp/log/pow/sin...)
    ```hl-fragment          part of a program (a statement form, a fn, a schedule
                            line); not checked alone, and never a whole program
    ```hl-error             a program with a mistake; the next block is ```text and
                            holds exactly what `hdsl check` prints for it (stderr),
                            run on the file named in that text
    ```hl-error run input=W,H
                            a program that checks but fails when run on inputs of
                            that size; the ```text block after it is the error,
                            the same from native code and from the evaluator
    anything else           not hdsl (```sh, ```text, ```python, ...); never a program

After a deliberate change to a message, `.venv/bin/python tests/test_docs.py --update`
rewrites the messages in the docs; read the diff before committing it.

The language reference's programs replace the checks this project once made on
the contract's own text (which a clone does not have): `test_language_md_covers`
says which constructs they must show.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import hdsl
from hdsl.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
KINDS = {"hl", "hl-fragment", "hl-error"}
NOT_HDSL = {"", "text", "sh", "console", "python", "c"}
GPU_SCHEDULES = {"cuda", "opengl", "auto"}


@dataclass
class Block:
    doc: str
    line: int            # of the opening fence, 1-based
    info: str            # the words after the fence
    text: str

    @property
    def kind(self) -> str:
        return self.info.split()[0] if self.info else ""

    @property
    def options(self) -> list[str]:
        return self.info.split()[1:]

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks_of(text: str, doc: str) -> list[Block]:
    """The fenced blocks of a Markdown text, in order (``` fences at the start of a line)."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = re.match(r"^```(.*)$", lines[i])
        if not m:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise AssertionError(f"{doc}:{start + 1}: a fence that is never closed")
        out.append(Block(doc, start + 1, m.group(1).strip(), "\n".join(body) + "\n"))
        i += 1
    return out


def all_blocks() -> list[Block]:
    return [b for path in sorted(DOCS.glob("*.md")) for b in blocks_of(path.read_text(), path.name)]


BLOCKS = all_blocks()
PROGRAMS = [b for b in BLOCKS if b.kind == "hl"]
RUNS = [b for b in PROGRAMS if b.options[:1] == ["run"]]
ERROR_PAIRS = [(b, BLOCKS[i + 1] if i + 1 < len(BLOCKS) else None)
               for i, b in enumerate(BLOCKS) if b.kind == "hl-error"]
ERRORS = [(b, t) for b, t in ERROR_PAIRS if "run" not in b.options]
RUN_ERRORS = [(b, t) for b, t in ERROR_PAIRS if "run" in b.options]


def hdsl_check(directory: Path, filename: str, source: str) -> tuple[int, str]:
    """`hdsl check FILENAME` run in `directory` with `source` in the file: (status, stderr)."""
    (directory / filename).write_text(source)
    err = io.StringIO()
    old = os.getcwd()
    os.chdir(directory)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["check", filename])
    finally:
        os.chdir(old)
    return code, err.getvalue()


# ---------------------------------------------------------------------------- the convention

def test_blocks_follow_the_convention():
    """Every fence is one of the kinds above, and no program hides in a block nobody checks."""
    for b in BLOCKS:
        assert b.kind in KINDS | NOT_HDSL, f"{b.id}: unknown fence '```{b.info}'"
        if b.kind != "hl":
            assert not re.search(r"^\s*pipeline\s+\w+", b.text, re.M) or b.kind == "hl-error", \
                f"{b.id}: a whole program in a '```{b.info}' block; make it ```hl so that it is checked"
        if b.kind == "hl":
            assert set(b.options) <= {"run", "close"} | {o for o in b.options if o.startswith("size=")}, b.id
        if b.kind == "hl-error" and b.options:
            assert b.options[0] == "run" and len(b.options) == 2 and b.options[1].startswith("input="), b.id
    for b, following in ERROR_PAIRS:
        assert following is not None and following.kind == "text", \
            f"{b.id}: an ```hl-error block is followed by ```text holding the message"


def test_the_docs_have_programs():
    per_doc = {}
    for b in PROGRAMS:
        per_doc[b.doc] = per_doc.get(b.doc, 0) + 1
    assert per_doc.get("language.md", 0) >= 18
    assert per_doc.get("tutorial.md", 0) >= 5
    assert per_doc.get("halide.md", 0) >= 5
    assert per_doc.get("stdlib.md", 0) >= 5
    assert sum(1 for b in RUNS if b.doc == "tutorial.md") == per_doc["tutorial.md"], \
        "every tutorial program is run"
    assert sum(1 for b, _ in ERRORS if b.doc == "language.md") >= 20


def test_the_harness_can_fail(tmp_path):
    """A misspelt Func is an error with a position, so a broken ```hl block would fail."""
    src = next(b.text for b in PROGRAMS if "blur_x(x, y + 1)" in b.text)
    code, err = hdsl_check(tmp_path, "prog.hl", src.replace("blur_x(x, y + 1)", "blur_y(x, y + 1)"))
    assert code == 1
    assert re.search(r"prog\.hl:\d+:\d+: error: 'blur_y' is not defined; did you mean 'blur_x'\?", err)
    fence = blocks_of("x\n```hl run size=4,5\npipeline p\n```\n```text\nt\n```\n", "t.md")
    assert [(b.kind, b.options, b.line) for b in fence] == [("hl", ["run", "size=4,5"], 2), ("text", [], 5)]
    a = np.array([1.0, 2.0], np.float32)
    assert same(a, a.copy(), False) and not same(a, a + np.float32(1e-6), False)
    assert same(a, a + np.float32(1e-6), True) and not same(a, a.astype(np.float64), True)
    assert not same(np.array([3], np.uint8), np.array([5], np.uint8), True)


# ---------------------------------------------------------------------------- programs

@pytest.mark.parametrize("block", PROGRAMS, ids=lambda b: b.id)
def test_program_checks(block, tmp_path):
    code, err = hdsl_check(tmp_path, "example.hl", block.text)
    assert code == 0, f"{block.id}\n{block.text}\n{err}"


@pytest.mark.parametrize("pair", ERRORS, ids=lambda p: p[0].id)
def test_error_message_is_the_real_one(pair, tmp_path):
    block, expected = pair
    m = re.match(r"([\w.-]+\.hl):\d+:\d+: error: ", expected.text)
    assert m, f"{expected.id}: the message starts with FILE.hl:LINE:COL: error:"
    code, err = hdsl_check(tmp_path, m.group(1), block.text)
    assert code == 1
    assert "Traceback" not in err and "internal" not in err
    assert err.rstrip("\n") == expected.text.rstrip("\n"), f"{block.id}: the docs show\n{expected.text}\n" \
                                                          f"but hdsl check prints\n{err}"


# ---------------------------------------------------------------------------- runs

def random_input(rng, t, shape) -> np.ndarray:
    if t.is_bool():
        return rng.integers(0, 2, shape).astype(bool)
    if t.is_float():
        return rng.uniform(0, 1, shape).astype(t.dtype)
    if t.is_uint():
        return rng.integers(0, min(t.max_value(), 2 ** 16 - 1) + 1, shape).astype(t.dtype)
    return rng.integers(-1000, 1001, shape).astype(t.dtype)


def run_inputs(p, seed: int) -> dict[str, np.ndarray]:
    """Random inputs of odd sizes (53 x 37, 3 channels; 1-D: 300), numbered like the API's arrays."""
    rng = np.random.default_rng(seed)
    shapes = {1: (300,), 2: (37, 53), 3: (37, 53, 3)}
    return {b.name: random_input(rng, b.type, shapes[b.dims]) for b in p.ir.inputs}


def same(a: np.ndarray, b: np.ndarray, close: bool) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if close and a.dtype.kind == "f":
        return np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
    if close:
        return np.abs(a.astype(np.int64) - b.astype(np.int64)).max(initial=0) <= 1
    return np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


@pytest.mark.parametrize("block", RUNS, ids=lambda b: b.id)
def test_program_runs_natively_as_the_evaluator_says(block):
    p = hdsl.loads(block.text, "example.hl")
    inputs = run_inputs(p, block.line)
    sizes = [o for o in block.options if o.startswith("size=")]
    if sizes:
        size = tuple(int(v) for v in sizes[0][5:].split(","))
        ref = p.realize(size, **inputs)
    else:
        ref = p(**inputs)
    refs = ref if isinstance(ref, tuple) else (ref,)
    assert all(r.size > 0 for r in refs)
    names = [None] + [n for n in p.ir.schedules if n is not None and n not in GPU_SCHEDULES]
    for name in names:
        native = p.compile("host", schedule=name)
        got = native.realize(size, **inputs) if sizes else native(**inputs)
        gots = got if isinstance(got, tuple) else (got,)
        for k, (g, r) in enumerate(zip(gots, refs)):
            assert same(g, r, "close" in block.options), f"{block.id}: schedule {name!r}, output {k}"


@pytest.mark.parametrize("pair", RUN_ERRORS, ids=lambda p: p[0].id)
def test_run_time_error_is_the_real_one(pair):
    """The evaluator and native code refuse the run with the message the docs show."""
    block, expected = pair
    w, h = (int(v) for v in block.options[1][len("input="):].split(","))
    p = hdsl.loads(block.text, "example.hl")
    rng = np.random.default_rng(0)
    inputs = {b.name: random_input(rng, b.type, (h, w)) for b in p.ir.inputs}
    assert all(b.dims == 2 for b in p.ir.inputs)
    for runner in (p, p.compile("host")):
        with pytest.raises(hdsl.HdslError) as e:
            runner(**inputs)
        assert e.value.render() == expected.text.rstrip("\n"), f"{block.id}: target {runner.target}"


def test_the_refused_blur_runs_on_its_inner_points():
    """language.md section 9: the blur without a boundary condition runs with --min 1,1 and
    an output two pixels smaller, natively and on the evaluator, and is the 3x3 box blur
    (checked with NumPy; values below 21845, so the u16 sums do not wrap)."""
    block = next(b for b, _ in RUN_ERRORS if b.doc == "language.md" and "pipeline blur" in b.text)
    p = hdsl.loads(block.text, "blur.hl")
    img = np.random.default_rng(5).integers(0, 21845, (192, 256)).astype(np.uint16)
    bx = (img[:, :-2].astype(np.int64) + img[:, 1:-1] + img[:, 2:]) // 3
    expected = (bx[:-2] + bx[1:-1] + bx[2:]) // 3
    for runner in (p, p.compile("host")):
        got = runner.realize((254, 190), min=(1, 1), img=img)
        assert got.dtype == np.uint16 and np.array_equal(got, expected), runner.target


# ---------------------------------------------------------------------------- coverage and links

# What the language reference's programs must show between them (each a regular
# expression over the ```hl and ```hl-error blocks of docs/language.md).
CONSTRUCTS = {
    "a pipeline header": r"^pipeline \w+",
    "an input": r"^input\s+\w+:\s*\w+\[\d\]",
    "a param with a default": r"^param\s+\w+:\s*\w+\s*=",
    "a param without a default": r"^param\s+\w+:\s*\w+\s*$",
    "several outputs": r"^output[^\n]*\n(?:[^\n]*\n)*?output ",
    "a const": r"^const \w+ =",
    "use boundary": r"^use boundary",
    "use of a stdlib module": r"^use (?!boundary)\w+",
    "a fn": r"^fn \w+\(",
    "a compile-time for": r"for \w+ in ",
    "an array of Funcs": r"\w+\[\w+\]\(x, y\) =",
    "a tuple": r"\) = \(.*, .*\)\s*$",
    "a tuple element read": r"\)\[1\]",
    "+=": r"\) \+= ", "-=": r"\) -= ", "*=": r"\) \*= ", "/=": r"\) /= ",
    "an rdom of ranges": r"rdom \w+ = \[",
    "an rdom over an input": r"rdom \w+ = \w+\s*$",
    "an rdom with where": r"rdom [^\n]* where ",
    "a computed left-hand side": r"\w+\(clamp\(",
    "a scan": r"\w+\(r\.x, y\) = \w+\(r\.x - 1, y\)",
    "let": r"\blet \w+ =", "var": r"\bvar \w+",
    "inline reductions": r"\bsum\(", "argmax": r"\bargmax\(", "minimum": r"\bminimum\(",
    "a recursive filter": r"\.iir\([+-]\w+",
    "select": r"\bselect\(", "?:": r" \? [^\n]* : ",
    "a saturating cast": r"\bu8_sat\(",
    "partial application": r"^\s*\w+ = \w+ [-+*] \w+\(?",
    "a named schedule": r"^schedule \w+ \{",
    "print": r"\bprint\(",
    "update(i)": r"\.update\(0\)",
    "rfactor": r"\.rfactor\(",
    "tile_iir": r"\.tile_iir\(",
    "compute_at": r"\.compute_at\(", "store_at": r"\.store_at\(",
    "fuse": r"\.fuse\(", "reorder": r"\.reorder\(", "bound": r"\.bound\(",
    "reorder_storage": r"\.reorder_storage\(", "unroll": r"\.unroll\(",
    "buffer properties": r"\.dim\(\d\)\.(min|extent)",
}


def test_language_md_covers_every_construct():
    text = "\n".join(b.text for b in BLOCKS if b.doc == "language.md" and b.kind in ("hl", "hl-error"))
    missing = [what for what, rx in CONSTRUCTS.items() if not re.search(rx, text, re.M)]
    assert not missing, f"docs/language.md has no checked program showing: {missing}"


def test_readme_links_the_docs():
    readme = (ROOT / "README.md").read_text()
    for doc in ("docs/language.md", "docs/tutorial.md", "docs/halide.md", "docs/compiler.md", "docs/stdlib.md"):
        assert f"({doc})" in readme, f"README does not link {doc}"
        assert (ROOT / doc).is_file()
    assert "../shared" not in readme


def test_no_test_reads_outside_the_checkout():
    """A clone has no ../shared beside it: no test may reach for it."""
    for path in (ROOT / "tests").rglob("*.py"):
        if path.name == "test_docs.py":
            continue
        text = path.read_text()
        assert '"shared"' not in text and "../shared" not in text, f"{path} reads outside the checkout"


def _real_message(block: Block, expected: Block, directory: Path) -> str | None:
    """What hdsl says for an ```hl-error block today (None: it does not fail)."""
    if "run" in block.options:
        w, h = (int(v) for v in block.options[1][len("input="):].split(","))
        p = hdsl.loads(block.text, "example.hl")
        rng = np.random.default_rng(0)
        try:
            p(**{b.name: random_input(rng, b.type, (h, w)) for b in p.ir.inputs})
        except hdsl.HdslError as e:
            return e.render()
        return None
    m = re.match(r"([\w.-]+\.hl):\d+:\d+: error: ", expected.text)
    code, err = hdsl_check(directory, m.group(1) if m else "example.hl", block.text)
    return err.rstrip("\n") if code == 1 else None


if __name__ == "__main__":
    # After a deliberate change to a message: rewrite the ```text blocks that follow the
    # docs' ```hl-error blocks with what hdsl says now, then read the diff as a reviewer would.
    import sys
    import tempfile
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: test_docs.py --update")
    work = Path(tempfile.mkdtemp())
    for path in sorted(DOCS.glob("*.md")):
        text = path.read_text()
        lines = text.splitlines(keepends=True)
        blocks = blocks_of(text, path.name)
        # from the last block up, so that earlier line numbers stay right
        for i in reversed(range(len(blocks) - 1)):
            b, nxt = blocks[i], blocks[i + 1]
            if b.kind != "hl-error" or nxt.kind != "text":
                continue
            msg = _real_message(b, nxt, work)
            if msg is None:
                print(f"{b.id}: the program no longer fails; fix the docs by hand", file=sys.stderr)
                continue
            body_start, body_end = nxt.line, nxt.line + len(nxt.text.splitlines())
            lines[body_start:body_end] = [msg + "\n"]
        new = "".join(lines)
        if new != text:
            path.write_text(new)
            print(f"rewrote {path.relative_to(ROOT)}")
