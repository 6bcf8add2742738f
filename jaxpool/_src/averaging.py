"""The numeric policy of averages, shared by ``avg_pool`` and ``adaptive_avg_pool``.

16-bit floats sum in float32 and integers in the widest integer type; the quotient comes back
in the input's dtype, integers rounded half to even.  Their sums are linear maps computed in
the fastest form, and differentiate through another form of the same map
(:func:`differentiates_as`) whose transpose, the gradient, needs no scatter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import indices as indices_lib


def accumulator_dtype(dtype: Any) -> np.dtype:
    """The dtype an average sums in: float32 for 16-bit floats, the widest int for integers."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer):
        wide = np.int64 if indices_lib.x64_enabled() else np.int32
        return np.dtype(wide)
    if dtype.itemsize < 4:
        return np.dtype(np.float32)
    return dtype


INTEGER_DIVISIONS = ("round", "truncate")


def divide(
    total: jax.Array, divisor: np.ndarray, dtype: np.dtype, integer_division: str = "round"
) -> jax.Array:
    """``total / divisor`` in ``dtype``; ``divisor`` is a static array of non-negative ints.

    A zero divisor (a window with no element to count, whose ``total`` is 0) gives 0.  Floats
    multiply by the reciprocal in the accumulator's precision; integers round the exact
    quotient half to even (``integer_division="round"``, as the OpenVINO CPU runtime does) or
    toward zero (``"truncate"``, C's integer division, as PyTorch's CPU kernels do).
    """
    if np.issubdtype(dtype, np.integer):
        d = np.maximum(divisor, 1).astype(total.dtype)
        if np.all(d == 1):
            return total.astype(dtype)
        if integer_division == "truncate":
            return lax.div(total, jnp.broadcast_to(d, total.shape)).astype(dtype)
        q = jnp.floor_divide(total, d)
        twice_r = (total - q * d) * 2
        up = (twice_r > d) | ((twice_r == d) & (lax.rem(q, np.asarray(2, q.dtype)) != 0))
        return (q + up.astype(q.dtype)).astype(dtype)
    recip = np.where(divisor > 0, 1.0 / np.maximum(divisor, 1), 0.0).astype(total.dtype)
    if np.all(recip == recip.flat[0]):
        recip = recip.flat[0]
    return (total * recip).astype(dtype)


def differentiates_as(derivative: Callable[..., jax.Array]):
    """Makes ``f(a, *static)``, linear in ``a``, differentiate as ``derivative(a_dot, *static)``:
    the same linear map, in a form whose transpose is fast.  ``static`` are hashable
    non-array arguments; integer inputs get a zero (``float0``) tangent."""

    def decorate(f):
        static = tuple(range(1, f.__code__.co_argcount))
        g = jax.custom_jvp(f, nondiff_argnums=static)

        def jvp(*args):
            *attrs, (a,), (a_dot,) = args
            y = g(a, *attrs)
            if a_dot.dtype == jax.dtypes.float0:
                return y, np.zeros(y.shape, jax.dtypes.float0)
            return y, derivative(a_dot, *attrs)

        g.defjvp(jvp)
        return g

    return decorate
