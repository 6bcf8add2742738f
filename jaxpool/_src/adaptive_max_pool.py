"""AdaptiveMaxPool-8: the maximum over each adaptive bin, with argmax indices.

The bins (:mod:`bins`) are boxes, so the maxima reduce in one chain over the taps of small
bins, else one pooled axis at a time (global pooling: one reduction over the spatial axes).  The
argmax finds the first maximum (or first NaN) of each bin in row-major order: for global
pooling in one reduction of ``(value, position)`` pairs over the merged plane; for small bins
in one scan over the taps of all axes, which keeps no partly reduced intermediate; else one
axis at a time (:func:`bins.argmax_by_axis`).  With ``nan="last"`` (PyTorch's rule) the last
NaN is the argmax instead.  The derivative routes through the argmax positions.
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import batch_axes, dispatch, exporting
from jaxpool._src import bins as bins_lib
from jaxpool._src import indices as indices_lib
from jaxpool._src import window as window_lib
from jaxpool._src.window import AdaptiveWindow


def _maxima(x: jax.Array, window: AdaptiveWindow) -> jax.Array:
    """The bin maxima (``max`` propagates NaN): for small bins (not global), one chain of
    ``max`` over the taps of all axes, the argmax scan's reads; else
    :func:`bins.max_by_axis`."""
    if window.is_global or not bins_lib.is_joint(window):
        return bins_lib.max_by_axis(x, window)
    return functools.reduce(lax.max, (v for v, _, _ in bins_lib.joint_taps(x, window)))


def _argmax_program(window: AdaptiveWindow):
    """The portable program of the argmax for ``window``'s bins."""
    if window.is_global:
        return _argmax_global
    if bins_lib.is_joint(window):
        return _argmax_scan
    return bins_lib.argmax_by_axis


def _argmax_scan(x: jax.Array, window: AdaptiveWindow, nan: str) -> tuple[jax.Array, jax.Array]:
    """The bin maxima, with their exact bits, and the spatial positions of their first
    occurrence (or first NaN, or last with ``nan="last"``), in one scan over the taps of the
    bins of all axes (:func:`bins.joint_taps`, row-major within each bin), where
    :func:`indices.replaces` keeps the first maximum."""
    pos_dtype = indices_lib.position_dtype(window.in_spatial)
    y = position = None
    for view, p, _ in bins_lib.joint_taps(x, window):
        p = jnp.broadcast_to(p.astype(pos_dtype), view.shape)
        if y is None or position is None:
            y, position = view, p
            continue
        take = indices_lib.replaces(view, y, nan)
        y, position = lax.select(take, view, y), lax.select(take, p, position)
    assert y is not None and position is not None  # a bin holds at least one element
    return y, position


def _argmax_global(x: jax.Array, window: AdaptiveWindow, nan: str) -> tuple[jax.Array, jax.Array]:
    """The argmax with one bin per plane: the spatial axes, adjacent in both layouts, merge
    into one, and one reduction of ``(value, position)`` pairs over it
    (:func:`indices.argmax_pair`, the positions an iota) leaves no partly reduced
    intermediate."""
    floating = jnp.issubdtype(x.dtype, jnp.floating)
    pos_dtype = indices_lib.position_dtype(window.in_spatial)
    axis = window.spatial_axes[0]
    merged = x.reshape(x.shape[:axis] + (-1,) + x.shape[axis + window.nd :])
    y, position = lax.reduce(
        (merged, lax.broadcasted_iota(pos_dtype, merged.shape, axis)),
        indices_lib.argmax_init(x.dtype, pos_dtype),
        indices_lib.argmax_pair(floating, nan),
        (axis,),
    )
    return y.reshape(window.out_shape), position.reshape(window.out_shape)


def _argmax_linear(x: jax.Array, window: AdaptiveWindow, nan: str) -> tuple[jax.Array, jax.Array]:
    """The maxima and their positions, the maxima differentiable in ``x`` through the
    positions: the derivative gathers ``x_dot`` there (its transpose, the gradient, is a
    scatter-add), or where each plane is one bin, reads it with :func:`_read_whole_planes`."""
    y, position = dispatch.run(
        "adaptive_max_pool_argmax", _argmax_program(window), lax.stop_gradient(x), window, nan
    )
    if window.is_global:
        read = functools.partial(_read_whole_planes, window=window)
    else:
        read = functools.partial(indices_lib.gather_planes, data_format=window.data_format)
    return indices_lib.maxima_at(read, x, y, position), position


