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

from jaxpool._src import dispatch, exact
from jaxpool._src import window as window_lib
from jaxpool._src.layout import row_major


def check_features(x: jax.Array, data_format: str, name: str = "x") -> tuple[int, int, int, int]:
    """Checks a feature map (the argument ``name``) of rank 4 and a floating dtype; returns its
    ``(N, C, H, W)``."""
    window_lib.choice("data_format", data_format, window_lib.DATA_FORMATS)
    if x.ndim != 4:
        layout = "[N, C, H, W]" if data_format == "NCX" else "[N, H, W, C]"
        raise ValueError(f"`{name}` must have rank 4 ({layout}), got shape {tuple(x.shape)}.")
    if not jax.dtypes.issubdtype(x.dtype, np.floating):
        raise TypeError(f"`{name}` must have a floating dtype, got {x.dtype}.")
    n, c, h, w = window_lib.to_ncx_shape(x.shape, data_format)
    static_dims(name, x.shape, {"C": c, "H": h, "W": w}, "the number of images N")
    if h < 1 or w < 1:
        raise ValueError(f"`{name}` must have non-empty spatial axes, got shape {tuple(x.shape)}.")
    return n, c, h, w


def static_dims(name: str, shape: tuple[Any, ...], dims: dict[str, Any], free: str) -> None:
    """Refuses a symbolic dimension among ``dims`` (name -> dimension) of the argument ``name``
    (of ``shape``): they decide the program's shapes, and under ``jax.export``'s symbolic
    shapes only ``free`` may be symbolic."""
    for axis, d in dims.items():
        if not isinstance(d, int):
            raise ValueError(
                f"`{name}` (shape {tuple(shape)}) has a symbolic {axis} (={d}); {axis} must be "
                f"static, and of `{name}`'s dimensions only {free} may be symbolic."
            )


def check_rois(rois: jax.Array, columns: int, layout: str) -> int:
    """Checks boxes of shape ``[R, columns]`` and a floating dtype; returns ``R``."""
    if rois.ndim == 2:
        static_dims("rois", rois.shape, {"row width": rois.shape[1]}, "the number of boxes R")
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
    """``a / d``, correctly rounded, for a static scalar ``d``.

    The runtimes' bins are decided by correctly rounded quotients.  float32 is divided by
    :func:`jaxpool._src.exact.divide`'s integer program (XLA's GPU backend divides float32
    within two units in the last place, its CPU backend by a constant through its approximate
    reciprocal: 7 / 3 gives 2.3333335).  A float64 division is correctly rounded on an
    accelerator; on a CPU, dividing by an array of ``a``'s shape that XLA cannot fold keeps it
    so.  The array is built from ``a``'s own bits (which cancel through a barrier) so that it
    has ``a``'s shape under ``vmap`` too: a divisor made without ``a`` would be broadcast over
    the batch axis, and the broadcast divided through a reciprocal again.
    """
    a = jnp.asarray(a)
    if a.dtype == np.float32:
        return exact.divide(a, d)
    unsigned = np.dtype(f"uint{8 * a.dtype.itemsize}")
    bits = lax.bitcast_convert_type(lax.stop_gradient(a), unsigned)
    zero = lax.optimization_barrier(bits) ^ bits
    full = lax.bitcast_convert_type(zero | np.asarray(d, a.dtype).view(unsigned), a.dtype)
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
    """``x`` as ``[N, H, W, C]``, stored so: a transpose written out row-major
    (:mod:`jaxpool._src.layout`), or on a CPU its program in :mod:`jaxpool._src.cpu.layout`."""
    if data_format == "NXC":
        return x
    return dispatch.run("channels_last", lambda a: row_major(jnp.moveaxis(a, 1, -1)), x)


def from_channels_last(y: jax.Array, data_format: str) -> jax.Array:
    """``[R, ..., C]`` to the output layout: ``[R, C, ...]`` for NCX, transposed from a
    channels-last array stored so."""
    if data_format == "NXC":
        return y
    return dispatch.run("from_channels_last", lambda a: jnp.moveaxis(row_major(a), -1, 1), y)


