"""Index overflow on huge shapes, a 1 GiB input, 16-bit gradients, NaN/inf and determinism."""

from __future__ import annotations

import functools
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
from jax import lax

import jaxpool


def _require(name):
    fn = getattr(jaxpool, name, None)
    if fn is None:
        pytest.skip(f"jaxpool.{name} is not available")
    return fn


# ----------------------------------------------------------------------------------------------
# Huge shapes, checked abstractly.
# ----------------------------------------------------------------------------------------------

HUGE = jax.ShapeDtypeStruct((2**12, 2**10, 2**5, 2**5), jnp.float32)  # 2**32 elements, 16 GiB


def test_int32_indices_over_the_whole_tensor_overflow():
    _require("max_pool")
    with pytest.raises(ValueError, match=r"`index_element_type`.*int32"):
        jax.eval_shape(lambda x: jaxpool.max_pool(x, 2, return_indices=True, axis=0), HUGE)
    with pytest.raises(ValueError, match=r"`index_element_type`"):
        jax.eval_shape(lambda x: jaxpool.max_pool(
            x, 2, return_indices=True, axis=0, index_element_type="i32"), HUGE)


@pytest.mark.parametrize("axis", [1, 2, 3, -1])
def test_int32_indices_within_a_plane_fit(axis):
    _require("max_pool")
    y, i = jax.eval_shape(lambda x: jaxpool.max_pool(x, 2, return_indices=True, axis=axis), HUGE)
    assert y.shape == i.shape == (2**12, 2**10, 16, 16)
    assert y.dtype == jnp.float32 and i.dtype == jnp.int32


def test_int64_indices_fit_with_x64(x64):
    _require("max_pool")
    y, i = jax.eval_shape(lambda x: jaxpool.max_pool(
        x, 2, return_indices=True, axis=0, index_element_type="i64"), HUGE)
    assert i.dtype == jnp.int64 and i.shape == (2**12, 2**10, 16, 16)


def test_adaptive_max_pool_spatial_index_overflow():
    _require("adaptive_max_pool")
    plane = jax.ShapeDtypeStruct((1, 1, 2**16, 2**16), jnp.float32)
    with pytest.raises(ValueError, match=r"65536"):
        jax.eval_shape(lambda x: jaxpool.adaptive_max_pool(x, 2, return_indices=True), plane)
    y = jax.eval_shape(lambda x: jaxpool.adaptive_max_pool(x, 2), HUGE)
    assert y.shape == (2**12, 2**10, 2, 2)


def test_max_unpool_of_a_huge_output():
    _require("max_unpool")
    y = jax.ShapeDtypeStruct((2**12, 2**10, 16, 16), jnp.float32)
    i = jax.ShapeDtypeStruct((2**12, 2**10, 16, 16), jnp.int32)
    for axis in (0, 2):  # an output of 2**32 elements is not addressable with 32 bits
        with pytest.raises(ValueError, match=r"`output_shape`.*4294967296"):
            jax.eval_shape(functools.partial(jaxpool.max_unpool, output_shape=HUGE.shape,
                                             axis=axis), y, i)
    with jax.enable_x64(True):
        out = jax.eval_shape(lambda y, i: jaxpool.max_unpool(y, i, HUGE.shape, axis=2), y, i)
    assert out.shape == HUGE.shape and out.dtype == jnp.float32


# ----------------------------------------------------------------------------------------------
# A 1 GiB input, really pooled.
# ----------------------------------------------------------------------------------------------

BIG_SHAPE = (16, 16, 1024, 1024)  # 2**28 float32 elements: 1 GiB


