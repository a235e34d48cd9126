"""Golden loop nests for the 2012 paper's blur schedules.

The expected text in tests/golden/blur_<schedule>.stmt was read and checked
by hand (see the notes in each file's header); `pytest --update-golden`
rewrites them, and the diff must then be reviewed again.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hdsl
from hdsl.lower.lower import lowered_text

HERE = Path(__file__).parent
SCHEDULES = ["root", "inline", "chunked", "sliding", "tiled"]


@pytest.fixture(scope="module")
def blur():
    return hdsl.load(HERE / "blur_schedules.hl")


def _body(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")).strip() + "\n"


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_lowered_loop_nest(blur, schedule, update_golden):
    got = lowered_text(blur.ir, schedule, after="schedule_functions")
    path = HERE / f"blur_{schedule}.stmt"
    if update_golden:
        header = "".join(l + "\n" for l in path.read_text().splitlines() if l.startswith("#")) if path.exists() else ""
        path.write_text(header + got)
    assert _body(path.read_text()) == _body(got)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_every_schedule_matches_the_evaluator(blur, schedule):
    img = np.random.RandomState(7).randint(0, 21000, (45, 71)).astype(np.uint16)
    expected = blur(img=img)
    got = blur.compile("host", schedule=schedule)(img=img)
    assert np.array_equal(got, expected)
