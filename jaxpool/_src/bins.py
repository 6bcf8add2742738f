"""The bins of adaptive pooling: tables, views, the bin matrix and the per-axis argmax.

Bin ``i`` of ``O`` over an axis of length ``L`` covers ``[floor(i * L / O), ceil((i + 1) * L
/ O))``.  Bins are boxes, so the adaptive ops reduce one spatial axis at a time with static
bin tables and never emit one op per bin.  Along an axis whose widest bin has ``M`` elements,
tap ``m`` is the view holding element ``start + m`` of every bin (:func:`axis_taps`), a shorter
bin repeating its last element, which a maximum ignores and a sum masks.  Small bins reduce
in one chain over the taps of all axes (:func:`joint_taps`); wide bins reduce a window axis of
``(O, M)`` bin windows instead (:func:`bin_windows`); global pooling reduces the spatial
axes at once.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import indices as indices_lib
from jaxpool._src.window import AdaptiveWindow

# Bins of at most this many elements in all reduce in one chain over the taps of all axes
# (:func:`joint_taps`), which keeps no partly reduced intermediate; with more, the argmax
# chain compiles slowly on a GPU and runs no faster than the reduction one axis at a time (the
# adaptive workloads of ``benchmarks/bench.py`` on a GPU, whose 50 x 50 -> 16 x 16 bins hold
# 16 elements).
JOINT_TAPS = 25

# Bins at most this wide reduce as a fused chain over their taps; wider ones (strong
# reductions) reduce a window axis, which keeps the compiled program small: one reduction
# instead of a chain of that many taps.
CHAIN_WIDTH = 8


def bounds(length: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)`` of the ``out`` bins over ``length``."""
    i = np.arange(out)
    return (i * length) // out, -(-((i + 1) * length) // out)


def widest(length: int, out: int) -> int:
    """The number of elements of the widest bin."""
    starts, ends = bounds(length, out)
    return int((ends - starts).max())


def is_wide(length: int, out: int) -> bool:
    """Whether the bins reduce a window axis rather than a chain over their taps."""
    return widest(length, out) > CHAIN_WIDTH


def along(values: np.ndarray, axis: int, rank: int) -> np.ndarray:
    """Places a vector on ``axis`` of a rank-``rank`` array, for broadcasting."""
    shape = [1] * rank
    shape[axis] = values.shape[0]
    return values.reshape(shape)


def pooled_axes(window: AdaptiveWindow) -> Iterator[tuple[int, int, int, int]]:
    """``(i, axis, length, out)`` of the spatial axes that pool, innermost first."""
    for i in reversed(range(window.nd)):
        length, out = window.in_spatial[i], window.out_spatial[i]
        if out != length:
            yield i, window.spatial_axes[i], length, out


def axis_taps(
    a: jax.Array, axis: int, length: int, out: int
) -> Iterator[tuple[jax.Array, np.ndarray, np.ndarray]]:
    """Yields, for each tap ``m`` of the bins along ``axis``, the view ``a[start + m]`` (the
    bin's last element where the bin is shorter), its input positions and whether it is a
    real (not repeated) element of its bin.  Taps come in increasing position order."""
    starts, ends = bounds(length, out)
    width = int((ends - starts).max())
    regular = length % out == 0
    for m in range(width):
        position = np.minimum(starts + m, ends - 1)
        if regular:
            view = lax.slice_in_dim(a, m, length, width, axis)
        else:
            view = jnp.take(a, position, axis=axis, mode="clip")
        yield view, position, starts + m < ends


def is_joint(window: AdaptiveWindow) -> bool:
    """Whether the bins reduce in one chain over the taps of all axes (:func:`joint_taps`)."""
    return math.prod(widest(n, o) for n, o in zip(window.in_spatial, window.out_spatial)) <= (
        JOINT_TAPS
    )


def joint_taps(a: jax.Array, window: AdaptiveWindow) -> Iterator[tuple[jax.Array, Any, Any]]:
    """Yields, for each tap ``(m_0, ..., m_{d-1})`` in row-major order, the view of element
    ``start + m`` of every bin along each spatial axis (:func:`axis_taps`), the flat spatial
    position of each of its elements and whether each is a real element of its bin (NumPy
    arrays that broadcast against the view).  So the elements of each bin come in row-major
    order, a repeated last element again after it."""
    strides = indices_lib.plane_strides(window.in_spatial)
    rank = a.ndim

    def taps(view, i, position, real):
        if i == window.nd:
            yield view, position, real
            return
        axis, length, out = window.spatial_axes[i], window.in_spatial[i], window.out_spatial[i]
        here: Iterable[tuple[jax.Array, np.ndarray, np.ndarray]] = [
            (view, np.arange(length), np.ones(length, bool))
        ]
        if out != length:
            here = axis_taps(view, axis, length, out)
        for v, p, r in here:
            p, r = along(p * strides[i], axis, rank), along(r, axis, rank)
            yield from taps(v, i + 1, position + p, real & r)

    ones = [1] * rank
    yield from taps(a, 0, np.zeros(ones, np.int64), np.ones(ones, bool))


