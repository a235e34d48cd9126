"""Files written whole or not at all."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable


def write_atomic(path: str | Path, write: Callable[[BinaryIO], None] | bytes, mode: int | None = None) -> None:
    """Write through a temporary file in the same folder (unique to this writer), then rename
    it over `path`: a reader, a full disk or a failing writer leaves the old file (or none),
    never a part of the new one. `write` is the bytes or a function writing to the open file;
    `mode` the permissions to give (mkstemp's are 0600). Raises OSError."""
    folder = os.path.dirname(os.fspath(path)) or "."
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(os.fspath(path)) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as file:
            if isinstance(write, bytes):
                file.write(write)
            else:
                write(file)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
