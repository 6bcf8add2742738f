"""ROIAlign-3/-9: bilinear samples averaged or maximised over the bins of each region."""

from __future__ import annotations

import functools
from typing import Any

import jax

from jaxpool._src import exporting, sampling
from jaxpool._src import roi as roi_lib
from jaxpool._src import roi_frame as frame
from jaxpool._src import window as window_lib

MODES = ("avg", "max")
# ONNX Runtime's RoiAlign ``mode="max"``: in each bin, the largest of the four weighted corner
# terms ``w_k * x_k`` of every sample, starting from the first sample (not from 0).  A mode of
# the program, not of :func:`roi_align`: :mod:`jaxpool.onnx` binds RoiAlign's ``"max"`` to it.
ONNX_MAX = "onnx_max"


@functools.partial(jax.jit, static_argnames=("attrs", "mode"))
@frame.nan_boxes
def _roi_align(
    x: jax.Array, rois: jax.Array, batch_indices: jax.Array, attrs: sampling.Align, mode: str
) -> jax.Array:
    n, channels, height, width = window_lib.to_ncx_shape(x.shape, attrs.data_format)
    empty = frame.nothing_read(
        n, rois.shape[0], channels, attrs.output_size, x.dtype, attrs.data_format
    )
    if empty is not None:
        return empty
    y, x_axis = sampling.aligned_axes(rois, x.dtype, attrs, (height, width))
    batch, inside = frame.batch_or_zero(batch_indices, n)
    xt = frame.channels_last(x, attrs.data_format)
    pooled = sampling.pool_boxes(xt, (batch[:, None, None],), y, x_axis, inside, mode)
    return frame.from_channels_last(pooled.astype(x.dtype), attrs.data_format)


@exporting.exportable
def roi_align(
    x: jax.typing.ArrayLike,
    rois: jax.typing.ArrayLike,
    batch_indices: jax.typing.ArrayLike,
    output_size: Any,
    *,
    spatial_scale: float = 1.0,
    sampling_ratio: int = 0,
    mode: str = "avg",
    aligned_mode: str = "asymmetric",
    data_format: str = "NCX",
) -> jax.Array:
    """Region of interest align as OpenVINO ROIAlign-3 and -9.

    Box ``r`` is ``rois[r] = (x_1, y_1, x_2, y_2)`` on image ``batch_indices[r]``, in input
    pixels.  Its corners are scaled by ``aligned_mode``:

    * ``"asymmetric"``: ``x * spatial_scale``, and the box's width and height are at least 1;
    * ``"half_pixel_for_nn"``: ``x * spatial_scale - 0.5`` (torchvision's ``roi_align`` with
      ``aligned=True``);
    * ``"half_pixel"``: ``(x + 0.5) * spatial_scale - 0.5``.

    The box splits into ``out_h x out_w`` bins of ``bin_h = height / out_h`` by ``bin_w =
    width / out_w``; bin ``(i, j)`` holds ``s_y x s_x`` bilinear samples at::

        y = y_1 + i * bin_h + (k + 0.5) * bin_h / s_y
        x = x_1 + j * bin_w + (l + 0.5) * bin_w / s_x

    with ``s_y = s_x = sampling_ratio``, or, for ``sampling_ratio=0``, ``s_y = ceil(bin_h)`` and
    ``s_x = ceil(bin_w)`` for every box, with no cap: a box larger than the map is sampled as
    densely as the runtime samples it, and only the samples that can fall on the map are read, by a
    program chosen at run time by the largest number of them in any bin.  A sample reads the four
    neighbouring elements with bilinear weights; one below -1 or past the map's size (``H`` or
    ``W``) reads 0, one in ``[-1, 0)`` is clamped to 0 and one at or past the last element reads
    that element.  ``mode="avg"`` averages the samples of a bin; a bin with no samples (a box of
    zero or negative size in the half-pixel modes with ``sampling_ratio=0``) gives 0, where the CPU
    plugin divides 0 by 0 and gives NaN.  ``mode="max"`` is the runtime's maximum, which starts from
    0: a bin whose samples are all negative gives 0.  A region whose batch index lies outside
    ``[0, N)`` gives zeros.

    Derivatives: in ``x``, the exact adjoint of the sampling (for ``"max"``, the first maximal
    sample's, none where the result is the starting 0); in ``rois``, through the bilinear
    weights and the sample positions (sample counts, floors and clamps carry none).  16-bit
    inputs are sampled and summed in float32.

    Args:
      x: features ``[N, C, H, W]`` (``NCX``) or ``[N, H, W, C]`` (``NXC``), a floating dtype.
      rois: boxes ``[R, 4]``, floating.
      batch_indices: ``[R]`` integers, the image of each box.
      output_size: ``out_h`` and ``out_w``, an int or a pair.
      spatial_scale: the factor from image pixels to feature-map pixels.
      sampling_ratio: samples per bin and axis; 0 means adaptive, ``ceil`` of the bin size.
      mode: ``"avg"`` or ``"max"``.
      aligned_mode: ``"asymmetric"``, ``"half_pixel_for_nn"`` or ``"half_pixel"``.
      data_format: ``"NCX"`` or ``"NXC"``.

    Returns:
      ``[R, C, out_h, out_w]`` (``NCX``) or ``[R, out_h, out_w, C]`` (``NXC``), with the dtype of
      ``x``.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
      >>> rois = jnp.array([[0.0, 0.0, 4.0, 4.0]])
      >>> jaxpool.roi_align(x, rois, jnp.array([0]), 2)[0, 0].tolist()
      [[5.0, 6.75], [12.0, 13.75]]
      >>> jaxpool.roi_align(x, rois, jnp.array([0]), 1, mode="max")[0, 0].tolist()
      [[15.0]]
    """
    return roi_align_any_mode(
        x,
        rois,
        batch_indices,
        output_size,
        spatial_scale=spatial_scale,
        sampling_ratio=sampling_ratio,
        mode=mode,
        aligned_mode=aligned_mode,
        data_format=data_format,
        modes=MODES,
    )


@exporting.exportable
def roi_align_any_mode(
    x: jax.typing.ArrayLike,
    rois: jax.typing.ArrayLike,
    batch_indices: jax.typing.ArrayLike,
    output_size: Any,
    *,
    spatial_scale: float = 1.0,
    sampling_ratio: int = 0,
    mode: str = "avg",
    aligned_mode: str = "asymmetric",
    data_format: str = "NCX",
    modes: tuple[str, ...] = (*MODES, ONNX_MAX),
) -> jax.Array:
    """:func:`roi_align` with ``mode`` one of ``modes``: by default also :data:`ONNX_MAX`."""
    x, rois, batch_indices = roi_lib.align_inputs(x, rois, batch_indices, data_format)
    attrs = sampling.Align.of(output_size, spatial_scale, sampling_ratio, aligned_mode, data_format)
    window_lib.choice("mode", mode, modes)
    return _roi_align(x, rois, batch_indices, attrs, mode)
