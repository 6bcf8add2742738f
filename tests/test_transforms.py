"""Every JAX transformation composes with every op.

Each op is checked against itself applied without the transformation (vmap against a loop,
checkpoint/scan/export against the plain call, forward against reverse mode, hessian against
``2 J^T J`` of a squared loss), so these tests hold for any correct op.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpool

OPS = {
    "max_pool": ("max_pool", lambda x: jaxpool.max_pool(x, 3, 2, 1, 1, return_indices=True)),
    "max_pool-ceil-dilated": ("max_pool", lambda x: jaxpool.max_pool(
        x, 2, 2, 0, 1, dilations=2, rounding_type="ceil", return_indices=True, axis=2)),
    "avg_pool": ("avg_pool", lambda x: (jaxpool.avg_pool(x, 3, 2, 1, 1),)),
    "avg_pool-exclude": ("avg_pool", lambda x: (jaxpool.avg_pool(
        x, 3, 2, 1, 2, exclude_pad=True, rounding_type="ceil"),)),
    "adaptive_max_pool": ("adaptive_max_pool", lambda x: jaxpool.adaptive_max_pool(
        x, (2, 3), return_indices=True)),
    "adaptive_avg_pool": ("adaptive_avg_pool", lambda x: (jaxpool.adaptive_avg_pool(x, (2, 3)),)),
    # max_unpool is linear in its first argument; its indices come from a fixed max pool.
    "max_unpool": ("max_unpool", None),
}
SHAPE = (2, 3, 5, 6)


def _require(name):
    fn = getattr(jaxpool, name, None)
    if fn is None:
        pytest.skip(f"jaxpool.{name} is not available")
    return fn


def _tie_free(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.permutation(int(np.prod(shape))).reshape(shape) / 4 - 3).astype(dtype)


def _op(op, shape=SHAPE):
    """``(fn, x)``: ``fn(x)`` returns a tuple whose first entry is differentiable in ``x``."""
    name, fn = OPS[op]
    _require(name)
    if name != "max_unpool":
        return fn, _tie_free(shape)
    _require("max_pool")
    _, indices = jaxpool.max_pool(_tie_free(shape), 3, 2, 1, 1, return_indices=True, axis=2)
    indices = np.asarray(indices)

    def unpool(y):
        return (jaxpool.max_unpool(y, indices, shape, axis=2),)
    return unpool, _tie_free(indices.shape)


def _first(fn):
    return lambda x: fn(x)[0]


def _assert_tree_equal(a, b):
    chex.assert_trees_all_equal(jax.tree.map(np.asarray, a), jax.tree.map(np.asarray, b))


@pytest.mark.parametrize("op", list(OPS))
def test_vmap_any_axis_and_nested(op):
    fn, x = _op(op)
    stacked = np.stack([x, x[::-1] * 2, -x], axis=1)  # the new axis is 1
    out = jax.vmap(fn, in_axes=1)(stacked)
    for k, o in enumerate(out):
        for j in range(stacked.shape[1]):
            np.testing.assert_array_equal(np.asarray(o[j]), np.asarray(fn(stacked[:, j])[k]))
    nested = jax.vmap(jax.vmap(fn, in_axes=1), in_axes=2, out_axes=1)(stacked[:, :, None])
    for o, e in zip(nested, out, strict=False):
        np.testing.assert_array_equal(np.asarray(o[:, 0]), np.asarray(e))


@pytest.mark.parametrize("op", list(OPS))
def test_vmap_of_grad(op):
    fn, x = _op(op)
    xs = np.stack([x, x * 3 - 1])
    grad = jax.grad(lambda x: jnp.sum(_first(fn)(x) ** 2))
    batched = jax.vmap(grad)(xs)
    for j in range(2):
        np.testing.assert_allclose(np.asarray(batched[j]), np.asarray(grad(xs[j])), rtol=1e-6)


@pytest.mark.parametrize("op", list(OPS))
def test_jit_with_donation(op):
    fn, x = _op(op)
    expected = fn(x)

    def step(x):
        return x * 2, fn(x)  # x's buffer is reused for x * 2
    donated = jnp.array(x)
    doubled, out = jax.jit(step, donate_argnums=0)(donated)
    assert donated.is_deleted()
    np.testing.assert_array_equal(np.asarray(doubled), x * 2)
    _assert_tree_equal(out, expected)


@pytest.mark.parametrize("op", list(OPS))
def test_checkpoint(op):
    fn, x = _op(op)

    def loss(x):
        return jnp.sum(jnp.sin(_first(fn)(x)))
    _assert_tree_equal(jax.checkpoint(fn)(x), fn(x))
    np.testing.assert_allclose(np.asarray(jax.grad(jax.checkpoint(loss))(x)),
                               np.asarray(jax.grad(loss)(x)), rtol=1e-6)


@pytest.mark.parametrize("op", list(OPS))
def test_scan_body(op):
    fn, x = _op(op)
    xs = np.stack([x, -x, x / 2])

    def body(carry, x):
        out = fn(x)
        return carry + jnp.sum(out[0]), out

    total, outs = jax.lax.scan(body, jnp.float32(0), xs)
    for j in range(3):
        _assert_tree_equal(tuple(o[j] for o in outs), fn(xs[j]))
    np.testing.assert_allclose(float(total), sum(float(jnp.sum(fn(v)[0])) for v in xs),
                               rtol=1e-6)
    grad = jax.grad(lambda xs: jax.lax.scan(body, jnp.float32(0), xs)[0])(xs)
    for j in range(3):
        np.testing.assert_allclose(
            np.asarray(grad[j]), np.asarray(jax.grad(lambda v: jnp.sum(fn(v)[0]))(xs[j])),
            rtol=1e-6)


@pytest.mark.parametrize("op", list(OPS))
def test_eval_shape_allocates_nothing(op):
    """4 GiB inputs: only shapes and dtypes are computed, no array is created."""
    name = OPS[op][0]
    _require(name)
    before = len(jax.live_arrays())
    if name == "max_unpool":
        y = jax.ShapeDtypeStruct((16, 16, 1024, 1024), jnp.float32)
        i = jax.ShapeDtypeStruct((16, 16, 1024, 1024), jnp.int32)
        (out,) = abstract = (jax.eval_shape(
            lambda y, i: jaxpool.max_unpool(y, i, (16, 16, 2048, 2048)), y, i),)
        assert out.shape == (16, 16, 2048, 2048) and out.dtype == jnp.float32
    else:
        fn, _ = _op(op)
        big = jax.ShapeDtypeStruct((16, 16, 2048, 2048), jnp.float32)
        abstract = jax.eval_shape(fn, big)
        small = fn(np.zeros((2, 2, 2048 // 64, 2048 // 64), np.float32))
        for a, c in zip(abstract, small, strict=False):
            assert a.dtype == c.dtype
            assert a.shape[:2] == big.shape[:2]
            assert a.ndim == c.ndim == 4
    assert len(jax.live_arrays()) <= before + (0 if name == "max_unpool" else 2)
    for a in abstract:
        assert isinstance(a, jax.ShapeDtypeStruct)


@pytest.mark.parametrize("op", list(OPS))
def test_export_round_trip(op):
    fn, x = _op(op)
    exported = jax.export.export(jax.jit(fn))(jax.ShapeDtypeStruct(x.shape, x.dtype))
    restored = jax.export.deserialize(exported.serialize())
    _assert_tree_equal(restored.call(x), fn(x))
    assert restored.in_avals == exported.in_avals
    assert restored.out_avals == exported.out_avals


@pytest.mark.parametrize("op", list(OPS))
def test_forward_and_reverse_mode_agree(op, x64):
    fn, x = _op(op, shape=(1, 2, 5, 6))
    x = x.astype(np.float64)
    f = _first(fn)
    tangent = np.random.default_rng(1).standard_normal(x.shape)
    y, y_dot = jax.jit(lambda x, t: jax.jvp(f, (x,), (t,)))(x, tangent)
    y_lin, f_lin = jax.linearize(f, x)
    _assert_tree_equal(y, f(x))
    _assert_tree_equal(y_lin, y)
    np.testing.assert_allclose(np.asarray(f_lin(tangent)), np.asarray(y_dot), rtol=1e-12)
    jac_fwd = jax.jit(jax.jacfwd(f))(x)
    jac_rev = jax.jit(jax.jacrev(f))(x)
    np.testing.assert_allclose(np.asarray(jac_fwd), np.asarray(jac_rev), rtol=1e-12)
    flat_jac = np.asarray(jac_fwd).reshape(y.size, x.size)
    np.testing.assert_allclose(flat_jac @ tangent.ravel(), np.asarray(y_dot).ravel(),
                               rtol=1e-12, atol=1e-12)
    # Every op is piecewise linear, so the hessian of 0.5 * |f|^2 is J^T J.
    hessian = jax.jit(jax.hessian(lambda x: 0.5 * jnp.sum(f(x) ** 2)))(x)
    np.testing.assert_allclose(np.asarray(hessian).reshape(x.size, x.size),
                               flat_jac.T @ flat_jac, rtol=1e-12, atol=1e-12)
    jax.test_util.check_grads(f, (x,), order=1, modes=("fwd", "rev"), eps=1e-3)


# ----------------------------------------------------------------------------------------------
# Equal static arguments never retrace.
# ----------------------------------------------------------------------------------------------


class _TraceCounter:
    """Counts the jaxprs traced (by any ``jax.jit``) while active."""

    def __init__(self):
        self.count = 0

    def _listener(self, event, duration, **kwargs):
        if event == "/jax/core/compile/jaxpr_trace_duration":
            self.count += 1

    def __enter__(self):
        jax.monitoring.register_event_duration_secs_listener(self._listener)
        return self

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self._listener)


# Spellings of the same attributes: an int and the tuple it means, lists, NumPy scalars and
# arrays, defaults given explicitly.
EQUAL_CALLS = {
    "max_pool": [
        lambda x: jaxpool.max_pool(x, 2),
        lambda x: jaxpool.max_pool(x, (2, 2)),
        lambda x: jaxpool.max_pool(x, [2, 2], [2, 2]),
        lambda x: jaxpool.max_pool(x, np.int64(2), None, 0, (0, 0), dilations=1),
        lambda x: jaxpool.max_pool(x, np.array([2, 2]), rounding_type="floor",
                                   auto_pad="explicit", data_format="NCX"),
    ],
    "avg_pool": [
        lambda x: jaxpool.avg_pool(x, 3, 1, 1, 1),
        lambda x: jaxpool.avg_pool(x, (3, 3), [1, 1], (1, 1), np.array([1, 1])),
        lambda x: jaxpool.avg_pool(x, [3, np.int32(3)], 1, 1, 1, exclude_pad=False),
    ],
    "adaptive_max_pool": [
        lambda x: jaxpool.adaptive_max_pool(x, 3, return_indices=True),
        lambda x: jaxpool.adaptive_max_pool(x, (3, 3), return_indices=True),
        lambda x: jaxpool.adaptive_max_pool(x, np.array([3, 3]), return_indices=True),
    ],
    "adaptive_avg_pool": [
        lambda x: jaxpool.adaptive_avg_pool(x, 3),
        lambda x: jaxpool.adaptive_avg_pool(x, [3, 3]),
        lambda x: jaxpool.adaptive_avg_pool(x, (np.int64(3), 3), data_format="NCX"),
    ],
}


@pytest.mark.parametrize("name", list(EQUAL_CALLS))
def test_equal_static_arguments_never_retrace(name):
    _require(name)
    calls = EQUAL_CALLS[name]
    x = _tie_free((2, 3, 6, 6))
    x2 = _tie_free((2, 3, 6, 6), seed=1)
    expected = calls[0](x)  # the first call traces and compiles
    with _TraceCounter() as counter:
        for call in calls:
            _assert_tree_equal(call(x), expected)
            call(x2)
    assert counter.count == 0, f"{counter.count} retraces for equal attributes of {name}"

    # Under a user's jit, equal (hashable) static arguments hit the cache too.
    fn = getattr(jaxpool, name)
    chex.clear_trace_counter()

    @jax.jit
    @chex.assert_max_traces(n=1)
    def pooled(x):
        return fn(x, 3)

    for v in (x, x2, x * 2):
        pooled(v)
    traced = chex.assert_max_traces(lambda x, size: fn(x, size), n=2)
    jitted = jax.jit(traced, static_argnums=1)
    for size in (3, (3, 3), 3, tuple([3, 3])):
        jitted(x, size)
    with pytest.raises(AssertionError):
        jitted(x, 2)


def test_max_unpool_never_retraces():
    _require("max_unpool")
    x = _tie_free((2, 3, 6, 6))
    y, i = jaxpool.max_pool(x, 2, return_indices=True)
    expected = jaxpool.max_unpool(y, i, x.shape)
    y2 = y * 2
    with _TraceCounter() as counter:
        spellings = (x.shape, list(x.shape), np.array(x.shape), tuple(map(np.int64, x.shape)))
        for shape in spellings:
            _assert_tree_equal(jaxpool.max_unpool(y, i, shape, axis=0), expected)
            jaxpool.max_unpool(y2, i, shape, axis=-4, data_format="NCX")
    assert counter.count == 0
