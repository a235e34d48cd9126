"""Make the small sample images bundled in examples/images/.

    python examples/images/make_images.py

Deterministic (NumPy's legacy RandomState, whose stream never changes) and
offline.  Each image is 256x192: a smooth shaded background with hard-edged
shapes on it and a little noise, so blurs, edge detectors and histograms all
have something to show.

- gray16.png  16-bit gray, values in 0..21845 (= 65535 / 3): the paper's blur
              (examples/blur.hl) sums three u16 samples in u16, as Halide's
              does, and brighter values would wrap around
- gray8.png   8-bit gray
- rgb8.png    8-bit RGB
- rgba_holes.npy  RGBA in f32, 128x96 (every other pixel of rgb8.png's scene),
              alpha 1 at a random tenth of the pixels and 0 elsewhere: the
              holes that examples/interpolate.hl fills
- gray_f32.npy  gray in f32, 128x96: gray8.png's scene (every other pixel) at
              full precision, values in [0, 1] (examples/bilateral_grid.hl, whose
              input is f32 as in Halide's app)
- rgb16.png   16-bit RGB (the local Laplacian filter's input), the same scene
              as rgb8.png at full 16-bit precision (written with hdsl's own PNG
              codec: Pillow cannot write 16-bit colour)
- bayer16.png 16-bit gray, 288x216: a raw Bayer mosaic for examples/camera_pipe.hl,
              10-bit sensor values (black level 25, white level 1023) in the
              GRBG layout of Halide's apps/camera_pipe (green at even x of even
              rows, red at odd x, blue at even x of odd rows), made by sampling
              a colour scene (linearized, white-balanced for the sensor), with
              shot noise and a few hot pixels; the pipeline crops 16 and 12
              pixels per side, so its output is 256x192
- shapes.png  8-bit gray, 160x120: two bright objects (a disk and a rounded
              bar; the object mask is shapes_mask.npy) on a shaded, noisy
              background, for the level-set segmentation examples/level_set.py
- shapes_phi0.npy  f32, 160x120: the initial level-set function for it,
              -2 inside a rectangle 8 pixels in from the border, 2 outside
              (the input `hdsl run examples/level_set.hl` needs besides the image)
- camera_matrix_3200.npy, camera_matrix_7000.npy  the 3x4 f32 colour matrices
              (row per output channel, then an offset) of the Nokia N900 sensor
              at 3200 K and 7000 K, from Halide's apps/camera_pipe/process.cpp
              (taken there from FCam)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

WIDTH, HEIGHT = 256, 192
HERE = Path(__file__).resolve().parent
GRAY16_MAX = 65535 // 3  # so that a sum of three samples fits in u16


def scene(seed: int) -> np.ndarray:
    """A float image in [0, 1]: shading, a bright square, a dark disk, a stripe
    band and a diagonal step edge."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float64)
    u, v = x / WIDTH, y / HEIGHT
    image = 0.35 + 0.2 * np.sin(2.5 * u + 1.0) * np.cos(3.0 * v - 0.5) + 0.15 * u
    image = np.where((x > 150) & (x < 210) & (y > 30) & (y < 90), 0.9, image)
    image = np.where((x - 70) ** 2 + (y - 120) ** 2 < 35 ** 2, 0.08, image)
    stripes = (y > 150) & (y < 176) & (x > 120) & (x < 240)
    image = np.where(stripes, 0.5 + 0.35 * np.sign(np.sin(x / 3.0)), image)
    image = np.where(x + 2 * y < 110, image + 0.1, image)
    noise = np.random.RandomState(seed).normal(0.0, 0.006, size=image.shape)
    return np.clip(image + noise, 0.0, 1.0)


def write_rgb16(rgb: np.ndarray) -> None:
    import sys
    sys.path.insert(0, str(HERE.parents[1]))
    from hdsl.runtime.images import save_image
    save_image(HERE / "rgb16.png", np.round(rgb * 65535).astype(np.uint16))


def write_rgba_holes(rgb: np.ndarray) -> None:
    small = rgb[::2, ::2].astype(np.float32)
    known = np.random.RandomState(7).rand(*small.shape[:2]) < 0.1
    alpha = known.astype(np.float32)[..., None]
    np.save(HERE / "rgba_holes.npy", np.concatenate([small * alpha, alpha], axis=-1))


def write_gray_f32() -> None:
    np.save(HERE / "gray_f32.npy", scene(seed=2)[::2, ::2].astype(np.float32))


