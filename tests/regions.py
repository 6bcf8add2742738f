"""The region ops as one table of rows, for the tests that run every op the same way: exported
with symbolic shapes (``test_symbolic_regions.py``) and sharded (``test_region_sharding.py``).

A row calls one public function on feature maps in a given layout and on boxes of any count,
in each of its ``variants`` (keyword arguments: modes, aligned modes, rules); the variants are
dealt out over the row's layouts (:meth:`Row.variants_in`), so that each mode runs once, in
one layout, and each layout runs several.  Its maps have the channels a test gives (a multiple
of 8, so that the position-sensitive ops find their groups), its boxes come from a generator
of ``count`` boxes on ``images`` images (the last of five or more on an image outside the
batch, which reads nothing), and ``specs`` give each box array's shape with the box count as
``r``.  ``smooth`` names the box arrays the op is differentiable in.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from cases import check_box_derivatives as check_box_derivatives
from cases import random_boxes, to_layout

import jaxpool
from jaxpool import torch as tv

# One map of 9 x 10, or a pyramid of two levels (1/4 and 1/8) of a 64 x 64 image.
MAP = ((9, 10),)
PYRAMID = ((16, 16), (8, 8))
SCALES = (1 / 4, 1 / 8)
LAYOUTS = ("NCX", "NXC")


@dataclasses.dataclass(frozen=True)
class Row:
    """One op of the table (the module docstring)."""

    name: str
    call: Callable[..., Any]  # call(maps, boxes, data_format, **variant) -> one output
    boxes: Callable[[np.random.Generator, int, int], tuple[np.ndarray, ...]]
    specs: tuple[str, ...]
    variants: tuple[dict[str, Any], ...] = ({},)
    smooth: tuple[int, ...] = ()
    maps: tuple[tuple[int, int], ...] = MAP
    layouts: tuple[str, ...] = LAYOUTS
    # Whether the number of images may be symbolic (torchvision's list of boxes holds one
    # array per image, a static count).
    symbolic_images: bool = True
    # Whether a test runs the row on the portable program too, where the CPU's differs (the
    # ``jaxpool.torch`` rows bind core ops whose own rows run both).
    portable: bool = True
    # Whether an output channel sums input channels that a channel-sharded map holds in
    # different shards (position-sensitive pooling over several spatial bins).
    channel_sums: bool = False

    def variants_in(self, data_format: str) -> tuple[dict[str, Any], ...]:
        """The variants that run in ``data_format``: every ``k``-th from its position among
        the row's ``k`` layouts (all of them where there are fewer variants than layouts)."""
        k = len(self.layouts)
        if len(self.variants) < k:
            return self.variants
        return self.variants[self.layouts.index(data_format) :: k]

    def outputs(self, maps, boxes, data_format: str) -> tuple[Any, ...]:
        """The row's outputs in ``data_format``: one per variant of the layout."""
        variants = self.variants_in(data_format)
        return tuple(self.call(maps, boxes, data_format, **v) for v in variants)


def _batch(rng: np.random.Generator, count: int, images: int) -> np.ndarray:
    batch = rng.integers(0, images, count).astype(np.int32)
    if count >= 5:
        batch[-1] = images
    return batch


def aligned(rng, count, images, image=(9, 10)):
    """``(rois [R, 4], batch_indices [R])``: boxes of every kind on an image of ``image``."""
    rois = random_boxes(rng, count, image[0], image[1], 1.0, inverted=0.2)
    return rois, _batch(rng, count, images)


def rows5(rng, count, images, image=(9, 10)):
    """``rois [R, 5]``: ``(batch_index, x_1, y_1, x_2, y_2)``."""
    rois, batch = aligned(rng, count, images, image)
    return (np.c_[batch.astype(np.float32), rois],)


