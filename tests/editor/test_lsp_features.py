"""`hdsl lsp`'s hover, go to definition, references, document symbols, completion and
formatting, driven over stdio by pytest-lsp's client as an editor drives it. Expected positions
are found in the text by hand-written searches (never by the server's index), and converted
to UTF-16 code units here, as LSP counts them."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls")
pytest_lsp = pytest.importorskip("pytest_lsp")
from lsprotocol import types as lsp  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient  # noqa: E402

from hdsl.frontend.elaborate import STDLIB_DIR  # noqa: E402
from hdsl.schedule.record import SIGNATURES, USAGE  # noqa: E402
from tests.editor.conftest import ROOT  # noqa: E402

BLUR = (ROOT / "examples" / "blur.hl").read_text()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "hdsl.cli", "lsp"]))
async def client(lsp_client: LanguageClient):
    caps = lsp.ClientCapabilities(
        text_document=lsp.TextDocumentClientCapabilities(
            hover=lsp.HoverClientCapabilities(content_format=[lsp.MarkupKind.Markdown]),
            document_symbol=lsp.DocumentSymbolClientCapabilities(hierarchical_document_symbol_support=True),
            completion=lsp.CompletionClientCapabilities(
                completion_item=lsp.ClientCompletionItemOptions(
                    documentation_format=[lsp.MarkupKind.Markdown]))),
        general=lsp.GeneralClientCapabilities(position_encodings=[lsp.PositionEncodingKind.Utf16]))
    await lsp_client.initialize_session(lsp.InitializeParams(capabilities=caps))
    yield
    await lsp_client.shutdown_session()


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def pos(text: str, needle: str, occurrence: int = 0, offset: int = 0) -> lsp.Position:
    """The LSP position of the occurrence-th `needle` in `text` (plus `offset` characters)."""
    i = -1
    for _ in range(occurrence + 1):
        i = text.index(needle, i + 1)
    i += offset
    line = text.count("\n", 0, i)
    start = text.rfind("\n", 0, i) + 1
    return lsp.Position(line, utf16(text[start:i]))


def open_doc(client, path: Path, text: str) -> str:
    uri = path.as_uri()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=uri, language_id="hdsl", version=1, text=text)))
    return uri


async def hover(client, uri, position) -> str | None:
    h = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri), position))
    return None if h is None else h.contents.value


@pytest.mark.asyncio
async def test_hover_func_param_fn_and_directive(client, tmp_path):
    """A Func's types and dimensions (blur_x: u16 / 3 is u16, over x and y), a param's type and
    default, a stdlib fn's doc comment (its lines in filters.hl), a directive's signature
    (record.py's USAGE) and meaning."""
    text = BLUR.replace("input  img: u16[2]", "input  img: u16[2]\nparam  gain: f32 = 1.5f") \
        .replace("use boundary", "use boundary\nuse filters") \
        .replace("    out(x, y)    = ", "    g = gaussian(clamped, gain)\n    out(x, y)    = ")
    uri = open_doc(client, tmp_path / "blur.hl", text)
    h = await hover(client, uri, pos(text, "blur_x(x, y - 1)"))
    assert "Func blur_x(x, y): u16, 2-D" in h
    h = await hover(client, uri, pos(text, "gain)"))
    assert "param gain: f32 = 1.5f" in h and "type `f32`, default `1.5f`" in h
    h = await hover(client, uri, pos(text, "gaussian(clamped"))
    doc = (STDLIB_DIR / "filters.hl").read_text()
    assert "fn gaussian(f, sigma)" in h and "use filters" in h
    assert "separable Gaussian blur with standard deviation sigma" in doc
    assert "separable Gaussian blur with standard deviation sigma" in h
    h = await hover(client, uri, pos(text, "tile("))
    assert USAGE["tile"] in h and "split `x` and `y` by `w` and `h`" in h
    h = await hover(client, uri, pos(text, "vectorize(x, 16)"))
    assert USAGE["vectorize"] in h
    h = await hover(client, uri, pos(text, "u16[2]", offset=1))
    assert h is not None and "element type" in h


@pytest.mark.asyncio
async def test_definition_and_references(client, tmp_path):
    uri = open_doc(client, tmp_path / "blur.hl", BLUR)
    defs = await client.text_document_definition_async(lsp.DefinitionParams(
        lsp.TextDocumentIdentifier(uri), pos(BLUR, "blur_x.compute_at")))
    assert [(d.uri, d.range.start) for d in defs] == [(uri, pos(BLUR, "blur_x(x, y) ="))]
    # a pure var in a schedule: the var of out's definition
    defs = await client.text_document_definition_async(lsp.DefinitionParams(
        lsp.TextDocumentIdentifier(uri), pos(BLUR, "compute_at(out, x)", offset=len("compute_at(out, "))))
    assert defs[0].range.start == pos(BLUR, "out(x, y)    =", offset=len("out("))
    # a loop a directive made: where tile named it
    defs = await client.text_document_definition_async(lsp.DefinitionParams(
        lsp.TextDocumentIdentifier(uri), pos(BLUR, "vectorize(xi", offset=len("vectorize("))))
    assert defs[0].range.start == pos(BLUR, "xi, yi")

    refs = await client.text_document_references_async(lsp.ReferenceParams(
        text_document=lsp.TextDocumentIdentifier(uri), position=pos(BLUR, "blur_x(x, y + 1)"),
        context=lsp.ReferenceContext(include_declaration=True)))
    starts = sorted((r.range.start.line, r.range.start.character) for r in refs)
    lines = BLUR.split("\n")
    found = sorted((n, i) for n, line in enumerate(lines) for i in range(len(line))
                   if line.startswith("blur_x", i) and (i == 0 or not line[i - 1].isalnum()))
    assert starts == found and len(found) == 5        # defined once, read 3 times, scheduled once
    refs = await client.text_document_references_async(lsp.ReferenceParams(
        text_document=lsp.TextDocumentIdentifier(uri), position=pos(BLUR, "blur_x(x, y + 1)"),
        context=lsp.ReferenceContext(include_declaration=False)))
    assert len(refs) == 4


@pytest.mark.asyncio
async def test_definition_across_use_into_the_stdlib(client, tmp_path):
    text = ("pipeline p\nuse boundary\nuse filters\ninput img: f32[2]\nparam r: i32 = 1\noutput out: f32[2]\n"
            "fn twice(f, k) {\n    return box(f, k) * 2.0f\n}\n"
            "algorithm {\n    out = twice(mirror_image(img), r)\n}\n")
    uri = open_doc(client, tmp_path / "p.hl", text)
    defs = await client.text_document_definition_async(lsp.DefinitionParams(
        lsp.TextDocumentIdentifier(uri), pos(text, "box(")))
    filters = (STDLIB_DIR / "filters.hl").resolve()
    lib = filters.read_text()
    assert [(d.uri, d.range.start) for d in defs] == [(filters.as_uri(), pos(lib, "box(f, r) {"))]
    defs = await client.text_document_definition_async(lsp.DefinitionParams(
        lsp.TextDocumentIdentifier(uri), pos(text, "filters")))
    assert defs[0].uri == filters.as_uri()
    # a fn, its parameter, a param
    for use, decl in [("twice(mirror", "twice(f, k)"), ("k) * 2", "k) {"), ("r)\n", "r: i32")]:
        defs = await client.text_document_definition_async(lsp.DefinitionParams(
            lsp.TextDocumentIdentifier(uri), pos(text, use)))
        assert [(d.uri, d.range.start) for d in defs] == [(uri, pos(text, decl))], use
    refs = await client.text_document_references_async(lsp.ReferenceParams(
        text_document=lsp.TextDocumentIdentifier(uri), position=pos(text, "box("),
        context=lsp.ReferenceContext(include_declaration=True)))
    assert sorted((r.uri, r.range.start.line) for r in refs) == sorted(
        [(filters.as_uri(), pos(lib, "box(f, r) {").line), (uri, pos(text, "box(f, k)").line)])


@pytest.mark.asyncio
async def test_document_symbols(client, tmp_path):
    uri = open_doc(client, tmp_path / "blur.hl", BLUR)
    syms = await client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(uri)))
    assert [s.name for s in syms] == ["blur", "img", "out", "algorithm"]
    algorithm = syms[-1]
    assert [c.name for c in algorithm.children] == ["clamped", "blur_x"]
    assert algorithm.children[1].selection_range.start == pos(BLUR, "blur_x(x, y) =")
    assert syms[1].kind == lsp.SymbolKind.Variable and syms[1].detail == "input img: u16[2]"