def stored_row_major(a: jax.Array) -> jax.Array:
    """:func:`jaxpool._src.layout.row_major` but on a CPU, where ``a`` is returned as it is
    (XLA's CPU backend keeps the layouts its programs are written in)."""
    return dispatch.run("row_major", row_major, a)


def nothing_read(
    n: int, num_rois: int, channels: int, output_size: tuple[int, ...], dtype: Any, data_format: str
) -> jax.Array | None:
    """The output where no box reads the map, else None: zeros of shape ``[R, channels,
    *output_size]`` (or channels-last) where there are no boxes (``R = 0``), no output
    channels, or no images (``N = 0``: every batch index lies outside ``[0, N)``, which gives
    zeros by the runtime's rule).  Their derivatives are zero.  A symbolic ``N`` or ``R``
    (``jax.export``) is at least 1."""
    if all(not isinstance(d, int) or d > 0 for d in (n, num_rois, channels)):
        return None
    if data_format == "NCX":
        return jnp.zeros((num_rois, channels, *output_size), dtype)
    return jnp.zeros((num_rois, *output_size, channels), dtype)


def round_half_away(v: jax.Array) -> jax.Array:
    """``roundf``, halves away from zero (``jnp.round`` rounds them to even), with no
    derivative.  ``v - trunc(v)`` is exact, where ``floor(|v| + 0.5)`` rounds the sum first
    (0.49999997 + 0.5 is 1 in float32)."""
    v = lax.stop_gradient(v)
    whole = jnp.trunc(v)
    return jnp.where(jnp.abs(v - whole) >= 0.5, whole + jnp.sign(v), whole)


def listed(batch_index: jax.Array) -> jax.Array:
    """Which boxes the runtime's position-sensitive poolings read: those before the first batch
    index of -1, which ends their list of boxes (every later box gives zeros)."""
    return jnp.cumsum(batch_index == -1, dtype=np.int32) == 0


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
    largest: bool = False,
) -> jax.Array:
    """The values of bilinear samples of channels-last ``xt``, shape ``(*samples, C)``.

    ``lead`` indexes the axes before the rows and columns of ``xt`` (the batch index, ...) and
    broadcasts to ``samples``; ``y_index``/``y_weight`` have shape ``(*samples, 2)`` (or
    broadcast to it), as ``x_index``/``x_weight``.  A sample's value is the sum over its four
    corners of the weight products times the features, in the dtype of the weights.  With
    ``one_read``, the four corners are read by one gather (whose transpose is one scatter).
    With ``largest``, it is instead the largest of the four weighted terms (ONNX Runtime's
    RoiAlign max), taken as that runtime takes it: corners in row-major order, each replacing
    the running value only where strictly larger, so that a NaN term counts only where it is
    the first.
    """
    if one_read:
        values = read(
            xt, *(i[..., None, None] for i in lead), y_index[..., :, None], x_index[..., None, :]
        )
        weight = y_weight[..., :, None] * x_weight[..., None, :]
        return (weight[..., None] * values.astype(weight.dtype)).sum((-3, -2))
    total = None
    # One read per corner, weighted and added elementwise: XLA fuses the reads and their sum
    # into one loop, where a stacked read would be written out as many times larger.
    for a, b in itertools.product(range(y_index.shape[-1]), range(x_index.shape[-1])):
        weight = (y_weight[..., a] * x_weight[..., b])[..., None]
        term = weight * read(xt, *lead, y_index[..., a], x_index[..., b]).astype(weight.dtype)
        if total is None:
            total = term
        elif largest:
            total = jnp.where(term > total, term, total)
        else:
            total = total + term
    assert total is not None
    return total


# Bins whose samples take at most this many reads (corners) are pooled by one chain of
# elementwise sums or maxima, which XLA fuses with the reads into one loop.  Larger bins are
# pooled by a loop over tiles of their samples, each tile a chain: one chain would grow the
# program (and its compile time) with the sample count, and one read of every sample would
# write a buffer of (boxes x bins x samples x channels).
UNROLLED_READS = 64


