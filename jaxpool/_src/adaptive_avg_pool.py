"""AdaptiveAvgPool-8: the average over each adaptive bin.

The bins (:mod:`bins`) are boxes, so the sums reduce in one chain over the taps of small bins,
else one pooled axis at a time (global pooling: one reduction over the spatial axes), and the
average divides once by the static bin volumes.  Where the bins tile an axis, its sum is a chain
over the taps of narrow bins or a reshape for wide ones; elsewhere the value gathers bin
elements (exact, infinities included) and the derivative is the product with the bin matrix,
whose transpose, the gradient, needs no scatter.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import averaging, batch_axes, dispatch, exporting
from jaxpool._src import bins as bins_lib
from jaxpool._src import window as window_lib
from jaxpool._src.window import AdaptiveWindow


@averaging.differentiates_as(bins_lib.matrix_product)
def _sum_bins_linear(a: jax.Array, axis: int, length: int, out: int) -> jax.Array:
    """:func:`bins.sum_bins` for bins that do not tile the axis, differentiated as the
    product with the bin matrix."""
    return bins_lib.sum_bins(a, axis, length, out)


def _sums(a: jax.Array, window: AdaptiveWindow) -> jax.Array:
    """The portable program of the bin sums: for small bins, one chain of ``+`` over the
    taps of all axes (the adaptive argmax scan's reads, a repeated element masked by a
    select, as ``0 * inf`` would be NaN); else :func:`bins.sums_by_axis`."""
    if window.is_global or not bins_lib.is_joint(window):
        return bins_lib.sums_by_axis(a, window)
    zero = jnp.zeros((), a.dtype)
    terms = (
        v if real.all() else jnp.where(real, v, zero)
        for v, _, real in bins_lib.joint_taps(a, window)
    )
    return functools.reduce(lax.add, terms)


def _sums_linear(a_dot: jax.Array, window: AdaptiveWindow) -> jax.Array:
    """The derivative of the bin sums: :func:`bins.sums_by_axis`' own derivative, with bins
    that do not tile an axis a product with the bin matrix (no gather, so its transpose, the
    gradient, has no scatter)."""
    sums = functools.partial(bins_lib.sums_by_axis, window=window, untiled=_sum_bins_linear)
    return jax.jvp(sums, (a_dot,), (a_dot,))[1]


@averaging.differentiates_as(_sums_linear)
def _bin_sums(a: jax.Array, window: AdaptiveWindow) -> jax.Array:
    """The bin sums, differentiated in the per-axis form on every platform."""
    return dispatch.run("adaptive_avg_pool", _sums, a, window)


@functools.partial(jax.jit, static_argnames=("window",))
def _adaptive_avg_pool(x: jax.Array, window: AdaptiveWindow) -> jax.Array:
    total = _bin_sums(x.astype(averaging.accumulator_dtype(x.dtype)), window)
    rank = total.ndim
    divisor = np.ones([1] * rank, np.int64)
    for _, axis, length, out in bins_lib.pooled_axes(window):
        starts, ends = bins_lib.bounds(length, out)
        divisor = divisor * bins_lib.along(ends - starts, axis, rank)
    return averaging.divide(total, divisor, x.dtype)


@batch_axes.merges_batch_axes("output_size")
@exporting.exportable
def adaptive_avg_pool(
    x: jax.typing.ArrayLike,
    output_size: Any,
    *,
    data_format: str = "NCX",
) -> jax.Array:
    """Adaptive average pooling as OpenVINO AdaptiveAvgPool-8.

    Along a spatial axis of input size ``L`` and output size ``O``, output ``i`` averages the
    bin ``[floor(i * L / O), ceil((i + 1) * L / O))``; the bins of all axes form a box::

        y[n, c, i, j] = sum x[n, c, h_start(i):h_end(i), w_start(j):w_end(j)]
                        / ((h_end(i) - h_start(i)) * (w_end(j) - w_start(j)))

    Floating inputs of 16 bits sum in float32 (float32 sums at ``Precision.HIGHEST``); integer
    inputs sum exactly and round the quotient half to even, as the OpenVINO CPU runtime does
    (the specification lists floating types only).  To an output of size 1 on every axis the
    CPU runtime instead truncates toward zero, and sums int8/uint8 in their own type,
    saturating; we round there too.

    Args:
      x: input of shape ``[N, C, *spatial]`` (``NCX``) or ``[N, *spatial, C]`` (``NXC``), with
        1 to 3 spatial axes; a floating or integer dtype.
        In ``NXC`` with a sequence ``output_size``, also ``[*spatial, C]`` or ``[B1, B2, ...,
        *spatial, C]``, pooled as one batch axis ``B1 * B2 * ...`` (Flax's batch axes).
      output_size: the output spatial size, an int or one entry per spatial axis; ``None``
        keeps that axis' input size.  It may exceed the input size.
      data_format: ``"NCX"`` or ``"NXC"``.

    Returns:
      ``y`` of shape ``[N, C, *output_size]`` (or its NXC form) with the dtype of ``x``.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(5.0).reshape(1, 1, 5)
      >>> jaxpool.adaptive_avg_pool(x, 3)[0, 0].tolist()
      [0.5, 2.0, 3.5]
    """
    x = jnp.asarray(x)
    window_lib.check_input("x", x.shape, x.dtype)
    window = window_lib.make_adaptive_window(x.shape, output_size, data_format)
    return _adaptive_avg_pool(x, window)
