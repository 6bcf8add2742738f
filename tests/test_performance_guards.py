"""Performance guards that need no timing.

* Memory: XLA's temporary buffers of the compiled ops.  A forward pass may use at most the size
  of its own output as scratch, a forward+backward pass at most the input plus the indices.
  A change that materialises a padded copy of the input, or patches/windows of it, exceeds
  these bounds on the mid-size shapes below and fails here.
* Compilations: repeated public calls with equal attributes, also when the attributes are
  spelled differently but mean the same (``2`` and ``(2, 2)``, ``None`` and the default), must
  neither retrace nor recompile.
"""

from __future__ import annotations

import contextlib
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpool

# --------------------------------------------------------------------------------------------
# Helpers.
# --------------------------------------------------------------------------------------------


def _require(name: str):
    fn = getattr(jaxpool, name, None)
    if fn is None:
        pytest.skip(f"jaxpool.{name} is not available")
    return fn


def _nbytes(tree) -> int:
    return sum(
        math.prod(a.shape) * np.dtype(a.dtype).itemsize for a in jax.tree_util.tree_leaves(tree)
    )


def _temp_bytes(fn, *args) -> int:
    memory = jax.jit(fn).lower(*args).compile().memory_analysis()
    if memory is None:
        pytest.skip("this backend reports no memory analysis")
    return int(memory.temp_size_in_bytes)


def _grad(fn):
    """``x, ct -> d sum(fn(x) * ct) / dx`` (``fn`` returns the values only)."""
    return jax.grad(lambda x, ct: jnp.sum(fn(x) * ct))


def _nxc(shape):
    return (shape[0], *shape[2:], shape[1])


def _input(ncx_shape, data_format):
    shape = ncx_shape if data_format == "NCX" else _nxc(ncx_shape)
    return jax.ShapeDtypeStruct(shape, jnp.float32)


# (id, NCX shape, kernel, strides, pad): padded and unpadded 2-D, 3-D and 1-D.
WINDOWS = [
    ("2d-k3s2p1", (8, 32, 64, 64), 3, 2, 1),
    ("2d-k2s2", (8, 32, 64, 64), 2, 2, 0),
    ("3d-k3s2p1", (2, 16, 16, 32, 32), 3, 2, 1),
    ("3d-k2s2", (2, 16, 16, 32, 32), 2, 2, 0),
    ("1d-k3s2p1", (8, 32, 4096), 3, 2, 1),
    ("1d-k4s4", (8, 32, 4096), 4, 4, 0),
]
ADAPTIVE = [
    ("2d-50to16", (8, 32, 50, 50), 16),
    ("2d-50to16-batch1", (1, 32, 50, 50), 16),
    ("2d-7to1", (8, 64, 7, 7), 1),
    ("3d-20to6", (2, 16, 20, 20, 20), 6),
    ("1d-100to7", (8, 32, 100), 7),
]
LAYOUTS = ["NCX", "NXC"]

window_cases = pytest.mark.parametrize(
    "shape, kernel, strides, pad", [w[1:] for w in WINDOWS], ids=[w[0] for w in WINDOWS]
)
adaptive_cases = pytest.mark.parametrize(
    "shape, output_size", [a[1:] for a in ADAPTIVE], ids=[a[0] for a in ADAPTIVE]
)
layouts = pytest.mark.parametrize("data_format", LAYOUTS)


# Guards that the current code does not meet yet on a CPU, by test id.  There each is expected
# to fail (strict: once a change makes one pass, its entry must go, so the guard holds from
# then on).  Other backends fuse differently and run other argmax programs: there an entry may
# pass.
KNOWN_MISSES = {
    # With several pooled axes whose bins form several short runs, adaptive pools reduce one
    # axis at a time and keep the partly reduced intermediate (plus, with indices, its
    # positions).
    **{f"test_adaptive_max_pool_temp_memory[values-{df}-3d-20to6]": "per-axis intermediate"
       for df in LAYOUTS},
    **{f"test_adaptive_max_pool_temp_memory[indices-{df}-3d-20to6]": "per-axis (value, position)"
       for df in LAYOUTS},
    **{f"test_adaptive_avg_pool_temp_memory[{df}-3d-20to6]": "per-axis intermediate"
       for df in LAYOUTS},
}


