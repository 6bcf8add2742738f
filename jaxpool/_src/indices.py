"""The index convention shared by ``max_pool``, ``adaptive_max_pool`` and ``max_unpool``.

An index names an input element by its row-major offset in the *logical NCX view* of the
input, taken modulo the product of the dimensions from ``axis`` on::

    index(n, c, *p) = ((n * C + c) * prod(spatial) + flat(p)) % prod(ncx_shape[axis:])

``axis=0`` is the position in the whole tensor, ``axis=2`` the position in the spatial grid of
the element's own ``(n, c)`` plane.  The same data in NXC layout gets the same indices.  The
ops compute ``flat(p)`` (the spatial position) and this module turns it into the index.  It
also holds the rule that picks among equal maxima (:func:`replaces`: the first, and the first
NaN, or with ``nan="last"`` PyTorch's last NaN) and the derivative that every max op routes
through its positions (:func:`maxima_at`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import window as window_lib

# OpenVINO's names (those an IR may state) and NumPy's.
IR_INDEX_TYPES = ("i32", "i64")
INDEX_ELEMENT_TYPES = (*IR_INDEX_TYPES, "int32", "int64")
# Every spelling `index_element_type` takes, strings and dtypes, for the errors to list.
_ACCEPTED = "the strings 'i32', 'i64', 'int32', 'int64', the dtypes jnp.int32, jnp.int64, or None"

# Which NaN of a window is its argmax: jaxpool's rule, the first in row-major order, or
# PyTorch's, the last (its kernels scan with ``val > max || isnan(val)``).
NAN_RULES = ("first", "last")


def x64_enabled() -> bool:
    """Whether 64-bit types are enabled (``jax_enable_x64``, or inside ``jax.enable_x64``)."""
    return bool(jax.dtypes.canonicalize_dtype(np.int64) == np.int64)


def index_type(index_element_type: Any) -> np.dtype:
    """Reads ``index_element_type`` ("i32", "i64", "int32", "int64" or a dtype) as int32 or
    int64, whether or not 64-bit types are enabled."""
    if isinstance(index_element_type, str):
        if index_element_type not in INDEX_ELEMENT_TYPES:
            raise ValueError(
                f"`index_element_type` (={index_element_type!r}) must be one of {_ACCEPTED}."
            )
        return np.dtype(np.int32 if index_element_type in ("i32", "int32") else np.int64)
    try:
        dtype = np.dtype(index_element_type)
    except TypeError:
        raise TypeError(
            f"`index_element_type` must be one of {_ACCEPTED}, got {index_element_type!r}."
        ) from None
    if dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise ValueError(
            f"`index_element_type` (={index_element_type!r}) must be one of {_ACCEPTED}."
        )
    return dtype


def index_dtype(index_element_type: Any) -> np.dtype:
    """Resolves ``index_element_type`` ("i32", "i64", "int32", "int64", a dtype or None) to
    int32 or int64.

    ``None`` is int64 when ``jax_enable_x64`` is on and int32 otherwise.  int64 without x64 is an
    error: JAX would silently give int32.
    """
    x64 = x64_enabled()
    if index_element_type is None:
        return np.dtype(np.int64 if x64 else np.int32)
    dtype = index_type(index_element_type)
    if dtype == np.int64 and not x64:
        raise ValueError(
            f"`index_element_type` (={index_element_type!r}) needs 64-bit integers: enable "
            "them with `jax.config.update('jax_enable_x64', True)` or ask for 'i32'."
        )
    return dtype


def normalize_axis(axis: Any, rank: int) -> int:
    """Maps ``axis`` in ``[-rank, rank)`` to ``[0, rank)``."""
    axis = window_lib.static_int("axis", axis)
    if not -rank <= axis < rank:
        raise ValueError(f"`axis` (={axis}) must be in [{-rank}, {rank}) for a rank-{rank} input.")
    return axis % rank


def index_bound(ncx_shape: Sequence[Any], axis: int) -> Any:
    """Number of distinct index values: ``prod(ncx_shape[axis:])`` (symbolic where ``axis`` is
    0 and the batch N is)."""
    return math.prod(ncx_shape[axis:])


def fits(ncx_shape: Sequence[Any], axis: int, dtype: np.dtype, margin: int = 0) -> bool:
    """Whether every index, plus ``margin`` (0 or 1), is at most ``dtype``'s maximum.

    With a symbolic batch N (``axis`` 0 under ``jax.export``) the answer must hold for every
    N the export admits: int32 fits where jax can prove it from N's constraints
    (``n <= 1024``), and int64 always does: the byte size of an array XLA holds is an int64,
    so an input has at most ``2**63 - 1`` elements, its largest index plus one at most
    int64's maximum.
    """
    largest = index_bound(ncx_shape, axis) - 1 + margin
    limit = int(np.iinfo(dtype).max)
    if dtype == np.int64 and not window_lib.is_static(largest):
        return True
    # `max_dim` simplifies to `limit` only where `largest <= limit` holds for every N.
    return bool(jax.core.max_dim(largest, limit) == limit)


def check_fits(ncx_shape: Sequence[Any], axis: int, dtype: np.dtype) -> None:
    """Raises if the indices of an input of ``ncx_shape`` would overflow ``dtype``, or, with a
    symbolic batch N, might: the message names N and the ways out."""
    if fits(ncx_shape, axis, dtype):
        return
    largest = index_bound(ncx_shape, axis) - 1
    limit = int(np.iinfo(dtype).max)
    if window_lib.is_static(largest) or jax.core.min_dim(largest, limit) == limit:
        raise ValueError(
            f"indices of an input of NCX shape {tuple(ncx_shape)} with `axis` (={axis}) reach "
            f"{largest}, which overflows `index_element_type` {dtype.name}; use 'i64' "
            "(with jax_enable_x64) or a larger `axis`."
        )
    n, per_example = ncx_shape[0], index_bound(ncx_shape, 1)
    most = (limit + 1) // per_example
    raise ValueError(
        f"indices with `axis` (={axis}) count over the symbolic batch N = {n} of `x` (NCX "
        f"shape {tuple(ncx_shape)}): {dtype.name} holds them only for {n} <= {most}, which "
        f"the export cannot prove; take them with `axis` 1 or 2 (positions in each example "
        f"or plane), in int64 ('i64' with jax_enable_x64), or export with that bound: "
        f'`jax.export.symbolic_shape("{n}, ...", constraints=("{n} <= {most}",))`.'
    )


def position_dtype(spatial: Sequence[int]) -> np.dtype:
    """The narrowest dtype, int32 or int64, that holds every spatial position."""
    if math.prod(spatial) - 1 <= np.iinfo(np.int32).max:
        return np.dtype(np.int32)
    if not x64_enabled():
        raise ValueError(
            f"the spatial grid {tuple(spatial)} has more than 2**31 positions; enable "
            "`jax_enable_x64` to index it."
        )
    return np.dtype(np.int64)


def plane_strides(spatial: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides of the spatial axes within one ``(n, c)`` plane:
    ``flat(p) = sum_i p[i] * plane_strides(spatial)[i]``."""
    return tuple(math.prod(spatial[i + 1 :]) for i in range(len(spatial)))


