"""The numeric policy of averages, shared by ``avg_pool`` and ``adaptive_avg_pool``.

16-bit floats sum in float32 and integers in the widest integer type; the quotient comes back
in the input's dtype, integers rounded half to even.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def accumulator_dtype(dtype: Any) -> np.dtype:
    """The dtype an average sums in: float32 for 16-bit floats, the widest int for integers."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer):
        wide = np.int64 if jax.config.jax_enable_x64 else np.int32
        return np.dtype(wide)
    if dtype.itemsize < 4:
        return np.dtype(np.float32)
    return dtype


def divide(total: jax.Array, divisor: np.ndarray, dtype: np.dtype) -> jax.Array:
    """``total / divisor`` in ``dtype``; ``divisor`` is a static array of non-negative ints.

    A zero divisor (a window with no element to count, whose ``total`` is 0) gives 0.  Floats
    multiply by the reciprocal in the accumulator's precision; integers round the exact
    quotient half to even, as the OpenVINO CPU runtime does.
    """
    if np.issubdtype(dtype, np.integer):
        d = np.maximum(divisor, 1).astype(total.dtype)
        if np.all(d == 1):
            return total.astype(dtype)
        q = jnp.floor_divide(total, d)
        twice_r = (total - q * d) * 2
        up = (twice_r > d) | ((twice_r == d) & (lax.rem(q, np.asarray(2, q.dtype)) != 0))
        return (q + up.astype(q.dtype)).astype(dtype)
    recip = np.where(divisor > 0, 1.0 / np.maximum(divisor, 1), 0.0).astype(total.dtype)
    if np.all(recip == recip.flat[0]):
        recip = recip.flat[0]
    return (total * recip).astype(dtype)
