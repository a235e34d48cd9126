"""Image files in and out: PNG and JPEG through Pillow, `.npy` through NumPy.

Arrays are laid out as NumPy and Pillow lay them out: ``(H, W)`` for one
channel, ``(H, W, C)`` for several (interleaved).  Mapping that layout onto a
pipeline's ``img(x, y, c)`` is the caller's business (spec §6).

- PNG: 8- or 16-bit, gray, gray+alpha, RGB or RGBA; a 16-bit file comes back as
  ``uint16``.  Palette images come back as RGB (RGBA when they have
  transparency); 1/2/4-bit gray is scaled to 8 bits, as Pillow does.
- JPEG: 8-bit gray or RGB (CMYK and other colour spaces are converted to RGB).
- ``.npy``: any bool, integer or float element type and any number of
  dimensions, exactly as stored (in native byte order).

Pillow has no 16-bit multi-channel image mode: it reads 16-bit gray+alpha, RGB
and RGBA PNGs keeping only the high byte of each sample, and cannot write them
at all.  We read them by running Pillow's PNG decoder once more with a raw mode
that keeps the low bytes instead (`_read_png16_colour`), and write them with a
small PNG encoder of our own (`_encode_png16`).

Every failure — a missing or corrupt file, an array no format can hold — raises
`ImageError`, whose message names the file and whose hint says what to do.
"""
from __future__ import annotations

import os
import struct
import zlib
from typing import NoReturn

import numpy as np
from PIL import Image, UnidentifiedImageError

from hdsl.runtime.files import write_atomic

__all__ = ["ImageError", "load_image", "save_image"]

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PILLOW_FORMATS = ("PNG", "JPEG")
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
_HINT_SUFFIXES = "hdsl reads and writes .png, .jpg/.jpeg and .npy files"


class ImageError(Exception):
    """An image file that cannot be read, or an array that cannot be written.

    ``message`` says what went wrong and names the file; ``hint`` (possibly
    None) says what to do about it.  ``str()`` gives both, the hint on a
    second line.
    """

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\nhint: {self.hint}"


# --------------------------------------------------------------------------
# Reading


