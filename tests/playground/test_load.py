"""100 runs sent at once on loopback: every one gets an answer (a result, or 'busy' once the
bounded queue is full: 2 workers and 32 waiting), within a bounded time, every result is the
reference evaluator's, and the server still serves the page afterwards."""
from __future__ import annotations

import base64
import io
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from PIL import Image

import hdsl
from hdsl.runtime.images import load_image
from tests.playground.conftest import ROOT
from tests.playground.test_api import INVERT

REQUESTS = 100


def test_a_hundred_concurrent_runs_each_get_an_answer(server):
    body = {"source": INVERT, "target": "host", "params": {"k": 5}, "inputs": {"img": {"sample": "gray8.png"}}}
    server.post("/api/run", body)                 # (compiled once: the rest come from the cache)
    t0 = time.monotonic()
    with ThreadPoolExecutor(REQUESTS) as ex:
        answers = list(ex.map(lambda _: server.post("/api/run", body, timeout=150), range(REQUESTS)))
    elapsed = time.monotonic() - t0
    done = [a for status, a in answers if status == 200 and a.get("ok")]
    busy = [a for status, a in answers if status == 503 and a.get("busy")]
    assert len(done) + len(busy) == REQUESTS, [a for a in answers if a[1] not in done + busy][:3]
    assert busy and "busy" in busy[0]["error"], "the queue should be bounded"
    assert len(done) >= 34, "the 2 running and 32 queued should all be answered with results"
    assert elapsed < 150
    expected = hdsl.loads(INVERT)(img=load_image(ROOT / "examples" / "images" / "gray8.png"), k=5)
    for a in done:
        png = a["outputs"][0]["png"].split(",", 1)[1]
        assert np.array_equal(np.asarray(Image.open(io.BytesIO(base64.b64decode(png))))[:, :, 0], expected)
    status, page = server.get("/")
    assert status == 200 and b"hdsl playground" in page
    _, a = server.post("/api/run", body)
    assert a["ok"]
