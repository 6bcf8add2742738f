"""AdaptiveMaxPool-8 and AdaptiveAvgPool-8: pooling to a fixed output size.

Bin ``i`` of ``O`` over an axis of length ``L`` covers
``[floor(i * L / O), ceil((i + 1) * L / O))``.  Bins are boxes, so both ops reduce one spatial
axis at a time, innermost first, with static bin tables, and never emit one op per bin.

Along an axis whose widest bin has ``M`` elements, tap ``m`` is the view holding element
``start + m`` of every bin (a strided slice when the bins tile the axis, else a gather of ``O``
static positions), a shorter bin repeating its last element, which a maximum ignores and a sum
masks; the ``M`` views fuse into one loop.  Wide bins (global pooling) reduce a window axis
instead: a reshape into ``(O, L / O)`` when the bins tile the axis, else a gather of ``(O, M)``
windows, masked for the sum (a select, so that infinities stay infinite).  The average
divides once by the static bin volumes.  The argmax reduces ``(O, M)`` windows of
``(value, position)`` pairs one axis at a time, unless the bins are small: then it scans the
taps of all axes at once, with no partly reduced intermediate.  Off the CPU that is one chain
over gathered tap views (bins of at most ``_JOINT_TAPS`` elements), or, with one bin per
plane, one reduction over the plane's merged spatial axes.

On a CPU the bins along an axis repeat in ``g = gcd(L, O)`` periods of ``L / g`` inputs, so
the axis reshapes into ``(g, L / g)``, and the bins of one period split into regular runs
(:func:`window.adaptive_runs`), whose taps are strided slices over all periods at once; a box
of runs, one per axis, is a *region*, and the regions' outputs are concatenated.  Chains over
the taps of each region give the maxima and sums where one axis pools, and the argmax in 1-D
and where the runs are long or one per axis (global pooling, 50 x 50 -> 16 x 16).
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

from jaxpool._src import averaging
from jaxpool._src import indices as indices_lib
from jaxpool._src import window as window_lib
from jaxpool._src.window import AdaptiveWindow

# Bins at most this wide reduce as a fused chain over their taps; wider ones (global pooling,
# strong reductions) reduce a window axis, which keeps the compiled program small.
_CHAIN_WIDTH = 8
# Off the CPU, bins of at most this many elements in all find their argmax in one chain over
# the taps; with more, the chain compiles slowly (a 6 x 6 bin takes 0.6 s on an H100) and runs
# no faster than the reduction one axis at a time.
_JOINT_TAPS = 25
# On a CPU, chains over the taps of all axes beat the reduction one axis at a time up to about
# this many taps: with one spatial axis (the argmax of 256 x 256 x 100 -> 7 in NXC: 7 against
# 30 ms), with one pooled axis for the maxima and sums alone, and for the argmax where the
# bins form one regular run along each axis (global pooling of a 7 x 7 map: 0.7 against
# 1.7 ms in NCX) or runs of at least _CPU_RUN_BINS bins in each period (50 x 50 -> 16 x 16:
# two periods of one run of 8 bins per axis, 16 taps; 0.7-1.0x the time, no partly reduced
# intermediate of 25 MiB).  Short runs make small loops, slower (14 x 14 -> 4 x 4, two periods
# of 2 bins: 2.7x the time in NCX).
_CPU_JOINT_TAPS = 49
_CPU_RUN_BINS = 8


def _bins(length: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    starts, ends = window_lib.adaptive_bins(length, out)
    return np.asarray(starts), np.asarray(ends)


def _axis_taps(a: jax.Array, axis: int, length: int, out: int):
    """Yields, for each tap ``m`` of the bins along ``axis``, the view ``a[start + m]`` (the
    bin's last element where the bin is shorter), its input positions and whether it is a
    real (not repeated) element of its bin.  Taps come in increasing position order."""
    starts, ends = _bins(length, out)
    width = int((ends - starts).max())
    regular = length % out == 0
    for m in range(width):
        position = np.minimum(starts + m, ends - 1)
        if regular:
            view = lax.slice_in_dim(a, m, length, width, axis)
        else:
            view = jnp.take(a, position, axis=axis, mode="clip")
        yield view, position, starts + m < ends


def _bin_windows(a: jax.Array, axis: int, length: int, out: int) -> tuple[jax.Array, np.ndarray]:
    """``a`` with ``axis`` split into ``(out, M)`` bin windows, and the ``(out, M)`` table of the
    input positions each window holds (a bin's last element repeated where it is shorter)."""
    starts, ends = _bins(length, out)
    if length % out == 0:
        width = length // out
        table = np.arange(length).reshape(out, width)
        return a.reshape(a.shape[:axis] + (out, width) + a.shape[axis + 1:]), table
    width = int((ends - starts).max())
    table = np.minimum(starts[:, None] + np.arange(width), ends[:, None] - 1)
    taken = jnp.take(a, table.reshape(-1), axis=axis, mode="clip")
    return taken.reshape(a.shape[:axis] + (out, width) + a.shape[axis + 1:]), table


def _along(values: np.ndarray, axis: int, rank: int) -> np.ndarray:
    """Places a vector on ``axis`` of a rank-``rank`` array, for broadcasting."""
    shape = [1] * rank
    shape[axis] = values.shape[0]
    return values.reshape(shape)


def _reduced_axes(window: AdaptiveWindow):
    """``(i, axis, length, out)`` of the axes that pool, innermost first."""
    for i in reversed(range(window.nd)):
        length, out = window.in_spatial[i], window.out_spatial[i]
        if out != length:
            yield i, window.spatial_axes[i], length, out


def _wide(length: int, out: int) -> bool:
    starts, ends = _bins(length, out)
    return int((ends - starts).max()) > _CHAIN_WIDTH


Region = tuple  # one BinRun per spatial axis: a box of outputs whose windows are regular


def _period(window: AdaptiveWindow, i: int) -> int:
    """``g = gcd(L, O)`` along spatial axis ``i``: bin ``o + O / g`` starts ``L / g`` after bin
    ``o``, so the bins repeat in ``g`` periods of ``L / g`` inputs and ``O / g`` outputs."""
    return math.gcd(window.in_spatial[i], window.out_spatial[i])


def _period_runs(window: AdaptiveWindow, i: int) -> tuple[window_lib.BinRun, ...]:
    """The bins of one period along spatial axis ``i`` as regular runs (50 -> 16: two periods
    of 25 -> 8, each one run of 8 bins of 4, stride 3)."""
    g = _period(window, i)
    return window_lib.adaptive_runs(window.in_spatial[i] // g, window.out_spatial[i] // g)


def _split_periods(x: jax.Array, window: AdaptiveWindow) -> jax.Array:
    """``x`` with spatial axis ``i`` (of length ``L``) split into ``(g, L / g)`` (a reshape,
    free): the periods, then the positions within one."""
    first = window.spatial_axes[0]
    shape = list(x.shape[:first])
    for i, length in enumerate(window.in_spatial):
        g = _period(window, i)
        shape += [g, length // g]
    return x.reshape(shape + list(x.shape[first + window.nd:]))


def _within_axes(window: AdaptiveWindow) -> tuple[int, ...]:
    """The axes of the positions within a period in :func:`_split_periods`' result."""
    return tuple(window.spatial_axes[0] + 2 * i + 1 for i in range(window.nd))


def _one_bin_per_plane(window: AdaptiveWindow) -> bool:
    """Global pooling: every output is one bin over its whole ``(n, c)`` plane."""
    return all(o == 1 for o in window.out_spatial)


def _region_taps_total(window: AdaptiveWindow) -> int:
    """The number of tap views the chains over all regions read."""
    return math.prod(sum(run.width for run in _period_runs(window, i)) for i in range(window.nd))


def _over_regions(window: AdaptiveWindow, compute: Callable[[Region], Any]) -> Any:
    """``compute(region)`` (an array or a tuple of arrays) for every region of one period (on
    the arrays split by :func:`_split_periods`, so over all periods at once), concatenated
    into the output."""
    axes = _within_axes(window)

    def along(i: int, prefix: Region):
        if i == window.nd:
            return compute(prefix)
        pieces = [along(i + 1, prefix + (run,)) for run in _period_runs(window, i)]
        if len(pieces) == 1:
            return pieces[0]
        return jax.tree.map(lambda *p: lax.concatenate(p, axes[i]), *pieces)

    def merge(out: jax.Array) -> jax.Array:
        return out.reshape(out.shape[:axes[0] - 1] + window.out_spatial
                           + out.shape[axes[-1] + 1:])

    return jax.tree.map(merge, along(0, ()))


def _region_taps(xs: jax.Array, window: AdaptiveWindow, region: Region
                 ) -> Iterator[tuple[jax.Array, int]]:
    """The tap views of ``region`` in row-major tap order, each with its spatial-position
    offset from its bin's first element.  ``xs`` is the input split by
    :func:`_split_periods`; tap ``m`` holds element ``start + m`` of every bin of the region
    in every period: a strided slice."""
    strides = indices_lib.plane_strides(window.in_spatial)
    axes = _within_axes(window)
    for tap in itertools.product(*(range(run.width) for run in region)):
        start, limit, step = [0] * xs.ndim, list(xs.shape), [1] * xs.ndim
        for axis, run, m in zip(axes, region, tap):
            start[axis] = run.in_start + m
            limit[axis] = start[axis] + (run.out_stop - run.out_start - 1) * run.stride + 1
            step[axis] = run.stride
        yield lax.slice(xs, start, limit, step), sum(m * st for m, st in zip(tap, strides))


def _region_origins(window: AdaptiveWindow, region: Region, dtype: np.dtype,
                    rank: int) -> jax.Array:
    """The spatial position of each bin's first element in ``region`` of every period
    (broadcasts against the region's outputs in the split layout of rank ``rank``)."""
    shape = [1] * rank
    axes = _within_axes(window)
    for i, (axis, run) in enumerate(zip(axes, region)):
        shape[axis - 1], shape[axis] = _period(window, i), run.out_stop - run.out_start
    total = np.zeros((), dtype)
    for i, (axis, run, st) in enumerate(zip(axes, region,
                                            indices_lib.plane_strides(window.in_spatial))):
        period = window.in_spatial[i] // _period(window, i)
        term = (lax.broadcasted_iota(dtype, shape, axis - 1) * np.asarray(period * st, dtype)
                + lax.broadcasted_iota(dtype, shape, axis) * np.asarray(run.stride * st, dtype))
        total = total + (term + np.asarray(run.in_start * st, dtype))
    return total


def _chain_reduce(x: jax.Array, window: AdaptiveWindow, combine) -> jax.Array:
    """``combine`` (``max`` or ``add``) over the taps of each region, as one chain."""
    xs = _split_periods(x, window)

    def compute(region):
        y = None
        for view, _ in _region_taps(xs, window, region):
            y = view if y is None else combine(y, view)
        return y
    return _over_regions(window, compute)


def _one_pooled_axis(window: AdaptiveWindow) -> bool:
    """Whether a CPU reduces the bins in chains over the taps of each region: with one pooled
    axis, those are the per-axis reductions without their gathers."""
    pooled = sum(o != n for o, n in zip(window.out_spatial, window.in_spatial))
    return pooled == 1 and _region_taps_total(window) <= _CPU_JOINT_TAPS


def _chain_positions(x: jax.Array, window: AdaptiveWindow) -> tuple[jax.Array, jax.Array]:
    """The bin maxima, with their exact bits, and the positions of their first occurrence (or
    first NaN), in two chains over the taps of each region.

    The first chain keeps a running ``max``, reading each view once, and moves the tap offset
    to a tap that raises it (a NaN over a number included; a NaN maximum is kept).  The
    offsets are computed in a loop of their own (:func:`indices.in_own_loop`); the second
    chain reads the views once more and selects, for each output, the view of its argmax tap,
    so that the values keep their bits (signed zeros, NaN payloads).  Without that loop XLA
    would compute the first chain again inside the second and inside every consumer of the
    positions (the gradient's scatter among them).  With one bin per plane a gather of the
    input at the positions replaces the second chain (32 x 512 x 7 x 7: 0.7-0.8x the time).
    """
    pos_dtype = indices_lib.position_dtype(window.in_spatial)
    bound = math.prod(window.in_spatial) + 1
    xs = _split_periods(x, window)
    gather = _one_bin_per_plane(window)

    def compute(region):
        y = offset = None
        for view, d in _region_taps(xs, window, region):
            if y is None:
                y, offset = view, jnp.zeros(view.shape, pos_dtype)
                continue
            y_new = lax.max(y, view)
            take = indices_lib.raises(y_new, y)
            offset = lax.select(take, jnp.broadcast_to(np.asarray(d, pos_dtype), view.shape),
                                offset)
            y = y_new
        offset = indices_lib.in_own_loop(offset, bound)
        position = _region_origins(window, region, pos_dtype, xs.ndim) + offset
        if gather:
            return position
        y = None
        for view, d in _region_taps(xs, window, region):
            y = view if y is None else lax.select(offset == np.asarray(d, pos_dtype), view, y)
        return y, position

    if gather:
        position = _over_regions(window, compute)
        return indices_lib.gather_planes(x, position, window.data_format), position
    return _over_regions(window, compute)


def _max_values(x: jax.Array, window: AdaptiveWindow) -> jax.Array:
    """The bin maxima (``max`` propagates NaN): one axis at a time, or on a CPU with one
    pooled axis, one chain over the taps of each run of bins."""
    by_axis = functools.partial(_max_values_by_axis, x, window)
    if not _one_pooled_axis(window):
        return by_axis()
    return lax.platform_dependent(cpu=functools.partial(_chain_reduce, x, window, lax.max),
                                  default=by_axis)


def _max_values_by_axis(x: jax.Array, window: AdaptiveWindow) -> jax.Array:
    y = x
    for _, axis, length, out in _reduced_axes(window):
        if _wide(length, out):
            w, _ = _bin_windows(y, axis, length, out)
            y = jnp.max(w, axis=axis + 1)
            continue
        acc = None
        for view, _, _ in _axis_taps(y, axis, length, out):
            acc = view if acc is None else lax.max(acc, view)
        y = acc
    return y


def _max_positions(x: jax.Array, window: AdaptiveWindow) -> tuple[jax.Array, jax.Array]:
    """The bin maxima, with their exact bits, and the spatial position of each one's first
    occurrence (or first NaN).

    Small bins find both over the taps of all pooled axes at once, which keeps no partly
    reduced intermediate: off the CPU in one chain (XLA:GPU fuses it into one loop); on a
    CPU, where XLA makes no loop with two outputs, in :func:`_chain_positions`' two chains,
    where the runs of bins are long or one per axis (``_CPU_JOINT_TAPS``).  Off the CPU, one
    bin per plane is one reduction over the merged plane.  Otherwise the pairs reduce one
    axis at a time.
    """
    by_axis = functools.partial(_max_positions_by_axis, x, window)
    joint = math.prod(window.max_bin(i) for i in range(window.nd)) <= _JOINT_TAPS
    long_runs = all(run.out_stop - run.out_start >= _CPU_RUN_BINS
                    for i in range(window.nd) for run in _period_runs(window, i))
    cpu_joint = (_region_taps_total(window) <= _CPU_JOINT_TAPS
                 and (window.nd == 1 or long_runs
                      or all(len(window.runs(i)) == 1 for i in range(window.nd))))
    cpu = functools.partial(_chain_positions, x, window) if cpu_joint else by_axis
    if _one_bin_per_plane(window):
        default = functools.partial(_max_positions_global, x, window)
    elif joint:
        default = functools.partial(_max_positions_chain, x, window)
    else:
        default = by_axis
    if cpu is by_axis and default is by_axis:
        return by_axis()
    return lax.platform_dependent(cpu=cpu, default=default)


def _max_positions_chain(x: jax.Array, window: AdaptiveWindow) -> tuple[jax.Array, jax.Array]:
    """:func:`_max_positions` as one chain over the taps of the bins of all axes.

    Tap ``(m_0, ..., m_{d-1})`` is the view of element ``start + m`` of every bin along each
    axis, in row-major order, so the elements of each bin come in row-major order (a repeated
    last element again after it), and :func:`indices.replaces` keeps the first maximum.
    """
    pos_dtype = indices_lib.position_dtype(window.in_spatial)
    strides = indices_lib.plane_strides(window.in_spatial)

    def taps(a, i, position):
        if i == window.nd:
            yield a, position
            return
        axis, length, out = window.spatial_axes[i], window.in_spatial[i], window.out_spatial[i]
        views = ([(a, np.arange(length))] if out == length
                 else ((v, p) for v, p, _ in _axis_taps(a, axis, length, out)))
        for view, p in views:
            yield from taps(view, i + 1, position + _along(p * strides[i], axis, a.ndim))

    y = position = None
    for view, p in taps(x, 0, np.zeros([1] * x.ndim, np.int64)):
        p = jnp.broadcast_to(p.astype(pos_dtype), view.shape)
        if y is None:
            y, position = view, p
            continue
        take = indices_lib.replaces(view, y)
        y, position = lax.select(take, view, y), lax.select(take, p, position)
    return y, position


def _max_positions_global(x: jax.Array, window: AdaptiveWindow
                          ) -> tuple[jax.Array, jax.Array]:
    """:func:`_max_positions` with one bin per plane, off the CPU: the spatial axes, adjacent
    in both layouts, merge into one, and one reduction of ``(value, position)`` pairs over it
    (:func:`indices.argmax_pair`, the positions an iota) leaves no partly reduced
    intermediate.  (On a CPU it took 3-8x the time of :func:`_chain_positions`' chains.)"""
    floating = jnp.issubdtype(x.dtype, jnp.floating)
    pos_dtype = indices_lib.position_dtype(window.in_spatial)
    first = window.spatial_axes[0]
    plane = x.reshape(x.shape[:first] + (-1,) + x.shape[first + window.nd:])
    y, position = lax.reduce((plane, lax.broadcasted_iota(pos_dtype, plane.shape, first)),
                             indices_lib.argmax_init(x.dtype, pos_dtype),
                             indices_lib.argmax_pair(floating), (first,))
    return y.reshape(window.out_shape), position.reshape(window.out_shape)


def _max_positions_by_axis(x: jax.Array, window: AdaptiveWindow
                           ) -> tuple[jax.Array, jax.Array]:
    """:func:`_max_positions`, one pooled axis at a time.

    Each pooling axis gathers its ``(O, M)`` bin windows of the values and of the positions
    found so far (the flat spatial offset over the axes already reduced, plus the window's own
    offset), then reduces the ``(value, position)`` pairs with :func:`indices.argmax_pair`,
    so ties break on the row-major flat index.  (On a CPU, a chain over the taps, as for the
    values alone, compiles to a much slower program when it also carries positions.)
    """
    floating = jnp.issubdtype(x.dtype, jnp.floating)
    pos_dtype = indices_lib.position_dtype(window.in_spatial)
    strides = indices_lib.plane_strides(window.in_spatial)
    init = indices_lib.argmax_init(x.dtype, pos_dtype)
    y, position = x, None
    for i, axis, length, out in _reduced_axes(window):
        w, table = _bin_windows(y, axis, length, out)
        shape = [1] * w.ndim
        shape[axis], shape[axis + 1] = table.shape
        offset = (table * strides[i]).astype(pos_dtype).reshape(shape)
        if position is None:
            candidates = jnp.broadcast_to(offset, w.shape)
        else:
            candidates = _bin_windows(position, axis, length, out)[0] + offset
        y, position = lax.reduce((w, candidates), init, indices_lib.argmax_pair(floating),
                                 (axis + 1,))
    if position is None:
        position = jnp.zeros(y.shape, pos_dtype)
    for i, axis in enumerate(window.spatial_axes):
        if window.out_spatial[i] == window.in_spatial[i] and window.in_spatial[i] > 1:
            iota = lax.broadcasted_iota(pos_dtype, y.shape, axis)
            position = position + iota * np.asarray(strides[i], pos_dtype)
    return y, position


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _pool(x: jax.Array, window: AdaptiveWindow) -> jax.Array:
    return _max_values(x, window)


def _max_positions_linear(x: jax.Array, window: AdaptiveWindow) -> tuple[jax.Array, jax.Array]:
    """:func:`_max_positions`, differentiable in ``x`` through the positions: the derivative
    gathers ``x_dot`` there (its transpose, the gradient, is a scatter-add), or where each
    plane is one bin, reads it with :func:`_read_whole_planes`."""
    y, position = _max_positions(lax.stop_gradient(x), window)
    if _one_bin_per_plane(window):
        read = functools.partial(_read_whole_planes, window=window)
    else:
        read = functools.partial(indices_lib.gather_planes, data_format=window.data_format)
    return indices_lib.found_at(read, x, y, position), position


def _read_whole_planes(a: jax.Array, position: jax.Array, window: AdaptiveWindow
                       ) -> jax.Array:
    """``a`` at ``position`` in each plane (an output of one element per plane)::

        out[n, c] = sum_p where(p == position[n, c], a[n, c, p], 0)

    Linear in ``a``; its transpose, the gradient, is one dense loop over the input that
    places each cotangent at its position, where a scatter would take its indices apart."""
    strides = indices_lib.plane_strides(window.in_spatial)
    shape = [1] * a.ndim
    for axis, length in zip(window.spatial_axes, window.in_spatial):
        shape[axis] = length
    flat = sum(lax.broadcasted_iota(position.dtype, shape, axis) * np.asarray(st, position.dtype)
               for axis, st in zip(window.spatial_axes, strides))
    position = indices_lib.in_own_loop(position, math.prod(window.in_spatial) + 1)
    masked = jnp.where(flat == position, a, np.zeros((), a.dtype))
    return jnp.sum(masked, axis=window.spatial_axes, keepdims=True)


@_pool.defjvp
def _pool_jvp(window, primals, tangents):
    return jax.jvp(lambda x: _max_positions_linear(x, window)[0], primals, tangents)


@functools.partial(jax.jit, static_argnames=("window", "index_dtype"))
def _adaptive_max_pool(x, window: AdaptiveWindow, index_dtype: np.dtype | None):
    if index_dtype is None:
        return _pool(x, window)
    y, position = _max_positions_linear(x, window)
    return y, indices_lib.from_position(position, window.ncx_shape, window.data_format, 2,
                                        index_dtype)


def adaptive_max_pool(
    x: jax.typing.ArrayLike,
    output_size: Any,
    *,
    data_format: str = "NCX",
    return_indices: bool = False,
    index_element_type: Any = None,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Adaptive max pooling as OpenVINO AdaptiveMaxPool-8, with optional argmax indices.

    Along a spatial axis of input size ``L`` and output size ``O``, output ``i`` reduces the
    bin ``[floor(i * L / O), ceil((i + 1) * L / O))``; the bins of all axes form a box::

        y[n, c, i, j] = max x[n, c, h_start(i):h_end(i), w_start(j):w_end(j)]

    Args:
      x: input of shape ``[N, C, *spatial]`` (``NCX``) or ``[N, *spatial, C]`` (``NXC``), with
        1 to 3 spatial axes; a floating or integer dtype.
      output_size: the output spatial size, an int or one entry per spatial axis; ``None``
        keeps that axis' input size.  It may exceed the input size (bins then overlap).
      data_format: ``"NCX"`` or ``"NXC"``.
      return_indices: also return the argmax indices.
      index_element_type: ``"i32"``, ``"i64"``, ``jnp.int32``, ``jnp.int64`` or ``None``
        (int64 with ``jax_enable_x64``, int32 without).

    Returns:
      ``y`` of shape ``[N, C, *output_size]`` (or its NXC form) with the dtype of ``x``, or
      ``(y, indices)``: the spatial position ``flat(p)`` of each maximum within its own
      ``(n, c)`` plane, in ``[0, prod(spatial))`` (the ``axis=2`` convention of
      :func:`max_pool`).  Ties give the first element in row-major order; a NaN is the maximum
      and the first NaN's index is returned (the CPU runtime skips NaN).  The gradient flows to
      the argmax.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(5.0).reshape(1, 1, 5)
      >>> y, i = jaxpool.adaptive_max_pool(x, 3, return_indices=True)
      >>> y[0, 0].tolist(), i[0, 0].tolist()
      ([1.0, 3.0, 4.0], [1, 3, 4])
    """
    x = jnp.asarray(x)
    window_lib.check_input("x", x.shape, x.dtype)
    window = window_lib.make_adaptive_window(x.shape, output_size, data_format)
    if not isinstance(return_indices, (bool, np.bool_)):
        raise TypeError(f"`return_indices` must be a bool, got {return_indices!r}.")
    dtype = indices_lib.index_dtype(index_element_type)
    if not return_indices:
        return _adaptive_max_pool(x, window, None)
    indices_lib.check_fits(window.ncx_shape, 2, dtype)
    return _adaptive_max_pool(x, window, dtype)


def _sum_axis(a: jax.Array, axis: int, length: int, out: int) -> jax.Array:
    """Sums ``a`` over the bins of ``axis``: a fused chain over the taps of narrow bins, a
    reshape for wide bins that tile the axis, else a masked sum over static bin windows."""
    if length % out == 0 and _wide(length, out):
        width = length // out
        return jnp.sum(a.reshape(a.shape[:axis] + (out, width) + a.shape[axis + 1:]),
                       axis=axis + 1, dtype=a.dtype)
    if length % out == 0:
        return _sum_bins(a, axis, length, out)
    return _sum_bins_linear(a, axis, length, out)


def _sum_bins(a: jax.Array, axis: int, length: int, out: int) -> jax.Array:
    if not _wide(length, out):
        total = None
        for view, _, real in _axis_taps(a, axis, length, out):
            if not real.all():  # a select, not a product: 0 * inf would be NaN
                view = jnp.where(_along(real, axis, a.ndim), view, jnp.zeros((), a.dtype))
            total = view if total is None else total + view
        return total
    windows, table = _bin_windows(a, axis, length, out)
    starts, ends = _bins(length, out)
    real = (starts[:, None] + np.arange(table.shape[1])) < ends[:, None]
    shape = [1] * windows.ndim
    shape[axis:axis + 2] = real.shape
    windows = jnp.where(real.reshape(shape), windows, jnp.zeros((), a.dtype))
    return jnp.sum(windows, axis=axis + 1, dtype=a.dtype)


def _bin_matrix_product(a: jax.Array, axis: int, length: int, out: int) -> jax.Array:
    """``a`` times the static ``(out, length)`` 0/1 bin matrix along ``axis``.

    Where the axes after ``axis`` hold more than ``out`` elements, the product is batched over
    the axes before it, so that it (and its transpose, the gradient) comes out in ``a``'s own
    layout instead of a transposed copy; the matrix, repeated over the batch, is then the
    smaller array.  Axes of size 1 leave the batch: with them XLA transposed the gradient
    (NXC, batch 1, 50x50 -> 16x16: temp 3.4 -> 0.9 MiB).
    """
    starts, ends = _bins(length, out)
    p = np.arange(length)[None, :]
    matrix = ((p >= starts[:, None]) & (p < ends[:, None])).astype(a.dtype)
    shape, inner = a.shape, a.shape[axis + 1:]
    if math.prod(inner) <= out:
        total = lax.dot_general(a, matrix, (((axis,), (1,)), ((), ())),
                                precision=lax.Precision.HIGHEST, preferred_element_type=a.dtype)
        return jnp.moveaxis(total, -1, axis)
    batch = tuple(d for d in shape[:axis] if d != 1)
    dims = tuple(range(len(batch)))
    total = lax.dot_general(jnp.broadcast_to(matrix, batch + matrix.shape),
                            a.reshape(batch + shape[axis:]),
                            (((len(batch) + 1,), (len(batch),)), (dims, dims)),
                            precision=lax.Precision.HIGHEST, preferred_element_type=a.dtype)
    return total.reshape(shape[:axis] + (out,) + inner)


@averaging.differentiates_as(_bin_matrix_product)
def _sum_bins_linear(a: jax.Array, axis: int, length: int, out: int) -> jax.Array:
    """:func:`_sum_bins` for bins that do not tile the axis.

    The value gathers bin elements (exact, infinities included); the derivative is the
    product with the bin matrix, whose transpose is another small product, so the gradient
    needs no scatter.
    """
    return _sum_bins(a, axis, length, out)


@functools.partial(jax.jit, static_argnames=("window",))
def _adaptive_avg_pool(x: jax.Array, window: AdaptiveWindow) -> jax.Array:
    total = _bin_sums(x.astype(averaging.accumulator_dtype(x.dtype)), window)
    rank = total.ndim
    divisor = np.ones([1] * rank, np.int64)
    for _, axis, length, out in _reduced_axes(window):
        starts, ends = _bins(length, out)
        divisor = divisor * _along(ends - starts, axis, rank)
    return averaging.divide(total, divisor, x.dtype)


def _sums_by_axis(a: jax.Array, window: AdaptiveWindow) -> jax.Array:
    for _, axis, length, out in _reduced_axes(window):
        a = _sum_axis(a, axis, length, out)
    return a


def _sums_linear(a_dot: jax.Array, window: AdaptiveWindow) -> jax.Array:
    """:func:`_sums_by_axis` as the derivative of the bin sums: its own derivative, in which
    bins that do not tile an axis are a product with the bin matrix."""
    return jax.jvp(lambda a: _sums_by_axis(a, window), (a_dot,), (a_dot,))[1]


@averaging.differentiates_as(_sums_linear)
def _bin_sums(a: jax.Array, window: AdaptiveWindow) -> jax.Array:
    """The bin sums: one axis at a time, or on a CPU with one pooled axis, one chain over
    the taps of each run of bins.  The derivative is the per-axis form, whose transpose needs
    no scatter."""
    by_axis = functools.partial(_sums_by_axis, a, window)
    if not _one_pooled_axis(window):
        return by_axis()
    return lax.platform_dependent(cpu=functools.partial(_chain_reduce, a, window, lax.add),
                                  default=by_axis)


def adaptive_avg_pool(
    x: jax.typing.ArrayLike,
    output_size: Any,
    *,
    data_format: str = "NCX",
) -> jax.Array:
    """Adaptive average pooling as OpenVINO AdaptiveAvgPool-8.

    Along a spatial axis of input size ``L`` and output size ``O``, output ``i`` averages the
    bin ``[floor(i * L / O), ceil((i + 1) * L / O))``; the bins of all axes form a box::

        y[n, c, i, j] = sum x[n, c, h_start(i):h_end(i), w_start(j):w_end(j)]
                        / ((h_end(i) - h_start(i)) * (w_end(j) - w_start(j)))

    Floating inputs of 16 bits sum in float32 (float32 sums at ``Precision.HIGHEST``); integer
    inputs sum exactly and round the quotient half to even, as the OpenVINO CPU runtime does
    (the specification lists floating types only).  To an output of size 1 on every axis the
    CPU runtime instead truncates toward zero, and sums int8/uint8 in their own type,
    saturating; we round there too.

    Args:
      x: input of shape ``[N, C, *spatial]`` (``NCX``) or ``[N, *spatial, C]`` (``NXC``), with
        1 to 3 spatial axes; a floating or integer dtype.
      output_size: the output spatial size, an int or one entry per spatial axis; ``None``
        keeps that axis' input size.  It may exceed the input size.
      data_format: ``"NCX"`` or ``"NXC"``.

    Returns:
      ``y`` of shape ``[N, C, *output_size]`` (or its NXC form) with the dtype of ``x``.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(5.0).reshape(1, 1, 5)
      >>> jaxpool.adaptive_avg_pool(x, 3)[0, 0].tolist()
      [0.5, 2.0, 3.5]
    """
    x = jnp.asarray(x)
    window_lib.check_input("x", x.shape, x.dtype)
    window = window_lib.make_adaptive_window(x.shape, output_size, data_format)
    return _adaptive_avg_pool(x, window)
