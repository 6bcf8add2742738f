"""Integer bins: each box's bins as ranges of whole elements, pooled by their maximum
(ROIPooling's ``max``, torchvision's ``roi_pool``) or their mean (PSROIPooling's ``average``).

A box's bin along an axis covers the elements ``[low, high)``, clipped to the map.  The bins
differ from box to box, so they are read through a static bound: chunks of :func:`bin_bound`
elements per axis (:func:`bin_chunk`), of which the first holds every bin of any box no larger
than the map plus one element.  The bins of larger boxes continue in further chunks, read in a
loop whose trip count is the data's (the chunks that the longest bin of any box needs), so
that the common case pays for one chunk.

A chunk is one gather of channel vectors from the channels-last map at ``(R, out_h, bound_h,
out_w, bound_w)`` positions: the channel axis passes through every read, so a channel-sharded
map is read where it lies, and nothing of the size of the boxes times the map is made.

* ``reduce="max"``: the loop finds only where each bin's maximum is (the first in row-major
  order of its bin, a NaN before any number, as ``argmax`` does), and carries no derivative;
  the values are then read there, one read per channel with the channel a batch axis of the
  gather, so that the derivative is that read's.  The positions are returned too (``h * W +
  w`` in the plane read, -1 where the bin gives no element).  With ``above`` the maximum is
  torchvision's scan instead: from ``above``, taking a strictly larger element, so that a NaN
  or an element not above it never becomes the maximum.
* ``reduce="mean"``: the sum of each bin's elements over its chunks, divided by their number
  (0 for a bin with none).  The loop over the further chunks is a
  :func:`jaxpool._src.tile_sum.tile_sum`: linear in the map, its transpose (the gradient)
  scatters each chunk's reads into one map.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src.roi_frame import read
from jaxpool._src.tile_sum import tile_sum

REDUCTIONS = ("max", "mean")

# The boxes' bins and the map's axes before the rows: ``(lead, lows, highs)``, with ``lead``
# the integer arrays that index those axes (the batch index, ...), broadcastable to ``(R,
# out_h, out_w)``, and ``lows``/``highs`` the bins' ``(R, out)`` edges along the rows and the
# columns.
Bins = tuple[tuple[Any, ...], tuple[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]


def bin_bound(length: int, out: int) -> int:
    """The static bound of elements per integer bin (``[floor(i * s), ceil((i + 1) * s))`` of a
    box of ``s * out`` elements, clipped to the map) for every box of at most ``length + 1``
    elements: ``ceil((length + 1) / out) + 1``, and never more than ``length``."""
    return max(1, min(length, -(-(length + 1) // out) + 1))


def bin_chunk(
    low: jax.Array, high: jax.Array, offset: Any, bound: int, length: int
) -> tuple[jax.Array, jax.Array]:
    """Chunk ``offset`` of the integer bins ``[low, high)`` (``(R, out)``, clipped to the map):
    the positions ``low + offset * bound + [0, bound)`` clipped to ``[0, length)``, and which of
    them lie in their bin, each ``(R, out, bound)``.  Chunk 0 holds every bin of
    :func:`bin_bound`'s boxes; a longer bin continues in the further chunks."""
    k = low[:, :, None] + offset * bound + np.arange(bound, dtype=np.int32)[None, None, :]
    return jnp.minimum(k, length - 1), k < high[:, :, None]


def better(new: jax.Array, new_at: jax.Array, old: jax.Array, old_at: jax.Array) -> jax.Array:
    """Whether a chunk's maximum ``new`` at ``new_at`` replaces ``old`` at ``old_at``, in
    ``argmax``'s order: NaN first, then the larger value, then the earlier position."""
    new_nan, old_nan = jnp.isnan(new), jnp.isnan(old)
    same = (new == old) | (new_nan & old_nan)
    return (new_nan & ~old_nan) | (new > old) | (same & (new_at < old_at))


def pool_bins(
    xm: jax.Array,
    lead: Sequence[Any],
    lows: Sequence[jax.Array],
    highs: Sequence[jax.Array],
    inside: jax.Array,
    *,
    reduce: str,
    above: jax.Array | None = None,
    dtype: Any = None,
) -> tuple[jax.Array, jax.Array | None]:
    """Each box's integer bins pooled (the module docstring): ``(pooled, at)``, each ``(R,
    out_h, out_w, C)``.

    ``xm`` is the channels-last map ``[N, ..., H, W, C]``; ``lead`` indexes its axes before the
    rows and broadcasts to ``(R, out_h, out_w)``; ``lows``/``highs`` are the bins' edges along
    the rows and the columns, ``(R, out)`` each, clipped to the map; a box whose ``inside`` is
    False gives zeros.  ``reduce="max"``: the maxima (0 for an empty bin) in ``xm``'s dtype
    and their positions ``at``, ``above`` the start of torchvision's scan (or None).
    ``reduce="mean"``: the means in ``dtype``, and ``at`` None.
    """
    bins: Bins = (tuple(lead), (lows[0], lows[1]), (highs[0], highs[1]))
    lengths = (xm.shape[-3], xm.shape[-2])
    bounds = (bin_bound(lengths[0], lows[0].shape[1]), bin_bound(lengths[1], lows[1].shape[1]))
    # Chunks per bin, ceil((high - low) / bound), as a truncating division of non-negative
    # integers: jnp's floor division of a negative one adds a select over `div` and `rem`, a
    # pattern backends have compiled wrongly.
    chunk_h, chunk_w = (
        jnp.max(lax.div(highs[a] - lows[a] + bounds[a] - 1, np.int32(bounds[a])), initial=1)
        for a in range(2)
    )
    chunks = (chunk_h, chunk_w)
    if reduce == "max":
        return _maxima(xm, bins, inside, chunks, bounds, above)
    return _means(xm, bins, inside, chunks, bounds, dtype), None