@pytest.fixture(autouse=True)
def _known_misses(request):
    reason = KNOWN_MISSES.get(request.node.name)
    if reason is not None:
        strict = jax.default_backend() == "cpu"
        request.applymarker(pytest.mark.xfail(strict=strict, reason=reason))


def _check_forward(fn, x, what):
    out = jax.eval_shape(fn, x)
    temp, limit = _temp_bytes(fn, x), _nbytes(out)
    assert temp <= limit, (
        f"{what}: XLA temp memory {temp} bytes exceeds the output size {limit} bytes "
        f"(input {_nbytes(x)} bytes)"
    )


def _check_backward(fn, x, indices_bytes, what):
    ct = jax.eval_shape(fn, x)
    temp = _temp_bytes(_grad(fn), x, ct)
    limit = _nbytes(x) + indices_bytes
    assert temp <= limit, (
        f"{what}: XLA temp memory {temp} bytes exceeds input + indices {limit} bytes "
        f"(input {_nbytes(x)} bytes, indices {indices_bytes} bytes)"
    )


# --------------------------------------------------------------------------------------------
# (a) Memory.
# --------------------------------------------------------------------------------------------


@window_cases
@layouts
@pytest.mark.parametrize("return_indices", [False, True], ids=["values", "indices"])
def test_max_pool_forward_temp_memory(shape, kernel, strides, pad, data_format, return_indices):
    x = _input(shape, data_format)

    def fn(x):
        return jaxpool.max_pool(
            x, kernel, strides, pad, pad, data_format=data_format, return_indices=return_indices
        )

    _check_forward(fn, x, f"max_pool {shape} k{kernel} s{strides} p{pad} {data_format}")


@window_cases
@layouts
def test_max_pool_backward_temp_memory(shape, kernel, strides, pad, data_format):
    x = _input(shape, data_format)

    def fn(x):
        return jaxpool.max_pool(x, kernel, strides, pad, pad, data_format=data_format)

    _, indices = jax.eval_shape(
        lambda x: jaxpool.max_pool(
            x, kernel, strides, pad, pad, data_format=data_format, return_indices=True
        ),
        x,
    )
    _check_backward(
        fn,
        x,
        _nbytes(indices),
        f"grad of max_pool {shape} k{kernel} s{strides} p{pad} {data_format}",
    )


@window_cases
@layouts
@pytest.mark.parametrize("exclude_pad", [False, True], ids=["include_pad", "exclude_pad"])
def test_avg_pool_temp_memory(shape, kernel, strides, pad, data_format, exclude_pad):
    avg_pool = _require("avg_pool")
    x = _input(shape, data_format)

    def fn(x):
        return avg_pool(
            x, kernel, strides, pad, pad, exclude_pad=exclude_pad, data_format=data_format
        )

    what = f"avg_pool {shape} k{kernel} s{strides} p{pad} {data_format} exclude_pad={exclude_pad}"
    _check_forward(fn, x, what)
    _check_backward(fn, x, 0, f"grad of {what}")


@adaptive_cases
@layouts
@pytest.mark.parametrize("return_indices", [False, True], ids=["values", "indices"])
def test_adaptive_max_pool_temp_memory(shape, output_size, data_format, return_indices):
    adaptive_max_pool = _require("adaptive_max_pool")
    x = _input(shape, data_format)

    def fn(x, return_indices=return_indices):
        return adaptive_max_pool(
            x, output_size, data_format=data_format, return_indices=return_indices
        )

    what = f"adaptive_max_pool {shape} -> {output_size} {data_format}"
    _check_forward(fn, x, what)
    if not return_indices:
        _, indices = jax.eval_shape(lambda x: fn(x, return_indices=True), x)
        _check_backward(fn, x, _nbytes(indices), f"grad of {what}")


@adaptive_cases
@layouts
def test_adaptive_avg_pool_temp_memory(shape, output_size, data_format):
    adaptive_avg_pool = _require("adaptive_avg_pool")
    x = _input(shape, data_format)

    def fn(x):
        return adaptive_avg_pool(x, output_size, data_format=data_format)

    what = f"adaptive_avg_pool {shape} -> {output_size} {data_format}"
    _check_forward(fn, x, what)
    _check_backward(fn, x, 0, f"grad of {what}")


