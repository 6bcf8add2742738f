"""torchvision.ops' region pooling, bound to jaxpool's ROI ops.

Each binder turns torchvision's arguments into the core op's: ``boxes`` as torchvision takes
them (a ``[K, 5]`` array of ``(batch_index, x_1, y_1, x_2, y_2)`` rows, or a list of ``[L_i,
4]`` arrays, one per image) into rows and batch indices, ``sampling_ratio <= 0`` (adaptive)
into 0, ``aligned`` into an ``aligned_mode``; ``ps_roi_pool`` takes the core op's
``rounding="torchvision"`` and ``multi_scale_roi_align`` infers the pyramid's scales from the
maps' and images' sizes as ``MultiScaleRoIAlign`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import arguments
from jaxpool._src import roi as roi_lib
from jaxpool._src import window as window_lib
from jaxpool._src.multilevel_roi_align import multilevel_roi_align
from jaxpool._src.psroi_align import psroi_align_any_empty_bin
from jaxpool._src.psroi_pool import psroi_pool
from jaxpool._src.roi_align import roi_align as _roi_align
from jaxpool._src.roi_pool import TORCHVISION_MAX, roi_pool_any_method

_BOXES = "a [K, 5] array of (batch_index, x_1, y_1, x_2, y_2) rows or a list of [L, 4] arrays"


def _input(input: Any, name: str = "input") -> jax.Array:
    """A feature map ``[N, C, H, W]`` of a floating dtype, checked under torchvision's name."""
    arguments.check_numeric(name, input)
    x = jnp.asarray(input)
    roi_lib.check_features(x, "NCX", name)
    return x


def _floating(boxes: jax.Array, name: str) -> None:
    if not jax.dtypes.issubdtype(boxes.dtype, np.floating):
        raise TypeError(f"`{name}` must have a floating dtype, got {boxes.dtype}.")


