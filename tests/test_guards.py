"""Performance guards that need no timing.

Memory: XLA's temporary buffers of the compiled ops.  A forward pass may use at most the size
of its own output as scratch, a forward+backward pass at most the input plus the indices.  A
change that materialises a padded copy of the input, or patches/windows of it (a kernel-times-
input intermediate), exceeds these bounds on the mid-size shapes below and fails here.

Each guard compiles for the current backend the program that backend runs (on a CPU the CPU
programs, elsewhere the portable ones), so it measures what users run there; a backend that
reports no memory analysis fails the guard rather than skipping it.  Known misses are listed
per backend.  (Retracing and recompilation: test_retrace.py.)
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpool
from jaxpool._src import dispatch

# --------------------------------------------------------------------------------------------
# Helpers.
# --------------------------------------------------------------------------------------------


def _nbytes(tree) -> int:
    return sum(
        math.prod(a.shape) * np.dtype(a.dtype).itemsize for a in jax.tree_util.tree_leaves(tree)
    )


def _temp_bytes(fn, *args) -> int:
    memory = jax.jit(fn).lower(*args).compile().memory_analysis()
    assert memory is not None, f"the {jax.default_backend()} backend reports no memory analysis"
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


# Guards that the current code does not meet yet, by backend and test id.  There each is
# expected to fail (strict: once a change makes one pass, its entry must go, so the guard holds
# from then on).  A backend without entries applies every guard.
_PER_AXIS = "per-axis intermediate"
_PER_AXIS_PAIRS = "per-axis (value, position)"
KNOWN_MISSES = {
    "cpu": {
        # With several pooled axes whose bins form several short runs, adaptive pools reduce
        # one axis at a time and keep the partly reduced intermediate (plus, with indices, its
        # positions).
        **{
            f"test_adaptive_max_pool_temp_memory[values-{df}-3d-20to6]": _PER_AXIS for df in LAYOUTS
        },
        **{
            f"test_adaptive_max_pool_temp_memory[indices-{df}-3d-20to6]": _PER_AXIS_PAIRS
            for df in LAYOUTS
        },
        **{f"test_adaptive_avg_pool_temp_memory[{df}-3d-20to6]": _PER_AXIS for df in LAYOUTS},
    },
}


@pytest.fixture(autouse=True)
def _known_misses(request):
    reason = KNOWN_MISSES.get(jax.default_backend(), {}).get(request.node.name)
    if reason is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


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
    x = _input(shape, data_format)

    def fn(x):
        return jaxpool.avg_pool(
            x, kernel, strides, pad, pad, exclude_pad=exclude_pad, data_format=data_format
        )

    what = f"avg_pool {shape} k{kernel} s{strides} p{pad} {data_format} exclude_pad={exclude_pad}"
    _check_forward(fn, x, what)
    _check_backward(fn, x, 0, f"grad of {what}")


@adaptive_cases
@layouts
@pytest.mark.parametrize("return_indices", [False, True], ids=["values", "indices"])
def test_adaptive_max_pool_temp_memory(shape, output_size, data_format, return_indices):
    x = _input(shape, data_format)

    def fn(x, return_indices=return_indices):
        return jaxpool.adaptive_max_pool(
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
    x = _input(shape, data_format)

    def fn(x):
        return jaxpool.adaptive_avg_pool(x, output_size, data_format=data_format)

    what = f"adaptive_avg_pool {shape} -> {output_size} {data_format}"
    _check_forward(fn, x, what)
    _check_backward(fn, x, 0, f"grad of {what}")


# --------------------------------------------------------------------------------------------
# The program fixture runs two programs.
# --------------------------------------------------------------------------------------------

# Calls whose portable and CPU programs differ; the op modules' runtime and gradient checks run
# each through the ``program`` fixture.
TWO_PROGRAMS = {
    "max_pool": lambda x: jaxpool.max_pool(x, 3, 2, 1, 1),
    "max_pool-indices": lambda x: jaxpool.max_pool(x, 3, 2, 1, 1, return_indices=True),
    "max_pool-grad": jax.grad(lambda x: jnp.sum(jaxpool.max_pool(x, 3, 2, 1, 1))),
    "avg_pool": lambda x: jaxpool.avg_pool(x, 3, 2, 1, 1),
    "adaptive_max_pool": lambda x: jaxpool.adaptive_max_pool(x, (4, None)),
    "adaptive_max_pool-indices": lambda x: jaxpool.adaptive_max_pool(
        x, (3, 4), return_indices=True
    ),
    "adaptive_avg_pool": lambda x: jaxpool.adaptive_avg_pool(x, (4, None)),
}


@pytest.mark.parametrize("op", list(TWO_PROGRAMS))
def test_program_fixture_switches_programs(op):
    """``dispatch.force`` makes an op trace a different program for each choice, so the
    ``program`` fixture tests both; outside it, the current backend's program runs."""
    x = jax.ShapeDtypeStruct((2, 3, 10, 9), jnp.float32)
    jaxprs = {}
    for program in dispatch.PROGRAMS:
        with dispatch.force(program):
            jaxprs[program] = str(jax.make_jaxpr(TWO_PROGRAMS[op])(x))
    assert len(set(jaxprs.values())) == len(dispatch.PROGRAMS), op