def rotated(rng, count, images):
    """``(rois [R, 5], batch_indices [R])``: ``(center_x, center_y, width, height, angle)``."""
    rois, batch = aligned(rng, count, images)
    centre, size = (rois[:, :2] + rois[:, 2:]) / 2, np.abs(rois[:, 2:] - rois[:, :2])
    angle = rng.uniform(-np.pi, np.pi, (count, 1))
    return np.c_[centre, size, angle].astype(np.float32), batch


def with_offsets(rng, count, images):
    """``(rois [R, 5], offsets [R, 4, 2, 2])``: two classes of offsets on 2 x 2 parts."""
    (rois,) = rows5(rng, count, images)
    return rois, rng.uniform(-0.3, 0.3, (count, 4, 2, 2)).astype(np.float32)


# ``(rois [R, 4], batch_indices [R])`` on the 64 x 64 image of :data:`PYRAMID`.
pyramid = functools.partial(aligned, image=(64, 64))


def per_image(rng, count, images):
    """One ``[R, 4]`` array per image (torchvision's list of boxes)."""
    return tuple(random_boxes(rng, count, 64, 64, 1.0) for _ in range(images))


def _normalised(rows):
    """Rows of :func:`rows5` with their corners divided by 9 (to about ``[-0.2, 1.2]``)."""
    return rows * np.float32([[1, 1 / 9, 1 / 9, 1 / 9, 1 / 9]])


def _channels(x, data_format: str) -> int:
    return x.shape[1] if data_format == "NCX" else x.shape[-1]


def _roi_pool(maps, boxes, fmt, method):
    (rows,) = boxes
    if method == "bilinear":
        return jaxpool.roi_pool(maps[0], _normalised(rows), (2, 3), method=method, data_format=fmt)
    return jaxpool.roi_pool(maps[0], rows, 2, spatial_scale=0.9, data_format=fmt)


def _roi_align(maps, boxes, fmt, **variant):
    return jaxpool.roi_align(maps[0], *boxes, 2, spatial_scale=0.9, data_format=fmt, **variant)


def _rotated(maps, boxes, fmt, **variant):
    return jaxpool.roi_align_rotated(maps[0], *boxes, 2, data_format=fmt, **variant)


