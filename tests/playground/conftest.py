"""A real playground server (`hdsl playground` on a free loopback port, as a user starts it)
and a headless Chromium driven by Selenium with Debian's chromedriver.

Without the editor bundle (built by `make playground-bundle`, needs Node) or without Chromium
(`make browser`) the tests that need them skip on a developer's machine; under CI, where
`make test` provides both, they fail instead (a skip there would hide them)."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "hdsl" / "playground" / "static" / "editor.js"
OUT = ROOT / "out"              # test artifacts (the page's screenshot)
CPU_SECONDS = 3                 # the test server's limits: small, so that hostile programs end soon
WALL_SECONDS = 8
MEMORY_MB = 2048


def missing(what: str, how: str):
    if os.environ.get("CI"):
        pytest.fail(f"{what} is needed for the playground's tests, and CI must run them ({how})")
    pytest.skip(f"{what} is needed ({how})")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, url: str, proc: subprocess.Popen):
        self.url, self.proc = url, proc

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def post(self, path: str, body: dict, timeout: float = 120) -> tuple[int, dict]:
        req = urllib.request.Request(self.url + path, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())


@pytest.fixture(scope="session")
def server():
    if not BUNDLE.is_file():
        missing("the editor bundle hdsl/playground/static/editor.js", "make playground-bundle")
    port = _free_port()
    cmd = [sys.executable, "-m", "hdsl.cli", "playground", "--port", str(port),
           "--cpu-seconds", str(CPU_SECONDS), "--wall-seconds", str(WALL_SECONDS), "--memory-mb", str(MEMORY_MB)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    s = Server(f"http://127.0.0.1:{port}", proc)
    deadline = time.monotonic() + 90
    while True:
        try:
            if s.get("/api/meta")[0] == 200:
                break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the playground did not start: {proc.stdout.read()}")
        time.sleep(0.2)
    yield s
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="session")
def browser():
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        missing("Debian's chromium and chromium-driver", "make browser")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,900", "--force-color-profile=srgb"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_script_timeout(60)
    yield driver
    driver.quit()
