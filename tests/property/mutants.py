"""A corpus of bad programs: seeded token-level mutations of examples/*.hl, and a runner
that sends each one through every stage a user can reach and sorts what happens.

A mutant is named by (example, seed) and rebuilt the same way every time. It may be
refused, with a positioned HdslError (`file:line:col: error: ...`) from the checker, from
lowering (`hdsl check --lower`) or from native compilation, or it may run; running on
small random inputs it may fail with an HdslError about those inputs (an input read
outside its size: such run-time errors have no position). Anything else is a finding: an
InternalError, another Python exception, an error without a position before run time, or
the evaluator and native code disagreeing (one fails and the other does not, or different
values).

Reproduce one mutant with
    .venv/bin/python tests/property/mutants.py EXAMPLE SEED [--native]
which prints its text and what each stage did.
"""
from __future__ import annotations

import math
import random
import re
import signal
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

TOKEN = re.compile(r"""
    (?P<comment>\#[^\n]*)
  | (?P<str>"[^"\n]*")
  | (?P<num>\d+\.\d*(?:[eE][-+]?\d+)?[fF]?|\d+[eE][-+]?\d+[fF]?|\d+)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op>\.\.|==|!=|<=|>=|&&|\|\||<<|>>|\+=|-=|\*=|/=|[-+*/%<>=!~&|^?:.,;()\[\]{}])
  | (?P<ws>\s+)
  | (?P<other>.)
""", re.VERBOSE)

EXTREME_NUMBERS = ["0", "1", "-1", "2", "255", "256", "65536", "2147483647", "2147483648", "-2147483648",
                   "4294967296", "9223372036854775807", "9223372036854775808", "1e39", "1e-45", "3.4028235e38",
                   "0.0", "-0.0", "1e308", "0.5f", "(0.0f / 0.0f)", "i32(sqrt(-1.0f))", "(1 / 0)"]
