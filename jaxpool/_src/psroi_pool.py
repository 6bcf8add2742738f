"""PSROIPooling-1: position-sensitive average (or bilinear) pooling of regions."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import bilinear, exporting, integer_bins
from jaxpool._src import roi as roi_lib
from jaxpool._src import roi_frame as frame
from jaxpool._src import roi_numerics as numerics
from jaxpool._src import window as window_lib

MODES = ("average", "bilinear")
# How ``mode="average"`` places a box's bins: OpenVINO PSROIPooling-1's rule, or torchvision's
# ``ps_roi_pool`` kernels'.
ROUNDINGS = ("openvino", "torchvision")


@dataclasses.dataclass(frozen=True)
class PSPooling:
    """The static attributes of a PSROIPooling, checked (a hashable ``jit`` argument);
    ``spatial_bins`` is ``(1, 1)`` in mode ``"average"``."""

    output_dim: int
    group_size: tuple[int, int]
    spatial_scale: float
    mode: str
    spatial_bins: tuple[int, int]
    rounding: str
    data_format: str


def _clipped(edge: jax.Array, top: int) -> jax.Array:
    """Integer bin edges clipped to ``[0, top]``, with no derivative."""
    return jax.lax.stop_gradient(jnp.clip(edge, 0, top)).astype(np.int32)


def _openvino_bins(
    start: jax.Array, end: jax.Array, length: int, gs: int, scale: float
) -> tuple[jax.Array, jax.Array]:
    """PSROIPooling-1's bins along one axis, ``(R, gs)`` each: the box spans ``round(start) *
    scale`` to ``round(end + 1) * scale``, at least 0.1 (the runtime's floor on the box size,
    which also turns inverted boxes upright), and each edge is rounded outwards after adding
    the box's start."""
    i = np.arange(gs, dtype=start.dtype)
    start = numerics.round_half_away(start) * scale
    end = numerics.round_half_away(end + 1) * scale
    bin_size = numerics.divide(jnp.maximum(end - start, 0.1), gs)
    lo = jnp.floor(numerics.product(i, bin_size[:, None]) + start[:, None])
    hi = jnp.ceil(numerics.product(i + 1, bin_size[:, None]) + start[:, None])
    return _clipped(lo, length), _clipped(hi, length)


def _torchvision_bins(
    start: jax.Array, end: jax.Array, length: int, gs: int, scale: float
) -> tuple[jax.Array, jax.Array]:
    """torchvision's ``ps_roi_pool`` bins along one axis, ``(R, gs)`` each: it rounds the
    scaled corners to whole elements, spans at least one element, offsets the bins' integer
    edges by the start, and clips both edges to the last element (its forward kernels never
    read the last row or column)."""
    i = np.arange(gs, dtype=start.dtype)
    start = numerics.round_half_away(start * scale)
    end = numerics.round_half_away(end * scale)
    bin_size = numerics.divide(jnp.maximum(end - start, 1), gs)
    lo = jnp.floor(numerics.product(i, bin_size[:, None])) + start[:, None]
    hi = jnp.ceil(numerics.product(i + 1, bin_size[:, None])) + start[:, None]
    return _clipped(lo, length - 1), _clipped(hi, length - 1)


_ROUNDINGS = {"openvino": _openvino_bins, "torchvision": _torchvision_bins}


def _average(
    xt: jax.Array, boxes: jax.Array, batch: jax.Array, inside: jax.Array, attrs: PSPooling
) -> jax.Array:
    """Mode ``"average"``: each bin's mean over its integer bin of its own channel,
    ``(R, group_h, group_w, output_dim)``, read by
    :func:`jaxpool._src.integer_bins.pool_bins`."""
    n, height, width, _ = xt.shape
    group_h, group_w = attrs.group_size
    # Channel (c_out * group_h + i) * group_w + j serves bin (i, j) of output channel c_out.
    xg = xt.reshape(n, height, width, attrs.output_dim, group_h, group_w)
    xg = xg.transpose(0, 4, 5, 1, 2, 3)
    bins = _ROUNDINGS[attrs.rounding]
    scale = attrs.spatial_scale
    low_h, high_h = bins(boxes[:, 2], boxes[:, 4], height, group_h, scale)
    low_w, high_w = bins(boxes[:, 1], boxes[:, 3], width, group_w, scale)
    lead = (
        batch[:, None, None],
        np.arange(group_h, dtype=np.int32)[:, None],
        np.arange(group_w, dtype=np.int32),
    )
    pooled, _ = integer_bins.pool_bins(
        xg, lead, (low_h, low_w), (high_h, high_w), inside, reduce="mean", dtype=boxes.dtype
    )
    return pooled


