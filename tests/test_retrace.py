"""No retrace, no recompilation: every check of it, in one place.

Repeated public calls with equal attributes, also when the attributes are spelled differently
but mean the same (``2`` and ``(2, 2)``, lists, NumPy scalars and arrays, ``None`` and the
default given explicitly), must neither retrace nor recompile; a user's jitted function that
calls the ops traces once (``chex.assert_max_traces``), under vmap and jvp too.
"""

from __future__ import annotations

import contextlib
import functools

import cases
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


def test_counter_sees_compilations():
    """The event counter works: a fresh shape traces and compiles."""
    x = jnp.ones((1, 3, 11, 13), jnp.float32)
    with _count() as events:
        jax.block_until_ready(jaxpool.max_pool(x, (3, 2), (2, 1), data_format="NCX"))
    assert events.count(_TRACE) >= 1 and events.count(_COMPILE) >= 1


def _s(*args, **kwargs):
    """One spelling of an op's attributes."""
    return args, kwargs


_MAX = [
    _s(2),
    _s((2, 2)),
    _s([2, 2], (2, 2)),
    _s([2, 2], [2, 2]),
    _s(np.array([2, 2]), 2, 0, (0, 0), dilations=1),
    _s(np.int64(2), None, 0, (0, 0), dilations=1),
    _s((np.int64(2), 2), None, None, None, dilations=(1, 1), rounding_type="floor"),
    _s(np.array([2, 2]), rounding_type="floor", auto_pad="explicit"),
]
_INDICES = [
    _s(3, 2, 1, 1),
    _s((3, 3), (2, 2), (1, 1), [1, 1], axis=0, index_element_type=None),
    _s(3, 2, 1, 1, axis=-4, index_element_type="i32"),
    _s(3, 2, 1, 1, index_element_type=jnp.int32),
]
_ADAPTIVE = [_s(4), _s((4, None)), _s([4, 4]), _s(np.array([4, 4])), _s((np.int64(4), 4))]
_AVG_NCX = [
    _s(3, 1, 1, 1),
    _s((3, 3), [1, 1], (1, 1), np.array([1, 1])),
    _s([3, np.int32(3)], 1, 1, 1, exclude_pad=False),
]
_AVG_NXC = [
    _s(3, 2, 1, 1),
    _s((3, 3), (2, 2), (1, 1), (1, 1), exclude_pad=False),
    _s([3, 3], 2, [1, 1], 1, rounding_type="floor", auto_pad="explicit"),
]
NCX, NXC, UNPOOLED = (2, 3, 12, 10), (2, 12, 10, 3), (2, 3, 8, 6)
_UNPOOLED = (UNPOOLED, list(UNPOOLED), np.array(UNPOOLED), tuple(map(np.int64, UNPOOLED)))


def _unpool(axis, other):
    """max_unpool of a fixed max pool, its output shape spelled four ways, its axis two ways."""
    pooled = functools.partial(jaxpool.max_pool, kernel=2, return_indices=True, axis=axis)
    spellings = [_s(s, axis=axis) for s in _UNPOOLED]
    spellings += [_s(s, axis=other, data_format="NCX") for s in _UNPOOLED]
    return (lambda x, *a, **k: jaxpool.max_unpool(*pooled(x), *a, **k)), UNPOOLED, spellings


