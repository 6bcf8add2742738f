"""The CPU programs of ``max_pool``.

XLA's CPU backend runs ``reduce_window`` several times slower than a fused chain of ``max``
over the tap views, and makes no loop with two outputs, so the portable argmax scan (which
selects the values and the positions together, reading each padded view twice) materialises
its views there.  On a CPU:

* the maxima alone are a chain of ``max`` over the tap views (:func:`taps.fold`);
* the argmax takes two passes: the positions (or the indices) from a chain of ``max`` that
  reads each view once, computed in a loop of their own, then the values selected from the
  tap views at those positions, so that they keep their bits;
* in NCX the outputs are split into the interior and the borders along each axis
  (:func:`_concatenate_regions`), so that only the thin borders read padded views: the
  innermost memory axis is spatial there, and a padded view keeps XLA from vectorising the
  whole loop;
* windows that tile one axis find the values and indices together in one variadic reduction
  (:func:`_argmax_tiled`), which XLA's CPU backend runs as a single loop with both outputs
  (1-D workloads of ``benchmarks/bench.py``); over several axes it loses to the two passes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import indices as indices_lib
from jaxpool._src import taps as taps_lib
from jaxpool._src.window import Region, Window


def values_program(x: jax.Array, window: Window) -> Callable[..., jax.Array]:
    """The maxima: a chain of ``max`` over the tap views."""
    return _max_chain


def argmax_program(
    x: jax.Array, window: Window, index_offset: jax.Array | None, nan: str
) -> Callable:
    """The maxima, positions and indices, as ``max_pool._argmax`` returns them."""
    tiled = _tiled_axis(window)
    if index_offset is not None and tiled is not None:
        return functools.partial(_argmax_tiled, i=tiled)
    return _argmax_two_passes


def _max_chain(x: jax.Array, window: Window) -> jax.Array:
    return taps_lib.fold(x, window, lax.max, indices_lib.lowest(x.dtype))


def _argmax_two_passes(
    x: jax.Array, window: Window, index_offset: jax.Array | None, nan: str
) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    pos_dtype = indices_lib.position_dtype(window.in_spatial)
    position = _concatenate_regions(
        window, lambda region: _positions(x, window, pos_dtype, region, nan)
    )
    # The chain runs in its own loop, whose output is the indices, rather than again in each
    # consumer, which would share its padded views between loops.
    if index_offset is None:
        position = indices_lib.materialize(position, math.prod(window.in_spatial) + 1)
        return _select_taps(x, position, window), position, None
    dtype = index_offset.dtype
    index = indices_lib.materialize(index_offset + position.astype(dtype), np.iinfo(dtype).max)
    position = (index - index_offset).astype(pos_dtype)
    return _select_taps(x, position, window), position, index


def _tiled_axis(window: Window) -> int | None:
    """The spatial axis whose windows tile it (stride = kernel, no dilation, no window in the
    padding) when every other axis is left as it is, else ``None``."""
    pooled = [
        i
        for i in range(window.nd)
        if window.kernel[i] > 1
        or window.strides[i] > 1
        or window.pads_begin[i] > 0
        or window.out_spatial[i] != window.in_spatial[i]
    ]
    if len(pooled) != 1:
        return None
    i = pooled[0]
    k = window.kernel[i]
    if (
        window.strides[i] != k
        or window.dilations[i] > 1
        or window.pads_begin[i]
        or window.out_spatial[i] * k > window.in_spatial[i]
    ):
        return None
    return i


def _argmax_tiled(
    x: jax.Array, window: Window, index_offset: jax.Array, nan: str, i: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The argmax for windows that tile spatial axis ``i`` (:func:`_tiled_axis`): that axis
    split into ``(out, kernel)`` and one variadic reduction of ``(value, index)`` pairs by
    :func:`indices.argmax_pair`."""
    a, k, out = window.spatial_axes[i], window.kernel[i], window.out_spatial[i]
    x = lax.slice_in_dim(x, 0, out * k, axis=a)
    shape = x.shape[:a] + (out, k) + x.shape[a + 1 :]
    dtype = index_offset.dtype
    index = lax.expand_dims(index_offset, (a + 1,))
    for j, st in enumerate(indices_lib.plane_strides(window.in_spatial)):
        d = window.spatial_axes[j] + (j > i)
        if j == i:
            own = lax.broadcasted_iota(dtype, shape, a) * k + lax.broadcasted_iota(
                dtype, shape, a + 1
            )
        else:
            own = lax.broadcasted_iota(dtype, shape, d)
        index = index + own * np.asarray(st, dtype)
    floating = jnp.issubdtype(x.dtype, jnp.floating)
    y, index = lax.reduce(
        (x.reshape(shape), index),
        indices_lib.argmax_init(x.dtype, dtype),
        indices_lib.argmax_pair(floating, nan),
        (a + 1,),
    )
    position = (index - index_offset).astype(indices_lib.position_dtype(window.in_spatial))
    return y, position, index


def _concatenate_regions(window: Window, compute: Callable[[Region], jax.Array]) -> jax.Array:
    """``compute(region)`` over all outputs; in NCX, split into regions.

    The outputs are split along each spatial axis into the interior (windows inside the
    input) and the borders (windows reaching into the padding), and concatenated back.  In NXC
    the channels are innermost, padding costs little, and one loop beats the concatenation.
    """
    region = taps_lib.full_region(window)
    if _splits_outputs(window):
        return _split_from_axis(window, compute, 0, region)
    return compute(region)