def pool_samples(
    xt: jax.Array,
    lead: tuple[jax.Array, ...],
    y_index: jax.Array,
    y_weight: jax.Array,
    x_index: jax.Array,
    x_weight: jax.Array,
    mode: str,
) -> jax.Array:
    """The average (weights pre-divided by the sample count) or the maximum of the bilinear
    samples of each bin: ``(R, out_h, out_w, C)``.

    ``mode``: ``"avg"``; ``"max"``, OpenVINO's maximum of the samples, which starts from 0;
    ``"onnx_max"``, ONNX Runtime's RoiAlign max, the largest weighted corner term of a bin's
    samples (:func:`bilinear_samples` with ``largest``), which starts from the first sample:
    the first sample (the first in the grid, or in the first tile) must be the bin's first in
    the runtime's order, and a sample may repeat (a maximum ignores repeats).  Both maxima
    keep the first strictly larger sample, so a NaN counts only where it is the first.

    The corner arrays have the shape of the sample grid ``(R, out_h, S_h, out_w, S_w, K)``, or
    broadcast to it, with ``K`` corners per sample and axis (2 for a bilinear sample);
    ``lead`` holds integer arrays of rank 3 that index the axes of ``xt`` before its rows and
    columns (the batch index, and for position-sensitive pooling the bin) and broadcast to
    ``(R, out_h, out_w)``.
    """
    s_h, s_w = max(y_index.shape[2], x_index.shape[2]), max(y_index.shape[4], x_index.shape[4])
    if s_h * s_w * y_index.shape[-1] * x_index.shape[-1] > UNROLLED_READS:
        return _tiles(xt, lead, y_index, y_weight, x_index, x_weight, mode)
    if mode == "avg":
        return _unrolled_average(xt, lead, y_index, y_weight, x_index, x_weight)
    return _unrolled(xt, lead, y_index, y_weight, x_index, x_weight, mode)


def tile_side(corners: int) -> int:
    """The side of the square tiles :func:`pool_samples` loops over, in samples of ``corners``
    reads each: 5 x 5 one-corner samples (an adaptive bin's window of elements,
    :meth:`Axis.corners`) or 4 x 4 bilinear samples."""
    return 5 if corners == 1 else 4


