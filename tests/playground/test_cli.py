"""`hdsl playground`'s own errors: said in CLI terms, before any server starts."""
from __future__ import annotations

from hdsl.cli import main


def test_a_missing_bundle_says_how_to_build_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("hdsl.playground.server.BUNDLE", tmp_path / "editor.js")
    assert main(["playground", "--port", "1"]) == 1
    err = capsys.readouterr().err
    assert "editor bundle" in err and "is not built: run `make playground`" in err


def test_an_examples_folder_that_is_not_there(capsys, tmp_path):
    from hdsl.playground.server import BUNDLE
    if not BUNDLE.is_file():                   # (the bundle is checked first)
        from tests.playground.conftest import missing
        missing("the editor bundle hdsl/playground/static/editor.js", "make playground-bundle")
    assert main(["playground", "--examples", str(tmp_path / "nowhere")]) == 1
    assert f"--examples {tmp_path / 'nowhere'}: no such folder" in capsys.readouterr().err
