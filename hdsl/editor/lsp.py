"""`hdsl lsp`: a language server over stdio that publishes the checker's
diagnostics as you type (pygls 2). Every error the checker finds, with its
range and hint, on each open and change of a .hl document.

Not yet: hover, go to definition, references, symbols, completion,
formatting (issue 18 asks for them; see docs/editors.md)."""
from __future__ import annotations

from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

from hdsl import __version__
from hdsl.diagnostics import Diagnostic, HdslError, Span


def _path(uri: str) -> str:
    """The file name the checker reports and resolves `use "x.hl"` against."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def _range(span: Span | None, filename: str) -> lsp.Range:
    """The LSP range of a span of this document (0-based; the checker's columns are 1-based,
    end exclusive). An error placed in another file (a `use`d module) is shown at the top."""
    if span is None or span.file != filename:
        return lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
    return lsp.Range(lsp.Position(span.line - 1, span.col - 1), lsp.Position(span.end_line - 1, span.end_col - 1))


def _message(d: Diagnostic, filename: str) -> str:
    text = d.message
    if d.span is not None and d.span.file != filename:
        text = f"{d.span}: {text}"
    return text + (f"\nhint: {d.hint}" if d.hint else "")


def diagnostics(text: str, filename: str) -> list[lsp.Diagnostic]:
    """The checker's errors for one document, as LSP diagnostics."""
    from hdsl.frontend.elaborate import check_source
    try:
        check_source(text, filename)
    except HdslError as e:
        return [lsp.Diagnostic(range=_range(d.span, filename), message=_message(d, filename),
                               severity=lsp.DiagnosticSeverity.Error if d.severity == "error"
                               else lsp.DiagnosticSeverity.Warning, source="hdsl")
                for d in e.diagnostics]
    except RecursionError:
        return [lsp.Diagnostic(range=_range(None, filename), source="hdsl", severity=lsp.DiagnosticSeverity.Error,
                               message="the program nests too deeply to check")]
    return []


def make_server() -> LanguageServer:
    server = LanguageServer("hdsl", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Full)

    def publish(uri: str) -> None:
        doc = server.workspace.get_text_document(uri)
        server.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, version=doc.version, diagnostics=diagnostics(doc.source, _path(uri))))

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: lsp.DidOpenTextDocumentParams) -> None:
        publish(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: lsp.DidChangeTextDocumentParams) -> None:
        publish(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: lsp.DidCloseTextDocumentParams) -> None:
        server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=params.text_document.uri,
                                                                              diagnostics=[]))

    return server


def main() -> int:
    make_server().start_io()
    return 0