def _splits_outputs(window: Window) -> bool:
    """Whether :func:`_concatenate_regions` splits the outputs (NCX, windows in the padding)."""
    return window.data_format == "NCX" and any(
        taps_lib.interior(window, i) not in ((0, 0), (0, o))
        for i, o in enumerate(window.out_spatial)
    )


def _split_from_axis(
    window: Window, compute: Callable[[Region], jax.Array], i: int, region: Region
) -> jax.Array:
    """``compute`` over ``region``, split into interior and borders from axis ``i`` on."""
    if i == window.nd:
        return compute(region)
    r0, r1 = region[i]
    a, b = taps_lib.interior(window, i)
    a, b = max(a, r0), min(b, r1)
    if a >= b or (a, b) == (r0, r1):
        return _split_from_axis(window, compute, i + 1, region)
    pieces = []
    for lo, hi in ((r0, a), (a, b), (b, r1)):
        if lo < hi:
            sub = region[:i] + ((lo, hi),) + region[i + 1 :]
            if (lo, hi) == (a, b):
                pieces.append(_split_from_axis(window, compute, i + 1, sub))
            else:
                pieces.append(compute(sub))
    return lax.concatenate(pieces, window.spatial_axes[i])


def _positions(
    x: jax.Array, window: Window, pos_dtype: np.dtype, region: Region, nan: str
) -> jax.Array:
    """The positions of the maxima in ``region``, from a chain of ``max`` over the tap views.

    Each view is read once (by the ``max``; with ``nan="last"`` also by the test for NaN),
    so that XLA fuses its padding into the loop.  A tap wins when it raises the running
    maximum (:func:`indices.max_moved`), a NaN over a non-NaN included; a NaN maximum is
    kept, or with ``nan="last"`` taken by a later NaN.  The running maximum may differ from
    the input's bits (signed zeros, NaN payloads); the positions are exact.
    """
    fill = indices_lib.lowest(x.dtype)
    shape = taps_lib.region_shape(window, region)
    y = jnp.full(shape, fill, x.dtype)
    delta = None
    for tap in taps_lib.taps(window):
        if delta is None:
            view = _first_view(x, window, tap, fill, region)
        else:
            view = taps_lib.tap_view(x, window, tap, fill, region)
        d = np.asarray(taps_lib.tap_delta(window, tap), pos_dtype)
        if delta is None:
            delta = jnp.full(shape, d)
        y_new = lax.max(y, view)
        take = indices_lib.max_moved(y_new, y, view, nan)
        y = y_new
        delta = lax.select(take, jnp.broadcast_to(d, shape), delta)
    return taps_lib.argmax_position(window, region, y, delta, fill, pos_dtype)


def _first_view(
    x: jax.Array, window: Window, tap: tuple[int, ...], fill, region: Region
) -> jax.Array:
    """The first tap's view for the ``max`` chain, padded by a select instead of a pad.

    The chain starts from this view itself (``max`` with the padding value simplifies away),
    and reads it three times; XLA's CPU backend then materialises a padded view rather than
    fuse it, but fuses a select of a view padded with ones, used once (the stem workload in
    NXC, with indices: faster, and faster to compile).  The ones keep it apart from the
    values pass's zero-padded views, which XLA would otherwise merge with it and materialise.
    """
    inside = taps_lib.tap_inside(window, tap, region)
    if inside.all():
        return taps_lib.tap_view(x, window, tap, fill, region)
    view = taps_lib.tap_view(x, window, tap, np.ones((), x.dtype), region)
    return jnp.where(inside, view, np.asarray(fill, x.dtype))


def _select_taps(x: jax.Array, position: jax.Array, window: Window) -> jax.Array:
    """The input at ``position``: each tap's view, selected where that tap holds the argmax.

    Reads ``x`` through the tap views once more (a fused loop), so that values keep their
    exact bits (signed zeros, NaN payloads).  Windows with no input element give the padding
    value.  Where the outputs are split into regions and every window holds an input element,
    a gather at the positions reads the same bits in about the same time instead, one op in
    place of a chain per region, which compiles faster (the stem workload in NCX).
    """
    if _splits_outputs(window) and taps_lib.first_inside(window)[1].all():
        return indices_lib.gather_planes(x, position, window.data_format)

    def compute(region: Region) -> jax.Array:
        start = [0] * position.ndim
        limit = list(position.shape)
        for a, (r0, r1) in zip(window.spatial_axes, region):
            start[a], limit[a] = r0, r1
        return _select_region(x, lax.slice(position, start, limit), window, region)

    return _concatenate_regions(window, compute)


def _select_region(x: jax.Array, position: jax.Array, window: Window, region: Region) -> jax.Array:
    fill = np.asarray(indices_lib.lowest(x.dtype), x.dtype)
    offset = position - taps_lib.window_origins(window, position.dtype, region)
    y = jnp.full(position.shape, fill)
    all_taps = list(taps_lib.taps(window))
    deltas = [taps_lib.tap_delta(window, tap) for tap in all_taps]
    for tap, d in zip(all_taps, deltas):
        # Zero padding keeps these views distinct from the argmax chain's, so XLA fuses each
        # padded view into its one consumer instead of materialising it for two.
        view = taps_lib.tap_view(x, window, tap, np.zeros((), x.dtype), region)
        match = offset == np.asarray(d, position.dtype)
        if deltas.count(d) > 1:  # taps past an axis' end share offsets: keep the inside one
            match = match & taps_lib.tap_inside(window, tap, region)
        y = lax.select(match, view, y)
    _, inside = taps_lib.first_inside(window, region)
    if not inside.all():
        y = jnp.where(inside, y, fill)
    return y
