"""ROIAlign's maxima over the samples of each bin, and their derivative.

Two maxima: OpenVINO's (``mode="max"``), the largest sample of a bin, starting from 0; and ONNX
Runtime's RoiAlign max (``"onnx_max"``), the largest weighted corner term ``w_k * x_k`` of a
bin's samples, starting from the first.  Both runtimes visit the samples in row-major order
(and a sample's corners so) and keep the first strictly larger value, so that ties go to the
first and a NaN counts only where it is the first value of ONNX's maximum.

A search that carries no derivative visits the samples in that order and records, per output
element, the sample (and for ONNX the corner) that wins; the derivative is that of the
winner's value, read again at the winner alone: a gather whose transpose is one scatter,
whatever the number of samples.  The search loops over the rows of samples of every bin, a
row per trip, and with adaptive sampling over tiles of ``MAX_TILE`` slots of a row
(:meth:`jaxpool._src.sample_axes.Axis.sample`) until the largest bin of any box is covered.
"""

from __future__ import annotations

import functools
import itertools
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.custom_derivatives import SymbolicZero

from jaxpool._src import bilinear
from jaxpool._src import roi_frame as frame
from jaxpool._src import roi_numerics as numerics

if TYPE_CHECKING:
    from jaxpool._src.sample_axes import Axis

# Slots per tile of the adaptive search: 2 samples of 4 corners each, the reads of one row of
# a bin of sampling ratio 2.
MAX_TILE = 2


def pool_maxima(
    xt: jax.Array, lead: tuple[jax.Array, ...], y: Axis, x: Axis, keep: jax.Array, mode: str
) -> jax.Array:
    """The maximum (``mode``: ``"max"`` or ``"onnx_max"``) of each bin's samples, ``(R, out_h,
    out_w, C)``; ``keep`` (``[R]`` bools) zeroes the boxes that read nothing."""
    pooled = _maxima(xt, lead, y, x, keep, mode)
    if mode == "onnx_max":
        # ONNX's maximum is no term of a bin with no samples (0 in the runtime) or of a box
        # that reads nothing.
        held = keep & (y.count > 0) & (x.count > 0)
        pooled = jnp.where(held[:, None, None, None], pooled, jnp.zeros_like(pooled))
    return pooled


@functools.partial(jax.custom_jvp, nondiff_argnums=(5,))
def _maxima(xt, lead, y, x, keep, mode):
    return _search(xt, lead, y, x, keep, mode)[0]


@functools.partial(_maxima.defjvp, symbolic_zeros=True)
def _maxima_jvp(mode, primals, tangents):
    xt, lead, y, x, keep = primals
    value, winner, width = _search(xt, lead, y, x, keep, mode)
    # The derivative of the winner's value, in the inputs that have a tangent only.
    leaves, tree = jax.tree_util.tree_flatten((xt, y, x))
    dots = jax.tree_util.tree_leaves((tangents[0], tangents[2], tangents[3]))
    moved = [i for i, d in enumerate(dots) if not isinstance(d, SymbolicZero)]

    def at(*values):
        full = list(leaves)
        for i, v in zip(moved, values):
            full[i] = v
        xt, y, x = jax.tree_util.tree_unflatten(tree, full)
        return _at_winner(xt, lead, y, x, keep, winner, width, mode)

    if not moved:
        return value, jnp.zeros_like(value)
    _, dot = jax.jvp(at, [leaves[i] for i in moved], [dots[i] for i in moved])
    return value, dot


def _layout(y: Axis, x: Axis, ends: bool) -> tuple[int, int, Any, Any]:
    """``(side_y, side_x, tiles_x, trips)`` of the search: tiles of one row of slots, a fixed
    ratio's rows whole, adaptive rows in tiles of ``MAX_TILE``.

    The search is a loop even where its trips are static: its results are then computed once,
    where XLA would otherwise repeat the chain in each of the derivative's uses of the winner.
    """
    if y.adaptive:
        tiles_x = x.tiles(MAX_TILE, ends)
        return 1, MAX_TILE, tiles_x, y.tiles(1, ends) * tiles_x
    return 1, y.top, 1, y.top


def _search(xt, lead, y: Axis, x: Axis, keep, mode):
    """The maxima ``(R, out_h, out_w, C)`` and their winners (int32, -1 for none): the slot
    ``row * width + column`` of the winning sample, times 4 plus its corner for ONNX; and
    ``width``."""
    onnx = mode == "onnx_max"
    ends = onnx and y.adaptive
    side_y, side_x, tiles_x, trips = _layout(y, x, ends)
    width = tiles_x * side_x

    def tile(t, carry):
        best, winner = carry
        t, tiles = jnp.asarray(t, np.int32), jnp.asarray(tiles_x, np.int32)
        top, left = lax.div(t, tiles) * side_y, lax.rem(t, tiles) * side_x
        y_index, y_weight, y_held = y.corners(top, side_y, ends)
        x_index, x_weight, x_held = x.corners(left, side_x, ends)
        y_weight = y_weight * keep.astype(y_weight.dtype)[:, None, None, None]
        for k, m in itertools.product(range(side_y), range(side_x)):
            grid = (
                y_index[:, :, k, None],
                y_weight[:, :, k, None],
                x_index[:, None, :, m],
                x_weight[:, None, :, m],
            )
            slot = (top + k) * width + left + m
            held = (y_held[:, :, k, None] > 0) & (x_held[:, None, :, m] > 0)
            if onnx:
                grid = _outside_reads_origin(*grid, y.offset, x.offset)
                value, corner = _largest_term(xt, lead, *grid)
                larger = (value > best) | (slot == 0)
                code = slot * 4 + corner
            else:
                value = bilinear.bilinear_samples(xt, lead, *grid)
                larger, code = value > best, slot
            larger = larger & held[..., None]
            best = jnp.where(larger, value, best)
            winner = jnp.where(larger, code, winner)
        return best, winner

    shape = (*y.first.shape, x.first.shape[1], xt.shape[-1])
    init = (jnp.zeros(shape, y.first.dtype), jnp.full(shape, -1, np.int32))
    best, winner = lax.fori_loop(0, trips, tile, init)
    return best, winner, width


