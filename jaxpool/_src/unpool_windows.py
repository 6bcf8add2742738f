"""``max_unpool`` of indices taken with a known window: dense, through stride blocks.

Window ``o`` of a max pool holds, along each spatial axis, the positions ``o * stride + t``
for its *taps* ``t = k * dilation - pads_begin``.  Cut the unpooled map into blocks of
``stride`` elements, block ``b`` holding positions ``b * stride + j``: an element of block
``b`` can lie only in windows ``o = b - m`` for the few *phases* ``m`` with ``m * stride + j``
a tap (one phase where windows do not overlap).  Where each index names a tap of its own
window::

    x[b, j] = combine over m of where(position[b - m] == own(b, j) and m * stride + j is a tap,
                                      y[b - m], nothing)

with ``own(b, j) = b * stride + j`` flattened over the spatial axes.  Every operation is a pad
(the shift by a phase), a reshape, a comparison or a select, so XLA partitions a map sharded
along a spatial axis by exchanging the halos of the shifts (collective-permutes), as it does
``reduce_window``; a scatter's indices it cannot bound, so it would reduce the whole map across
the devices.  The phases run in row-major window order, so a sum adds the values named to one
element in the order a sequential scatter adds them, and the last value named wins.

The transpose of the sum, which reads a map at every window's position, is a chain over the
taps of strided views of the map (:func:`read`): one comparison per tap and window.

A window with no input element (``ceil`` rounding past the input, or pads as wide as the
window) has from ``max_pool`` the index of its plane's first element, which is no tap of it:
that element is recombined from every window that can name it, a reduction over the whole
plane (across the devices where a spatial axis is sharded: one value per plane).  Any other
index that is no tap of its window is no index a max pool with that window gives: it is
dropped here, and :func:`outside` finds such concrete indices for ``max_unpool`` to refuse.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import indices as indices_lib
from jaxpool._src import window as window_lib

COMBINES = ("sum", "max", "torch")


@dataclasses.dataclass(frozen=True)
class Reach:
    """The windows of a max pool over a map, per spatial axis: window ``o`` holds positions
    ``o * strides + t`` for ``t`` in ``taps`` (those in ``[0, in_spatial)``)."""

    data_format: str
    in_spatial: tuple[int, ...]
    out_spatial: tuple[int, ...]
    strides: tuple[int, ...]
    taps: tuple[tuple[int, ...], ...]

    @property
    def blocks(self) -> tuple[int, ...]:
        return tuple(-(-n // s) for n, s in zip(self.in_spatial, self.strides))

    def phases(self, i: int) -> tuple[int, ...]:
        """The phases ``m`` of axis ``i``: those for which some window ``o`` and block
        ``o + m`` exist and some offset ``j`` in the block is a tap of window ``o``."""
        s, out, blocks = self.strides[i], self.out_spatial[i], self.blocks[i]
        found = sorted({(t - j) // s for t in self.taps[i] for j in range(s) if (t - j) % s == 0})
        return tuple(m for m in found if max(0, -m) < min(out, blocks - m))

    def live(self, i: int) -> np.ndarray:
        """Whether each window holds an input element along axis ``i``."""
        start = np.arange(self.out_spatial[i])[:, None] * self.strides[i]
        position = start + np.asarray(self.taps[i])[None, :]
        return ((position >= 0) & (position < self.in_spatial[i])).any(axis=1)


def make_reach(window: window_lib.Window, data_format: str) -> Reach:
    """The reach of ``window``'s windows (only its spatial attributes count)."""
    taps = tuple(
        tuple(k * d - pb for k in range(kernel))
        for kernel, d, pb in zip(window.kernel, window.dilations, window.pads_begin)
    )
    return Reach(data_format, window.in_spatial, window.out_spatial, window.strides, taps)


# --------------------------------------------------------------------------------------------
# Static tables, NumPy arrays shaped to broadcast against a pooled array or the map.  Masks are
# tables of one axis each, combined in the program; the plane positions of the map's elements
# and of the windows' starts are one table each (XLA's CPU backend reads such a table faster
# than it computes positions from iotas), never one per tap or phase.
# --------------------------------------------------------------------------------------------


def _spatial_axes(reach: Reach, rank: int) -> tuple[int, ...]:
    return window_lib.spatial_axes(rank, reach.data_format)


def _on_axis(values: np.ndarray, reach: Reach, rank: int, i: int) -> np.ndarray:
    shape = [1] * rank
    shape[_spatial_axes(reach, rank)[i]] = values.size
    return values.reshape(shape)


