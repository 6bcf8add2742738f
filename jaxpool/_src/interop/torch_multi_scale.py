"""torchvision's ``MultiScaleRoIAlign`` forward, bound to :func:`jaxpool.multilevel_roi_align`:
the pyramid's scales inferred from the maps' and images' sizes as the module infers them, and
its level mapping (``level_rule="torchvision"``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from jaxpool._src import roi as roi_lib
from jaxpool._src import window as window_lib
from jaxpool._src.interop import torch_vision_arguments as tv_args
from jaxpool._src.multilevel_roi_align import multilevel_roi_align
from jaxpool._src.roi_align import roi_align


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
    maps = _maps(features)
    images = maps[0].shape[0]
    rois, batch = _image_boxes(boxes, images)
    scales = _inferred_scales(maps, _image_shapes(image_shapes, images))
    ratio = tv_args.core_sampling_ratio(sampling_ratio)
    size, level = _canonical(canonical_scale, canonical_level)
    _check_pyramid(maps, scales, image_shapes)
    if len(maps) == 1:
        return roi_align(
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


def _maps(features: Any) -> list[jax.Array]:
    """``features`` as a list of at least one feature map, each checked under its name."""
    if isinstance(features, (jax.Array, np.ndarray)) or not isinstance(features, Sequence):
        raise TypeError(
            "`features` must be a list of feature maps (finest first), got "
            f"{type(features).__name__}."
        )
    if not features:
        raise ValueError("`features` must hold at least one feature map, got an empty list.")
    return [tv_args.feature_map(f, f"features[{i}]") for i, f in enumerate(features)]


def _image_boxes(boxes: Any, images: int) -> tuple[jax.Array, jax.Array]:
    """``boxes``, a list of one ``[L_i, 4]`` array per image, as ``(rois, batch_indices)``."""
    if not isinstance(boxes, (list, tuple)):
        raise TypeError(
            f"`boxes` must be a list of [L, 4] arrays, one per image, got {type(boxes).__name__}."
        )
    if len(boxes) != images:
        raise ValueError(
            f"`boxes` holds {len(boxes)} arrays; it must hold one per image of `features` "
            f"({images})."
        )
    rois, batch, _ = tv_args.read_boxes(boxes, images)
    return rois, batch


def _canonical(canonical_scale: Any, canonical_level: Any) -> tuple[float, int]:
    """``canonical_scale`` (positive) and ``canonical_level`` as static numbers."""
    size = roi_lib.static_float("canonical_scale", canonical_scale)
    if size <= 0:
        raise ValueError(f"`canonical_scale` (={canonical_scale!r}) must be positive.")
    return size, window_lib.static_int("canonical_level", canonical_level)


def _check_pyramid(maps: list[jax.Array], scales: list[float], image_shapes: Any) -> None:
    """Refuses scales that do not decrease from each map to the next."""
    if any(s <= 0 for s in scales) or any(b >= a for a, b in zip(scales, scales[1:])):
        heights = [m.shape[2] for m in maps]
        raise ValueError(
            f"`features` (heights {heights}) and `image_shapes` (={image_shapes!r}) give the "
            f"scales {scales}, which must decrease from each map to the next: levels of a "
            "pyramid, finest first."
        )
