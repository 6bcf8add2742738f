"""MaxPool-1/-8/-14: sliding-window maximum with argmax indices."""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import blocks as blocks_lib
from jaxpool._src import indices as indices_lib
from jaxpool._src import taps as taps_lib
from jaxpool._src import window as window_lib
from jaxpool._src.window import Window


def _max_values(x: jax.Array, window: Window) -> jax.Array:
    """The window maxima (NaN propagates).

    On a CPU, a fused chain of ``max`` over the tap views, several times faster there than
    XLA's ``reduce_window``; elsewhere ``reduce_window``, which a GPU runs at its memory floor.
    """
    return lax.platform_dependent(
        cpu=lambda: _max_chain(x, window),
        default=lambda: taps_lib.reduce_window(x, window, indices_lib.lowest(x.dtype), lax.max))


def _max_chain(x: jax.Array, window: Window) -> jax.Array:
    fill = indices_lib.lowest(x.dtype)
    y = None
    for tap in taps_lib.taps(window):
        view = taps_lib.tap_view(x, window, tap, fill)
        y = view if y is None else lax.max(y, view)
    if y is None:  # every window lies in the padding
        y = jnp.full(window.out_shape, fill, x.dtype)
    return y


def _argmax(x: jax.Array, window: Window, index_offset: jax.Array | None = None
            ) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """The window maxima, with their exact bits, the spatial position of each one's first
    occurrence (or first NaN), and with ``index_offset`` (the planes' first indices, see
    :func:`indices.plane_offset`) the index ``index_offset + position``.

    Off the CPU (XLA:GPU fuses sibling loops) one chain over the tap views gives the maxima
    and positions.  On a CPU, XLA makes no loop with two outputs, and a chain that selects the
    values reads each padded view twice, which materialises it; there the positions (as
    indices, when asked for) come from a chain of ``max`` that reads each view once, and the
    values from a second pass that selects each tap's view where it holds the argmax; but
    windows that tile one axis find values and indices together in one reduction
    (:func:`_argmax_reduce`), which beats the two passes there (1-D, kernel 4: 40 against
    52 ms) and loses to them over several axes.
    """
    pos_dtype = indices_lib.position_dtype(window.in_spatial)
    region = taps_lib.full_region(window)

    def cpu():
        tiled = _tiled_axis(window)
        if index_offset is not None and tiled is not None:
            return _argmax_reduce(x, window, index_offset, tiled)
        position = _by_regions(
            window, lambda region: _argmax_chain(x, window, pos_dtype, region, False)[1])
        # The chain runs in its own loop, whose output is the indices, rather than again in
        # each consumer, which would share its padded views between loops.
        if index_offset is None:
            position = indices_lib.in_own_loop(position, math.prod(window.in_spatial) + 1)
            return _select_taps(x, position, window), position, None
        dtype = index_offset.dtype
        index = indices_lib.in_own_loop(index_offset + position.astype(dtype),
                                        np.iinfo(dtype).max)
        position = (index - index_offset).astype(pos_dtype)
        return _select_taps(x, position, window), position, index

    def default():
        y, position = _argmax_chain(x, window, pos_dtype, region, True)
        index = (None if index_offset is None
                 else index_offset + position.astype(index_offset.dtype))
        return y, position, index

    return lax.platform_dependent(cpu=cpu, default=default)


def _tiled_axis(window: Window) -> int | None:
    """The spatial axis whose windows tile it (stride = kernel, no dilation, no window in
    the padding) when every other axis is left as it is, else ``None``."""
    pooled = [i for i in range(window.nd) if window.kernel[i] > 1 or window.strides[i] > 1
              or window.pads_begin[i] > 0 or window.out_spatial[i] != window.in_spatial[i]]
    if len(pooled) != 1:
        return None
    i = pooled[0]
    k = window.kernel[i]
    if (window.strides[i] != k or window.dilations[i] > 1
            or window.pads_begin[i] or window.out_spatial[i] * k > window.in_spatial[i]):
        return None
    return i


