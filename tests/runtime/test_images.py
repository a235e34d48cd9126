"""Image files in and out (hdsl.runtime.images).

16-bit colour PNGs are checked against a slow, independent PNG codec written
here from the PNG spec: our encoder's files must decode to the same samples
under it, and our decoder must read its files — every filter type, Adam7
interlacing — exactly.
"""
from __future__ import annotations

import struct
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from hdsl.runtime.images import ImageError, load_image, save_image

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS_OF_COLOUR_TYPE = {0: 1, 4: 2, 2: 3, 6: 4}
COLOUR_TYPE_OF_CHANNELS = {c: t for t, c in CHANNELS_OF_COLOUR_TYPE.items()}
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4),
         (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]  # (x0, y0, dx, dy) per pass

RNG_SEED = 20240611


def random_image(shape, dtype, seed=RNG_SEED):
    rng = np.random.default_rng(seed)
    return rng.integers(0, np.iinfo(dtype).max, size=shape, dtype=dtype, endpoint=True)


def smooth_image(height, width, channels=None):
    """A uint8 image with gentle gradients, so JPEG keeps it close."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    planes = [128 + 100 * np.sin(x / 9 + k) * np.cos(y / 13 - k) for k in range(channels or 1)]
    image = np.stack(planes, axis=-1) if channels else planes[0]
    return np.round(image).astype(np.uint8)


# --------------------------------------------------------------------------
# An independent reference PNG codec for 16-bit images (slow; small images only)


def _predict(kind, a, b, c):
    if kind == 0:
        return 0
    if kind == 1:
        return a
    if kind == 2:
        return b
    if kind == 3:
        return (a + b) // 2
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def reference_decode_png16(data: bytes):
    """(array, filter types used) for a non-interlaced 16-bit PNG."""
    assert data[:8] == PNG_SIGNATURE
    position, idat, header = 8, b"", None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length:position + 12 + length])
        assert crc == zlib.crc32(kind + body), f"bad CRC on {kind!r}"
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    width, height, depth, colour_type, compression, filtering, interlace = header
    assert (depth, compression, filtering, interlace) == (16, 0, 0, 0)
    channels = CHANNELS_OF_COLOUR_TYPE[colour_type]
    pixel_bytes, stride = 2 * channels, 2 * channels * width
    raw = zlib.decompress(idat)
    assert len(raw) == height * (stride + 1)
    previous, out, filters = bytearray(stride), bytearray(), set()
    for y in range(height):
        kind = raw[y * (stride + 1)]
        filters.add(kind)
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - pixel_bytes] if i >= pixel_bytes else 0
            c = previous[i - pixel_bytes] if i >= pixel_bytes else 0
            line[i] = (line[i] + _predict(kind, a, previous[i], c)) & 0xFF
        out += line
        previous = line
    array = np.frombuffer(bytes(out), dtype=">u2").astype(np.uint16)
    array = array.reshape(height, width, channels)
    return (array[:, :, 0] if channels == 1 else array), filters


def reference_encode_png16(array: np.ndarray, filter_of_row, interlace=False) -> bytes:
    """A 16-bit PNG whose scanline n uses filter type filter_of_row(n)."""
    height, width = array.shape[:2]
    channels = 1 if array.ndim == 2 else array.shape[2]
    pixel_bytes = 2 * channels
    passes = [array[y0::dy, x0::dx] for x0, y0, dx, dy in ADAM7] if interlace else [array]
    raw, row_number = bytearray(), 0
    for image in passes:
        if image.shape[0] == 0 or image.shape[1] == 0:
            continue
        rows = np.ascontiguousarray(image, dtype=">u2").view(np.uint8).reshape(image.shape[0], -1)
        previous = bytes(rows.shape[1])
        for row in rows:
            line, kind = bytes(row), filter_of_row(row_number)
            row_number += 1
            raw.append(kind)
            for i in range(len(line)):
                a = line[i - pixel_bytes] if i >= pixel_bytes else 0
                c = previous[i - pixel_bytes] if i >= pixel_bytes else 0
                raw.append((line[i] - _predict(kind, a, previous[i], c)) & 0xFF)
            previous = line
    header = struct.pack(">IIBBBBB", width, height, 16, COLOUR_TYPE_OF_CHANNELS[channels],
                         0, 0, int(interlace))

    def chunk(kind, body):
        crc = zlib.crc32(kind + body)
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    compressed = zlib.compress(bytes(raw))
    # Two IDAT chunks, to check that readers join them.
    half = len(compressed) // 2
    return (PNG_SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", compressed[:half])
            + chunk(b"IDAT", compressed[half:]) + chunk(b"IEND", b""))


# --------------------------------------------------------------------------
# PNG round trips

PNG_SHAPES = {"gray": (23, 37), "gray+alpha": (23, 37, 2), "rgb": (23, 37, 3),
              "rgba": (23, 37, 4)}


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("layout", list(PNG_SHAPES))
def test_png_round_trip_is_exact(tmp_path, dtype, layout):
    array = random_image(PNG_SHAPES[layout], dtype)
    save_image(tmp_path / "image.png", array)
    loaded = load_image(tmp_path / "image.png")
    assert loaded.dtype == dtype
    assert loaded.shape == array.shape
    np.testing.assert_array_equal(loaded, array)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_png_single_channel_axis_is_written_as_gray(tmp_path, dtype):
    array = random_image((5, 6, 1), dtype)
    save_image(tmp_path / "image.png", array)
    loaded = load_image(tmp_path / "image.png")
    assert loaded.shape == (5, 6)
    np.testing.assert_array_equal(loaded, array[:, :, 0])


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_png16_is_really_16_bit_on_disk(tmp_path, channels):
    shape = (9, 11) if channels == 1 else (9, 11, channels)
    array = random_image(shape, np.uint16)
    save_image(tmp_path / "image.png", array)
    data = (tmp_path / "image.png").read_bytes()
    depth, colour_type = data[24], data[25]
    assert (depth, colour_type) == (16, COLOUR_TYPE_OF_CHANNELS[channels])
    decoded, _ = reference_decode_png16(data)
    np.testing.assert_array_equal(decoded, array)


@pytest.mark.parametrize("channels", [3, 4])
def test_png16_colour_readable_by_pillow_as_high_bytes(tmp_path, channels):
    # Pillow itself keeps only the high byte of each sample: our file must
    # still be a PNG it reads, and the high bytes must be ours.
    array = random_image((12, 10, channels), np.uint16)
    save_image(tmp_path / "image.png", array)
    with Image.open(tmp_path / "image.png") as image:
        np.testing.assert_array_equal(np.asarray(image), (array >> 8).astype(np.uint8))


def test_png16_encoder_uses_adaptive_filters_and_compresses(tmp_path):
    # A smooth gradient above, noise below: the encoder should pick different
    # filters for different rows, and the smooth half should cost little.
    y, x = np.mgrid[0:40, 0:50]
    smooth = np.stack([x * 1000 + y * 7, y * 1300, (x + y) * 600], axis=-1).astype(np.uint16)
    noisy = random_image((40, 50, 3), np.uint16)
    array = np.concatenate([smooth, noisy])
    save_image(tmp_path / "image.png", array)
    decoded, filters = reference_decode_png16((tmp_path / "image.png").read_bytes())
    np.testing.assert_array_equal(decoded, array)
    assert len(filters) > 1
    save_image(tmp_path / "smooth.png", smooth)
    assert (tmp_path / "smooth.png").stat().st_size < smooth.nbytes / 4


@pytest.mark.parametrize("filter_type", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("channels", [2, 3, 4])
def test_png16_colour_decodes_every_filter_type(tmp_path, filter_type, channels):
    array = random_image((6, 7, channels), np.uint16, seed=filter_type)
    # Make the low bytes differ from the high bytes in a recognisable way.
    array[0, 0] = 0x1234
    path = tmp_path / "image.png"
    path.write_bytes(reference_encode_png16(array, lambda row: filter_type))
    loaded = load_image(path)
    assert loaded.dtype == np.uint16
    np.testing.assert_array_equal(loaded, array)


@pytest.mark.parametrize("channels", [2, 3, 4])
def test_png16_colour_decodes_mixed_filters_and_interlacing(tmp_path, channels):
    array = random_image((13, 17, channels), np.uint16, seed=channels)
    for interlace in (False, True):
        path = tmp_path / f"image-{interlace}.png"
        path.write_bytes(reference_encode_png16(array, lambda row: (3 * row + 1) % 5, interlace))
        np.testing.assert_array_equal(load_image(path), array)


@settings(max_examples=40, deadline=None)
@given(height=st.integers(1, 9), width=st.integers(1, 9),
       channels=st.sampled_from([None, 2, 3, 4]),
       dtype=st.sampled_from([np.uint8, np.uint16]), seed=st.integers(0, 2**32 - 1))
def test_png_round_trip_any_size(height, width, channels, dtype, seed):
    shape = (height, width) if channels is None else (height, width, channels)
    array = random_image(shape, dtype, seed)
    with tempfile.TemporaryDirectory() as folder:
        save_image(Path(folder) / "image.png", array)
        np.testing.assert_array_equal(load_image(Path(folder) / "image.png"), array)


def test_png_strided_array_is_written_by_value(tmp_path):
    base = random_image((30, 40, 4), np.uint16)
    view = base[::2, ::-3, 2::-1]  # every other row, columns reversed, BGR
    save_image(tmp_path / "image.png", view)
    np.testing.assert_array_equal(load_image(tmp_path / "image.png"), view)


def test_extensions_are_case_insensitive(tmp_path):
    array = random_image((4, 5, 3), np.uint16)
    save_image(tmp_path / "IMAGE.PNG", array)
    np.testing.assert_array_equal(load_image(tmp_path / "IMAGE.PNG"), array)
    floats = np.linspace(0, 1, 20, dtype=np.float32).reshape(4, 5)
    save_image(tmp_path / "DATA.NPY", floats)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["DATA.NPY", "IMAGE.PNG"]
    np.testing.assert_array_equal(load_image(str(tmp_path / "DATA.NPY")), floats)


# --------------------------------------------------------------------------
# PNG kinds only Pillow writes: palette, 1-bit, 16-bit gray written by Pillow


def test_palette_png_comes_back_as_rgb(tmp_path):
    rgb = smooth_image(8, 8, channels=3)
    Image.fromarray(rgb).quantize(colors=16).save(tmp_path / "palette.png")
    with Image.open(tmp_path / "palette.png") as image:
        assert image.mode == "P"
        expected = np.asarray(image.convert("RGB"))
    loaded = load_image(tmp_path / "palette.png")
    assert loaded.shape == (8, 8, 3)
    np.testing.assert_array_equal(loaded, expected)


def test_palette_png_with_transparency_comes_back_as_rgba(tmp_path):
    image = Image.new("P", (4, 3))
    image.putpalette([255, 0, 0, 0, 255, 0])
    image.putpixel((1, 1), 1)
    image.save(tmp_path / "palette.png", transparency=0)
    loaded = load_image(tmp_path / "palette.png")
    assert loaded.shape == (3, 4, 4)
    assert tuple(loaded[1, 1]) == (0, 255, 0, 255)
    assert tuple(loaded[0, 0]) == (255, 0, 0, 0)


def test_one_bit_png_comes_back_as_8_bit_gray(tmp_path):
    bits = np.zeros((5, 9), dtype=bool)
    bits[2, 3] = bits[4, 8] = True
    Image.fromarray(bits).save(tmp_path / "bits.png")
    loaded = load_image(tmp_path / "bits.png")
    assert loaded.dtype == np.uint8
    np.testing.assert_array_equal(loaded, bits * np.uint8(255))


def test_16_bit_gray_png_written_by_pillow(tmp_path):
    array = random_image((6, 5), np.uint16)
    Image.fromarray(array).save(tmp_path / "gray16.png")
    loaded = load_image(tmp_path / "gray16.png")
    assert loaded.dtype == np.uint16
    np.testing.assert_array_equal(loaded, array)


# --------------------------------------------------------------------------
# JPEG


@pytest.mark.parametrize("channels", [None, 3])
@pytest.mark.parametrize("suffix", [".jpg", ".jpeg"])
def test_jpeg_round_trip_is_close(tmp_path, channels, suffix):
    array = smooth_image(48, 64, channels)
    save_image(tmp_path / f"image{suffix}", array)
    loaded = load_image(tmp_path / f"image{suffix}")
    assert loaded.dtype == np.uint8
    assert loaded.shape == array.shape
    error = np.abs(loaded.astype(np.int32) - array)
    assert error.mean() < 1.5
    assert error.max() <= 12


def test_cmyk_jpeg_comes_back_as_rgb(tmp_path):
    Image.new("CMYK", (6, 4), (0, 255, 255, 0)).save(tmp_path / "cmyk.jpg")
    loaded = load_image(tmp_path / "cmyk.jpg")
    assert loaded.shape == (4, 6, 3)
    assert np.all(np.abs(loaded.astype(int) - [255, 0, 0]) <= 8)


def test_content_decides_png_or_jpeg(tmp_path):
    array = smooth_image(16, 16, 3)
    Image.fromarray(array).save(tmp_path / "really-a-png.jpg", format="PNG")
    np.testing.assert_array_equal(load_image(tmp_path / "really-a-png.jpg"), array)


# --------------------------------------------------------------------------
# .npy


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.int16,
                                   np.int32, np.int64, np.uint32, np.uint64, np.bool_])
@pytest.mark.parametrize("shape", [(5, 7), (5, 7, 3), (11,), (2, 3, 4, 5)])
def test_npy_round_trip_is_exact(tmp_path, dtype, shape):
    rng = np.random.default_rng(RNG_SEED)
    array = (rng.standard_normal(shape) * 1000).astype(dtype)
    save_image(tmp_path / "data.npy", array)
    loaded = load_image(tmp_path / "data.npy")
    assert loaded.dtype == dtype
    assert loaded.shape == shape
    np.testing.assert_array_equal(loaded, array)


def test_npy_keeps_nan_and_infinity(tmp_path):
    array = np.array([[np.nan, np.inf], [-np.inf, -0.0]], dtype=np.float32)
    save_image(tmp_path / "data.npy", array)
    loaded = load_image(tmp_path / "data.npy")
    assert loaded.tobytes() == array.tobytes()


def test_big_endian_npy_comes_back_native(tmp_path):
    array = (np.arange(12).reshape(3, 4) / 7).astype(">f4")
    assert not array.dtype.isnative  # on the little-endian machines we test on
    np.save(tmp_path / "data.npy", array)
    loaded = load_image(tmp_path / "data.npy")
    assert loaded.dtype == np.float32 and loaded.dtype.isnative
    np.testing.assert_array_equal(loaded, array)


# --------------------------------------------------------------------------
# Errors: always ImageError, naming the file, with a hint where one helps


def read_error(path) -> ImageError:
    with pytest.raises(ImageError) as caught:
        load_image(path)
    assert str(path) in caught.value.message
    return caught.value


def write_error(path, array) -> ImageError:
    with pytest.raises(ImageError) as caught:
        save_image(path, array)
    assert str(path) in caught.value.message
    return caught.value


def test_image_error_is_an_exception_with_hint_on_second_line():
    error = ImageError("cannot read 'x.png': no such file", hint="check the path")
    assert isinstance(error, Exception)
    assert str(error) == "cannot read 'x.png': no such file\nhint: check the path"
    assert str(ImageError("just this")) == "just this"


@pytest.mark.parametrize("name", ["missing.png", "missing.jpg", "missing.npy"])
def test_missing_file(tmp_path, name):
    assert "no such file" in read_error(tmp_path / name).message


def test_folder_instead_of_file(tmp_path):
    (tmp_path / "folder.png").mkdir()
    assert "folder" in read_error(tmp_path / "folder.png").message


@pytest.mark.parametrize("name", ["image.png", "image.jpg"])
def test_file_that_is_not_an_image(tmp_path, name):
    (tmp_path / name).write_text("hello, world\n")
    assert "not a PNG or JPEG" in read_error(tmp_path / name).message


@pytest.mark.parametrize("channels", [None, 3])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_truncated_png(tmp_path, channels, dtype):
    shape = (64, 64) if channels is None else (64, 64, channels)
    save_image(tmp_path / "image.png", random_image(shape, dtype))
    data = (tmp_path / "image.png").read_bytes()
    (tmp_path / "image.png").write_bytes(data[:len(data) // 2])
    assert "damaged" in read_error(tmp_path / "image.png").message


def test_png_with_corrupt_compressed_data(tmp_path):
    array = random_image((16, 16, 3), np.uint16)
    save_image(tmp_path / "image.png", array)
    data = bytearray((tmp_path / "image.png").read_bytes())
    data[60:80] = bytes(20)  # inside the IDAT stream
    (tmp_path / "image.png").write_bytes(bytes(data))
    read_error(tmp_path / "image.png")


def test_garbage_npy(tmp_path):
    (tmp_path / "data.npy").write_bytes(b"\x93NUMPY garbage")
    assert "not a valid .npy" in read_error(tmp_path / "data.npy").message


class _TouchWhenUnpickled:
    """Unpickling this creates a file: proof that the loader ran pickled code."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