async def complete(client, uri, position) -> set[str]:
    result = await client.text_document_completion_async(lsp.CompletionParams(
        lsp.TextDocumentIdentifier(uri), position))
    items = result.items if isinstance(result, lsp.CompletionList) else result
    return {i.label for i in items}


@pytest.mark.asyncio
async def test_completion(client, tmp_path):
    """After `f.` in a schedule: the directives; inside a directive: the pure vars of the Func
    being scheduled and the loops its directives made (on this half-typed line too); compute_at:
    the Funcs, then the consumer's loops; elsewhere: Funcs, stdlib fns, types."""
    text = BLUR.replace("    blur_x.compute_at(out, x).vectorize(x, 16)\n",
                        "    blur_x.\n    out.split(y, yo, yy, 8).parallel(\n    blur_x.compute_at(\n"
                        "    blur_x.compute_at(out, \n")
    uri = open_doc(client, tmp_path / "blur.hl", text)
    got = await complete(client, uri, pos(text, "blur_x.\n", offset=len("blur_x.")))
    assert set(SIGNATURES) <= got and "x" not in got
    got = await complete(client, uri, pos(text, "parallel(\n", offset=len("parallel(")))
    assert {"x", "y", "xi", "yi", "yo", "yy"} <= got and "blur_x" not in got
    got = await complete(client, uri, pos(text, "compute_at(\n", offset=len("compute_at(")))
    assert {"out", "blur_x", "clamped"} <= got and "tile" not in got
    got = await complete(client, uri, pos(text, "compute_at(out, \n", offset=len("compute_at(out, ")))
    assert {"x", "y", "xi", "yi"} <= got
    got = await complete(client, uri, pos(text, "(clamped(x - 1", offset=1))
    assert {"clamped", "blur_x", "img", "u16", "f32", "gaussian", "repeat_edge", "select"} <= got
    got = await complete(client, uri, pos(text, "img.", offset=4) if "img." in text else pos(text, "}"))
    assert got