TYPES = ["bool", "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "f16", "f32", "f64"]
OPERATOR_FAMILIES = [["+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "min", "max"],
                     ["<", "<=", ">", ">=", "==", "!="], ["&&", "||"], ["+=", "-=", "*=", "/=", "="],
                     ["..", ","], ["(", ")", "[", "]", "{", "}"]]
# (weighted towards edits that keep the syntax: most of the compiler lies behind the parser)
KINDS = ["delete", "duplicate", "swap", "insert"] + ["number", "rename", "type", "operator", "line",
                                                    "directive"] * 3
DIRECTIVES = ["compute_root()", "store_root()", "compute_inline()", "vectorize(x, 8)", "vectorize(x)",
              "parallel(y)", "unroll(x, 2)", "split(x, xo, xi, 4)", "split(y, yo, yi, 3)", "reorder(y, x)",
              "tile(x, y, xi, yi, 8, 4)", "bound(x, 0, 16)", "bound(c, 0, 3)", "compute_at(out, x)",
              "compute_at(out, y)", "store_at(out, y)", "reorder_storage(y, x)", "update(0)", "fuse(x, y, t)",
              "vectorize(x, 2147483647)", "split(x, xo, xi, 1)", "estimate(x, 0, 1024)"]


@dataclass
class Token:
    kind: str
    text: str


def tokens(text: str) -> list[Token]:
    return [Token(m.lastgroup, m.group()) for m in TOKEN.finditer(text)]


def mutate(text: str, rng: random.Random, steps: int) -> tuple[str, list[str]]:
    """`steps` random edits of `text`; returns the new text and what was done."""
    toks = tokens(text)
    done = []
    for _ in range(steps):
        sig = [i for i, t in enumerate(toks) if t.kind not in ("ws", "comment")]
        if not sig:
            break
        kind = rng.choice(KINDS)
        i = rng.choice(sig)
        t = toks[i]
        if kind == "delete":
            toks[i] = Token("ws", " ")
        elif kind == "duplicate":
            toks.insert(i + 1, Token(t.kind, " " + t.text))
        elif kind == "swap":
            k = sig.index(i)
            if k + 1 >= len(sig):
                continue
            j = sig[k + 1]
            toks[i], toks[j] = toks[j], toks[i]
        elif kind == "number":
            nums = [k for k in sig if toks[k].kind == "num"]
            if not nums:
                continue
            i = rng.choice(nums)
            toks[i] = Token("num", rng.choice(EXTREME_NUMBERS))
        elif kind == "rename":
            ids = [k for k in sig if toks[k].kind == "id"]
            if not ids:
                continue
            i = rng.choice(ids)
            names = sorted({toks[k].text for k in ids}) + ["zz", "x", "y", "c", "r"]
            toks[i] = Token("id", rng.choice(names))
        elif kind == "type":
            typed = [k for k in sig if toks[k].text in TYPES]
            if not typed:
                continue
            i = rng.choice(typed)
            toks[i] = Token("id", rng.choice(TYPES))
        elif kind == "operator":
            ops = [k for k in sig if any(toks[k].text in fam for fam in OPERATOR_FAMILIES)]
            if not ops:
                continue
            i = rng.choice(ops)
            fam = next(f for f in OPERATOR_FAMILIES if toks[i].text in f)
            new = rng.choice(fam)
            toks[i] = Token("op", f" {new} " if new.isalpha() else new)
        elif kind == "line":
            # delete, duplicate or move a whole line (a definition, a directive)
            text = "".join(x.text for x in toks)
            lines = text.split("\n")
            k = rng.randrange(len(lines))
            how = rng.choice(["delete", "duplicate", "move"])
            if how == "delete":
                del lines[k]
            elif how == "duplicate":
                lines.insert(k, lines[k])
            else:
                lines.insert(rng.randrange(len(lines)), lines.pop(k))
            toks = tokens("\n".join(lines))
            done.append(f"line-{how}@{k + 1}")
            continue
        elif kind == "directive":
            # one more scheduling directive on a Func named in the schedule (or any Func)
            ends = [k for k in sig if toks[k].text == ")" and k + 1 < len(toks) and "\n" in toks[k + 1].text
                    and "schedule" in "".join(x.text for x in toks[:k])]
            if not ends:
                continue
            i = rng.choice(ends)
            toks.insert(i + 1, Token("op", "." + rng.choice(DIRECTIVES)))
        elif kind == "insert":
            other = toks[rng.choice(sig)]
            toks.insert(i, Token(other.kind, other.text + " "))
        t_line = "".join(x.text for x in toks[:i]).count("\n") + 1
        done.append(f"{kind}@{t_line}")
    return "".join(t.text for t in toks), done


def mutant(example: str, seed: int) -> tuple[str, list[str]]:
    """Mutant `seed` of examples/EXAMPLE.hl (1 or 2 edits)."""
    rng = random.Random(f"{example}:{seed}")
    text = (EXAMPLES / f"{example}.hl").read_text()
    return mutate(text, rng, rng.choice([1, 1, 1, 2]))


NATIVE_LIMIT = "hdsl addresses buffers with 32-bit offsets"


class Timeout(BaseException):
    """(A BaseException: no `except Exception` in the compiler may turn it into another error.)"""


@dataclass
class Outcome:
    example: str
    seed: int
    stages: list[str] = field(default_factory=list)     # what each stage did, in order
    finding: str | None = None                          # None: a positioned error or a run
    slow: bool = False

    def __str__(self):
        return f"{self.example} seed {self.seed}: " + "; ".join(self.stages) + \
            (f"\n    FINDING: {self.finding}" if self.finding else "")


def small_inputs(ir, rng: np.random.Generator) -> dict[str, np.ndarray]:
    shapes = {1: (19,), 2: (13, 19), 3: (13, 19, 3)}
    out = {}
    for b in ir.inputs:
        shape = shapes.get(b.dims, (3,) * b.dims)
        dt = np.dtype(b.type.dtype)
        if dt.kind == "f":
            out[b.name] = rng.uniform(0.0, 1.0, shape).astype(dt)
        elif dt == np.bool_:
            out[b.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            info = np.iinfo(dt)
            out[b.name] = rng.integers(info.min, int(info.max) + 1, shape, dtype=dt)
    return out


def _first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def _unpositioned(e) -> bool:
    return any(d.span is None for d in e.diagnostics)


def _time_limit(seconds: float):
    """A limit on this process's CPU time (not wall time: the machine may be busy)."""
    def handler(signum, frame):
        raise Timeout()
    signal.signal(signal.SIGPROF, handler)
    signal.setitimer(signal.ITIMER_PROF, seconds)


def _no_time_limit():
    signal.setitimer(signal.ITIMER_PROF, 0)


def run_mutant(example: str, seed: int, native: bool, seconds: float = 10.0) -> Outcome:
    """Every stage for one mutant, within `seconds` of wall time (slower mutants are set
    aside, not failed: a mutated loop bound can ask for any amount of work). Seconds of CPU
    time: native code's worker threads count too."""
    import hdsl
    import hdsl.interp.evaluate as evaluate
    from hdsl.cli import lower_schedules
    from hdsl.diagnostics import HdslError
    from hdsl.frontend.elaborate import check_source

    text, _ = mutant(example, seed)
    filename = str(EXAMPLES / f"{example}.hl")
    o = Outcome(example, seed)
    stage = "check"
    limit = evaluate.MAX_REGION
    evaluate.MAX_REGION = 1 << 20          # small inputs: refuse what would take gigabytes
    _time_limit(seconds)
    try:
        with np.errstate(all="ignore"):
            ir = check_source(text, filename)
            o.stages.append("check ok")
            if ir is None:
                return o                    # a library: checked is all there is
            stage = "lower"
            lower_schedules(ir)
            o.stages.append("lower ok")
            stage = "interp"
            p = hdsl.Pipeline(ir)
            inputs = small_inputs(ir, np.random.default_rng(seed))
            sizes = ([[19, 13, 3][:f.dims] for f in ir.outputs])
            try:
                expected = p._run(*p._bind(inputs), sizes)
                o.stages.append("interp ok")
            except HdslError as e:
                if not _unpositioned(e):
                    raise
                expected = e                # a run-time error about the inputs
                o.stages.append("interp: " + str(e).splitlines()[0][:120])
            if not native:
                return o
            stage = "native compile"
            c = p.compile("host")
            o.stages.append("compile ok")
            stage = "native run"
            try:
                got = c._run(*c._bind(inputs), sizes)
            except HdslError as e:
                if NATIVE_LIMIT in str(e):
                    # native code's own limit (32-bit offsets, as Halide's): a schedule can
                    # round a region up past it (vectorize(x, 2147483647)); the evaluator has none
                    o.stages.append("native: over its 2^31 limit")
                    return o
                if not isinstance(expected, HdslError):
                    o.finding = f"native run fails where the evaluator runs: {str(e).splitlines()[0]}"
                else:
                    o.stages.append("native: " + str(e).splitlines()[0][:120])
                return o
            if isinstance(expected, HdslError):
                o.finding = f"native code runs where the evaluator fails: {str(expected).splitlines()[0]}"
                return o
            for k, (a, b) in enumerate(zip(expected if isinstance(expected, tuple) else (expected,),
                                           got if isinstance(got, tuple) else (got,))):
                if not _same_values(a, b):
                    o.finding = f"output {k}: native code differs from the evaluator"
                    return o
            o.stages.append("native == interp")
    except HdslError as e:
        o.stages.append(f"{stage}: " + str(e).splitlines()[0][:120])
        if _unpositioned(e) and stage not in ("interp", "native run"):
            o.finding = f"{stage}: error without a position: {_first_line(e)}"
    except Timeout:
        o.slow = True
        o.stages.append(f"{stage}: over {seconds} s")
    except RecursionError as e:
        o.finding = f"{stage}: {_first_line(e)}"
    except Exception as e:              # noqa: BLE001 - the point: anything else is a finding
        o.finding = f"{stage}: {_first_line(e)}"
        o.stages.append(traceback.format_exc(limit=-3).strip().splitlines()[-1])
    finally:
        _no_time_limit()
        evaluate.MAX_REGION = limit
        from hdsl.ir.expr import clear_interned
        clear_interned()
    return o


def _same_values(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f":
        # math library functions may differ by a few ulp (the spec), which later stages can
        # grow (level_set's atan and exp: 2e-5 here; its own test allows 1e-4); ints are exact
        return bool(np.allclose(a, b, rtol=1e-4, atol=1e-4, equal_nan=True))
    return bool(np.array_equal(a, b))


def corpus(examples: list[str], count: int, first_seed: int = 0) -> list[tuple[str, int]]:
    """`count` mutants spread evenly over the examples."""
    return [(examples[k % len(examples)], first_seed + k // len(examples)) for k in range(count)]


def all_examples() -> list[str]:
    return sorted(p.stem for p in EXAMPLES.glob("*.hl"))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    text, done = mutant(args[0], int(args[1]))
    print(f"# mutant {args[1]} of {args[0]}.hl: {', '.join(done)}")
    print(text)
    print(run_mutant(args[0], int(args[1]), "--native" in sys.argv, seconds=math.inf if "--no-limit" in sys.argv
                     else 60.0))