def _tiles(xt, lead, y_index, y_weight, x_index, x_weight, mode):
    """:func:`pool_samples` as a loop over tiles of samples (:func:`tile_side`), each tile
    pooled by the chain."""
    s_h, s_w = max(y_index.shape[2], x_index.shape[2]), max(y_index.shape[4], x_index.shape[4])
    side = tile_side(y_index.shape[-1] * x_index.shape[-1])
    tile_h, tile_w = min(side, s_h), min(side, s_w)
    grid_h, grid_w = -(-s_h // tile_h) * tile_h, -(-s_w // tile_w) * tile_w

    def tiled(a: jax.Array) -> jax.Array:
        # Samples past the grid read element 0 with weight 0, a 0 that neither a sum nor a
        # maximum from 0 sees; ONNX's maximum sees it, so there they repeat the last sample.
        pads = [(0, 0)] * a.ndim
        if a.shape[2] > 1:
            pads[2] = (0, grid_h - a.shape[2])
        if a.shape[4] > 1:
            pads[4] = (0, grid_w - a.shape[4])
        return jnp.pad(a, pads, mode="edge" if mode == "onnx_max" else "constant")

    corners = [tiled(a) for a in (y_index, y_weight, x_index, x_weight)]

    def piece(a: jax.Array, top: Any, left: Any) -> jax.Array:
        if a.shape[2] > 1:
            a = lax.dynamic_slice_in_dim(a, top, tile_h, 2)
        if a.shape[4] > 1:
            a = lax.dynamic_slice_in_dim(a, left, tile_w, 4)
        return a

    def tile_row(pooled, top):
        def tile(pooled, left):
            # Recomputed in the derivative, so that a tile's reads leave nothing to store per
            # tile (a cond keeps room for the stores of every program it might run).
            @functools.partial(jax.checkpoint, policy=jax.checkpoint_policies.nothing_saveable)
            def pool(pooled):
                y_i, y_w, x_i, x_w = (piece(a, top, left) for a in corners)
                value = pool_samples(xt, lead, y_i, y_w, x_i, x_w, mode)
                if mode == "avg":
                    return pooled + value
                # Each tile's maximum starts from 0 (OpenVINO's) or from its first sample
                # (ONNX's, where the first tile replaces the carry), and an earlier tile keeps
                # a tie.
                larger = value > pooled
                if mode == "onnx_max":
                    larger = larger | ((top == 0) & (left == 0))
                return jnp.where(larger, value, pooled)

            return pool(pooled), None

        lefts = jnp.arange(0, s_w, tile_w, dtype=np.int32)
        return lax.scan(tile, pooled, lefts)[0], None

    shape = (
        max(y_index.shape[0], x_index.shape[0]),
        max(y_index.shape[1], x_index.shape[1]),
        max(y_index.shape[3], x_index.shape[3]),
        xt.shape[-1],
    )
    zeros = jnp.zeros(shape, jnp.result_type(y_weight, x_weight))
    pooled, _ = lax.scan(tile_row, zeros, jnp.arange(0, s_h, tile_h, dtype=np.int32))
    return pooled


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
            largest=mode == "onnx_max",
        )
        if pooled is None and mode == "max":
            pooled = jnp.where(value > 0, value, jnp.zeros_like(value))
        elif pooled is None:
            pooled = value
        elif mode == "avg":
            pooled = pooled + value
        else:
            # The runtimes keep the first strictly larger sample; so does the derivative.
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
# Integer bins.
# --------------------------------------------------------------------------------------------


