"""Averaging a static grid of bilinear samples per bin, and its transpose.

A grid is given by its corners: ``y_index``/``y_weight`` of shape ``(R, out_h, S_h, out_w,
S_w, K)`` or broadcastable to it (``S`` samples per bin and axis, ``K`` corners per sample
and axis: 2 for a bilinear sample, 1 for an element of an adaptive bin's window), as
``x_index``/``x_weight``, and ``lead``, integer arrays that index the axes of the
channels-last map ``xt`` before its rows and columns (the batch index, and for
position-sensitive pooling the bin) and broadcast to ``(R, out_h, out_w)``.  Weights are
pre-divided by the sample count, so that a bin's average is the sum of its weighted reads.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import bilinear

# Bins whose samples take at most this many reads (corners) are pooled by one chain of
# elementwise sums, which XLA fuses with the reads into one loop.  Larger bins are pooled by a
# loop over tiles of their samples, each tile a chain: one chain would grow the program (and
# its compile time) with the sample count, and one read of every sample would write a buffer
# of (boxes x bins x samples x channels).
UNROLLED_READS = 64
# The side of those tiles, in samples.
TILE_SIDE = 4


def samples(a: jax.Array, axis: int) -> int:
    """The samples per bin of a corner array along a grid axis (2: rows, 4: columns)."""
    return a.shape[axis]


def grid_shape(y_index: jax.Array, x_index: jax.Array) -> tuple[int, int, int, int]:
    """``(S_h, S_w, K_h, K_w)`` of a grid."""
    s_h = max(samples(y_index, 2), samples(x_index, 2))
    s_w = max(samples(y_index, 4), samples(x_index, 4))
    return s_h, s_w, y_index.shape[-1], x_index.shape[-1]


def pool_samples(
    xt: jax.Array,
    lead: tuple[jax.Array, ...],
    y_index: jax.Array,
    y_weight: jax.Array,
    x_index: jax.Array,
    x_weight: jax.Array,
) -> jax.Array:
    """The sum of each bin's weighted samples (its average): ``(R, out_h, out_w, C)``."""
    s_h, s_w, k_h, k_w = grid_shape(y_index, x_index)
    if s_h * s_w * k_h * k_w > UNROLLED_READS:
        return _tiles(xt, lead, y_index, y_weight, x_index, x_weight)
    return _chain_average(xt, lead, y_index, y_weight, x_index, x_weight)


def chain(xt, lead, y_index, y_weight, x_index, x_weight) -> jax.Array:
    """The sum over a grid of samples as one chain of reads, each weighted and added."""
    s_h, s_w, _, _ = grid_shape(y_index, x_index)
    total = None
    for k, m in itertools.product(range(s_h), range(s_w)):
        ky, my = min(k, samples(y_index, 2) - 1), min(m, samples(y_index, 4) - 1)
        kx, mx = min(k, samples(x_index, 2) - 1), min(m, samples(x_index, 4) - 1)
        value = bilinear.bilinear_samples(
            xt,
            tuple(lead),
            y_index[:, :, ky, :, my],
            y_weight[:, :, ky, :, my],
            x_index[:, :, kx, :, mx],
            x_weight[:, :, kx, :, mx],
        )
        total = value if total is None else total + value
    assert total is not None
    return total


def _stacked(xt, lead, y_index, y_weight, x_index, x_weight) -> jax.Array:
    """The sum over a grid as one read of every sample, then a reduction."""
    values = bilinear.bilinear_samples(
        xt,
        tuple(i[:, :, None, :, None] for i in lead),
        y_index,
        y_weight,
        x_index,
        x_weight,
        one_read=True,
    )
    return values.sum((2, 4))


@jax.custom_jvp
def _chain_average(xt, lead, y_index, y_weight, x_index, x_weight):
    """:func:`chain`, differentiated in ``xt`` as the stacked read.

    The chain's own transpose would scatter each of its reads into a map of its own and add
    the maps; the stacked read's transpose is one scatter.
    """
    return chain(xt, lead, y_index, y_weight, x_index, x_weight)


@functools.partial(_chain_average.defjvp, symbolic_zeros=True)
def _chain_average_jvp(primals, tangents):
    xt, lead, y_index, y_weight, x_index, x_weight = primals
    xt_dot, _, _, y_weight_dot, _, x_weight_dot = tangents
    y = _chain_average(*primals)
    zero = jax.custom_derivatives.SymbolicZero
    y_dot = jnp.zeros_like(y)
    if not isinstance(xt_dot, zero):
        y_dot = y_dot + _stacked(xt_dot, lead, y_index, y_weight, x_index, x_weight)
    # The average is bilinear in the features and the weights.
    if not isinstance(y_weight_dot, zero):
        y_dot = y_dot + chain(xt, lead, y_index, y_weight_dot, x_index, x_weight)
    if not isinstance(x_weight_dot, zero):
        y_dot = y_dot + chain(xt, lead, y_index, y_weight, x_index, x_weight_dot)
    return y, y_dot