def _combined(tables, combine) -> jax.Array:
    """The per-axis ``tables`` (broadcasting NumPy arrays) combined by ``combine``."""
    return functools.reduce(combine, [jnp.asarray(t) for t in tables])


def all_live(reach: Reach) -> bool:
    """Whether every window holds an input element."""
    return all(reach.live(i).all() for i in range(len(reach.in_spatial)))


def _live(reach: Reach, rank: int) -> jax.Array:
    """Whether each window holds an input element."""
    axes = range(len(reach.in_spatial))
    return _combined([_on_axis(reach.live(i), reach, rank, i) for i in axes], jnp.logical_and)


def _first_namers(reach: Reach, rank: int) -> jax.Array:
    """The windows that can name their plane's first element: those with no input element,
    and the others of which it is a tap."""
    taps = [
        _on_axis(np.isin(-np.arange(out) * s, t), reach, rank, i)
        for i, (out, s, t) in enumerate(zip(reach.out_spatial, reach.strides, reach.taps))
    ]
    live = _live(reach, rank)
    return (live & _combined(taps, jnp.logical_and)) | ~live


def _first(reach: Reach, rank: int) -> jax.Array:
    """Whether each element of the map is its plane's first."""
    axes = range(len(reach.in_spatial))
    tables = [_on_axis(np.arange(reach.in_spatial[i]) == 0, reach, rank, i) for i in axes]
    return _combined(tables, jnp.logical_and)


def outside(position: np.ndarray, reach: Reach) -> np.ndarray:
    """Whether each concrete plane position of a pooled array is dropped by :func:`program`:
    it is no tap of its window, nor the plane's first element for a window with no input
    element."""
    rank, size = position.ndim, math.prod(reach.in_spatial)
    coords = np.unravel_index(np.clip(position, 0, size - 1), reach.in_spatial)
    tap = (position >= 0) & (position < size)
    live = np.ones([1] * rank, bool)
    for i, (c, s, taps) in enumerate(zip(coords, reach.strides, reach.taps)):
        start = _on_axis(np.arange(reach.out_spatial[i]) * s, reach, rank, i)
        tap = tap & np.isin(c - start, taps)
        live = live & _on_axis(reach.live(i), reach, rank, i)
    return np.where(live, ~tap, position != 0)


# --------------------------------------------------------------------------------------------
# The grid: each spatial axis of the map as (block, offset); of a pooled array as (window, 1).
# --------------------------------------------------------------------------------------------


def _block_axes(reach: Reach, rank: int) -> tuple[int, ...]:
    """The block axis of each spatial axis in the grid of a rank-``rank`` array."""
    return tuple(a + i for i, a in enumerate(_spatial_axes(reach, rank)))


def _on_grid(table: np.ndarray, reach: Reach, rank: int, i: int) -> np.ndarray:
    """A ``(blocks, stride)`` table of axis ``i`` shaped to broadcast against the grid."""
    shape = [1] * (rank + len(reach.in_spatial))
    a = _block_axes(reach, rank)[i]
    shape[a : a + 2] = table.shape
    return table.reshape(shape)


def _expand(a: jax.Array, reach: Reach) -> jax.Array:
    """A pooled array with an offset axis of size 1 after each spatial axis."""
    spatial = _spatial_axes(reach, a.ndim)
    shape: list = []
    for axis, n in enumerate(a.shape):
        shape += [n, 1] if axis in spatial else [n]
    return a.reshape(shape)


def _shift(a: jax.Array, reach: Reach, rank: int, phase: tuple[int, ...], fill) -> jax.Array:
    """An expanded pooled array laid on the grid's blocks for ``phase``: window ``b - m`` at
    block ``b``, ``fill`` where there is none."""
    pads = [(0, 0, 0)] * a.ndim
    for axis, m, b, o in zip(_block_axes(reach, rank), phase, reach.blocks, reach.out_spatial):
        pads[axis] = (m, b - m - o, 0)
    return lax.pad(a, np.asarray(fill, a.dtype), pads)


def _crop(grid: jax.Array, reach: Reach, rank: int) -> jax.Array:
    """The grid as the map: blocks and offsets merged, cut to the map's spatial sizes."""
    offsets = {a + 1 for a in _block_axes(reach, rank)}
    shape: list = []
    for axis, n in enumerate(grid.shape):
        if axis in offsets:
            shape[-1] = shape[-1] * n
        else:
            shape.append(n)
    full = grid.reshape(shape)
    limit = list(full.shape)
    for a, n in zip(_spatial_axes(reach, rank), reach.in_spatial):
        limit[a] = n
    return lax.slice(full, (0,) * full.ndim, limit)