def write_bayer() -> None:
    """A 288x216 Bayer mosaic (GRBG) of a colour scene, 10-bit values in u16."""
    w, h = 288, 192 + 24
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    u, v = x / w, y / h
    base = 0.4 + 0.25 * np.sin(3.0 * u + 0.5) * np.cos(2.0 * v - 0.3)
    rgb = np.stack([base * (0.8 + 0.4 * u), base * (0.9 + 0.2 * v), base * (1.1 - 0.5 * u)], axis=-1)
    shapes = [((x - 90) ** 2 + (y - 110) ** 2 < 40 ** 2, (0.85, 0.15, 0.1)),     # red disk
              ((x > 170) & (x < 250) & (y > 40) & (y < 100), (0.15, 0.7, 0.2)),  # green square
              ((y > 150) & (y < 190) & (x > 150) & (x < 270) & (np.sin(x / 2.5) > 0), (0.1, 0.2, 0.9))]
    for mask, colour in shapes:
        rgb = np.where(mask[..., None], np.array(colour), rgb)
    linear = np.clip(rgb, 0, 1) ** 2.2
    sensor = linear * np.array([0.55, 1.0, 0.4])      # the raw channels' sensitivities
    green = ((x + y) % 2 == 0)
    red = (y % 2 == 0) & (x % 2 == 1)
    blue = (y % 2 == 1) & (x % 2 == 0)
    mosaic = np.where(green, sensor[..., 1], np.where(red, sensor[..., 0], sensor[..., 2]))
    rs = np.random.RandomState(11)
    signal = 25 + mosaic * 950
    raw = signal + rs.normal(0.0, 1.0, size=signal.shape) * np.sqrt(signal) * 0.5
    hot = rs.rand(h, w) < 0.002
    raw = np.where(hot, 1023, raw)
    Image.fromarray(np.clip(np.round(raw), 0, 1023).astype(np.uint16)).save(HERE / "bayer16.png")
    m3200 = [[1.6697, -0.2693, -0.4004, -42.4346], [-0.3576, 1.0615, 1.5949, -37.1158],
             [-0.2175, -1.8751, 6.9640, -26.6970]]
    m7000 = [[2.2997, -0.4478, 0.1706, -39.0923], [-0.3826, 1.5906, -0.2080, -25.4311],
             [-0.0888, -0.7344, 2.2832, -20.0826]]
    np.save(HERE / "camera_matrix_3200.npy", np.array(m3200, dtype=np.float32))
    np.save(HERE / "camera_matrix_7000.npy", np.array(m7000, dtype=np.float32))


def write_shapes() -> None:
    w, h = 160, 120
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    disk = (x - 52) ** 2 + (y - 58) ** 2 < 26 ** 2
    bar = (np.abs(x - 118) < 18) & (np.abs(y - 64) < 34) & \
        ~(((np.abs(x - 118) > 10) & (np.abs(y - 64) > 26)) & ((np.abs(x - 118) - 10) ** 2 + (np.abs(y - 64) - 26) ** 2 > 64))
    mask = disk | bar
    background = 0.25 + 0.1 * np.sin(x / 40.0) * np.cos(y / 30.0)
    image = np.where(mask, 0.8, background) + np.random.RandomState(13).normal(0.0, 0.02, size=(h, w))
    Image.fromarray(np.round(np.clip(image, 0, 1) * 255).astype(np.uint8)).save(HERE / "shapes.png")
    np.save(HERE / "shapes_mask.npy", mask)
    phi = np.full((h, w), 2.0, np.float32)
    phi[8:h - 8, 8:w - 8] = -2.0
    np.save(HERE / "shapes_phi0.npy", phi)


def main() -> None:
    gray16 = np.round(scene(seed=1) * GRAY16_MAX).astype(np.uint16)
    Image.fromarray(gray16).save(HERE / "gray16.png")
    Image.fromarray(np.round(scene(seed=2) * 255).astype(np.uint8)).save(HERE / "gray8.png")
    # Colour: the same layout, each channel shaded and tinted differently.
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float64)
    tint = [0.75 + 0.25 * x / WIDTH, 0.6 + 0.4 * y / HEIGHT, 1.0 - 0.5 * x / WIDTH]
    rgb = np.stack([np.clip(scene(seed=3 + k) * tint[k], 0, 1) for k in range(3)], axis=-1)
    Image.fromarray(np.round(rgb * 255).astype(np.uint8)).save(HERE / "rgb8.png")
    write_rgb16(rgb)
    write_rgba_holes(rgb)
    write_bayer()
    write_gray_f32()
    write_shapes()
    for name in ("shapes.png", "shapes_mask.npy", "shapes_phi0.npy", "gray16.png", "gray8.png", "rgb8.png", "rgb16.png", "rgba_holes.npy", "gray_f32.npy", "bayer16.png",
                 "camera_matrix_3200.npy", "camera_matrix_7000.npy"):
        print(f"{HERE / name}: {(HERE / name).stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
