"""MaxPool-1/-8/-14: sliding-window maximum with argmax indices."""

from __future__ import annotations

import functools
import inspect
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import batch_axes, dispatch, exporting
from jaxpool._src import blocks as blocks_lib
from jaxpool._src import indices as indices_lib
from jaxpool._src import taps as taps_lib
from jaxpool._src import window as window_lib
from jaxpool._src.window import Window


def _max_values(x: jax.Array, window: Window) -> jax.Array:
    """The window maxima (NaN propagates): XLA's ``reduce_window``, which a GPU runs at its
    memory floor."""
    return taps_lib.reduce_window(x, window, indices_lib.lowest(x.dtype), lax.max)


def _argmax(
    x: jax.Array, window: Window, index_offset: jax.Array | None, nan: str
) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """The window maxima, with their exact bits, the spatial position of each one's first
    occurrence (or first NaN; with ``nan="last"`` last NaN), and with ``index_offset`` (the
    planes' first indices, see :func:`indices.plane_offset`) the index
    ``index_offset + position``.

    One scan over the tap views in row-major order: a later tap replaces the running maximum
    only when it is strictly larger, or a NaN over a non-NaN (:func:`indices.replaces`; with
    ``nan="last"`` any NaN), so ties keep the first element and NaN the first (or last), and
    the running maximum selects the winning view, keeping its bits.  XLA:GPU fuses the scan
    into one loop with both outputs.
    """
    pos_dtype = indices_lib.position_dtype(window.in_spatial)
    region = taps_lib.full_region(window)
    fill = indices_lib.lowest(x.dtype)
    shape = taps_lib.region_shape(window, region)
    y = jnp.full(shape, fill, x.dtype)
    delta = None
    for tap in taps_lib.taps(window):
        view = taps_lib.tap_view(x, window, tap, fill, region)
        d = np.asarray(taps_lib.tap_delta(window, tap), pos_dtype)
        if delta is None:
            delta = jnp.full(shape, d)
        take = indices_lib.replaces(view, y, nan)
        y = lax.select(take, view, y)
        delta = lax.select(take, jnp.broadcast_to(d, shape), delta)
    position = taps_lib.argmax_position(window, region, y, delta, fill, pos_dtype)
    index = None if index_offset is None else index_offset + position.astype(index_offset.dtype)
    return y, position, index


def _argmax_linear(
    x: jax.Array, window: Window, nan: str, index_offset: jax.Array | None = None
) -> tuple[jax.Array, jax.Array]:
    """The maxima and their indices (positions without ``index_offset``), the maxima
    differentiable in ``x`` through the positions: the derivative reads ``x_dot`` at the argmax
    positions (zero for windows with no input element), and its transpose, the gradient,
    places the cotangents back in one dense loop (:func:`blocks.read_at`)."""
    y, position, index = dispatch.run(
        "max_pool_argmax", _argmax, lax.stop_gradient(x), window, index_offset, nan
    )
    read = functools.partial(blocks_lib.read_at, window=window)
    return indices_lib.maxima_at(read, x, y, position), (position if index is None else index)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def _pool(x: jax.Array, window: Window, nan: str) -> jax.Array:
    # Any NaN rule gives the same maxima (a NaN is a NaN); the rule places the derivative.
    return dispatch.run("max_pool", _max_values, x, window)


@_pool.defjvp
def _pool_jvp(window, nan, primals, tangents):
    return jax.jvp(lambda x: _argmax_linear(x, window, nan)[0], primals, tangents)


@functools.partial(jax.jit, static_argnames=("window", "axis", "index_dtype", "nan"))
def _max_pool(x, window: Window, axis: int | None, index_dtype: np.dtype | None, nan: str):
    if axis is None:
        return _pool(x, window, nan)
    assert index_dtype is not None
    offset = indices_lib.plane_offset(
        window.out_shape, window.ncx_shape, window.data_format, axis, index_dtype
    )
    if offset is None or not indices_lib.fits(window.ncx_shape, axis, index_dtype, margin=1):
        # the indices wrap, or may fill the type: convert positions after
        y, position = _argmax_linear(x, window, nan)
        return y, indices_lib.from_position(
            position, window.ncx_shape, window.data_format, axis, index_dtype
        )
    return _argmax_linear(x, window, nan, jnp.broadcast_to(offset, window.out_shape))


