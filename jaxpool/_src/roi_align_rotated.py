"""ROIAlignRotated-15: ROIAlign's average over the bins of rotated boxes."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import bilinear, exporting, sample_axes, sampling
from jaxpool._src import roi as roi_lib
from jaxpool._src import roi_frame as frame
from jaxpool._src import roi_numerics as numerics
from jaxpool._src import window as window_lib


@dataclasses.dataclass(frozen=True)
class Rotated:
    """The static attributes of a ROIAlignRotated, checked (a hashable ``jit`` argument)."""

    output_size: tuple[int, int]
    spatial_scale: float
    sampling_ratio: int
    clockwise: bool
    data_format: str


def _axes(
    center_y: jax.Array,
    center_x: jax.Array,
    boxes: jax.Array,
    cos: jax.Array,
    sin: jax.Array,
    attrs: Rotated,
    lengths: tuple[int, int],
) -> tuple[sample_axes.Axis, sample_axes.Axis]:
    """The rows and the columns of the boxes' samples, in each box's own frame, centred on the
    box.  Adaptive sampling reads the samples that can fall on the map: the map's rectangle
    ``[-1, W] x [-1, H]`` seen from the box's frame spans an interval along each of its axes."""
    height, width = lengths
    corner_y = np.array([-1.0, -1.0, height, height], boxes.dtype)[None, :] - center_y[:, None]
    corner_x = np.array([-1.0, width, -1.0, width], boxes.dtype)[None, :] - center_x[:, None]
    along_y = corner_y * cos[:, None] + corner_x * sin[:, None]
    along_x = corner_x * cos[:, None] - corner_y * sin[:, None]
    extent = math.hypot(height + 1, width + 1)
    axes = []
    for along, size, out, length in (
        (along_y, boxes[:, 3], attrs.output_size[0], height),
        (along_x, boxes[:, 2], attrs.output_size[1], width),
    ):
        size = size * attrs.spatial_scale
        interval = (along.min(1)[:, None], along.max(1)[:, None], extent)
        axes.append(
            sample_axes.axis_samples(
                -size / 2, size, out, attrs.sampling_ratio, length, interval=interval
            )
        )
    return axes[0], axes[1]


def _corners(
    lengths: tuple[int, int],
    params: Any,
    y: sample_axes.Axis,
    x: sample_axes.Axis,
    top: Any,
    left: Any,
    side: int,
) -> sampling.Grid:
    """The corners of a tile of samples (:data:`jaxpool._src.sampling.Corners`): the grid
    ``(R, out_h, side, out_w, side)`` in the box's frame, rotated into the map."""
    cos, sin, center_y, center_x, inside = params
    ys, y_scale = y.positions(top, side)
    xs, x_scale = x.positions(left, side)
    py, px = ys[:, :, :, None, None], xs[:, None, None]
    c, s = cos[:, None, None, None, None], sin[:, None, None, None, None]
    sample_y = py * c - px * s + center_y[:, None, None, None, None]
    sample_x = py * s + px * c + center_x[:, None, None, None, None]
    y_index, y_weight = bilinear.axis_corners(sample_y, lengths[0])
    x_index, x_weight = bilinear.axis_corners(sample_x, lengths[1])
    y_scale = y_scale * inside.astype(cos.dtype)[:, None, None]
    y_weight = y_weight * y_scale[:, :, :, None, None, None]
    x_weight = x_weight * x_scale[:, None, None, :, :, None]
    return y_index, y_weight, x_index, x_weight


@functools.partial(jax.jit, static_argnames=("attrs",))
@frame.nan_boxes
def _roi_align_rotated(
    x: jax.Array, rois: jax.Array, batch_indices: jax.Array, attrs: Rotated
) -> jax.Array:
    n, channels, height, width = window_lib.to_ncx_shape(x.shape, attrs.data_format)
    empty = frame.nothing_read(
        n, rois.shape[0], channels, attrs.output_size, x.dtype, attrs.data_format
    )
    if empty is not None:
        return empty
    boxes = rois.astype(numerics.compute_dtype(x.dtype, rois.dtype))
    center_x = boxes[:, 0] * attrs.spatial_scale - 0.5
    center_y = boxes[:, 1] * attrs.spatial_scale - 0.5
    angle = -boxes[:, 4] if attrs.clockwise else boxes[:, 4]
    cos, sin = jnp.cos(angle), jnp.sin(angle)
    y, x_axis = _axes(center_y, center_x, boxes, cos, sin, attrs, (height, width))
    batch, inside = frame.batch_or_zero(batch_indices, n)
    xt = frame.channels_last(x, attrs.data_format)
    params = (cos, sin, center_y, center_x, inside)
    corners = functools.partial(_corners, (height, width))
    lead, side = (batch[:, None, None],), sampling.SAMPLE_TILE
    pooled = sampling.pool_tiles(xt, lead, y, x_axis, corners, params, side)
    return frame.from_channels_last(pooled.astype(x.dtype), attrs.data_format)


