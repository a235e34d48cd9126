"""Fit a 5x5 filter to a target image by gradient descent through hdsl's gradients.

    python examples/fit_filter.py                      # 256x256 noise, 60 steps
    python examples/fit_filter.py --size 512 --steps 100 --rate 0.3

The target is the image blurred by a known filter (a Gaussian plus a shift); starting
from zero weights, each step runs the compiled gradient pipeline of examples/fit_filter.hl
(`p.gradient("loss", ["w"])`: the loss and d loss / d w, derived by hdsl) and moves the
weights against the gradient. The loss falls and the weights approach the known filter.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import hdsl                                                     # noqa: E402


def true_filter() -> np.ndarray:
    """A 5x5 Gaussian (sigma 1) shifted one pixel right, as w[j, i] (rows are dy, columns dx)."""
    g = np.exp(-0.5 * np.arange(-2, 3) ** 2)
    k = np.outer(g, np.roll(g, 1))
    return (k / k.sum()).astype(np.float32)


def fit(size: int = 256, steps: int = 60, rate: float = 0.5, target: str = "host", seed: int = 0,
        log=print):
    """(losses per step, fitted weights, true weights)."""
    rng = np.random.default_rng(seed)
    img = rng.uniform(-1, 1, (size, size)).astype(np.float32)
    p = hdsl.load(ROOT / "examples" / "fit_filter.hl")
    forward = p.compile(target) if target != "interp" else p
    w_true = true_filter()
    goal = forward(img=img, w=w_true, target=img)          # the target: img under the known filter
    grad = p.gradient("loss", ["w"])
    grad = grad.compile(target) if target != "interp" else grad
    w = np.zeros((5, 5), np.float32)
    losses = []
    for step in range(steps):
        t0 = time.perf_counter()
        r = grad(img=img, w=w, target=goal)
        dt = time.perf_counter() - t0
        losses.append(r["loss"])
        w = (w - rate * r["w"]).astype(np.float32)
        if step % 10 == 0 or step == steps - 1:
            log(f"step {step:3d}  loss {r['loss']:.3e}  |w - w_true| {np.abs(w - w_true).max():.2e}  "
                f"({dt * 1e3:.1f} ms)")
    return losses, w, w_true


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--rate", type=float, default=0.5)
    ap.add_argument("--target", default="host", help="host (native) or interp (the reference evaluator)")
    a = ap.parse_args(argv)
    losses, w, w_true = fit(a.size, a.steps, a.rate, a.target)
    print(f"loss {losses[0]:.3e} -> {losses[-1]:.3e}")
    print("fitted weights:\n" + np.array2string(w, precision=3, suppress_small=True))


if __name__ == "__main__":
    main()
