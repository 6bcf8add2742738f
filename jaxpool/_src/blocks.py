"""The input elements that per-window positions name, read densely through stride blocks.

Along each spatial axis the input is cut into blocks of ``stride`` elements: block ``b``
holds positions ``b * stride + j`` for ``0 <= j < stride``.  Window ``o`` starts at
``o * stride - pads_begin``, so it reads element ``j`` of block ``b`` with its tap at
``t = (b - o) * stride + j + pads_begin`` from its start, which must be a multiple of the
dilation in ``[0, (kernel - 1) * dilation]``.  The windows that can hold an element of block
``b`` are therefore ``o = b - m`` for the few *phases* ``m`` that make ``t`` a tap for some
``j`` (one phase when windows do not overlap).  For a map ``position`` from windows to
spatial positions::

    read_at(x, position)[o] = x[position[o]]
                         = sum_m sum_j where(position[o] == own(o + m, j), x_blocks[o + m, j], 0)

where ``own(b, j) = b * stride + j`` is the spatial position of element ``j`` of block ``b``
(flattened over the spatial axes).  Every operation is a pad, a reshape, a comparison or a
sum, so the transpose, which places each window's value at its position and adds where
windows share one, is a single dense loop over the input: no scatter.  Its sums run over the
windows in row-major output order.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import indices as indices_lib
from jaxpool._src import taps as taps_lib
from jaxpool._src.window import Window


def read_at(x: jax.Array, position: jax.Array, window: Window) -> jax.Array:
    """``x`` at ``position`` for every window; zero for windows with no input element.

    ``x`` has the input's shape and ``position`` the output's, both in ``window``'s layout;
    ``position`` holds spatial positions in each ``(n, c)`` plane that lie in their window.
    Linear in ``x``.
    """
    dtype = position.dtype
    _, inside = taps_lib.first_inside(window)
    if not inside.all():  # -1 is no input element's position
        position = jnp.where(inside, position, np.asarray(-1, dtype))

    spatial = dict(zip(window.spatial_axes, range(window.nd)))
    phases = [_phases(window, i) for i in range(window.nd)]
    blocks = [-(-length // s) for length, s in zip(window.in_spatial, window.strides)]
    pads = [(0, 0, 0)] * x.ndim
    for a, i in spatial.items():
        pads[a] = (0, blocks[i] * window.strides[i] - window.in_spatial[i], 0)

    # Each spatial axis becomes (block, offset); `split[a]` is the block axis of axis `a`.
    split: dict[int, int] = {}
    block_shape: list[int] = []
    position_shape: list[int] = []
    for a, n in enumerate(x.shape):
        split[a] = len(block_shape)
        if a in spatial:
            i = spatial[a]
            block_shape += [blocks[i], window.strides[i]]
            position_shape += [position.shape[a], 1]
        else:
            block_shape.append(n)
            position_shape.append(position.shape[a])
    x_blocks = lax.pad(x, np.zeros((), x.dtype), pads).reshape(block_shape)
    offset_axes = tuple(split[a] + 1 for a in spatial)

    own = _own(window, spatial, split, block_shape, dtype)

    position = position.reshape(position_shape)
    zero = np.zeros((), x.dtype)
    total = None
    # The transpose adds the phases' contributions in the reverse of this order, which is
    # row-major output order.
    for phase in itertools.product(*phases):
        shift = [(0, 0, 0)] * len(block_shape)
        unshift = [(0, 0, 0)] * x.ndim
        for a, i in spatial.items():
            m, o = phase[i], window.out_spatial[i]
            shift[split[a]] = (m, blocks[i] - m - o, 0)
            unshift[a] = (-m, o + m - blocks[i], 0)
        shifted = lax.pad(position, np.asarray(-1, dtype), shift)
        term = jnp.sum(jnp.where(shifted == own, x_blocks, zero), axis=offset_axes)
        term = lax.pad(term, zero, unshift)
        total = term if total is None else total + term
    assert total is not None  # at least one phase per axis
    return total


def _phases(window: Window, i: int) -> list[int]:
    """The phases ``m`` along spatial axis ``i``: window ``b - m`` reads element ``j`` of block
    ``b`` with its tap at ``m * stride + j + pads_begin`` from the window's start, and the
    phases kept are those where that is a tap for some ``j``."""
    s, pb, d = window.strides[i], window.pads_begin[i], window.dilations[i]
    span = (window.kernel[i] - 1) * d
    return [
        m
        for m in range(-((pb + s - 1) // s), (span - pb) // s + 1)
        if any(0 <= m * s + j + pb <= span and (m * s + j + pb) % d == 0 for j in range(s))
    ]


def _own(
    window: Window,
    spatial: dict[int, int],
    split: dict[int, int],
    block_shape: list[int],
    dtype: np.dtype,
) -> jax.Array:
    """``own(b, j)``: the spatial position (flattened over the spatial axes) of element ``j``
    of block ``b``, broadcast against the blocked input (``split[a]`` is the block axis of
    axis ``a``)."""
    own_shape = [1] * len(block_shape)
    for a in spatial:
        own_shape[split[a] : split[a] + 2] = block_shape[split[a] : split[a] + 2]
    plane = indices_lib.plane_strides(window.in_spatial)
    own = None
    for a, i in spatial.items():
        s = window.strides[i]
        term = (
            lax.broadcasted_iota(dtype, own_shape, split[a]) * s
            + lax.broadcasted_iota(dtype, own_shape, split[a] + 1)
        ) * np.asarray(plane[i], dtype)
        own = term if own is None else own + term
    assert own is not None  # at least one spatial axis
    return own
