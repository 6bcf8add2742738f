"""No retrace, no recompilation: every check of it, in one place.

Repeated public calls with equal attributes, also when the attributes are spelled differently
but mean the same (``2`` and ``(2, 2)``, lists, NumPy scalars and arrays, ``None`` and the
default given explicitly), must neither retrace nor recompile; a user's jitted function that
calls the ops traces once (``chex.assert_max_traces``), under vmap and jvp too.
"""

from __future__ import annotations

import contextlib

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpool

_TRACE = "/jax/core/compile/jaxpr_trace_duration"
_COMPILE = "/jax/core/compile/backend_compile_duration"


@contextlib.contextmanager
def _count():
    """Collects the traces and backend compilations (of any ``jax.jit``) inside the block."""
    events: list[str] = []

    def listener(event: str, duration: float, **kwargs) -> None:
        if event in (_TRACE, _COMPILE):
            events.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield events
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def _assert_no_recompile(calls):
    """The first call may trace and compile; every later one (equal attributes) must not."""
    jax.block_until_ready(calls[0]())
    for i, call in enumerate(calls[1:], 1):
        with _count() as events:
            jax.block_until_ready(call())
        assert not events, (
            f"call {i} with equivalent attributes traced {events.count(_TRACE)} and compiled "
            f"{events.count(_COMPILE)} times"
        )


def _tie_free(shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.permutation(int(np.prod(shape))).reshape(shape) / 4 - 3).astype(np.float32)


def _assert_tree_equal(a, b):
    chex.assert_trees_all_equal(jax.tree.map(np.asarray, a), jax.tree.map(np.asarray, b))


def test_counter_sees_compilations():
    """The event counter works: a fresh shape traces and compiles."""
    x = jnp.ones((1, 3, 11, 13), jnp.float32)
    with _count() as events:
        jax.block_until_ready(jaxpool.max_pool(x, (3, 2), (2, 1), data_format="NCX"))
    assert events.count(_TRACE) >= 1 and events.count(_COMPILE) >= 1


# --------------------------------------------------------------------------------------------
# Public calls with equivalent attributes.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_max_pool_equivalent_attributes_do_not_recompile(data_format):
    x = jnp.asarray(
        np.random.default_rng(0).standard_normal(
            (2, 3, 12, 10) if data_format == "NCX" else (2, 12, 10, 3), dtype=np.float32
        )
    )
    df = data_format
    forms = [
        lambda: jaxpool.max_pool(x, 2, data_format=df),
        lambda: jaxpool.max_pool(x, (2, 2), data_format=df),
        lambda: jaxpool.max_pool(x, [2, 2], (2, 2), data_format=df),
        lambda: jaxpool.max_pool(x, np.array([2, 2]), 2, 0, (0, 0), dilations=1, data_format=df),
        lambda: jaxpool.max_pool(
            x,
            (np.int64(2), 2),
            None,
            None,
            None,
            dilations=(1, 1),
            rounding_type="floor",
            auto_pad="explicit",
            data_format=df,
        ),
    ]
    _assert_no_recompile(forms)
    with_indices = [
        lambda: jaxpool.max_pool(x, 3, 2, 1, 1, data_format=df, return_indices=True),
        lambda: jaxpool.max_pool(
            x,
            (3, 3),
            (2, 2),
            (1, 1),
            [1, 1],
            data_format=df,
            return_indices=True,
            axis=0,
            index_element_type=None,
        ),
        lambda: jaxpool.max_pool(
            x, 3, 2, 1, 1, data_format=df, return_indices=True, axis=-4, index_element_type="i32"
        ),
        lambda: jaxpool.max_pool(
            x, 3, 2, 1, 1, data_format=df, return_indices=True, index_element_type=jnp.int32
        ),
    ]
    _assert_no_recompile(with_indices)


def test_max_pool_gradient_does_not_recompile():
    x = jnp.asarray(np.random.default_rng(1).standard_normal((2, 3, 12, 10), dtype=np.float32))

    def loss(x, kernel):
        return jnp.sum(jaxpool.max_pool(x, kernel, 2, 1, 1))

    grad = jax.grad(loss)
    _assert_no_recompile([lambda: grad(x, 3), lambda: grad(x, (3, 3)), lambda: grad(x, 3)])


def test_avg_pool_equivalent_attributes_do_not_recompile():
    x = jnp.asarray(np.random.default_rng(2).standard_normal((2, 9, 7, 3), dtype=np.float32))
    _assert_no_recompile(
        [
            lambda: jaxpool.avg_pool(x, 3, 2, 1, 1, data_format="NXC"),
            lambda: jaxpool.avg_pool(
                x, (3, 3), (2, 2), (1, 1), (1, 1), data_format="NXC", exclude_pad=False
            ),
            lambda: jaxpool.avg_pool(
                x,
                [3, 3],
                2,
                [1, 1],
                1,
                rounding_type="floor",
                auto_pad="explicit",
                data_format="NXC",
            ),
        ]
    )


