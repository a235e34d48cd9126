"""Every boundary condition of `use boundary` on 1-, 2- and 3-D inputs, read
at strided coordinates that reach several periods outside the buffer on both
sides. References are the index maps of Halide's BoundaryConditions."""
from __future__ import annotations

import numpy as np
import pytest

from .helpers import assert_same, program, rand_image



def exterior(t: str) -> int:
    return 7 if t.startswith("u") else -7


def idx_repeat_edge(i, n):
    return np.clip(i, 0, n - 1)


def idx_repeat_image(i, n):
    return np.mod(i, n)                  # ... n-1 | 0 1 ... n-1 | 0 1 ...


def idx_mirror_image(i, n):
    m = np.mod(i, 2 * n)                 # ... 1 0 | 0 1 ... n-1 | n-1 n-2 ...
    return np.where(m < n, m, 2 * n - 1 - m)


def idx_mirror_interior(i, n):
    if n == 1:
        return np.zeros_like(i)
    m = np.mod(i, 2 * (n - 1))           # ... 2 1 | 0 1 ... n-1 | n-2 n-3 ...
    return np.where(m < n, m, 2 * (n - 1) - m)


INDEX_MAPS = {
    "repeat_edge": idx_repeat_edge,
    "repeat_image": idx_repeat_image,
    "mirror_image": idx_mirror_image,
    "mirror_interior": idx_mirror_interior,
}

# (type, numpy dtype) per dimensionality, so that several element types are used
TYPES = {1: ("u8", np.uint8), 2: ("i16", np.int16), 3: ("f32", np.float32)}
VARS = "xyc"


def bc_program(bc: str, dims: int) -> str:
    t = TYPES[dims][0]
    args = ", ".join(VARS[:dims])
    coords = ", ".join(f"{v} * s{v} + o{v}" for v in VARS[:dims])
    params = "\n".join(f"param s{v}: i32 = 1\nparam o{v}: i32 = 0" for v in VARS[:dims])
    call = f"constant_exterior(img, {exterior(t)})" if bc == "constant_exterior" else f"{bc}(img)"
    return f"""
pipeline bc_{bc}_{dims}d
use boundary
input img: {t}[{dims}]
{params}
output out: {t}[{dims}]
algorithm {{
    b = {call}
    out({args}) = b({coords})
}}
"""


def reference(bc, img_xyc, coords):
    """img indexed [x, y, c] read at integer coordinate arrays, one per dim."""
    shape = img_xyc.shape
    if bc == "constant_exterior":
        inside = np.ones(np.broadcast(*coords).shape, bool)
        clipped = []
        for c, n in zip(coords, shape):
            inside &= (c >= 0) & (c < n)
            clipped.append(np.clip(c, 0, n - 1))
        return np.where(inside, img_xyc[tuple(clipped)], img_xyc.dtype.type(exterior('u' if img_xyc.dtype.kind == 'u' else 'i')))
    f = INDEX_MAPS[bc]
    return img_xyc[tuple(f(c, n) for c, n in zip(coords, shape))]


# input shapes in NumPy layout: (W,), (H, W), (H, W, C); extent 1 and 2 exercise the degenerate periods
SHAPES = {1: [(7,), (1,), (2,)], 2: [(5, 7), (1, 4), (3, 2)], 3: [(5, 3, 3), (2, 1, 4)]}
# (stride, offset) per dim: the output of extent E covers offset .. offset + stride * (E - 1)
WALKS = [(1, -23), (3, -40), (-5, 31)]


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("bc", ["repeat_edge", "constant_exterior", "mirror_image", "mirror_interior",
                                "repeat_image"])
def test_boundary_condition(rng, bc, dims):
    p = program(bc_program(bc, dims), f"bc_{bc}_{dims}d.hl")
    dtype = TYPES[dims][1]
    for np_shape in SHAPES[dims]:
        img = rand_image(rng, np_shape, dtype)
        img_xyc = img if dims == 1 else np.swapaxes(img, 0, 1)       # [x, y, (c)]
        lo, hi = 0, 0
        for stride, offset in WALKS:
            out_size = [31, 17, 9][:dims]                 # in x, y, c order
            kw = {}
            for d, v in enumerate(VARS[:dims]):
                # vary per dim so that the dims can't be confused
                kw[f"s{v}"] = stride + (d if stride > 0 else -d)
                kw[f"o{v}"] = offset - 3 * d
            out = p.realize(tuple(out_size), img=img, **kw)
            coords = []
            for d, v in enumerate(VARS[:dims]):
                shape = [1] * dims
                shape[d] = out_size[d]
                coords.append((np.arange(out_size[d]) * kw[f"s{v}"] + kw[f"o{v}"]).reshape(shape))
            ref_xyc = reference(bc, img_xyc, coords)
            ref = ref_xyc if dims == 1 else np.swapaxes(ref_xyc, 0, 1)
            lo = min([lo] + [int(c.min()) for c in coords])
            hi = max([hi] + [int(c.max()) for c in coords])
            assert_same(out, ref)
        # far away: several periods outside on both sides
        assert lo < -3 * max(np_shape) and hi > 3 * max(np_shape)


def test_boundary_inside_is_identity(rng):
    """Inside the buffer every condition reads the input itself."""
    img = rand_image(rng, (7, 9), np.int16)
    for bc in ["repeat_edge", "constant_exterior", "mirror_image", "mirror_interior", "repeat_image"]:
        p = program(bc_program(bc, 2))
        assert_same(p(img=img), img)


def test_constant_exterior_with_param_value(rng):
    p = program("""
pipeline ce
use boundary
input img: f32[2]
param v: f32 = 0.5
output out: f32[2]
algorithm {
    b = constant_exterior(img, v)
    out(x, y) = b(x - 2, y + 1)
}
""")
    img = rand_image(rng, (5, 6), np.float32)
    out = p(img=img, v=-2.25)
    ref = np.full((5, 6), -2.25, np.float32)
    ref[:4, 2:] = img[1:5, 0:4]
    assert_same(out, ref)
