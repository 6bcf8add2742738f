"""The ROI family's NCX programs, portable and CPU, against the same op on the NXC map.

An NCX map is transposed channels-last before it is read and the pooled bins are transposed
back: each platform has its own program for those transposes (a row-major layout constraint,
or on a CPU loops that write them out).  Both must give, bit for bit, the NXC op's values and
gradients, for one image and for several.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

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
}


# One image and several take different CPU programs; every op shares the transposes.
@pytest.mark.parametrize("op,images", [("roi_align", 1), ("roi_align", 2), ("psroi_align", 2)])
def test_ncx_equals_nxc(op, images, program):
    rng = np.random.default_rng(images)
    x = rng.standard_normal((images, 8, 11, 13)).astype(np.float32)
    rois = _boxes(rng, 5, 24)
    batch = rng.integers(0, images, 5).astype(np.int32)
    f = OPS[op]

    def pooled(a, fmt):
        return f(a, rois, batch, fmt)

    ncx = jax.jit(pooled, static_argnums=1)(x, "NCX")
    nxc = jax.jit(pooled, static_argnums=1)(np.moveaxis(x, 1, -1), "NXC")
    np.testing.assert_array_equal(ncx, np.moveaxis(np.asarray(nxc), -1, 1))
    ct = rng.standard_normal(ncx.shape).astype(np.float32)
    g_ncx = jax.grad(lambda a: jnp.sum(pooled(a, "NCX") * ct))(x)
    g_nxc = jax.grad(lambda a: jnp.sum(pooled(a, "NXC") * np.moveaxis(ct, 1, -1)))(
        np.moveaxis(x, 1, -1)
    )
    np.testing.assert_array_equal(g_ncx, np.moveaxis(np.asarray(g_nxc), -1, 1))


def test_multilevel_ncx_equals_nxc(program):
    rng = np.random.default_rng(3)
    maps = [rng.standard_normal((2, 8, 40 // s, 48 // s)).astype(np.float32) for s in (4, 8)]
    rois = _boxes(rng, 6, 40)
    batch = rng.integers(0, 2, 6).astype(np.int32)

    def pooled(levels, fmt):
        return jaxpool.multilevel_roi_align(
            levels, rois, batch, 2, spatial_scales=FPN, sampling_ratio=2, data_format=fmt
        )

    nxc_maps = [np.moveaxis(m, 1, -1) for m in maps]
    ncx = jax.jit(pooled, static_argnums=1)(maps, "NCX")
    nxc = jax.jit(pooled, static_argnums=1)(nxc_maps, "NXC")
    np.testing.assert_array_equal(ncx, np.moveaxis(np.asarray(nxc), -1, 1))
    ct = rng.standard_normal(ncx.shape).astype(np.float32)
    g_ncx = jax.grad(lambda m: jnp.sum(pooled(m, "NCX") * ct))(maps)
    g_nxc = jax.grad(lambda m: jnp.sum(pooled(m, "NXC") * np.moveaxis(ct, 1, -1)))(nxc_maps)
    for a, b in zip(g_ncx, g_nxc, strict=True):
        np.testing.assert_array_equal(a, np.moveaxis(np.asarray(b), -1, 1))
