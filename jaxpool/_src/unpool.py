"""MaxUnpool: scatters pooled values back to the positions their indices name."""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import exporting
from jaxpool._src import indices as indices_lib
from jaxpool._src import window as window_lib


def _output_shape(output_shape: Any, y_shape: tuple[int, ...], data_format: str) -> tuple[int, ...]:
    """Validates ``output_shape``: the full shape of the pooled input, in ``data_format``."""
    shape = window_lib.per_axis(
        "output_shape", output_shape, len(y_shape), 0, scalar=False, what="dimension of `y`"
    )
    # A batch or channel axis may be empty, as pooling's; a spatial one may not.
    if 0 in (shape[a] for a in window_lib.spatial_axes(len(shape), data_format)):
        raise ValueError(
            f"`output_shape` (={shape}) must be positive on every dimension of `y` but the "
            f"batch and channel axes (which may be empty), in {data_format} layout."
        )
    c_dim = window_lib.channel_axis(len(shape), data_format)
    if shape[0] != y_shape[0] or shape[c_dim] != y_shape[c_dim]:
        raise ValueError(
            f"`output_shape` (={shape}) must keep the batch and channel sizes of `y` of shape "
            f"{y_shape} in {data_format} layout."
        )
    return shape


def _full_dtype(ncx_shape: tuple[int, ...], dtype: np.dtype) -> np.dtype:
    """int32, or int64 for 64-bit ``indices`` or an output with more than 2**31 - 1 elements."""
    size = math.prod(ncx_shape)
    if dtype.itemsize < 8 and size <= np.iinfo(np.int32).max:
        return np.dtype(np.int32)
    if not indices_lib.x64_enabled():
        raise ValueError(
            f"`output_shape` of NCX shape {ncx_shape} has {size} elements, more than 32-bit "
            "indices address; enable `jax_enable_x64`."
        )
    return np.dtype(np.int64)


COMBINES = ("sum", "max", "torch")


def _plane_positions(
    indices: jax.Array, ncx_shape: tuple[int, ...], data_format: str, axis: int
) -> jax.Array:
    """Each index as a position in its own ``(n, c)`` plane: in ``[0, prod(ncx_shape[2:]))``
    where it names an element of that plane, outside that range where it does not."""
    full = indices_lib.to_full(indices, ncx_shape, data_format, axis)
    zeros = jnp.zeros(indices.shape, indices.dtype)
    return full - indices_lib.to_full(zeros, ncx_shape, data_format, 2)


def _check_concrete(
    indices: jax.Array, shape: tuple[int, ...], axis: int, data_format: str, dtype: np.dtype
) -> None:
    """Refuses concrete ``indices`` of which any names no element of its own plane of
    ``shape``: its value would be dropped, which is never what a caller means."""
    ncx_shape = window_lib.to_ncx_shape(shape, data_format)
    size = math.prod(ncx_shape[2:])
    # Concrete indices inside a traced function (a constant under `jit`) are checked too.
    with jax.ensure_compile_time_eval():
        position = np.asarray(_plane_positions(indices.astype(dtype), ncx_shape, data_format, axis))
    outside = (position < 0) | (position >= size)
    lost = int(outside.sum())
    if not lost:
        return
    # Plane positions taken with axis 2 do not depend on the plane's size: the largest one
    # says how large the plane must be.  Those taken with axis 0 or 1 do.
    need = f" and the indices need at least {position.max() + 1}" if axis == 2 else ""
    raise ValueError(
        f"`indices` (taken with `axis`={axis}) name positions outside `output_shape` "
        f"(={shape}): {lost} of {indices.size} values would be lost. The spatial axes of "
        f"`output_shape` hold {size} elements per plane{need}; pass the shape of the input "
        "the indices were taken on."
    )


_DROP = lax.GatherScatterMode.FILL_OR_DROP


