"""LpPool-18 (ONNX): the p-norm of every sliding window."""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import batch_axes, dispatch, exporting
from jaxpool._src import taps as taps_lib
from jaxpool._src import window as window_lib
from jaxpool._src.averaging import accumulator_dtype
from jaxpool._src.window import Window


def _tap_sum(a: jax.Array, window: Window) -> jax.Array:
    """The window sums as a fused chain of ``+`` over the tap views (padding adds 0); its
    transpose pads and adds the strided cotangents in one fused loop."""
    return taps_lib.fold(a, window, lax.add, 0)


def _reduce_window_sum(a: jax.Array, window: Window) -> jax.Array:
    """The window sums by XLA's ``reduce_window``, which a GPU runs at its memory floor."""
    return taps_lib.reduce_window(a, window, 0, lax.add)


def _window_sum(a: jax.Array, window: Window) -> jax.Array:
    return dispatch.run("lp_pool", _reduce_window_sum, a, window)


def _abs_pow(x: jax.Array, p: float) -> jax.Array:
    """``|x|**p``; integer powers as products, not through ``exp`` and ``log``."""
    if p == 1:
        return jnp.abs(x)
    if p.is_integer():
        return lax.integer_pow(x if p % 2 == 0 else jnp.abs(x), int(p))
    return jnp.power(jnp.abs(x), p)


def _root(s: jax.Array, p: float) -> jax.Array:
    """``s**(1/p)`` for the non-negative window sums ``s``."""
    if p == 1:
        return s
    if p == 2:
        return jnp.sqrt(s)
    return jnp.power(s, 1 / p)


def _sign_abs_pow(x: jax.Array, p: float) -> jax.Array:
    """``sign(x) * |x|**(p - 1)``, the derivative of ``|x|**p / p``, taken as 0 at ``x = 0``
    (also for ``p < 1``, where it is unbounded near 0), so that no gradient is infinite."""
    if p == 1:
        return jnp.sign(x)
    if p.is_integer():
        return x if p == 2 else x * lax.integer_pow(jnp.abs(x), int(p) - 2)
    zero = x == 0
    magnitude = jnp.power(jnp.where(zero, jnp.ones_like(x), jnp.abs(x)), p - 1)
    return jnp.where(zero, jnp.zeros_like(x), jnp.sign(x) * magnitude)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def _norms(x: jax.Array, window: Window, p: float) -> jax.Array:
    return _root(_window_sum(_abs_pow(x, p), window), p)


@_norms.defjvp
def _norms_jvp(window: Window, p: float, primals, tangents):
    # d(s**(1/p)) = s**(1/p - 1) * window_sum(sign(x) * |x|**(p - 1) * x_dot): linear in x_dot,
    # through the tap chain, whose transpose needs no scatter.  Where the window's norm is 0
    # the derivative is taken as 0 (the norm is not differentiable there), so it stays finite.
    (x,), (x_dot,) = primals, tangents
    s = _window_sum(_abs_pow(x, p), window)
    y = _root(s, p)
    # s**(1/p - 1) divides, as its inverse s / y (inf where s = 0): XLA counts a division as
    # expensive, so the gradient divides the cotangents in a loop of their own rather than in
    # its loop over the input, where each window's sum would be recomputed for every element
    # that reads it.
    positive = s > 0
    inverse_scale = jnp.where(positive, s / jnp.where(positive, y, jnp.ones_like(y)), jnp.inf)
    return y, _tap_sum(_sign_abs_pow(x, p) * x_dot, window) / inverse_scale.astype(s.dtype)


@functools.partial(jax.jit, static_argnames=("window", "p"))
def _lp_pool(x: jax.Array, window: Window, p: float) -> jax.Array:
    if next(taps_lib.taps(window), None) is None:  # every window lies in the padding
        return jnp.zeros(window.out_shape, x.dtype)
    return _norms(x.astype(accumulator_dtype(x.dtype)), window, p).astype(x.dtype)


