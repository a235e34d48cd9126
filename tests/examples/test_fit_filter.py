"""examples/fit_filter.py: gradient descent through hdsl's gradients (docs/autodiff.md) recovers
the filter that made the target. If the gradient were wrong, descent would not reach the known
weights (their distance is checked, not just a falling loss)."""
import numpy as np

from .test_examples import EX


def _fit_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("fit_filter", EX / "fit_filter.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fit_filter_loss_falls_and_weights_reach_the_true_filter():
    mod = _fit_module()
    losses, w, w_true = mod.fit(size=40, steps=30, rate=0.5, log=lambda *_: None)
    assert losses[0] > 1e-3
    assert all(b < a for a, b in zip(losses[:15], losses[1:16]))      # falls at every early step
    assert losses[-1] < 1e-6 * losses[0]
    assert np.abs(w - w_true).max() < 1e-3


def test_true_filter_is_a_normalised_shifted_gaussian():
    w = _fit_module().true_filter()
    assert abs(w.sum() - 1) < 1e-6 and w.shape == (5, 5)
    assert w[2].argmax() == 3                   # the peak one pixel right of the centre
