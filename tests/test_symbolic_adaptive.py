"""Adaptive sampling (``sampling_ratio=0``) with a symbolic box count ``R`` under ``jax.export``.

Each row exports a region op with the gradient in its features of ``sum(sin(op))``, one
program for every platform at once with ``R`` symbolic (``jax.export.symbolic_args_specs``),
and calls the artifact at two box counts: the same bits as the direct call.  The boxes are of
every kind adaptive sampling meets: inside the map, across its border, larger than it (a bin
then holds more samples than the map has rows), of zero or negative size.  The features are
channels-last.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

import jaxpool

# The serving tier: every op exported for three platforms or compiled per layout, program and
# sharding (`-m serving`; CI runs it beside the op tests).
pytestmark = pytest.mark.serving

PLATFORMS = ("cpu", "cuda", "tpu")
HEIGHT, WIDTH = 9, 11


def _boxes(rng: np.random.Generator, count: int, scale: float = 1.0) -> np.ndarray:
    """``(x_1, y_1, x_2, y_2)`` boxes on a map of ``HEIGHT x WIDTH`` (after ``scale``): sizes
    from 0 to three times the map, some across its border, one inverted."""
    size = rng.uniform(0, 3, (count, 2)) * np.array([WIDTH, HEIGHT])
    corner = rng.uniform(-0.5, 1, (count, 2)) * np.array([WIDTH, HEIGHT])
    boxes = np.concatenate([corner, corner + size], 1)
    boxes[0, 2:] = boxes[0, :2] - 1.5
    return (boxes / scale).astype(np.float32)


def _rotated(rng: np.random.Generator, count: int) -> np.ndarray:
    """``(center_x, center_y, width, height, angle)`` boxes, up to three times the map."""
    center = rng.uniform(0, 1, (count, 2)) * np.array([WIDTH, HEIGHT])
    size = rng.uniform(0, 3, (count, 2)) * np.array([WIDTH, HEIGHT])
    return np.concatenate([center, size, rng.uniform(-3, 3, (count, 1))], 1).astype(np.float32)


def _features(channels: int, height: int = HEIGHT, width: int = WIDTH, seed: int = 0):
    rng = np.random.default_rng(seed)
    return jnp.asarray(rng.standard_normal((2, height, width, channels)), jnp.float32)


# name -> (function of (features, rois, batch_indices), features, the boxes for a box count R:
# a function of (rng, R), of shape [R, columns], or [2, R, columns] for two sets under vmap).
ROWS = {
    "roi_align avg": (
        lambda x, r, b: jaxpool.roi_align(x, r, b, (2, 3), spatial_scale=0.5, data_format="NXC"),
        _features(3),
        lambda rng, n: _boxes(rng, n, 0.5),
    ),
    "roi_align max": (
        lambda x, r, b: jaxpool.roi_align(x, r, b, 2, mode="max", data_format="NXC"),
        _features(3),
        _boxes,
    ),
    "roi_align avg, vmap over box sets": (
        jax.vmap(
            lambda x, r, b: jaxpool.roi_align(x, r, b, 2, data_format="NXC"), in_axes=(None, 0, 0)
        ),
        _features(3),
        lambda rng, n: np.stack([_boxes(rng, n), _boxes(rng, n)]),
    ),
    "roi_align avg, vmap over images": (
        jax.vmap(
            lambda x, r, b: jaxpool.roi_align(x, r, b, 2, data_format="NXC"),
            in_axes=(0, None, None),
        ),
        jnp.stack([_features(3), _features(3, seed=2)]),
        _boxes,
    ),
    "psroi_align": (
        lambda x, r, b: jaxpool.psroi_align(x, r, b, 2, data_format="NXC"),
        _features(8),
        _boxes,
    ),
    "roi_align_rotated": (
        lambda x, r, b: jaxpool.roi_align_rotated(x, r, b, 2, data_format="NXC"),
        _features(3),
        _rotated,
    ),
    "multilevel_roi_align": (
        lambda x, r, b: jaxpool.multilevel_roi_align(
            x, r, b, 2, spatial_scales=(1 / 2, 1 / 4), canonical_size=8, data_format="NXC"
        ),
        (_features(3), _features(3, (HEIGHT + 1) // 2, (WIDTH + 1) // 2, seed=1)),
        lambda rng, n: _boxes(rng, n, 0.5),
    ),
}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_symbolic_box_count(name):
    fn, x, boxes = ROWS[name]
    rng = np.random.default_rng(sorted(ROWS).index(name))
    inputs = {}
    for count in (3, 7):
        rois = boxes(rng, count)
        batch = rng.integers(0, 2, rois.shape[:-1]).astype(np.int32)
        inputs[count] = (x, jnp.asarray(rois), jnp.asarray(batch))
    box_axes = "s, r" if inputs[3][1].ndim == 3 else "r"
    specs = export.symbolic_args_specs(inputs[3], (None, f"{box_axes}, _", box_axes))

    @jax.jit
    def program(x, r, b):
        """``fn`` and the gradient in its features of ``sum(sin(fn))``."""
        y, pullback = jax.vjp(lambda a: fn(a, r, b), x)
        return y, pullback(jnp.cos(y))[0]

    exported = export.export(program, platforms=PLATFORMS)(*specs)
    assert "r" in str(exported.in_avals[-2].shape)
    for args in inputs.values():
        got, want = exported.call(*args), program(*args)
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    # The boxes read the map: the values at R = 7 are not all zeros.
    assert np.abs(np.asarray(want[0])).max() > 0