def _check_p(p: Any) -> float:
    if isinstance(p, jax.core.Tracer):
        raise TypeError(
            f"`p` must be a static Python int or float, got a traced value {p!r}; mark it "
            "static (e.g. `static_argnames`) or pass a constant."
        )
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise TypeError(f"`p` must be a positive int or float, got {p!r}.")
    value = float(p)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"`p` (={p!r}) must be a positive, finite int or float.")
    return value


@batch_axes.merges_batch_axes("kernel")
@exporting.exportable
def lp_pool(
    x: jax.typing.ArrayLike,
    kernel: Any,
    strides: Any = None,
    pads_begin: Any = None,
    pads_end: Any = None,
    *,
    p: float = 2,
    dilations: Any = None,
    rounding_type: str = "floor",
    auto_pad: str = "explicit",
    data_format: str = "NCX",
) -> jax.Array:
    """Lp pooling as ONNX LpPool-18: the p-norm of every sliding window.

    For every output position ``o`` the window holds ``x[o * strides + k * dilations -
    pads_begin]`` for each kernel offset ``0 <= k < kernel``; positions outside the input add
    nothing::

        y[n, c, o] = (sum_k |x[n, c, o * strides + k * dilations - pads_begin]|**p)**(1 / p)

    A window with no input element gives 0.  Output sizes follow the same rules as
    :func:`max_pool` (ONNX's ``ceil_mode`` is ``rounding_type="ceil_torch"``).  PyTorch's
    ``lp_pool*d`` gives the same values where ``x`` is non-negative and no window is partial:
    it takes no absolute value, and scales a partial ``ceil_mode`` window like an average.

    Floating inputs of 16 bits sum in float32.  The derivative is
    ``y**(1 - p) * sum_k sign(x) * |x|**(p - 1) * x_dot``, taken as 0 where the window's norm
    is 0 (and the factor ``|x|**(p - 1)`` as 0 where ``x`` is 0), so the gradient is finite
    everywhere.

    Args:
      x: input of shape ``[N, C, *spatial]`` (``NCX``) or ``[N, *spatial, C]`` (``NXC``), with
        1 to 3 spatial axes; a floating dtype.
        In ``NXC`` with a sequence ``kernel``, also ``[*spatial, C]`` or ``[B1, B2, ...,
        *spatial, C]``, pooled as one batch axis ``B1 * B2 * ...`` (Flax's batch axes).
      kernel: window size, an int or one per spatial axis.
      strides: window step; ``None`` means ``kernel``.
      pads_begin, pads_end: padding at the start/end of each spatial axis (default 0).
      p: the norm's exponent, a positive int or float (static).
      dilations: the step between the taps of a window (default 1).
      rounding_type: ``"floor"``, ``"ceil"`` or ``"ceil_torch"``.
      auto_pad: ``"explicit"``, ``"valid"``, ``"same_upper"`` or ``"same_lower"``.
      data_format: ``"NCX"`` or ``"NXC"``.

    Returns:
      ``y`` of the pooled shape, with the dtype of ``x``.

    Raises:
      ValueError: for a non-positive ``p``, and the window errors of :func:`max_pool`.
      TypeError: for an integer ``x`` or a ``p`` that is not a number.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.array([[[3.0, -4.0, 1.0, 0.0]]])
      >>> jaxpool.lp_pool(x, 2)[0, 0].tolist()
      [5.0, 1.0]
      >>> jaxpool.lp_pool(x, 2, p=1)[0, 0].tolist()
      [7.0, 1.0]
    """
    x = jnp.asarray(x)
    window_lib.check_input("x", x.shape, x.dtype)
    if not jax.dtypes.issubdtype(x.dtype, np.floating):
        raise TypeError(f"`x` must have a floating dtype, got {x.dtype}.")
    p_value = _check_p(p)
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
    return _lp_pool(x, window, p_value)
