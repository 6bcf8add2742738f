"""Strided views of an input, one per kernel tap, without materialising a padded input.

A *tap* is one kernel offset ``k = (k_0, ..., k_{d-1})``.  Its view holds, for every output
position ``o``, the input element ``x[o * strides + k * dilations - pads_begin]``, or ``fill``
where that position lies in the padding.  Each view is a strided slice of the unpadded input,
edge-padded only on the output positions whose tap falls outside the input, so XLA fuses the
views into whatever consumes them.  :func:`reduce_window` reduces the same windows with XLA's
``reduce_window``, for the backends that run it at their memory floor.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import indices as indices_lib
from jaxpool._src.window import Region, Window


def taps(window: Window) -> Iterator[tuple[int, ...]]:
    """Kernel offsets in row-major order that read the input for at least one output."""
    for tap in itertools.product(*(range(k) for k in window.kernel)):
        if all(lo < hi for lo, hi in (window.input_range(i, k) for i, k in enumerate(tap))):
            yield tap


def fold(x: jax.Array, window: Window, combine, fill) -> jax.Array:
    """``combine`` (``max`` or ``add``) over the tap views, as one chain that XLA fuses into one
    loop; padding holds ``fill``, which every window with no input element gives."""
    y = None
    for tap in taps(window):
        view = tap_view(x, window, tap, fill)
        y = view if y is None else combine(y, view)
    if y is None:  # every window lies in the padding
        y = jnp.full(window.out_shape, fill, x.dtype)
    return y


def full_region(window: Window) -> Region:
    return tuple((0, o) for o in window.out_spatial)


def region_shape(window: Window, region: Region) -> tuple[int, ...]:
    """The shape of the outputs in ``region`` (all batch and channel positions)."""
    shape = list(window.shape)
    for a, (r0, r1) in zip(window.spatial_axes, region):
        shape[a] = r1 - r0
    return tuple(shape)


def interior(window: Window, i: int) -> tuple[int, int]:
    """Output positions ``[a, b)`` along axis ``i`` whose every tap lies in the input."""
    ranges = [window.input_range(i, k) for k in range(window.kernel[i])]
    a, b = max(r[0] for r in ranges), min(r[1] for r in ranges)
    return (a, b) if a < b else (0, 0)


def tap_view(
    x: jax.Array, window: Window, tap: tuple[int, ...], fill, region: Region | None = None
) -> jax.Array:
    """The view of ``x`` read by ``tap`` for the outputs in ``region`` (default: all);
    positions in the padding hold ``fill``."""
    region = full_region(window) if region is None else region
    start = [0] * x.ndim
    limit = list(x.shape)
    stride = [1] * x.ndim
    edges = [(0, 0, 0)] * x.ndim
    needs_pad = False
    for i, (axis, k) in enumerate(zip(window.spatial_axes, tap)):
        r0, r1 = region[i]
        lo, hi = window.input_range(i, k)
        lo, hi = min(max(lo, r0), r1), max(min(hi, r1), r0)
        if lo >= hi:  # this tap reads only padding here
            return jnp.full(region_shape(window, region), fill, x.dtype)
        s = window.strides[i]
        first = lo * s + k * window.dilations[i] - window.pads_begin[i]
        start[axis], limit[axis], stride[axis] = first, first + (hi - lo - 1) * s + 1, s
        edges[axis] = (lo - r0, r1 - hi, 0)
        needs_pad |= lo > r0 or hi < r1
    view = lax.slice(x, start, limit, stride)
    if needs_pad:
        view = lax.pad(view, np.asarray(fill, x.dtype), edges)
    return view


def tap_delta(window: Window, tap: tuple[int, ...]) -> int:
    """Spatial-position offset of ``tap`` from its window's origin ``o * strides - pads_begin``."""
    strides = indices_lib.plane_strides(window.in_spatial)
    return sum(k * d * st for k, d, st in zip(tap, window.dilations, strides))


def broadcast_axis(values: np.ndarray, window: Window, i: int, rank: int) -> np.ndarray:
    """Reshapes a per-output-position vector along spatial axis ``i`` for broadcasting."""
    shape = [1] * rank
    shape[window.spatial_axes[i]] = values.shape[0]
    return values.reshape(shape)