@exporting.exportable
def roi_align_rotated(
    x: jax.typing.ArrayLike,
    rois: jax.typing.ArrayLike,
    batch_indices: jax.typing.ArrayLike,
    output_size: Any,
    *,
    spatial_scale: float = 1.0,
    sampling_ratio: int = 0,
    clockwise: bool = False,
    data_format: str = "NCX",
) -> jax.Array:
    """Rotated region of interest align as OpenVINO ROIAlignRotated-15.

    Box ``r`` is ``rois[r] = (center_x, center_y, width, height, angle)`` on image
    ``batch_indices[r]``, in input pixels and radians.  The centre is scaled as
    ``c * spatial_scale - 0.5`` and the sizes as ``s * spatial_scale`` (no lower bound).  The box
    splits into ``out_h x out_w`` bins, sampled in the box's own frame exactly as
    :func:`roi_align` samples an upright box starting at ``(-width / 2, -height / 2)``; each
    sample ``(p_x, p_y)`` is then rotated by ``angle`` (counter-clockwise on the image for
    ``clockwise=False``, by ``-angle`` for ``clockwise=True``) about the centre::

        y = p_y * cos(angle) - p_x * sin(angle) + center_y
        x = p_y * sin(angle) + p_x * cos(angle) + center_x

    read by bilinear interpolation with ROIAlign's border rules, and averaged over the bin.
    With ``sampling_ratio=0`` a bin holds ``ceil(bin size)`` samples per axis, whatever the
    box's size; the program reads those that can fall on the map, at a cost set by the largest
    count among the boxes.  A region whose batch index lies outside ``[0, N)`` gives zeros.

    Derivatives: in ``x``, the exact adjoint of the sampling; in ``rois`` (centre, sizes and
    angle), through the sample positions and the bilinear weights.  16-bit inputs are sampled
    and summed in float32.

    Args:
      x: features ``[N, C, H, W]`` (``NCX``) or ``[N, H, W, C]`` (``NXC``), a floating dtype.
      rois: ``[R, 5]``, floating: ``(center_x, center_y, width, height, angle)``.
      batch_indices: ``[R]`` integers, the image of each box.
      output_size: ``out_h`` and ``out_w``, an int or a pair.
      spatial_scale: the factor from image pixels to feature-map pixels.
      sampling_ratio: samples per bin and axis; 0 means adaptive, ``ceil`` of the bin size.
      clockwise: rotate by ``-angle`` instead of ``angle``.
      data_format: ``"NCX"`` or ``"NXC"``.

    Returns:
      ``[R, C, out_h, out_w]`` (``NCX``) or ``[R, out_h, out_w, C]`` (``NXC``), with the dtype of
      ``x``.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
      >>> rois = jnp.array([[2.0, 2.0, 2.0, 2.0, jnp.pi / 2]])
      >>> jaxpool.roi_align_rotated(x, rois, jnp.array([0]), 2)[0, 0].round(4).tolist()
      [[9.0, 5.0], [10.0, 6.0]]
    """
    x = jnp.asarray(x)
    rois = jnp.asarray(rois)
    batch_indices = jnp.asarray(batch_indices)
    roi_lib.check_features(x, data_format)
    num_rois = roi_lib.check_rois(rois, 5, "(center_x, center_y, width, height, angle)")
    roi_lib.check_batch_indices(batch_indices, num_rois)
    size = roi_lib.output_hw(output_size)
    scale = roi_lib.static_float("spatial_scale", spatial_scale)
    ratio = roi_lib.sampling_ratio(sampling_ratio)
    if not isinstance(clockwise, (bool, np.bool_)):
        raise TypeError(f"`clockwise` must be a bool, got {clockwise!r}.")
    attrs = Rotated(size, scale, ratio, bool(clockwise), data_format)
    return _roi_align_rotated(x, rois, batch_indices, attrs)
