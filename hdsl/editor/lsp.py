"""`hdsl lsp`: a language server over stdio (pygls 2).

- diagnostics: every error the checker finds, with its range and hint, on each open and
  change of a .hl document;
- hover: a Func's types and dimensions, a param's type and default, an input's or output's
  declaration, a fn's doc comment (the stdlib's too), a directive's signature and meaning;
- go to definition and find references: Funcs, fns, params, inputs, outputs, consts, vars,
  lets, rdoms and the loops a schedule names, across `use` into stdlib and other files;
- document symbols; completion (directives after `f.`, the pure vars and loop names of the
  Func being scheduled, Funcs, fns, types, built-ins); formatting (`hdsl fmt`).

Names come from hdsl/editor/index.py (the front end's AST, recovered around lines that do
not parse). Positions are in the encoding the client and server agreed on (UTF-16 unless
the client offers another), converted from the front end's 1-based character columns."""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

from hdsl import __version__
from hdsl.diagnostics import Diagnostic, HdslError, Span


def _path(uri: str) -> str:
    """The file name the checker reports and resolves `use "x.hl"` against."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def _units(codec, text: str) -> int:
    return codec.impl.num_units(text) if codec is not None else len(text.encode("utf-16-le")) // 2


def _position(lines: list[str], line: int, col: int, codec=None) -> lsp.Position:
    """1-based (line, character column) -> an LSP position (0-based, in the client's code units)."""
    text = lines[line - 1] if 1 <= line <= len(lines) else ""
    # (a syntax error at the end of a line is placed one column past it)
    return lsp.Position(max(0, line - 1), _units(codec, text[:max(0, col - 1)]) + max(0, col - 1 - len(text)))


def _column(lines: list[str], pos: lsp.Position, codec=None) -> tuple[int, int]:
    """An LSP position -> 1-based (line, character column)."""
    text = lines[pos.line] if 0 <= pos.line < len(lines) else ""
    units = 0
    for i, ch in enumerate(text):
        if units >= pos.character:
            return pos.line + 1, i + 1
        units += _units(codec, ch)
    return pos.line + 1, len(text) + 1


def _span_range(span: Span, lines: list[str], codec=None) -> lsp.Range:
    return lsp.Range(_position(lines, span.line, span.col, codec), _position(lines, span.end_line, span.end_col, codec))


def _range(span: Span | None, filename: str, lines: list[str] | None = None, codec=None) -> lsp.Range:
    """The LSP range of a span of this document (the checker's columns are 1-based, end
    exclusive). An error placed in another file (a `use`d module) is shown at the top."""
    if span is None or span.file != filename:
        return lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
    return _span_range(span, lines if lines is not None else [], codec)


def _message(d: Diagnostic, filename: str) -> str:
    text = d.message
    if d.span is not None and d.span.file != filename:
        text = f"{d.span}: {text}"
    return text + (f"\nhint: {d.hint}" if d.hint else "")


def diagnostics(text: str, filename: str, codec=None) -> list[lsp.Diagnostic]:
    """The checker's errors for one document, as LSP diagnostics."""
    from hdsl.frontend.elaborate import check_source
    lines = text.split("\n")
    try:
        check_source(text, filename)
    except HdslError as e:
        return [lsp.Diagnostic(range=_range(d.span, filename, lines, codec), message=_message(d, filename),
                               severity=lsp.DiagnosticSeverity.Error if d.severity == "error"
                               else lsp.DiagnosticSeverity.Warning, source="hdsl")
                for d in e.diagnostics]
    except RecursionError:
        return [lsp.Diagnostic(range=_range(None, filename), source="hdsl", severity=lsp.DiagnosticSeverity.Error,
                               message="the program nests too deeply to check")]
    return []




# ---------------------------------------------------------------------- hover texts
_KIND_WORDS = {"input": "input", "output": "output", "param": "param", "const": "const", "fn": "fn",
               "fn-param": "parameter", "func": "Func", "binding": "Func", "array": "array of Funcs",
               "var": "var", "let": "let", "rdom": "rdom", "loop": "loop", "pipeline": "pipeline",
               "schedule": "schedule"}


def _code(text: str) -> str:
    return f"```hdsl\n{text}\n```"


def hover_symbol(idx, sym) -> str:
    """Markdown for a symbol: what the checker knows of it (a Func's types and dimensions),
    its declaration, what kind of name it is, its doc comment."""
    from hdsl.frontend import ast
    if sym.kind in ("var", "loop", "fn-param"):        # their detail is prose: "pure var of f"
        return f"{_code(sym.name)}\n\n{sym.detail}"
    info = idx.info.get(sym.name) if sym.kind in ("func", "binding", "output", "array", "let", "rdom") \
        and sym.parent is None and sym.span.file == idx.filename else None
    parts = [_code(info)] if info and info.startswith("Func") else []
    parts.append(_code(sym.detail or sym.name))
    node = _decl_node(idx, sym) if sym.kind in ("param", "input", "output") else None
    if isinstance(node, ast.ParamDeclNode):
        default = _text_of(idx, node.default.span) if node.default is not None else None
        parts.append(f"param of type `{node.type_name}`" + (f", default `{default}`" if default else
                                                           ", no default (give it with --param)"))
    elif isinstance(node, ast.BufferDecl):
        parts.append(f"{sym.kind} of type `{node.type_name}`, `{_text_of(idx, node.dims.span)}`-D")
    elif sym.kind == "fn":
        parts.append("fn" + (f" (from `use {sym.module}`)" if sym.module else ""))
    elif sym.kind not in ("pipeline", "schedule", "param", "input", "output"):
        parts.append(_KIND_WORDS.get(sym.kind, sym.kind) + (f" in fn {sym.parent.name}" if sym.parent else ""))
    if info and not info.startswith("Func"):
        parts.append(f"type: `{info}`" if sym.kind == "let" else info)
    if sym.doc:
        parts.append(sym.doc)
    return "\n\n".join(parts)


def _decl_node(idx, sym):
    from hdsl.frontend import ast
    mods = [idx.module] + [m.module for m in idx.used_modules.values()]
    for mod in mods:
        for item in (mod.items if mod is not None else []):
            if getattr(item, "name_span", None) is sym.span or (isinstance(item, ast.Node) and item.span is sym.decl):
                return item
    return None


def _text_of(idx, span) -> str:
    lines = idx.lines if span.file == idx.filename else _file_lines(span.file)
    if span.line == span.end_line and 1 <= span.line <= len(lines):
        return lines[span.line - 1][span.col - 1:span.end_col - 1]
    return "..."


def _file_lines(path: str) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError):
        return []