def _bilinear(
    xt: jax.Array, boxes: jax.Array, batch: jax.Array, inside: jax.Array, attrs: PSPooling
) -> jax.Array:
    """Mode ``"bilinear"``: each bin's mean over the spatial bins of one bilinear sample of
    their own channels, ``(R, group_h, group_w, output_dim)``."""
    n, height, width, _ = xt.shape
    bins_y, bins_x = attrs.spatial_bins
    # Channel (b_y * bins_x + b_x) * output_dim + c_out serves spatial bin (b_y, b_x).
    xg = xt.reshape(n, height, width, bins_y, bins_x, attrs.output_dim)
    xg = xg.transpose(0, 3, 4, 1, 2, 5)
    corners = []
    for first, last, length, bins, gs in (
        (2, 4, height, bins_y, attrs.group_size[0]),
        (1, 3, width, bins_x, attrs.group_size[1]),
    ):
        start = boxes[:, first] * attrs.spatial_scale
        end = boxes[:, last] * attrs.spatial_scale
        bin_size = numerics.divide(end - start, bins)[:, None]
        b = np.arange(bins, dtype=boxes.dtype)
        bin_start = start[:, None] + numerics.product(b, bin_size)  # (R, bins)
        bin_end = start[:, None] + numerics.product(b + 1, bin_size)
        corners.append(bilinear.sample_points(bin_start, bin_end, gs, length))
    (y_index, y_weight), (x_index, x_weight) = corners  # (R, bins, group, 2)
    y_weight = y_weight * inside[:, None, None, None].astype(boxes.dtype)
    values = bilinear.bilinear_samples(
        xg,
        (
            batch[:, None, None, None, None],
            np.arange(bins_y)[:, None, None, None],
            np.arange(bins_x)[:, None],
        ),
        y_index[:, :, :, None, None],
        y_weight[:, :, :, None, None],
        x_index[:, None, None],
        x_weight[:, None, None],
    )  # (R, bins_y, group_h, bins_x, group_w, output_dim)
    return values.sum((1, 3)) / np.asarray(bins_y * bins_x, boxes.dtype)


_PROGRAMS = {"average": _average, "bilinear": _bilinear}


@functools.partial(jax.jit, static_argnames=("attrs",))
@frame.nan_boxes
def _psroi_pool(x: jax.Array, rois: jax.Array, attrs: PSPooling) -> jax.Array:
    n = x.shape[0]
    empty = frame.nothing_read(
        n, rois.shape[0], attrs.output_dim, attrs.group_size, x.dtype, attrs.data_format
    )
    if empty is not None:
        return empty
    xt = frame.channels_last(x, attrs.data_format)
    boxes = rois.astype(numerics.compute_dtype(x.dtype, rois.dtype))
    batch_index = jnp.trunc(jax.lax.stop_gradient(boxes[:, 0]))
    batch, inside = frame.batch_or_zero(batch_index, n)
    if attrs.rounding == "openvino":
        inside = inside & frame.listed(batch_index)
    pooled = _PROGRAMS[attrs.mode](xt, boxes, batch, inside, attrs)
    return frame.from_channels_last(pooled.astype(x.dtype), attrs.data_format)