def _psroi_pool(maps, boxes, fmt, mode, rounding="openvino", spatial_bins=1):
    (rows,) = boxes
    c = _channels(maps[0], fmt)
    if mode == "bilinear":
        args, kwargs = (_normalised(rows), c // spatial_bins**2, 3), dict(spatial_bins=spatial_bins)
    else:
        args, kwargs = (rows, c // 4, 2), dict(spatial_scale=0.9, rounding=rounding)
    return jaxpool.psroi_pool(maps[0], *args, mode=mode, **kwargs, data_format=fmt)


def _psroi_align(maps, boxes, fmt, **variant):
    return jaxpool.psroi_align(maps[0], *boxes, 2, data_format=fmt, **variant)


def _deformable(maps, boxes, fmt, offsets):
    rois, given = boxes
    attrs = dict(output_dim=_channels(maps[0], fmt) // 4, group_size=2, trans_std=0.5)
    attrs.update(spatial_bins=(1, 2), offsets=given if offsets else None, data_format=fmt)
    return jaxpool.deformable_psroi_pool(maps[0], rois, **attrs)


def _multilevel(maps, boxes, fmt, **variant):
    levels = dict(spatial_scales=SCALES, canonical_size=32, canonical_level=3)
    return jaxpool.multilevel_roi_align(maps, *boxes, 2, **levels, data_format=fmt, **variant)


def _torch(maps, boxes, fmt, op, **variant):
    """A ``jaxpool.torch`` region function of one ``[K, 5]`` array of boxes."""
    return getattr(tv, op)(maps[0], *boxes, 2, 0.9, **variant)


def _torch_lists(maps, boxes, fmt, op, sampling_ratio):
    """A ``jaxpool.torch`` region function of one ``[L, 4]`` array of boxes per image."""
    if op == "roi_align":
        return tv.roi_align(maps[0], list(boxes), 2, 0.25, sampling_ratio)
    shapes = [(64, 64)] * len(boxes)
    return tv.multi_scale_roi_align(maps, list(boxes), shapes, 2, sampling_ratio, 32, 3)


def _aligns(ratio: int) -> tuple[dict[str, Any], ...]:
    """ROIAlign's modes and aligned modes at ``sampling_ratio=ratio``: both modes in each
    layout, each aligned mode in one at least.  Adaptive sampling takes both modes alone: the
    aligned modes move the boxes before sampling, as the fixed ratio's rows show."""
    modes = (
        ("avg", "asymmetric"),
        ("max", "half_pixel_for_nn"),
        ("max", "half_pixel"),
        ("avg", "half_pixel"),
    )
    return tuple(
        dict(mode=mode, aligned_mode=aligned_mode, sampling_ratio=ratio)
        for mode, aligned_mode in (modes if ratio else modes[:2])
    )


def _rows(ratio: int, torch_ratio: int) -> tuple[Row, ...]:
    """The rows of the ops that sample at ``sampling_ratio=ratio``."""
    # The level rules assign boxes before any sampling, and torch's per-image lists become
    # rows before it: adaptive sampling takes one of each.
    rules = ("torchvision", "detectron2", "openvino") if ratio else ("detectron2",)
    levels = tuple(dict(level_rule=rule, sampling_ratio=ratio) for rule in rules)
    aligned_modes = ("half_pixel_for_nn", "asymmetric") if ratio else ("half_pixel_for_nn",)
    ps = tuple(dict(sampling_ratio=ratio, aligned_mode=a) for a in aligned_modes)
    turns = tuple(dict(sampling_ratio=ratio, clockwise=c) for c in (False, True))
    aligns = tuple(dict(op=op, sampling_ratio=torch_ratio) for op in ("roi_align", "ps_roi_align"))
    list_ops = ("roi_align", "multi_scale_roi_align") if ratio else ("multi_scale_roi_align",)
    lists = tuple(dict(op=op, sampling_ratio=torch_ratio) for op in list_ops)
    s = "" if ratio else "_adaptive"
    return (
        Row(f"roi_align{s}", _roi_align, aligned, ("r, 4", "r"), _aligns(ratio), (0,)),
        Row(f"roi_align_rotated{s}", _rotated, rotated, ("r, 5", "r"), turns, (0,)),
        Row(f"psroi_align{s}", _psroi_align, aligned, ("r, 4", "r"), ps, (0,)),
        Row(f"multilevel_roi_align{s}", _multilevel, pyramid, ("r, 4", "r"), levels, (0,), PYRAMID),
        Row(f"torch.aligns{s}", _torch, rows5, ("r, 5",), aligns, (0,), **_TORCH),
        Row(
            f"torch.lists{s}",
            _torch_lists,
            per_image,
            ("r, 4", "r, 4"),
            lists,
            (0, 1),
            PYRAMID,
            symbolic_images=False,
            **_TORCH,
        ),
    )


# The rows of ``jaxpool.torch``: channels first only, their core ops' rows run both programs.
_TORCH = dict(layouts=("NCX",), portable=False)
# The variants of the ops without a sampling ratio.
_ROI_POOLS = (dict(method="max"), dict(method="bilinear"))
_PS_POOLS = (
    dict(mode="average"),
    dict(mode="average", rounding="torchvision"),
    dict(mode="bilinear"),
)
_PS_BINS = (dict(mode="bilinear", spatial_bins=2),)
_OFFSETS = (dict(offsets=False), dict(offsets=True))
_TORCH_POOLS = (dict(op="roi_pool"), dict(op="ps_roi_pool"))

# The rows at a fixed sampling ratio (1: what the programs of every ratio share, at the least
# compile time) and of the ops that have none ...
ROWS = (
    Row("roi_pool", _roi_pool, rows5, ("r, 5",), _ROI_POOLS, (0,)),
    *_rows(1, 1),
    Row("psroi_pool", _psroi_pool, rows5, ("r, 5",), _PS_POOLS, (0,)),
    Row(
        "psroi_pool_spatial_bins", _psroi_pool, rows5, ("r, 5",), _PS_BINS, (0,), channel_sums=True
    ),
    Row("deformable_psroi_pool", _deformable, with_offsets, ("r, 5", "r, 4, 2, 2"), _OFFSETS, (1,)),
    Row("torch.pools", _torch, rows5, ("r, 5",), _TORCH_POOLS, **_TORCH),
)

# ... and with adaptive sampling (sampling_ratio=0; torchvision's -1).
ADAPTIVE_ROWS = _rows(0, -1)

# ROIAlign's average with adaptive sampling alone, the mode whose programs compile fastest.
ADAPTIVE_AVERAGE = Row(
    "roi_align_adaptive_avg", _roi_align, aligned, ("r, 4", "r"), (dict(sampling_ratio=0),), (0,)
)

BY_NAME = {row.name: row for row in (*ROWS, *ADAPTIVE_ROWS)}

# The box that holds a NaN in :func:`check_nan_box` (its row of the output, also where the
# boxes come one array per image: it is on the first).
NAN_BOX = 1


def check_nan_box(name: str, picks: tuple[int, ...], count: int = 4, images: int = 2) -> None:
    """:func:`check_nan_boxes` of one row."""
    check_nan_boxes({name: picks}, count, images)


def check_nan_boxes(rows: dict[str, tuple[int, ...]], count: int = 4, images: int = 2) -> None:
    """The NaN-box rule (API.md, "Numeric policy") on the variants ``rows[name]`` of each row
    ``name``, in one program of its first layout (every row in one program): a box with a NaN
    coordinate gives NaN in every element of its output, its cotangent reaches no feature, and
    every other box's output and cotangent in the maps are bitwise those of the call where that
    box is finite."""
    rng = np.random.default_rng(7)
    finite, poisoned, maps = {}, {}, {}
    for name in rows:
        row = BY_NAME[name]
        maps[name] = [
            to_layout(rng.standard_normal((images, 8, h, w)).astype(np.float32), row.layouts[0])
            for h, w in row.maps
        ]
        finite[name] = row.boxes(rng, count, images)
        first = finite[name][0].copy()
        first[NAN_BOX, 1] = np.nan
        poisoned[name] = (first, *finite[name][1:])

    def others(o):  # True on the outputs of the finite boxes
        return (np.arange(o.shape[0]) != NAN_BOX).reshape((-1,) + (1,) * (o.ndim - 1))

    def ones_on(o, finite: bool):  # a cotangent of 1 on the finite boxes' outputs, or the NaN one's
        return jnp.where(others(o) == finite, jnp.ones_like(o), jnp.zeros_like(o))

    def one_row(name, maps, boxes):
        row = BY_NAME[name]
        variants = [row.variants[i] for i in rows[name]]
        out, pullback = jax.vjp(
            lambda m: [row.call(m, boxes, row.layouts[0], **v) for v in variants], maps
        )
        return out, *(pullback([ones_on(o, finite) for o in out]) for finite in (True, False))

    @jax.jit
    def run(maps, boxes):
        return {name: one_row(name, maps[name], boxes[name]) for name in rows}

    want, got = run(maps, finite), run(maps, poisoned)
    for name, picks in rows.items():
        (want_out, want_others, _), (out, got_others, got_nan) = want[name], got[name]
        for pick, a, b in zip(picks, out, want_out):
            a, b = np.asarray(a), np.asarray(b)
            variant = f"{name} {BY_NAME[name].variants[pick]}"
            assert np.isnan(a[NAN_BOX]).all(), variant
            keep = others(a).ravel()
            np.testing.assert_array_equal(a[keep], b[keep], err_msg=variant)
        leaves = zip(*(jax.tree.leaves(g) for g in (got_others, want_others, got_nan)))
        for a, b, c in leaves:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)
            np.testing.assert_array_equal(np.asarray(c), 0, err_msg=name)
