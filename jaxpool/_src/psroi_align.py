"""Position-sensitive ROIAlign (torchvision's ``ps_roi_align``): each bin averages the bilinear
samples of its own group of channels."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import exporting, sampling
from jaxpool._src import roi as roi_lib
from jaxpool._src import roi_frame as frame
from jaxpool._src import window as window_lib

# What a bin with no samples gives: 0 (:func:`psroi_align`), or NaN where torchvision divides
# 0 by a count of 0 (:mod:`jaxpool.torch` binds ``ps_roi_align`` to it).
EMPTY_BINS = ("zero", "nan")


@functools.partial(jax.jit, static_argnames=("attrs", "empty_bin"))
@frame.nan_boxes
def _psroi_align(
    x: jax.Array, rois: jax.Array, batch_indices: jax.Array, attrs: sampling.Align, empty_bin: str
) -> jax.Array:
    n, channels, height, width = window_lib.to_ncx_shape(x.shape, attrs.data_format)
    out_h, out_w = attrs.output_size
    dim, num_rois = channels // (out_h * out_w), rois.shape[0]
    empty = frame.nothing_read(n, num_rois, dim, attrs.output_size, x.dtype, attrs.data_format)
    if empty is not None:
        return empty
    y, x_axis = sampling.aligned_axes(rois, x.dtype, attrs, (height, width))
    batch, inside = frame.batch_or_zero(batch_indices, n)
    # Channel (c * out_h + i) * out_w + j serves bin (i, j) of output channel c: the map as
    # [N, out_h, out_w, H, W, D], read at the batch index and the bin.
    xt = frame.channels_last(x, attrs.data_format)
    xg = xt.reshape(n, height, width, dim, out_h, out_w).transpose(0, 4, 5, 1, 2, 3)
    i = jnp.arange(out_h, dtype=np.int32)[None, :, None]
    j = jnp.arange(out_w, dtype=np.int32)[None, None, :]
    pooled = sampling.pool_boxes(xg, (batch[:, None, None], i, j), y, x_axis, inside, "avg")
    if empty_bin == "nan":
        # torchvision's count is ceil(bin size) per axis, unclamped: 0 for a bin size in
        # (-1, 0], whose sum it divides by 0.  (An axis of no samples steps by its bin size.)
        # A box on no image gives zeros all the same.
        zero = [(a.count == 0) & (a.step > -1) for a in (y, x_axis)]
        nan = ((zero[0] | zero[1]) & inside)[:, None, None, None]
        pooled = jnp.where(nan, jnp.asarray(np.nan, pooled.dtype), pooled)
    return frame.from_channels_last(pooled.astype(x.dtype), attrs.data_format)


@exporting.exportable
def psroi_align(
    x: jax.typing.ArrayLike,
    rois: jax.typing.ArrayLike,
    batch_indices: jax.typing.ArrayLike,
    output_size: Any,
    *,
    spatial_scale: float = 1.0,
    sampling_ratio: int = 0,
    aligned_mode: str = "half_pixel_for_nn",
    data_format: str = "NCX",
) -> jax.Array:
    """Position-sensitive region of interest align, as torchvision's ``ps_roi_align``.

    ``x`` has ``C = D * out_h * out_w`` channels; the output has ``D``.  Bin ``(i, j)`` of output
    channel ``c`` averages the bilinear samples of input channel ``(c * out_h + i) * out_w + j``,
    which it samples as :func:`jaxpool.roi_align` does with ``mode="avg"``.  Box ``r`` is
    ``rois[r] = (x_1, y_1, x_2, y_2)`` on image ``batch_indices[r]``, in input pixels; its
    corners are scaled by ``aligned_mode``:

    * ``"half_pixel_for_nn"`` (the default, torchvision's rule): ``x * spatial_scale - 0.5``;
    * ``"asymmetric"``: ``x * spatial_scale``, and the box's width and height are at least 1;
    * ``"half_pixel"``: ``(x + 0.5) * spatial_scale - 0.5``.

    In the two half-pixel modes the box's size is not bounded below, as in ``roi_align``'s:
    torchvision's kernel clamps neither the width nor the height (not to 1 as ``"asymmetric"``
    does, nor to 0.1 as :func:`jaxpool.psroi_pool` does), and with ``sampling_ratio > 0`` an
    inverted box samples backwards from ``(x_1, y_1)``.  The box splits into ``out_h x out_w``
    bins of ``bin_h = height / out_h`` by ``bin_w = width / out_w``; bin ``(i, j)`` holds
    ``s_y x s_x`` samples at::

        y = y_1 + i * bin_h + (k + 0.5) * bin_h / s_y
        x = x_1 + j * bin_w + (l + 0.5) * bin_w / s_x

    with ``s_y = s_x = sampling_ratio``, or, for ``sampling_ratio=0``, ``s_y = ceil(bin_h)`` and
    ``s_x = ceil(bin_w)``, and the bin is their sum divided by ``s_y * s_x``: torchvision's count
    for every box, with no cap (only the samples that can fall on the map are read, as in
    :func:`jaxpool.roi_align`).  A sample reads the four neighbouring elements with bilinear
    weights; one below -1 or past the map's size (``H`` or ``W``) reads 0, one in ``[-1, 0)`` is
    clamped to 0 and one at or past the last element reads that element.  A bin with no samples (a
    box of zero or negative size with ``sampling_ratio=0``) gives 0, where torchvision divides 0 by
    0 and gives NaN when ``ceil(bin)`` is 0 on an axis.  A region whose batch index lies outside
    ``[0, N)`` gives zeros.  With no images or no boxes the output is empty.

    Derivatives: in ``x``, the exact adjoint of the sampling; in ``rois``, through the bilinear
    weights and the sample positions (sample counts, floors and clamps carry none).  16-bit
    inputs are sampled and summed in float32.

    Sharding: channel-sharded ``x`` pools without collectives when each shard holds whole
    groups of ``out_h * out_w`` channels (``D`` divisible by the number of shards).

    Args:
      x: features ``[N, C, H, W]`` (``NCX``) or ``[N, H, W, C]`` (``NXC``), a floating dtype,
        ``C`` a multiple of ``out_h * out_w``.
      rois: boxes ``[R, 4]``, floating.
      batch_indices: ``[R]`` integers, the image of each box.
      output_size: ``out_h`` and ``out_w``, an int or a pair.
      spatial_scale: the factor from image pixels to feature-map pixels.
      sampling_ratio: samples per bin and axis; 0 means adaptive, ``ceil`` of the bin size.
      aligned_mode: ``"half_pixel_for_nn"``, ``"asymmetric"`` or ``"half_pixel"``.
      data_format: ``"NCX"`` or ``"NXC"``.

    Returns:
      ``[R, C // (out_h * out_w), out_h, out_w]`` (``NCX``) or ``[R, out_h, out_w, C // (out_h *
      out_w)]`` (``NXC``), with the dtype of ``x``.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(64.0).reshape(1, 4, 4, 4)
      >>> rois = jnp.array([[0.0, 0.0, 4.0, 4.0]])
      >>> jaxpool.psroi_align(x, rois, jnp.array([0]), 2)[0, 0].tolist()
      [[2.5, 20.5], [42.5, 60.5]]
    """
    return psroi_align_any_empty_bin(
        x,
        rois,
        batch_indices,
        output_size,
        spatial_scale=spatial_scale,
        sampling_ratio=sampling_ratio,
        aligned_mode=aligned_mode,
        data_format=data_format,
    )


@exporting.exportable
def psroi_align_any_empty_bin(
    x: jax.typing.ArrayLike,
    rois: jax.typing.ArrayLike,
    batch_indices: jax.typing.ArrayLike,
    output_size: Any,
    *,
    spatial_scale: float = 1.0,
    sampling_ratio: int = 0,
    aligned_mode: str = "half_pixel_for_nn",
    data_format: str = "NCX",
    empty_bin: str = "zero",
) -> jax.Array:
    """:func:`psroi_align`, a bin with no samples giving ``empty_bin``'s value: ``"zero"``, or
    ``"nan"`` where its count of samples, ``ceil(bin size)`` on an axis, is 0 (torchvision's
    0 / 0; a box of zero or negative size with adaptive sampling)."""
    x, rois, batch_indices = roi_lib.align_inputs(x, rois, batch_indices, data_format)
    attrs = sampling.Align.of(output_size, spatial_scale, sampling_ratio, aligned_mode, data_format)
    window_lib.choice("empty_bin", empty_bin, EMPTY_BINS)
    _, channels, _, _ = window_lib.to_ncx_shape(x.shape, data_format)
    out_h, out_w = attrs.output_size
    if channels % (out_h * out_w):
        raise ValueError(
            f"`x` has {channels} channels, which must be a multiple of out_h * out_w = "
            f"{out_h} * {out_w} = {out_h * out_w} (`output_size`={output_size!r})."
        )
    return _psroi_align(x, rois, batch_indices, attrs, empty_bin)