def _iota(dtype: np.dtype, shape: Sequence[int], dim: int) -> jax.Array:
    return lax.broadcasted_iota(dtype, tuple(shape), dim)


def plane_offset(
    shape: Sequence[int], ncx_shape: Sequence[int], data_format: str, axis: int, dtype: np.dtype
) -> jax.Array | np.ndarray | None:
    """The index of each ``(n, c)`` plane's first element, broadcasting against a pooled
    output of ``shape`` (in ``data_format``'s layout): ``index = offset + flat(p)``.

    ``None`` where indices wrap inside a plane (``axis`` > 2 over several spatial axes), so
    that no offset turns positions into indices.
    """
    n_dim, c_dim = 0, window_lib.channel_axis(len(shape), data_format)
    spatial = tuple(ncx_shape[2:])
    size = math.prod(spatial)
    if axis >= 2:
        return np.zeros((), dtype) if math.prod(spatial[axis - 2 :]) == size else None
    channel = _iota(dtype, shape, c_dim)
    plane = channel if axis == 1 else _iota(dtype, shape, n_dim) * ncx_shape[1] + channel
    return plane * np.asarray(size, dtype)


def from_position(
    position: jax.Array, ncx_shape: Sequence[int], data_format: str, axis: int, dtype: np.dtype
) -> jax.Array:
    """Turns spatial positions ``flat(p)`` into indices for ``axis``.

    ``position`` has the pooled output's shape in ``data_format``'s layout; ``ncx_shape`` is
    the shape of the input's NCX view.
    """
    offset = plane_offset(position.shape, ncx_shape, data_format, axis, dtype)
    position = position.astype(dtype)
    if offset is None:
        bound = math.prod(ncx_shape[axis:])
        return lax.rem(position, np.asarray(bound, dtype))
    return jnp.add(offset, position)