def _argmax_reduce(x: jax.Array, window: Window, index_offset: jax.Array, i: int
                   ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """:func:`_argmax` for windows that tile spatial axis ``i`` (:func:`_tiled_axis`): that
    axis split into ``(out, kernel)`` and one variadic reduction of ``(value, index)`` pairs
    by :func:`indices.argmax_pair`, which XLA's CPU backend runs as a single loop with both
    outputs."""
    a, k, out = window.spatial_axes[i], window.kernel[i], window.out_spatial[i]
    x = lax.slice_in_dim(x, 0, out * k, axis=a)
    shape = x.shape[:a] + (out, k) + x.shape[a + 1:]
    dtype = index_offset.dtype
    index = lax.expand_dims(index_offset, (a + 1,))
    for j, st in enumerate(indices_lib.plane_strides(window.in_spatial)):
        d = window.spatial_axes[j] + (j > i)
        if j == i:
            own = (lax.broadcasted_iota(dtype, shape, a) * k
                   + lax.broadcasted_iota(dtype, shape, a + 1))
        else:
            own = lax.broadcasted_iota(dtype, shape, d)
        index = index + own * np.asarray(st, dtype)
    floating = jnp.issubdtype(x.dtype, jnp.floating)
    y, index = lax.reduce((x.reshape(shape), index), indices_lib.argmax_init(x.dtype, dtype),
                          indices_lib.argmax_pair(floating), (a + 1,))
    position = (index - index_offset).astype(indices_lib.position_dtype(window.in_spatial))
    return y, position, index


def _by_regions(window: Window, compute) -> jax.Array:
    """``compute(region)`` over all outputs; in NCX, split into regions.

    The outputs are split along each spatial axis into the interior (windows inside the
    input) and the borders (windows reaching into the padding), and concatenated back: the
    innermost memory axis is spatial, padded views keep XLA's CPU backend from vectorising the
    whole loop, and this way only the thin borders pay for them.  In NXC the channels are
    innermost, padding costs little, and one loop beats the concatenation.
    """
    region = taps_lib.full_region(window)
    return _split(window, compute, 0, region) if _splits(window) else compute(region)


def _splits(window: Window) -> bool:
    """Whether :func:`_by_regions` splits the outputs (NCX, with windows in the padding)."""
    return window.data_format == "NCX" and any(
        taps_lib.interior(window, i) not in ((0, 0), (0, o))
        for i, o in enumerate(window.out_spatial))


def _split(window: Window, compute, i: int, region) -> jax.Array:
    """``compute`` over ``region``, split into interior and borders from axis ``i`` on."""
    if i == window.nd:
        return compute(region)
    r0, r1 = region[i]
    a, b = taps_lib.interior(window, i)
    a, b = max(a, r0), min(b, r1)
    if a >= b or (a, b) == (r0, r1):
        return _split(window, compute, i + 1, region)
    pieces = []
    for lo, hi in ((r0, a), (a, b), (b, r1)):
        if lo < hi:
            sub = region[:i] + ((lo, hi),) + region[i + 1:]
            pieces.append(_split(window, compute, i + 1, sub) if (lo, hi) == (a, b)
                          else compute(sub))
    return lax.concatenate(pieces, window.spatial_axes[i])


def _argmax_chain(x: jax.Array, window: Window, pos_dtype: np.dtype, region: taps_lib.Region,
                  exact: bool) -> tuple[jax.Array, jax.Array]:
    """The maxima and their positions for the outputs in ``region``.

    The taps are visited in row-major order and a later tap replaces the running maximum only
    when it is strictly larger, or a NaN over a non-NaN, so ties and NaN keep the first
    element.  With ``exact``, the running maximum selects the winning view, keeping its bits;
    otherwise it is a ``max``, which reads each view once (its signed zeros and NaN payloads
    may differ).  Where the maximum is the padding value, every input element of the window
    equals it (or there is none), and the position is the window's first input element.
    """
    fill = indices_lib.lowest(x.dtype)
    shape = taps_lib.region_shape(window, region)
    y = jnp.full(shape, fill, x.dtype)
    delta = None
    for tap in taps_lib.taps(window):
        if delta is None and not exact:
            view = _first_view(x, window, tap, fill, region)
        else:
            view = taps_lib.tap_view(x, window, tap, fill, region)
        d = np.asarray(taps_lib.tap_delta(window, tap), pos_dtype)
        if delta is None:
            delta = jnp.full(shape, d)
        if exact:
            take = indices_lib.replaces(view, y)
            y = lax.select(take, view, y)
        else:
            # Each view is read once (by the max), so that XLA fuses its padding into the
            # loop.  A tap wins when it raises the running maximum, NaN over a non-NaN
            # included; a NaN maximum is kept.
            y_new = lax.max(y, view)
            take = indices_lib.raises(y_new, y)
            y = y_new
        delta = lax.select(take, jnp.broadcast_to(d, shape), delta)
    first, _ = taps_lib.first_inside(window, region)
    if delta is None:  # every window lies in the padding
        return y, jnp.broadcast_to(first.astype(pos_dtype), shape)
    position = taps_lib.window_origins(window, pos_dtype, region) + delta
    return y, jnp.where(y == fill, first.astype(pos_dtype), position)


def _first_view(x: jax.Array, window: Window, tap: tuple[int, ...], fill,
                region: taps_lib.Region) -> jax.Array:
    """The first tap's view for the ``max`` chain, padded by a select instead of a pad.

    The chain starts from this view itself (``max`` with the padding value simplifies away),
    and reads it three times; XLA's CPU backend then materialises a padded view rather than
    fuse it, but fuses a select of a view padded with ones, used once (stem NXC, with indices:
    0.87x the time, compile 0.52 -> 0.25 s).  The ones keep it apart from the values pass's
    zero-padded views, which XLA would otherwise merge with it and materialise.
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
    value.  Where :func:`_by_regions` splits the outputs and every window holds an input
    element, a gather at the positions reads the same bits in about the same time instead,
    one op in place of a chain per region (the stem, 32x64x112x112 k3 s2 p1 in NCX: compile
    0.66 -> 0.45 s).
    """
    if _splits(window) and taps_lib.first_inside(window)[1].all():
        return indices_lib.gather_planes(x, position, window.data_format)

    def compute(region):
        start = [0] * position.ndim
        limit = list(position.shape)
        for a, (r0, r1) in zip(window.spatial_axes, region):
            start[a], limit[a] = r0, r1
        return _select_region(x, lax.slice(position, start, limit), window, region)

    return _by_regions(window, compute)


def _select_region(x: jax.Array, position: jax.Array, window: Window,
                   region: taps_lib.Region) -> jax.Array:
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


def _argmax_linear(x: jax.Array, window: Window, index_offset: jax.Array | None = None
                   ) -> tuple[jax.Array, jax.Array | None]:
    """:func:`_argmax`'s maxima and indices, the maxima differentiable in ``x`` through the
    positions: the derivative reads ``x_dot`` at the argmax positions (zero for windows with
    no input element), and its transpose, the gradient, places the cotangents back in one
    dense loop."""
    y, position, index = _argmax(lax.stop_gradient(x), window, index_offset)
    read = functools.partial(blocks_lib.take, window=window)
    return indices_lib.found_at(read, x, y, position), (position if index is None else index)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _pool(x: jax.Array, window: Window) -> jax.Array:
    return _max_values(x, window)


@_pool.defjvp
def _pool_jvp(window, primals, tangents):
    return jax.jvp(lambda x: _argmax_linear(x, window)[0], primals, tangents)


@functools.partial(jax.jit, static_argnames=("window", "axis", "index_dtype"))
def _max_pool(x, window: Window, axis: int | None, index_dtype: np.dtype | None):
    if axis is None:
        return _pool(x, window)
    offset = indices_lib.plane_offset(window.out_shape, window.ncx_shape, window.data_format,
                                      axis, index_dtype)
    if offset is None or indices_lib.index_bound(window.ncx_shape, axis) >= np.iinfo(
            index_dtype).max:  # the indices wrap, or fill the type: convert positions after
        y, position = _argmax_linear(x, window)
        return y, indices_lib.from_position(position, window.ncx_shape, window.data_format,
                                            axis, index_dtype)
    return _argmax_linear(x, window, jnp.broadcast_to(offset, window.out_shape))


def max_pool(
    x: jax.typing.ArrayLike,
    kernel: Any,
    strides: Any = None,
    pads_begin: Any = None,
    pads_end: Any = None,
    *,
    dilations: Any = None,
    rounding_type: str = "floor",
    auto_pad: str = "explicit",
    data_format: str = "NCX",
    return_indices: bool = False,
    index_element_type: Any = None,
    axis: int = 0,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Max pooling as OpenVINO MaxPool-1/-8/-14, with optional argmax indices.

    For every output position ``o`` the window holds the input elements
    ``x[o * strides + k * dilations - pads_begin]`` for each kernel offset ``0 <= k < kernel``;
    positions outside the input are padding and count as ``-inf`` (the type's minimum for
    integers)::

        y[n, c, o] = max_k x[n, c, o * strides + k * dilations - pads_begin]

    The output size along each spatial axis is ``floor`` (or ``ceil``) of
    ``(L + pads_begin + pads_end - dilated_kernel) / strides + 1``; ``ceil_torch`` drops a last
    window that would start in the end padding.  ``auto_pad`` ``valid`` uses no pads and
    ``same_upper``/``same_lower`` the pads that give ``ceil(L / strides)`` outputs, after which
    ``rounding_type`` still applies (as the runtime does; the specification's ``H_out = H`` holds
    only for stride 1).

    Args:
      x: input of shape ``[N, C, *spatial]`` (``NCX``) or ``[N, *spatial, C]`` (``NXC``), with
        1 to 3 spatial axes; a floating or integer dtype.
      kernel: window size, an int or one per spatial axis.
      strides: window step; ``None`` means ``kernel``.
      pads_begin, pads_end: padding at the start/end of each spatial axis (default 0).
      dilations: spacing of the kernel taps (default 1).
      rounding_type: ``"floor"``, ``"ceil"`` or ``"ceil_torch"``.
      auto_pad: ``"explicit"``, ``"valid"``, ``"same_upper"`` or ``"same_lower"``.
      data_format: ``"NCX"`` or ``"NXC"``.
      return_indices: also return the argmax indices.
      index_element_type: ``"i32"``, ``"i64"``, ``jnp.int32``, ``jnp.int64`` or ``None``
        (int64 with ``jax_enable_x64``, int32 without).
      axis: the first NCX dimension the indices count over, in ``[-rank, rank)``: ``0`` gives
        positions in the whole NCX tensor, ``2`` positions in the element's spatial plane.

    Returns:
      ``y`` with the dtype of ``x``, or ``(y, indices)``.  The index of element
      ``(n, c, *p)`` is its row-major offset in the NCX view modulo ``prod(ncx_shape[axis:])``;
      ties and NaN give the first element in row-major window order (NaN propagates); a window
      of ``-inf`` only gives its first element; a window with no input element gives the
      padding value, the index of its plane's first element, and no gradient.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
      >>> y, i = jaxpool.max_pool(x, 2, return_indices=True)
      >>> y[0, 0].tolist(), i[0, 0].tolist()
      ([[5.0, 7.0], [13.0, 15.0]], [[5, 7], [13, 15]])
    """
    x = jnp.asarray(x)
    window_lib.check_input("x", x.shape, x.dtype)
    window = window_lib.make_window(
        x.shape, kernel, strides, pads_begin, pads_end, dilations,
        rounding_type=rounding_type, auto_pad=auto_pad, data_format=data_format)
    if not isinstance(return_indices, (bool, np.bool_)):
        raise TypeError(f"`return_indices` must be a bool, got {return_indices!r}.")
    axis = indices_lib.normalize_axis(axis, x.ndim)
    dtype = indices_lib.index_dtype(index_element_type)
    if not return_indices:
        return _max_pool(x, window, None, None)
    indices_lib.check_fits(window.ncx_shape, axis, dtype)
    return _max_pool(x, window, axis, dtype)
