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
