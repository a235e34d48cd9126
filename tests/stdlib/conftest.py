"""Fixtures for the stdlib tests (helpers are in helpers.py)."""
from __future__ import annotations

import zlib

import numpy as np
import pytest


@pytest.fixture
def rng(request):
    # a fixed seed per test, so that failures reproduce
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)
