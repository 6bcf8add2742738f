"""Every op on arrays sharded over the 8 host devices that ``conftest.py`` provides, on both
programs (the portable one, which GPUs and TPUs run, and the CPU one).

Batch and channel sharding must stay local: the outputs keep the input's sharding, the
compiled forward and backward hold no collective, and the results (``axis=0`` indices, which
are global positions, included) equal the single-device ones.  A map split along its spatial
axes gives the single-device results too, and the devices exchange what the op needs: halos
only (collective-permutes) for the sliding windows (``max_pool`` with indices and its
gradient, ``avg_pool``, and ``max_unpool`` told the window), partial bins reduced across the
devices for the adaptive pools, and never the features gathered.  ``shard_map`` and ``pmap``
see per-device blocks.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import jaxpool

# The serving tier: every op exported for three platforms or compiled per layout, program and
# sharding (`-m serving`; CI runs it beside the op tests).
pytestmark = pytest.mark.serving

N, C, H, W = 8, 4, 8, 12
KINDS = (
    "all-gather|all-reduce|collective-permute|all-to-all|reduce-scatter|collective-broadcast|"
    "ragged-all-to-all"
)
COLLECTIVE = re.compile(rf"\b({KINDS})\b")
# An instruction of the compiled module: its result's shape (an array or a tuple of arrays)
# and its collective.
COLLECTIVE_OP = re.compile(rf"= ([^=]*?) ({KINDS})(?:-start)?\(")


@pytest.fixture(scope="module")
def mesh():
    devices = jax.devices()
    if len(devices) < 8:
        pytest.skip("needs 8 devices")
    return Mesh(np.array(devices[:8]).reshape(4, 2), ("b", "c"))


def _input(layout, dtype=np.float32):
    """A tie-free NCX input, in ``layout``."""
    rng = np.random.default_rng(0)
    x = rng.permutation(N * C * H * W).reshape(N, C, H, W).astype(dtype) / 7
    return x if layout == "NCX" else np.moveaxis(x, 1, -1)


# Each op: (function name, builder). A builder takes the layout and returns
# ``(fn, make_args)``: ``fn(*args)`` returns a tuple of outputs whose first entry is
# differentiable, and ``make_args(x)`` the NumPy arguments (all in the input's layout).
def _max_pool(axis):
    def build(fmt):
        def fn(x):
            return jaxpool.max_pool(x, 3, 2, 1, 1, data_format=fmt, return_indices=True, axis=axis)

        return fn, lambda x: (x,)

    return "max_pool", build


def _avg_pool(fmt):
    def fn(x):
        return (jaxpool.avg_pool(x, 3, 2, 1, 1, data_format=fmt),)

    return fn, lambda x: (x,)


def _adaptive_max(fmt):
    def fn(x):
        return jaxpool.adaptive_max_pool(x, (3, 5), data_format=fmt, return_indices=True)

    return fn, lambda x: (x,)


def _global_max(fmt):
    def fn(x):
        return jaxpool.adaptive_max_pool(x, 1, data_format=fmt, return_indices=True)

    return fn, lambda x: (x,)


def _adaptive_avg(fmt):
    def fn(x):
        return (jaxpool.adaptive_avg_pool(x, (3, 5), data_format=fmt),)

    return fn, lambda x: (x,)


def _unpool(**window):
    """``max_unpool`` of what ``max_pool(x, 3, 2, 1, 1)`` found, told that window or not."""

    def build(fmt):
        def make_args(x):
            y, i = jaxpool.max_pool(x, 3, 2, 1, 1, data_format=fmt, return_indices=True)
            return np.asarray(y), np.asarray(i)

        def fn(y, i):
            shape = x_shape[fmt]
            return (jaxpool.max_unpool(y, i, shape, axis=0, data_format=fmt, **window),)

        return fn, make_args

    return "max_unpool", build


x_shape = {"NCX": (N, C, H, W), "NXC": (N, H, W, C)}
WINDOW = dict(kernel=3, strides=2, pads_begin=1, pads_end=1)

OPS = {
    "max_pool": _max_pool(0),
    "avg_pool": ("avg_pool", _avg_pool),
    "adaptive_max_pool": ("adaptive_max_pool", _adaptive_max),
    "global_max_pool": ("adaptive_max_pool", _global_max),
    "adaptive_avg_pool": ("adaptive_avg_pool", _adaptive_avg),
    "max_unpool": _unpool(**WINDOW),
    "max_unpool_scatter": _unpool(),
}
UNPOOL_WINDOWS = {"max_unpool": WINDOW, "max_unpool_scatter": {}}

# (layout, partition spec of every argument and output)
LOCAL_SHARDINGS = {
    "batch_channel-NCX": ("NCX", P("b", "c")),
    "batch_channel-NXC": ("NXC", P("b", None, None, "c")),
}
# H over 4 devices and W over 2: windows and bins straddle the blocks on both axes.
SPATIAL_SHARDINGS = {
    "H_W-NCX": ("NCX", P(None, None, "b", "c")),
    "H_W-NXC": ("NXC", P(None, "b", "c", None)),
}
# The collectives each op may compile to on a spatially split map, forward and gradient.
SPATIAL_COLLECTIVES = {
    "max_pool": {"collective-permute"},
    "avg_pool": {"collective-permute"},
    "max_unpool": {"collective-permute"},
    # Bins that straddle the blocks: each device reduces its part, the parts are summed (or
    # maximised) across the devices; the global argmax gathers each device's partial pairs.
    "adaptive_max_pool": {"all-reduce"},
    "adaptive_avg_pool": {"all-reduce"},
    "global_max_pool": {"all-reduce", "all-gather"},
    "max_unpool_scatter": {"collective-permute"},
}
# Known misses of the sharding contract, (op, program, layout or None) -> why.
SPATIAL_MISSES = {
    ("max_pool", "cpu", "NCX"): (
        "the CPU argmax program concatenates interior and border regions along the split "
        "axes (cpu/max_pool.py), which XLA reshards with all-gathers and all-to-alls"
    ),
    ("global_max_pool", "portable", None): (
        "the global argmax merges the split H and W into one axis (adaptive_max_pool.py), "
        "for which XLA gathers the features along W"
    ),
    ("max_unpool_scatter", "portable", None): (
        "without its window max_unpool scatters, and XLA, which cannot bound the positions, "
        "reduces the whole output across the devices"
    ),
    ("max_unpool_scatter", "cpu", None): "as on the portable program",
}


def _build(op, layout):
    _, build = OPS[op]
    return build(layout)


def _put(arrays, mesh, spec):
    return tuple(jax.device_put(a, NamedSharding(mesh, spec)) for a in arrays)


def _collectives(compiled):
    """``(kind, number of elements)`` of each collective in the compiled program."""
    found = []
    for m in COLLECTIVE_OP.finditer(compiled.as_text()):
        dims = re.findall(r"[a-z]+[0-9]*\[([0-9,]*)\]", m.group(1))
        size = sum(int(np.prod([int(d) for d in ds.split(",") if d])) for ds in dims)
        found.append((m.group(2), size))
    return found


def _assert_no_collective(compiled, what: str):
    found = sorted(set(m.group(1) for m in COLLECTIVE.finditer(compiled.as_text())))
    assert not found, f"{what} compiles to collectives {found}"


def _vjp_fn(fn):
    """``(ct, *args) -> d sum(fn(*args)[0] * ct) / d args[0]`` through ``jax.grad``."""

    def grad(ct, *args):
        return jax.grad(lambda a0: jnp.sum(fn(a0, *args[1:])[0] * ct))(args[0])

    return grad


def _with_grad(fn):
    """``(ct, *args) -> (*fn(*args), gradient)``: forward and gradient in one program."""
    grad = _vjp_fn(fn)
    return lambda ct, *args: (*fn(*args), grad(ct, *args))


def _cotangent(fn, args, seed=1):
    shape = jax.eval_shape(fn, *args)[0].shape
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _assert_sharded_like(out, mesh, spec, what):
    assert out.sharding.is_equivalent_to(NamedSharding(mesh, spec), out.ndim), (
        f"{what} has sharding {out.sharding.spec}, not {spec}"
    )


def _assert_equal(out, expected):
    """The outputs equal; the gradient (last) to rounding."""
    assert len(out) == len(expected)
    for o, e in zip(out[:-1], expected[:-1], strict=True):
        assert o.dtype == e.dtype
        np.testing.assert_array_equal(np.asarray(o), np.asarray(e))
    np.testing.assert_allclose(np.asarray(out[-1]), np.asarray(expected[-1]), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("sharding", list(LOCAL_SHARDINGS))
@pytest.mark.parametrize("op", list(OPS))
def test_local_sharding(mesh, op, sharding, program):
    """Batch and channel sharding: sharding kept, no collective, single-device results."""
    layout, spec = LOCAL_SHARDINGS[sharding]
    fn, make_args = _build(op, layout)
    args = make_args(_input(layout))
    step = jax.jit(_with_grad(fn))
    ct = _cotangent(fn, args)
    expected = step(ct, *args)

    sharded = _put((ct, *args), mesh, spec)
    compiled = step.lower(*sharded).compile()
    out = compiled(*sharded)
    _assert_equal(out, expected)
    for k, o in enumerate(out):
        _assert_sharded_like(o, mesh, spec, f"output {k}")
    _assert_no_collective(compiled, f"{op} forward and gradient")


@pytest.mark.parametrize("axis", [1, 2, -1])
def test_local_sharding_max_pool_index_axes(mesh, axis, program):
    x = _input("NCX")

    def fn(x):
        return jaxpool.max_pool(x, 3, 2, 1, 1, return_indices=True, axis=axis)

    expected = jax.jit(fn)(x)
    spec = P("b", "c")
    (sharded,) = _put((x,), mesh, spec)
    compiled = jax.jit(fn).lower(sharded).compile()
    for k, (o, e) in enumerate(zip(compiled(sharded), expected, strict=False)):
        _assert_sharded_like(o, mesh, spec, f"output {k}")
        np.testing.assert_array_equal(np.asarray(o), np.asarray(e))
    _assert_no_collective(compiled, f"max_pool axis={axis}")


@pytest.mark.parametrize("sharding", list(SPATIAL_SHARDINGS))
@pytest.mark.parametrize("op", list(OPS))
def test_spatial_sharding(mesh, op, sharding, program, request):
    """A map split along H and W: the single-device results, forward and gradient, with the
    collectives the op needs (``SPATIAL_COLLECTIVES``) and no all-gather of the features."""
    layout, spec = SPATIAL_SHARDINGS[sharding]
    for key in ((op, program, layout), (op, program, None)):
        if key in SPATIAL_MISSES:
            request.applymarker(pytest.mark.xfail(strict=True, reason=SPATIAL_MISSES[key]))
    fn, make_args = _build(op, layout)
    args = make_args(_input(layout))
    step = jax.jit(_with_grad(fn))
    ct = _cotangent(fn, args)
    expected = step(ct, *args)

    sharded = (ct, *_put(args, mesh, spec))  # the cotangent on every device
    compiled = step.lower(*sharded).compile()
    _assert_equal(compiled(*sharded), expected)
    found = _collectives(compiled)
    kinds = {kind for kind, _ in found}
    assert kinds <= SPATIAL_COLLECTIVES[op], f"{op} compiles to collectives {sorted(kinds)}"
    block = N * C * H * W // 8  # the elements of one device's block of the map
    gathered = [size for kind, size in found if kind == "all-gather" and size >= block]
    assert not gathered, f"{op} gathers arrays of {gathered} elements: the features"


def _blockwise(fn, args):
    """Applies ``fn`` to each block of the (4, 2) split of the batch and channel axes (NCX)."""
    fn = jax.jit(fn)
    rows = []
    for i in range(4):
        row = [
            fn(*(np.split(np.split(a, 4, axis=0)[i], 2, axis=1)[j] for a in args)) for j in range(2)
        ]
        rows.append(
            [np.concatenate([np.asarray(r[k]) for r in row], axis=1) for k in range(len(row[0]))]
        )
    return [np.concatenate([r[k] for r in rows], axis=0) for k in range(len(rows[0]))]


@pytest.mark.parametrize("op", [op for op in OPS if op != "max_unpool_scatter"])
def test_shard_map(mesh, op):
    """Inside ``shard_map`` every device pools its own block (indices are block-local)."""
    spec = P("b", "c")
    fn, make_args = _build(op, "NCX")
    if op in UNPOOL_WINDOWS:
        # Plane-local (axis=2) indices, unpooled by each device into its own block.
        y, i = jaxpool.max_pool(_input("NCX"), 3, 2, 1, 1, return_indices=True, axis=2)
        args = (np.asarray(y), np.asarray(i))

        def fn(y, i):
            shape = (*y.shape[:2], H, W)
            return (jaxpool.max_unpool(y, i, shape, axis=2, **UNPOOL_WINDOWS[op]),)
    else:
        args = make_args(_input("NCX"))
    mapped = jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=(spec,) * len(args), out_specs=spec))
    out = mapped(*_put(args, mesh, spec))
    expected = _blockwise(fn, args)
    assert len(out) == len(expected)
    for k, (o, e) in enumerate(zip(out, expected, strict=False)):
        _assert_sharded_like(o, mesh, spec, f"output {k}")
        np.testing.assert_array_equal(np.asarray(o), e)

    ct = _cotangent(fn, args, seed=2)
    grad = _vjp_fn(fn)
    mapped_grad = jax.jit(
        jax.shard_map(grad, mesh=mesh, in_specs=(spec,) * (len(args) + 1), out_specs=spec)
    )
    np.testing.assert_allclose(
        np.asarray(mapped_grad(*_put((ct, *args), mesh, spec))),
        _blockwise(lambda *a: (grad(*a),), (ct, *args))[0],
        rtol=1e-6,
        atol=1e-6,
    )


def test_shard_map_axis2_indices_equal_global(mesh):
    """Plane-local indices (``axis=2``) need no offset: shard_map gives the global answer."""
    x = _input("NCX")

    def fn(x):
        return jaxpool.max_pool(x, 3, 2, 1, 1, return_indices=True, axis=2)

    mapped = jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=P("b", "c"), out_specs=P("b", "c")))
    for o, e in zip(mapped(x), jax.jit(fn)(x), strict=False):
        np.testing.assert_array_equal(np.asarray(o), np.asarray(e))


@pytest.mark.parametrize("op", [op for op in OPS if op != "max_unpool"])
def test_pmap(op):
    """``pmap`` over 8 devices, one batch element each: forward and gradient."""
    if jax.device_count() < 8:
        pytest.skip("needs 8 devices")
    fn, make_args = _build(op, "NCX")
    args = make_args(_input("NCX"))
    per_device = tuple(a.reshape(8, 1, *a.shape[1:]) for a in args)
    if op in UNPOOL_WINDOWS:
        per_device = (
            per_device[0],
            per_device[1] - (np.arange(8) * C * H * W).reshape(8, 1, 1, 1, 1),
        )

        def fn(y, i):
            return (jaxpool.max_unpool(y, i, (1, C, H, W), axis=0, **UNPOOL_WINDOWS[op]),)

    ct = (
        np.random.default_rng(3)
        .standard_normal((8, *jax.eval_shape(fn, *(a[0] for a in per_device))[0].shape))
        .astype(np.float32)
    )
    out = jax.pmap(fn)(*per_device)
    grads = jax.pmap(_vjp_fn(fn))(ct, *per_device)
    single, single_grad = jax.jit(fn), jax.jit(_vjp_fn(fn))
    for d in range(8):
        expected = single(*(a[d] for a in per_device))
        for o, e in zip(out, expected, strict=False):
            np.testing.assert_array_equal(np.asarray(o[d]), np.asarray(e))
        np.testing.assert_allclose(
            np.asarray(grads[d]),
            np.asarray(single_grad(ct[d], *(a[d] for a in per_device))),
            rtol=1e-6,
            atol=1e-6,
        )