def test_npy_holding_objects_is_refused_without_unpickling(tmp_path):
    marker = tmp_path / "unpickled"
    objects = np.empty(1, dtype=object)
    objects[0] = _TouchWhenUnpickled(marker)
    np.save(tmp_path / "data.npy", objects, allow_pickle=True)
    read_error(tmp_path / "data.npy")
    assert not marker.exists()


def test_npy_holding_strings(tmp_path):
    np.save(tmp_path / "data.npy", np.array(["a", "bc"]))
    assert "not numbers" in read_error(tmp_path / "data.npy").message


def test_npz_named_npy(tmp_path):
    with open(tmp_path / "data.npy", "wb") as file:
        np.savez(file, a=np.zeros(3))
    assert ".npz" in read_error(tmp_path / "data.npy").message


def test_scalar_npy(tmp_path):
    np.save(tmp_path / "data.npy", np.float32(3))
    read_error(tmp_path / "data.npy")


@pytest.mark.parametrize("name", ["image.tif", "image.bmp", "image"])
def test_unknown_suffix(tmp_path, name):
    Image.new("L", (2, 2)).save(tmp_path / name, format="BMP")
    assert ".npy" in read_error(tmp_path / name).hint
    assert ".npy" in write_error(tmp_path / name, np.zeros((2, 2), np.uint8)).hint


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.int32, np.uint32,
                                   np.bool_])
