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


def sampling_ratio(value: Any) -> int:
    """``sampling_ratio`` as a static int: 0 (adaptive) or positive."""
    ratio = window_lib.static_int("sampling_ratio", value)
    if ratio < 0:
        raise ValueError(
            f"`sampling_ratio` (={value!r}) must be 0 or positive: 0 samples adaptively here "
            "(ceil of the bin size on each axis); torchvision's -1 for adaptive sampling is "
            "taken by the region ops of jaxpool.torch."
        )
    return ratio


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


def nan_boxes(program: Callable[..., jax.Array]) -> Callable[..., jax.Array]:
    """``program(x, rois, *rest)`` where a box (a row of ``rois``) holding a NaN gives NaN in
    every element of its output (the first axis of the output is the boxes').

    Such a box is pooled as a box of zeros, and its output is then replaced: no NaN reaches
    an index, a sample count or a loop's trip count, its cotangent reaches no feature (and
    nothing of its row of ``rois``), and every other box is pooled as without it.
    """

    @functools.wraps(program)
    def pooled(x: Any, rois: jax.Array, *rest: Any, **kwargs: Any) -> jax.Array:
        nan = jnp.isnan(rois).any(axis=1)
        out = program(x, jnp.where(nan[:, None], jnp.zeros_like(rois), rois), *rest, **kwargs)
        nan = nan.reshape(nan.shape + (1,) * (out.ndim - 1))
        return jnp.where(nan, jnp.asarray(np.nan, out.dtype), out)

    return pooled


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


def as_dtype(value: Any, dtype: Any) -> Any:
    """A static int as is, an array in ``dtype``."""
    return value if isinstance(value, int) else value.astype(dtype)


def per_box(value: Any, rank: int) -> Any:
    """A static int as is, or an array of one value per box with ``rank - 1`` axes added."""
    if isinstance(value, int):
        return value
    return value.reshape(value.shape + (1,) * (rank - 1))


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
