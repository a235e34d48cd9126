"""`hdsl lsp`, driven over stdio with LSP JSON-RPC messages as an editor sends them."""
from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading

import pytest

from tests.editor.conftest import ROOT

pytest.importorskip("pygls")

TIMEOUT = 60


class Client:
    """A minimal LSP client: Content-Length framed JSON-RPC over the server's stdin/stdout."""

    def __init__(self, cwd):
        self.proc = subprocess.Popen([sys.executable, "-m", "hdsl.cli", "lsp"], cwd=cwd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.messages: queue.Queue = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        out = self.proc.stdout
        while True:
            headers = {}
            while (line := out.readline()) not in (b"\r\n", b""):
                key, _, value = line.decode().partition(":")
                headers[key.strip().lower()] = value.strip()
            if not headers:
                return
            self.messages.put(json.loads(out.read(int(headers["content-length"]))))

    def send(self, method, params, *, request=False):
        msg = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            msg["id"] = self.next_id
        body = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        return msg.get("id")

    def wait(self, predicate):
        while True:
            msg = self.messages.get(timeout=TIMEOUT)
            if predicate(msg):
                return msg

    def request(self, method, params):
        id_ = self.send(method, params, request=True)
        return self.wait(lambda m: m.get("id") == id_ and "method" not in m)

    def diagnostics(self, uri):
        return self.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                         and m["params"]["uri"] == uri)["params"]["diagnostics"]


@pytest.fixture
def client(tmp_path):
    c = Client(tmp_path)
    init = c.request("initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}})
    assert init["result"]["serverInfo"]["name"] == "hdsl"
    assert init["result"]["capabilities"]["textDocumentSync"]["change"] == 1   # full text on each change
    c.send("initialized", {})
    yield c
    if c.proc.poll() is None:
        c.proc.kill()
    c.proc.wait()


BLUR = (ROOT / "examples" / "blur.hl").read_text()


def test_diagnostics_as_you_type(client, tmp_path):
    """Open a file with a misspelt Func: the checker's error with its range and hint; fix it
    with a change: no diagnostics; then shut down cleanly."""
    uri = (tmp_path / "blur.hl").as_uri()
    broken = BLUR.replace("blur_x(x, y + 1)", "blur_y(x, y + 1)")
    client.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "hdsl", "version": 1,
                                                          "text": broken}})
    (d,) = client.diagnostics(uri)
    line = broken.split("\n").index(next(l for l in broken.split("\n") if "blur_y" in l))
    col = broken.split("\n")[line].index("blur_y")
    assert d["range"] == {"start": {"line": line, "character": col}, "end": {"line": line, "character": col + 6}}
    assert d["message"].startswith("'blur_y' is not defined; did you mean 'blur_x'?")
    assert d["severity"] == 1 and d["source"] == "hdsl"

    client.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                           "contentChanges": [{"text": BLUR}]})
    assert client.diagnostics(uri) == []

    assert client.request("shutdown", None)["result"] is None
    client.send("exit", None)
    assert client.proc.wait(timeout=TIMEOUT) == 0


def test_every_error_and_its_hint(client, tmp_path):
    """Two errors in one file give (at least) two diagnostics, each at its name; a hint is part of the message."""
    uri = (tmp_path / "two.hl").as_uri()
    text = BLUR.replace("vectorize(xi, 16)", "vectorise(xi, 16)").replace("(x - 1, y)", "(x - 1, q)")
    client.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "hdsl", "version": 1,
                                                          "text": text}})
    diags = client.diagnostics(uri)
    lines = text.split("\n")
    spans = [lines[d["range"]["start"]["line"]][d["range"]["start"]["character"]:d["range"]["end"]["character"]]
             for d in diags]
    assert {"q", "vectorise"} <= set(spans), diags
    assert any("\nhint: " in d["message"] for d in diags)


def test_a_syntax_error(client, tmp_path):
    uri = (tmp_path / "syntax.hl").as_uri()
    client.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "hdsl", "version": 1,
                                                          "text": "pipeline p\ninput img: u8[2]\nalgorithm {\n"
                                                                  "    out(x, y) = img(x, y) +\n}\n"}})
    (d,) = client.diagnostics(uri)
    # the end of line 4 (0-based 3), after the '+' at column 27 (0-based 26)
    assert d["range"] == {"start": {"line": 3, "character": 27}, "end": {"line": 3, "character": 28}}
    assert d["message"] == "unexpected end of line\nhint: an expression is missing after '+'"


def test_without_pygls_the_cli_says_what_to_install(monkeypatch, capsys):
    from hdsl.cli import main
    monkeypatch.setitem(sys.modules, "hdsl.editor.lsp", None)   # as if pygls were missing
    assert main(["lsp"]) == 1
    err = capsys.readouterr().err
    assert "hdsl lsp needs the language server library" in err and "pip install 'hdsl[lsp]'" in err
    assert "Traceback" not in err
