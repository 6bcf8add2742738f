"""AvgPool-1/-14: sliding-window average with OpenVINO's divisor rule."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import batch_axes, dispatch, exporting
from jaxpool._src import taps as taps_lib
from jaxpool._src import window as window_lib
from jaxpool._src.averaging import (
    INTEGER_DIVISIONS,
    accumulator_dtype,
    differentiates_as,
    divide,
)
from jaxpool._src.window import Window

DIVISOR_RULES = ("kernel", "padded_input")


def _divisors(
    window: Window, exclude_pad: bool, divisor_rule: str, divisor_override: int | None
) -> np.ndarray:
    """Per output position, the number of kernel positions the average divides by.

    With ``exclude_pad=True`` the taps that read the input count (with ``dilations``, the taps
    spread ``dilations`` apart, not the elements they span).  With ``exclude_pad=False``,
    ``divisor_rule="kernel"`` counts every kernel position once any pad is in force, also those
    past ``pads_end`` in ceil mode, and ``"padded_input"`` counts the taps inside the padded
    input.  Without pads both count the taps that read the input.  ``divisor_override``
    replaces the count.  The count is a product over the spatial axes, broadcast against the
    output.
    """
    rank = len(window.shape)
    if divisor_override is not None:
        return np.full([1] * rank, divisor_override, np.int64)
    padded = any(window.pads_begin) or any(window.pads_end)
    full = padded and not exclude_pad and divisor_rule == "kernel"
    divisor = np.ones([1] * rank, np.int64)
    for i in range(window.nd):
        o = np.arange(window.out_spatial[i])
        start = o * window.strides[i] - window.pads_begin[i]
        if full:
            count = np.full(o.shape, window.kernel[i])
        else:
            lo, hi = 0, window.in_spatial[i]
            if not exclude_pad:
                lo, hi = -window.pads_begin[i], hi + window.pads_end[i]
            tap = start[:, None] + np.arange(window.kernel[i]) * window.dilations[i]
            count = ((tap >= lo) & (tap < hi)).sum(axis=1)
        divisor = divisor * taps_lib.broadcast_axis(count, window, i, rank)
    return divisor


def _tap_sum(x: jax.Array, window: Window) -> jax.Array:
    """The window sums as a fused chain of ``+`` over the tap views (padding adds 0); its
    transpose pads and adds the strided cotangents in one fused loop."""
    return taps_lib.fold(x, window, lax.add, 0)


def _reduce_window_sum(x: jax.Array, window: Window) -> jax.Array:
    """The window sums by XLA's ``reduce_window``, which a GPU runs at its memory floor."""
    return taps_lib.reduce_window(x, window, 0, lax.add)


@differentiates_as(_tap_sum)
def _window_sum(x: jax.Array, window: Window) -> jax.Array:
    """The window sums, differentiated as the tap chain on every platform."""
    return dispatch.run("avg_pool", _reduce_window_sum, x, window)


@functools.partial(
    jax.jit,
    static_argnames=(
        "window",
        "exclude_pad",
        "divisor_rule",
        "divisor_override",
        "integer_division",
    ),
)
def _avg_pool(
    x: jax.Array,
    window: Window,
    exclude_pad: bool,
    divisor_rule: str,
    divisor_override: int | None,
    integer_division: str,
) -> jax.Array:
    if next(taps_lib.taps(window), None) is None:  # every window lies in the padding
        return jnp.zeros(window.out_shape, x.dtype)
    total = _window_sum(x.astype(accumulator_dtype(x.dtype)), window)
    divisor = _divisors(window, exclude_pad, divisor_rule, divisor_override)
    return divide(total, divisor, x.dtype, integer_division)


