"""The ROI ops' float32 division by a static scalar is NumPy's correctly rounded quotient, bit
for bit, by an integer program that every backend runs alike (XLA's GPU backend divides
float32 within two units in the last place, which moved the bins of `roi_pool` there)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpool._src import exact

DIVISORS = [1, 2, 3, 6, 7, 13, 14, 224.0, 0.5, 0.1, -7.0, 3.3333, 12345.678]


RNG = np.random.default_rng(0)
DIVIDENDS = np.concatenate(
    [
        np.arange(-3000, 3000, dtype=np.float32),  # integer spans: bins end on integers
        RNG.integers(-(2**24), 2**24, 4000).astype(np.float32),
        (RNG.standard_normal(4000) * 10.0 ** RNG.integers(-30, 30, 4000)).astype(np.float32),
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3e38], np.float32),
    ]
)


@pytest.mark.parametrize("d", DIVISORS)
def test_divide_is_correctly_rounded(d):
    a = DIVIDENDS
    got = np.asarray(jax.jit(exact.divide, static_argnums=1)(jnp.asarray(a), d))
    with np.errstate(over="ignore"):
        want = a / np.float32(d)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (a[~same][:5], got[~same][:5], want[~same][:5])


def test_divide_derivative_is_the_quotients():
    a = jnp.arange(1.0, 5.0, dtype=jnp.float32)
    _, tangent = jax.jvp(lambda v: exact.divide(v, 7), (a,), (jnp.ones_like(a),))
    np.testing.assert_allclose(np.asarray(tangent), np.full(4, 1 / 7, np.float32), rtol=1e-7)
    assert jax.grad(lambda v: exact.divide(v, 4.0).sum())(a).tolist() == [0.25] * 4
