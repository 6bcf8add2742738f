"""The ROI family's NCX programs, portable and CPU, against the same op on the NXC map.

An NCX map is transposed channels-last before it is read and the pooled bins are transposed
back: each platform has its own program for those transposes (a row-major layout constraint,
or on a CPU loops that write them out).  Both must give, bit for bit, the NXC op's values and
gradients, for one image and for several.
"""

import jax
import numpy as np

import jaxpool

FPN = (1 / 4, 1 / 8)


def _boxes(rng, count, size):
    corner = rng.uniform(-4, size - 8, (count, 2))
    extent = rng.uniform(1, size, (count, 2))
    return np.concatenate([corner, corner + extent], 1).astype(np.float32)


OPS = {
    "roi_align": lambda x, r, b, f: jaxpool.roi_align(
        x, r, b, 3, spatial_scale=0.5, sampling_ratio=2, data_format=f
    ),
    "psroi_align": lambda x, r, b, f: jaxpool.psroi_align(
        x, r, b, 2, spatial_scale=0.5, sampling_ratio=2, data_format=f
    ),
    "multilevel_roi_align": lambda x, r, b, f: jaxpool.multilevel_roi_align(
        x, r, b, 2, spatial_scales=FPN, sampling_ratio=2, data_format=f
    ),
}
# (op, images): one image and several take different CPU programs; every op shares the
# transposes.
CASES = [("roi_align", 1), ("roi_align", 2), ("psroi_align", 2), ("multilevel_roi_align", 2)]


def _case(rng, op, images):
    """NCX maps (a pyramid of two for multilevel_roi_align), boxes and batch indices."""
    if op == "multilevel_roi_align":
        x = [rng.standard_normal((images, 8, 40 // s, 48 // s)).astype(np.float32) for s in (4, 8)]
        rois = _boxes(rng, 6, 40)
    else:
        x = rng.standard_normal((images, 8, 11, 13)).astype(np.float32)
        rois = _boxes(rng, 5, 24)
    return x, rois, rng.integers(0, images, len(rois)).astype(np.int32)


def test_ncx_equals_nxc(program):
    """Every case in one program per layout: the same bits, values and gradients."""
    rng = np.random.default_rng(3)
    cases = {f"{op}-{images}": (op, *_case(rng, op, images)) for op, images in CASES}
    cts = {}
    for name, (op, x, rois, batch) in cases.items():
        shape = jax.eval_shape(lambda a, op=op, r=rois, b=batch: OPS[op](a, r, b, "NCX"), x).shape
        cts[name] = rng.standard_normal(shape).astype(np.float32)

    def every(maps, cts, data_format):
        out = {}
        for name, (op, _, rois, batch) in cases.items():
            y, pullback = jax.vjp(
                lambda a, op=op, r=rois, b=batch: OPS[op](a, r, b, data_format), maps[name]
            )
            out[name] = y, pullback(cts[name])[0]
        return out

    def to_nxc(tree):
        return jax.tree.map(lambda a: np.moveaxis(a, 1, -1), tree)

    maps = {name: case[1] for name, case in cases.items()}
    pool = jax.jit(every, static_argnums=2)
    ncx, nxc = pool(maps, cts, "NCX"), pool(to_nxc(maps), to_nxc(cts), "NXC")
    for name in cases:
        for a, b in zip(jax.tree.leaves(ncx[name]), jax.tree.leaves(nxc[name]), strict=True):
            np.testing.assert_array_equal(a, np.moveaxis(np.asarray(b), -1, 1), err_msg=name)