def load_image(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an image file into a NumPy array.

    PNG and JPEG files give ``uint8`` or ``uint16`` arrays of shape ``(H, W)``
    (gray) or ``(H, W, C)`` with C = 2 (gray+alpha), 3 (RGB) or 4 (RGBA).
    ``.npy`` files give whatever array they hold (bool, integer or float).
    Raises `ImageError` when the file is missing, unreadable or of a kind
    hdsl does not read.
    """
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".npy":
        return _load_npy(path)
    if suffix in _IMAGE_SUFFIXES:
        return _load_pillow(path)
    _fail_suffix("read", path, suffix)


def _load_npy(path: str) -> np.ndarray:
    try:
        # allow_pickle=False: a .npy file is data, never code to run.
        array = np.load(path, allow_pickle=False)
    except OSError as error:
        _fail_os("read", path, error)
    except (ValueError, EOFError) as error:
        raise ImageError(f"cannot read '{path}': not a valid .npy array file ({error})",
                         hint="write it with numpy.save, holding a numeric array") from None
    if not isinstance(array, np.ndarray):  # a .npz archive renamed to .npy
        array.close()
        raise ImageError(f"cannot read '{path}': it is a .npz archive, not a single array",
                         hint="save one array per file with numpy.save")
    if array.dtype.kind not in "biuf":
        raise ImageError(f"cannot read '{path}': its elements are {array.dtype}, "
                         f"not numbers",
                         hint="hdsl images hold bool, integer or float elements")
    if array.ndim == 0:
        raise ImageError(f"cannot read '{path}': it holds a single number, not an image",
                         hint="an image array has at least one dimension")
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    return array


def _load_pillow(path: str) -> np.ndarray:
    try:
        header = _png_header(path)
        if header is not None and header[0] == 16 and header[1] in _PNG16_COLOUR:
            return _read_png16_colour(path, header[1])
        with Image.open(path, formats=_PILLOW_FORMATS) as image:
            image.load()
            return _pillow_to_array(image, path)
    except ImageError:
        raise
    except UnidentifiedImageError:
        raise ImageError(f"cannot read '{path}': not a PNG or JPEG image",
                         hint=_HINT_SUFFIXES) from None
    except OSError as error:
        if error.errno is not None:  # the file system's complaint, not Pillow's
            _fail_os("read", path, error)
        _fail_corrupt(path, error)
    except (ValueError, SyntaxError, EOFError, struct.error, zlib.error,
            Image.DecompressionBombError) as error:
        _fail_corrupt(path, error)


def _pillow_to_array(image: Image.Image, path: str) -> np.ndarray:
    mode = image.mode
    if mode == "1":
        image = image.convert("L")
    elif mode in ("P", "PA"):
        has_alpha = mode == "PA" or "transparency" in image.info
        image = image.convert("RGBA" if has_alpha else "RGB")
    elif mode in ("CMYK", "YCbCr", "LAB", "HSV"):
        image = image.convert("RGB")
    elif mode not in ("L", "LA", "RGB", "RGBA", "I;16", "I;16L", "I;16B"):
        raise ImageError(f"cannot read '{path}': Pillow gives its pixels as mode "
                         f"'{mode}', which hdsl does not read",
                         hint="convert it to an 8- or 16-bit PNG, or to .npy")
    array = np.asarray(image)
    if not array.dtype.isnative:  # 'I;16B' comes back big-endian
        array = array.astype(array.dtype.newbyteorder("="))
    return array


def _png_header(path: str) -> tuple[int, int] | None:
    """(bit depth, colour type) from a PNG file's IHDR, or None if not a PNG."""
    with open(path, "rb") as file:
        head = file.read(26)
    if len(head) < 26 or not head.startswith(_PNG_SIGNATURE) or head[12:16] != b"IHDR":
        return None
    return head[24], head[25]


# 16-bit PNG colour type -> (mode Pillow opens it in, the raw mode Pillow
# decodes it with, a raw mode with the same bytes per pixel that yields the
# other bytes).  Using a raw mode of the same pixel size keeps Pillow's PNG
# unfiltering (which steps back one pixel) and its Adam7 de-interlacing right.
_PNG16_COLOUR: dict[int, tuple[str, str, str]] = {
    # RGB: 'RGB;16B' keeps bytes 0, 2, 4 of each pixel (the high bytes of the
    # big-endian samples); 'RGB;16L' reads them as little-endian and keeps
    # bytes 1, 3, 5, the low bytes.  Likewise for RGBA.
    2: ("RGB", "RGB;16B", "RGB;16L"),
    6: ("RGBA", "RGBA;16B", "RGBA;16L"),
    # Gray+alpha: Pillow has no 'LA;16L', but 8-bit 'RGBA' has the same 4-byte
    # pixel and copies it whole: (gray high, gray low, alpha high, alpha low).
    4: ("RGBA", "LA;16B", "RGBA"),
}


def _read_png16_colour(path: str, colour_type: int) -> np.ndarray:
    mode, pillow_rawmode, other_rawmode = _PNG16_COLOUR[colour_type]
    if colour_type == 4:
        pixel_bytes = _decode_png_as(path, mode, pillow_rawmode, other_rawmode)
        high, low = pixel_bytes[..., 0::2], pixel_bytes[..., 1::2]
    else:
        high = _decode_png_as(path, mode, pillow_rawmode, pillow_rawmode)
        low = _decode_png_as(path, mode, pillow_rawmode, other_rawmode)
    return (high.astype(np.uint16) << 8) | low


def _decode_png_as(path: str, mode: str, expected_rawmode: str, rawmode: str) -> np.ndarray:
    with Image.open(path, formats=("PNG",)) as image:
        tiles = image.tile
        if (image.mode != mode or len(tiles) != 1 or tiles[0].codec_name != "zip"
                or tiles[0].args != expected_rawmode):
            # Only a Pillow whose PNG reader works differently gets here.
            raise ImageError(
                f"cannot read 16-bit colour PNG '{path}': this Pillow opens it as "
                f"mode '{image.mode}' with tiles {tiles!r}, not as hdsl expects",
                hint="convert the file to .npy, or report this as an hdsl bug")
        image.tile = [tiles[0]._replace(args=rawmode)]
        image.load()
        return np.asarray(image)


# --------------------------------------------------------------------------
# Writing


def save_image(path: str | os.PathLike[str], array: np.ndarray) -> None:
    """Write an array to an image file, choosing the format by the extension.

    - ``.png``: ``uint8`` or ``uint16``, shape ``(H, W)`` or ``(H, W, C)`` with
      C = 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA).
    - ``.jpg`` / ``.jpeg``: ``uint8``, gray or RGB (lossy, quality 95, no
      chroma subsampling).
    - ``.npy``: any bool, integer or float array.

    Raises `ImageError` for an array the format cannot hold (with a hint) or
    a file that cannot be written.  Does not create missing folders.  The file is
    replaced atomically: a failed write leaves the old file as it was.
    """
    path = os.fspath(path)
    array = np.asarray(array)
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".npy":
        _check_npy_array(path, array)
        # An open file, not the path: np.save appends '.npy' to 'X.NPY'.
        _write(path, lambda file: np.save(file, array, allow_pickle=False))
    elif suffix == ".png":
        _check_png_array(path, array)
        if array.ndim == 3 and array.shape[2] == 1:
            array = array[:, :, 0]
        if array.dtype == np.uint16 and array.ndim == 3:
            data = _encode_png16(array)  # Pillow cannot write these
            _write(path, lambda file: file.write(data))
        else:
            image = Image.fromarray(np.ascontiguousarray(array))
            _write(path, lambda file: image.save(file, format="PNG"))
    elif suffix in (".jpg", ".jpeg"):
        _check_jpeg_array(path, array)
        if array.ndim == 3:
            array = array[:, :, 0] if array.shape[2] == 1 else array
        image = Image.fromarray(np.ascontiguousarray(array))
        _write(path, lambda file: image.save(file, format="JPEG", quality=95,
                                             subsampling=0))
    else:
        _fail_suffix("write", path, suffix)


def _check_npy_array(path: str, array: np.ndarray) -> None:
    if array.dtype.kind not in "biuf":
        raise ImageError(f"cannot write '{path}': its elements are {array.dtype}, not numbers",
                         hint="hdsl images hold bool, integer or float elements")


def _check_png_array(path: str, array: np.ndarray) -> None:
    if array.dtype not in (np.uint8, np.uint16):
        raise ImageError(
            f"cannot write '{path}': PNG holds u8 or u16 pixels, and this image is "
            f"{_type_name(array.dtype)}",
            hint=f"write .npy to keep {_type_name(array.dtype)} values, or cast in "
                 f"the pipeline (e.g. u8_sat(...) or u16_sat(...))")
    _check_image_shape(path, array, "PNG", (1, 2, 3, 4),
                       "gray (H, W), or (H, W, C) with 2 (gray+alpha), 3 (RGB) "
                       "or 4 (RGBA) channels")


def _check_jpeg_array(path: str, array: np.ndarray) -> None:
    if array.dtype != np.uint8:
        raise ImageError(
            f"cannot write '{path}': JPEG holds u8 pixels, and this image is "
            f"{_type_name(array.dtype)}",
            hint="write .png for u16, .npy for any type, or cast in the pipeline "
                 "(e.g. u8_sat(...))")
    if array.ndim == 3 and array.shape[2] in (2, 4):
        raise ImageError(f"cannot write '{path}': JPEG has no alpha channel, and this "
                         f"image has {array.shape[2]} channels",
                         hint="write .png to keep the alpha channel")
    _check_image_shape(path, array, "JPEG", (1, 3), "gray (H, W), or RGB (H, W, 3)")


def _check_image_shape(path: str, array: np.ndarray, kind: str,
                       channels: tuple[int, ...], holds: str) -> None:
    shape = tuple(array.shape)
    if array.ndim not in (2, 3) or (array.ndim == 3 and shape[2] not in channels):
        raise ImageError(f"cannot write '{path}': {kind} holds {holds}, and this "
                         f"array has shape {shape}",
                         hint="write .npy to keep an array of any shape")
    if shape[0] == 0 or shape[1] == 0:
        raise ImageError(f"cannot write '{path}': the image is empty (shape {shape})",
                         hint="check the output size (--size)")
    if kind == "PNG" and max(shape[:2]) >= 2**31:
        raise ImageError(f"cannot write '{path}': PNG sides are limited to 2^31 - 1 "
                         f"pixels (shape {shape})", hint="write .npy")


def _write(path: str, write) -> None:
    """Write through a temporary file in the same folder, then rename it over `path`:
    a full disk or a failing encoder leaves the old file (or none), never a truncated one."""
    try:
        # the permissions open() would give (mkstemp's are 0600)
        write_atomic(path, write, mode=0o666 & ~_umask())
    except OSError as error:
        _fail_os("write", path, error)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _type_name(dtype: np.dtype) -> str:
    """An element type as hdsl spells it (u8, i32, f32, bool)."""
    prefix = {"u": "u", "i": "i", "f": "f"}.get(dtype.kind)
    if dtype.kind == "b":
        return "bool"
    return f"{prefix}{dtype.itemsize * 8}" if prefix else str(dtype)


# --------------------------------------------------------------------------
# A minimal PNG encoder for the 16-bit images Pillow cannot write

_PNG_COLOUR_TYPE = {1: 0, 2: 4, 3: 2, 4: 6}  # channels -> PNG colour type
_IDAT_BYTES = 1 << 20                       # split the zlib stream into 1 MiB chunks
_FILTER_BLOCK_BYTES = 1 << 22               # filter about this many bytes at a time


def _encode_png16(array: np.ndarray) -> bytes:
    """A 16-bit, non-interlaced PNG of an (H, W) or (H, W, 1..4) uint16 array."""
    height, width = array.shape[:2]
    channels = 1 if array.ndim == 2 else array.shape[2]
    pixel_bytes = 2 * channels
    # PNG samples are big-endian; one row of interleaved samples per scanline.
    rows = np.ascontiguousarray(array, dtype=">u2").view(np.uint8).reshape(
        height, width * pixel_bytes)
    compressor = zlib.compressobj(6)
    stream = []
    block = max(1, _FILTER_BLOCK_BYTES // rows.shape[1])
    for start in range(0, height, block):
        above = rows[start - 1] if start > 0 else np.zeros_like(rows[0])
        filtered = _filter_rows(rows[start:start + block], above, pixel_bytes)
        stream.append(compressor.compress(filtered.tobytes()))
    stream.append(compressor.flush())
    compressed = b"".join(stream)
    header = struct.pack(">IIBBBBB", width, height, 16, _PNG_COLOUR_TYPE[channels],
                         0, 0, 0)  # deflate, adaptive filtering, no interlace
    parts = [_PNG_SIGNATURE, _png_chunk(b"IHDR", header)]
    for start in range(0, max(1, len(compressed)), _IDAT_BYTES):
        parts.append(_png_chunk(b"IDAT", compressed[start:start + _IDAT_BYTES]))
    parts.append(_png_chunk(b"IEND", b""))
    return b"".join(parts)


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data)))


