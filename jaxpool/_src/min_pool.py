"""Min pooling: the max pool of the order-reversed input, as Flax's ``min_pool`` completes
its set of pools."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import jax
import jax.numpy as jnp

from jaxpool._src import arguments
from jaxpool._src.max_pool import max_pool


def _reversed(x: jax.Array) -> jax.Array:
    """An order-reversing bijection of ``x``'s dtype, its own inverse: ``-x`` for floats
    (exact, NaN stays NaN, the gradient is negated), ``~x`` for integers (``-x`` overflows
    at the type's minimum, ``~x = -x - 1`` never does)."""
    if jnp.issubdtype(x.dtype, jnp.integer):
        return jnp.invert(x)
    return -x


P = ParamSpec("P")
R = TypeVar("R")


def _taking_the_arguments_of(
    function: Callable[P, Any],
) -> Callable[[Callable[..., R]], Callable[P, R]]:
    """Gives the decorated op the parameters of ``function``, as ``inspect`` (``help``, the API
    pages) and type checkers see them, and keeps its return type."""

    def decorate(op: Callable[..., R]) -> Callable[P, R]:
        returns = inspect.signature(op).return_annotation
        signature = inspect.signature(function).replace(return_annotation=returns)
        op.__signature__ = signature  # type: ignore[attr-defined]
        return op

    return decorate


@_taking_the_arguments_of(max_pool)
def min_pool(
    x: jax.typing.ArrayLike, *args: Any, **options: Any
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Min pooling, ``-max_pool(-x)``, with optional argmin indices (``flax.linen.min_pool``
    with :func:`max_pool`'s attributes).

    ::

        y[n, c, o] = min_k x[n, c, o * strides + k * dilations - pads_begin]

    The windows, output sizes, index convention and errors are :func:`max_pool`'s (its
    ``data_format="NXC"`` with a sequence ``kernel`` takes any number of leading batch axes, as
    Flax's pools do).  Positions in the padding count as ``+inf`` (the type's maximum for
    integers, whose order is reversed by ``~x`` rather than ``-x``, which overflows); a window
    with no input element gives that value, its plane's first index and no gradient.  Ties
    give the first minimum in row-major window order and NaN propagates (the first NaN wins).
    The gradient flows to the argmin, exactly as :func:`max_pool`'s to the argmax.

    Args:
      x: input of shape ``[N, C, *spatial]`` (``NCX``) or ``[N, *spatial, C]`` (``NXC``), with
        1 to 3 spatial axes; a floating or integer dtype.
      kernel, strides, pads_begin, pads_end, dilations: the window, as for :func:`max_pool`.
      rounding_type, auto_pad, data_format: as for :func:`max_pool`.
      return_indices, index_element_type, axis: the indices, as for :func:`max_pool`.

    Returns:
      ``y`` with the dtype of ``x``, or ``(y, indices)``, the indices of the minima.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
      >>> y, i = jaxpool.min_pool(x, 2, return_indices=True)
      >>> y[0, 0].tolist(), i[0, 0].tolist()
      ([[0.0, 2.0], [8.0, 10.0]], [[0, 2], [8, 10]])
    """
    arguments.check_numeric("x", x)
    x = jnp.asarray(x)
    if not (jnp.issubdtype(x.dtype, jnp.floating) or jnp.issubdtype(x.dtype, jnp.integer)):
        raise TypeError(f"`x` must have a floating or integer dtype, got {x.dtype}.")
    out = max_pool(_reversed(x), *args, **options)
    if isinstance(out, tuple):
        return _reversed(out[0]), out[1]
    return _reversed(out)
