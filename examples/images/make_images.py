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
- rgb16.png   16-bit RGB (the local Laplacian filter's input), the same scene
              as rgb8.png at full 16-bit precision (written with hdsl's own PNG
              codec: Pillow cannot write 16-bit colour)
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
    for name in ("gray16.png", "gray8.png", "rgb8.png", "rgb16.png", "rgba_holes.npy"):
        print(f"{HERE / name}: {(HERE / name).stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
