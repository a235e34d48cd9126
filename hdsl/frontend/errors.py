"""The front end's error plumbing.

`ElabError` aborts the statement being checked; the elaborator catches it at
statement level, reports it to a `Sink` and goes on with the next statement.
An error may carry notes (`in this call of fn 'f'`, `'out' is declared here`)
that are printed right after it. `Poisoned` is the silent kind: raised where
a name or value is already known to be wrong (its own error was reported), so
one mistake is reported once and not again at every use.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from hdsl.diagnostics import Diagnostic, DiagnosticSink, Span


class ElabError(Exception):
    def __init__(self, message: str | None, span: Span | None, hint: str | None = None,
                 notes: list[tuple[str, Span]] | None = None):
        super().__init__(message or "poisoned")
        self.message, self.span, self.hint = message, span, hint
        self.notes: list[tuple[str, Span]] = list(notes or [])

    def add_note(self, message: str, span: Span | None) -> None:
        if span is None or span == self.span or any(s == span for _, s in self.notes):
            return
        self.notes.append((message, span))


class Poisoned(ElabError):
    """A follow-on of an error already reported: abort the statement, say nothing."""

    def __init__(self):
        super().__init__(None, None)


@dataclass
class NotedDiagnostic(Diagnostic):
    notes: list[tuple[str, Span]] = field(default_factory=list)

    def render(self) -> str:
        parts = [Diagnostic.render(self)]
        parts += [Diagnostic(m, s, None, "note").render() for m, s in self.notes]
        return "\n".join(parts)


class Sink(DiagnosticSink):
    """Errors in the order of their positions; each keeps its notes with it."""

    def error(self, message: str, span: Span | None, hint: str | None = None,
              notes: list[tuple[str, Span]] | None = None) -> None:
        for old in self.diagnostics:
            if old.message == message and old.span == span:
                return
        self.diagnostics.append(NotedDiagnostic(message, span, hint, notes=list(notes or [])))

    def report(self, e: ElabError) -> None:
        if e.message is None:
            return
        self.error(e.message, e.span, e.hint, e.notes)
