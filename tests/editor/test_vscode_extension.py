"""The VS Code extension's language configuration and snippets (editors/vscode/)."""
from __future__ import annotations

import json
import re

import pytest

from hdsl.cli import lower_schedules
from hdsl.frontend.elaborate import check_source
from hdsl.schedule.record import SIGNATURES
from tests.editor.conftest import ROOT, VSCODE, source_files

CONFIG = json.loads((VSCODE / "language-configuration.json").read_text())
SNIPPETS = json.loads((VSCODE / "snippets" / "hdsl.code-snippets").read_text())


def expand(snippet: dict) -> str:
    """The text VS Code inserts when every placeholder keeps its default; tabs as 4 spaces."""
    body = snippet["body"]
    text = "\n".join(body) if isinstance(body, list) else body
    text = re.sub(r"\$\{\d+:([^}]*)\}", r"\1", text)
    return re.sub(r"\$\d+", "", text).replace("\t", "    ")


def test_comments_and_brackets():
    assert CONFIG["comments"] == {"lineComment": "#"}
    assert {tuple(p) for p in CONFIG["brackets"]} == {("{", "}"), ("[", "]"), ("(", ")")}
    assert {p["open"] for p in CONFIG["autoClosingPairs"]} == {"{", "[", "(", '"'}


@pytest.mark.parametrize("path", source_files(), ids=lambda p: p.name)
def test_blocks_fold(path):
    """Every algorithm, schedule and fn block's first line starts a fold and its closing
    brace ends one (the markers are JavaScript regular expressions; these use nothing
    Python reads differently)."""
    start = re.compile(CONFIG["folding"]["markers"]["start"])
    end = re.compile(CONFIG["folding"]["markers"]["end"])
    lines = path.read_text().split("\n")
    opening = [n for n, line in enumerate(lines) if re.match(r"(algorithm|schedule|fn)\b.*\{", line)]
    assert all(start.match(lines[n]) for n in opening)
    for n in opening:   # the block's own closing brace, at the start of a line
        assert any(end.match(line) for line in lines[n + 1:])
    assert not any(start.match(line) for line in lines if line.lstrip().startswith("#"))


def test_the_pipeline_snippet_is_a_valid_program():
    text = expand(SNIPPETS["pipeline"]) + "\n"
    assert check_source(text, "snippet.hl") is not None
    assert text.startswith("pipeline name\n")


@pytest.mark.parametrize("name", ["tile and vectorize", "compute at", "split"])
def test_schedule_snippets_are_valid_for_the_blur(name):
    """Each schedule snippet, with its defaults, checks and lowers in a schedule of examples/blur.hl."""
    blur = (ROOT / "examples" / "blur.hl").read_text()
    algorithm = blur[:blur.index("schedule {")]
    text = algorithm + "schedule {\n    " + expand(SNIPPETS[name]) + "\n}\n"
    p = check_source(text, f"{name}.hl")
    lower_schedules(p)


def test_the_gpu_snippet_is_a_cuda_schedule():
    blur = (ROOT / "examples" / "blur.hl").read_text().split("\nschedule cuda")[0]     # (its own cuda block out)
    p = check_source(blur + "\n" + expand(SNIPPETS["gpu tile"]) + "\n", "gpu.hl")
    assert "cuda" in p.schedules


def test_snippets_use_only_directives_the_compiler_knows():
    for snippet in SNIPPETS.values():
        for directive in re.findall(r"\.([a-z_]+)\(", expand(snippet)):
            assert directive in SIGNATURES, directive


def test_the_extension_starts_the_language_server():
    """package.json's entry point exists, runs on opening an .hl file, and starts `hdsl lsp`
    (the command and argument it spawns; the client itself is vscode-languageclient)."""
    pkg = json.loads((VSCODE / "package.json").read_text())
    assert pkg["activationEvents"] == ["onLanguage:hdsl"]
    main = (VSCODE / pkg["main"]).read_text()
    assert "args: ['lsp']" in main and "config.get('server.path', 'hdsl')" in main
    assert pkg["contributes"]["configuration"]["properties"]["hdsl.server.path"]["default"] == "hdsl"
    assert "vscode-languageclient" in pkg["dependencies"]
    assert pkg["contributes"]["snippets"][0]["path"] == "./snippets/hdsl.code-snippets"
    assert (VSCODE / pkg["contributes"]["languages"][0]["configuration"]).exists()


@pytest.mark.slow
def test_the_vsix_builds(tmp_path):
    """`make vsix`'s command (npx @vscode/vsce) packs the grammar, the configuration, the
    snippets and the language client, and leaves the test-only packages out."""
    import shutil
    import subprocess
    import zipfile
    if shutil.which("npx") is None or not (VSCODE / "node_modules" / "vscode-languageclient").exists():
        pytest.skip("needs npx and `npm ci` in editors/vscode (make test does it)")
    vsce = re.search(r"^VSCE := (\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    out = tmp_path / "hdsl.vsix"
    subprocess.run(["npx", "--yes", vsce, "package", "--skip-license", "--allow-missing-repository", "-o", str(out)],
                   cwd=VSCODE, check=True, capture_output=True)
    names = set(zipfile.ZipFile(out).namelist())
    assert {"extension/package.json", "extension/extension.js", "extension/syntaxes/hdsl.tmLanguage.json",
            "extension/language-configuration.json", "extension/snippets/hdsl.code-snippets",
            "extension/node_modules/vscode-languageclient/node.js"} <= names
    assert not any("vscode-textmate" in n or n.startswith("extension/test/") for n in names)
