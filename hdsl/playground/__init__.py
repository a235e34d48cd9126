"""`hdsl playground`: write, run and inspect hdsl programs in a browser (docs/playground.md).

server.py serves the page and a JSON API (Starlette on uvicorn, the `playground` extra);
sandbox.py runs every check, compile and run in a worker process with limits; jobs.py is what
those workers do. The page's script and CodeMirror 6 are bundled from playground/web (npm,
esbuild) into static/editor.js, package data built by `make playground-bundle`.
"""