def _scatter_sum(updates, position, operand_shape, numbers):
    """``updates`` added at ``position`` into zeros of ``operand_shape``; positions out of
    range are dropped."""
    operand = jnp.zeros(operand_shape, updates.dtype)
    return lax.scatter_add(operand, position, updates, numbers, mode=_DROP)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def _scatter_last(updates, position, operand_shape, numbers):
    """``updates`` written at ``position`` into zeros of ``operand_shape``, the last of the
    values named to one position (in row-major order of its plane of ``updates``) kept, as
    PyTorch's CPU ``max_unpool`` keeps it; deterministic: each value's order in its plane is
    scattered by maximum, and only the value whose order won is written."""
    axis = numbers.scatter_dims_to_operand_dims[0]  # the plane's axis
    order_dtype = position.dtype
    order = lax.broadcasted_iota(order_dtype, updates.shape, axis)
    last = lax.scatter_max(
        jnp.full(operand_shape, -1, order_dtype), position, order, numbers, mode=_DROP
    )
    size = operand_shape[axis]
    at = jnp.minimum(position[..., 0], np.asarray(size - 1, order_dtype))
    won = jnp.take_along_axis(last, at, axis=axis) == order
    position = jnp.where(won[..., None], position, np.asarray(size, order_dtype))
    operand = jnp.zeros(operand_shape, updates.dtype)
    return lax.scatter(operand, position, updates, numbers, mode=_DROP)


@_scatter_last.defjvp
def _scatter_last_jvp(operand_shape, numbers, primals, tangents):
    # PyTorch's derivative: the gradient of each value is the output's gradient at its index,
    # in full even where several values name one position (a gather, the transpose of the
    # sum's scatter), not the derivative of keeping the last.
    (updates, position), (updates_dot, _) = primals, tangents
    out = _scatter_last(updates, position, operand_shape, numbers)
    return out, _scatter_sum(updates_dot, position, operand_shape, numbers)


@functools.partial(jax.jit, static_argnames=("shape", "axis", "combine", "data_format", "dtype"))
def _max_unpool(
    y,
    indices,
    shape: tuple[int, ...],
    axis: int,
    combine: str,
    data_format: str,
    dtype: np.dtype,
):
    """Scatters ``y`` into each ``(n, c)`` plane at the plane position of its index, adding
    (``combine="sum"``), keeping the largest value (``"max"``) or the last (``"torch"``) where
    indices repeat.

    The batch and channel axes are batching dimensions of the scatter, so a sharded batch or
    channel axis stays sharded.  An index outside its own plane (which no pooling produces)
    is dropped.
    """
    ncx_shape = window_lib.to_ncx_shape(shape, data_format)
    size = math.prod(ncx_shape[2:])
    position = _plane_positions(indices.astype(dtype), ncx_shape, data_format, axis)
    inside = (position >= 0) & (position < np.asarray(size, dtype))
    position = jnp.where(inside, position, np.asarray(size, dtype))  # dropped by the scatter
    n, c = ncx_shape[:2]
    if data_format == "NCX":
        operand_shape, updates, pos = (n, c, size), y.reshape(n, c, -1), 2
        batch = (0, 1)
    else:
        operand_shape, updates, pos = (n, size, c), y.reshape(n, -1, c), 1
        batch = (0, 2)
    numbers = lax.ScatterDimensionNumbers(
        update_window_dims=(),
        inserted_window_dims=(pos,),
        scatter_dims_to_operand_dims=(pos,),
        operand_batching_dims=batch,
        scatter_indices_batching_dims=batch,
    )
    position = position.reshape(*updates.shape, 1)
    if combine == "sum":
        out = _scatter_sum(updates, position, operand_shape, numbers)
    elif combine == "torch":
        out = _scatter_last(updates, position, operand_shape, numbers)
    else:
        # The maximum starts from the lowest value, and positions that no index names are set
        # to 0 afterwards, so that negative values are kept where they are named.
        lowest = np.asarray(indices_lib.lowest(y.dtype), y.dtype)
        out = lax.scatter_max(
            jnp.full(operand_shape, lowest), position, updates, numbers, mode=_DROP
        )
        named = lax.scatter_max(
            jnp.zeros(operand_shape, np.int8),
            position,
            jnp.ones(updates.shape, np.int8),
            numbers,
            mode=_DROP,
        )
        out = jnp.where(named > 0, out, jnp.zeros((), y.dtype))
    return out.reshape(shape)


