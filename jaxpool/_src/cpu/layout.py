"""The CPU programs of the ROI family's layout changes, ``[N, C, H, W]`` to ``[N, H, W, C]``
and back.

XLA's CPU backend fuses a plain transpose into every read that consumes it, and each gather
of a channel vector then reads with a stride of ``H * W`` elements, several times slower;
fused the other way (the pooling into the transpose's loop order) every read fetches one
channel of a sample.  These programs write the transposed array out through a loop of its
own, whose output XLA always materializes.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax


def channels_last(x: jax.Array) -> jax.Array:
    """``[N, C, H, W]`` as ``[N, H, W, C]``, written to a buffer of its own."""
    n, c, h, w = x.shape
    if n > 1:
        return _written(lambda image: jnp.moveaxis(image, 0, -1), x)
    # One image: its two halves of rows, stacked again, keep the channels contiguous.
    even = h + h % 2
    halves = jnp.pad(x[0], ((0, 0), (0, even - h), (0, 0))).reshape(c, 2, even // 2, w)
    rows = lax.map(lambda half: jnp.moveaxis(half, 0, -1), jnp.moveaxis(halves, 1, 0))
    return rows.reshape(1, even, w, c)[:, :h]


def from_channels_last(y: jax.Array) -> jax.Array:
    """``[R, ..., C]`` as ``[R, C, ...]``, written out apart from the pooling that made it."""
    if y.shape[0] < 2:
        return jnp.moveaxis(y, -1, 1)
    return _written(lambda part: jnp.moveaxis(part, -1, 0), y)


def as_stored(a: jax.Array) -> jax.Array:
    """``a`` as it is: XLA's CPU backend keeps the row-major layout that
    :func:`jaxpool._src.layout.row_major` asks an accelerator for."""
    return a


def _written(f: Callable[[jax.Array], jax.Array], a: jax.Array) -> jax.Array:
    """``f`` (a transposition of the axes after the first) applied to ``a`` as a loop of its
    own: ``lax.map`` over two halves of the first axis where it is even, else over its
    entries."""
    lead = a.shape[0]
    if lead % 2:
        return lax.map(f, a)
    halves = a.reshape(2, lead // 2, *a.shape[1:])
    done = lax.map(jax.vmap(f), halves)
    return done.reshape(lead, *done.shape[2:])
