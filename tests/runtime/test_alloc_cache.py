"""Root storage comes from the runtime's allocator, which keeps large freed blocks for the
next run: runs of different sizes reusing them must still compute exactly."""
from __future__ import annotations

import numpy as np

import hdsl

TEXT = """
pipeline big
input  img: i32[2]
output out: i32[2]
algorithm {
    f(x, y) = img(x, y) * 3 + x
    g(x, y) = f(x, y) - y
    out(x, y) = g(x, y) + f(x, y)
}
schedule {
    f.compute_root().parallel(y)
    g.compute_root().vectorize(x, 8)
}
"""


def test_runs_of_changing_sizes_reuse_storage_correctly():
    c = hdsl.loads(TEXT, "big.hl").compile("host")
    rng = np.random.RandomState(0)
    # 4-8 MB per root Func: large enough for the cache; sizes go up, down and back
    for w, h in ((1200, 900), (600, 1000), (1304, 1100), (1200, 900), (640, 480)):     # (x rounds up to 8)
        img = rng.randint(-1000, 1000, (h, w)).astype(np.int32)
        xs = np.arange(w, dtype=np.int32)[None, :]
        ys = np.arange(h, dtype=np.int32)[:, None]
        f = img * 3 + xs
        assert np.array_equal(c(img=img), (f - ys) + f)