@batch_axes.merges_batch_axes("kernel")
@exporting.exportable
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
        In ``NXC`` with a sequence ``kernel``, also ``[*spatial, C]`` or ``[B1, B2, ...,
        *spatial, C]``, pooled as one batch axis ``B1 * B2 * ...`` (Flax's batch axes).
      kernel: window size, an int or one per spatial axis.
      strides: window step; ``None`` means ``kernel``.
      pads_begin, pads_end: padding at the start/end of each spatial axis (default 0).
      dilations: spacing of the kernel taps (default 1).
      rounding_type: ``"floor"``, ``"ceil"`` or ``"ceil_torch"``.
      auto_pad: ``"explicit"``, ``"valid"``, ``"same_upper"`` or ``"same_lower"``.
      data_format: ``"NCX"`` or ``"NXC"``.
      return_indices: also return the argmax indices.
      index_element_type: ``"i32"``, ``"i64"`` (or ``"int32"``, ``"int64"``), ``jnp.int32``,
        ``jnp.int64`` or ``None`` (int64 with ``jax_enable_x64``, int32 without).
      axis: the first NCX dimension the indices count over, in ``[-rank, rank)``: ``0`` gives
        positions in the whole NCX tensor, ``2`` positions in the element's spatial plane.
        Under ``jax.export`` with a symbolic batch N, indices of ``axis`` 0 count over N:
        int64 holds them for every N, int32 only where N's constraints prove it (a
        ``ValueError`` names N and the bound otherwise).

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
    return _checked(
        "first", x, kernel, strides, pads_begin, pads_end, dilations, rounding_type, auto_pad,
        data_format, return_indices, index_element_type, axis,
    )  # fmt: skip


_SIGNATURE = inspect.signature(max_pool)


def with_nan_rule(
    nan: str, x: jax.typing.ArrayLike, *args: Any, **options: Any
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """:func:`max_pool` of ``x`` with ``args`` and ``options``, whose argmax (the index and
    the gradient's place) in a window of several NaNs is the first NaN (``nan="first"``,
    jaxpool's rule) or the last (``"last"``, PyTorch's).

    While an exporter traces a model, the call is :func:`max_pool`'s, which the exporter
    emits as an operation of its own: ONNX's MaxPool leaves NaN to its runtime.
    """
    if indices_lib.check_nan_rule(nan) == "first" or exporting.EXPORTER is not None:
        return max_pool(x, *args, **options)
    bound = _SIGNATURE.bind(x, *args, **options)
    bound.apply_defaults()
    return _checked(nan, **bound.arguments)


def _checked(
    nan, x, kernel, strides, pads_begin, pads_end, dilations, rounding_type, auto_pad,
    data_format, return_indices, index_element_type, axis,
) -> jax.Array | tuple[jax.Array, jax.Array]:  # fmt: skip
    """:func:`max_pool`'s arguments, every one given (its signature holds their kinds and
    defaults), checked, and the op run with the NaN rule ``nan``."""
    x = jnp.asarray(x)
    window = window_lib.sliding_window(
        x,
        kernel,
        strides,
        pads_begin,
        pads_end,
        dilations,
        rounding_type=rounding_type,
        auto_pad=auto_pad,
        data_format=data_format,
    )
    if not isinstance(return_indices, (bool, np.bool_)):
        raise TypeError(f"`return_indices` must be a bool, got {return_indices!r}.")
    axis = indices_lib.normalize_axis(axis, x.ndim)
    dtype = indices_lib.index_dtype(index_element_type)
    nan = indices_lib.check_nan_rule(nan)
    if not return_indices:
        return _max_pool(x, window, None, None, nan)
    indices_lib.check_fits(window.ncx_shape, axis, dtype)
    return _max_pool(x, window, axis, dtype, nan)