def _offset(reach: Reach, tap: tuple[int, ...]) -> int:
    """How far ``tap`` lies past the first element of its window's first block, in the plane
    (aliased where it lies outside the map, where :func:`_view` reads 0)."""
    return sum(t * st for t, st in zip(tap, indices_lib.plane_strides(reach.in_spatial)))


def _starts(reach: Reach, rank: int, dtype) -> np.ndarray:
    """The plane position of each window's first block's first element,
    ``sum_i o_i * strides_i * plane_i`` (one table of the pooled plane)."""
    plane = indices_lib.plane_strides(reach.in_spatial)
    starts = np.zeros([1] * rank, np.int64)
    for i, (o, s, st) in enumerate(zip(reach.out_spatial, reach.strides, plane)):
        starts = starts + _on_axis(np.arange(o) * s * st, reach, rank, i)
    return starts.astype(dtype)


def _matches(y: jax.Array, position: jax.Array, reach: Reach):
    """For each phase, in row-major window order at every element of the grid: whether the
    phase's window names the element, and that window's value."""
    rank, nd = y.ndim, len(reach.in_spatial)
    plane = indices_lib.plane_strides(reach.in_spatial)
    own = np.zeros([1] * (rank + nd), np.int64)  # one table of the plane, as the grid holds it
    for i, (b, s, st) in enumerate(zip(reach.blocks, reach.strides, plane)):
        own = own + _on_grid(np.arange(b * s).reshape(b, s) * st, reach, rank, i)
    own = own.astype(position.dtype)
    y, position = _expand(y, reach), _expand(position, reach)
    for phase in itertools.product(*(reach.phases(i)[::-1] for i in range(nd))):
        named = _shift(position, reach, rank, phase, -1) == own
        for i, (m, s, taps) in enumerate(zip(phase, reach.strides, reach.taps)):
            is_tap = np.isin(m * s + np.arange(s), taps)[None, :]
            if not is_tap.all():
                named = named & jnp.asarray(_on_grid(is_tap, reach, rank, i))
        yield named, _shift(y, reach, rank, phase, 0)


# --------------------------------------------------------------------------------------------
# The program, and the read that is its transpose.
# --------------------------------------------------------------------------------------------


def _dense(y: jax.Array, position: jax.Array, reach: Reach, combine: str) -> jax.Array:
    """Every element from the windows of which it is a tap (the module docstring)."""
    zero = np.zeros((), y.dtype)
    out = named = None
    for match, value in _matches(y, position, reach):
        if combine == "sum":
            term = jnp.where(match, value, zero)
            out = term if out is None else out + term
        elif combine == "max":
            term = jnp.where(match, value, np.asarray(indices_lib.lowest(y.dtype), y.dtype))
            out = term if out is None else lax.max(out, term)
            named = match if named is None else named | match
        else:  # the last window that names an element wins
            out = jnp.where(match, value, zero if out is None else out)
    assert out is not None  # at least one phase per axis
    if named is not None:
        out = jnp.where(named, out, zero)
    return _crop(out, reach, y.ndim)


def _first_element(y: jax.Array, position: jax.Array, reach: Reach, combine: str) -> jax.Array:
    """Each plane's first element, from every window that can name it (size 1 on the spatial
    axes)."""
    axes = _spatial_axes(reach, y.ndim)
    names = _first_namers(reach, y.ndim) & (position == 0)
    zero = np.zeros((), y.dtype)
    if combine == "sum":
        value = lax.reduce(jnp.where(names, y, zero), zero, lax.add, axes)
    elif combine == "max":
        lowest = np.asarray(indices_lib.lowest(y.dtype), y.dtype)
        value = lax.reduce(jnp.where(names, y, lowest), lowest, lax.max, axes)
        value = jnp.where(jnp.any(names, axis=axes), value, zero)
    else:  # the last window in row-major order
        strides = indices_lib.plane_strides(reach.out_spatial)
        tables = [_on_axis(np.arange(o, dtype=np.int32) * st, reach, y.ndim, i)
                  for i, (o, st) in enumerate(zip(reach.out_spatial, strides))]  # fmt: skip
        order = _combined(tables, jnp.add)  # row-major window order
        init = (np.asarray(-1, np.int32), zero)
        last, value = lax.reduce((jnp.where(names, order, init[0]), y), init, _later, axes)
        value = jnp.where(last >= 0, value, zero)
    return jnp.expand_dims(value, axes)