def _chunk(
    xm: jax.Array, bins: Bins, offsets: tuple[Any, Any], bounds: tuple[int, int]
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Chunk ``offsets`` of every bin on the grid ``(R, out_h, bound_h, out_w, bound_w)``: the
    elements (with ``xm``'s channels last), their positions ``h * W + w`` and whether each lies
    in its bin."""
    lead, lows, highs = bins
    lengths = (xm.shape[-3], xm.shape[-2])
    (index_h, valid_h), (index_w, valid_w) = (
        bin_chunk(lows[a], highs[a], offsets[a], bounds[a], lengths[a]) for a in range(2)
    )
    rows, columns = index_h[:, :, :, None, None], index_w[:, None, None]
    values = read(xm, *(_on_grid(i) for i in lead), rows, columns)
    mask = valid_h[:, :, :, None, None] & valid_w[:, None, None]
    return values, rows * lengths[1] + columns, mask


def _on_grid(index: Any) -> Any:
    """An index broadcastable to ``(R, out_h, out_w)`` on the chunks' grid."""
    index = index.reshape((1,) * (3 - index.ndim) + index.shape)
    return index[:, :, None, :, None]


def _maxima(
    xm: jax.Array,
    bins: Bins,
    inside: jax.Array,
    chunks: tuple[jax.Array, jax.Array],
    bounds: tuple[int, int],
    above: jax.Array | None,
) -> tuple[jax.Array, jax.Array]:
    """``reduce="max"`` of :func:`pool_bins`."""
    lead, lows, highs = bins
    height, width = xm.shape[-3], xm.shape[-2]
    fixed = lax.stop_gradient(xm)

    def chunk(offset_h: jax.Array, offset_w: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Each bin's largest value in one chunk and its position (an element outside the bin,
        or one torchvision's scan skips, is ``-inf`` at a position past every element)."""
        values, position, mask = _chunk(fixed, bins, (offset_h, offset_w), bounds)
        eligible = mask[..., None]
        if above is not None:
            eligible = eligible & (values > above)
        values = jnp.where(eligible, values, jnp.asarray(-jnp.inf, values.dtype))
        position = jnp.where(mask, position, np.iinfo(np.int32).max)
        r, c, out = values.shape[0], values.shape[-1], (values.shape[1], values.shape[3])
        grid = values.transpose(0, 1, 3, 5, 2, 4).reshape(r, *out, c, -1)
        where = jnp.argmax(grid, axis=-1, keepdims=True)
        best = jnp.take_along_axis(grid, where, axis=-1).squeeze(-1)
        flat = position.transpose(0, 1, 3, 2, 4).reshape(r, *out, 1, -1)
        return best, jnp.take_along_axis(flat, where, axis=-1).squeeze(-1)

    def body(state):
        t, best, at = state
        new, new_at = chunk(lax.div(t, chunks[1]), lax.rem(t, chunks[1]))
        take = better(new, new_at, best, at)
        return t + 1, jnp.where(take, new, best), jnp.where(take, new_at, at)

    start = chunk(jnp.int32(0), jnp.int32(0))
    _, _, at = lax.while_loop(
        lambda state: state[0] < chunks[0] * chunks[1], body, (jnp.int32(1), *start)
    )
    # One read per channel, the channel a batch axis of the gather: a map sharded over its
    # channels is read where it lies.
    at = jnp.minimum(at, height * width - 1)
    pooled = jax.vmap(
        lambda plane, where: plane[tuple(lead) + (where // width, where % width)],
        in_axes=(-1, -1),
        out_axes=-1,
    )(xm, at)
    empty = (
        (highs[0] <= lows[0])[:, :, None]
        | (highs[1] <= lows[1])[:, None, :]
        | ~inside[:, None, None]
    )[..., None]
    found = ~empty
    if above is not None:
        # The element found is one the scan does not take only where no element of the bin
        # is above its start: the start is the bin's value then.
        taken = pooled > above
        pooled, found = jnp.where(taken, pooled, above), found & taken
    return jnp.where(empty, jnp.zeros_like(pooled), pooled), jnp.where(found, at, -1)


def _means(
    xm: jax.Array,
    bins: Bins,
    inside: jax.Array,
    chunks: tuple[jax.Array, jax.Array],
    bounds: tuple[int, int],
    dtype: Any,
) -> jax.Array:
    """``reduce="mean"`` of :func:`pool_bins`."""

    def chunk_sum(xm: jax.Array, bins: Bins, inside: jax.Array, offsets: Any) -> jax.Array:
        """Each bin's sum over one chunk, in ``dtype``."""
        values, _, mask = _chunk(xm, bins, offsets, bounds)
        mask = mask & inside[:, None, None, None, None]
        return jnp.where(mask[..., None], values.astype(dtype), 0).sum((2, 4))

    def further(t: jax.Array, res: Any, xm: jax.Array, total: jax.Array) -> jax.Array:
        bins, inside, per_row = res
        t = t + 1
        return total + chunk_sum(xm, bins, inside, (lax.div(t, per_row), lax.rem(t, per_row)))

    total = chunk_sum(xm, bins, inside, (0, 0))
    lead, lows, highs = bins
    res = ((tuple(jnp.asarray(i) for i in lead), lows, highs), inside, chunks[1])
    total = tile_sum(further, None, chunks[0] * chunks[1] - 1, res, xm, total)
    count = [jnp.maximum(highs[a] - lows[a], 0) for a in range(2)]
    area = (count[0][:, :, None] * count[1][:, None, :]).astype(dtype)
    return total / jnp.where(area > 0, area, 1)[..., None]
