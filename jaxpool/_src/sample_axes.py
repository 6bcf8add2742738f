"""ROIAlign's samples along one axis of the map: where they lie, how many a bin holds, and which
of them can read the map.

Bin ``i`` of a box holds ``count`` samples per axis, sample ``s`` at ``first[i] + step * (s +
0.5)``: ``count`` is the sampling ratio, or with adaptive sampling (``sampling_ratio=0``)
``ceil(bin size)``, with no bound whatever the box.  Only the samples that can fall on the map
are read (the others read 0 and only count in the divisor): ``reach`` of them from
``lowest``, at most a static bound (:func:`reach_bound`) but as many as the boxes decide.
The rows and the columns of axis-aligned boxes are computed as one axis of twice the boxes
(:func:`pair`), one program for both.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import bilinear
from jaxpool._src import roi_numerics as numerics


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True)
class Axis:
    """The samples of the ``out`` bins of every box along one axis of the map.

    ``first`` ``(R, out)``; ``step`` and ``count`` ``(R,)``; with adaptive sampling ``lowest``
    and ``reach`` ``(R, out)``, the samples that can read the map (None with a fixed ratio,
    where every sample is read).  ``length`` (an int, or one per box) is the map's extent on
    this axis, ``offset`` (0, or one per box) is added to the elements read, and ``top`` is a
    static bound on ``reach`` (the ratio where it is fixed).  Integer-valued arrays are
    floats of the coordinates' dtype and carry no derivative.
    """

    first: jax.Array
    step: jax.Array
    count: jax.Array
    lowest: jax.Array | None
    reach: jax.Array | None
    length: Any
    offset: Any
    top: int

    def tree_flatten(self) -> tuple[list, tuple]:
        values = [getattr(self, f.name) for f in dataclasses.fields(self)]
        traced = tuple(v is not None and not isinstance(v, int) for v in values)
        static = tuple(None if t else v for v, t in zip(values, traced))
        return [v for v, t in zip(values, traced) if t], (traced, static)

    @classmethod
    def tree_unflatten(cls, aux: tuple, children: list) -> Axis:
        traced, static = aux
        arrays = iter(children)
        return cls(*(next(arrays) if t else v for t, v in zip(traced, static)))

    @property
    def adaptive(self) -> bool:
        return self.lowest is not None

    def expanded(self, rank: int, bin_axis: int) -> Axis:
        """The axis with arrays of rank ``rank``: one value per box along axis 0, the bins
        along ``bin_axis``, broadcastable to the arrays it is used with."""

        def per_bin(a: Any) -> Any:
            if a is None:
                return a
            shape = [1] * rank
            shape[0], shape[bin_axis] = a.shape[0], a.shape[1]
            return a.reshape(shape)

        def per_box(a: Any) -> Any:
            return numerics.per_box(a, rank)

        return Axis(
            per_bin(self.first),
            per_box(self.step),
            per_box(self.count),
            per_bin(self.lowest),
            per_bin(self.reach),
            per_box(self.length),
            per_box(self.offset),
            self.top,
        )

    def slots(self, ends: bool) -> jax.Array:
        """The number of slots of each bin (:meth:`sample`), ``(R, out)``."""
        assert self.reach is not None
        return self.reach + 2 if ends else self.reach

    def sample(self, slot: jax.Array, ends: bool = False) -> tuple[jax.Array, jax.Array]:
        """The sample each slot holds (its index, as a float) and whether it holds one, for an
        :meth:`expanded` axis and integer slots broadcastable to it.

        With a fixed ratio, slot ``k`` is sample ``k``.  With adaptive sampling it is sample
        ``lowest + k`` for ``k < reach``; with ``ends`` (for a maximum that does not start
        from 0, which must see every sample's value and the first sample first) slot 0 is a
        bin's first sample, slots ``1 ... reach`` the samples from ``lowest`` and slot ``reach
        + 1`` its last: the samples no slot holds lie outside the map and read 0, as the first
        or the last sample then does.
        """
        k = slot.astype(self.first.dtype)
        if self.lowest is None or self.reach is None:
            return k, slot < self.top
        if not ends:
            return self.lowest + k, k < self.reach
        last = jnp.maximum(self.count - 1, 0)
        s = jnp.where(slot == 0, 0, jnp.where(k <= self.reach, self.lowest + k - 1, last))
        return s, (k < self.reach + 2) & (self.count > 0)

    def position(self, s: jax.Array) -> jax.Array:
        """The coordinate of sample ``s`` (the runtime's order of operations)."""
        return self.first + numerics.product(self.step, s + np.asarray(0.5, s.dtype))

    def positions(self, start: Any, side: int, ends: bool = False) -> tuple[jax.Array, jax.Array]:
        """The positions of slots ``start ... start + side - 1`` of every bin, ``(R, out,
        side)``, and whether each holds a sample (1 or 0, in their dtype)."""
        axis = self.expanded(3, 1)
        slot = start + jnp.arange(side, dtype=np.int32)[None, None, :]
        s, held = axis.sample(slot, ends)
        return axis.position(s), held.astype(s.dtype)

    def corners(
        self, start: Any, side: int, ends: bool = False
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """The elements the samples of :meth:`positions` read and their weights, ``(R, out,
        side, 2)`` (0 for a slot that holds no sample), and which slots hold one."""
        position, held = self.positions(start, side, ends)
        length = numerics.per_box(self.length, 3)
        index, weight = bilinear.axis_corners(position, numerics.as_dtype(length, position.dtype))
        return index + numerics.per_box(self.offset, 4), weight * held[..., None], held

    def window(self, start: Any, side: int) -> tuple[jax.Array, jax.Array]:
        """The ``side + 1`` consecutive elements from the lower corner of sample ``lowest +
        start`` of every bin, and the sum of the weights each receives from the samples
        ``lowest + start ... + side - 1``: ``(R, out, side + 1, 1)``.

        Samples at most 1 apart reach at most ``side + 1`` elements.  Rounding can carry the
        last upper corner one element further only where its weight is a rounding error
        itself; it is added to the last element.  Samples that read nothing carry weight 0.
        """
        index, weight, _ = self.corners(start, side)
        offset = numerics.per_box(self.offset, 3)
        low, high = index[..., 0] - offset, index[..., 1] - offset
        begin = low[..., :1]
        element = np.arange(side + 1, dtype=np.int32).reshape(1, 1, -1)
        elements = jnp.minimum(begin + element, numerics.per_box(self.length, 3) - 1) + offset
        # Each element's weight as a sum of selects, elementwise (no reduction to compile).
        zero = jnp.zeros((), weight.dtype)
        terms = [
            jnp.where(
                jnp.clip(corner[..., k, None] - begin, 0, side) == element, w[..., k, None], zero
            )
            for k in range(side)
            for corner, w in ((low, weight[..., 0]), (high, weight[..., 1]))
        ]
        summed = functools.reduce(jnp.add, terms)
        return elements[..., None], summed[..., None]

    def tiles(self, side: int, ends: bool = False) -> jax.Array:
        """How many tiles of ``side`` slots cover the slots of every bin (at least 1, so that
        a NaN box still reads its NaN weights)."""
        most = lax.stop_gradient(self.slots(ends)).max()
        return jnp.maximum(jnp.ceil(most / side), 1).astype(np.int32)


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
    bin_size = numerics.divide(size, out)
    return axis_of_bins(start, bin_size, out, sampling_ratio, length, offset, longest, interval)


def axis_of_bins(
    start: jax.Array,
    bin_size: jax.Array,
    out: int,
    sampling_ratio: int,
    length: Any,
    offset: Any,
    longest: int | None,
    interval: tuple[Any, Any, float] | None,
) -> Axis:
    """:func:`axis_samples` of bins of ``bin_size`` (``out`` of them laid out)."""
    dtype = bin_size.dtype
    if sampling_ratio > 0:
        count = jnp.full(bin_size.shape, sampling_ratio, dtype)
    else:
        count = jnp.maximum(jnp.ceil(lax.stop_gradient(bin_size)), 0)
    step = bin_size / jnp.maximum(count, 1)
    i = np.arange(out, dtype=dtype)
    first = start[:, None] + numerics.product(i[None, :], bin_size[:, None])
    if sampling_ratio > 0:
        return Axis(first, step, count, None, None, length, offset, sampling_ratio)
    if interval is None:
        high = numerics.as_dtype(numerics.per_box(length, 2), dtype)
        interval = (-1, high, (length if longest is None else longest) + 1)
    low, high, extent = interval
    top = reach_bound(extent)
    f = lax.stop_gradient(first)
    c = lax.stop_gradient(count)[:, None]
    per = 1 / jnp.where(c > 0, lax.stop_gradient(step)[:, None], 1)
    # Estimates of the first and last sample in the interval, widened by one sample each way
    # against their rounding: a sample more is read exactly, one less would be lost.
    lowest = jnp.clip(jnp.floor((low - f) * per - 0.5) - 1, 0, c)
    highest = jnp.minimum(jnp.ceil((high - f) * per - 0.5) + 1, c - 1)
    reach = jnp.clip(highest - lowest + 1, 0, top)
    finite = jnp.isfinite(lowest) & jnp.isfinite(reach)
    lowest = jnp.where(finite, lowest, 0)
    reach = jnp.where(finite, reach, 0)
    return Axis(first, step, count, lowest, reach, length, offset, top)


def per_pair(a: Any, b: Any, r: Any) -> Any:
    """A per-box value of the rows ``a`` and of the columns ``b`` for :func:`pair`: an int
    where they are one, else ``[2 R]`` int32."""
    if isinstance(a, int) and isinstance(b, int) and a == b:
        return a
    return jnp.concatenate([jnp.broadcast_to(jnp.asarray(v, np.int32), (r,)) for v in (a, b)])


def pair(y: Axis, x: Axis) -> Axis:
    """The rows and the columns as one axis of ``2 R`` boxes (the bins of the shorter padded
    with its last), so that one computation serves both (:func:`unpair` undoes it)."""
    out = max(y.first.shape[1], x.first.shape[1])

    def bins(a: Any, b: Any) -> Any:
        if a is None or b is None:
            return None
        padded = [jnp.pad(v, ((0, 0), (0, out - v.shape[1])), mode="edge") for v in (a, b)]
        return jnp.concatenate(padded)

    r = y.first.shape[0]
    return Axis(
        bins(y.first, x.first),
        jnp.concatenate([y.step, x.step]),
        jnp.concatenate([y.count, x.count]),
        bins(y.lowest, x.lowest),
        bins(y.reach, x.reach),
        per_pair(y.length, x.length, r),
        per_pair(y.offset, x.offset, r),
        max(y.top, x.top),
    )


def unpair(both: Axis, r: Any, out_h: int, out_w: int) -> tuple[Axis, Axis]:
    """The rows and the columns of an axis of ``2 R`` boxes (:func:`pair`)."""

    def part(first: bool, out: int) -> Axis:
        boxes = slice(None, r) if first else slice(r, None)

        def per_box(a: Any) -> Any:
            return a if isinstance(a, int) or a is None else a[boxes]

        def per_bin(a: Any) -> Any:
            return None if a is None else a[boxes, :out]

        return Axis(
            per_bin(both.first),
            per_box(both.step),
            per_box(both.count),
            per_bin(both.lowest),
            per_bin(both.reach),
            per_box(both.length),
            per_box(both.offset),
            both.top,
        )

    return part(True, out_h), part(False, out_w)