def hover_word(word: str, attr=None) -> str | None:
    """Markdown for a directive, a built-in, a type, a boundary condition or a module name."""
    from hdsl.editor import directives, tokens
    from hdsl.frontend.elaborate import BUILTIN_USAGE, STDLIB_DIR
    from hdsl.schedule.record import SIGNATURES
    if attr is not None:
        if attr.in_schedule and word in SIGNATURES:
            return directives.hover_text(word)
        if word == "iir":
            return _code("f.iir(±x, lo..hi, feedforward, [feedback...])") + \
                "\n\nrecursive (IIR) filter of Func f along a dimension (docs/language.md)"
        if attr.base is None and (STDLIB_DIR / f"{word}.hl").is_file():
            lines = _file_lines(str(STDLIB_DIR / f"{word}.hl"))
            top = []
            for ln in lines:
                if not ln.startswith("#"):
                    break
                top.append(ln[1:].strip())
            return _code(f"use {word}") + "\n\nstandard module\n\n" + "\n".join(top)
        if word in tokens.BUFFER_PROPERTIES:
            return f"buffer property `.{word}`"
    if word in SIGNATURES and attr is None:
        return None
    if word in tokens.TYPES:
        return _code(word) + "\n\nelement type; as a function, a cast (wrapping)"
    if word in tokens.SATURATING_CASTS:
        return _code(f"{word}(x)") + f"\n\nsaturating cast to {word[:-4]}"
    if word in BUILTIN_USAGE:
        return _code(BUILTIN_USAGE[word]) + "\n\nbuilt-in function"
    if word in tokens.BUILTIN_FUNCTIONS:
        return _code(f"{word}(x)" if word != "print" else "print(value, args...)") + "\n\nbuilt-in function"
    if word in tokens.REDUCTIONS:
        return _code(f"{word}(expression over an rdom)") + "\n\ninline reduction"
    if word in tokens.BOUNDARY_CONDITIONS:
        return _code(f"{word}(f)" if word != "constant_exterior" else f"{word}(f, value)") + \
            "\n\nboundary condition (`use boundary`)"
    return None