@exporting.exportable
def max_unpool(
    y: jax.typing.ArrayLike,
    indices: jax.typing.ArrayLike,
    output_shape: Any,
    *,
    axis: int,
    combine: str = "sum",
    data_format: str = "NCX",
) -> jax.Array:
    """Max unpooling: the adjoint of a max pool, given its indices.

    Scatters every pooled value to the input element its index names, in a zero tensor of
    ``output_shape``; a position named several times (overlapping windows) receives the sum
    of its values (``combine="sum"``, the adjoint of pooling) or the largest of them
    (``combine="max"``)::

        x[element(indices[n, c, o])] += y[n, c, o]        # combine="sum"
        x[p] = max(y[n, c, o] for every o naming p)     # combine="max"; 0 where none does
        x[p] = y[n, c, last o naming p]                 # combine="torch"; 0 where none does

    ``axis`` has no default: the indices' convention must be stated, as
    :func:`numpy.take_along_axis` requires its axis (indices taken with ``axis=2`` and read
    with ``axis=0`` would land in the first plane).  With ``combine="max"`` the result is
    deterministic, and where the values sent to one position are equal (unpooling the pooled
    values themselves) it is PyTorch's ``max_unpool``, which keeps one of them.
    ``combine="torch"`` is PyTorch's CPU ``max_unpool`` whatever the values: the last value
    (in row-major order of its ``(n, c)`` plane of ``y``) named to a position is kept, and it
    differentiates as PyTorch does: the gradient of every value is the output gradient at its
    index, in full even where several values name one position (the derivative of ``"sum"``,
    not of keeping one value).

    ``indices`` follow the index convention of :func:`max_pool` with the same ``axis``
    (``adaptive_max_pool`` indices use ``axis=2``): the row-major offset in the NCX view of the
    pooled input, modulo ``prod(ncx_shape[axis:])``; the coordinates that ``axis`` dropped come
    from each index's own position in ``indices``.  An index that names no element of its own
    ``(n, c)`` plane (outside ``[0, prod(ncx_shape[axis:]))``, or, with ``axis`` 0 or 1,
    another plane; pooling produces neither, but indices taken on a larger input than
    ``output_shape`` do) is refused with a ``ValueError`` that counts the values it would lose,
    when ``indices`` is a concrete array.  Traced indices (under ``jit``, ``vmap`` or
    ``grad``) cannot be inspected: there such an index contributes nothing, its value is
    dropped and its gradient is zero, and no other position receives it (no wrap-around into
    a neighbouring plane).  With ``"sum"`` it is linear in ``y`` and its gradient gathers at the
    indices; with ``"max"`` the gradient goes to the values that won (split evenly among equal
    ones); with ``"torch"`` as with ``"sum"``.

    Args:
      y: pooled values of shape ``[N, C, *pooled]`` (``NCX``) or ``[N, *pooled, C]``
        (``NXC``), with 1 to 3 spatial axes.
      indices: integer indices of the shape of ``y``.
      output_shape: the full shape of the pooled input, in ``data_format``'s layout, with the
        batch and channel sizes of ``y``.
      axis: the ``axis`` the indices were taken with: 0, 1 or 2 (or -rank to 2 - rank).
      combine: ``"sum"``, ``"max"`` or ``"torch"``: how values sent to one position combine.
      data_format: ``"NCX"`` or ``"NXC"``.

    Returns:
      An array of ``output_shape`` with the dtype of ``y``.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
      >>> y, i = jaxpool.max_pool(x, 2, return_indices=True)
      >>> jaxpool.max_unpool(y, i, x.shape, axis=0)[0, 0].tolist()
      [[0.0, 0.0, 0.0, 0.0], [0.0, 5.0, 0.0, 7.0], [0.0, 0.0, 0.0, 0.0], [0.0, 13.0, 0.0, 15.0]]
    """
    y = jnp.asarray(y)
    indices = jnp.asarray(indices)
    data_format = window_lib.choice("data_format", data_format, window_lib.DATA_FORMATS)
    combine = window_lib.choice("combine", combine, COMBINES)
    window_lib.check_input("y", y.shape, y.dtype)
    if not jnp.issubdtype(indices.dtype, jnp.integer):
        raise TypeError(f"`indices` must have an integer dtype, got {indices.dtype}.")
    if indices.shape != y.shape:
        raise ValueError(
            f"`indices` of shape {indices.shape} must have the shape of `y` ({y.shape})."
        )
    given = axis
    axis = indices_lib.normalize_axis(axis, y.ndim)
    if axis > 2:
        raise ValueError(
            f"`axis` (={given}) must be 0, 1 or 2 (or {-y.ndim} to {2 - y.ndim}): indices "
            "taken over fewer than all spatial axes have lost the coordinates of the others."
        )
    shape = _output_shape(output_shape, tuple(y.shape), data_format)
    if 0 in shape:  # an empty batch or no channels: nothing to scatter
        return jnp.zeros(shape, y.dtype)
    dtype = _full_dtype(window_lib.to_ncx_shape(shape, data_format), np.dtype(indices.dtype))
    if not isinstance(indices, jax.core.Tracer):
        _check_concrete(indices, shape, axis, data_format, dtype)
    return _max_unpool(y, indices, shape, axis, combine, data_format, dtype)