def to_full(indices: jax.Array, ncx_shape: Sequence[int], data_format: str, axis: int) -> jax.Array:
    """Inverse of :func:`from_position` up to the plane: the index for ``axis=0``.

    ``indices`` has a pooled output's shape in ``data_format``'s layout and was taken with
    ``axis`` 0, 1 or 2; the coordinates that ``axis`` dropped come from each index's own
    position in ``indices``.
    """
    if axis == 0:
        return indices
    dtype = indices.dtype
    c_dim = window_lib.channel_axis(indices.ndim, data_format)
    size = math.prod(ncx_shape[2:])
    if axis == 1:
        prefix = _iota(dtype, indices.shape, 0) * (ncx_shape[1] * size)
    else:
        plane = _iota(dtype, indices.shape, 0) * ncx_shape[1] + _iota(dtype, indices.shape, c_dim)
        prefix = plane * size
    return prefix + indices


def gather_planes(x: jax.Array, position: jax.Array, data_format: str) -> jax.Array:
    """``out[n, c, o] = x[n, c, position[n, c, o]]``, with ``o`` and ``p`` spatial (flattened).

    Works in either layout; ``position`` holds spatial positions of ``x``'s planes.  The batch
    and channel axes are batching dimensions of the gather (and of its transpose, a
    scatter-add), so that a sharded batch or channel axis stays sharded without collectives.
    """
    rank = x.ndim
    n, c_axis = x.shape[0], window_lib.channel_axis(rank, data_format)
    channels = x.shape[c_axis]
    if data_format == "NCX":
        planes, pos, batch = x.reshape(n, channels, -1), 2, (0, 1)
        index = position.reshape(n, channels, -1, 1)
    else:
        planes, pos, batch = x.reshape(n, -1, channels), 1, (0, 2)
        index = position.reshape(n, -1, channels, 1)
    numbers = lax.GatherDimensionNumbers(
        offset_dims=(),
        collapsed_slice_dims=(pos,),
        start_index_map=(pos,),
        operand_batching_dims=batch,
        start_indices_batching_dims=batch,
    )
    out = lax.gather(
        planes, index, numbers, slice_sizes=(1, 1, 1), mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS
    )
    return out.reshape(position.shape)


def materialize(a: jax.Array, bound: int) -> jax.Array:
    """``a`` unchanged (its values lie in ``(-bound, bound)``), as a remainder by ``bound``:
    XLA counts a remainder as expensive, so it computes ``a`` in a loop of its own, whose
    output the consumers read, rather than again inside each of them (where a chain of tap
    views would be recomputed per element, or its padded views materialised)."""
    return lax.rem(a, np.asarray(bound, a.dtype))


def check_nan_rule(nan: Any) -> str:
    """``nan``, one of :data:`NAN_RULES`."""
    if nan not in NAN_RULES:
        raise ValueError(f"`nan` (={nan!r}) must be one of {list(NAN_RULES)}.")
    return nan


