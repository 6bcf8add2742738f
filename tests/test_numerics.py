"""Numerics every op shares: 16-bit floats keep their dtype with float32-accurate values and
gradients, and results are bitwise reproducible run to run.

(Each op's NaN and infinity policy is checked in its own module, against the reference.)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jaxpool
from jaxpool._src import dispatch

GRAD_OPS = {
    "max_pool": lambda x: jaxpool.max_pool(x, 3, 2, 1, 1),
    "avg_pool": lambda x: jaxpool.avg_pool(x, 3, 2, 1, 1),
    "avg_pool-exclude": lambda x: jaxpool.avg_pool(x, 3, 2, 1, 1, exclude_pad=True),
    "adaptive_max_pool": lambda x: jaxpool.adaptive_max_pool(x, (3, 2)),
    "adaptive_avg_pool": lambda x: jaxpool.adaptive_avg_pool(x, (3, 2)),
}


@pytest.mark.usefixtures("class_program")
class Test16Bit:
    """16-bit values and gradients, on both programs."""

    @pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
    @pytest.mark.parametrize("op", list(GRAD_OPS))
    def test_16_bit_values_and_gradients(self, op, dtype):
        fn = GRAD_OPS[op]
        rng = np.random.default_rng(0)
        # Distinct small integers: exact in 16 bits, no ties.
        x32 = (rng.permutation(2 * 2 * 7 * 6).reshape(2, 2, 7, 6) - 84).astype(np.float32) / 4
        x16 = jnp.asarray(x32, dtype)
        ct32 = rng.integers(-3, 4, np.shape(jax.eval_shape(fn, x16))).astype(np.float32)
        ct16 = jnp.asarray(ct32, dtype)
        (y16, vjp16), (y32, vjp32) = jax.vjp(fn, x16), jax.vjp(fn, jnp.asarray(x16, jnp.float32))
        (g16,), (g32,) = vjp16(ct16), vjp32(ct32)
        assert y16.dtype == g16.dtype == dtype
        tol = 1e-2 if dtype == jnp.bfloat16 else 1e-3
        for a, b in ((y16, y32), (g16, g32)):
            np.testing.assert_allclose(np.asarray(a, np.float32), b, rtol=tol, atol=tol)


@pytest.mark.parametrize("op", list(GRAD_OPS) + ["max_unpool"])
def test_bitwise_deterministic(op):
    if op in ("adaptive_max_pool", "max_unpool") and jax.default_backend() == "gpu":
        pytest.skip(
            "a GPU's scatter-add sums repeated indices in no fixed order "
            "(unless XLA_FLAGS has --xla_gpu_deterministic_ops=true)"
        )
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8, 33, 31)).astype(np.float32)
    if op == "max_unpool":
        _, idx = jaxpool.max_pool(x, 3, 1, 1, 1, return_indices=True)  # overlapping windows

        def fn(y):
            return jaxpool.max_unpool(y, idx, x.shape, axis=0)

        x = rng.standard_normal(idx.shape).astype(np.float32)
    elif op == "max_pool":

        def fn(x):
            return jaxpool.max_pool(x, 3, 1, 1, 1)  # overlapping windows: scatter-add backward
    else:
        fn = GRAD_OPS[op]
    ct = rng.standard_normal(jax.eval_shape(fn, x).shape).astype(np.float32)

    def run():
        value_and_grad = jax.jit(jax.value_and_grad(lambda x: jnp.sum(fn(x) * ct)))
        value, grad = value_and_grad(x)
        return np.asarray(fn(x)), np.asarray(value), np.asarray(grad)

    first, second = run(), run()
    jax.clear_caches()
    third = run()
    for a, b, c in zip(first, second, third, strict=False):
        assert a.tobytes() == b.tobytes() == c.tobytes()


SELECTING_OPS = {
    "max_pool": lambda x: jaxpool.max_pool(x, 3, 2, 1, 1),
    "max_pool+idx": lambda x: jaxpool.max_pool(x, 3, 2, 1, 1, return_indices=True),
    "max_pool-tiled+idx": lambda x: jaxpool.max_pool(x, (1, 2), (1, 2), return_indices=True),
    "adaptive_max_pool": lambda x: jaxpool.adaptive_max_pool(x, (3, 4)),
    "adaptive_max_pool+idx": lambda x: jaxpool.adaptive_max_pool(x, (3, 4), return_indices=True),
    "adaptive_max_pool-1d": lambda x: jaxpool.adaptive_max_pool(x, (None, 4)),
    "global_max_pool+idx": lambda x: jaxpool.adaptive_max_pool(x, 1, return_indices=True),
}


@pytest.mark.parametrize("op", list(SELECTING_OPS))
def test_bfloat16_maxima_are_the_same_on_both_programs(op):
    """On a CPU the max ops take bfloat16 in float32 and round once at the end: the maxima
    are still the input's elements (signed zeros, infinities) and agree with the portable
    program's, and so do the indices.  (XLA's CPU backend may give any NaN its canonical
    payload in either program.)"""
    rng = np.random.default_rng(3)
    special = np.array([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 2.5, np.nan], np.float32)
    bits = np.asarray(rng.choice(special, (2, 3, 9, 11)), ml_dtypes.bfloat16).view(np.uint16)
    nan = np.isnan(bits.view(ml_dtypes.bfloat16).astype(np.float32))
    payload = rng.integers(1, 0x80, nan.sum()) | (rng.integers(0, 2, nan.sum()) << 15)
    bits[nan] = (0x7F80 | payload).astype(np.uint16)
    x = jnp.asarray(bits.view(ml_dtypes.bfloat16))
    results = {}
    for program in dispatch.PROGRAMS:
        with dispatch.force(program):
            results[program] = [np.asarray(a) for a in jax.tree.leaves(SELECTING_OPS[op](x))]
    (portable, *portable_indices), (cpu, *cpu_indices) = results["portable"], results["cpu"]
    assert portable.dtype == cpu.dtype == jnp.bfloat16
    is_nan = np.isnan(cpu.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(portable.astype(np.float32)), is_nan)
    assert portable.view(np.uint16)[~is_nan].tobytes() == cpu.view(np.uint16)[~is_nan].tobytes()
    assert np.isin(cpu.view(np.uint16)[~is_nan], bits).all()
    for a, b in zip(portable_indices, cpu_indices, strict=True):
        np.testing.assert_array_equal(a, b)
