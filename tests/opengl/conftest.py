"""The OpenGL back end's tests run on whatever OpenGL the machine has: Mesa's llvmpipe in CI
(`make test` installs Mesa with apt where it is missing, and PyOpenGL with the test extra).
A developer's machine without OpenGL skips the device checks; under CI a missing OpenGL is a
failure, not a silent skip."""
import os

import pytest


@pytest.fixture(scope="session")
def gl():
    from hdsl.runtime import opengl
    try:
        return opengl.context()
    except opengl.OpenGLUnavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the OpenGL tests: {e}")
        pytest.skip(f"no usable OpenGL here: {e}")
