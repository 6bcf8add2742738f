"""ROIAlign over a feature pyramid: each box pooled once, on the level its size assigns it to."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import exporting, sampling
from jaxpool._src import roi as roi_lib
from jaxpool._src import roi_frame as frame
from jaxpool._src import roi_numerics as numerics
from jaxpool._src import window as window_lib
from jaxpool._src.roi_align import MODES

LEVEL_RULES = ("torchvision", "detectron2", "openvino")

# Each rule's library default, so that a rule with its defaults is that library's module with
# its defaults: MultiScaleRoIAlign calls roi_align with aligned=False, detectron2's ROIPooler
# defaults to ROIAlignV2 (aligned=True), and the extractor's `aligned` defaults to false.
DEFAULT_ALIGNED_MODES = {
    "torchvision": "asymmetric",
    "detectron2": "half_pixel_for_nn",
    "openvino": "asymmetric",
}

# The OpenVINO runtime's extractor: canonical box size and level, counted from the first map.
_OPENVINO_SIZE, _OPENVINO_LEVEL = 224.0, 2


@dataclasses.dataclass(frozen=True)
class Pyramid:
    """The static attributes of a multi-level ROIAlign, checked (a hashable ``jit`` argument)."""

    align: sampling.Align
    spatial_scales: tuple[float, ...]
    mode: str
    level_rule: str
    canonical_size: float
    canonical_level: int


def levels(rois: jax.Array, attrs: Pyramid) -> tuple[jax.Array, jax.Array]:
    """The level index of each box, ``[R]`` int32, and whether it is pooled at all (the OpenVINO
    rule gives zeros for a box of area 0 or less, the torchvision rule for a level with no map).

    Computed as each library computes it, in the boxes' dtype (float32 for 16-bit boxes): the
    area ``(x2 - x1) * (y2 - y1)``, its square root divided by the canonical size (correctly
    rounded), then the rule's logarithm, epsilon and floor.
    """
    boxes = rois.astype(numerics.compute_dtype(rois.dtype, rois.dtype))
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    count = len(attrs.spatial_scales)
    if attrs.level_rule == "openvino":
        ratio = numerics.divide(jnp.sqrt(area), _OPENVINO_SIZE)
        k = jnp.floor(jnp.log2(ratio + np.asarray(1e-6, boxes.dtype)) + _OPENVINO_LEVEL)
        low, high, keep = 0, count - 1, area > 0
    else:
        ratio = numerics.divide(jnp.sqrt(area), attrs.canonical_size)
        if attrs.level_rule == "torchvision":
            k = jnp.floor(attrs.canonical_level + jnp.log2(ratio) + np.asarray(1e-6, boxes.dtype))
        else:
            k = jnp.floor(attrs.canonical_level + jnp.log2(ratio + np.asarray(1e-8, boxes.dtype)))
        low = round(-math.log2(attrs.spatial_scales[0]))
        high = round(-math.log2(attrs.spatial_scales[-1]))
        # A negative area (or a NaN box) has no level, and the libraries pool it nowhere.
        keep = ~jnp.isnan(k)
    k = jnp.clip(jnp.where(jnp.isnan(k), low, k), low, high)
    # Maps that skip levels (torchvision's rule only): level index ``k - low`` is pooled on the
    # map of that position, as MultiScaleRoIAlign pairs them, and an index past the last map
    # has no map and gives zeros.
    keep = keep & (k - low < count)
    return jnp.minimum(k - low, count - 1).astype(np.int32), keep


def canvas(features: Sequence[jax.Array], data_format: str) -> tuple[jax.Array, np.ndarray]:
    """The levels laid out on one channels-last map ``[N, H_c, W_c, C]``, and the ``(row,
    column)`` of each level's first element on it, ``[L, 2]``.

    The first level takes the top rows; the others follow it side by side below.  One map lets
    every box read its own level in one gather, with no (boxes x levels) work.
    """
    if len(features) == 1:
        return frame.channels_last(features[0], data_format), np.zeros((1, 2), np.int32)
    # Each level is transposed as it is copied onto the map: XLA writes the map in one pass,
    # where a transpose of the whole map would be a second copy.
    maps = [f if data_format == "NXC" else jnp.moveaxis(f, 1, -1) for f in features]
    heights, widths = [f.shape[1] for f in maps], [f.shape[2] for f in maps]
    origin = [(0, 0)] + [(heights[0], sum(widths[1:i])) for i in range(1, len(maps))]
    width, below = max(widths[0], sum(widths[1:])), max(heights[1:])

    def padded(f: jax.Array, rows: int, columns: int) -> jax.Array:
        return jnp.pad(f, ((0, 0), (0, rows - f.shape[1]), (0, columns - f.shape[2]), (0, 0)))

    row = jnp.concatenate([padded(f, below, f.shape[2]) for f in maps[1:]], axis=2)
    whole = jnp.concatenate([padded(maps[0], heights[0], width), padded(row, below, width)], 1)
    if data_format == "NCX":
        whole = frame.stored_row_major(whole)
    return whole, np.array(origin, np.int32)


@functools.partial(jax.jit, static_argnames=("attrs",))
@frame.nan_boxes
def _multilevel_roi_align(
    features: tuple[jax.Array, ...], rois: jax.Array, batch_indices: jax.Array, attrs: Pyramid
) -> jax.Array:
    align = attrs.align
    ncx = [window_lib.to_ncx_shape(f.shape, align.data_format) for f in features]
    n, channels = ncx[0][:2]
    dtype = features[0].dtype
    empty = frame.nothing_read(
        n, rois.shape[0], channels, align.output_size, dtype, align.data_format
    )
    if empty is not None:
        return empty
    level, keep = levels(rois, attrs)
    xt, origin = canvas(features, align.data_format)
    per_level = np.array([(s[2], s[3]) for s in ncx], np.int32)
    coords = numerics.compute_dtype(dtype, rois.dtype)
    scale = jnp.asarray(np.array(attrs.spatial_scales, coords))[level]
    y, x = sampling.aligned_axes(
        rois,
        dtype,
        align,
        (jnp.asarray(per_level[:, 0])[level], jnp.asarray(per_level[:, 1])[level]),
        scale=scale,
        offsets=(jnp.asarray(origin[:, 0])[level], jnp.asarray(origin[:, 1])[level]),
        longest=(int(per_level[:, 0].max()), int(per_level[:, 1].max())),
        at_least_one=True if attrs.level_rule == "openvino" else None,
    )
    batch, inside = frame.batch_or_zero(batch_indices, n)
    pooled = sampling.pool_boxes(xt, (batch[:, None, None],), y, x, inside & keep, attrs.mode)
    return frame.from_channels_last(pooled.astype(dtype), align.data_format)


def _check_features(features: Any, data_format: str) -> tuple[jax.Array, ...]:
    """The pyramid's maps as arrays: at least one, each a valid ROI feature map, with one batch
    size, channel count and dtype."""
    if isinstance(features, (jax.Array, np.ndarray)) or not isinstance(features, Sequence):
        raise TypeError(
            "`features` must be a sequence of feature maps (finest first), got "
            f"{type(features).__name__}."
        )
    if not features:
        raise ValueError("`features` must hold at least one feature map, got an empty sequence.")
    maps = tuple(jnp.asarray(f) for f in features)
    shapes = [roi_lib.check_features(f, data_format, f"features[{i}]") for i, f in enumerate(maps)]
    if len({s[:2] for s in shapes}) > 1 or len({f.dtype for f in maps}) > 1:
        described = ", ".join(f"{tuple(f.shape)} {f.dtype}" for f in maps)
        raise ValueError(
            f"`features` must share their batch size, channel count and dtype, got {described}."
        )
    return maps


def _check_scales(spatial_scales: Any, levels_given: int, level_rule: str) -> tuple[float, ...]:
    """``spatial_scales`` as floats: one per level, powers of two, halving from each level to the
    next (for the torchvision rule, decreasing: MultiScaleRoIAlign takes maps that skip
    levels)."""
    if isinstance(spatial_scales, (str, bytes)) or not isinstance(spatial_scales, Sequence):
        raise TypeError(
            f"`spatial_scales` must be a sequence of floats, one per level, got {spatial_scales!r}."
        )
    scales = tuple(roi_lib.static_float("spatial_scales", s) for s in spatial_scales)
    if len(scales) != levels_given:
        raise ValueError(
            f"`spatial_scales` (={spatial_scales!r}) must hold one scale per level of "
            f"`features` ({levels_given})."
        )
    for s in scales:
        if s <= 0 or 2.0 ** round(math.log2(s)) != s:
            raise ValueError(
                f"`spatial_scales` (={spatial_scales!r}) must be powers of two such as 1/4, "
                f"got {s!r}."
            )
    if level_rule == "torchvision" and any(b >= a for a, b in zip(scales, scales[1:])):
        raise ValueError(
            f"`spatial_scales` (={spatial_scales!r}) must decrease from each map to the next: "
            "levels of a pyramid, finest first."
        )
    if level_rule != "torchvision" and any(b != a / 2 for a, b in zip(scales, scales[1:])):
        raise ValueError(
            f"`spatial_scales` (={spatial_scales!r}) must halve from each level to the next: "
            f"the levels of a pyramid, finest first (only level_rule='torchvision' takes maps "
            "that skip levels)."
        )
    return scales


@exporting.exportable
def multilevel_roi_align(
    features: Sequence[jax.typing.ArrayLike],
    rois: jax.typing.ArrayLike,
    batch_indices: jax.typing.ArrayLike,
    output_size: Any,
    *,
    spatial_scales: Sequence[float],
    sampling_ratio: int = 0,
    mode: str = "avg",
    aligned_mode: str | None = None,
    level_rule: str = "torchvision",
    canonical_size: float = 224,
    canonical_level: int = 4,
    data_format: str = "NCX",
) -> jax.Array:
    """ROIAlign over a feature pyramid (FPN): each box pooled once, on the level its size
    assigns it to.

    ``features`` holds ``L`` maps, finest first, and ``spatial_scales`` their factors from
    image pixels (powers of two, each half the one before, e.g. ``(1/4, 1/8, 1/16, 1/32)``).
    Box ``r`` is ``rois[r] = (x_1, y_1, x_2, y_2)`` on image ``batch_indices[r]``, in image
    pixels; with ``area = (x_2 - x_1) * (y_2 - y_1)``, its level by ``level_rule``:

    * ``"torchvision"`` (``MultiScaleRoIAlign``): ``k = floor(canonical_level +
      log2(sqrt(area) / canonical_size) + 1e-6)``;
    * ``"detectron2"`` (``ROIPooler``): ``k = floor(canonical_level + log2(sqrt(area) /
      canonical_size + 1e-8))``;

    each clamped to the levels given (``k_min = -log2(spatial_scales[0])`` to ``k_max =
    -log2(spatial_scales[-1])``), the box pooled on level ``k - k_min`` (a box of negative
    area has no level and gives zeros).  The torchvision rule also takes maps that skip levels
    (scales ``(1/8, 1/32)``), as ``MultiScaleRoIAlign`` does: level index ``k - k_min`` is
    pooled on the map at that position with that map's scale, and an index past the last map
    gives zeros.  Or

    * ``"openvino"`` (ExperimentalDetectronROIFeatureExtractor-6 as the runtime computes it):
      level ``floor(2 + log2(sqrt(area) / 224 + 1e-6))`` counted from the first map whatever
      its scale, clamped to ``[0, L - 1]``; a box of area 0 or less gives zeros, and the box's
      width and height on its level are at least 1 in every ``aligned_mode`` (``canonical_size``
      and ``canonical_level`` are not used).

    The box is then pooled exactly as :func:`jaxpool.roi_align` pools it on that level alone
    with ``spatial_scale`` the level's scale: the same modes, aligned modes, sampling (including
    adaptive sampling's ``ceil(bin size)`` samples for every box) and derivatives.  All levels
    are read by one program, whose cost is set by the boxes (each read on its own level), not
    by the number of levels.

    Args:
      features: a sequence of ``L`` maps ``[N, C, H_l, W_l]`` (``NCX``) or ``[N, H_l, W_l, C]``
        (``NXC``) with one batch size, channel count and floating dtype.
      rois: boxes ``[R, 4]``, floating, in image pixels.
      batch_indices: ``[R]`` integers, the image of each box.
      output_size: ``out_h`` and ``out_w``, an int or a pair.
      spatial_scales: ``L`` factors from image pixels to each level's pixels.
      sampling_ratio: samples per bin and axis; 0 means adaptive, ``ceil`` of the bin size.
      mode: ``"avg"`` or ``"max"`` (the runtime's ROIAlign max, which starts from 0).
      aligned_mode: ``"half_pixel_for_nn"`` (torchvision's ``aligned=True``), ``"asymmetric"``
        or ``"half_pixel"``, as in :func:`jaxpool.roi_align`; ``None``, the rule's library
        default: ``"asymmetric"`` for ``"torchvision"`` (``MultiScaleRoIAlign``) and
        ``"openvino"`` (the extractor's ``aligned=false``), ``"half_pixel_for_nn"`` for
        ``"detectron2"`` (``ROIPooler``'s ``ROIAlignV2``).
      level_rule: ``"torchvision"``, ``"detectron2"`` or ``"openvino"``.
      canonical_size: the box size (square root of the area) of ``canonical_level``.
      canonical_level: the level ``k`` of boxes of ``canonical_size``.
      data_format: ``"NCX"`` or ``"NXC"``.

    Returns:
      ``[R, C, out_h, out_w]`` (``NCX``) or ``[R, out_h, out_w, C]`` (``NXC``), with the dtype of
      the features.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> p2, p3 = jnp.ones((1, 1, 16, 16)), 2 * jnp.ones((1, 1, 8, 8))
      >>> rois = jnp.array([[0.0, 0.0, 20.0, 20.0], [0.0, 0.0, 60.0, 60.0]])
      >>> y = jaxpool.multilevel_roi_align(
      ...     [p2, p3], rois, jnp.array([0, 0]), 2, spatial_scales=(1 / 4, 1 / 8),
      ...     canonical_size=32, canonical_level=3)
      >>> y[:, 0, 0, 0].round(4).tolist()
      [1.0, 2.0]
    """
    window_lib.choice("data_format", data_format, window_lib.DATA_FORMATS)
    maps = _check_features(features, data_format)
    rois, batch_indices = jnp.asarray(rois), jnp.asarray(batch_indices)
    roi_lib.check_batch_indices(batch_indices, roi_lib.check_rois(rois, 4, "(x_1, y_1, x_2, y_2)"))
    window_lib.choice("level_rule", level_rule, LEVEL_RULES)
    scales = _check_scales(spatial_scales, len(maps), level_rule)
    if aligned_mode is None:
        aligned_mode = DEFAULT_ALIGNED_MODES[level_rule]
    align = sampling.Align.of(output_size, 1.0, sampling_ratio, aligned_mode, data_format)
    window_lib.choice("mode", mode, MODES)
    size = roi_lib.static_float("canonical_size", canonical_size)
    if size <= 0:
        raise ValueError(f"`canonical_size` (={canonical_size!r}) must be positive.")
    level = window_lib.static_int("canonical_level", canonical_level)
    attrs = Pyramid(align, scales, mode, level_rule, size, level)
    return _multilevel_roi_align(maps, rois, batch_indices, attrs)
