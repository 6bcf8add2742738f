"""The CPU programs of the ROI family's layout changes, ``[N, C, H, W]`` to ``[N, H, W, C]``
and back.

XLA's CPU backend fuses a plain transpose into every read that consumes it, and each gather
of a channel vector then reads with a stride of ``H * W`` elements, several times slower;
fused the other way (the pooling into the transpose's loop order) every read fetches one
channel of a sample.  These programs write the transposed array out through a loop of its
own, whose output XLA always materializes.

The loop runs over two halves of an axis that is neither the images' nor the channels' (the
rows of the map, the boxes of the pooled bins): a map sharded by image or by channel is then
transposed where it lies, as the partitioner splits a loop only along the axes it does not
slice.  The halves are ``ceil(L / 2)`` long and overlap by one element where ``L`` is odd, so
that no size is decided by a shape: the same program serves a symbolic number of images or
boxes.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax


def channels_last(x: jax.Array) -> jax.Array:
    """``[N, C, H, W]`` as ``[N, H, W, C]``, written to a buffer of its own."""
    n, c, h, w = x.shape
    return _written(lambda part: jnp.moveaxis(part, 1, -1), x, 2, 1, (n, h, w, c))


def from_channels_last(y: jax.Array) -> jax.Array:
    """``[R, ..., C]`` as ``[R, C, ...]``, written out apart from the pooling that made it."""
    shape = (y.shape[0], y.shape[-1], *y.shape[1:-1])
    return _written(lambda part: jnp.moveaxis(part, -1, 1), y, 0, 0, shape)


def as_stored(a: jax.Array) -> jax.Array:
    """``a`` as it is: XLA's CPU backend keeps the row-major layout that
    :func:`jaxpool._src.layout.row_major` asks an accelerator for."""
    return a


def _written(
    f: Callable[[jax.Array], jax.Array],
    a: jax.Array,
    axis: int,
    out_axis: int,
    shape: tuple[int, ...],
) -> jax.Array:
    """``f`` (a transposition that moves ``a``'s ``axis`` to ``out_axis``) of ``a``, as a loop
    of two steps, each of which transposes one half of ``axis`` into the output (of
    ``shape``)."""
    length = a.shape[axis]
    half = length - length // 2
    # The second half starts at floor(L / 2): it repeats the middle element where L is odd,
    # and both halves are the first element where L is 1.
    second = length // 2

    def step(i: jax.Array, out: jax.Array) -> jax.Array:
        start = i * second
        part = f(lax.dynamic_slice_in_dim(a, start, half, axis))
        return lax.dynamic_update_slice_in_dim(out, part, start, out_axis)

    return lax.fori_loop(0, 2, step, jnp.zeros(shape, a.dtype))
