import os
import tempfile

import pytest


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/golden expectations from the current compiler (review the diff!)")


@pytest.fixture
def update_golden(request):
    return request.config.getoption("--update-golden")


@pytest.fixture(autouse=True, scope="session")
def _private_compile_cache():
    """Compiled code goes to a cache private to the test session, not ~/.cache."""
    os.environ.setdefault("HDSL_VERIFY", "1")      # the IR verifier runs between lowering passes
    if "HDSL_CACHE_DIR" not in os.environ:
        d = tempfile.mkdtemp(prefix="hdsl-test-cache-")
        os.environ["HDSL_CACHE_DIR"] = d
    yield