@pytest.mark.skipif(os.environ.get("JAXPOOL_SKIP_BIG") == "1", reason="JAXPOOL_SKIP_BIG=1")
def test_one_gib_input():
    _require("max_pool")

    @jax.jit
    def make():  # a cheap hash of the position: irregular values, some ties
        i = lax.iota(jnp.uint32, 2**28).reshape(BIG_SHAPE)
        return ((i * np.uint32(2654435761)) >> 8).astype(jnp.float32)

    @jax.jit
    def check(x):
        y, i = jaxpool.max_pool(x, 2, 2, return_indices=True, axis=2)
        expected = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        planes = x.reshape(*BIG_SHAPE[:2], -1)
        at_index = jnp.take_along_axis(planes, i.reshape(*BIG_SHAPE[:2], -1), axis=2)
        row, col = i // BIG_SHAPE[3], i % BIG_SHAPE[3]
        out_row = lax.broadcasted_iota(jnp.int32, y.shape, 2)
        out_col = lax.broadcasted_iota(jnp.int32, y.shape, 3)
        in_window = (row // 2 == out_row) & (col // 2 == out_col)
        return (jnp.array_equal(y, expected), jnp.array_equal(at_index.reshape(y.shape), y),
                jnp.all(in_window), y.shape)

    start = time.perf_counter()
    x = make()
    same_values, values_at_indices, indices_in_window, shape = check(x)
    elapsed = time.perf_counter() - start
    del x
    assert shape == (16, 16, 512, 512)
    assert bool(same_values)
    assert bool(values_at_indices)
    assert bool(indices_in_window)
    assert elapsed < 120, f"pooling 1 GiB took {elapsed:.1f} s"


# ----------------------------------------------------------------------------------------------
# 16-bit floats.
# ----------------------------------------------------------------------------------------------

GRAD_OPS = {
    "max_pool": ("max_pool", lambda x: jaxpool.max_pool(x, 3, 2, 1, 1)),
    "avg_pool": ("avg_pool", lambda x: jaxpool.avg_pool(x, 3, 2, 1, 1)),
    "avg_pool-exclude": ("avg_pool", lambda x: jaxpool.avg_pool(x, 3, 2, 1, 1,
                                                                exclude_pad=True)),
    "adaptive_max_pool": ("adaptive_max_pool", lambda x: jaxpool.adaptive_max_pool(x, (3, 2))),
    "adaptive_avg_pool": ("adaptive_avg_pool", lambda x: jaxpool.adaptive_avg_pool(x, (3, 2))),
}


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("op", list(GRAD_OPS))
def test_16_bit_values_and_gradients(op, dtype):
    name, fn = GRAD_OPS[op]
    _require(name)
    rng = np.random.default_rng(0)
    # Distinct small integers: exact in 16 bits, no ties.
    x32 = (rng.permutation(2 * 2 * 7 * 6).reshape(2, 2, 7, 6) - 84).astype(np.float32) / 4
    x16 = jnp.asarray(x32, dtype)
    ct32 = rng.integers(-3, 4, np.shape(jax.eval_shape(fn, x16))).astype(np.float32)
    ct16 = jnp.asarray(ct32, dtype)
    y16 = fn(x16)
    assert y16.dtype == dtype
    y32 = fn(jnp.asarray(x16, jnp.float32))
    tol = 1e-2 if dtype == jnp.bfloat16 else 1e-3
    np.testing.assert_allclose(np.asarray(y16, np.float32), np.asarray(y32), rtol=tol, atol=tol)
    g16 = jax.grad(lambda x: jnp.sum((fn(x) * ct16).astype(jnp.float32)))(x16)
    g32 = jax.grad(lambda x: jnp.sum(fn(x) * ct32))(jnp.asarray(x16, jnp.float32))
    assert g16.dtype == dtype
    np.testing.assert_allclose(np.asarray(g16, np.float32), np.asarray(g32), rtol=tol, atol=tol)


# ----------------------------------------------------------------------------------------------
# NaN and infinities.
# ----------------------------------------------------------------------------------------------


def _special(seed):
    """A float32 (2, 2, 6, 6) input with a few NaN, +inf and -inf among small integers."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, (2, 2, 6, 6)).astype(np.float32)
    flat = x.reshape(-1)
    spots = rng.choice(flat.size, 9, replace=False)
    flat[spots[:3]], flat[spots[3:6]], flat[spots[6:]] = np.nan, np.inf, -np.inf
    return x


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("config", [
    dict(kernel=3, strides=1, pads_begin=1, pads_end=1),
    dict(kernel=2, strides=2, pads_begin=1, pads_end=0, rounding_type="ceil", dilations=2),
])
def test_max_pool_specials_and_gradient(config, seed):
    _require("max_pool")
    x = _special(seed)
    y, i = jaxpool.max_pool(x, **config, return_indices=True, axis=0)
    y_ref, i_ref = reference.max_pool(x, **config, axis=0)
    np.testing.assert_array_equal(np.asarray(y), y_ref)
    np.testing.assert_array_equal(np.asarray(i), i_ref)
    ct = np.random.default_rng(seed + 10).integers(1, 5, y.shape).astype(np.float32)
    grad = jax.grad(lambda x: jnp.sum(jaxpool.max_pool(x, **config) * ct))(x)
    expected = np.zeros(x.size, np.float32)
    np.add.at(expected, i_ref.ravel(), ct.ravel())  # every window holds input
    assert np.all(np.isfinite(np.asarray(grad)))
    np.testing.assert_array_equal(np.asarray(grad).reshape(-1), expected)


def test_max_pool_numeric_policy_by_hand():
    _require("max_pool")
    nan, inf = np.nan, np.inf
    x = np.array([[[1, nan, nan, 5, -inf, -inf, inf, nan, 2, 2]]], np.float32)
    y, i = jaxpool.max_pool(x, 2, 2, return_indices=True)
    np.testing.assert_array_equal(np.asarray(y)[0, 0], [nan, nan, -inf, nan, 2])
    np.testing.assert_array_equal(np.asarray(i)[0, 0], [1, 2, 4, 7, 8])
    # A window in the padding only: -inf, the plane's first element, no gradient.
    x = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2)
    y, i = jaxpool.max_pool(x, 1, 2, 0, 2, rounding_type="ceil", return_indices=True, axis=0)
    np.testing.assert_array_equal(np.asarray(y)[..., -1], np.full((2, 3), -inf))
    np.testing.assert_array_equal(np.asarray(i)[..., -1], np.arange(6).reshape(2, 3) * 2)
    g = jax.grad(lambda x: jnp.sum(jnp.where(
        jnp.isfinite(jaxpool.max_pool(x, 1, 2, 0, 2, rounding_type="ceil")),
        jaxpool.max_pool(x, 1, 2, 0, 2, rounding_type="ceil"), 0)))(x)
    np.testing.assert_array_equal(np.asarray(g)[..., 0], 1)
    np.testing.assert_array_equal(np.asarray(g)[..., 1], 0)


@pytest.mark.parametrize("seed", range(2))
def test_avg_pool_specials(seed):
    _require("avg_pool")
    x = _special(seed)
    for exclude_pad in (False, True):
        for config in (dict(kernel=3, strides=1, pads_begin=1, pads_end=1),
                       dict(kernel=2, strides=2, rounding_type="ceil", pads_end=1)):
            y = jaxpool.avg_pool(x, **config, exclude_pad=exclude_pad)
            expected = reference.avg_pool(x, **config, exclude_pad=exclude_pad)
            np.testing.assert_allclose(np.asarray(y), expected, rtol=1e-6)  # NaN where NaN
            ct = np.ones(y.shape, np.float32)
            grad = jax.grad(lambda x, c=config, e=exclude_pad, ct=ct: jnp.sum(
                jaxpool.avg_pool(x, **c, exclude_pad=e) * ct))
            g = grad(x)
            assert np.all(np.isfinite(np.asarray(g))), "a linear op's gradient ignores x"
            g_finite = grad(np.zeros_like(x))
            np.testing.assert_array_equal(np.asarray(g), np.asarray(g_finite))


@pytest.mark.parametrize("seed", range(2))
def test_adaptive_specials(seed):
    _require("adaptive_max_pool")
    _require("adaptive_avg_pool")
    x = _special(seed)
    for size in [(4, 4), (3, 5), (6, 2)]:
        y, i = jaxpool.adaptive_max_pool(x, size, return_indices=True)
        y_ref, i_ref = reference.adaptive_max_pool(x, size)
        np.testing.assert_array_equal(np.asarray(y), y_ref)
        np.testing.assert_array_equal(np.asarray(i), i_ref)
        np.testing.assert_allclose(np.asarray(jaxpool.adaptive_avg_pool(x, size)),
                                   reference.adaptive_avg_pool(x, size), rtol=1e-6)
        g = jax.grad(lambda x, s=size: jnp.sum(jaxpool.adaptive_max_pool(x, s)))(x)
        expected = np.zeros(x.size, np.float32)
        planes = (np.arange(4) * 36).reshape(2, 2, 1, 1)
        np.add.at(expected, (i_ref + planes).ravel(), 1)
        np.testing.assert_array_equal(np.asarray(g).reshape(-1), expected)


def test_max_unpool_specials():
    _require("max_unpool")
    y = np.array([[[np.nan, np.inf, -np.inf, 1.0]]], np.float32)
    i = np.array([[[0, 2, 2, 5]]], np.int32)
    out = jaxpool.max_unpool(y, i, (1, 1, 6))
    np.testing.assert_array_equal(np.asarray(out), [[[np.nan, 0, np.nan, 0, 0, 1]]])


# ----------------------------------------------------------------------------------------------
# Determinism.
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", list(GRAD_OPS) + ["max_unpool"])
def test_bitwise_deterministic(op):
    name = GRAD_OPS[op][0] if op in GRAD_OPS else op
    _require(name)
    if op in ("adaptive_max_pool", "max_unpool") and jax.default_backend() == "gpu":
        pytest.skip("a GPU's scatter-add sums repeated indices in no fixed order "
                    "(unless XLA_FLAGS has --xla_gpu_deterministic_ops=true)")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8, 33, 31)).astype(np.float32)
    if op == "max_unpool":
        _, idx = jaxpool.max_pool(x, 3, 1, 1, 1, return_indices=True)  # overlapping windows

        def fn(y):
            return jaxpool.max_unpool(y, idx, x.shape)
        x = rng.standard_normal(idx.shape).astype(np.float32)
    elif op == "max_pool":
        def fn(x):
            return jaxpool.max_pool(x, 3, 1, 1, 1)  # overlapping windows: scatter-add backward
    else:
        fn = GRAD_OPS[op][1]
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