_GRAD = [_s(3, 2, 1, 1), _s((3, 3), 2, 1, 1), _s(3, (2, 2), [1, 1], 1)]
_grad_of_max = jax.grad(lambda x, *a: jnp.sum(jaxpool.max_pool(x, *a)))
_P = functools.partial
_NXC_INDICES = dict(return_indices=True, data_format="NXC")
# name -> (op, input shape, spellings of the same attributes: an int and the tuple it means,
# lists, NumPy scalars and arrays, defaults given explicitly)
EQUAL_CALLS = {
    "max_pool NCX": (jaxpool.max_pool, NCX, _MAX),
    "max_pool NXC": (_P(jaxpool.max_pool, data_format="NXC"), NXC, _MAX),
    "max_pool indices NCX": (_P(jaxpool.max_pool, return_indices=True), NCX, _INDICES),
    "max_pool indices NXC": (_P(jaxpool.max_pool, **_NXC_INDICES), NXC, _INDICES),
    "max_pool gradient": (_grad_of_max, NCX, _GRAD),
    "avg_pool NCX": (jaxpool.avg_pool, (2, 3, 6, 6), _AVG_NCX),
    "avg_pool NXC": (_P(jaxpool.avg_pool, data_format="NXC"), (2, 9, 7, 3), _AVG_NXC),
    "adaptive_avg_pool": (jaxpool.adaptive_avg_pool, (2, 3, 11, 4), _ADAPTIVE),
    "adaptive_max_pool": (
        _P(jaxpool.adaptive_max_pool, return_indices=True),
        (2, 3, 11, 4),
        [*_ADAPTIVE, _s((4, 4), data_format="NCX", index_element_type="i32")],
    ),
    "max_unpool axis 0": _unpool(0, -4),
    "max_unpool axis 2": _unpool(2, -2),
}


@pytest.mark.parametrize("name", list(EQUAL_CALLS))
def test_equal_attributes_neither_retrace_nor_recompile(name):
    """The first call traces and compiles; every spelling after it, on the same input and on
    new values of its shape, gives the same result with neither."""
    fn, shape, spellings = EQUAL_CALLS[name]
    x, x2 = jnp.asarray(cases.tie_free(shape)), jnp.asarray(cases.tie_free(shape, seed=1))
    calls = [lambda x, a=a, k=k: fn(x, *a, **k) for a, k in spellings]
    expected = jax.block_until_ready(calls[0](x))
    with _count() as events:
        for call in calls:
            cases.assert_trees_equal(call(x), expected)
            jax.block_until_ready(call(x2))
    assert not events, (
        f"{name}: equivalent attributes traced {events.count(_TRACE)} and compiled "
        f"{events.count(_COMPILE)} times"
    )


@pytest.mark.parametrize("name", ["max_pool", "avg_pool", "adaptive_max_pool", "adaptive_avg_pool"])
def test_user_jit_with_equal_static_arguments_traces_once(name):
    """Under a user's jit, equal (hashable) static arguments hit the cache."""
    fn = getattr(jaxpool, name)
    x = cases.tie_free((2, 3, 6, 6))
    chex.clear_trace_counter()

    @jax.jit
    @chex.assert_max_traces(n=1)
    def pooled(x):
        return fn(x, 3)

    for v in (x, x + 1, x * 2):
        pooled(v)
    jitted = jax.jit(chex.assert_max_traces(lambda x, size: fn(x, size), n=2), static_argnums=1)
    for size in (3, (3, 3), 3, tuple([3, 3])):
        jitted(x, size)
    with pytest.raises(AssertionError):
        jitted(x, 2)


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


def test_avg_and_adaptive_pools_under_vmap_and_jvp_trace_once():
    x = jnp.asarray(np.random.default_rng(0).standard_normal((3, 2, 2, 9, 7)), jnp.float32)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def f(v):
        return (
            jaxpool.avg_pool(v, 2, 1, 1, 0),
            jaxpool.adaptive_max_pool(v, (4, 3)),
            jaxpool.adaptive_avg_pool(v, (4, 3)),
        )

    for b, single in zip(jax.vmap(f)(x), f(x[1]), strict=True):
        np.testing.assert_allclose(b[1], single, rtol=1e-6)
    f(x[0] + 1.0)
    ones = jnp.ones_like(x[0])
    (avg, _, adaptive), (avg_dot, _, adaptive_dot) = jax.jvp(f, (x[0],), (ones,))
    np.testing.assert_allclose(avg_dot, f(ones)[0], rtol=1e-6)  # the average is linear
    np.testing.assert_allclose(adaptive_dot, jnp.ones_like(adaptive), rtol=1e-6)