def _read_whole_planes(a: jax.Array, position: jax.Array, window: AdaptiveWindow) -> jax.Array:
    """``a`` at ``position`` in each plane (an output of one element per plane)::

        out[n, c] = sum_p where(p == position[n, c], a[n, c, p], 0)

    Linear in ``a``; its transpose, the gradient, is one dense loop over the input that
    places each cotangent at its position, where a scatter would take its indices apart."""
    strides = indices_lib.plane_strides(window.in_spatial)
    shape = [1] * a.ndim
    for axis, length in zip(window.spatial_axes, window.in_spatial):
        shape[axis] = length
    flat = sum(
        lax.broadcasted_iota(position.dtype, shape, axis) * np.asarray(st, position.dtype)
        for axis, st in zip(window.spatial_axes, strides)
    )
    position = indices_lib.materialize(position, math.prod(window.in_spatial) + 1)
    masked = jnp.where(flat == position, a, np.zeros((), a.dtype))
    return jnp.sum(masked, axis=window.spatial_axes, keepdims=True)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def _pool(x: jax.Array, window: AdaptiveWindow, nan: str) -> jax.Array:
    # Any NaN rule gives the same maxima (a NaN is a NaN); the rule places the derivative.
    return dispatch.run("adaptive_max_pool", _maxima, x, window)


@_pool.defjvp
def _pool_jvp(window, nan, primals, tangents):
    return jax.jvp(lambda x: _argmax_linear(x, window, nan)[0], primals, tangents)


@functools.partial(jax.jit, static_argnames=("window", "index_dtype", "nan"))
def _adaptive_max_pool(x, window: AdaptiveWindow, index_dtype: np.dtype | None, nan: str):
    if index_dtype is None:
        return _pool(x, window, nan)
    y, position = _argmax_linear(x, window, nan)
    return y, indices_lib.from_position(
        position, window.ncx_shape, window.data_format, 2, index_dtype
    )


@batch_axes.merges_batch_axes("output_size")
@exporting.exportable
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
        In ``NXC`` with a sequence ``output_size``, also ``[*spatial, C]`` or ``[B1, B2, ...,
        *spatial, C]``, pooled as one batch axis ``B1 * B2 * ...`` (Flax's batch axes).
      output_size: the output spatial size, an int or one entry per spatial axis; ``None``
        keeps that axis' input size.  It may exceed the input size (bins then overlap).
      data_format: ``"NCX"`` or ``"NXC"``.
      return_indices: also return the argmax indices.
      index_element_type: ``"i32"``, ``"i64"`` (or ``"int32"``, ``"int64"``), ``jnp.int32``,
        ``jnp.int64`` or ``None`` (int64 with ``jax_enable_x64``, int32 without).

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
    return _checked("first", x, output_size, data_format, return_indices, index_element_type)


_SIGNATURE = inspect.signature(adaptive_max_pool)


def with_nan_rule(
    nan: str, x: jax.typing.ArrayLike, *args: Any, **options: Any
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """:func:`adaptive_max_pool` of ``x`` with ``args`` and ``options``, whose argmax (the
    index and the gradient's place) in a bin of several NaNs is the first NaN
    (``nan="first"``, jaxpool's rule) or the last (``"last"``, PyTorch's).

    While an exporter traces a model, the call is :func:`adaptive_max_pool`'s, which the
    exporter emits as an operation of its own: ONNX leaves NaN to its runtime.
    """
    if indices_lib.check_nan_rule(nan) == "first" or exporting.EXPORTER is not None:
        return adaptive_max_pool(x, *args, **options)
    bound = _SIGNATURE.bind(x, *args, **options)
    bound.apply_defaults()
    return _checked(nan, **bound.arguments)


def _checked(
    nan, x, output_size, data_format, return_indices, index_element_type
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """:func:`adaptive_max_pool`'s arguments, every one given (its signature holds their kinds
    and defaults), checked, and the op run with the NaN rule ``nan``."""
    x = jnp.asarray(x)
    window_lib.check_input("x", x.shape, x.dtype)
    window = window_lib.make_adaptive_window(x.shape, output_size, data_format)
    if not isinstance(return_indices, (bool, np.bool_)):
        raise TypeError(f"`return_indices` must be a bool, got {return_indices!r}.")
    dtype = indices_lib.index_dtype(index_element_type)
    nan = indices_lib.check_nan_rule(nan)
    if not return_indices:
        return _adaptive_max_pool(x, window, None, nan)
    indices_lib.check_fits(window.ncx_shape, 2, dtype)
    return _adaptive_max_pool(x, window, dtype, nan)