def _boxes(boxes: Any, n: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``boxes`` as ``(rois [K, 4], batch_indices [K] int32, rows [K, 5])``.

    A list's batch indices are the positions of its arrays (static); a ``[K, 5]`` array's are
    its first column truncated to an integer, as the kernels read it.  An index outside ``[0,
    N)`` stays outside (the core ops give zeros there).
    """
    if isinstance(boxes, (list, tuple)):
        if not boxes:
            raise ValueError(f"`boxes` must be {_BOXES}, got an empty {type(boxes).__name__}.")
        arrays = []
        for i, given in enumerate(boxes):
            arguments.check_numeric(f"boxes[{i}]", given)
            b = jnp.asarray(given)
            if b.ndim != 2 or b.shape[1] != 4:
                raise ValueError(
                    f"`boxes[{i}]` (shape {tuple(b.shape)}) must have shape [L, 4]: one row "
                    f"(x_1, y_1, x_2, y_2) per box of image {i}."
                )
            _floating(b, f"boxes[{i}]")
            arrays.append(b)
        dtype = jnp.result_type(*arrays)
        rois = jnp.concatenate([b.astype(dtype) for b in arrays])
        # Built from each array's length as a shape, so that a length may be symbolic.
        positions = jnp.concatenate(
            [jnp.full((b.shape[0],), i, np.int32) for i, b in enumerate(arrays)]
        )
        rows = jnp.concatenate([positions.astype(dtype)[:, None], rois], axis=1)
        return rois, positions, rows
    if isinstance(boxes, (str, bytes)) or not hasattr(boxes, "shape"):
        raise TypeError(f"`boxes` must be {_BOXES}, got {type(boxes).__name__}.")
    arguments.check_numeric("boxes", boxes)
    rows = jnp.asarray(boxes)
    if rows.ndim != 2 or rows.shape[1] != 5:
        raise ValueError(f"`boxes` (shape {tuple(rows.shape)}) must be {_BOXES}.")
    _floating(rows, "boxes")
    index = jnp.trunc(jax.lax.stop_gradient(rows[:, 0]))
    # Clipped before the cast, so that an index far outside the batch stays outside it.
    batch = jnp.clip(index, -1, n).astype(np.int32)
    return rows[:, 1:], batch, rows


def _sampling_ratio(sampling_ratio: Any) -> int:
    """torchvision's ``sampling_ratio``: 0 or less is adaptive, the core ops' 0."""
    return max(window_lib.static_int("sampling_ratio", sampling_ratio), 0)


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
    x = _input(input)
    rois, batch, _ = _boxes(boxes, x.shape[0])
    if not isinstance(aligned, (bool, np.bool_)):
        raise TypeError(f"`aligned` must be a bool, got {aligned!r}.")
    return _roi_align(
        x,
        rois,
        batch,
        output_size,
        spatial_scale=spatial_scale,
        sampling_ratio=_sampling_ratio(sampling_ratio),
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
    x = _input(input)
    _, _, rows = _boxes(boxes, x.shape[0])
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
    x = _input(input)
    rois, batch, _ = _boxes(boxes, x.shape[0])
    _position_sensitive(x, output_size)
    return psroi_align_any_empty_bin(
        x,
        rois,
        batch,
        output_size,
        spatial_scale=spatial_scale,
        sampling_ratio=_sampling_ratio(sampling_ratio),
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
    x = _input(input)
    _, _, rows = _boxes(boxes, x.shape[0])
    out_h, out_w, depth = _position_sensitive(x, output_size)
    return psroi_pool(
        x, rows, depth, (out_h, out_w), spatial_scale=spatial_scale, rounding="torchvision"
    )


def _image_shapes(image_shapes: Any, images: int) -> list[tuple[int, int]]:
    """``image_shapes`` as ``(height, width)`` pairs of positive ints, one per image."""
    if isinstance(image_shapes, (str, bytes)) or not isinstance(image_shapes, Sequence):
        raise TypeError(
            f"`image_shapes` must be a list of (height, width) pairs, one per image, got "
            f"{image_shapes!r}."
        )
    if len(image_shapes) != images:
        raise ValueError(
            f"`image_shapes` (={image_shapes!r}) must hold one (height, width) per image: "
            f"{images} (the length of `boxes` and the batch of `features`), got "
            f"{len(image_shapes)}."
        )
    shapes = [
        window_lib.per_axis("image_shapes", s, 2, 1, scalar=False, what="image axis")
        for s in image_shapes
    ]
    return [(h, w) for h, w in shapes]


def _inferred_scales(maps: Sequence[jax.Array], shapes: list[tuple[int, int]]) -> list[float]:
    """``MultiScaleRoIAlign``'s scales: ``2 ** round(log2(H_l / H))`` per map, ``H`` the
    largest image height, the logarithm in float32 and rounded half to even (``torch.round``).
    Its widths do not enter (torchvision takes the heights' scale)."""
    top = max(h for h, _ in shapes)
    return [
        2.0 ** float(np.round(np.log2(np.float32(float(m.shape[2]) / float(top))))) for m in maps
    ]


def multi_scale_roi_align(
    features: Sequence[jax.typing.ArrayLike],
    boxes: Sequence[jax.typing.ArrayLike],
    image_shapes: Sequence[Any],
    output_size: Any,
    sampling_ratio: int,
    canonical_scale: float = 224,
    canonical_level: int = 4,
) -> jax.Array:
    """``torchvision.ops.MultiScaleRoIAlign``'s forward: :func:`jaxpool.multilevel_roi_align`
    with ``level_rule="torchvision"`` and ``aligned_mode="asymmetric"``.

    ``features`` are the maps the module selects (by ``featmap_names``), finest first;
    ``boxes`` one ``[L_i, 4]`` array of ``(x_1, y_1, x_2, y_2)`` rows per image, in image
    pixels; ``image_shapes`` the images' ``(height, width)`` before the network.  As the module
    does, map ``l``'s scale is ``2 ** round(log2(H_l / H))`` with ``H`` the largest image height;
    box ``r`` goes to level ``k = floor(canonical_level + log2(sqrt(area) / canonical_scale) +
    1e-6)``, clamped to ``[k_min, k_max]`` (the first and last maps' levels), and is pooled by
    ``roi_align`` with ``aligned=False`` on map ``k - k_min`` with that map's scale (a box of
    negative area has no level and gives zeros).  Maps that skip levels are taken as the module
    takes them: with maps of scales ``1/8`` and ``1/32``, level 4's boxes are pooled on the
    ``1/32`` map and level 5's, which has no map, give zeros.  With one map, every box is pooled
    on it.  ``sampling_ratio <= 0`` is adaptive.

    Derivatives: in every map, the adjoint of the sampling, as torchvision's; in the boxes
    through the bilinear weights (torchvision gives none).

    Args:
      features: the maps ``[N, C, H_l, W_l]``, finest first, each at most half the size of the
        one before; one batch size, channel count and floating dtype.
      boxes: a list of ``N`` arrays ``[L_i, 4]``, floating.
      image_shapes: ``N`` pairs ``(height, width)``.
      output_size: ``out_h`` and ``out_w``, an int or a pair.
      sampling_ratio: samples per bin and axis; 0 or less means adaptive.
      canonical_scale: the box size (square root of the area) of ``canonical_level``.
      canonical_level: the level of boxes of ``canonical_scale``.

    Returns:
      ``[sum(L_i), C, out_h, out_w]``, with the dtype of the features.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpool import torch as tv
      >>> p2, p3 = jnp.ones((1, 1, 16, 16)), 2 * jnp.ones((1, 1, 8, 8))
      >>> boxes = [jnp.array([[0.0, 0.0, 20.0, 20.0], [0.0, 0.0, 60.0, 60.0]])]
      >>> y = tv.multi_scale_roi_align(
      ...     [p2, p3], boxes, [(64, 64)], 2, 2, canonical_scale=32, canonical_level=3)
      >>> y[:, 0, 0, 0].tolist()
      [1.0, 2.0]
    """
    if isinstance(features, (jax.Array, np.ndarray)) or not isinstance(features, Sequence):
        raise TypeError(
            "`features` must be a list of feature maps (finest first), got "
            f"{type(features).__name__}."
        )
    if not features:
        raise ValueError("`features` must hold at least one feature map, got an empty list.")
    maps = [_input(f, f"features[{i}]") for i, f in enumerate(features)]
    if not isinstance(boxes, (list, tuple)):
        raise TypeError(
            f"`boxes` must be a list of [L, 4] arrays, one per image, got {type(boxes).__name__}."
        )
    images = maps[0].shape[0]
    if len(boxes) != images:
        raise ValueError(
            f"`boxes` holds {len(boxes)} arrays; it must hold one per image of `features` "
            f"({images})."
        )
    rois, batch, _ = _boxes(boxes, images)
    scales = _inferred_scales(maps, _image_shapes(image_shapes, images))
    ratio = _sampling_ratio(sampling_ratio)
    size = roi_lib.static_float("canonical_scale", canonical_scale)
    if size <= 0:
        raise ValueError(f"`canonical_scale` (={canonical_scale!r}) must be positive.")
    level = window_lib.static_int("canonical_level", canonical_level)
    if any(s <= 0 for s in scales) or any(b >= a for a, b in zip(scales, scales[1:])):
        heights = [m.shape[2] for m in maps]
        raise ValueError(
            f"`features` (heights {heights}) and `image_shapes` (={image_shapes!r}) give the "
            f"scales {scales}, which must decrease from each map to the next: levels of a "
            "pyramid, finest first."
        )
    if len(maps) == 1:
        return _roi_align(
            maps[0],
            rois,
            batch,
            output_size,
            spatial_scale=scales[0],
            sampling_ratio=ratio,
            aligned_mode="asymmetric",
        )
    return multilevel_roi_align(
        maps,
        rois,
        batch,
        output_size,
        spatial_scales=scales,
        sampling_ratio=ratio,
        aligned_mode="asymmetric",
        level_rule="torchvision",
        canonical_size=size,
        canonical_level=level,
    )


# PyTorch's name -> the function that binds it.
BINDERS = {
    "roi_align": roi_align,
    "roi_pool": roi_pool,
    "ps_roi_align": ps_roi_align,
    "ps_roi_pool": ps_roi_pool,
    "multi_scale_roi_align": multi_scale_roi_align,
}