def _tiles(xt, lead, y_index, y_weight, x_index, x_weight):
    """:func:`pool_samples` as a loop over tiles of ``TILE_SIDE`` samples per axis, each tile
    pooled by the chain."""
    s_h, s_w, _, _ = grid_shape(y_index, x_index)
    tile_h, tile_w = min(TILE_SIDE, s_h), min(TILE_SIDE, s_w)
    grid_h, grid_w = -(-s_h // tile_h) * tile_h, -(-s_w // tile_w) * tile_w

    def tiled(a: jax.Array) -> jax.Array:
        # Samples past the grid read element 0 with weight 0.
        pads = [(0, 0)] * a.ndim
        if a.shape[2] > 1:
            pads[2] = (0, grid_h - a.shape[2])
        if a.shape[4] > 1:
            pads[4] = (0, grid_w - a.shape[4])
        return jnp.pad(a, pads)

    corners = [tiled(a) for a in (y_index, y_weight, x_index, x_weight)]

    def piece(a: jax.Array, top: Any, left: Any) -> jax.Array:
        if a.shape[2] > 1:
            a = lax.dynamic_slice_in_dim(a, top, tile_h, 2)
        if a.shape[4] > 1:
            a = lax.dynamic_slice_in_dim(a, left, tile_w, 4)
        return a

    def tile(pooled, start):
        # Recomputed in the derivative, so that a tile's reads leave nothing to store per tile.
        @functools.partial(jax.checkpoint, policy=jax.checkpoint_policies.nothing_saveable)
        def pool(pooled):
            grid = [piece(a, start[0], start[1]) for a in corners]
            return pooled + _chain_average(xt, lead, *grid)

        return pool(pooled), None

    tops, lefts = np.meshgrid(np.arange(0, s_h, tile_h), np.arange(0, s_w, tile_w), indexing="ij")
    starts = jnp.asarray(np.stack([tops.ravel(), lefts.ravel()], 1), np.int32)
    shape = jnp.broadcast_shapes(y_index.shape[:2], x_index.shape[:2])
    shape += (max(y_index.shape[3], x_index.shape[3]), xt.shape[-1])
    zeros = jnp.zeros(shape, jnp.result_type(y_weight, x_weight))
    return lax.scan(tile, zeros, starts)[0]


def scatter_grid(
    dxt: jax.Array,
    lead: tuple[jax.Array, ...],
    y_index: jax.Array,
    y_weight: jax.Array,
    x_index: jax.Array,
    x_weight: jax.Array,
    ct: jax.Array,
) -> jax.Array:
    """``dxt`` plus the transpose of :func:`chain` at ``ct``: the cotangent of every read
    added to ``dxt`` in place, one read of every bin after another.

    One scatter of every read would write out all their updates first (boxes x bins x reads x
    channels); a loop of one scatter per read keeps a single read's updates.
    """
    s_h, s_w, k_h, k_w = grid_shape(y_index, x_index)

    def add(dxt, k):
        # Read k is sample (row, column) of the grid, corner (a, b), in row-major order.
        reads, width, corners = (np.int32(v) for v in (k_h * k_w, s_w, k_w))
        sample, corner = lax.div(k, reads), lax.rem(k, reads)
        row, column = lax.div(sample, width), lax.rem(sample, width)
        a, b = lax.div(corner, corners), lax.rem(corner, corners)
        y_i, y_w = (_read(v, row, column, a) for v in (y_index, y_weight))
        x_i, x_w = (_read(v, row, column, b) for v in (x_index, x_weight))
        update = ((y_w * x_w)[..., None] * ct).astype(dxt.dtype)
        return dxt.at[tuple(lead) + (y_i, x_i)].add(update, mode="clip"), None

    reads = jnp.arange(s_h * s_w * k_h * k_w, dtype=np.int32)
    return lax.scan(add, dxt, reads)[0]


def _read(a: jax.Array, row: Any, column: Any, corner: Any) -> jax.Array:
    """Sample ``(row, column)``, corner ``corner`` of a corner array ``(R, out_h, S_h, out_w,
    S_w, K)`` (a sample axis of 1 broadcast): ``(R, out_h, out_w)``."""
    if a.shape[2] > 1:
        a = lax.dynamic_index_in_dim(a, row, 2)
    if a.shape[4] > 1:
        a = lax.dynamic_index_in_dim(a, column, 4)
    return lax.dynamic_index_in_dim(a, corner, 5, False)[:, :, 0, :, 0]