def test_adaptive_equivalent_attributes_do_not_recompile():
    x = jnp.asarray(np.random.default_rng(3).standard_normal((2, 3, 11, 9), dtype=np.float32))
    _assert_no_recompile(
        [
            lambda: jaxpool.adaptive_avg_pool(x, 4),
            lambda: jaxpool.adaptive_avg_pool(x, (4, 4)),
            lambda: jaxpool.adaptive_avg_pool(x, [4, 4], data_format="NCX"),
            lambda: jaxpool.adaptive_avg_pool(x, np.array([4, 4])),
        ]
    )
    _assert_no_recompile(
        [
            lambda: jaxpool.adaptive_max_pool(x, (4, None), return_indices=True),
            lambda: jaxpool.adaptive_max_pool(x, [4, 9], return_indices=True),
            lambda: jaxpool.adaptive_max_pool(
                x, (4, 9), return_indices=True, index_element_type="i32"
            ),
        ]
    )


def test_max_unpool_equivalent_attributes_do_not_recompile():
    x = jnp.asarray(np.random.default_rng(4).standard_normal((2, 3, 8, 6), dtype=np.float32))
    y, indices = jaxpool.max_pool(x, 2, return_indices=True, axis=2)
    _assert_no_recompile(
        [
            lambda: jaxpool.max_unpool(y, indices, (2, 3, 8, 6), axis=2),
            lambda: jaxpool.max_unpool(y, indices, [2, 3, 8, 6], axis=-2),
            lambda: jaxpool.max_unpool(y, indices, x.shape, axis=2, data_format="NCX"),
        ]
    )


# Spellings of the same attributes: an int and the tuple it means, lists, NumPy scalars and
# arrays, defaults given explicitly.
EQUAL_CALLS = {
    "max_pool": [
        lambda x: jaxpool.max_pool(x, 2),
        lambda x: jaxpool.max_pool(x, (2, 2)),
        lambda x: jaxpool.max_pool(x, [2, 2], [2, 2]),
        lambda x: jaxpool.max_pool(x, np.int64(2), None, 0, (0, 0), dilations=1),
        lambda x: jaxpool.max_pool(
            x, np.array([2, 2]), rounding_type="floor", auto_pad="explicit", data_format="NCX"
        ),
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
    calls = EQUAL_CALLS[name]
    x = _tie_free((2, 3, 6, 6))
    x2 = _tie_free((2, 3, 6, 6), seed=1)
    expected = calls[0](x)  # the first call traces and compiles
    with _count() as events:
        for call in calls:
            _assert_tree_equal(call(x), expected)
            call(x2)
    assert events.count(_TRACE) == 0, (
        f"{events.count(_TRACE)} retraces for equal attributes of {name}"
    )

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
    x = _tie_free((2, 3, 6, 6))
    y, i = jaxpool.max_pool(x, 2, return_indices=True)
    expected = jaxpool.max_unpool(y, i, x.shape, axis=0)
    y2 = y * 2
    with _count() as events:
        spellings = (x.shape, list(x.shape), np.array(x.shape), tuple(map(np.int64, x.shape)))
        for shape in spellings:
            _assert_tree_equal(jaxpool.max_unpool(y, i, shape, axis=0), expected)
            jaxpool.max_unpool(y2, i, shape, axis=-4, data_format="NCX")
    assert events.count(_TRACE) == 0


# --------------------------------------------------------------------------------------------
# A user's jitted function traces once.
# --------------------------------------------------------------------------------------------


def test_jitted_caller_traces_once():
    """A user's jitted step that calls every op traces once for equal shapes."""
    ops = [
        lambda x: jaxpool.max_pool(x, 3, 2, 1, 1, return_indices=True),
        lambda x: jaxpool.avg_pool(x, 2),
        lambda x: jaxpool.adaptive_avg_pool(x, 3),
        lambda x: jaxpool.adaptive_max_pool(x, 3, return_indices=True),
    ]

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(x):
        return [op(x) for op in ops], jax.grad(lambda x: jnp.sum(ops[0](x)[0]))(x)

    rng = np.random.default_rng(5)
    for _ in range(3):
        x = jnp.asarray(rng.standard_normal((2, 3, 10, 10), dtype=np.float32))
        jax.block_until_ready(step(x))


def test_avg_pool_under_vmap_and_jvp_traces_once():
    x = jnp.asarray(np.random.default_rng(0).standard_normal((4, 2, 3, 6, 5)), jnp.float32)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def f(v):
        return jaxpool.avg_pool(v, 2, 1, 1, 0)

    batched = jax.vmap(f)(x)
    np.testing.assert_allclose(batched[1], f(x[1]), rtol=1e-6)
    f(x[0] + 1.0)
    y, tangent = jax.jvp(f, (x[0],), (jnp.ones_like(x[0]),))
    np.testing.assert_allclose(tangent, f(jnp.ones_like(x[0])), rtol=1e-6)


def test_adaptive_pools_under_vmap_and_jvp_trace_once():
    x = jnp.asarray(np.random.default_rng(0).standard_normal((3, 2, 2, 9, 7)), jnp.float32)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def f(v):
        return jaxpool.adaptive_max_pool(v, (4, 3)), jaxpool.adaptive_avg_pool(v, (4, 3))

    batched = jax.vmap(f)(x)
    for b, single in zip(batched, f(x[1]), strict=True):
        np.testing.assert_allclose(b[1], single, rtol=1e-6)
    f(x[0] + 1.0)
    (_, avg), (_, avg_dot) = jax.jvp(f, (x[0],), (jnp.ones_like(x[0]),))
    np.testing.assert_allclose(avg_dot, jnp.ones_like(avg), rtol=1e-6)
