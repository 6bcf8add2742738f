"""The frame of every region program: the map read channels-last and the output written back
in its layout, the outputs where nothing is read, boxes holding a NaN, and batch indices.

Features are read channels-last (``[N, H, W, C]``), so that each read is one contiguous channel
vector and the channel axis is a pass-through axis of every gather: a channel-sharded map stays
sharded with no collective.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import dispatch
from jaxpool._src.layout import row_major


def channels_last(x: jax.Array, data_format: str) -> jax.Array:
    """``x`` as ``[N, H, W, C]``, stored so: a transpose written out row-major
    (:mod:`jaxpool._src.layout`), or on a CPU its program in :mod:`jaxpool._src.cpu.layout`."""
    if data_format == "NXC":
        return x
    return dispatch.run("channels_last", lambda a: row_major(jnp.moveaxis(a, 1, -1)), x)


def from_channels_last(y: jax.Array, data_format: str) -> jax.Array:
    """``[R, ..., C]`` to the output layout: ``[R, C, ...]`` for NCX, transposed from a
    channels-last array stored so."""
    if data_format == "NXC":
        return y
    return dispatch.run("from_channels_last", lambda a: jnp.moveaxis(row_major(a), -1, 1), y)


def stored_row_major(a: jax.Array) -> jax.Array:
    """:func:`jaxpool._src.layout.row_major` but on a CPU, where ``a`` is returned as it is
    (XLA's CPU backend keeps the layouts its programs are written in)."""
    return dispatch.run("row_major", row_major, a)


def nothing_read(
    n: int, num_rois: int, channels: int, output_size: tuple[int, ...], dtype: Any, data_format: str
) -> jax.Array | None:
    """The output where no box reads the map, else None: zeros of shape ``[R, channels,
    *output_size]`` (or channels-last) where there are no boxes (``R = 0``), no output
    channels, or no images (``N = 0``: every batch index lies outside ``[0, N)``, which gives
    zeros by the runtime's rule).  Their derivatives are zero.  A symbolic ``N`` or ``R``
    (``jax.export``) is at least 1."""
    if all(not isinstance(d, int) or d > 0 for d in (n, num_rois, channels)):
        return None
    if data_format == "NCX":
        return jnp.zeros((num_rois, channels, *output_size), dtype)
    return jnp.zeros((num_rois, *output_size, channels), dtype)


def nan_boxes(program: Callable[..., Any]) -> Callable[..., Any]:
    """``program(x, rois, *rest)`` where a box (a row of ``rois``) holding a NaN gives NaN in
    every element of its output (the first axis of each output is the boxes'), and -1 in an
    integer output (the positions of maxima: no element).

    Such a box is pooled as a box of zeros, and its output is then replaced: no NaN reaches
    an index, a sample count or a loop's trip count, its cotangent reaches no feature (and
    nothing of its row of ``rois``), and every other box is pooled as without it.
    """

    @functools.wraps(program)
    def pooled(x: Any, rois: jax.Array, *rest: Any, **kwargs: Any) -> Any:
        nan = jnp.isnan(rois).any(axis=1)
        out = program(x, jnp.where(nan[:, None], jnp.zeros_like(rois), rois), *rest, **kwargs)
        return jax.tree.map(lambda a: _replaced(a, nan), out)

    return pooled


def _replaced(out: jax.Array, nan: jax.Array) -> jax.Array:
    """``out`` with the outputs of the boxes ``nan`` marks NaN (-1 for an integer dtype)."""
    nan = nan.reshape(nan.shape + (1,) * (out.ndim - 1))
    mark = np.nan if jnp.issubdtype(out.dtype, np.floating) else -1
    return jnp.where(nan, jnp.asarray(mark, out.dtype), out)


def listed(batch_index: jax.Array) -> jax.Array:
    """Which boxes the runtime's position-sensitive poolings read: those before the first batch
    index of -1, which ends their list of boxes (every later box gives zeros)."""
    return jnp.cumsum(batch_index == -1, dtype=np.int32) == 0


def batch_or_zero(batch: jax.Array, n: int) -> tuple[jax.Array, jax.Array]:
    """Batch indices clipped into ``[0, N)`` and the mask of those that were inside."""
    batch = batch.astype(np.int32)
    inside = (batch >= 0) & (batch < n)
    return jnp.clip(batch, 0, n - 1), inside


def read(xt: jax.Array, *index: jax.typing.ArrayLike) -> jax.Array:
    """``xt[index]``: the channel vectors at broadcastable integer positions of channels-last
    ``xt`` (the last axis passes through every read)."""
    return xt[index]
