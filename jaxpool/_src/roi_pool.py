"""ROIPooling-2: the maximum over integer bins, or one bilinear sample per bin."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import exporting
from jaxpool._src import roi as roi_lib
from jaxpool._src import window as window_lib

METHODS = ("max", "bilinear")
# torchvision's roi_pool: the maximum as ``"max"`` takes it, but with the bin edges computed in
# the features' dtype and the maximum a strictly larger scan from ``-FLT_MAX`` (NaN never
# wins).  A method of the program, not of :func:`roi_pool`: :mod:`jaxpool.torch` binds
# torchvision's ``roi_pool`` to it.
TORCHVISION_MAX = "torchvision_max"


def _bin_edges(
    starts: tuple[jax.Array, jax.Array],
    ends: tuple[jax.Array, jax.Array],
    length: tuple[int, int],
    output_size: tuple[int, int],
    dtype: Any,
) -> tuple[list[jax.Array], list[jax.Array]]:
    """The integer bins ``[low, high)`` of each box along each axis, ``(R, out)``, clipped to
    the map, their edges ``floor(i * s)`` and ``ceil((i + 1) * s)`` computed in ``dtype``."""
    lows, highs = [], []
    for a in range(2):
        out, size = output_size[a], length[a]
        span = jnp.maximum(ends[a] - starts[a] + 1, 1).astype(dtype)
        bin_size = roi_lib.divide(span, out)[:, None]
        i = np.arange(out, dtype=dtype)
        lo = jnp.floor(roi_lib.product(i, bin_size)).astype(np.int32) + starts[a][:, None]
        hi = jnp.ceil(roi_lib.product(i + 1, bin_size)).astype(np.int32) + starts[a][:, None]
        lows.append(jnp.clip(lo, 0, size))
        highs.append(jnp.clip(hi, 0, size))
    return lows, highs


def _better(new: jax.Array, new_at: jax.Array, old: jax.Array, old_at: jax.Array) -> jax.Array:
    """Whether a chunk's maximum ``new`` at ``new_at`` replaces ``old`` at ``old_at``, in
    ``argmax``'s order: NaN first, then the larger value, then the earlier position."""
    new_nan, old_nan = jnp.isnan(new), jnp.isnan(old)
    same = (new == old) | (new_nan & old_nan)
    return (new_nan & ~old_nan) | (new > old) | (same & (new_at < old_at))


