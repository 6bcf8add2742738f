"""The programs that pool the bins of ROIAlign's boxes, for a fixed sampling ratio and for
adaptive sampling (``sampling_ratio=0``).

Adaptive sampling reads as many samples per bin as the boxes decide
(:mod:`jaxpool._src.sample_axes`), so it runs one program for every box: a loop over tiles of
samples whose number of trips is data, the tiles that cover the largest reach of any bin.

* Averages: a tile of ``TILE`` samples per axis, at most 1 apart, reads the ``TILE + 1``
  consecutive elements from its first sample's lower corner, each once, with the sum of the
  bilinear weights it receives (the mean of a bin's samples is separable), and the loop is a
  :func:`jaxpool._src.tile_sum.tile_sum`, whose transpose (the gradient in the features)
  scatters each read of a tile into one map.
* Maxima (:mod:`jaxpool._src.maxima`): a loop over tiles of one row of samples finds each
  bin's maximum and the sample that wins it (the first in the runtime's order), through which
  alone the derivative goes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import bin_reads, maxima
from jaxpool._src import roi as roi_lib
from jaxpool._src import roi_numerics as numerics
from jaxpool._src import window as window_lib
from jaxpool._src.sample_axes import Axis, axis_of_bins, pair, per_pair, unpair
from jaxpool._src.tile_sum import tile_sum

# Samples per axis in a tile of an adaptive average read as a window of elements: its 4 x 4
# elements take as many reads as a bin of sampling ratio 2 (4 samples of 4 corners), so small
# bins (1 or 2 samples) cost what a fixed ratio costs, and a bin of 6 samples takes 4 tiles.
TILE = 3
# Samples per axis in a tile whose samples are read by their corners (rotated boxes): 2 x 2
# samples of 4 corners, again 16 reads.
SAMPLE_TILE = 2


# A tile's grid of corners for its first slots ``(top, left)`` and ``side`` slots per axis:
# ``(y_index, y_weight, x_index, x_weight)`` as :mod:`jaxpool._src.bin_reads` takes them.
Grid = tuple[jax.Array, jax.Array, jax.Array, jax.Array]
Corners = Callable[[Any, Axis, Axis, Any, Any, int], Grid]


def pool_tiles(
    xt: jax.Array,
    lead: tuple[jax.Array, ...],
    y: Axis,
    x: Axis,
    corners: Corners,
    params: Any,
    side: int = TILE,
) -> jax.Array:
    """The average of each bin's samples, ``(R, out_h, out_w, C)``: the sum of the weighted
    reads of the grid ``corners(params, y, x, 0, 0, ratio)`` with a fixed ratio, with adaptive
    sampling of the tiles ``corners(params, y, x, top, left, side)`` that cover the largest
    reach, divided by the bin's number of samples.

    ``params`` (a pytree of arrays) holds every traced value ``corners`` needs but the axes.
    """
    # The mean's divisor, the samples of a bin, applied to each tile's weights.
    scale = 1 / (jnp.maximum(y.count, 1) * jnp.maximum(x.count, 1))

    def grid(t: jax.Array, res: tuple) -> Grid:
        _, y, x, params, tiles_x, per_row, scale = res
        row = _quotient(t, tiles_x, per_row)
        top, left = row * side, (t - row * tiles_x) * side
        y_index, y_weight, x_index, x_weight = corners(params, y, x, top, left, side)
        return y_index, y_weight * numerics.per_box(scale, y_weight.ndim), x_index, x_weight

    if not y.adaptive:
        y_index, y_weight, x_index, x_weight = corners(params, y, x, 0, 0, y.top)
        y_weight = y_weight * numerics.per_box(scale, y_weight.ndim)
        return bin_reads.pool_samples(xt, lead, y_index, y_weight, x_index, x_weight)
    tiles_y, tiles_x = _tiles(y, x, side)

    def fun(t, res, xt, acc):
        return acc + bin_reads.chain(xt, res[0], *grid(t, res))

    def fun_t(t, res, ct, dxt):
        return bin_reads.scatter_grid(dxt, res[0], *grid(t, res), ct)

    shape = (*y.first.shape, x.first.shape[1], xt.shape[-1])
    zeros = jnp.zeros(shape, y.first.dtype)
    res = (lead, y, x, params, tiles_x, 1 / tiles_x.astype(np.float32), scale)
    return tile_sum(fun, fun_t, tiles_y * tiles_x, res, xt, zeros)


def _quotient(t: jax.Array, n: jax.Array, per: jax.Array) -> jax.Array:
    """``t // n`` for ``t >= 0`` and ``n > 0``, given ``per = 1 / n`` in float32: its float
    estimate, off by at most 1 for ``t`` below 2**23, corrected.  Unlike an integer division,
    which XLA computes apart, these steps fuse into the tile's reads."""
    q = jnp.floor((t.astype(np.float32) + 0.5) * per).astype(np.int32)
    rest = t - q * n
    return q + (rest >= n).astype(np.int32) - (rest < 0).astype(np.int32)


def _tiles(y: Axis, x: Axis, side: int) -> tuple[jax.Array, jax.Array]:
    """The tiles of ``side`` samples along the rows and the columns that cover the largest
    reach of any bin (at least 1, so that a NaN box still reads its NaN weights)."""
    reach = lax.stop_gradient(pair(y, x).reach)
    assert reach is not None
    most = reach.reshape(2, -1).max(1)
    tiles = jnp.maximum(jnp.ceil(most / side), 1).astype(np.int32)
    return tiles[0], tiles[1]


