"""torchvision.ops' region pooling, bound to jaxpool's ROI ops.

Each binder turns torchvision's arguments into the core op's: ``boxes`` as torchvision takes
them (a ``[K, 5]`` array of ``(batch_index, x_1, y_1, x_2, y_2)`` rows, or a list of ``[L_i,
4]`` arrays, one per image) into rows and batch indices, ``sampling_ratio <= 0`` (adaptive)
into 0 (both in :mod:`.torch_vision_arguments`), ``aligned`` into an ``aligned_mode``;
``ps_roi_pool`` takes the core op's ``rounding="torchvision"``, and ``multi_scale_roi_align``
(:mod:`.torch_multi_scale`) infers the pyramid's scales from the maps' and images' sizes as
``MultiScaleRoIAlign`` does.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from jaxpool._src import roi as roi_lib
from jaxpool._src.interop import torch_vision_arguments as tv_args
from jaxpool._src.interop.torch_multi_scale import multi_scale_roi_align
from jaxpool._src.psroi_align import psroi_align_any_empty_bin
from jaxpool._src.psroi_pool import psroi_pool
from jaxpool._src.roi_align import roi_align as _roi_align
from jaxpool._src.roi_pool import TORCHVISION_MAX, roi_pool_any_method


def _position_sensitive(x: jax.Array, output_size: Any) -> tuple[int, int, int]:
    """``(out_h, out_w, C // (out_h * out_w))``; ``C`` must be a multiple of ``out_h *
    out_w``."""
    out_h, out_w = roi_lib.output_hw(output_size)
    channels = x.shape[1]
    if channels % (out_h * out_w):
        raise ValueError(
            f"`input` has {channels} channels, which must be a multiple of out_h * out_w = "
            f"{out_h} * {out_w} = {out_h * out_w} (`output_size`={output_size!r})."
        )
    return out_h, out_w, channels // (out_h * out_w)


def roi_align(
    input: jax.typing.ArrayLike,
    boxes: Any,
    output_size: Any,
    spatial_scale: float = 1.0,
    sampling_ratio: int = -1,
    aligned: bool = False,
) -> jax.Array:
    """torchvision's ``roi_align``: :func:`jaxpool.roi_align` with ``mode="avg"``.

    ``aligned=False`` is ``aligned_mode="asymmetric"`` (corners ``x * spatial_scale``, the box
    at least 1 by 1); ``aligned=True`` is ``"half_pixel_for_nn"`` (``x * spatial_scale - 0.5``,
    no bound on the box's size).  ``sampling_ratio <= 0`` samples ``ceil(bin size)`` points
    per bin and axis.  A bin with no samples gives 0 where torchvision divides 0 by 0, and a
    batch index outside ``[0, N)`` gives zeros where torchvision reads out of bounds.

    Derivatives: in ``input``, the adjoint of the sampling (torchvision's backward); in the
    boxes too, through the bilinear weights (torchvision gives none).

    Args:
      input: features ``[N, C, H, W]``, a floating dtype.
      boxes: a ``[K, 5]`` array of ``(batch_index, x_1, y_1, x_2, y_2)`` rows, or a list of
        ``[L_i, 4]`` arrays of ``(x_1, y_1, x_2, y_2)`` rows, one per image.
      output_size: ``out_h`` and ``out_w``, an int or a pair.
      spatial_scale: the factor from box coordinates to ``input``'s pixels.
      sampling_ratio: samples per bin and axis; 0 or less means adaptive.
      aligned: whether to shift the box by half a pixel.

    Returns:
      ``[K, C, out_h, out_w]``, with the dtype of ``input``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpool import torch as tv
      >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
      >>> tv.roi_align(x, jnp.array([[0.0, 0.0, 0.0, 4.0, 4.0]]), 2)[0, 0].tolist()
      [[5.0, 6.75], [12.0, 13.75]]
      >>> tv.roi_align(x, [jnp.array([[0.0, 0.0, 4.0, 4.0]])], 1, aligned=True)[0, 0].tolist()
      [[7.5]]
    """
    x = tv_args.feature_map(input)
    rois, batch, _ = tv_args.read_boxes(boxes, x.shape[0])
    if not isinstance(aligned, (bool, np.bool_)):
        raise TypeError(f"`aligned` must be a bool, got {aligned!r}.")
    return _roi_align(
        x,
        rois,
        batch,
        output_size,
        spatial_scale=spatial_scale,
        sampling_ratio=tv_args.core_sampling_ratio(sampling_ratio),
        aligned_mode="half_pixel_for_nn" if aligned else "asymmetric",
    )


def roi_pool(
    input: jax.typing.ArrayLike,
    boxes: Any,
    output_size: Any,
    spatial_scale: float = 1.0,
) -> jax.Array:
    """torchvision's ``roi_pool``: the program of :func:`jaxpool.roi_pool`'s ``method="max"``
    with torchvision's bin edges and maximum.

    The corners times ``spatial_scale`` are rounded (halves away from zero); the box spans
    ``max(x_2 - x_1 + 1, 1)`` elements, bin ``i`` covers ``[floor(i * s), ceil((i + 1) * s))``
    of them (``s`` the span over ``out``, the edges computed in ``input``'s dtype, float32 for
    16-bit inputs: a float64 box of 29 rows over 7 bins ends its last bin at row 30 where
    float32 ends it at 29), clipped to the map, and gives their maximum (the first in
    row-major order where several are equal), or 0 where it holds no element.  The maximum is
    torchvision's scan from ``-FLT_MAX`` that takes a strictly larger element: a NaN never
    becomes it, and a bin of only NaN, ``-inf`` or ``-FLT_MAX`` gives ``-FLT_MAX`` with no
    gradient (:func:`jaxpool.roi_pool` propagates the NaN).  A batch index outside ``[0, N)``
    gives zeros; a box with a NaN coordinate (which torchvision's kernel converts to an
    integer, undefined behaviour) gives NaN.

    Derivatives: in ``input``, the cotangent goes to each bin's maximal element (torchvision's
    backward); none in the boxes.

    Args:
      input: features ``[N, C, H, W]``, a floating dtype.
      boxes: a ``[K, 5]`` array of ``(batch_index, x_1, y_1, x_2, y_2)`` rows, or a list of
        ``[L_i, 4]`` arrays, one per image.
      output_size: ``out_h`` and ``out_w``, an int or a pair.
      spatial_scale: the factor from box coordinates to ``input``'s pixels.

    Returns:
      ``[K, C, out_h, out_w]``, with the dtype of ``input``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpool import torch as tv
      >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
      >>> tv.roi_pool(x, [jnp.array([[0.0, 0.0, 3.0, 3.0]])], 2)[0, 0].tolist()
      [[5.0, 7.0], [13.0, 15.0]]
    """
    x = tv_args.feature_map(input)
    _, _, rows = tv_args.read_boxes(boxes, x.shape[0])
    return roi_pool_any_method(
        x, rows, output_size, spatial_scale=spatial_scale, method=TORCHVISION_MAX
    )


def ps_roi_align(
    input: jax.typing.ArrayLike,
    boxes: Any,
    output_size: Any,
    spatial_scale: float = 1.0,
    sampling_ratio: int = -1,
) -> jax.Array:
    """torchvision's ``ps_roi_align``: :func:`jaxpool.psroi_align` (``aligned_mode=
    "half_pixel_for_nn"``, torchvision's rule).

    ``input`` has ``C = D * out_h * out_w`` channels; bin ``(i, j)`` of output channel ``c``
    averages the bilinear samples of input channel ``(c * out_h + i) * out_w + j``.
    ``sampling_ratio <= 0`` samples ``ceil(bin size)`` points per bin and axis, and a box
    whose count is 0 on an axis (a bin size in ``(-1, 0]``) gives NaN, torchvision's 0 / 0,
    with no gradient (:func:`jaxpool.psroi_align` gives 0).  A batch index outside ``[0, N)``
    gives zeros (such a box too); a box with a NaN coordinate (which torchvision's kernel
    converts to an integer, undefined behaviour) gives NaN.

    Derivatives: in ``input``, the adjoint of the sampling (torchvision's backward); in the
    boxes too (torchvision gives none).

    Args:
      input: features ``[N, C, H, W]``, a floating dtype.
      boxes: a ``[K, 5]`` array of ``(batch_index, x_1, y_1, x_2, y_2)`` rows, or a list of
        ``[L_i, 4]`` arrays, one per image.
      output_size: ``out_h`` and ``out_w``, an int or a pair.
      spatial_scale: the factor from box coordinates to ``input``'s pixels.
      sampling_ratio: samples per bin and axis; 0 or less means adaptive.

    Returns:
      ``[K, D, out_h, out_w]``, with the dtype of ``input``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpool import torch as tv
      >>> x = jnp.arange(64.0).reshape(1, 4, 4, 4)
      >>> tv.ps_roi_align(x, jnp.array([[0.0, 0.0, 0.0, 4.0, 4.0]]), 2)[0, 0].tolist()
      [[2.5, 20.5], [42.5, 60.5]]
    """
    x = tv_args.feature_map(input)
    rois, batch, _ = tv_args.read_boxes(boxes, x.shape[0])
    _position_sensitive(x, output_size)
    return psroi_align_any_empty_bin(
        x,
        rois,
        batch,
        output_size,
        spatial_scale=spatial_scale,
        sampling_ratio=tv_args.core_sampling_ratio(sampling_ratio),
        aligned_mode="half_pixel_for_nn",
        empty_bin="nan",
    )


def ps_roi_pool(
    input: jax.typing.ArrayLike,
    boxes: Any,
    output_size: Any,
    spatial_scale: float = 1.0,
) -> jax.Array:
    """torchvision's ``ps_roi_pool``: :func:`jaxpool.psroi_pool` with ``rounding=
    "torchvision"`` and ``group_size=output_size``.

    ``input`` has ``C = D * out_h * out_w`` channels.  The box spans the whole elements from
    ``round(x_1 * spatial_scale)`` to ``round(x_2 * spatial_scale)`` (at least one; halves
    away from zero); bin ``(i, j)`` of output channel ``c`` averages input channel ``(c * out_h
    + i) * out_w + j`` over ``[floor(i * s), ceil((i + 1) * s))`` of them (``s`` the span over
    ``out_h``, likewise for columns), each edge clipped to ``[0, H - 1]``: torchvision's
    kernels never read the map's last row and column.  An empty bin gives 0, a batch index
    outside ``[0, N)`` zeros.

    Derivatives: in ``input``, the adjoint of these averages.  torchvision's backward kernels
    clip the bins to ``[0, H]`` where their forward clips to ``[0, H - 1]``, so torchvision's
    gradient differs from this one in bins that reach the last row or column (it spreads their
    cotangent over the elements up to ``H``, which the forward did not read); elsewhere the two
    are equal.  None in the boxes.

    Args:
      input: features ``[N, C, H, W]``, a floating dtype.
      boxes: a ``[K, 5]`` array of ``(batch_index, x_1, y_1, x_2, y_2)`` rows, or a list of
        ``[L_i, 4]`` arrays, one per image.
      output_size: ``out_h`` and ``out_w``, an int or a pair.
      spatial_scale: the factor from box coordinates to ``input``'s pixels.

    Returns:
      ``[K, D, out_h, out_w]``, with the dtype of ``input``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpool import torch as tv
      >>> x = jnp.arange(64.0).reshape(1, 4, 4, 4)
      >>> tv.ps_roi_pool(x, jnp.array([[0.0, 0.0, 0.0, 3.0, 3.0]]), 2)[0, 0].tolist()
      [[2.5, 19.5], [38.5, 55.5]]
    """
    x = tv_args.feature_map(input)
    _, _, rows = tv_args.read_boxes(boxes, x.shape[0])
    out_h, out_w, depth = _position_sensitive(x, output_size)
    return psroi_pool(
        x, rows, depth, (out_h, out_w), spatial_scale=spatial_scale, rounding="torchvision"
    )


# PyTorch's name -> the function that binds it.
BINDERS = {
    "roi_align": roi_align,
    "roi_pool": roi_pool,
    "ps_roi_align": ps_roi_align,
    "ps_roi_pool": ps_roi_pool,
    "multi_scale_roi_align": multi_scale_roi_align,
}
