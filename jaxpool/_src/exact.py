"""Correctly rounded float32 division by a static scalar, by the same integer program on every
backend.

The ROI ops' bins are decided by correctly rounded quotients (``floor(i * (span / out))``,
``ceil(bin size)``, ...), as the runtimes compute them.  XLA's GPU backend divides float32
numbers with PTX's ``div.full`` (an error of up to two units in the last place), and its CPU
backend divides by a constant through its approximate reciprocal: either moves a bin's edge
by a whole element where the exact quotient is an integer.  :func:`divide` computes the
quotient of the significands by long division in 32-bit integers, then rounds it to nearest,
ties to even: integer operations, exact everywhere.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

_STEPS = 27  # quotient bits: 26 or 27 significant ones, 24 kept, the rest round


def _significand(d: float) -> tuple[int, int]:
    """``(m, e)`` with ``d == m * 2**e`` and ``2**23 <= m < 2**24``, for a finite ``d > 0``."""
    fraction, exponent = math.frexp(d)  # d = fraction * 2**exponent, fraction in [0.5, 1)
    m = int(fraction * 2**24)
    return m, exponent - 24


def divide(a: jax.Array, d: Any) -> jax.Array:
    """``a / d`` for float32 ``a`` and a static nonzero scalar ``d`` (taken in float32),
    correctly rounded, where the quotient is a normal number (elsewhere, and for infinite or
    NaN ``a``, XLA's own division).  Its derivative is the quotient's, ``a_dot / d``."""
    d32 = float(np.float32(d))
    if not math.isfinite(d32) or d32 == 0:
        raise ValueError(f"`d` (={d!r}) must be a finite nonzero float32.")
    return _divide(a, d32)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _divide(a: jax.Array, d32: float) -> jax.Array:
    m_d, e_d = _significand(abs(d32))
    bits = lax.bitcast_convert_type(a, np.uint32)
    field = (bits >> 23) & 0xFF
    fraction = (bits & 0x7FFFFF).astype(np.int32)
    # a's significand in [2**23, 2**24) and its exponent; a subnormal is normalized.
    normal = field > 0
    m_a = jnp.where(normal, fraction | 0x800000, fraction)
    shift = jnp.where(normal, 0, lax.clz(jnp.maximum(m_a, 1)) - 8)
    m_a = m_a << shift
    e_a = jnp.where(normal, field.astype(np.int32) - 150, -149) - shift
    # Long division: q = floor(m_a * 2**(_STEPS - 1) / m_d), the remainder kept below 2 * m_d.
    q = jnp.zeros_like(m_a)
    r = m_a
    for _ in range(_STEPS):
        bit = r >= m_d
        q = (q << 1) | bit.astype(np.int32)
        r = (r - jnp.where(bit, m_d, 0)) << 1
    # m_a / m_d is in (1/2, 2): q has 26 or 27 bits; keep 24, round to nearest, ties to even.
    wide = q >= (1 << (_STEPS - 1))
    drop = jnp.where(wide, _STEPS - 24, _STEPS - 25)
    kept = q >> drop
    rest = q - (kept << drop)
    half = 1 << (drop - 1)
    up = (rest > half) | ((rest == half) & ((r != 0) | ((kept & 1) == 1)))
    kept = kept + up.astype(np.int32)
    carry = kept >= (1 << 24)
    kept = jnp.where(carry, kept >> 1, kept)
    exponent = e_a - e_d - (_STEPS - 1) + drop + carry.astype(np.int32)
    # kept * 2**exponent, kept in [2**23, 2**24): a normal float32 where its field is 1..254.
    biased = exponent + 23 + 127
    out = lax.bitcast_convert_type(
        (biased.astype(np.uint32) << 23) | (kept.astype(np.uint32) & 0x7FFFFF), np.float32
    )
    negative = (bits >> 31).astype(bool) != (d32 < 0)
    out = jnp.where(negative, -out, out)
    usual = (field < 255) & (fraction | field.astype(np.int32) != 0) & (biased > 0) & (biased < 255)
    zero = jnp.where(negative, np.float32(-0.0), np.float32(0.0))
    exact_zero = (field == 0) & (fraction == 0)
    return jnp.where(usual, out, jnp.where(exact_zero, zero, a / np.float32(d32)))


@_divide.defjvp
def _divide_jvp(d32, primals, tangents):
    (a,), (a_dot,) = primals, tangents
    return _divide(a, d32), a_dot / np.float32(d32)
