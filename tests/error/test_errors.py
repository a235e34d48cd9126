"""Wrong programs and the exact diagnostics `hdsl check` gives for them.

Each `NAME.hl` here sits next to `NAME.err`, the exact expected stderr of
`hdsl check NAME.hl` run from this folder (so positions read `NAME.hl:L:C`).
The check runs in-process through the CLI's `main`. A case passes only if the
exit status is 1, the message matches exactly, and nothing in it is a
traceback or an internal compiler error.

After a deliberate change to a message, rewrite the expected files with
    .venv/bin/python tests/error/test_errors.py --update [NAME ...]
and read the diff as a reviewer would: the caret under the right token, a
hint that says what to do, and no follow-on errors.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path

import pytest

from hdsl.cli import main

HERE = Path(__file__).resolve().parent
CASES = sorted(p.stem for p in HERE.glob("*.hl"))


def run_check(name: str) -> tuple[int, str]:
    """`hdsl check NAME.hl` from this folder: (exit status, stderr)."""
    err = io.StringIO()
    old = os.getcwd()
    os.chdir(HERE)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["check", f"{name}.hl"])
    finally:
        os.chdir(old)
    return code, err.getvalue()


def test_there_are_enough_cases():
    assert len(CASES) >= 45
    missing = [n for n in CASES if not (HERE / f"{n}.err").exists()]
    assert not missing, f"cases without a .err file: {missing}"
    orphans = sorted(p.stem for p in HERE.glob("*.err") if p.stem not in CASES)
    assert not orphans, f".err files without a program: {orphans}"


def test_some_cases_report_several_errors():
    several = [n for n in CASES if (HERE / f"{n}.err").exists()
               and (HERE / f"{n}.err").read_text().count(": error: ") >= 2]
    assert len(several) >= 3, several


@pytest.mark.parametrize("name", CASES)
def test_error_message(name):
    code, err = run_check(name)
    assert "Traceback" not in err
    assert "internal compiler error" not in err
    assert code == 1, f"exit status {code}; stderr:\n{err}"
    expected = (HERE / f"{name}.err").read_text()
    assert err == expected


if __name__ == "__main__":
    if sys.argv[1:2] != ["--update"]:
        sys.exit("usage: test_errors.py --update [NAME ...]")
    for name in sys.argv[2:] or CASES:
        code, err = run_check(name)
        if code != 1 or "Traceback" in err or "internal compiler error" in err:
            print(f"{name}: exit status {code}, not recorded\n{err}", file=sys.stderr)
            continue
        path = HERE / f"{name}.err"
        if not path.exists() or path.read_text() != err:
            path.write_text(err)
            print(f"wrote {path.name}")