def _max_bins(
    xt: jax.Array,
    batch: jax.Array,
    inside: jax.Array,
    starts: tuple[jax.Array, jax.Array],
    ends: tuple[jax.Array, jax.Array],
    length: tuple[int, int],
    output_size: tuple[int, int],
    torchvision: bool,
) -> jax.Array:
    """The maximum over the integer bins of each box, 0 for an empty bin: ``(R, oh, ow, C)``.

    Box ``r`` starts at element ``starts[a][r]`` and spans ``ends[a][r] - starts[a][r] + 1``
    elements (at least 1) along axis ``a``; bin ``i`` of ``out`` covers ``[floor(i * s),
    ceil((i + 1) * s))`` of it (``s`` the box size over ``out``), clipped to the map.  The
    edges are computed in float32 (the OpenVINO runtime's), or with ``torchvision`` in the
    features' dtype (float32 for 16-bit ones), and the maximum is then torchvision's: a scan
    from ``-FLT_MAX`` that takes a strictly larger element, so that a NaN, ``-inf`` or
    ``-FLT_MAX`` never becomes the maximum, and a bin of nothing else gives ``-FLT_MAX`` with
    no derivative.

    A bin is read in chunks of ``bin_bound`` elements per axis, which hold every bin of a box no
    larger than the map plus one element in one chunk; the further chunks of larger boxes are
    read in a loop whose trip count is the data's, so that the common case pays for one chunk.
    The loop finds only where each maximum is (the first in row-major order of its bin, as
    ``argmax`` does); the values are read there afterwards, so the derivative is that read's.
    """
    edge_dtype = np.promote_types(xt.dtype, np.float32) if torchvision else np.float32
    lows, highs = _bin_edges(starts, ends, length, output_size, edge_dtype)
    bounds = [roi_lib.bin_bound(length[a], output_size[a]) for a in range(2)]
    # torchvision's -FLT_MAX in the features' dtype: -inf in a 16-bit float.
    with np.errstate(over="ignore"):
        lowest = jnp.asarray(np.float32(-np.finfo(np.float32).max).astype(xt.dtype))
    fixed = jax.lax.stop_gradient(xt)
    width = length[1]
    unread = np.iinfo(np.int32).max

    def chunk(offset_h: jax.Array, offset_w: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Each bin's largest value in one chunk and its flat position ``h * W + w`` (an
        element outside the bin is ``-inf`` at position ``unread``)."""
        (index_h, valid_h), (index_w, valid_w) = (
            roi_lib.bin_chunk(lows[a], highs[a], offset, bounds[a], length[a])
            for a, offset in enumerate((offset_h, offset_w))
        )
        index, valid = (index_h, index_w), (valid_h, valid_w)
        # Elements on the grid (R, oh, bound_h, ow, bound_w, C).
        values = roi_lib.read(
            fixed,
            batch[:, None, None, None, None],
            index[0][:, :, :, None, None],
            index[1][:, None, None],
        )
        mask = valid[0][:, :, :, None, None] & valid[1][:, None, None]
        position = index[0][:, :, :, None, None] * width + index[1][:, None, None]
        eligible = mask[..., None]
        if torchvision:
            eligible = eligible & (values > lowest)
        values = jnp.where(eligible, values, jnp.asarray(-jnp.inf, values.dtype))
        position = jnp.where(mask, position, unread)
        r, c = values.shape[0], values.shape[-1]
        grid = values.transpose(0, 1, 3, 5, 2, 4).reshape(r, *output_size, c, -1)
        where = jnp.argmax(grid, axis=-1, keepdims=True)
        best = jnp.take_along_axis(grid, where, axis=-1).squeeze(-1)
        flat = position.transpose(0, 1, 3, 2, 4).reshape(r, *output_size, 1, -1)
        return best, jnp.take_along_axis(flat, where, axis=-1).squeeze(-1)

    # Chunks per bin, ceil((high - low) / bound), as a truncating division of non-negative
    # integers: jnp's floor division of a negative one adds a select over `div` and `rem`, a
    # pattern backends have compiled wrongly.
    chunks = [
        jnp.max(lax.div(highs[a] - lows[a] + bounds[a] - 1, np.int32(bounds[a])), initial=1)
        for a in range(2)
    ]

    def body(state):
        t, best, at = state
        new, new_at = chunk(t // chunks[1], t % chunks[1])
        take = _better(new, new_at, best, at)
        return t + 1, jnp.where(take, new, best), jnp.where(take, new_at, at)

    start = chunk(jnp.int32(0), jnp.int32(0))
    _, _, at = jax.lax.while_loop(
        lambda state: state[0] < chunks[0] * chunks[1], body, (jnp.int32(1), *start)
    )
    # One read per channel, the channel a batch axis of the gather: a map sharded over its
    # channels is read where it lies.
    at = jnp.minimum(at, length[0] * width - 1)
    pooled = jax.vmap(
        lambda plane, where: plane[batch[:, None, None], where // width, where % width],
        in_axes=(-1, -1),
        out_axes=-1,
    )(xt, at)
    empty = (
        (highs[0] <= lows[0])[:, :, None]
        | (highs[1] <= lows[1])[:, None, :]
        | ~inside[:, None, None]
    )
    if torchvision:
        # The element found is one no strictly larger scan takes only where every element of
        # the bin is one: -FLT_MAX then, the scan's start.
        pooled = jnp.where(pooled > lowest, pooled, lowest)
    return jnp.where(empty[..., None], jnp.zeros_like(pooled), pooled)


@functools.partial(
    jax.jit, static_argnames=("output_size", "spatial_scale", "method", "data_format")
)
@roi_lib.nan_boxes
def _roi_pool(
    x: jax.Array,
    rois: jax.Array,
    output_size: tuple[int, int],
    spatial_scale: float,
    method: str,
    data_format: str,
) -> jax.Array:
    n, channels, height, width = window_lib.to_ncx_shape(x.shape, data_format)
    empty = roi_lib.nothing_read(n, rois.shape[0], channels, output_size, x.dtype, data_format)
    if empty is not None:
        return empty
    out_h, out_w = output_size
    dtype = roi_lib.compute_dtype(x.dtype, rois.dtype)
    boxes = rois.astype(dtype)
    batch, inside = roi_lib.batch_or_zero(jnp.trunc(boxes[:, 0]), n)
    xt = roi_lib.channels_last(x, data_format)
    if method != "bilinear":
        x1, y1, x2, y2 = (
            roi_lib.round_half_away(boxes[:, i] * spatial_scale).astype(np.int32)
            for i in range(1, 5)
        )
        pooled = _max_bins(
            xt,
            batch,
            inside,
            (y1, x1),
            (y2, x2),
            (height, width),
            output_size,
            method == TORCHVISION_MAX,
        )
    else:
        corners = []
        for start, end, out, size in (
            (boxes[:, 2], boxes[:, 4], out_h, height),
            (boxes[:, 1], boxes[:, 3], out_w, width),
        ):
            if out > 1:
                step = roi_lib.divide((end - start) * (size - 1), out - 1)
                i = np.arange(out, dtype=dtype)
                v = roi_lib.product(i, step[:, None]) + roi_lib.product(start, size - 1)[:, None]
                # The runtime places the last sample at the box's end, not at a rounded sum.
                v = v.at[:, -1].set(end * (size - 1))
            else:
                v = (0.5 * (start + end) * (size - 1))[:, None]
            ok = (v >= 0) & (v <= size - 1)
            index, weight = roi_lib.axis_corners(v, size)
            corners.append((index, weight * ok[..., None].astype(dtype)))
        (y_index, y_weight), (x_index, x_weight) = corners
        y_weight = y_weight * inside[:, None, None].astype(dtype)
        pooled = roi_lib.bilinear_samples(
            xt,
            (batch[:, None, None],),
            y_index[:, :, None],
            y_weight[:, :, None],
            x_index[:, None],
            x_weight[:, None],
        )
    return roi_lib.from_channels_last(pooled.astype(x.dtype), data_format)


@exporting.exportable
def roi_pool(
    x: jax.typing.ArrayLike,
    rois: jax.typing.ArrayLike,
    output_size: Any,
    *,
    spatial_scale: float = 1.0,
    method: str = "max",
    data_format: str = "NCX",
) -> jax.Array:
    """Region of interest pooling as OpenVINO ROIPooling-2.

    Box ``r`` is ``rois[r] = (batch_index, x_1, y_1, x_2, y_2)``; the batch index is truncated
    to an integer, and one outside ``[0, N)`` gives zeros for that box.

    ``method="max"``: the corners are scaled by ``spatial_scale`` and rounded to the nearest
    element (halves away from zero); the box spans ``h = max(y_2 - y_1 + 1, 1)`` rows (and
    likewise columns), and bin ``i`` of ``out_h`` covers rows ``y_1 + [floor(i * h / out_h),
    ceil((i + 1) * h / out_h))``, clipped to the map.  A bin's output is the maximum over its
    elements, or 0 where the bin holds none (the runtime's rule, and torchvision's).  Every
    element of a bin counts, also for boxes larger than the map: a bin is read in chunks of
    ``ceil((H + 1) / out_h) + 1`` rows (and the same for columns), one chunk for every bin of a
    box no larger than the map plus one element, and the further chunks only where some bin
    needs them.

    ``method="bilinear"``: the corners are normalised to ``[0, 1]`` (``spatial_scale`` is not
    used) and bin ``i`` is one bilinear sample at ``y_1 * (H - 1) + i * (y_2 - y_1) * (H - 1) /
    (out_h - 1)`` (the last at ``y_2 * (H - 1)``; the box's centre when ``out_h == 1``); a sample
    outside ``[0, H - 1] x [0, W - 1]`` gives 0.

    Derivatives: in ``x``, through the maximal element (the first in row-major order of its
    bin) or the bilinear weights; in ``rois``, through the bilinear weights (``"bilinear"``
    only; ``"max"`` is piecewise constant in the boxes).  16-bit inputs interpolate in float32.

    Args:
      x: features ``[N, C, H, W]`` (``NCX``) or ``[N, H, W, C]`` (``NXC``), a floating dtype.
      rois: ``[R, 5]``, floating: ``(batch_index, x_1, y_1, x_2, y_2)``.
      output_size: ``out_h`` and ``out_w``, an int or a pair.
      spatial_scale: the factor from image pixels to feature-map pixels (``"max"`` only).
      method: ``"max"`` or ``"bilinear"``.
      data_format: ``"NCX"`` or ``"NXC"``.

    Returns:
      ``[R, C, out_h, out_w]`` (``NCX``) or ``[R, out_h, out_w, C]`` (``NXC``), with the dtype of
      ``x``.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
      >>> jaxpool.roi_pool(x, jnp.array([[0.0, 0.0, 0.0, 3.0, 3.0]]), 2)[0, 0].tolist()
      [[5.0, 7.0], [13.0, 15.0]]
      >>> rois = jnp.array([[0.0, 0.0, 0.0, 1.0, 1.0]])
      >>> jaxpool.roi_pool(x, rois, 2, method="bilinear")[0, 0].tolist()
      [[0.0, 3.0], [12.0, 15.0]]
    """
    return roi_pool_any_method(
        x, rois, output_size, spatial_scale=spatial_scale, method=method, data_format=data_format
    )


@exporting.exportable
def roi_pool_any_method(
    x: jax.typing.ArrayLike,
    rois: jax.typing.ArrayLike,
    output_size: Any,
    *,
    spatial_scale: float = 1.0,
    method: str = "max",
    data_format: str = "NCX",
    methods: tuple[str, ...] = (*METHODS, TORCHVISION_MAX),
) -> jax.Array:
    """:func:`roi_pool` with ``method`` one of ``methods``: by default also
    :data:`TORCHVISION_MAX`."""
    x = jnp.asarray(x)
    rois = jnp.asarray(rois)
    roi_lib.check_features(x, data_format)
    roi_lib.check_rois(rois, 5, "(batch_index, x_1, y_1, x_2, y_2)")
    size = roi_lib.output_hw(output_size)
    scale = roi_lib.static_float("spatial_scale", spatial_scale)
    window_lib.choice("method", method, methods)
    return _roi_pool(x, rois, size, scale, method, data_format)
