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


def _nbytes(tree) -> int:
    return sum(
        math.prod(a.shape) * np.dtype(a.dtype).itemsize for a in jax.tree_util.tree_leaves(tree)
    )


def _temp_bytes(fn, *args) -> int:
    memory = jax.jit(fn).lower(*args).compile().memory_analysis()
    assert memory is not None, f"the {jax.default_backend()} backend reports no memory analysis"
    return int(memory.temp_size_in_bytes)


def _bind(fn, args, attrs):
    return lambda x, df, **kw: fn(x, *args, data_format=df, **attrs, **kw)


# (id, NCX shape, (kernel, strides, pads_begin, pads_end)): padded and unpadded 2-D, 3-D, 1-D.
WINDOWS = [
    ("2d-k3s2p1", (8, 32, 64, 64), (3, 2, 1, 1)),
    ("2d-k2s2", (8, 32, 64, 64), (2, 2, 0, 0)),
    ("3d-k3s2p1", (2, 16, 16, 32, 32), (3, 2, 1, 1)),
    ("3d-k2s2", (2, 16, 16, 32, 32), (2, 2, 0, 0)),
    ("1d-k3s2p1", (8, 32, 4096), (3, 2, 1, 1)),
    ("1d-k4s4", (8, 32, 4096), (4, 4, 0, 0)),
]
# (id, NCX shape, (output_size,))
ADAPTIVE = [
    ("2d-50to16", (8, 32, 50, 50), (16,)),
    ("2d-50to16-batch1", (1, 32, 50, 50), (16,)),
    ("2d-7to1", (8, 64, 7, 7), (1,)),
    ("3d-20to6", (2, 16, 20, 20, 20), (6,)),
    ("1d-100to7", (8, 32, 100), (7,)),
]
# (name, op, attributes, backward): the scratch a forward+backward pass may use besides the
# input: the indices of the op's ``return_indices=True`` call ("indices"), nothing more
# ("input"), or no backward pass checked (None).
WINDOW_OPS = [
    ("max_pool-values", jaxpool.max_pool, {}, "indices"),
    ("max_pool-indices", jaxpool.max_pool, dict(return_indices=True), None),
    ("avg_pool-include_pad", jaxpool.avg_pool, {}, "input"),
    ("avg_pool-exclude_pad", jaxpool.avg_pool, dict(exclude_pad=True), "input"),
]
ADAPTIVE_OPS = [
    ("adaptive_max_pool-values", jaxpool.adaptive_max_pool, {}, "indices"),
    ("adaptive_max_pool-indices", jaxpool.adaptive_max_pool, dict(return_indices=True), None),
    ("adaptive_avg_pool", jaxpool.adaptive_avg_pool, {}, "input"),
]
# (id, op(x, data_format, **kwargs), NCX shape, backward)
MEMORY = [
    (f"{op}-{case}", _bind(fn, args, attrs), shape, backward)
    for inputs, ops in ((WINDOWS, WINDOW_OPS), (ADAPTIVE, ADAPTIVE_OPS))
    for case, shape, args in inputs
    for op, fn, attrs, backward in ops
]

# Guards that the current code does not meet yet, by backend and row, in both layouts.  There
# each is expected to fail (strict: once a change makes one pass, its entry must go, so the
# guard holds from then on).  A backend without entries applies every guard.
KNOWN_MISSES = {
    "cpu": {
        # With several pooled axes whose bins form several short runs, adaptive pools reduce
        # one axis at a time and keep the partly reduced intermediate (plus, with indices, its
        # positions).
        "adaptive_max_pool-values-3d-20to6": "per-axis intermediate",
        "adaptive_max_pool-indices-3d-20to6": "per-axis (value, position)",
        "adaptive_avg_pool-3d-20to6": "per-axis intermediate",
    },
}


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("name,op,shape,backward", MEMORY, ids=[row[0] for row in MEMORY])
def test_temp_memory(name, op, shape, backward, data_format, request):
    reason = KNOWN_MISSES.get(jax.default_backend(), {}).get(name)
    if reason is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
    if data_format == "NXC":
        shape = (shape[0], *shape[2:], shape[1])
    x = jax.ShapeDtypeStruct(shape, jnp.float32)

    def fn(x):
        return op(x, data_format)

    temp, limit = _temp_bytes(fn, x), _nbytes(jax.eval_shape(fn, x))
    assert temp <= limit, f"{name}: XLA temp memory {temp} bytes exceeds the output's {limit}"
    if backward is None:
        return
    indices = 0
    if backward == "indices":
        indices = _nbytes(jax.eval_shape(lambda x: op(x, data_format, return_indices=True)[1], x))
    grad = jax.grad(lambda x, ct: jnp.sum(fn(x) * ct))
    temp, limit = _temp_bytes(grad, x, jax.eval_shape(fn, x)), _nbytes(x) + indices
    assert temp <= limit, (
        f"grad of {name}: XLA temp memory {temp} bytes exceeds input + indices {limit} bytes "
        f"(indices {indices} bytes)"
    )


# The program fixture runs two programs: calls whose portable and CPU programs differ; the op
# modules' runtime and gradient checks run each through the ``program`` fixture.
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
