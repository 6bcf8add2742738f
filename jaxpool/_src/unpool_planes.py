"""``max_unpool`` of indices that may name any element of their own ``(n, c)`` plane: a
scatter into each plane, the batch and channels as its batching dimensions (so a sharded batch
or channel axis stays sharded; along a sharded spatial axis XLA cannot bound the positions, and
reduces the whole output across the devices).  Positions outside the plane are dropped."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import indices as indices_lib


@dataclasses.dataclass(frozen=True)
class Planes:
    """Values placed anywhere in their own ``(n, c)`` plane of ``in_spatial``."""

    data_format: str
    in_spatial: tuple[int, ...]


def _axes(data_format: str) -> tuple[int, tuple[int, int]]:
    """The position axis and the batch and channel axes of ``[N, C, O]`` (``NCX``) or
    ``[N, O, C]`` (``NXC``)."""
    return (2, (0, 1)) if data_format == "NCX" else (1, (0, 2))


def _numbers(data_format: str) -> lax.ScatterDimensionNumbers:
    """One plane position per value of ``[N, C, O]`` (``NCX``) or ``[N, O, C]`` (``NXC``)."""
    pos, batch = _axes(data_format)
    return lax.ScatterDimensionNumbers(
        update_window_dims=(),
        inserted_window_dims=(pos,),
        scatter_dims_to_operand_dims=(pos,),
        operand_batching_dims=batch,
        scatter_indices_batching_dims=batch,
    )


def _flat(a: jax.Array, data_format: str) -> jax.Array:
    """``a`` with its spatial axes merged into one."""
    n, c = a.shape[0], a.shape[1 if data_format == "NCX" else -1]
    return a.reshape((n, c, -1) if data_format == "NCX" else (n, -1, c))


_DROP = lax.GatherScatterMode.FILL_OR_DROP


def program(y: jax.Array, position: jax.Array, planes: Planes, combine: str) -> jax.Array:
    """The values scattered into zero planes at ``position``, combined by ``combine``
    (``"sum"``, ``"max"``, or ``"torch"``: the last in row-major order of the plane of
    ``y``) where several name one element."""
    size = math.prod(planes.in_spatial)
    updates = _flat(y, planes.data_format)
    numbers = _numbers(planes.data_format)
    pos = numbers.scatter_dims_to_operand_dims[0]
    shape = list(updates.shape)
    shape[pos] = size
    at = _flat(position, planes.data_format)[..., None]
    at = jnp.where(at < 0, np.asarray(size, at.dtype), at)  # dropped, as those past the end
    zeros = jnp.zeros(shape, y.dtype)
    if combine == "sum":
        out = lax.scatter_add(zeros, at, updates, numbers, mode=_DROP)
    elif combine == "max":
        # From the lowest value, so that negative values are kept where they are named; the
        # positions that no index names are set to 0 afterwards.
        lowest = jnp.full(shape, indices_lib.lowest(y.dtype), y.dtype)
        out = lax.scatter_max(lowest, at, updates, numbers, mode=_DROP)
        ones = jnp.ones(updates.shape, np.int8)
        named = lax.scatter_max(jnp.zeros(shape, np.int8), at, ones, numbers, mode=_DROP)
        out = jnp.where(named > 0, out, zeros)
    else:
        # Each value's order in its plane is scattered by maximum, and only the winner's value
        # is written: deterministic, whatever order the scatter runs in.
        order = lax.broadcasted_iota(at.dtype, updates.shape, pos)
        last = lax.scatter_max(jnp.full(shape, -1, at.dtype), at, order, numbers, mode=_DROP)
        clipped = jnp.minimum(at[..., 0], np.asarray(size - 1, at.dtype))
        won = jnp.take_along_axis(last, clipped, axis=pos) == order
        at = jnp.where(won[..., None], at, np.asarray(size, at.dtype))
        out = lax.scatter(zeros, at, updates, numbers, mode=_DROP)
    n, c = y.shape[0], y.shape[1 if planes.data_format == "NCX" else -1]
    return out.reshape(
        (n, c, *planes.in_spatial) if planes.data_format == "NCX" else (n, *planes.in_spatial, c)
    )


def spread(v: jax.Array, position: jax.Array, planes: Planes) -> jax.Array:
    """The sum of ``v`` at the positions: its transpose is :func:`read`, a gather."""
    return program(v, position, planes, "sum")


def read(a: jax.Array, position: jax.Array, planes: Planes) -> jax.Array:
    """The map ``a`` at each position, 0 where it is dropped: a gather, the transpose of the
    scatter of :func:`spread`."""
    size = math.prod(planes.in_spatial)
    pos, batch = _axes(planes.data_format)
    at = _flat(position, planes.data_format)[..., None]
    at = jnp.where(at < 0, np.asarray(size, at.dtype), at)
    gather = lax.GatherDimensionNumbers(
        offset_dims=(),
        collapsed_slice_dims=(pos,),
        start_index_map=(pos,),
        operand_batching_dims=batch,
        start_indices_batching_dims=batch,
    )
    flat = _flat(a, planes.data_format)
    out = lax.gather(flat, at, gather, slice_sizes=(1, 1, 1), mode=_DROP, fill_value=0)
    return out.reshape(position.shape)


def winners(
    y: jax.Array, position: jax.Array, planes: Planes, out: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """For each value, whether ``out``, the result of ``combine="max"``, keeps it at its
    position (it equals the largest there), and how many values are kept there."""
    won = y == read(out, position, planes)
    return won, read(spread(won.astype(np.int32), position, planes), position, planes)
