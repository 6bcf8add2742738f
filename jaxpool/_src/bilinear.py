"""Bilinear samples of a channels-last feature map, by the OpenVINO runtime's rule.

A bilinear sample follows the OpenVINO runtime along each axis of length ``L``: a coordinate
below -1 or above ``L`` reads nothing (weight 0), a negative one is clamped to 0, and one at or
past ``L - 1`` reads element ``L - 1`` alone; otherwise it reads elements ``floor(v)`` and
``floor(v) + 1`` with weights ``1 - frac(v)`` and ``frac(v)``.  The 2-D weights are products of
the per-axis ones.  Integer decisions (floors, clamps) carry no derivative; the weights are
differentiable in the coordinates.
"""

from __future__ import annotations

import itertools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import roi_numerics as numerics
from jaxpool._src.roi_frame import read


def axis_corners(coord: jax.Array, length: int) -> tuple[jax.Array, jax.Array]:
    """The two elements and weights a bilinear sample at ``coord`` reads along one axis.

    Returns ``(index, weight)``, each of shape ``coord.shape + (2,)``, by the runtime's rule
    (module docstring).  The weights are differentiable in ``coord``.
    """
    inside = (coord >= -1) & (coord <= length)
    v = jnp.maximum(coord, 0)
    low = jnp.floor(lax.stop_gradient(v))
    edge = low >= length - 1
    low = jnp.where(edge, length - 1, low)
    v = jnp.where(edge, low, v)
    frac = v - low
    low_i = jnp.where(inside, low, 0).astype(np.int32)
    high_i = jnp.where(edge | ~inside, low_i, low_i + 1)
    zero = jnp.zeros_like(frac)
    weight = jnp.stack([jnp.where(inside, 1 - frac, zero), jnp.where(inside, frac, zero)], -1)
    return jnp.stack([low_i, high_i], -1), weight


def bilinear_samples(
    xt: jax.Array,
    lead: tuple[Any, ...],
    y_index: jax.Array,
    y_weight: jax.Array,
    x_index: jax.Array,
    x_weight: jax.Array,
    *,
    one_read: bool = False,
    largest: bool = False,
) -> jax.Array:
    """The values of bilinear samples of channels-last ``xt``, shape ``(*samples, C)``.

    ``lead`` indexes the axes before the rows and columns of ``xt`` (the batch index, ...) and
    broadcasts to ``samples``; ``y_index``/``y_weight`` have shape ``(*samples, 2)`` (or
    broadcast to it), as ``x_index``/``x_weight``.  A sample's value is the sum over its four
    corners of the weight products times the features, in the dtype of the weights.  With
    ``one_read``, the four corners are read by one gather (whose transpose is one scatter).
    With ``largest``, it is instead the largest of the four weighted terms (ONNX Runtime's
    RoiAlign max), taken as that runtime takes it: corners in row-major order, each replacing
    the running value only where strictly larger, so that a NaN term counts only where it is
    the first.
    """
    if one_read:
        values = read(
            xt, *(i[..., None, None] for i in lead), y_index[..., :, None], x_index[..., None, :]
        )
        weight = y_weight[..., :, None] * x_weight[..., None, :]
        return (weight[..., None] * values.astype(weight.dtype)).sum((-3, -2))
    total = None
    # One read per corner, weighted and added elementwise: XLA fuses the reads and their sum
    # into one loop, where a stacked read would be written out as many times larger.
    for a, b in itertools.product(range(y_index.shape[-1]), range(x_index.shape[-1])):
        weight = (y_weight[..., a] * x_weight[..., b])[..., None]
        term = weight * read(xt, *lead, y_index[..., a], x_index[..., b]).astype(weight.dtype)
        if total is None:
            total = term
        elif largest:
            total = jnp.where(term > total, term, total)
        else:
            total = total + term
    assert total is not None
    return total


def sample_points(
    start: jax.Array, end: jax.Array, count: int, length: int, *, last_at_end: bool = False
) -> tuple[jax.Array, jax.Array]:
    """The corners and weights of OpenVINO's bilinear points along one axis of ``length``
    elements (ROIPooling's and PSROIPooling's bilinear modes), ``start.shape + (count, 2)``.

    ``start`` and ``end`` are normalised coordinates (``[0, 1]`` spans the map).  Point ``i`` of
    ``count`` lies at ``start * (L - 1) + i * (end - start) * (L - 1) / (count - 1)``, with
    ``last_at_end`` the last one at ``end * (L - 1)`` (ROIPooling's runtime places it there, not
    at the rounded sum); a single point lies at the centre, ``(start + end) / 2 * (L - 1)``.
    A point outside ``[0, L - 1]`` reads nothing (its weights are 0).
    """
    if count > 1:
        step = numerics.divide((end - start) * (length - 1), count - 1)
        i = np.arange(count, dtype=start.dtype)
        first = numerics.product(start, length - 1)[..., None]
        point = numerics.product(i, step[..., None]) + first
        if last_at_end:
            point = point.at[..., -1].set(end * (length - 1))
    else:
        point = (0.5 * (start + end) * (length - 1))[..., None]
    on_map = (point >= 0) & (point <= length - 1)
    index, weight = axis_corners(point, length)
    return index, weight * on_map[..., None].astype(weight.dtype)
