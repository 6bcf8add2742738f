"""The arithmetic of the ROI family's box coordinates, rounded as the runtimes round it.

The runtimes decide bins, sample counts and clamps from float32 (or float64) quotients and
products, each correctly rounded, and round box corners half away from zero; one unit in the
last place moves a bin's edge by an element.  These helpers give those roundings on every
backend: XLA's own division and its fused multiply-adds do not.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import exact


def compute_dtype(x_dtype: Any, rois_dtype: Any) -> np.dtype:
    """The dtype coordinates, weights and sums are computed in: float32 for 16-bit inputs."""
    dtype = np.promote_types(np.dtype(x_dtype), np.dtype(rois_dtype))
    if dtype.itemsize < 4:
        return np.dtype(np.float32)
    return dtype


def divide(a: jax.Array, d: Any) -> jax.Array:
    """``a / d``, correctly rounded, for a static scalar ``d``.

    The runtimes' bins are decided by correctly rounded quotients.  float32 is divided by
    :func:`jaxpool._src.exact.divide`'s integer program (XLA's GPU backend divides float32
    within two units in the last place, its CPU backend by a constant through its approximate
    reciprocal: 7 / 3 gives 2.3333335).  A float64 division is correctly rounded on an
    accelerator; on a CPU, dividing by an array of ``a``'s shape that XLA cannot fold keeps it
    so.  The array is built from ``a``'s own bits (which cancel through a barrier) so that it
    has ``a``'s shape under ``vmap`` too: a divisor made without ``a`` would be broadcast over
    the batch axis, and the broadcast divided through a reciprocal again.
    """
    a = jnp.asarray(a)
    if a.dtype == np.float32:
        return exact.divide(a, d)
    unsigned = np.dtype(f"uint{8 * a.dtype.itemsize}")
    bits = lax.bitcast_convert_type(lax.stop_gradient(a), unsigned)
    zero = lax.optimization_barrier(bits) ^ bits
    full = lax.bitcast_convert_type(zero | np.asarray(d, a.dtype).view(unsigned), a.dtype)
    return a / full


def product(a: Any, b: Any) -> jax.Array:
    """``a * b`` rounded to its dtype before any later sum.

    XLA:CPU contracts ``c + a * b`` into a fused multiply-add, which skips the product's
    rounding: ``-1 + 3 * fl(1 / 3)`` gives ``3e-8`` instead of 0, and its ceil moves a bin's
    edge.  The runtime rounds each product.  A select between the product and 0 (taken only
    for a NaN product) stands between the multiply and the add, so none is contracted.
    """
    a, b = jnp.asarray(a), jnp.asarray(b)
    rank = max(a.ndim, b.ndim)
    p = jnp.multiply(
        a.reshape((1,) * (rank - a.ndim) + a.shape), b.reshape((1,) * (rank - b.ndim) + b.shape)
    )
    return jnp.where(p == p, p, jnp.zeros_like(p))


def round_half_away(v: jax.Array) -> jax.Array:
    """``roundf``, halves away from zero (``jnp.round`` rounds them to even), with no
    derivative.  ``v - trunc(v)`` is exact, where ``floor(|v| + 0.5)`` rounds the sum first
    (0.49999997 + 0.5 is 1 in float32)."""
    v = lax.stop_gradient(v)
    whole = jnp.trunc(v)
    return jnp.where(jnp.abs(v - whole) >= 0.5, whole + jnp.sign(v), whole)


def as_dtype(value: Any, dtype: Any) -> Any:
    """A static int as is, an array in ``dtype``."""
    return value if isinstance(value, int) else value.astype(dtype)


def per_box(value: Any, rank: int) -> Any:
    """A static int as is, or an array of one value per box with ``rank - 1`` axes added."""
    if isinstance(value, int):
        return value
    return value.reshape(value.shape + (1,) * (rank - 1))
