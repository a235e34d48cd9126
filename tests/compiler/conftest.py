"""Native-compiler tests: compiled object code is cached in a temporary
directory per test process (HDSL_CACHE_DIR), never in ~/.cache."""
from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_CACHE = tempfile.mkdtemp(prefix="hdsl-cache-")
os.environ["HDSL_CACHE_DIR"] = _CACHE


@pytest.fixture(scope="session", autouse=True)
def _hdsl_cache_dir():
    os.environ["HDSL_CACHE_DIR"] = _CACHE
    yield _CACHE
    shutil.rmtree(_CACHE, ignore_errors=True)