# --------------------------------------------------------------------------------------------
# (b) Compilations.
# --------------------------------------------------------------------------------------------

_TRACE = "/jax/core/compile/jaxpr_trace_duration"
_COMPILE = "/jax/core/compile/backend_compile_duration"
_events: list[str] | None = None


def _listener(event: str, duration: float, **kwargs) -> None:
    if _events is not None and event in (_TRACE, _COMPILE):
        _events.append(event)


jax.monitoring.register_event_duration_secs_listener(_listener)


@contextlib.contextmanager
def _count():
    """Collects the traces and backend compilations that happen inside the block."""
    global _events
    events: list[str] = []
    _events = events
    try:
        yield events
    finally:
        _events = None


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


def test_counter_sees_compilations():
    """The event counter works: a fresh shape traces and compiles."""
    x = jnp.ones((1, 3, 11, 13), jnp.float32)
    with _count() as events:
        jax.block_until_ready(jaxpool.max_pool(x, (3, 2), (2, 1), data_format="NCX"))
    assert events.count(_TRACE) >= 1 and events.count(_COMPILE) >= 1


@layouts
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
    avg_pool = _require("avg_pool")
    x = jnp.asarray(np.random.default_rng(2).standard_normal((2, 9, 7, 3), dtype=np.float32))
    _assert_no_recompile(
        [
            lambda: avg_pool(x, 3, 2, 1, 1, data_format="NXC"),
            lambda: avg_pool(
                x, (3, 3), (2, 2), (1, 1), (1, 1), data_format="NXC", exclude_pad=False
            ),
            lambda: avg_pool(
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
    adaptive_max_pool = _require("adaptive_max_pool")
    adaptive_avg_pool = _require("adaptive_avg_pool")
    x = jnp.asarray(np.random.default_rng(3).standard_normal((2, 3, 11, 9), dtype=np.float32))
    _assert_no_recompile(
        [
            lambda: adaptive_avg_pool(x, 4),
            lambda: adaptive_avg_pool(x, (4, 4)),
            lambda: adaptive_avg_pool(x, [4, 4], data_format="NCX"),
            lambda: adaptive_avg_pool(x, np.array([4, 4])),
        ]
    )
    _assert_no_recompile(
        [
            lambda: adaptive_max_pool(x, (4, None), return_indices=True),
            lambda: adaptive_max_pool(x, [4, 9], return_indices=True),
            lambda: adaptive_max_pool(x, (4, 9), return_indices=True, index_element_type="i32"),
        ]
    )


def test_max_unpool_equivalent_attributes_do_not_recompile():
    max_unpool = _require("max_unpool")
    x = jnp.asarray(np.random.default_rng(4).standard_normal((2, 3, 8, 6), dtype=np.float32))
    y, indices = jaxpool.max_pool(x, 2, return_indices=True, axis=2)
    _assert_no_recompile(
        [
            lambda: max_unpool(y, indices, (2, 3, 8, 6), axis=2),
            lambda: max_unpool(y, indices, [2, 3, 8, 6], axis=-2),
            lambda: max_unpool(y, indices, x.shape, axis=2, data_format="NCX"),
        ]
    )


def test_jitted_caller_traces_once():
    """A user's jitted step that calls the ops traces once for equal shapes."""
    ops = [lambda x: jaxpool.max_pool(x, 3, 2, 1, 1, return_indices=True)]
    for name, call in [
        ("avg_pool", lambda f, x: f(x, 2)),
        ("adaptive_avg_pool", lambda f, x: f(x, 3)),
        ("adaptive_max_pool", lambda f, x: f(x, 3, return_indices=True)),
    ]:
        fn = getattr(jaxpool, name, None)
        if fn is not None:
            ops.append(lambda x, fn=fn, call=call: call(fn, x))

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(x):
        return [op(x) for op in ops], jax.grad(lambda x: jnp.sum(ops[0](x)[0]))(x)

    rng = np.random.default_rng(5)
    for _ in range(3):
        x = jnp.asarray(rng.standard_normal((2, 3, 10, 10), dtype=np.float32))
        jax.block_until_ready(step(x))
