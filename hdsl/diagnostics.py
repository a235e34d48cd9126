"""Source spans and user-facing diagnostics.

`HdslError` is the user's mistake: it carries one or more `Diagnostic`s, each
with a span, and renders as ``file:line:col: error: …`` followed by the source
line, a caret under the span and an optional hint.  `InternalError` is ours:
the CLI reports it as a compiler bug.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Span:
    file: str
    line: int          # 1-based
    col: int           # 1-based
    end_line: int
    end_col: int       # exclusive

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


# file name -> source text, so that diagnostics can quote lines.
_SOURCES: dict[str, str] = {}


def register_source(filename: str, text: str) -> None:
    _SOURCES[filename] = text


def registered_source(filename: str) -> str | None:
    """The text checked under this file name, if any."""
    return _SOURCES.get(filename)


def source_line(span: Span) -> str | None:
    text = _SOURCES.get(span.file)
    if text is None:
        return None
    lines = text.split("\n")
    if 1 <= span.line <= len(lines):
        return lines[span.line - 1].rstrip("\r")
    return None


@dataclass
class Diagnostic:
    message: str
    span: Span | None = None
    hint: str | None = None
    severity: str = "error"

    def render(self) -> str:
        out = []
        where = f"{self.span}: " if self.span else ""
        out.append(f"{where}{self.severity}: {self.message}")
        if self.span is not None:
            line = source_line(self.span)
            if line is not None:
                out.append("    " + line)
                start = self.span.col - 1
                if self.span.end_line == self.span.line:
                    width = max(1, self.span.end_col - self.span.col)
                else:
                    width = max(1, len(line) - start)
                out.append("    " + " " * start + "^" * width)
        if self.hint:
            first, *rest = self.hint.split("\n")
            out.append(f"hint: {first}")
            out.extend("      " + r for r in rest)
        return "\n".join(out)


class HdslError(Exception):
    """One or more errors in the user's program or inputs."""

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic | str,
                 span: Span | None = None, hint: str | None = None):
        if isinstance(diagnostics, str):
            diagnostics = [Diagnostic(diagnostics, span, hint)]
        elif isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = list(diagnostics)
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)


class InternalError(Exception):
    """A bug in hdsl itself, never the user's fault."""


@dataclass
class DiagnosticSink:
    """Collects errors so the checker can report them all at once."""
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def error(self, message: str, span: Span | None, hint: str | None = None) -> None:
        d = Diagnostic(message, span, hint)
        # the same error at the same place (e.g. from a fn expanded twice) once
        for old in self.diagnostics:
            if old.message == d.message and old.span == d.span:
                return
        self.diagnostics.append(d)

    def raise_if_any(self) -> None:
        if self.diagnostics:
            self.diagnostics.sort(key=lambda d: (d.span.file, d.span.line, d.span.col) if d.span else ("", 0, 0))
            raise HdslError(self.diagnostics)


def did_you_mean(name: str, candidates) -> str | None:
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return close[0] if close else None


def read_source(path, shown: str | None = None) -> str:
    """The text of a `.hl` file. A file that is not UTF-8 is a positioned error at its first
    bad byte (its offset, line and column), not a UnicodeDecodeError; a file that cannot be
    read raises OSError, for the caller to word."""
    shown = shown if shown is not None else str(path)
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        start = data.rfind(b"\n", 0, e.start) + 1
        col = len(data[start:e.start].decode("utf-8", errors="replace")) + 1
        register_source(shown, data.decode("utf-8", errors="replace"))
        raise HdslError(f"this file is not UTF-8 text: byte 0x{data[e.start]:02X} at offset {e.start} "
                        f"(line {line}) cannot be decoded", Span(shown, line, col, line, col + 1),
                        "save the file as UTF-8 (identifiers are ASCII; comments and strings may hold "
                        "any UTF-8 text)") from None


# Run-time errors worded once, for the reference evaluator and native code alike (the two
# must agree on every run-time error).

def _dim_name(d: int) -> str:
    return "xyc"[d] if d < 3 else f"dim {d}"


def output_written_outside(output: str, d: int, lo: int, hi: int, buf_lo: int, buf_hi: int) -> HdslError:
    return HdslError(f"output '{output}' is written at {_dim_name(d)} = {lo} .. {hi}, but the buffer covers "
                     f"{_dim_name(d)} = {buf_lo} .. {buf_hi}", None,
                     "make the output larger, or keep computed coordinates within it")


def bound_too_small(func: str, var: str, lo: int, hi: int, bound_min: int, bound_extent: int,
                    span: Span | None) -> HdslError:
    """A bound(v, min, extent) directive that does not cover the region of `func` its
    consumers (or the caller, for an output) need."""
    return HdslError(f"'{func}' is needed at {var} = {lo} .. {hi}, but its bound({var}, {bound_min}, "
                     f"{bound_extent}) covers {var} = {bound_min} .. {bound_min + bound_extent - 1}", span,
                     "widen the bound, or shrink the output")
