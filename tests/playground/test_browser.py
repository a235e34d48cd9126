"""The playground in headless Chromium, as a person uses it: type a program, see the checker's
error placed under the right characters, fix it, run it and read the output canvas's pixels
back (equal to the reference evaluator's values), move a param's slider (the page runs again),
open the loop-nest view (what `hdsl lower` prints), and follow a share link to the same
program. The page's screenshot is kept in out/playground.png.

One browser session walks through it in order (each step needs the one before), which keeps
the test to a few seconds beyond the server's compiles."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import hdsl
from hdsl.runtime.images import load_image
from tests.playground.conftest import OUT, ROOT

TYPED = [                      # typed line by line (the editor keeps the previous line's indent)
    "pipeline darken",
    "input img: u8[2]",
    "output out: u8[2]",
    "param k: i32 = 10",
    "algorithm {",
    "out(x, y) = u8(clamp(i32(img(x, y)) - k, 0, 255)) + oops",
    "}",
]
PROGRAM = "\n".join(TYPED).replace(" + oops", "") + "\n"


def wait(driver, condition, what: str, timeout: float = 60):
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition(d), what)


def js(driver, script: str, *args):
    return driver.execute_script(script, *args)


def canvas_pixels(driver, canvas_id: str) -> np.ndarray:
    w, h, data = js(driver, """
        const c = document.getElementById(arguments[0]);
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let s = '';
        for (let i = 0; i < d.length; i += 0x8000) s += String.fromCharCode.apply(null, d.subarray(i, i + 0x8000));
        return [c.width, c.height, btoa(s)];""", canvas_id)
    import base64
    return np.frombuffer(base64.b64decode(data), np.uint8).reshape(h, w, 4)


def editor_text(driver) -> str:
    return js(driver, "return window.hdslPlayground.view.state.doc.toString()")


def runs(driver) -> int:
    return int(js(driver, "return document.getElementById('outputs').dataset.runs || '0'"))


def test_type_check_fix_run_slide_view_and_share(server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    d = browser
    d.get(server.url + "/")
    wait(d, lambda d: js(d, "return document.body.dataset.ready") == "1", "the page starts")

    # type the program over the example the page opened
    content = d.find_element(By.CSS_SELECTOR, ".cm-content")
    content.click()
    content.send_keys(Keys.CONTROL, "a")
    content.send_keys(Keys.DELETE)
    content.send_keys("\n".join(TYPED))
    assert editor_text(d) == "\n".join(TYPED)

    # the checker's error, placed under 'oops' (line 6) in the editor and listed below it
    marked = wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, ".cm-lintRange-error"), "an error mark")
    assert [m.text for m in marked] == ["oops"]
    listed = wait(d, lambda d: d.find_element(By.ID, "diagnostics").text, "the error list")
    col = TYPED[5].index("oops") + 1
    assert listed.startswith(f"playground.hl:6:{col}: error: 'oops' is not defined")

    # fix it: to the end of line 6, delete " + oops"
    content.send_keys(Keys.CONTROL, Keys.END)
    content.send_keys(Keys.UP, Keys.END, *[Keys.BACKSPACE] * len(" + oops"))
    assert editor_text(d) == PROGRAM.rstrip("\n")
    wait(d, lambda d: d.find_element(By.ID, "check-status").text == "no errors", "the fixed program checks")
    assert not d.find_elements(By.CSS_SELECTOR, ".cm-lintRange-error")

    # highlighting from the token rules: 'pipeline' a keyword, 'clamp' a built-in, 10 a number
    classes = {s.text: s.get_attribute("class") for s in d.find_elements(By.CSS_SELECTOR, ".cm-line span")}
    assert "tok-keyword" in classes["pipeline"] and "tok-number" in classes["10"]
    assert "tok-builtin" in classes["clamp"] and "tok-builtin" not in classes["img"]

    # the page chose a u8[2] sample for img; run it on the host and read the canvas back
    assert d.find_element(By.ID, "input-img").get_attribute("value") == "gray8.png"
    d.find_element(By.ID, "run").click()
    wait(d, lambda d: runs(d) >= 1, "the first run", 120)
    assert re.match(r"host: compile [\d.]+ ms.*, run [\d.]+ ms", d.find_element(By.ID, "run-status").text)
    img = load_image(ROOT / "examples" / "images" / "gray8.png")
    p = hdsl.loads(PROGRAM)
    shown = canvas_pixels(d, "output-out")
    expected = p(img=img, k=10)
    assert np.array_equal(shown[:, :, 0], expected) and np.array_equal(shown[:, :, 1], expected)
    assert (shown[:, :, 3] == 255).all()

    # move the param's slider two steps: the page runs again with k = 12
    slider = d.find_element(By.ID, "param-k")
    assert slider.get_attribute("value") == "10"
    slider.send_keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT)
    wait(d, lambda d: d.find_element(By.ID, "param-k-value").get_attribute("value") == "12", "k = 12")
    wait(d, lambda d: np.array_equal(canvas_pixels(d, "output-out")[:, :, 0], p(img=img, k=12)),
         "the output for k = 12", 120)

    # the loop nest, as `hdsl lower` prints it
    d.find_element(By.ID, "view-show").click()
    wait(d, lambda d: "for out.s0.y" in d.find_element(By.ID, "view-text").text, "the loop nest", 120)
    path = OUT / "playground-test.hl"
    OUT.mkdir(exist_ok=True)
    path.write_text(PROGRAM)
    cli = subprocess.run([sys.executable, "-m", "hdsl.cli", "lower", str(path)], capture_output=True,
                         text=True, check=True).stdout
    assert js(d, "return document.getElementById('view-text').textContent") == cli
    d.save_screenshot(str(OUT / "playground.png"))

    # a share link opens the same program
    d.find_element(By.ID, "share").click()
    link = d.find_element(By.ID, "share-link").get_attribute("value")
    assert link.startswith(server.url + "/#code=")
    d.get("about:blank")
    d.get(link)
    wait(d, lambda d: js(d, "return document.body.dataset.ready") == "1", "the shared page starts")
    assert editor_text(d) == PROGRAM.rstrip("\n")
    wait(d, lambda d: d.find_element(By.ID, "check-status").text == "no errors", "the shared program checks")


def test_the_editor_tokenizes_as_the_python_rules_do(server, browser):
    """The page's tokenizer (JavaScript regular expressions) against Python's `re` running the
    same rules (the ones TextMate and Pygments are built from), on every example and stdlib line."""
    from hdsl.playground.server import token_rules
    rules = token_rules()
    compiled = [(re.compile(r["regex"]), r["tags"]) for r in rules]

    def python_tokens(line: str):
        out, pos = [], 0
        while pos < len(line):
            if line[pos].isspace():
                pos += 1
                continue
            for regex, tags in compiled:
                m = regex.match(line, pos)
                if m and m.end() > pos:
                    if len(tags) == 1:
                        parts = [(m.end() - pos, tags[0])]
                    else:
                        parts = [(len(m.group(i + 1) or ""), t) for i, t in enumerate(tags)]
                    for n, t in parts:
                        if n:
                            out.append([pos, pos + n, t])
                            pos += n
                    break
            else:
                out.append([pos, pos + 1, None])
                pos += 1
        return out

    lines = sorted({line for path in [*(ROOT / "examples").glob("*.hl"), *(ROOT / "hdsl" / "stdlib").glob("*.hl")]
                    for line in path.read_text().split("\n") if line.strip()})
    d = browser
    if not d.current_url.startswith(server.url):
        d.get(server.url + "/")
    wait(d, lambda d: js(d, "return document.body.dataset.ready") == "1", "the page starts")
    from_js = js(d, "return arguments[1].map((l) => hdslEditor.tokenizeLine(arguments[0], l))", rules, lines)
    assert len(from_js) == len(lines) > 500
    for line, tokens in zip(lines, from_js):
        assert tokens == python_tokens(line), line


def test_an_uploaded_image_is_run(server, browser, tmp_path):
    """A link opens a program; 'upload…' takes a PNG of the user's; Run draws the evaluator's
    output for it (and the input as uploaded)."""
    import base64
    from PIL import Image
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    rng = np.random.default_rng(7)
    mine = rng.integers(0, 256, (30, 40), dtype=np.uint8)
    path = tmp_path / "mine.png"
    Image.fromarray(mine).save(path)
    d = browser
    code = base64.urlsafe_b64encode(PROGRAM.encode()).decode().rstrip("=")
    d.get("about:blank")
    d.get(f"{server.url}/#code={code}&target=interp")
    wait(d, lambda d: js(d, "return document.body.dataset.ready") == "1", "the page starts")
    wait(d, lambda d: d.find_elements(By.ID, "input-img"), "the input's choice")
    Select(d.find_element(By.ID, "input-img")).select_by_value("__upload__")
    d.find_element(By.ID, "upload-img").send_keys(str(path))
    wait(d, lambda d: js(d, "return !!window.hdslPlayground.state.inputs.img.upload"), "the upload is read")
    d.find_element(By.ID, "run").click()
    wait(d, lambda d: runs(d) >= 1, "the run", 120)
    assert d.find_element(By.ID, "run-status").text.startswith("interp: compile")
    shown = canvas_pixels(d, "output-out")
    assert shown.shape == (30, 40, 4)
    assert np.array_equal(shown[:, :, 0], hdsl.loads(PROGRAM)(img=mine, k=10))
    wait(d, lambda d: js(d, "return document.getElementById('input-canvas').width") == 40, "the input drawn")
    assert np.array_equal(canvas_pixels(d, "input-canvas")[:, :, 0], mine)