@batch_axes.merges_batch_axes("kernel")
@exporting.exportable
def avg_pool(
    x: jax.typing.ArrayLike,
    kernel: Any,
    strides: Any = None,
    pads_begin: Any = None,
    pads_end: Any = None,
    *,
    exclude_pad: bool = False,
    dilations: Any = None,
    rounding_type: str = "floor",
    auto_pad: str = "explicit",
    data_format: str = "NCX",
    divisor_rule: str = "kernel",
    divisor_override: int | None = None,
    integer_division: str = "round",
) -> jax.Array:
    """Average pooling as OpenVINO AvgPool-1/-14, with ONNX AveragePool-19's ``dilations``.

    For every output position ``o`` the window is ``x[o * strides + k * dilations -
    pads_begin]`` for each kernel offset ``0 <= k < kernel``; positions outside the input
    add 0::

        y[n, c, o] = sum_k x[n, c, o * strides + k * dilations - pads_begin] / divisor(o)

    The divisor follows the OpenVINO runtime: with ``exclude_pad=False`` and any non-zero pad
    in force (on any axis, after ``auto_pad``) it is ``prod(kernel)`` for every window, also
    for windows that reach past ``pads_end`` in ceil mode; otherwise (``exclude_pad=True``, or
    no pads at all) it is the number of taps of the window that read the input (with
    dilations, the taps, not the elements between them).  ONNX AveragePool counts differently
    only for a ceil-mode window that reaches past ``pads_end`` with ``count_include_pad=1``
    (it counts the taps inside the padded input); :func:`jaxpool.onnx.node` reproduces that.
    ``divisor_rule="padded_input"`` is that rule, PyTorch's ``count_include_pad=True``: with
    ``exclude_pad=False`` the divisor is the number of taps inside the padded input, on every
    axis (an axis without pads counts its input elements only).  ``divisor_override`` (a
    positive int) divides every window's sum by itself instead (PyTorch's
    ``divisor_override``).
    A window with no input element and ``exclude_pad=True`` gives 0 (the CPU plugin gives NaN
    or -0 there, and refuses pads as large as the kernel).  Output sizes follow the same rules
    as :func:`max_pool`.

    Floating inputs of 16 bits sum in float32; integer inputs sum in the widest enabled
    integer type (int64 with ``jax_enable_x64``, else int32, where sums beyond its range wrap
    as in the runtime) and round the exact quotient half to even
    (``integer_division="round"``), or toward zero (``"truncate"``: PyTorch's integer
    average).

    Args:
      x: input of shape ``[N, C, *spatial]`` (``NCX``) or ``[N, *spatial, C]`` (``NXC``), with
        1 to 3 spatial axes; a floating or integer dtype.
        In ``NXC`` with a sequence ``kernel``, also ``[*spatial, C]`` or ``[B1, B2, ...,
        *spatial, C]``, pooled as one batch axis ``B1 * B2 * ...`` (Flax's batch axes).
      kernel: window size, an int or one per spatial axis.
      strides: window step; ``None`` means ``kernel``.
      pads_begin, pads_end: padding at the start/end of each spatial axis (default 0).
      exclude_pad: divide by the number of input elements only.
      dilations: the step between the taps of a window, an int or one per spatial axis
        (default 1).
      rounding_type: ``"floor"``, ``"ceil"`` or ``"ceil_torch"``.
      auto_pad: ``"explicit"``, ``"valid"``, ``"same_upper"`` or ``"same_lower"``.
      data_format: ``"NCX"`` or ``"NXC"``.
      divisor_rule: with ``exclude_pad=False``, ``"kernel"`` (every kernel position counts
        once any pad is in force: OpenVINO's rule) or ``"padded_input"`` (the taps inside the
        padded input count: PyTorch's and ONNX's rule).
      divisor_override: ``None``, or a positive int that divides every window's sum.
      integer_division: for integer inputs, ``"round"`` (half to even) or ``"truncate"``
        (toward zero).

    Returns:
      ``y`` of the pooled shape, with the dtype of ``x``.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
      >>> v = jnp.arange(4.0).reshape(1, 1, 4)
      >>> jaxpool.avg_pool(v, 3, 2, 1, 1, rounding_type="ceil")[0, 0].tolist()
      [0.3333333432674408, 2.0, 1.0]
      >>> jaxpool.avg_pool(v, 3, 2, 1, 1, rounding_type="ceil", divisor_rule="padded_input")[
      ...     0, 0
      ... ].tolist()
      [0.3333333432674408, 2.0, 1.5]
      >>> jaxpool.avg_pool(x, 2, divisor_override=2)[0, 0].tolist()
      [[5.0, 9.0], [21.0, 25.0]]
      >>> jaxpool.avg_pool(x, 2)[0, 0].tolist()
      [[2.5, 4.5], [10.5, 12.5]]
      >>> jaxpool.avg_pool(x, 2, 1, 1, 0, exclude_pad=True)[0, 0, 0].tolist()
      [0.0, 0.5, 1.5, 2.5]
      >>> jaxpool.avg_pool(x, 2, 1, dilations=2)[0, 0].tolist()  # taps 2 apart
      [[5.0, 6.0], [9.0, 10.0]]
    """
    x = jnp.asarray(x)
    window = window_lib.sliding_window(
        x,
        kernel,
        strides,
        pads_begin,
        pads_end,
        dilations,
        rounding_type=rounding_type,
        auto_pad=auto_pad,
        data_format=data_format,
    )
    if not isinstance(exclude_pad, (bool, np.bool_)):
        raise TypeError(f"`exclude_pad` must be a bool, got {exclude_pad!r}.")
    divisor_rule = window_lib.choice("divisor_rule", divisor_rule, DIVISOR_RULES)
    if divisor_override is not None:
        divisor_override = window_lib.static_int("divisor_override", divisor_override)
        if divisor_override < 1:
            raise ValueError(f"`divisor_override` (={divisor_override}) must be positive.")
    integer_division = window_lib.choice("integer_division", integer_division, INTEGER_DIVISIONS)
    return _avg_pool(x, window, bool(exclude_pad), divisor_rule, divisor_override, integer_division)