def _aligned_corners(params, y: Axis, x: Axis, top, left, side: int):
    """:data:`Corners` of axis-aligned bins, computed for the rows and the columns as one
    (``params``: the ``[R]`` bools of the boxes that read, and ``pair(y, x)``): every
    sample's two corners with a fixed ratio, each tile's window with adaptive sampling."""
    keep, both = params
    r, (out_h, out_w) = y.first.shape[0], (y.first.shape[1], x.first.shape[1])
    column = (jnp.arange(both.first.shape[0], dtype=np.int32) >= r)[:, None, None]
    start = jnp.where(column, left, top)
    if both.adaptive:
        index, weight = both.window(start, side)
    else:
        index, weight, _ = both.corners(start, side)
    y_index, y_weight = index[:r, :out_h], weight[:r, :out_h]
    x_index, x_weight = index[r:, :out_w], weight[r:, :out_w]
    y_weight = y_weight * keep.astype(y_weight.dtype)[:, None, None, None]
    return (
        y_index[:, :, :, None, None],
        y_weight[:, :, :, None, None],
        x_index[:, None, None],
        x_weight[:, None, None],
    )


def pool_boxes(
    xt: jax.Array, lead: tuple[jax.Array, ...], y: Axis, x: Axis, keep: jax.Array, mode: str
) -> jax.Array:
    """The bins ``y x x`` of every box pooled: ``(R, out_h, out_w, C)``.

    ``mode``: ``"avg"``; ``"max"``, OpenVINO's maximum of the samples, which starts from 0;
    ``"onnx_max"``, ONNX Runtime's RoiAlign max (:mod:`jaxpool._src.maxima`).  ``keep``
    (``[R]`` bools) zeroes the boxes that read nothing.
    """
    if mode == "avg":
        return pool_tiles(xt, lead, y, x, _aligned_corners, (keep, pair(y, x)))
    return maxima.pool_maxima(xt, lead, y, x, keep, mode)


# --------------------------------------------------------------------------------------------
# ROIAlign's boxes.
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Align:
    """The static attributes of an axis-aligned ROIAlign, checked (a hashable ``jit`` argument)."""

    output_size: tuple[int, int]
    spatial_scale: float
    sampling_ratio: int
    aligned_mode: str
    data_format: str

    @classmethod
    def of(
        cls,
        output_size: Any,
        spatial_scale: Any,
        sampling_ratio: Any,
        aligned_mode: Any,
        data_format: str,
    ) -> Align:
        """The attributes as given to the public functions, checked."""
        size = roi_lib.output_hw(output_size)
        scale = roi_lib.static_float("spatial_scale", spatial_scale)
        ratio = roi_lib.sampling_ratio(sampling_ratio)
        window_lib.choice("aligned_mode", aligned_mode, roi_lib.ALIGNED_MODES)
        return cls(size, scale, ratio, aligned_mode, data_format)


def aligned_axes(
    rois: jax.Array,
    x_dtype: Any,
    attrs: Align,
    lengths: tuple[Any, Any],
    *,
    scale: Any = None,
    offsets: tuple[Any, Any] = (0, 0),
    longest: tuple[int, int] | None = None,
    at_least_one: bool | None = None,
) -> tuple[Axis, Axis]:
    """The rows and columns :class:`Axis` of ROIAlign's bins of ``(x_1, y_1, x_2, y_2)`` boxes.

    The boxes are scaled by ``aligned_mode``: ``x * scale`` (``"asymmetric"``), ``x * scale -
    0.5`` (``"half_pixel_for_nn"``) or ``(x + 0.5) * scale - 0.5`` (``"half_pixel"``), with
    ``scale`` the attributes' ``spatial_scale`` or one per box; their widths and heights are
    at least 1 where ``at_least_one`` (by default in ``"asymmetric"`` mode only).  Coordinates
    are in :func:`jaxpool._src.roi.compute_dtype`.  ``lengths`` are the map's ``(H, W)``, and
    ``offsets`` are added to the elements read (both may hold one value per box, the lengths
    then bounded by ``longest``).
    """
    (out_h, out_w), ratio = attrs.output_size, attrs.sampling_ratio
    boxes = rois.astype(numerics.compute_dtype(x_dtype, rois.dtype))
    scale = attrs.spatial_scale if scale is None else scale
    offset_src = 0.5 if attrs.aligned_mode == "half_pixel" else 0.0
    offset_dst = 0.0 if attrs.aligned_mode == "asymmetric" else -0.5
    x1, y1, x2, y2 = ((boxes[:, i] + offset_src) * scale + offset_dst for i in range(4))
    roi_w, roi_h = x2 - x1, y2 - y1
    if at_least_one if at_least_one is not None else attrs.aligned_mode == "asymmetric":
        roi_w, roi_h = jnp.maximum(roi_w, 1), jnp.maximum(roi_h, 1)
    # The rows and the columns as one axis of 2 R boxes: one computation serves both.
    r, (height, width) = rois.shape[0], lengths
    length = per_pair(height, width, r)
    if longest is None and not isinstance(length, int):
        longest = (height, width)
    if out_h == out_w:
        bin_size = numerics.divide(jnp.concatenate([roi_h, roi_w]), out_h)
    else:
        bin_size = jnp.concatenate([numerics.divide(roi_h, out_h), numerics.divide(roi_w, out_w)])
    both = axis_of_bins(
        jnp.concatenate([y1, x1]),
        bin_size,
        max(out_h, out_w),
        ratio,
        length,
        per_pair(*offsets, r),
        None if longest is None else max(longest),
        None,
    )
    return unpair(both, r, out_h, out_w)