# ---------------------------------------------------------------------- completion
_KIND_ITEMS = {"input": lsp.CompletionItemKind.Variable, "output": lsp.CompletionItemKind.Variable,
               "param": lsp.CompletionItemKind.Constant, "const": lsp.CompletionItemKind.Constant,
               "fn": lsp.CompletionItemKind.Function, "func": lsp.CompletionItemKind.Function,
               "binding": lsp.CompletionItemKind.Function, "array": lsp.CompletionItemKind.Function,
               "var": lsp.CompletionItemKind.Variable, "loop": lsp.CompletionItemKind.Variable,
               "let": lsp.CompletionItemKind.Variable, "rdom": lsp.CompletionItemKind.Variable,
               "fn-param": lsp.CompletionItemKind.Variable}
_IDENT_END = re.compile(r"[A-Za-z_]\w*$")


def _block_at(lines: list[str], line: int) -> str:
    """The top-level block the 1-based line is in: 'schedule', 'algorithm', 'fn' or ''."""
    for n in range(line, 0, -1):
        text = lines[n - 1] if n <= len(lines) else ""
        m = re.match(r"(schedule|algorithm|fn)\b", text)
        if m:
            return m.group(1)
        if n < line and re.match(r"(pipeline|input|output|param|const|use)\b", text):
            return ""
    return ""