def _later(a, b):
    """The reducer of ``(order, value)`` pairs that keeps the later window."""
    (order_a, value_a), (order_b, value_b) = a, b
    take_b = order_b > order_a
    return lax.select(take_b, order_b, order_a), lax.select(take_b, value_b, value_a)


def program(y: jax.Array, position: jax.Array, reach: Reach, combine: str) -> jax.Array:
    """``y`` unpooled at the plane positions ``position`` of a pooled array, values named to
    one element combined by ``combine``; a position that is no tap of its window (but a
    window with no input element naming its plane's first element) is dropped.

    A window with no input element has no tap in the map, so its value reaches no element
    through the grid: it goes to the first element only, which is recombined from every window
    that can name it."""
    out = _dense(y, position, reach, combine)
    if all_live(reach):
        return out
    return jnp.where(_first(reach, y.ndim), _first_element(y, position, reach, combine), out)


def _tap_windows(reach: Reach, i: int, t: int) -> tuple[int, int]:
    """The windows ``[lo, hi)`` along axis ``i`` whose tap ``t`` lies in the map."""
    s, n, out = reach.strides[i], reach.in_spatial[i], reach.out_spatial[i]
    lo = min(out, max(0, -(t // s)))  # the first window whose tap lies at or after 0
    return lo, min(out, max(lo, -((t - n) // s)))  # and the first at or after n


def _view(a: jax.Array, reach: Reach, tap: tuple[int, ...]) -> jax.Array:
    """The map ``a`` at every window's ``tap`` (offsets from the windows' starts), 0 where
    that lies outside the map: a strided slice, edge-padded."""
    start, limit, stride = [0] * a.ndim, list(a.shape), [1] * a.ndim
    pads = [(0, 0, 0)] * a.ndim
    for i, axis in enumerate(_spatial_axes(reach, a.ndim)):
        (lo, hi), s = _tap_windows(reach, i, tap[i]), reach.strides[i]
        first = lo * s + tap[i]
        # No window's tap in the map: an empty slice, padded to the windows.
        start[axis], limit[axis] = (first, (hi - 1) * s + tap[i] + 1) if hi > lo else (0, 0)
        stride[axis], pads[axis] = s, (lo, reach.out_spatial[i] - hi, 0)
    return lax.pad(lax.slice(a, start, limit, stride), np.zeros((), a.dtype), pads)


def _placed(v: jax.Array, reach: Reach, tap: tuple[int, ...]) -> jax.Array:
    """The transpose of :func:`_view`: each window's value at its ``tap`` in a zero map, those
    outside the map left out: a slice, padded with the stride between its elements."""
    start, limit = [0] * v.ndim, list(v.shape)
    pads = [(0, 0, 0)] * v.ndim
    for i, axis in enumerate(_spatial_axes(reach, v.ndim)):
        (lo, hi), s, n = _tap_windows(reach, i, tap[i]), reach.strides[i], reach.in_spatial[i]
        first, last = lo * s + tap[i], (hi - 1) * s + tap[i]
        start[axis], limit[axis] = (lo, hi) if hi > lo else (0, 0)
        pads[axis] = (first, n - 1 - last, s - 1) if hi > lo else (n, 0, 0)
    return lax.pad(lax.slice(v, start, limit), np.zeros((), v.dtype), pads)


def read(a: jax.Array, position: jax.Array, reach: Reach) -> jax.Array:
    """The map ``a`` at each window's position, 0 where :func:`program` drops the position:
    the transpose of the sum, a chain over the taps of the windows."""
    zero = np.zeros((), a.dtype)
    starts = jnp.asarray(_starts(reach, a.ndim, position.dtype))
    total = None
    for tap in itertools.product(*reach.taps):
        at = position == starts + np.asarray(_offset(reach, tap), position.dtype)
        term = jnp.where(at, _view(a, reach, tap), zero)
        total = term if total is None else total + term
    assert total is not None
    if all_live(reach):
        return total
    limit = [1 if axis in _spatial_axes(reach, a.ndim) else n for axis, n in enumerate(a.shape)]
    first = lax.slice(a, (0,) * a.ndim, limit)
    return jnp.where(_live(reach, a.ndim), total, jnp.where(position == 0, first, zero))


def spread(v: jax.Array, position: jax.Array, reach: Reach) -> jax.Array:
    """``v`` summed into the map at the positions, as :func:`program` sums it: the transpose
    of :func:`read`, one strided placement per tap (the form of the sum whose own transpose,
    the gradient, is the chain of :func:`read`)."""
    zero = np.zeros((), v.dtype)
    live = _live(reach, v.ndim)
    starts = jnp.asarray(_starts(reach, v.ndim, position.dtype))
    total = None
    for tap in itertools.product(*reach.taps):
        at = position == starts + np.asarray(_offset(reach, tap), position.dtype)
        term = _placed(jnp.where(live & at, v, zero), reach, tap)
        total = term if total is None else total + term
    assert total is not None
    if all_live(reach):
        return total
    axes = _spatial_axes(reach, v.ndim)
    first = jnp.sum(jnp.where(~live & (position == 0), v, zero), axis=axes, keepdims=True)
    pads = [(0, 0, 0)] * v.ndim
    for axis, n in zip(axes, reach.in_spatial):
        pads[axis] = (0, n - 1, 0)
    return total + lax.pad(first, zero, pads)


# --------------------------------------------------------------------------------------------
# The values kept by a maximum, for its derivative.
# --------------------------------------------------------------------------------------------


def _named_tap(position: jax.Array, reach: Reach) -> jax.Array:
    """Whether each window's position is a tap of it (inside the map)."""
    rank, size = position.ndim, math.prod(reach.in_spatial)
    dtype = position.dtype
    tap = (position >= 0) & (position < np.asarray(size, dtype))
    plane = indices_lib.plane_strides(reach.in_spatial)
    for i, (taps, s, n) in enumerate(zip(reach.taps, reach.strides, reach.in_spatial)):
        coordinate = lax.rem(lax.div(position, np.asarray(plane[i], dtype)), np.asarray(n, dtype))
        start = _on_axis(np.arange(reach.out_spatial[i]) * s + taps[0], reach, rank, i)
        offset = coordinate - start.astype(dtype)
        step = taps[1] - taps[0] if len(taps) > 1 else 1
        tap = tap & (offset >= 0) & (offset <= np.asarray(taps[-1] - taps[0], dtype))
        if step > 1:
            tap = tap & (lax.rem(offset, np.asarray(step, dtype)) == 0)
    return tap


def _move(a: jax.Array, reach: Reach, delta: tuple[int, ...], fill) -> jax.Array:
    """``a[o + delta]`` for every window ``o`` of a pooled array, ``fill`` past its ends."""
    pads = [(0, 0, 0)] * a.ndim
    for axis, d in zip(_spatial_axes(reach, a.ndim), delta):
        pads[axis] = (-d, d, 0)
    return lax.pad(a, np.asarray(fill, a.dtype), pads)


def winners(
    y: jax.Array, position: jax.Array, reach: Reach, out: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """For each value: whether ``out``, the result of ``combine="max"``, keeps it at its
    position (it is the largest of the values named there, or equal to it), and how many
    values are kept there.  ``out`` itself is not read:

    only windows ``delta`` apart that can share an element name the same one, so the values
    are compared in a stencil over the pooled arrays (XLA would compute ``out`` again for every
    tap that reads it).  A plane's first element is compared across every window that can name it.
    """
    del out
    rank = y.ndim
    lowest = np.asarray(indices_lib.lowest(y.dtype), y.dtype)
    tap = _named_tap(position, reach)
    deltas = [
        sorted({(t - u) // s for t in taps for u in taps if (t - u) % s == 0})
        for taps, s in zip(reach.taps, reach.strides)
    ]
    named = []  # for each delta: whether window o + delta names the position of o, its value
    for delta in itertools.product(*deltas):
        same = _move(tap, reach, delta, False) & (_move(position, reach, delta, -1) == position)
        named.append((same, _move(y, reach, delta, lowest)))
    best = functools.reduce(lax.max, [jnp.where(same, v, lowest) for same, v in named])
    count = functools.reduce(
        jnp.add, [jnp.where(same & (v == best), np.int32(1), np.int32(0)) for same, v in named]
    )
    if not all_live(reach):
        axes = _spatial_axes(reach, rank)
        first = _first_namers(reach, rank) & (position == 0)
        best0 = lax.reduce(jnp.where(first, y, lowest), lowest, lax.max, axes)
        best0 = jnp.expand_dims(best0, axes)
        count0 = jnp.sum(first & (y == best0), axis=axes, keepdims=True, dtype=np.int32)
        tap = tap | first
        best, count = jnp.where(first, best0, best), jnp.where(first, count0, count)
    return tap & (y == best), count