def bin_windows(a: jax.Array, axis: int, length: int, out: int) -> tuple[jax.Array, np.ndarray]:
    """``a`` with ``axis`` split into ``(out, M)`` bin windows, and the ``(out, M)`` table of the
    input positions each window holds (a bin's last element repeated where it is shorter)."""
    starts, ends = bounds(length, out)
    if length % out == 0:
        width = length // out
        table = np.arange(length).reshape(out, width)
        return a.reshape(a.shape[:axis] + (out, width) + a.shape[axis + 1 :]), table
    width = int((ends - starts).max())
    table = np.minimum(starts[:, None] + np.arange(width), ends[:, None] - 1)
    taken = jnp.take(a, table.reshape(-1), axis=axis, mode="clip")
    return taken.reshape(a.shape[:axis] + (out, width) + a.shape[axis + 1 :]), table


def real_elements(length: int, out: int, width: int) -> np.ndarray:
    """``(out, width)``: whether element ``m`` of bin window ``o`` belongs to the bin (not a
    repeat of its last element)."""
    starts, ends = bounds(length, out)
    return (starts[:, None] + np.arange(width)) < ends[:, None]


def max_by_axis(x: jax.Array, window: AdaptiveWindow) -> jax.Array:
    """The bin maxima (``max`` propagates NaN) one pooled axis at a time: a fused chain of
    ``max`` over the taps of narrow bins, a reduction of the bin windows of wide ones; with
    one bin per plane, one reduction over the spatial axes (``jnp.max``'s)."""
    if window.is_global:
        return jnp.max(x, axis=window.spatial_axes, keepdims=True)
    y = x
    for _, axis, length, out in pooled_axes(window):
        if is_wide(length, out):
            y = jnp.max(bin_windows(y, axis, length, out)[0], axis=axis + 1)
        else:
            y = functools.reduce(lax.max, (v for v, _, _ in axis_taps(y, axis, length, out)))
    return y


def sum_bins(a: jax.Array, axis: int, length: int, out: int) -> jax.Array:
    """Sums ``a`` over the bins of ``axis``: a fused chain over the taps of narrow bins, else
    a sum over static bin windows; a repeated element is masked by a select, as ``0 * inf``
    would be NaN."""
    zero = jnp.zeros((), a.dtype)
    if not is_wide(length, out):
        terms = (
            v if real.all() else jnp.where(along(real, axis, a.ndim), v, zero)
            for v, _, real in axis_taps(a, axis, length, out)
        )
        return functools.reduce(lax.add, terms)
    windows, table = bin_windows(a, axis, length, out)
    real = real_elements(length, out, table.shape[1])
    shape = [1] * windows.ndim
    shape[axis : axis + 2] = real.shape
    return jnp.sum(jnp.where(real.reshape(shape), windows, zero), axis=axis + 1, dtype=a.dtype)