def _filter_rows(rows: np.ndarray, above: np.ndarray, pixel_bytes: int) -> np.ndarray:
    """PNG-filter each row (uint8) with whichever of the five filters gives the
    smallest sum of absolute signed bytes (the PNG spec's suggested heuristic).

    Returns the rows with the filter type byte prepended.  Encoding needs only
    the raw bytes, never earlier output, so every filter is one array operation.
    """
    x = rows.astype(np.int16)
    b = np.concatenate([above[None].astype(np.int16), x[:-1]])  # the byte above
    a = np.zeros_like(x)                                          # the byte to the left
    a[:, pixel_bytes:] = x[:, :-pixel_bytes]
    c = np.zeros_like(x)                                          # above and to the left
    c[:, pixel_bytes:] = b[:, :-pixel_bytes]
    estimate = a + b - c
    distance_a, distance_b, distance_c = (np.abs(estimate - a), np.abs(estimate - b),
                                          np.abs(estimate - c))
    paeth = np.where((distance_a <= distance_b) & (distance_a <= distance_c), a,
                     np.where(distance_b <= distance_c, b, c))
    candidates = (np.stack([x, x - a, x - b, x - ((a + b) >> 1), x - paeth]) & 0xFF
                  ).astype(np.uint8)                       # (5, rows, bytes), mod 256
    cost = np.abs(candidates.view(np.int8).astype(np.int32)).sum(axis=2)  # (5, rows)
    best = np.argmin(cost, axis=0)
    chosen = candidates[best, np.arange(len(best))]
    return np.concatenate([best.astype(np.uint8)[:, None], chosen], axis=1)


# --------------------------------------------------------------------------
# Failures


def _fail_suffix(verb: str, path: str, suffix: str) -> NoReturn:
    what = f"unknown image type '{suffix}'" if suffix else "no file extension"
    raise ImageError(f"cannot {verb} '{path}': {what}", hint=_HINT_SUFFIXES)


def _fail_os(verb: str, path: str, error: OSError) -> NoReturn:
    reason = error.strerror or str(error)
    hint = None
    if isinstance(error, FileNotFoundError):
        reason = "no such file" if verb == "read" else "its folder does not exist"
        hint = "check the path" if verb == "read" else "create the folder first"
    elif isinstance(error, IsADirectoryError):
        reason = "it is a folder"
    elif isinstance(error, NotADirectoryError):
        reason = "a part of its folder path is a file, not a folder"
        hint = "choose another path, or move that file away"
    raise ImageError(f"cannot {verb} '{path}': {reason}", hint=hint) from None


def _fail_corrupt(path: str, error: BaseException) -> NoReturn:
    raise ImageError(f"cannot read '{path}': the file is damaged or not a valid image "
                     f"({error})", hint="check that the file was written completely") from None