def test_png_refuses_other_element_types(tmp_path, dtype):
    error = write_error(tmp_path / "out.png", np.zeros((4, 4), dtype))
    assert "u8 or u16" in error.message
    assert ".npy" in error.hint
    assert not (tmp_path / "out.png").exists()


def test_png_f32_hint_names_the_type():
    error = write_error("out.png", np.zeros((4, 4), np.float32))
    assert "f32" in error.message
    assert "write .npy" in error.hint and "cast" in error.hint


@pytest.mark.parametrize("shape", [(4,), (4, 4, 5), (4, 4, 3, 1), (0, 4), (4, 0, 3)])
def test_png_refuses_shapes_it_cannot_hold(tmp_path, shape):
    write_error(tmp_path / "out.png", np.zeros(shape, np.uint8))
    assert not (tmp_path / "out.png").exists()


def test_jpeg_refuses_u16(tmp_path):
    error = write_error(tmp_path / "out.jpg", np.zeros((4, 4), np.uint16))
    assert ".png" in error.hint


@pytest.mark.parametrize("channels", [2, 4])
def test_jpeg_refuses_alpha(tmp_path, channels):
    error = write_error(tmp_path / "out.jpeg", np.zeros((4, 4, channels), np.uint8))
    assert "alpha" in error.message and ".png" in error.hint


def test_npy_refuses_objects(tmp_path):
    write_error(tmp_path / "out.npy", np.array(["text"]))


@pytest.mark.parametrize("name", ["out.png", "out.npy", "out.jpg"])
def test_writing_into_a_missing_folder(tmp_path, name):
    path = tmp_path / "no" / "such" / name
    array = np.zeros((3, 3), np.uint8)
    error = write_error(path, array)
    assert "folder" in error.message