@exporting.exportable
def psroi_pool(
    x: jax.typing.ArrayLike,
    rois: jax.typing.ArrayLike,
    output_dim: int,
    group_size: Any,
    *,
    spatial_scale: float = 1.0,
    mode: str = "average",
    spatial_bins: Any = 1,
    rounding: str = "openvino",
    data_format: str = "NCX",
) -> jax.Array:
    """Position-sensitive region of interest pooling as OpenVINO PSROIPooling-1.

    Box ``r`` is ``rois[r] = (batch_index, x_1, y_1, x_2, y_2)``; the batch index is truncated
    to an integer, and one outside ``[0, N)`` gives zeros for that box; as in the runtime, a
    batch index of -1 ends the list of boxes (it and every later box give zeros; not with
    ``rounding="torchvision"``, where it gives zeros for its own box only).  The output has
    ``output_dim`` channels and ``group_h x group_w`` bins (``group_size``, an int or a pair;
    PSROIPooling-1 has square groups).

    ``mode="average"`` (``C = output_dim * group_h * group_w``): bin ``(i, j)`` of output channel
    ``c`` averages input channel ``(c * group_h + i) * group_w + j`` over its elements; a bin
    with no element gives 0.  ``rounding`` places the bins:

    * ``"openvino"`` (PSROIPooling-1): the box spans ``y_1' = round(y_1) * spatial_scale`` to
      ``round(y_2 + 1) * spatial_scale`` (rounding halves away from zero), and its size is at
      least 0.1 (the runtime's rule, which also makes an inverted box a thin one at ``y_1'``);
      with ``b_h`` a bin's height, bin ``i`` covers the rows ``[floor(y_1' + i * b_h),
      ceil(y_1' + (i + 1) * b_h))`` (and likewise for columns), clipped to ``[0, H]``;
    * ``"torchvision"`` (torchvision's ``ps_roi_pool``): the box spans the whole elements
      ``y_1' = round(y_1 * spatial_scale)`` to ``y_2' = round(y_2 * spatial_scale)``, ``h =
      max(y_2' - y_1', 1)`` rows, and bin ``i`` covers rows ``y_1' + [floor(i * h / group_h),
      ceil((i + 1) * h / group_h))``, clipped to ``[0, H - 1]``: as torchvision's forward kernels
      (CPU and CUDA) clip, so that the last row and column of the map are never read.  The
      derivative is this forward's adjoint; torchvision's backward kernels clip to ``[0, H]``
      instead, so their gradient differs from it in bins that reach the last row or column.

    A bin longer than one chunk of ``ceil((H + 1) / group_h) + 1`` rows (or the same for
    columns; a box no larger than the map plus one element never has one) is read in a loop
    over further chunks, which runs only where some bin needs it.

    ``mode="bilinear"`` (``C = output_dim * bins_y * bins_x``): the corners times
    ``spatial_scale`` are normalised to ``[0, 1]``; the box splits into ``bins_y x bins_x``
    spatial bins, and output bin ``(i, j)`` of channel ``c`` is the mean over the spatial bins
    ``(u, v)`` of one bilinear sample of input channel ``(u * bins_x + v) * output_dim + c`` at
    row ``i * b_h * (H - 1) / (group_h - 1) + y_u * (H - 1)`` (``y_u`` the spatial bin's top
    edge, ``b_h`` its height; its centre when ``group_h == 1``), and likewise for columns.  A
    sample outside ``[0, H - 1] x [0, W - 1]`` adds 0.  ``rounding`` must be ``"openvino"``.

    Derivatives: in ``x``, the exact adjoint of the averages and samples; in ``rois``, through
    the bilinear weights (``"bilinear"`` only; ``"average"`` is piecewise constant in the
    boxes).  16-bit inputs sum in float32.

    Sharding: channel-sharded ``x`` pools without collectives in ``"average"`` mode when each
    shard holds whole output channels (``output_dim`` divisible by the number of shards); in
    ``"bilinear"`` mode an output channel sums input channels ``output_dim`` apart, which lie
    in different shards, so XLA gathers them.

    Args:
      x: features ``[N, C, H, W]`` (``NCX``) or ``[N, H, W, C]`` (``NXC``), a floating dtype.
      rois: ``[R, 5]``, floating: ``(batch_index, x_1, y_1, x_2, y_2)``.
      output_dim: output channels.
      group_size: bins per axis of the output, ``group_h`` and ``group_w``: an int or a pair.
      spatial_scale: the factor from image pixels to feature-map pixels.
      mode: ``"average"`` or ``"bilinear"``.
      spatial_bins: ``bins_y`` and ``bins_x`` (``"bilinear"`` only), an int or a pair.
      rounding: ``"openvino"`` or ``"torchvision"`` (``"average"`` only).
      data_format: ``"NCX"`` or ``"NXC"``.

    Returns:
      ``[R, output_dim, group_h, group_w]`` (``NCX``) or ``[R, group_h, group_w, output_dim]``
      (``NXC``), with the dtype of ``x``.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(64.0).reshape(1, 4, 4, 4)
      >>> rois = jnp.array([[0.0, 0.0, 0.0, 3.0, 3.0]])
      >>> jaxpool.psroi_pool(x, rois, 1, 2)[0, 0].tolist()
      [[2.5, 20.5], [42.5, 60.5]]
      >>> jaxpool.psroi_pool(x, rois, 1, 2, rounding="torchvision")[0, 0].tolist()
      [[2.5, 19.5], [38.5, 55.5]]
    """
    x = jnp.asarray(x)
    rois = jnp.asarray(rois)
    _, channels, _, _ = roi_lib.check_features(x, data_format)
    roi_lib.check_rois(rois, 5, "(batch_index, x_1, y_1, x_2, y_2)")
    dim = window_lib.static_int("output_dim", output_dim)
    if dim < 1:
        raise ValueError(f"`output_dim` (={output_dim!r}) must be positive.")
    group = window_lib.per_axis("group_size", group_size, 2, 1, what="output axis")
    scale = roi_lib.static_float("spatial_scale", spatial_scale)
    window_lib.choice("mode", mode, MODES)
    window_lib.choice("rounding", rounding, ROUNDINGS)
    bins = window_lib.per_axis("spatial_bins", spatial_bins, 2, 1, what="spatial axis")
    if mode == "average":
        bins = (1, 1)
        if channels != dim * group[0] * group[1]:
            raise ValueError(
                f"`x` has {channels} channels; mode 'average' needs `output_dim` * group_h * "
                f"group_w = {dim} * {group[0]} * {group[1]} = {dim * group[0] * group[1]} "
                f"(`group_size`={group_size!r})."
            )
    elif rounding != "openvino":
        raise ValueError(f"`rounding` (={rounding!r}) must be 'openvino' in mode 'bilinear'.")
    elif channels != dim * bins[0] * bins[1]:
        raise ValueError(
            f"`x` has {channels} channels; mode 'bilinear' needs `output_dim` * bins_y * bins_x "
            f"= {dim} * {bins[0]} * {bins[1]} = {dim * bins[0] * bins[1]} (`spatial_bins`="
            f"{spatial_bins!r})."
        )
    attrs = PSPooling(
        dim, (group[0], group[1]), scale, mode, (bins[0], bins[1]), rounding, data_format
    )
    return _psroi_pool(x, rois, attrs)