def _is_nan(a: jax.Array) -> jax.Array | None:
    """Where ``a`` is NaN, or ``None`` for an integer ``a``."""
    return (a != a) if jnp.issubdtype(a.dtype, jnp.floating) else None


def replaces(candidate: jax.Array, running: jax.Array, nan: str = "first") -> jax.Array:
    """Whether a later ``candidate`` replaces the ``running`` maximum of a scan in row-major
    order: it is strictly larger, or a NaN over a number (with ``nan="last"``, any NaN:
    PyTorch's ``val > max || isnan(val)``).  So ties keep the first element, and NaN the
    first (or last) NaN; a scan that selects by it keeps that element's bits (signed zeros,
    NaN payloads)."""
    take = candidate > running
    candidate_nan = _is_nan(candidate)
    if candidate_nan is None:
        return take
    if nan == "last":
        return take | candidate_nan
    return take | (candidate_nan & (running == running))


def max_moved(
    new_max: jax.Array, running: jax.Array, candidate: jax.Array, nan: str = "first"
) -> jax.Array:
    """:func:`replaces` for a chain that keeps a running ``max`` (reading each view once):
    whether ``new_max = max(running, candidate)`` moved, i.e. the candidate is larger, or a
    NaN over a number (a NaN maximum is kept).  With ``nan="last"`` a NaN ``candidate``
    also takes the place of a NaN maximum, which only the candidate itself tells.  Its value
    may differ from the candidate's bits (signed zeros, NaN payloads); the positions are
    exact."""
    take = new_max != running
    if _is_nan(running) is None:
        return take
    take = take & (running == running)
    if nan == "last":
        take = take | (candidate != candidate)
    return take


def argmax_pair(floating: bool, nan: str = "first"):
    """The reducer of ``(value, position)`` pairs for ``lax.reduce``: the larger value, NaN
    over a number, and on a tie the smaller position, i.e. the first element in row-major
    order (the rule of :func:`replaces`); of two NaNs the smaller position, or with
    ``nan="last"`` the larger.  Associative and commutative, so the order of the reduction
    does not matter."""

    def pick(a, b):
        (va, pa), (vb, pb) = a, b
        earlier = pb < pa
        take_b = (vb > va) | ((vb == va) & earlier)
        if floating:
            a_nan, b_nan = va != va, vb != vb
            nan_wins = earlier if nan == "first" else pa < pb
            take_b = jnp.where(a_nan, b_nan & nan_wins, take_b | b_nan)
        return lax.select(take_b, vb, va), lax.select(take_b, pb, pa)

    return pick


def lowest(dtype: Any):
    """The lowest value of ``dtype``: ``-inf``, or the minimum of an integer type (a max
    pool's padding value)."""
    if np.issubdtype(dtype, np.integer):
        return np.iinfo(dtype).min
    return -np.inf


def argmax_init(dtype: Any, position_dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """The identity of :func:`argmax_pair`: the lowest value at the largest position."""
    return (
        np.asarray(lowest(dtype), dtype),
        np.asarray(np.iinfo(position_dtype).max, position_dtype),
    )


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def maxima_at(
    read: Callable[[jax.Array, jax.Array], jax.Array],
    x: jax.Array,
    y: jax.Array,
    position: jax.Array,
) -> jax.Array:
    """``y``, the maxima of ``x`` found at ``position`` by a search that carries no derivative,
    with the derivative of ``x`` read there: ``read(x_dot, position)``, linear in ``x_dot``.

    So every derivative (forward, reverse, higher order) of the maxima routes through the
    argmax positions, and none differentiates the search.
    """
    del read, x, position
    return y


@maxima_at.defjvp
def _maxima_at_jvp(read, primals, tangents):
    x, y, position = primals
    y = maxima_at(read, x, y, position)
    if tangents[0].dtype == jax.dtypes.float0:
        return y, np.zeros(y.shape, jax.dtypes.float0)
    return y, read(tangents[0], position)