def _largest_term(xt, lead, y_index, y_weight, x_index, x_weight):
    """The largest weighted corner term of each sample, as ONNX Runtime takes it (corners in
    row-major order, each replacing the running value only where strictly larger), and its
    corner ``2 * a + b``."""
    best = corner = None
    for a, b in itertools.product(range(2), range(2)):
        weight = (y_weight[..., a] * x_weight[..., b])[..., None]
        term = weight * frame.read(xt, *lead, y_index[..., a], x_index[..., b]).astype(weight.dtype)
        if best is None or corner is None:
            best, corner = term, jnp.zeros(term.shape, np.int32)
            continue
        larger = term > best
        best = jnp.where(larger, term, best)
        corner = jnp.where(larger, 2 * a + b, corner)
    return best, corner


def _at_winner(xt, lead, y: Axis, x: Axis, keep, winner, width, mode) -> jax.Array:
    """The value of each output element's winner, read from ``xt`` at it alone (0 where none
    wins): the sum of its four weighted corners, or for ONNX its winning corner term."""
    onnx = mode == "onnx_max"
    slot = jnp.maximum(winner // 4 if onnx else winner, 0)
    width = jnp.asarray(width, np.int32)
    y_index, y_weight = _corners_at(y.expanded(4, 1), lax.div(slot, width), onnx)
    x_index, x_weight = _corners_at(x.expanded(4, 2), lax.rem(slot, width), onnx)
    y_weight = y_weight * keep.astype(y_weight.dtype)[:, None, None, None, None]
    if onnx:
        corners = _outside_reads_origin(y_index, y_weight, x_index, x_weight, y.offset, x.offset)
        y_index, y_weight, x_index, x_weight = corners
        # The winning corner alone.
        low_y, low_x = (winner % 4 < 2)[..., None], (winner % 2 == 0)[..., None]
        y_index, y_weight = (jnp.where(low_y, v[..., :1], v[..., 1:]) for v in (y_index, y_weight))
        x_index, x_weight = (jnp.where(low_x, v[..., :1], v[..., 1:]) for v in (x_index, x_weight))
    # Each channel reads its own elements, all corners in one gather: the channel is a batch
    # axis of the gather (and of its transpose), which a channel-sharded map keeps local.
    lead = tuple(i[..., None, None] for i in lead)
    read = jax.vmap(
        lambda plane, i, j: plane[lead + (i[..., :, None], j[..., None, :])],
        in_axes=(-1, 3, 3),
        out_axes=3,
    )
    weight = y_weight[..., :, None] * x_weight[..., None, :]
    value = (weight * read(xt, y_index, x_index).astype(weight.dtype)).sum((-2, -1))
    return jnp.where(winner >= 0, value, jnp.zeros_like(value))


def _corners_at(axis: Axis, slot: jax.Array, onnx: bool) -> tuple[jax.Array, jax.Array]:
    """The corners ``(..., 2)`` of the samples in ``slot`` of an expanded axis."""
    s, _ = axis.sample(slot, onnx and axis.adaptive)
    position = axis.position(s)
    index, weight = bilinear.axis_corners(position, numerics.as_dtype(axis.length, position.dtype))
    offset = axis.offset if isinstance(axis.offset, int) else axis.offset[..., None]
    return index + offset, weight


def _outside_reads_origin(
    y_index: jax.Array,
    y_weight: jax.Array,
    x_index: jax.Array,
    x_weight: jax.Array,
    y_offset: Any,
    x_offset: Any,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """The corners of samples (``(..., 2)`` per axis, broadcastable), where a sample outside the
    map on either axis (its weights there all 0) reads the map's element ``(0, 0)`` on both,
    as ONNX Runtime's does.

    Its terms are then ``0 * x[0, 0]``, which a maximum that does not start from 0 sees: NaN
    where that element is not finite.
    """
    y_outside = jnp.all(y_weight == 0, -1, keepdims=True)
    x_outside = jnp.all(x_weight == 0, -1, keepdims=True)
    y_index = jnp.where(x_outside, numerics.per_box(y_offset, y_index.ndim), y_index)
    x_index = jnp.where(y_outside, numerics.per_box(x_offset, x_index.ndim), x_index)
    # Every array takes the samples' shape: JAX before 0.10 loses part of the weights'
    # cotangent where they broadcast against indices that span the whole grid.
    shape = jnp.broadcast_shapes(y_index.shape, x_index.shape)
    y_index, y_weight, x_index, x_weight = (
        jnp.broadcast_to(a, shape) for a in (y_index, y_weight, x_index, x_weight)
    )
    return y_index, y_weight, x_index, x_weight