def sums_by_axis(
    a: jax.Array, window: AdaptiveWindow, untiled: Callable[..., jax.Array] = sum_bins
) -> jax.Array:
    """The bin sums one pooled axis at a time: a reshape where wide bins tile an axis,
    :func:`sum_bins` where narrow ones do, ``untiled`` (:func:`sum_bins`, or a form of it
    with another derivative) where they do not; with one bin per plane, one reduction over
    the spatial axes (``jnp.sum``'s, its derivative a broadcast)."""
    if window.is_global:
        return jnp.sum(a, axis=window.spatial_axes, dtype=a.dtype, keepdims=True)
    for _, axis, length, out in pooled_axes(window):
        if length % out == 0 and is_wide(length, out):
            shape = a.shape[:axis] + (out, length // out) + a.shape[axis + 1 :]
            a = jnp.sum(a.reshape(shape), axis=axis + 1, dtype=a.dtype)
        elif length % out == 0:
            a = sum_bins(a, axis, length, out)
        else:
            a = untiled(a, axis, length, out)
    return a


def matrix_product(a: jax.Array, axis: int, length: int, out: int) -> jax.Array:
    """``a`` times the static ``(out, length)`` 0/1 bin matrix along ``axis``: the bin sums.

    Where the axes after ``axis`` hold more than ``out`` elements, the product is batched over
    the axes before it, so that it (and its transpose, the gradient) comes out in ``a``'s own
    layout instead of a transposed copy; the matrix, repeated over the batch, is then the
    smaller array.  Axes of size 1 leave the batch, or XLA writes the gradient in another
    order and transposes it (the NXC adaptive average at batch 1).
    """
    starts, ends = bounds(length, out)
    p = np.arange(length)[None, :]
    matrix = ((p >= starts[:, None]) & (p < ends[:, None])).astype(a.dtype)
    shape, inner = a.shape, a.shape[axis + 1 :]
    if math.prod(inner) <= out:
        total = lax.dot_general(
            a,
            matrix,
            (((axis,), (1,)), ((), ())),
            precision=lax.Precision.HIGHEST,
            preferred_element_type=a.dtype,
        )
        return jnp.moveaxis(total, -1, axis)
    batch = tuple(d for d in shape[:axis] if d != 1)
    dims = tuple(range(len(batch)))
    total = lax.dot_general(
        jnp.broadcast_to(matrix, batch + matrix.shape),
        a.reshape(batch + shape[axis:]),
        (((len(batch) + 1,), (len(batch),)), (dims, dims)),
        precision=lax.Precision.HIGHEST,
        preferred_element_type=a.dtype,
    )
    return total.reshape(shape[:axis] + (out,) + inner)


def argmax_by_axis(
    x: jax.Array, window: AdaptiveWindow, nan: str = "first"
) -> tuple[jax.Array, jax.Array]:
    """The bin maxima, with their exact bits, and the spatial position of each one's first
    occurrence (or first NaN, or last with ``nan="last"``), one pooled axis at a time.

    Each pooled axis gathers its ``(O, M)`` bin windows of the values and of the positions
    found so far (the flat spatial offset over the axes already reduced, plus the window's own
    offset), then reduces the ``(value, position)`` pairs with :func:`indices.argmax_pair`,
    so ties break on the row-major flat index.
    """
    floating = jnp.issubdtype(x.dtype, jnp.floating)
    pos_dtype = indices_lib.position_dtype(window.in_spatial)
    strides = indices_lib.plane_strides(window.in_spatial)
    init = indices_lib.argmax_init(x.dtype, pos_dtype)
    y, position = x, None
    for i, axis, length, out in pooled_axes(window):
        w, table = bin_windows(y, axis, length, out)
        shape = [1] * w.ndim
        shape[axis], shape[axis + 1] = table.shape
        offset = (table * strides[i]).astype(pos_dtype).reshape(shape)
        if position is None:
            candidates = jnp.broadcast_to(offset, w.shape)
        else:
            candidates = bin_windows(position, axis, length, out)[0] + offset
        y, position = lax.reduce(
            (w, candidates), init, indices_lib.argmax_pair(floating, nan), (axis + 1,)
        )
    if position is None:
        position = jnp.zeros(y.shape, pos_dtype)
    for i, axis in enumerate(window.spatial_axes):
        if window.out_spatial[i] == window.in_spatial[i] and window.in_spatial[i] > 1:
            iota = lax.broadcasted_iota(pos_dtype, y.shape, axis)
            position = position + iota * np.asarray(strides[i], pos_dtype)
    return y, position


class Run(NamedTuple):
    """Outputs ``[out_start, out_stop)`` whose bins all hold ``width`` elements, bin ``o``
    starting at ``in_start + (o - out_start) * stride``: a regular strided window."""

    out_start: int
    out_stop: int
    in_start: int
    stride: int
    width: int


def runs(length: int, out: int) -> tuple[Run, ...]:
    """The bins of ``out`` over ``length`` split, in order, into maximal :class:`Run` s (a
    positive stride; a run of one bin has stride 1).

    ``floor(i * L / O)`` advances by ``floor(L / O)`` or one more, so when ``O`` divides ``L``
    there is one run, and a few otherwise (50 -> 16: two runs of 8 bins of 4, stride 3).
    """
    starts, ends = (a.tolist() for a in bounds(length, out))
    found = []
    o = 0
    while o < out:
        width = ends[o] - starts[o]
        stride = starts[o + 1] - starts[o] if o + 1 < out else 1
        stop = o + 1
        if stride > 0:
            while (
                stop < out
                and ends[stop] - starts[stop] == width
                and starts[stop] - starts[stop - 1] == stride
            ):
                stop += 1
        found.append(Run(o, stop, starts[o], stride if stop > o + 1 else 1, width))
        o = stop
    return tuple(found)