@pytest.mark.asyncio
async def test_positions_are_utf16(client, tmp_path):
    """A non-ASCII comment above, and a string with a character outside the BMP (two UTF-16
    units) before a name on its line: hover, definition and a diagnostic are placed in UTF-16."""
    text = BLUR.replace("algorithm {", "# é — größer 😀\nalgorithm {").replace(
        "    out(x, y)    = (blur_x(x, y - 1)",
        '    out(x, y)    = print(blur_x(x, y), "😀é") * 0 + (blur_x(x, y - 1)')
    uri = open_doc(client, tmp_path / "u.hl", text)
    at = pos(text, "blur_x(x, y - 1)")
    line = text.split("\n")[at.line]
    assert at.character == line.index("blur_x(x, y - 1)") + 1      # the emoji counts two
    h = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri), at))
    assert h.range.start == at and h.range.end.character == at.character + len("blur_x")
    assert "Func blur_x" in h.contents.value

    broken = text.replace("(blur_x(x, y - 1)", "(blur_q(x, y - 1)")
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
        [lsp.TextDocumentContentChangeWholeDocument(text=broken)]))
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    diags = client.diagnostics[uri]
    (d,) = [d for d in diags if "blur_q" in d.message]
    assert d.range.start == pos(broken, "blur_q")
    assert d.range.end.character == d.range.start.character + len("blur_q")


@pytest.mark.asyncio
async def test_a_broken_file_still_answers(client, tmp_path):
    """A half-typed line (a syntax error) hides nothing else: hover, symbols, definition still
    work; a file that is nothing but errors answers with nothing and does not crash."""
    text = BLUR.replace("    blur_x.compute_at", "    out.tile(x, y,\n    blur_x.compute_at")
    uri = open_doc(client, tmp_path / "b.hl", text)
    h = await hover(client, uri, pos(text, "blur_x(x, y + 1)"))
    assert "Func blur_x(x, y): u16, 2-D" in h
    syms = await client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(uri)))
    assert "algorithm" in [s.name for s in syms]
    defs = await client.text_document_definition_async(lsp.DefinitionParams(
        lsp.TextDocumentIdentifier(uri), pos(text, "blur_x.compute_at")))
    assert defs[0].range.start == pos(text, "blur_x(x, y) =")

    junk = "{{{ ))) fn ( 😀\n\"unterminated\n"
    uri2 = open_doc(client, tmp_path / "junk.hl", junk)
    assert await hover(client, uri2, lsp.Position(0, 1)) is None
    assert await client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(uri2))) == []
    assert "pipeline" in await complete(client, uri2, lsp.Position(1, 0))


@pytest.mark.asyncio
async def test_formatting(client, tmp_path):
    """The whole document replaced by `hdsl fmt`'s layout (written by hand here); a document in
    that layout gets no edit; one that does not parse gets none either."""
    bad = "pipeline  p\ninput img:u8[2]\noutput out:u8[2]\nalgorithm{\nout(x,y)=img(x,y)+1 # one\n}\n"
    good = ("pipeline p\ninput  img: u8[2]\noutput out: u8[2]\nalgorithm {\n"
            "    out(x, y) = img(x, y) + 1  # one\n}\n")
    uri = open_doc(client, tmp_path / "f.hl", bad)
    opts = lsp.FormattingOptions(tab_size=4, insert_spaces=True)
    (edit,) = await client.text_document_formatting_async(
        lsp.DocumentFormattingParams(lsp.TextDocumentIdentifier(uri), opts))
    assert edit.new_text == good
    assert edit.range.start == lsp.Position(0, 0) and edit.range.end == lsp.Position(6, 0)
    uri2 = open_doc(client, tmp_path / "g.hl", good)
    assert list(await client.text_document_formatting_async(
        lsp.DocumentFormattingParams(lsp.TextDocumentIdentifier(uri2), opts))) == []
    uri3 = open_doc(client, tmp_path / "h.hl", "pipeline p\ninput img: u8[2\n")
    assert not await client.text_document_formatting_async(
        lsp.DocumentFormattingParams(lsp.TextDocumentIdentifier(uri3), opts))