def window_origins(window: Window, dtype: np.dtype, region: Region | None = None) -> jax.Array:
    """Spatial position of each output's window origin ``o * strides - pads_begin``.

    The result broadcasts against the outputs of ``region`` (size 1 on batch and channels).
    """
    region = full_region(window) if region is None else region
    rank = len(window.shape)
    shape = [1] * rank
    for a, (r0, r1) in zip(window.spatial_axes, region):
        shape[a] = r1 - r0
    total = None
    for i, st in enumerate(indices_lib.plane_strides(window.in_spatial)):
        term = lax.broadcasted_iota(dtype, shape, window.spatial_axes[i])
        base = (region[i][0] * window.strides[i] - window.pads_begin[i]) * st
        term = term * (window.strides[i] * st) + np.asarray(base, dtype)
        total = term if total is None else total + term
    assert total is not None  # at least one spatial axis
    return total


def first_inside(window: Window, region: Region | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per output position of ``region``: the spatial position of the window's first input
    element, and whether the window holds any input element at all (position 0 where it does
    not).

    Both are NumPy arrays that broadcast against the output.
    """
    region = full_region(window) if region is None else region
    rank = len(window.shape)
    position = np.zeros([1] * rank, np.int64)
    inside = np.ones([1] * rank, bool)
    for i, st in enumerate(indices_lib.plane_strides(window.in_spatial)):
        o = np.arange(*region[i])
        s, d, pb = window.strides[i], window.dilations[i], window.pads_begin[i]
        k_first = np.maximum(0, -((o * s - pb) // d))  # first tap at or after position 0
        pos = o * s + k_first * d - pb
        ok = (k_first < window.kernel[i]) & (pos < window.in_spatial[i])
        position = position + broadcast_axis(np.where(ok, pos, 0) * st, window, i, rank)
        inside = inside & broadcast_axis(ok, window, i, rank)
    return np.where(inside, position, 0), inside


def tap_inside(window: Window, tap: tuple[int, ...], region: Region | None = None) -> np.ndarray:
    """Whether ``tap`` reads the input (not the padding), per output position of ``region``
    (broadcasts against the output)."""
    region = full_region(window) if region is None else region
    rank = len(window.shape)
    inside = np.ones([1] * rank, bool)
    for i, k in enumerate(tap):
        lo, hi = window.input_range(i, k)
        o = np.arange(*region[i])
        inside = inside & broadcast_axis((o >= lo) & (o < hi), window, i, rank)
    return inside


def reduce_window(x: jax.Array, window: Window, init, computation) -> jax.Array:
    """``lax.reduce_window`` of ``computation`` over ``window``'s windows, padded with ``init``
    up to the last window's end (cropped where floor rounding leaves input elements unread)."""
    dims, strides, dilations = [1] * x.ndim, [1] * x.ndim, [1] * x.ndim
    padding = [(0, 0)] * x.ndim
    for i, a in enumerate(window.spatial_axes):
        s, d, pb = window.strides[i], window.dilations[i], window.pads_begin[i]
        end = (window.out_spatial[i] - 1) * s + (window.kernel[i] - 1) * d + 1 - pb
        if end < x.shape[a]:
            x = lax.slice_in_dim(x, 0, max(end, 0), axis=a)
        dims[a], strides[a], dilations[a] = window.kernel[i], s, d
        padding[a] = (pb, end - x.shape[a])
    return lax.reduce_window(
        x, np.asarray(init, x.dtype), computation, dims, strides, padding, window_dilation=dilations
    )


def argmax_position(
    window: Window, region: Region, y: jax.Array, delta: jax.Array | None, fill, dtype: np.dtype
) -> jax.Array:
    """The spatial position of each window's maximum ``y`` in ``region``, from ``delta``, the
    winning tap's offset (:func:`tap_delta`; ``None`` where no tap reads the input).

    Where the maximum is the padding value ``fill``, every input element of the window equals
    it (or there is none), and the position is the window's first input element.
    """
    first, _ = first_inside(window, region)
    if delta is None:  # every window lies in the padding
        return jnp.broadcast_to(first.astype(dtype), y.shape)
    position = window_origins(window, dtype, region) + delta
    return jnp.where(y == fill, first.astype(dtype), position)