def bin_bound(length: int, out: int) -> int:
    """The static bound of elements per integer bin (``[floor(i * s), ceil((i + 1) * s))`` of a
    box of ``s * out`` elements, clipped to the map) for every box of at most ``length + 1``
    elements: ``ceil((length + 1) / out) + 1``, and never more than ``length``."""
    return max(1, min(length, -(-(length + 1) // out) + 1))


def bin_chunk(
    low: jax.Array, high: jax.Array, offset: Any, bound: int, length: int
) -> tuple[jax.Array, jax.Array]:
    """Chunk ``offset`` of the integer bins ``[low, high)`` (``(R, out)``, clipped to the map):
    the positions ``low + offset * bound + [0, bound)`` clipped to ``[0, length)``, and which of
    them lie in their bin, each ``(R, out, bound)``.  Chunk 0 holds every bin of
    :func:`bin_bound`'s boxes; a longer bin continues in the further chunks."""
    k = low[:, :, None] + offset * bound + np.arange(bound, dtype=np.int32)[None, None, :]
    return jnp.minimum(k, length - 1), k < high[:, :, None]


# --------------------------------------------------------------------------------------------
# ROIAlign's samples along one axis, and the static bounds programs are built for.
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Axis:
    """The samples of the ``out`` bins of every box along one axis of the map.

    Bin ``i`` of box ``r`` starts at ``first[r, i]`` and holds ``count[r]`` samples, sample
    ``s`` at ``first[r, i] + step[r] * (s + 0.5)`` (the runtime's positions and order of
    operations).  With a fixed sampling ratio every sample is read (``lowest`` is None and
    ``top`` is the ratio).  With adaptive sampling, ``count = ceil(bin size)`` has no bound, but
    only the samples ``s`` in ``[lowest, lowest + reach)`` of a bin can fall in the interval
    that reads the map (the others read 0 and only count in the divisor); ``reach`` is at most
    ``top`` whatever the box, so programs built for static bounds up to ``top`` are exact for
    every box.  ``length`` (an int, or one per box) is the map's extent on this axis, and
    ``offset`` (0, or one per box) is added to the elements read.
    """

    first: jax.Array
    step: jax.Array
    count: jax.Array
    lowest: jax.Array | None
    reach: jax.Array | None
    length: Any
    offset: Any
    top: int

    def positions(
        self, bound: int, average: bool, ends: bool = False
    ) -> tuple[jax.Array, jax.Array]:
        """The positions of ``bound`` samples per bin, ``(R, out, bound)``, and their scales:
        0 for samples a bin does not hold, else 1, or ``1 / count`` where ``average``.

        With ``ends`` (for a maximum that does not start from 0, which must see the value of
        every sample and the first sample first), an adaptive bin has ``bound + 2`` slots,
        each a sample it holds: its first sample, the ``bound`` from ``lowest`` (those past
        ``reach`` repeat the last that can read the map), then its last sample.  The samples
        no slot holds lie outside the map and read 0, as the first or the last slot then
        does.  Scales are 1, and 0 where the bin holds no sample (or, in the middle slots,
        where it reads nothing).
        """
        k = np.arange(bound, dtype=self.first.dtype)[None, None, :]
        half = np.asarray(0.5, k.dtype)
        if self.lowest is None or self.reach is None:
            s = k + half
            scale = jnp.ones_like(self.count)[:, None, None]
        elif ends:
            reach = self.reach[..., None]
            middle = self.lowest[..., None] + jnp.minimum(k, jnp.maximum(reach - 1, 0))
            first = jnp.zeros_like(middle[..., :1])
            last = first + jnp.maximum(self.count - 1, 0)[:, None, None]
            s = jnp.concatenate([first, middle, last], -1) + half
            held = jnp.broadcast_to((self.count > 0)[:, None, None], first.shape)
            # A bin that reads nothing has no sample to repeat in its middle slots.
            read = jnp.broadcast_to(reach > 0, middle.shape)
            scale = jnp.concatenate([held, read, held], -1).astype(k.dtype)
        else:
            s = self.lowest[..., None] + k + half
            scale = jnp.asarray(k < self.reach[..., None], k.dtype)
        if average:
            scale = scale / jnp.maximum(self.count, 1)[:, None, None]
        return self.first[..., None] + product(self.step[:, None, None], s), scale

    def corners(
        self, bound: int, average: bool, window: bool, ends: bool = False
    ) -> tuple[jax.Array, jax.Array]:
        """The elements the samples of :meth:`positions` (with ``ends``) read and their
        weights, ``(R, out, bound, 2)``.  With ``window`` (adaptive sampling, where samples are
        at most 1 apart), the ``bound + 1`` consecutive elements from the first sample's lower
        corner with the sum of the weights each receives, ``(R, out, bound + 1, 1)``."""
        position, scale = self.positions(bound, average, ends)
        length = per_box(self.length, 3)
        index, weight = axis_corners(position, as_dtype(length, position.dtype))
        weight = weight * scale[..., None]
        if window:
            index, weight = _window(index, weight, bound, length)
        return index + per_box(self.offset, 4), weight


def as_dtype(value: Any, dtype: Any) -> Any:
    """A static int as is, an array in ``dtype``."""
    return value if isinstance(value, int) else value.astype(dtype)


def per_box(value: Any, rank: int) -> Any:
    """A static int as is, or an array of one value per box with ``rank - 1`` axes added."""
    if isinstance(value, int):
        return value
    return value.reshape(value.shape + (1,) * (rank - 1))


def _window(
    index: jax.Array, weight: jax.Array, bound: int, length: Any
) -> tuple[jax.Array, jax.Array]:
    """The corners ``(R, out, bound, 2)`` of samples at most 1 apart as the ``bound + 1``
    elements from the first sample's lower corner, each with the sum of its weights.

    Samples at most 1 apart reach at most ``bound + 1`` elements.  Rounding can carry the last
    upper corner one element further only where its weight is a rounding error itself; it is
    added to the last element.  Samples that read nothing carry weight 0.
    """
    start = index[..., :1, :1]
    slot = jnp.clip(index - start, 0, bound)
    if bound <= 16:
        hits = slot[..., None] == np.arange(bound + 1, dtype=np.int32).reshape(1, 1, 1, 1, -1)
        summed = jnp.where(hits, weight[..., None], jnp.zeros_like(weight[..., None]))
        summed = summed.sum((-3, -2))
    else:
        r, out = slot.shape[:2]
        boxes, bins = np.arange(r)[:, None, None, None], np.arange(out)[None, :, None, None]
        summed = jnp.zeros((r, out, bound + 1), weight.dtype).at[boxes, bins, slot].add(weight)
    elements = start[..., 0] + np.arange(bound + 1, dtype=np.int32)[None, None, :]
    elements = jnp.minimum(elements, length - 1)
    return elements[..., None], summed[..., None]


def reach_bound(extent: float) -> int:
    """A static bound on the adaptive samples of a bin that fall in an interval of ``extent``
    (the map's ``L + 1`` from -1 to ``L``) with one sample of margin on either side.

    A bin no longer than the interval has ``ceil(bin) <= ceil(extent)`` samples; a longer one
    has its samples more than ``extent / (extent + 1)`` apart, so fewer than ``extent + 6``
    of them lie within two steps of the interval.
    """
    return math.ceil(extent) + 7


def axis_samples(
    start: jax.Array,
    size: jax.Array,
    out: int,
    sampling_ratio: int,
    length: Any,
    *,
    offset: Any = 0,
    longest: int | None = None,
    interval: tuple[Any, Any, float] | None = None,
) -> Axis:
    """The :class:`Axis` of the ``out`` bins of boxes from ``start`` spanning ``size``.

    ``count`` is ``sampling_ratio``, or for ``sampling_ratio=0`` ``ceil(bin size)`` (0 for a
    bin of size 0 or less).  ``interval`` is ``(low, high, extent)``: where samples can read
    the map (broadcastable to ``(R, out)``) and a static bound on ``high - low``; by default
    ``[-1, length]``, the bilinear sample's rule (``longest`` bounds ``length`` when it holds
    one value per box).
    """
    bin_size = divide(size, out)
    if sampling_ratio > 0:
        count = jnp.full(size.shape, sampling_ratio, size.dtype)
    else:
        count = jnp.maximum(jnp.ceil(lax.stop_gradient(bin_size)), 0)
    step = bin_size / jnp.maximum(count, 1)
    i = np.arange(out, dtype=size.dtype)
    first = start[:, None] + product(i[None, :], bin_size[:, None])
    if sampling_ratio > 0:
        return Axis(first, step, count, None, None, length, offset, sampling_ratio)
    if interval is None:
        high = as_dtype(per_box(length, 2), size.dtype)
        interval = (-1, high, (length if longest is None else longest) + 1)
    low, high, extent = interval
    top = reach_bound(extent)
    f = lax.stop_gradient(first)
    c = lax.stop_gradient(count)[:, None]
    st = jnp.where(c > 0, lax.stop_gradient(step)[:, None], 1)
    # Estimates of the first and last sample in the interval, widened by one sample each way
    # against their rounding: a sample more is read exactly, one less would be lost.
    lowest = jnp.clip(jnp.floor((low - f) / st - 0.5) - 1, 0, c)
    highest = jnp.minimum(jnp.ceil((high - f) / st - 0.5) + 1, c - 1)
    reach = jnp.clip(highest - lowest + 1, 0, top)
    finite = jnp.isfinite(lowest) & jnp.isfinite(reach)
    lowest = jnp.where(finite, lowest, 0)
    reach = jnp.where(finite, reach, 0)
    return Axis(first, step, count, lowest, reach, length, offset, top)


@jax.custom_batching.custom_vmap
def batch_max(value: jax.Array) -> jax.Array:
    """``max(value)``, and under ``vmap`` the maximum over every member of the batch, unbatched:
    a program chosen by it is then one program for the whole batch, where a batched choice
    would run every program and select."""
    return jnp.max(value)


@batch_max.def_vmap
def _batch_max_vmap(axis_size, in_batched, value):
    del axis_size, in_batched
    return jnp.max(value), False


# Adaptive sampling runs one of several programs, chosen at run time by the largest number of
# samples a bin of any box reaches: one for at most ``STATIC_BOUND`` samples per axis, whose
# reads are one fused loop, then programs that loop over 1, 2 x 2, 4 x 4, ... tiles of samples
# (:func:`tile_side`), up to every sample a bin of any box can reach.  A loop that skipped
# unneeded tiles at run time would copy its carry on every skipped step.
STATIC_BOUND = 2
SMALL_MAP_TILES = 64


def bucket_bounds(top: int, side: int, window: bool) -> tuple[int, ...]:
    """The static sample bounds of the programs adaptive sampling chooses among, for bins that
    reach at most ``top`` samples per axis: ``STATIC_BOUND``, then the bounds whose samples
    (their windows' elements where ``window``) fill ``1, 2, 4, ...`` tiles of ``side`` per
    axis, then ``top``."""
    tiles = lambda b: math.ceil((b + int(window)) / side) ** 2  # noqa: E731
    bounds = [STATIC_BOUND]
    # Each program costs its compile time: on maps where every bin's tiles are few, one
    # program for every count beyond the fused one.
    if tiles(top) >= SMALL_MAP_TILES:
        count = 1
        while (bound := side * count - int(window)) < top:
            if bound > bounds[-1]:
                bounds.append(bound)
            count *= 2
        # A bound with more than half the tiles of ``top``'s is not worth a program of its own.
        if len(bounds) > 1 and 2 * tiles(bounds[-1]) >= tiles(top):
            bounds.pop()
    return (*(b for b in bounds if b < top), top)


def by_reach(
    axes: tuple[Axis, ...], program: Callable[..., jax.Array], window: bool = False
) -> jax.Array:
    """``program(*bounds)`` with one static sample bound per axis: the fixed ratios, or for
    adaptive sampling the smallest of :func:`bucket_bounds` that holds the largest reach of any
    bin of any box (each axis's bound at most its ``top``), chosen at run time."""
    reaches = [axis.reach for axis in axes if axis.reach is not None]
    tops = [axis.top for axis in axes]
    if len(reaches) < len(axes):
        return program(*tops)
    side = tile_side(1 if window else 4)
    buckets = bucket_bounds(max(tops), side, window)
    branches = [functools.partial(program, *(min(b, t) for t in tops)) for b in buckets]
    if len(branches) == 1:
        return branches[0]()
    need = functools.reduce(jnp.maximum, [lax.stop_gradient(r).max() for r in reaches])
    need = batch_max(need.astype(np.int32))
    index = jnp.sum(need > np.asarray(buckets[:-1], np.int32), dtype=np.int32)
    return lax.switch(index, branches)


def pool_boxes(
    xt: jax.Array, lead: tuple[jax.Array, ...], y: Axis, x: Axis, keep: jax.Array, mode: str
) -> jax.Array:
    """:func:`pool_samples` of the axis-aligned bins ``y x x``: ``(R, out_h, out_w, C)``.

    ``keep`` (``[R]`` bools) zeroes the boxes that read nothing.  Adaptive averages read each
    element of a bin's window once with the sum of its samples' weights (the mean of bilinear
    samples is separable); maxima read every sample, and ONNX's (``mode="onnx_max"``) also a
    bin's first and last (:meth:`Axis.positions` with ``ends``).
    """
    average = mode == "avg"
    window = average and y.lowest is not None
    ends = mode == "onnx_max"

    def program(bound_y: int, bound_x: int) -> jax.Array:
        y_index, y_weight = y.corners(bound_y, average, window, ends)
        x_index, x_weight = x.corners(bound_x, average, window, ends)
        y_weight = y_weight * keep.astype(y_weight.dtype)[:, None, None, None]
        corners = (
            y_index[:, :, :, None, None],
            y_weight[:, :, :, None, None],
            x_index[:, None, None],
            x_weight[:, None, None],
        )
        if ends:
            corners = _outside_reads_origin(*corners, y.offset, x.offset)
        return pool_samples(xt, lead, *corners, mode)

    pooled = by_reach((y, x), program, window)
    if ends:
        # ONNX's maximum is no term of a bin with no samples (0 in the runtime) or of a box
        # that reads nothing.
        held = keep & (y.count > 0) & (x.count > 0)
        pooled = jnp.where(held[:, None, None, None], pooled, jnp.zeros_like(pooled))
    return pooled


def _outside_reads_origin(
    y_index: jax.Array,
    y_weight: jax.Array,
    x_index: jax.Array,
    x_weight: jax.Array,
    y_offset: Any,
    x_offset: Any,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """The corners of a grid of samples, where a sample outside the map on either axis (its
    weights there all 0) reads the map's element ``(0, 0)`` on both, as ONNX Runtime's does.

    Its terms are then ``0 * x[0, 0]``, which a maximum that does not start from 0 sees: NaN
    where that element is not finite.
    """
    y_outside = jnp.all(y_weight == 0, -1, keepdims=True)
    x_outside = jnp.all(x_weight == 0, -1, keepdims=True)
    y_index = jnp.where(x_outside, per_box(y_offset, y_index.ndim), y_index)
    x_index = jnp.where(y_outside, per_box(x_offset, x_index.ndim), x_index)
    # Every array takes the grid's shape: JAX before 0.10 loses part of the weights'
    # cotangent where they broadcast against indices that span the whole grid.
    shape = jnp.broadcast_shapes(y_index.shape, x_index.shape)
    y_index, y_weight, x_index, x_weight = (
        jnp.broadcast_to(a, shape) for a in (y_index, y_weight, x_index, x_weight)
    )
    return y_index, y_weight, x_index, x_weight


# --------------------------------------------------------------------------------------------
# ROIAlign's boxes.
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


def aligned_axes(
    rois: jax.Array,
    x_dtype: Any,
    attrs: Align,
    lengths: tuple[Any, Any],
    *,
    scale: Any = None,
    offsets: tuple[Any, Any] = (0, 0),
    longest: tuple[int, int] | None = None,
    at_least_one: bool | None = None,
) -> tuple[Axis, Axis]:
    """The rows and columns :class:`Axis` of ROIAlign's bins of ``(x_1, y_1, x_2, y_2)`` boxes.

    The boxes are scaled by ``aligned_mode``: ``x * scale`` (``"asymmetric"``), ``x * scale -
    0.5`` (``"half_pixel_for_nn"``) or ``(x + 0.5) * scale - 0.5`` (``"half_pixel"``), with
    ``scale`` the attributes' ``spatial_scale`` or one per box; their widths and heights are
    at least 1 where ``at_least_one`` (by default in ``"asymmetric"`` mode only).  Coordinates
    are in :func:`compute_dtype`.  ``lengths`` are the map's ``(H, W)``, and ``offsets`` are
    added to the elements read (both may hold one value per box, the lengths then bounded by
    ``longest``).
    """
    (out_h, out_w), ratio = attrs.output_size, attrs.sampling_ratio
    boxes = rois.astype(compute_dtype(x_dtype, rois.dtype))
    scale = attrs.spatial_scale if scale is None else scale
    offset_src = 0.5 if attrs.aligned_mode == "half_pixel" else 0.0
    offset_dst = 0.0 if attrs.aligned_mode == "asymmetric" else -0.5
    x1, y1, x2, y2 = ((boxes[:, i] + offset_src) * scale + offset_dst for i in range(4))
    roi_w, roi_h = x2 - x1, y2 - y1
    if at_least_one if at_least_one is not None else attrs.aligned_mode == "asymmetric":
        roi_w, roi_h = jnp.maximum(roi_w, 1), jnp.maximum(roi_h, 1)
    (height, width), (top_h, top_w) = lengths, longest or (None, None)
    return (
        axis_samples(y1, roi_h, out_h, ratio, height, offset=offsets[0], longest=top_h),
        axis_samples(x1, roi_w, out_w, ratio, width, offset=offsets[1], longest=top_w),
    )