def _open_call(before: str) -> tuple[str, str, int] | None:
    """Inside `NAME.directive(a, b, |`: (the text before '.directive', the directive, the
    argument index); None when the cursor is not in a directive's parentheses."""
    depth = 0
    for i in range(len(before) - 1, -1, -1):
        ch = before[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            if depth == 0:
                m = re.search(r"\.\s*([A-Za-z_]\w*)\s*$", before[:i])
                if not m:
                    return None
                inner = before[i + 1:]
                d, commas = 0, 0
                for c in inner:
                    d += c in "(["
                    d -= c in ")]"
                    commas += c == "," and d == 0
                return before[:m.start()], m.group(1), commas
            depth -= 1
    return None


def _line_loops(line_text: str) -> list[str]:
    """Names the directives on a (maybe half-typed) line create: `tile(x, y, xi, yi, ...)` -> xi, yi."""
    from hdsl.editor.directives import NEW_KIND, arg_kinds
    out = []
    for m in re.finditer(r"\.\s*([A-Za-z_]\w*)\s*\(([^()]*)\)", line_text):
        args = [a.strip() for a in m.group(2).split(",")] if m.group(2).strip() else []
        for kind, a in zip(arg_kinds(m.group(1), len(args)), args):
            if kind == NEW_KIND and re.fullmatch(r"[A-Za-z_]\w*", a):
                out.append(a)
        if m.group(1) in ("vectorize", "unroll", "parallel") and len(args) == 2 and re.fullmatch(r"\w+", args[0]):
            out.append(f"{args[0]}_i")
    return out


def completions(idx, lines: list[str], line: int, col: int) -> list[lsp.CompletionItem]:
    from hdsl.editor import directives, tokens
    from hdsl.frontend.elaborate import KEYWORDS, STDLIB_DIR
    from hdsl.schedule.record import SIGNATURES
    text = lines[line - 1] if 1 <= line <= len(lines) else ""
    before = text[:col - 1]
    prefix_m = _IDENT_END.search(before)
    stem = before[:prefix_m.start()] if prefix_m else before
    block = _block_at(lines, line)
    items: dict[str, lsp.CompletionItem] = {}

    def add(label, kind, detail=None, doc=None, sort="5"):
        if label not in items:
            items[label] = lsp.CompletionItem(
                label=label, kind=kind, detail=detail, sort_text=f"{sort}{label}",
                documentation=lsp.MarkupContent(lsp.MarkupKind.Markdown, doc) if doc else None)

    call = _open_call(before)
    dot = re.search(r"([A-Za-z_]\w*|[)\]])\s*\.\s*$", stem)
    if dot is not None:
        base = dot.group(1)
        sym = idx.func_symbol(base) if base not in ")]" else None
        if sym is not None and sym.kind == "input":
            for p in tokens.BUFFER_PROPERTIES:
                if p not in ("min", "max", "extent"):
                    add(p, lsp.CompletionItemKind.Property, "buffer property")
        elif sym is not None and sym.kind == "rdom":
            for p in "xyzw":
                add(p, lsp.CompletionItemKind.Field, "rdom dimension")
        elif block == "schedule":
            for d in sorted(SIGNATURES):
                add(d, lsp.CompletionItemKind.Method, directives.usage(d), directives.MEANING.get(d))
        else:
            add("iir", lsp.CompletionItemKind.Method, "f.iir(±x, lo..hi, feedforward, [feedback...])")
            if base in ")]":
                for p in ("min", "max", "extent"):
                    add(p, lsp.CompletionItemKind.Property, "dimension property")
        return list(items.values())
    if call is not None and block == "schedule":
        _, directive, argi = call
        kinds = directives.arg_kinds(directive, argi + 1)
        kind = kinds[argi] if argi < len(kinds) else "other"
        first = re.match(r"\s*([A-Za-z_]\w*)", text)
        fsym = idx.func_symbol(first.group(1)) if first else None
        if kind == "func":
            for name, s in idx.visible().items():
                if s.kind in ("func", "binding", "output"):
                    add(name, lsp.CompletionItemKind.Function, idx.info.get(name) or s.detail, sort="1")
            return list(items.values())
        if kind == "var_of":
            cm = re.search(r"\(\s*([A-Za-z_]\w*)\s*,[^,]*$", before)
            fsym = idx.func_symbol(cm.group(1)) if cm else fsym
        names = idx.loop_names(fsym) + _line_loops(text)
        for n in names:
            add(n, lsp.CompletionItemKind.Variable, f"loop of {fsym.name}" if fsym else "loop", sort="1")
        if directive in ("split", "tile", "vectorize", "unroll", "parallel", "gpu_tile") and kind == "int":
            from hdsl.schedule.record import TAILS
            for t in TAILS:
                add(t, lsp.CompletionItemKind.EnumMember, "tail strategy", sort="3")
        if kind in ("new", "int", "expr", "other"):
            for name, s in idx.visible().items():
                if s.kind in ("param", "const"):
                    add(name, _KIND_ITEMS[s.kind], s.detail, sort="2")
        return list(items.values())
    # anywhere else: the names in scope, then the language's words
    for name, s in idx.visible().items():
        if s.kind in _KIND_ITEMS:
            info = idx.info.get(name)
            add(name, _KIND_ITEMS[s.kind], info or s.detail, s.doc, sort="1")
    # local names declared above the cursor (vars, lets, rdoms, a fn's parameters)
    for o in idx.occurrences:
        if o.is_decl and o.span.line <= line and o.symbol.kind in ("var", "let", "rdom", "fn-param"):
            add(o.symbol.name, _KIND_ITEMS[o.symbol.kind], o.symbol.detail, sort="2")
    for t in tokens.TYPES:
        add(t, lsp.CompletionItemKind.TypeParameter, "element type / cast", sort="3")
    for t in tokens.SATURATING_CASTS + tokens.BUILTIN_FUNCTIONS + tokens.REDUCTIONS + tokens.BOUNDARY_CONDITIONS:
        add(t, lsp.CompletionItemKind.Function, "built-in", hover_word(t), sort="4")
    for path in sorted(STDLIB_DIR.glob("*.hl")):
        for m in re.finditer(r"^fn\s+([A-Za-z_]\w*)\s*\(([^)]*)\)", path.read_text(encoding="utf-8"), re.M):
            add(m.group(1), lsp.CompletionItemKind.Function, f"fn {m.group(1)}({m.group(2)})  (use {path.stem})",
                sort="4")
    for k in sorted(KEYWORDS):
        add(k, lsp.CompletionItemKind.Keyword, sort="6")
    return list(items.values())


# ---------------------------------------------------------------------- symbols
_SYMBOL_KINDS = {"pipeline": lsp.SymbolKind.Module, "input": lsp.SymbolKind.Variable,
                 "output": lsp.SymbolKind.Variable, "param": lsp.SymbolKind.Constant,
                 "const": lsp.SymbolKind.Constant, "fn": lsp.SymbolKind.Function, "func": lsp.SymbolKind.Function,
                 "binding": lsp.SymbolKind.Function, "array": lsp.SymbolKind.Array, "let": lsp.SymbolKind.Variable,
                 "rdom": lsp.SymbolKind.Variable, "schedule": lsp.SymbolKind.Namespace}


def document_symbols(idx, codec=None) -> list[lsp.DocumentSymbol]:
    from hdsl.frontend import ast

    def sym(s, children=()):
        rng = _span_range(s.decl, idx.lines, codec)
        sel = _span_range(s.span, idx.lines, codec)
        return lsp.DocumentSymbol(name=s.name, kind=_SYMBOL_KINDS.get(s.kind, lsp.SymbolKind.Variable), range=rng,
                                  selection_range=sel, detail=idx.info.get(s.name) or s.detail,
                                  children=list(children) or None)

    out = []
    algorithm = next((i for i in (idx.module.items if idx.module else []) if isinstance(i, ast.AlgorithmBlock)), None)
    for s in idx.top:
        if s.span.file != idx.filename:
            continue
        kids = [sym(c) for c in s.children if c.kind in _SYMBOL_KINDS and c.span.file == idx.filename]
        out.append(sym(s, kids))
    if algorithm is not None:
        funcs = [sym(s) for s in idx._func_syms.values()]
        rng = _span_range(algorithm.span, idx.lines, codec)
        kw = lsp.Range(rng.start, lsp.Position(rng.start.line, rng.start.character + len("algorithm")))
        out.append(lsp.DocumentSymbol(name="algorithm", kind=lsp.SymbolKind.Namespace, range=rng,
                                      selection_range=kw, children=funcs or None))
    out.sort(key=lambda d: (d.range.start.line, d.range.start.character))
    return out


# ---------------------------------------------------------------------- the server
def make_server() -> LanguageServer:
    from hdsl.editor.index import DocIndex
    server = LanguageServer("hdsl", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Full)
    cache: dict[str, tuple[int | None, str, DocIndex]] = {}

    def codec():
        return server.workspace.position_codec

    def index(uri: str):
        doc = server.workspace.get_text_document(uri)
        hit = cache.get(uri)
        if hit is not None and hit[0] == doc.version and hit[1] == doc.source:
            return doc, hit[2]
        try:
            idx = DocIndex(doc.source, _path(uri))
        except Exception:          # never take the editor down over one document
            idx = DocIndex("", _path(uri))
        cache[uri] = (doc.version, doc.source, idx)
        return doc, idx

    def where(uri: str, pos: lsp.Position):
        doc, idx = index(uri)
        line, col = _column(idx.lines, pos, codec())
        return idx, line, col

    def location(idx, span, doc_uri: str) -> lsp.Location:
        if span.file == idx.filename:
            return lsp.Location(uri=doc_uri, range=_span_range(span, idx.lines, codec()))
        return lsp.Location(uri=Path(span.file).resolve().as_uri(),
                            range=_span_range(span, _file_lines(span.file), codec()))

    def publish(uri: str) -> None:
        doc = server.workspace.get_text_document(uri)
        server.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, version=doc.version,
                                         diagnostics=diagnostics(doc.source, _path(uri), codec())))

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: lsp.DidOpenTextDocumentParams) -> None:
        publish(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: lsp.DidChangeTextDocumentParams) -> None:
        publish(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: lsp.DidCloseTextDocumentParams) -> None:
        cache.pop(params.text_document.uri, None)
        server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=params.text_document.uri,
                                                                              diagnostics=[]))

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(params: lsp.HoverParams) -> lsp.Hover | None:
        idx, line, col = where(params.text_document.uri, params.position)
        occ = idx.occurrence_at(line, col)
        if occ is not None:
            text, span = hover_symbol(idx, occ.symbol), occ.span
        else:
            attr = idx.attr_at(line, col)
            word_span = attr.span if attr is not None else _word_span(idx, line, col)
            if word_span is None:
                return None
            word = idx.lines[line - 1][word_span.col - 1:word_span.end_col - 1]
            text, span = hover_word(word, attr), word_span
        if not text:
            return None
        return lsp.Hover(contents=lsp.MarkupContent(lsp.MarkupKind.Markdown, text),
                         range=_span_range(span, idx.lines, codec()))

    @server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    def definition(params: lsp.DefinitionParams) -> list[lsp.Location] | None:
        idx, line, col = where(params.text_document.uri, params.position)
        occ = idx.occurrence_at(line, col)
        if occ is not None:
            return [location(idx, occ.symbol.span, params.text_document.uri)]
        attr = idx.attr_at(line, col)
        if attr is not None and attr.base is None:       # `use filters`: the module's file
            from hdsl.frontend.elaborate import STDLIB_DIR
            for path in [*idx.used_modules, str(STDLIB_DIR / f"{attr.name}.hl")]:
                if Path(path).stem == Path(attr.name).stem and Path(path).is_file():
                    start = lsp.Position(0, 0)
                    return [lsp.Location(uri=Path(path).resolve().as_uri(), range=lsp.Range(start, start))]
        return None

    @server.feature(lsp.TEXT_DOCUMENT_REFERENCES)
    def references(params: lsp.ReferenceParams) -> list[lsp.Location] | None:
        idx, line, col = where(params.text_document.uri, params.position)
        occ = idx.occurrence_at(line, col)
        if occ is None:
            return None
        out = []
        if params.context.include_declaration and occ.symbol.span.file != idx.filename:
            out.append(location(idx, occ.symbol.span, params.text_document.uri))
        for o in idx.references(occ.symbol):
            if o.is_decl and not params.context.include_declaration:
                continue
            out.append(lsp.Location(uri=params.text_document.uri, range=_span_range(o.span, idx.lines, codec())))
        return out

    @server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def symbols(params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
        _, idx = index(params.text_document.uri)
        return document_symbols(idx, codec())

    @server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=["."]))
    def complete(params: lsp.CompletionParams) -> lsp.CompletionList:
        idx, line, col = where(params.text_document.uri, params.position)
        return lsp.CompletionList(is_incomplete=False, items=completions(idx, idx.lines, line, col))

    @server.feature(lsp.TEXT_DOCUMENT_FORMATTING)
    def formatting(params: lsp.DocumentFormattingParams) -> list[lsp.TextEdit] | None:
        from hdsl.editor.fmt import format_source
        doc = server.workspace.get_text_document(params.text_document.uri)
        try:
            new = format_source(doc.source, _path(params.text_document.uri))
        except HdslError:
            return None           # a file that does not parse is left as it is (its errors are shown)
        if new == doc.source:
            return []
        lines = doc.source.split("\n")
        end = _position(lines, len(lines), len(lines[-1]) + 1, codec())
        return [lsp.TextEdit(range=lsp.Range(lsp.Position(0, 0), end), new_text=new)]

    return server


def _word_span(idx, line: int, col: int) -> Span | None:
    text = idx.lines[line - 1] if 1 <= line <= len(idx.lines) else ""
    for m in re.finditer(r"[A-Za-z_]\w*", text):
        if m.start() + 1 <= col <= m.end():
            return Span(idx.filename, line, m.start() + 1, line, m.end() + 1)
    return None


def main() -> int:
    make_server().start_io()
    return 0
