"""MaxPool-1/-8/-14: sliding-window maximum with argmax indices."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import indices as indices_lib
from jaxpool._src import taps as taps_lib
from jaxpool._src import window as window_lib
from jaxpool._src.window import Window


def lowest(dtype: np.dtype):
    """The padding value of a max pool: ``-inf``, or the minimum of an integer type."""
    if np.issubdtype(dtype, np.integer):
        return np.iinfo(dtype).min
    return -np.inf


def _max_values(x: jax.Array, window: Window) -> jax.Array:
    """The window maxima, as a chain of ``max`` over the tap views (NaN propagates)."""
    fill = lowest(x.dtype)
    y = None
    for tap in taps_lib.taps(window):
        view = taps_lib.tap_view(x, window, tap, fill)
        y = view if y is None else lax.max(y, view)
    if y is None:  # every window lies in the padding
        y = jnp.full(window.out_shape, fill, x.dtype)
    return y


def _max_positions(x: jax.Array, window: Window) -> jax.Array:
    """The spatial position of each window's maximum (its first occurrence).

    The taps are visited in row-major order and a later tap replaces the running maximum only
    when it is strictly larger, or a NaN over a non-NaN, so ties and NaN keep the first
    element.  Where the maximum is the padding value, every input element of the window
    equals it (or there is none), and the position is the window's first input element.
    Only positions leave the chain: XLA then fuses it, padded views included, into one loop.
    """
    fill = lowest(x.dtype)
    floating = jnp.issubdtype(x.dtype, jnp.floating)
    pos_dtype = indices_lib.position_dtype(window.in_spatial)
    y = delta = None
    for tap in taps_lib.taps(window):
        view = taps_lib.tap_view(x, window, tap, fill)
        d = np.asarray(taps_lib.tap_delta(window, tap), pos_dtype)
        if y is None:
            y, delta = view, jnp.full(view.shape, d)
            continue
        if floating:  # larger, or NaN over a non-NaN; a NaN maximum is kept
            take = ~(view <= y) & (y == y)
        else:
            take = view > y
        y = lax.select(take, view, y)
        delta = lax.select(take, jnp.broadcast_to(d, view.shape), delta)
    first, _ = taps_lib.first_inside(window)
    if y is None:  # every window lies in the padding
        return jnp.broadcast_to(first.astype(pos_dtype), window.out_shape)
    position = taps_lib.window_origins(window, pos_dtype) + delta
    return jnp.where(y == fill, first.astype(pos_dtype), position)


def _values_at(x: jax.Array, position: jax.Array, window: Window) -> jax.Array:
    """The input at ``position``; the padding value for windows with no input element."""
    y = indices_lib.gather_planes(x, position, window.data_format)
    _, inside = taps_lib.first_inside(window)
    if not inside.all():
        y = jnp.where(inside, y, jnp.asarray(lowest(x.dtype), x.dtype))
    return y


def _tangent(x_dot: jax.Array, position: jax.Array, window: Window) -> jax.Array:
    """The tangent of the maxima: ``x_dot`` at each window's argmax.

    Written as a sum over taps of the tap's view of ``x_dot``, kept where that tap holds the
    argmax: linear in ``x_dot``, so its transpose (the gradient) is a sum of strided pads of
    the masked cotangent, which XLA fuses into one loop without a scatter.  Windows with no
    input element read only padding and get zero.
    """
    pos_dtype = position.dtype
    offset = position - taps_lib.window_origins(window, pos_dtype)
    zero = np.asarray(0, x_dot.dtype)
    y_dot = None
    for tap in taps_lib.taps(window):
        view = taps_lib.tap_view(x_dot, window, tap, zero)
        d = np.asarray(taps_lib.tap_delta(window, tap), pos_dtype)
        term = jnp.where(offset == d, view, zero)
        y_dot = term if y_dot is None else y_dot + term
    if y_dot is None:
        return jnp.zeros(position.shape, x_dot.dtype)
    return y_dot


def _zero_tangent(x_dot: jax.Array, shape) -> jax.Array:
    if x_dot.dtype == jax.dtypes.float0:
        return np.zeros(shape, jax.dtypes.float0)
    return jnp.zeros(shape, x_dot.dtype)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _pool(x: jax.Array, window: Window) -> jax.Array:
    return _max_values(x, window)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _take(x: jax.Array, position: jax.Array, window: Window) -> jax.Array:
    """The maxima given their positions; differentiable in ``x`` through the positions."""
    return _values_at(x, position, window)


@_take.defjvp
def _take_jvp(window, primals, tangents):
    (x, position), (x_dot, _) = primals, tangents
    y = _values_at(x, position, window)
    if x_dot.dtype == jax.dtypes.float0:
        return y, _zero_tangent(x_dot, y.shape)
    return y, _tangent(x_dot, position, window)


@_pool.defjvp
def _pool_jvp(window, primals, tangents):
    (x,), (x_dot,) = primals, tangents
    return _take_jvp(window, (x, _max_positions(x, window)), (x_dot, None))


@functools.partial(jax.jit, static_argnames=("window", "axis", "index_dtype"))
def _max_pool(x, window: Window, axis: int | None, index_dtype: np.dtype | None):
    if axis is None:
        return _pool(x, window)
    position = _max_positions(lax.stop_gradient(x), window)
    y = _take(x, position, window)
    return y, indices_lib.from_position(position, window.ncx_shape, window.data_format, axis,
                                        index_dtype)


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
