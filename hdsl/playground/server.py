"""The playground's web server (Starlette on uvicorn): the page, its editor bundle, and a small
JSON API whose every job runs in a limited worker process (hdsl/playground/sandbox.py).

    GET  /                       the page
    GET  /static/...             editor.js (built from playground/web), playground.css
    GET  /api/meta               targets, passes, examples, stdlib modules, sample images, limits
    GET  /api/tokens             the editor's token rules (hdsl/editor/tokens.py)
    GET  /api/source/KIND/NAME   an example's or a stdlib module's text
    GET  /api/image/NAME         a sample image as the page draws it (PNG)
    POST /api/check              {source} -> the checker's errors, or the pipeline's declarations
    POST /api/run                {source, target, schedule, inputs, params} -> outputs as PNGs, times
    POST /api/view               {source, target, schedule, kind, after} -> a compiled form
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path

from hdsl.playground.sandbox import Busy, Folders, Limits, Pool

STATIC = Path(__file__).resolve().parent / "static"
BUNDLE = STATIC / "editor.js"
MAX_BODY = 12 << 20             # a request's bytes (an uploaded image travels as base64)
PACKAGED_EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def default_examples() -> Path | None:
    """The examples hdsl carries (hdsl/examples: in a checkout a link to examples/, in an
    installed wheel a copy of its programs and sample images)."""
    return PACKAGED_EXAMPLES if (PACKAGED_EXAMPLES / "blur.hl").is_file() else None


def token_rules() -> list[dict]:
    """The editor's tokenizer, from the one description every editor grammar is built from
    (hdsl/editor/tokens.py): each rule's regular expression and, per group, the CodeMirror
    highlighting tag of its TextMate scope (None: whitespace)."""
    from hdsl.editor.tokens import rules
    return [{"name": r.name, "regex": r.regex, "tags": [scope_tag(s) for s in r.scopes]} for r in rules()]


# TextMate scope prefix -> @lezer/highlight tag ("modifier(tag)" applies tags.modifier); the
# first prefix that matches wins
SCOPE_TAGS = (
    ("comment", "comment"), ("string", "string"), ("invalid", "invalid"),
    ("keyword.declaration", "definitionKeyword"), ("keyword.control", "controlKeyword"),
    ("keyword.operator", "operator"), ("constant.language", "bool"), ("constant.numeric", "number"),
    ("variable.other.declaration", "definition(variableName)"),
    ("variable.other.constant", "constant(variableName)"),
    ("variable.other.member", "propertyName"), ("variable", "variableName"),
    ("entity.name.function", "function(definition(variableName))"), ("entity.name.namespace", "namespace"),
    ("entity.name.section", "labelName"), ("support.type", "typeName"),
    ("support.function.directive", "function(propertyName)"), ("support.variable", "propertyName"),
    ("support.function", "standard(function(variableName))"), ("punctuation", "punctuation"),
)


def scope_tag(scope: str | None) -> str | None:
    if scope is None:
        return None
    for prefix, tag in SCOPE_TAGS:
        if scope == prefix or scope.startswith(prefix + "."):
            return tag
    raise LookupError(f"no highlighting tag for the scope '{scope}' (add one to SCOPE_TAGS)")


def create_app(examples: Path | None = None, images: Path | None = None, limits: Limits = Limits(),
               workers: int = 2, queue: int = 32):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from hdsl.lower.lower import PASSES
    from hdsl.playground import jobs
    from hdsl.frontend.elaborate import STDLIB_DIR

    if images is None and examples is not None and (examples / "images").is_dir():
        images = examples / "images"
    pool = Pool(Folders(examples, images), limits, workers, queue)
    samples = jobs.sample_images(images)
    sources = {"example": {p.stem: p for p in sorted(examples.glob("*.hl"))} if examples else {},
               "stdlib": {p.stem: p for p in sorted(STDLIB_DIR.glob("*.hl"))},
               "starter": {"rings": STATIC / "starter.hl"}}       # (needs no input: for a wheel)
    meta = {"targets": jobs.targets(), "passes": list(PASSES), "examples": list(sources["example"]),
            "stdlib": list(sources["stdlib"]), "starter": list(sources["starter"]), "images": samples,
            "limits": {"cpu_s": limits.cpu_s, "wall_s": limits.wall_s, "memory_mb": limits.memory_mb},
            "views": ["stmt", "html", "llvm", "asm", "ptx", "glsl"]}
    tokens = token_rules()

    async def page(request: Request):
        if not BUNDLE.is_file():
            return PlainTextResponse(missing_bundle_message(), status_code=500)
        return FileResponse(STATIC / "index.html")

    async def get_meta(request: Request):
        return JSONResponse(meta)

    async def get_tokens(request: Request):
        return JSONResponse(tokens)

    async def get_source(request: Request):
        path = sources.get(request.path_params["kind"], {}).get(request.path_params["name"])
        if path is None:
            return PlainTextResponse("no such module", status_code=404)
        return PlainTextResponse(path.read_text())

    async def get_image(request: Request):
        name = request.path_params["name"]
        if name not in {s["name"] for s in samples}:
            return PlainTextResponse("no such image", status_code=404)
        from hdsl.runtime.images import load_image
        url = jobs.png_data_url(load_image(images / name))
        import base64
        return Response(base64.b64decode(url.split(",", 1)[1]), media_type="image/png")

    def job(kind):
        async def endpoint(request: Request):
            body = await request.body()
            if len(body) > MAX_BODY:
                return JSONResponse({"ok": False, "error": f"the request is larger than {MAX_BODY >> 20} MiB"},
                                    status_code=413)
            try:
                req = json.loads(body)
                if not isinstance(req, dict) or not isinstance(req.get("source"), str):
                    raise ValueError
            except ValueError:
                return JSONResponse({"ok": False, "error": "the request should be JSON with a 'source'"},
                                    status_code=400)
            try:
                answer = await pool.submit(kind, req)
            except Busy:
                return JSONResponse({"ok": False, "busy": True,
                                     "error": "the playground is busy (too many requests waiting); try again"},
                                    status_code=503)
            return JSONResponse(answer)
        return endpoint

    @contextlib.asynccontextmanager
    async def lifespan(app):
        # start the worker server (imports hdsl once) before the first request needs it
        await pool.submit("check", {"source": "pipeline warm\noutput o: u8[1]\nalgorithm { o(x) = u8(x) }\n"})
        yield

    routes = [
        Route("/", page),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Route("/api/meta", get_meta),
        Route("/api/tokens", get_tokens),
        Route("/api/source/{kind}/{name}", get_source),
        Route("/api/image/{name}", get_image),
        Route("/api/check", job("check"), methods=["POST"]),
        Route("/api/run", job("run"), methods=["POST"]),
        Route("/api/view", job("view"), methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.pool = pool
    return app


def missing_bundle_message() -> str:
    return (f"the playground's editor bundle {BUNDLE} is not built: run `make playground` in the "
            "repository (it needs Node and npm), or install hdsl from a wheel built by `make wheel`")


def serve(host: str = "127.0.0.1", port: int = 8000, examples: Path | None = None, limits: Limits = Limits(),
          workers: int = 2, queue: int = 32) -> None:
    import uvicorn
    app = create_app(examples, None, limits, workers, queue)
    print(f"hdsl playground: http://{host}:{port}/ (Ctrl-C stops it)", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
