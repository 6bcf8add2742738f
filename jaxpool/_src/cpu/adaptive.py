"""The CPU programs of the adaptive pools.

Along each spatial axis the bins repeat in ``g = gcd(L, O)`` periods of ``L / g`` inputs, so
the axis reshapes into ``(g, L / g)`` (:func:`_split_periods`), and the bins of one period
split into regular runs (:func:`bins.runs`), whose taps are strided slices over all periods
at once.  A *box* holds one run per axis; the boxes' outputs are concatenated.  Chains over
the taps of each box fuse into one loop with no gather, where the portable programs gather
the bins of irregular axes.  A CPU runs them for the maxima and sums where one axis pools,
and for the argmax in 1-D and where the runs are long or one per axis (global pooling); the
per-axis reduction of :func:`bins.argmax_by_axis` otherwise.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import bins as bins_lib
from jaxpool._src import indices as indices_lib
from jaxpool._src.window import AdaptiveWindow

# Chains over the taps of all axes beat the reduction one axis at a time up to about this
# many taps: with one spatial axis, with one pooled axis for the maxima and sums alone, and
# for the argmax where the bins form one regular run along each axis (global pooling) or runs
# of at least _RUN_BINS bins in each period (50 x 50 -> 16 x 16: two periods of one run of 8
# bins per axis, 16 taps, and no partly reduced intermediate).  Short runs make small loops,
# slower than the reduction one axis at a time (14 x 14 -> 4 x 4: two periods of 2 bins).
# The adaptive workloads of ``benchmarks/bench.py`` show both.
_JOINT_TAPS = 49
_RUN_BINS = 8

Box = tuple[bins_lib.Run, ...]  # one run of bins per spatial axis


def max_program(x: jax.Array, window: AdaptiveWindow) -> Callable | None:
    """The maxima: chains over the taps of each box where one axis pools, else one axis at a
    time where the portable program would chain the taps of all axes."""
    if _pools_one_axis(window):
        return functools.partial(_chain_reduce, combine=lax.max)
    return bins_lib.max_by_axis if _chains_all_axes(window) else None


def sum_program(x: jax.Array, window: AdaptiveWindow) -> Callable | None:
    """The sums: as :func:`max_program`."""
    if _pools_one_axis(window):
        return functools.partial(_chain_reduce, combine=lax.add)
    return bins_lib.sums_by_axis if _chains_all_axes(window) else None


def _chains_all_axes(window: AdaptiveWindow) -> bool:
    """Whether the portable maxima and sums chain the taps of all axes (:func:`bins.is_joint`),
    which a CPU runs slower than the reduction one axis at a time where several axes pool
    (the adaptive workloads of ``benchmarks/training.py --scale cpu``)."""
    return not window.is_global and bins_lib.is_joint(window)


def argmax_program(x: jax.Array, window: AdaptiveWindow, nan: str) -> Callable:
    """The maxima and positions: the two chains of :func:`_chain_positions` where they pay,
    else the reduction one axis at a time."""
    long_runs = all(
        run.out_stop - run.out_start >= _RUN_BINS
        for i in range(window.nd)
        for run in _period_runs(window, i)
    )
    joint = _box_taps_total(window) <= _JOINT_TAPS and (
        window.nd == 1
        or long_runs
        or all(
            len(bins_lib.runs(window.in_spatial[i], window.out_spatial[i])) == 1
            for i in range(window.nd)
        )
    )
    return _chain_positions if joint else bins_lib.argmax_by_axis


def _period(window: AdaptiveWindow, i: int) -> int:
    """``g = gcd(L, O)`` along spatial axis ``i``: bin ``o + O / g`` starts ``L / g`` after bin
    ``o``, so the bins repeat in ``g`` periods of ``L / g`` inputs and ``O / g`` outputs."""
    return math.gcd(window.in_spatial[i], window.out_spatial[i])


def _period_runs(window: AdaptiveWindow, i: int) -> tuple[bins_lib.Run, ...]:
    """The bins of one period along spatial axis ``i`` as regular runs (50 -> 16: two periods
    of 25 -> 8, each one run of 8 bins of 4, stride 3)."""
    g = _period(window, i)
    return bins_lib.runs(window.in_spatial[i] // g, window.out_spatial[i] // g)


def _split_periods(x: jax.Array, window: AdaptiveWindow) -> jax.Array:
    """``x`` with spatial axis ``i`` (of length ``L``) split into ``(g, L / g)`` (a reshape,
    free): the periods, then the positions within one."""
    first = window.spatial_axes[0]
    shape = list(x.shape[:first])
    for i, length in enumerate(window.in_spatial):
        g = _period(window, i)
        shape += [g, length // g]
    return x.reshape(shape + list(x.shape[first + window.nd :]))


def _within_axes(window: AdaptiveWindow) -> tuple[int, ...]:
    """The axes of the positions within a period in :func:`_split_periods`' result."""
    return tuple(window.spatial_axes[0] + 2 * i + 1 for i in range(window.nd))


def _box_taps_total(window: AdaptiveWindow) -> int:
    """The number of tap views the chains over all boxes read."""
    return math.prod(sum(run.width for run in _period_runs(window, i)) for i in range(window.nd))


