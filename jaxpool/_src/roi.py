"""Shared machinery of the ROI pooling family: argument checks, bilinear sampling, bin reads.

Every ROI op reads the feature map at a static number of positions per region: bilinear
samples (ROIAlign, ROIAlignRotated, the bilinear ROIPooling and PSROIPooling) or the elements
of an integer bin (max ROIPooling, average PSROIPooling).  Features are read channels-last
(``[N, H, W, C]``), so that each read is one contiguous channel vector and the channel axis is
a pass-through axis of every gather: a channel-sharded map stays sharded with no collective.

A bilinear sample follows the OpenVINO runtime along each axis of length ``L``: a coordinate
below -1 or above ``L`` reads nothing (weight 0), a negative one is clamped to 0, and one at or
past ``L - 1`` reads element ``L - 1`` alone; otherwise it reads elements ``floor(v)`` and
``floor(v) + 1`` with weights ``1 - frac(v)`` and ``frac(v)``.  The 2-D weights are products of
the per-axis ones.  Integer decisions (floors, clamps, sample counts) carry no derivative; the
weights are differentiable in the coordinates.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import window as window_lib


def check_features(x: jax.Array, data_format: str) -> tuple[int, int, int, int]:
    """Checks a feature map of rank 4 and a floating dtype; returns its ``(N, C, H, W)``."""
    window_lib.choice("data_format", data_format, window_lib.DATA_FORMATS)
    if x.ndim != 4:
        layout = "[N, C, H, W]" if data_format == "NCX" else "[N, H, W, C]"
        raise ValueError(f"`x` must have rank 4 ({layout}), got shape {tuple(x.shape)}.")
    if not jax.dtypes.issubdtype(x.dtype, np.floating):
        raise TypeError(f"`x` must have a floating dtype, got {x.dtype}.")
    n, c, h, w = window_lib.to_ncx_shape(x.shape, data_format)
    if h < 1 or w < 1:
        raise ValueError(f"`x` must have non-empty spatial axes, got shape {tuple(x.shape)}.")
    return n, c, h, w


def check_rois(rois: jax.Array, columns: int, layout: str) -> int:
    """Checks boxes of shape ``[R, columns]`` and a floating dtype; returns ``R``."""
    if rois.ndim != 2 or rois.shape[1] != columns:
        raise ValueError(
            f"`rois` (shape {tuple(rois.shape)}) must have shape [R, {columns}]: one row "
            f"{layout} per region."
        )
    if not jax.dtypes.issubdtype(rois.dtype, np.floating):
        raise TypeError(f"`rois` must have a floating dtype, got {rois.dtype}.")
    return rois.shape[0]


def check_batch_indices(batch_indices: jax.Array, num_rois: int) -> None:
    """Checks integer batch indices of shape ``[R]``."""
    if batch_indices.shape != (num_rois,):
        raise ValueError(
            f"`batch_indices` (shape {tuple(batch_indices.shape)}) must have shape "
            f"({num_rois},): one batch index per row of `rois`."
        )
    if not jnp.issubdtype(batch_indices.dtype, np.integer):
        raise TypeError(f"`batch_indices` must have an integer dtype, got {batch_indices.dtype}.")


def output_hw(output_size: Any) -> tuple[int, int]:
    """``output_size`` (an int or ``(out_h, out_w)``) as two positive ints."""
    out_h, out_w = window_lib.per_axis("output_size", output_size, 2, 1, what="output axis")
    return out_h, out_w


def static_float(name: str, value: Any) -> float:
    """A static Python float, refusing traced values and non-numbers."""
    if isinstance(value, jax.core.Tracer):
        raise TypeError(f"`{name}` must be a static Python float, got a traced value {value!r}.")
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise TypeError(f"`{name}` must be a float, got {value!r}.")
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must be a float, got {value!r}.") from None
    if not math.isfinite(result):
        raise ValueError(f"`{name}` (={value!r}) must be finite.")
    return result


def compute_dtype(x_dtype: Any, rois_dtype: Any) -> np.dtype:
    """The dtype coordinates, weights and sums are computed in: float32 for 16-bit inputs."""
    dtype = np.promote_types(np.dtype(x_dtype), np.dtype(rois_dtype))
    if dtype.itemsize < 4:
        return np.dtype(np.float32)
    return dtype


def divide(a: jax.Array, d: Any) -> jax.Array:
    """``a / d``, correctly rounded, for a scalar ``d``.

    XLA:CPU divides by a scalar as a product with its approximate reciprocal (7 / 3 gives
    2.3333335 in float32), which moves the floor and ceil of a bin's edges; the runtime's bins
    are decided by correctly rounded quotients.  Dividing by an array of ``a``'s shape that XLA
    cannot fold keeps the division exact.
    """
    full = lax.optimization_barrier(jnp.full(a.shape, d, a.dtype))
    return a / full


def product(a: Any, b: Any) -> jax.Array:
    """``a * b`` rounded to its dtype before any later sum.

    XLA:CPU contracts ``c + a * b`` into a fused multiply-add, which skips the product's
    rounding: ``-1 + 3 * fl(1 / 3)`` gives ``3e-8`` instead of 0, and its ceil moves a bin's
    edge.  The runtime rounds each product.  A select between the product and 0 (taken only
    for a NaN product) stands between the multiply and the add, so none is contracted.
    """
    a, b = jnp.asarray(a), jnp.asarray(b)
    rank = max(a.ndim, b.ndim)
    p = jnp.multiply(
        a.reshape((1,) * (rank - a.ndim) + a.shape), b.reshape((1,) * (rank - b.ndim) + b.shape)
    )
    return jnp.where(p == p, p, jnp.zeros_like(p))


def channels_last(x: jax.Array, data_format: str) -> jax.Array:
    """``x`` as ``[N, H, W, C]``.

    An NCX input is transposed into a buffer of its own (:func:`_written`): XLA fuses a
    plain transpose into every read that consumes it, and each read then gathers a channel
    vector with a stride of ``H * W`` elements, several times slower on a CPU.
    """
    if data_format == "NXC":
        return x
    n, c, h, w = x.shape
    if n > 1:
        return _written(lambda image: jnp.moveaxis(image, 0, -1), x)
    # One image: its two halves of rows, stacked again, keep the channels contiguous.
    even = h + h % 2
    halves = jnp.pad(x[0], ((0, 0), (0, even - h), (0, 0))).reshape(c, 2, even // 2, w)
    rows = lax.map(lambda half: jnp.moveaxis(half, 0, -1), jnp.moveaxis(halves, 1, 0))
    return rows.reshape(1, even, w, c)[:, :h]


def from_channels_last(y: jax.Array, data_format: str) -> jax.Array:
    """``[R, ..., C]`` to the output layout: ``[R, C, ...]`` for NCX, written out apart
    (:func:`_written`) so that XLA does not fuse the pooling into the transpose's loop order,
    where every read would fetch one channel of a sample."""
    if data_format == "NXC":
        return y
    if y.shape[0] < 2:
        return jnp.moveaxis(y, -1, 1)
    return _written(lambda part: jnp.moveaxis(part, -1, 0), y)


def _written(f: Callable[[jax.Array], jax.Array], a: jax.Array) -> jax.Array:
    """``f`` (a transposition of the axes after the first) applied to ``a`` as a loop of its
    own: ``lax.map`` over two halves of the first axis where it is even, else over its
    entries.  A loop's output is always written to memory, so XLA cannot fuse the
    transposition into the consumers (nor its producer into it)."""
    lead = a.shape[0]
    if lead % 2:
        return lax.map(f, a)
    halves = a.reshape(2, lead // 2, *a.shape[1:])
    done = lax.map(jax.vmap(f), halves)
    return done.reshape(lead, *done.shape[2:])


def nothing_read(
    n: int, num_rois: int, channels: int, output_size: tuple[int, ...], dtype: Any, data_format: str
) -> jax.Array | None:
    """The output where no box reads the map, else None: zeros of shape ``[R, channels,
    *output_size]`` (or channels-last) where there are no boxes (``R = 0``), no output
    channels, or no images (``N = 0``: every batch index lies outside ``[0, N)``, which gives
    zeros by the runtime's rule).  Their derivatives are zero."""
    if n and num_rois and channels:
        return None
    if data_format == "NCX":
        return jnp.zeros((num_rois, channels, *output_size), dtype)
    return jnp.zeros((num_rois, *output_size, channels), dtype)


def batch_or_zero(batch: jax.Array, n: int) -> tuple[jax.Array, jax.Array]:
    """Batch indices clipped into ``[0, N)`` and the mask of those that were inside."""
    batch = batch.astype(np.int32)
    inside = (batch >= 0) & (batch < n)
    return jnp.clip(batch, 0, n - 1), inside


# --------------------------------------------------------------------------------------------
# Bilinear samples.
# --------------------------------------------------------------------------------------------


def axis_corners(coord: jax.Array, length: int) -> tuple[jax.Array, jax.Array]:
    """The two elements and weights a bilinear sample at ``coord`` reads along one axis.

    Returns ``(index, weight)``, each of shape ``coord.shape + (2,)``, by the runtime's rule
    (module docstring).  The weights are differentiable in ``coord``.
    """
    inside = (coord >= -1) & (coord <= length)
    v = jnp.maximum(coord, 0)
    low = jnp.floor(lax.stop_gradient(v))
    edge = low >= length - 1
    low = jnp.where(edge, length - 1, low)
    v = jnp.where(edge, low, v)
    frac = v - low
    low_i = jnp.where(inside, low, 0).astype(np.int32)
    high_i = jnp.where(edge | ~inside, low_i, low_i + 1)
    zero = jnp.zeros_like(frac)
    weight = jnp.stack([jnp.where(inside, 1 - frac, zero), jnp.where(inside, frac, zero)], -1)
    return jnp.stack([low_i, high_i], -1), weight


def read(xt: jax.Array, *index: jax.typing.ArrayLike) -> jax.Array:
    """``xt[index]``: the channel vectors at broadcastable integer positions of channels-last
    ``xt`` (the last axis passes through every read)."""
    return xt[index]


def bilinear_samples(
    xt: jax.Array,
    lead: tuple[Any, ...],
    y_index: jax.Array,
    y_weight: jax.Array,
    x_index: jax.Array,
    x_weight: jax.Array,
    *,
    one_read: bool = False,
) -> jax.Array:
    """The values of bilinear samples of channels-last ``xt``, shape ``(*samples, C)``.

    ``lead`` indexes the axes before the rows and columns of ``xt`` (the batch index, ...) and
    broadcasts to ``samples``; ``y_index``/``y_weight`` have shape ``(*samples, 2)`` (or
    broadcast to it), as ``x_index``/``x_weight``.  A sample's value is the sum over its four
    corners of the weight products times the features, in the dtype of the weights.  With
    ``one_read``, the four corners are read by one gather (whose transpose is one scatter).
    """
    if one_read:
        values = read(
            xt, *(i[..., None, None] for i in lead), y_index[..., :, None], x_index[..., None, :]
        )
        weight = y_weight[..., :, None] * x_weight[..., None, :]
        return (weight[..., None] * values.astype(weight.dtype)).sum((-3, -2))
    total = None
    # One read per corner, weighted and added elementwise: XLA fuses the four reads and their
    # sum into one loop, where a stacked read would be written out four times larger.
    for a, b in itertools.product(range(2), range(2)):
        weight = (y_weight[..., a] * x_weight[..., b])[..., None]
        term = weight * read(xt, *lead, y_index[..., a], x_index[..., b]).astype(weight.dtype)
        total = term if total is None else total + term
    assert total is not None
    return total


# Bins of at most this many samples are pooled by a chain of elementwise sums or maxima over
# the samples, which XLA fuses with the reads into one loop; more samples are read into one
# array and reduced (a chain would grow the program with the sample count).
UNROLLED_SAMPLES = 16


def pool_samples(
    xt: jax.Array,
    lead: tuple[jax.Array, ...],
    y_index: jax.Array,
    y_weight: jax.Array,
    x_index: jax.Array,
    x_weight: jax.Array,
    mode: str,
) -> jax.Array:
    """The average (weights pre-divided by the sample count) or the runtime's maximum of the
    bilinear samples of each bin: ``(R, out_h, out_w, C)``.

    The corner arrays have the shape of the sample grid ``(R, out_h, S_h, out_w, S_w, 2)``, or
    broadcast to it; ``lead`` holds integer arrays of rank 3 that index the axes of ``xt``
    before its rows and columns (the batch index, and for position-sensitive pooling the bin)
    and broadcast to ``(R, out_h, out_w)``.
    """
    s_h, s_w = max(y_index.shape[2], x_index.shape[2]), max(y_index.shape[4], x_index.shape[4])
    if s_h * s_w > UNROLLED_SAMPLES:
        return _stacked(xt, lead, y_index, y_weight, x_index, x_weight, mode)
    if mode == "avg":
        return _unrolled_average(xt, lead, y_index, y_weight, x_index, x_weight)
    return _unrolled(xt, lead, y_index, y_weight, x_index, x_weight, mode)


def _unrolled(xt, lead, y_index, y_weight, x_index, x_weight, mode):
    """:func:`pool_samples` as a chain over the samples of each bin."""
    s_h, s_w = max(y_index.shape[2], x_index.shape[2]), max(y_index.shape[4], x_index.shape[4])
    pooled = None
    for k, m in itertools.product(range(s_h), range(s_w)):
        ky, my = min(k, y_index.shape[2] - 1), min(m, y_index.shape[4] - 1)
        kx, mx = min(k, x_index.shape[2] - 1), min(m, x_index.shape[4] - 1)
        value = bilinear_samples(
            xt,
            tuple(lead),
            y_index[:, :, ky, :, my],
            y_weight[:, :, ky, :, my],
            x_index[:, :, kx, :, mx],
            x_weight[:, :, kx, :, mx],
        )
        if pooled is None and mode == "avg":
            pooled = value
        elif pooled is None:
            pooled = jnp.where(value > 0, value, jnp.zeros_like(value))
        elif mode == "avg":
            pooled = pooled + value
        else:
            # The runtime keeps the first strictly larger sample; so does the derivative.
            pooled = jnp.where(value > pooled, value, pooled)
    assert pooled is not None
    return pooled


def _stacked(xt, lead, y_index, y_weight, x_index, x_weight, mode, one_read=False):
    """:func:`pool_samples` as one read of every sample, then a reduction over the samples."""
    values = bilinear_samples(
        xt,
        tuple(i[:, :, None, :, None] for i in lead),
        y_index,
        y_weight,
        x_index,
        x_weight,
        one_read=one_read,
    )
    if mode == "avg":
        return values.sum((2, 4))
    r, out_h, _, out_w, _, c = values.shape
    grid = values.transpose(0, 1, 3, 5, 2, 4).reshape(r, out_h, out_w, c, -1)
    return first_max_from_zero(grid, -1)


@functools.partial(jax.custom_jvp)
def _unrolled_average(xt, lead, y_index, y_weight, x_index, x_weight):
    """The chain of sums over the samples, differentiated in ``xt`` as the stacked read.

    The chain's own transpose would scatter each of its reads into a map of its own and add
    the maps; the stacked read's transpose is one scatter.
    """
    return _unrolled(xt, lead, y_index, y_weight, x_index, x_weight, "avg")


@functools.partial(_unrolled_average.defjvp, symbolic_zeros=True)
def _unrolled_average_jvp(primals, tangents):
    xt, lead, y_index, y_weight, x_index, x_weight = primals
    xt_dot, _, _, y_weight_dot, _, x_weight_dot = tangents
    y = _unrolled_average(*primals)
    zero = jax.custom_derivatives.SymbolicZero
    y_dot = jnp.zeros_like(y)
    if not isinstance(xt_dot, zero):
        y_dot = y_dot + _stacked(
            xt_dot, lead, y_index, y_weight, x_index, x_weight, "avg", one_read=True
        )
    # The average is bilinear in the features and the weights.
    if not isinstance(y_weight_dot, zero):
        y_dot = y_dot + _unrolled(xt, lead, y_index, y_weight_dot, x_index, x_weight, "avg")
    if not isinstance(x_weight_dot, zero):
        y_dot = y_dot + _unrolled(xt, lead, y_index, y_weight, x_index, x_weight_dot, "avg")
    return y, y_dot


def first_max_from_zero(samples: jax.Array, axis: int) -> jax.Array:
    """``max(0, max(samples, axis))`` where the first maximal sample carries the derivative.

    The runtime's ROIAlign max starts from 0 and keeps the first strictly larger sample; its
    derivative reads the tangent of that sample, or 0 where no sample exceeds 0.
    """
    where = jnp.argmax(lax.stop_gradient(samples), axis=axis, keepdims=True)
    best = jnp.take_along_axis(samples, where, axis=axis).squeeze(axis)
    return jnp.where(best > 0, best, jnp.zeros_like(best))


# --------------------------------------------------------------------------------------------
# Static sample bounds.
# --------------------------------------------------------------------------------------------


def adaptive_bound(length: int, out: int) -> int:
    """The static bound of adaptive samples per bin along an axis of ``length`` pooled to
    ``out`` bins: ``ceil(length / out)``, the runtime's count ``ceil(bin size)`` for every box
    no larger than the map.  Larger boxes have their count capped at this bound."""
    return max(1, -(-length // out))


def bin_bound(length: int, out: int) -> int:
    """The static bound of elements per integer bin (``[floor(i * s), ceil((i + 1) * s))`` of a
    box of ``s * out`` elements, clipped to the map) for every box of at most ``length + 1``
    elements: ``ceil((length + 1) / out) + 1``, and never more than ``length``."""
    return max(1, min(length, -(-(length + 1) // out) + 1))


def bin_samples(
    start: jax.Array, size: jax.Array, out: int, bound: int, sampling_ratio: int
) -> tuple[jax.Array, jax.Array, Any]:
    """Sample positions along one axis of boxes that start at ``start`` and span ``size``.

    Each of the ``out`` bins has ``count`` samples at ``start + i * bin + (s + 0.5) * bin /
    count`` (``bin = size / out``), in the runtime's order of operations: ``count`` is
    ``sampling_ratio``, or with ``sampling_ratio=0`` ``ceil(bin)`` capped to ``[0, bound]``.
    Returns the positions ``(R, out, bound)``, the counts ``(R,)`` (in the dtype of ``size``)
    and the mask ``(R, bound)`` of the samples that exist.
    """
    bin_size = divide(size, out)
    if sampling_ratio > 0:
        count = jnp.full(size.shape, sampling_ratio, size.dtype)
    else:
        count = jnp.clip(jnp.ceil(lax.stop_gradient(bin_size)), 0, bound)
    distance = bin_size / jnp.maximum(count, 1)
    i = np.arange(out, dtype=size.dtype)
    s = np.arange(bound, dtype=size.dtype) + np.asarray(0.5, size.dtype)
    first = start[:, None] + product(i[None, :], bin_size[:, None])
    position = first[:, :, None] + product(distance[:, None, None], s[None, None, :])
    exists = np.arange(bound, dtype=size.dtype)[None, :] < count[:, None]
    return position, count, exists


# --------------------------------------------------------------------------------------------
# ROIAlign's sample grid.
# --------------------------------------------------------------------------------------------

ALIGNED_MODES = ("asymmetric", "half_pixel_for_nn", "half_pixel")


def align_inputs(
    x: jax.typing.ArrayLike,
    rois: jax.typing.ArrayLike,
    batch_indices: jax.typing.ArrayLike,
    data_format: str,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The features, ``(x_1, y_1, x_2, y_2)`` boxes and batch indices of an axis-aligned
    ROIAlign as arrays, checked."""
    x, rois, batch_indices = jnp.asarray(x), jnp.asarray(rois), jnp.asarray(batch_indices)
    check_features(x, data_format)
    check_batch_indices(batch_indices, check_rois(rois, 4, "(x_1, y_1, x_2, y_2)"))
    return x, rois, batch_indices


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
        size = output_hw(output_size)
        scale = static_float("spatial_scale", spatial_scale)
        ratio = window_lib.static_int("sampling_ratio", sampling_ratio)
        if ratio < 0:
            raise ValueError(f"`sampling_ratio` (={sampling_ratio!r}) must be 0 or positive.")
        window_lib.choice("aligned_mode", aligned_mode, ALIGNED_MODES)
        return cls(size, scale, ratio, aligned_mode, data_format)


def aligned_samples(
    x: jax.Array, rois: jax.Array, batch_indices: jax.Array, attrs: Align, average: bool
) -> tuple[jax.Array, tuple[jax.Array, jax.Array, jax.Array, jax.Array]]:
    """The bilinear samples of the bins of axis-aligned boxes on the map ``x``, as ROIAlign
    takes them.

    The boxes ``(x_1, y_1, x_2, y_2)`` are scaled by ``aligned_mode``: ``x * spatial_scale``
    with width and height at least 1 (``"asymmetric"``), ``x * spatial_scale - 0.5``
    (``"half_pixel_for_nn"``) or ``(x + 0.5) * spatial_scale - 0.5`` (``"half_pixel"``); their
    bins are sampled by :func:`bin_samples`, adaptive counts bounded by :func:`adaptive_bound`
    of the map's ``H`` and ``W``.  Returns the batch indices clipped into ``[0, N)`` and the
    corners ``(y_index, y_weight, x_index, x_weight)`` for :func:`pool_samples`, which
    broadcast to the grid ``(R, out_h, S_h, out_w, S_w, 2)``, in :func:`compute_dtype`; the
    weights are 0 for samples beyond a bin's count and for regions whose batch index lies
    outside ``[0, N)``, and divided by the sample counts where ``average``.
    """
    n, _, height, width = window_lib.to_ncx_shape(x.shape, attrs.data_format)
    (out_h, out_w), scale, ratio = attrs.output_size, attrs.spatial_scale, attrs.sampling_ratio
    boxes = rois.astype(compute_dtype(x.dtype, rois.dtype))
    offset_src = 0.5 if attrs.aligned_mode == "half_pixel" else 0.0
    offset_dst = 0.0 if attrs.aligned_mode == "asymmetric" else -0.5
    x1, y1, x2, y2 = ((boxes[:, i] + offset_src) * scale + offset_dst for i in range(4))
    roi_w, roi_h = x2 - x1, y2 - y1
    if attrs.aligned_mode == "asymmetric":
        roi_w, roi_h = jnp.maximum(roi_w, 1), jnp.maximum(roi_h, 1)

    if ratio > 0:
        bound_h = bound_w = ratio
    else:
        bound_h, bound_w = adaptive_bound(height, out_h), adaptive_bound(width, out_w)
    ys, count_y, exists_y = bin_samples(y1, roi_h, out_h, bound_h, ratio)
    xs, count_x, exists_x = bin_samples(x1, roi_w, out_w, bound_w, ratio)
    y_index, y_weight = axis_corners(ys, height)  # (R, out_h, bound_h, 2)
    x_index, x_weight = axis_corners(xs, width)  # (R, out_w, bound_w, 2)

    batch, inside = batch_or_zero(batch_indices, n)
    y_scale = (exists_y & inside[:, None]).astype(boxes.dtype)
    x_scale = exists_x.astype(boxes.dtype)
    if average:
        y_scale = y_scale / jnp.maximum(count_y, 1)[:, None]
        x_scale = x_scale / jnp.maximum(count_x, 1)[:, None]
    y_weight = y_weight * y_scale[:, None, :, None]
    x_weight = x_weight * x_scale[:, None, :, None]
    corners = (
        y_index[:, :, :, None, None],
        y_weight[:, :, :, None, None],
        x_index[:, None, None],
        x_weight[:, None, None],
    )
    return batch, corners