def _over_boxes(window: AdaptiveWindow, compute: Callable[[Box], Any]) -> Any:
    """``compute(box)`` (an array or a tuple of arrays) for every box of one period (on
    the arrays split by :func:`_split_periods`, so over all periods at once), concatenated
    into the output."""
    axes = _within_axes(window)

    def along(i: int, prefix: Box):
        if i == window.nd:
            return compute(prefix)
        pieces = [along(i + 1, prefix + (run,)) for run in _period_runs(window, i)]
        if len(pieces) == 1:
            return pieces[0]
        return jax.tree.map(lambda *p: lax.concatenate(p, axes[i]), *pieces)

    def merge(out: jax.Array) -> jax.Array:
        return out.reshape(
            out.shape[: axes[0] - 1] + window.out_spatial + out.shape[axes[-1] + 1 :]
        )

    return jax.tree.map(merge, along(0, ()))


def _box_taps(xs: jax.Array, window: AdaptiveWindow, box: Box) -> Iterator[tuple[jax.Array, int]]:
    """The tap views of ``box`` in row-major tap order, each with its spatial-position
    offset from its bin's first element.  ``xs`` is the input split by
    :func:`_split_periods`; tap ``m`` holds element ``start + m`` of every bin of the box
    in every period: a strided slice."""
    strides = indices_lib.plane_strides(window.in_spatial)
    axes = _within_axes(window)
    for tap in itertools.product(*(range(run.width) for run in box)):
        start, limit, step = [0] * xs.ndim, list(xs.shape), [1] * xs.ndim
        for axis, run, m in zip(axes, box, tap):
            start[axis] = run.in_start + m
            limit[axis] = start[axis] + (run.out_stop - run.out_start - 1) * run.stride + 1
            step[axis] = run.stride
        yield lax.slice(xs, start, limit, step), sum(m * st for m, st in zip(tap, strides))


def _box_origins(window: AdaptiveWindow, box: Box, dtype: np.dtype, rank: int) -> jax.Array:
    """The spatial position of each bin's first element in ``box`` of every period
    (broadcasts against the box's outputs in the split layout of rank ``rank``)."""
    shape = [1] * rank
    axes = _within_axes(window)
    for i, (axis, run) in enumerate(zip(axes, box)):
        shape[axis - 1], shape[axis] = _period(window, i), run.out_stop - run.out_start
    total: Any = np.zeros((), dtype)
    for i, (axis, run, st) in enumerate(
        zip(axes, box, indices_lib.plane_strides(window.in_spatial))
    ):
        period = window.in_spatial[i] // _period(window, i)
        term = lax.broadcasted_iota(dtype, shape, axis - 1) * np.asarray(
            period * st, dtype
        ) + lax.broadcasted_iota(dtype, shape, axis) * np.asarray(run.stride * st, dtype)
        total = total + (term + np.asarray(run.in_start * st, dtype))
    return total


def _chain_reduce(x: jax.Array, window: AdaptiveWindow, combine) -> jax.Array:
    """``combine`` (``max`` or ``add``) over the taps of each box, as one chain."""
    xs = _split_periods(x, window)

    def compute(box):
        y = None
        for view, _ in _box_taps(xs, window, box):
            y = view if y is None else combine(y, view)
        return y

    return _over_boxes(window, compute)


def _pools_one_axis(window: AdaptiveWindow) -> bool:
    """Whether a CPU reduces the bins in chains over the taps of each box: with one pooled
    axis, those are the per-axis reductions without their gathers.  Global pooling keeps
    the portable program's one reduction over the plane, which a CPU runs faster than a
    chain (the global adaptive workloads of ``benchmarks/bench.py``)."""
    pooled = sum(o != n for o, n in zip(window.out_spatial, window.in_spatial))
    return pooled == 1 and not window.is_global and _box_taps_total(window) <= _JOINT_TAPS


def _chain_positions(x: jax.Array, window: AdaptiveWindow, nan: str) -> tuple[jax.Array, jax.Array]:
    """The bin maxima, with their exact bits, and the positions of their first occurrence (or
    first NaN, or last with ``nan="last"``), in two chains over the taps of each box.

    The first chain keeps a running ``max``, reading each view once, and moves the tap offset
    to a tap that raises it (a NaN over a number included; a NaN maximum is kept, or with
    ``nan="last"`` moved to a later NaN: :func:`indices.max_moved`).  The
    offsets are computed in a loop of their own (:func:`indices.materialize`); the second
    chain reads the views once more and selects, for each output, the view of its argmax tap,
    so that the values keep their bits (signed zeros, NaN payloads).  Without that loop XLA
    would compute the first chain again inside the second and inside every consumer of the
    positions (the gradient's scatter among them).  With one bin per plane a gather of the
    input at the positions replaces the second chain, faster (the global adaptive
    workloads of ``benchmarks/bench.py``).
    """
    pos_dtype = indices_lib.position_dtype(window.in_spatial)
    bound = math.prod(window.in_spatial) + 1
    xs = _split_periods(x, window)
    gather = window.is_global

    def compute(box):
        y = offset = None
        for view, d in _box_taps(xs, window, box):
            if y is None or offset is None:
                y, offset = view, jnp.zeros(view.shape, pos_dtype)
                continue
            y_new = lax.max(y, view)
            take = indices_lib.max_moved(y_new, y, view, nan)
            offset = lax.select(
                take, jnp.broadcast_to(np.asarray(d, pos_dtype), view.shape), offset
            )
            y = y_new
        assert offset is not None  # a bin holds at least one element
        offset = indices_lib.materialize(offset, bound)
        position = _box_origins(window, box, pos_dtype, xs.ndim) + offset
        if gather:
            return position
        y = None
        for view, d in _box_taps(xs, window, box):
            y = view if y is None else lax.select(offset == np.asarray(d, pos_dtype), view, y)
        return y, position

    if gather:
        position = _over_boxes(window, compute)
        return indices_lib.gather_planes(x, position, window.data_format), position
    return _over_boxes(window, compute)
