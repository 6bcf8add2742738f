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
from cases import COLLECTIVE
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import jaxpool

# The serving tier: every op exported for three platforms or compiled per layout, program and
# sharding (`-m serving`; CI runs it beside the op tests).
pytestmark = pytest.mark.serving

N, C, H, W = 8, 4, 8, 12
# An instruction of the compiled module: its result's shape (an array or a tuple of arrays)
# and its collective.
COLLECTIVE_OP = re.compile(rf"= ([^=]*?) {COLLECTIVE.pattern[2:-2]}(?:-start)?\(")


@pytest.fixture(scope="module")
def mesh():
    devices = jax.devices()
    assert len(devices) >= 8, "conftest.py provides 8 host devices"
    return Mesh(np.array(devices[:8]).reshape(4, 2), ("b", "c"))


def _input(layout, dtype=np.float32):
    """A tie-free NCX input, in ``layout``."""
    rng = np.random.default_rng(0)
    x = rng.permutation(N * C * H * W).reshape(N, C, H, W).astype(dtype) / 7
    return x if layout == "NCX" else np.moveaxis(x, 1, -1)


# An op: a builder of the layout that returns ``(fn, make_args)``: ``fn(*args)`` returns a
# tuple of outputs whose first entry is differentiable, and ``make_args(x)`` the NumPy
# arguments (all in the input's layout).
def _x(call):
    return lambda fmt: ((lambda x: call(x, fmt)), lambda x: (x,))


def _unpool(**window):
    """``max_unpool`` of what ``max_pool(x, 3, 2, 1, 1)`` found, told that window or not."""

    def build(fmt):
        def make_args(x):
            y, i = jaxpool.max_pool(x, 3, 2, 1, 1, data_format=fmt, return_indices=True)
            return np.asarray(y), np.asarray(i)

        def fn(y, i):
            shape = (N, C, H, W) if fmt == "NCX" else (N, H, W, C)
            return (jaxpool.max_unpool(y, i, shape, axis=0, data_format=fmt, **window),)

        return fn, make_args

    return build


def _max_pool_index_axes(x, fmt):
    """The values and the indices counted from each axis but the batch's."""
    outs = [
        jaxpool.max_pool(x, 3, 2, 1, 1, data_format=fmt, return_indices=True, axis=axis)
        for axis in (1, 2, -1)
    ]
    return (outs[0][0], *(i for _, i in outs))


WINDOW = dict(kernel=3, strides=2, pads_begin=1, pads_end=1)
OPS = {
    "max_pool": _x(
        lambda x, f: jaxpool.max_pool(x, 3, 2, 1, 1, data_format=f, return_indices=True)
    ),
    "avg_pool": _x(lambda x, f: (jaxpool.avg_pool(x, 3, 2, 1, 1, data_format=f),)),
    "adaptive_max_pool": _x(
        lambda x, f: jaxpool.adaptive_max_pool(x, (3, 5), data_format=f, return_indices=True)
    ),
    "global_max_pool": _x(
        lambda x, f: jaxpool.adaptive_max_pool(x, 1, data_format=f, return_indices=True)
    ),
    "adaptive_avg_pool": _x(lambda x, f: (jaxpool.adaptive_avg_pool(x, (3, 5), data_format=f),)),
    "max_unpool": _unpool(**WINDOW),
    "max_unpool_scatter": _unpool(),
    # Indices that restart per channel, plane or row need no offset of the shard either.
    "max_pool_index_axes": _x(_max_pool_index_axes),
}
UNPOOL_WINDOWS = {"max_unpool": WINDOW, "max_unpool_scatter": {}}

# name -> (layout, partition spec of every argument): batch and channel sharding, which stays
# local (outputs sharded alike), and H over 4 devices and W over 2, where windows and bins
# straddle the blocks on both axes.
SHARDINGS = {
    "batch_channel-NCX": ("NCX", P("b", "c")),
    "batch_channel-NXC": ("NXC", P("b", None, None, "c")),
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


def _put(arrays, mesh, spec):
    return tuple(jax.device_put(a, NamedSharding(mesh, spec)) for a in arrays)


def _vjp_fn(fn):
    """``(ct, *args) -> d sum(fn(*args)[0] * ct) / d args[0]`` through ``jax.grad``."""

    def grad(ct, *args):
        return jax.grad(lambda a0: jnp.sum(fn(a0, *args[1:])[0] * ct))(args[0])

    return grad


def _cotangent(fn, args, seed=1):
    shape = jax.eval_shape(fn, *args)[0].shape
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _assert_sharded_like(out, mesh, spec, what):
    assert out.sharding.is_equivalent_to(NamedSharding(mesh, spec), out.ndim), (
        f"{what} has sharding {out.sharding.spec}, not {spec}"
    )


@pytest.mark.parametrize(
    "op,sharding",
    [
        (op, sharding)
        for op in OPS
        for sharding in SHARDINGS
        if op in SPATIAL_COLLECTIVES or sharding.startswith("batch")
    ],
)
def test_sharded_jit(mesh, op, sharding, program, request):
    """The single-device results, forward and gradient (``axis=0`` indices, which are global
    positions, included).  Batch and channel sharding: the sharding kept and no collective.  A
    map split along H and W: the collectives the op needs (``SPATIAL_COLLECTIVES``) and no
    all-gather of the features."""
    layout, spec = SHARDINGS[sharding]
    spatial = sharding.startswith("H_W")
    for key in ((op, program, layout), (op, program, None)):
        if spatial and key in SPATIAL_MISSES:
            request.applymarker(pytest.mark.xfail(strict=True, reason=SPATIAL_MISSES[key]))
    fn, make_args = OPS[op](layout)
    args = make_args(_input(layout))
    grad = _vjp_fn(fn)
    step = jax.jit(lambda ct, *args: (*fn(*args), grad(ct, *args)))
    ct = _cotangent(fn, args)
    expected = step(ct, *args)

    # The cotangent on every device where the outputs' blocks are not the input's.
    sharded = (ct, *_put(args, mesh, spec)) if spatial else _put((ct, *args), mesh, spec)
    compiled = step.lower(*sharded).compile()
    out = compiled(*sharded)
    assert len(out) == len(expected)
    for o, e in zip(out[:-1], expected[:-1], strict=True):
        assert o.dtype == e.dtype
        np.testing.assert_array_equal(np.asarray(o), np.asarray(e))
    np.testing.assert_allclose(np.asarray(out[-1]), np.asarray(expected[-1]), rtol=1e-6, atol=1e-6)
    text = compiled.as_text()
    if not spatial:
        for k, o in enumerate(out):
            _assert_sharded_like(o, mesh, spec, f"output {k}")
        found = sorted(set(COLLECTIVE.findall(text)))
        assert not found, f"{op} forward and gradient compile to collectives {found}"
        return
    found = []
    for m in COLLECTIVE_OP.finditer(text):
        dims = re.findall(r"[a-z]+[0-9]*\[([0-9,]*)\]", m.group(1))
        size = sum(int(np.prod([int(d) for d in ds.split(",") if d])) for ds in dims)
        found.append((m.group(2), size))
    kinds = {kind for kind, _ in found}
    assert kinds <= SPATIAL_COLLECTIVES[op], f"{op} compiles to collectives {sorted(kinds)}"
    block = N * C * H * W // 8  # the elements of one device's block of the map
    gathered = [size for kind, size in found if kind == "all-gather" and size >= block]
    assert not gathered, f"{op} gathers arrays of {gathered} elements: the features"


def _blockwise(fn, args):
    """Applies ``fn`` to each block of the (4, 2) split of the batch and channel axes (NCX)."""
    fn = jax.jit(fn)
    rows = [
        [fn(*(np.split(np.split(a, 4)[i], 2, 1)[j] for a in args)) for j in (0, 1)]
        for i in range(4)
    ]
    return [
        np.concatenate([np.concatenate([np.asarray(b[k]) for b in row], 1) for row in rows])
        for k in range(len(rows[0][0]))
    ]


@pytest.mark.parametrize("op", [op for op in OPS if op != "max_unpool_scatter"])
def test_shard_map(mesh, op):
    """Inside ``shard_map`` every device pools its own block (indices are block-local); those
    counted within a plane or a row need no offset: they are the global ones."""
    spec = P("b", "c")
    fn, make_args = OPS[op]("NCX")
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
    if op == "max_pool_index_axes":  # values, indices from axes 1, 2 and -1
        for k in (0, 2, 3):
            np.testing.assert_array_equal(np.asarray(out[k]), jax.jit(fn)(*args)[k])

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


@pytest.mark.parametrize("op", [op for op in SPATIAL_COLLECTIVES if op != "max_unpool"])
def test_pmap(op):
    """``pmap`` over 8 devices, one batch element each: forward and gradient."""
    fn, make_args = OPS[op]("NCX")
    args = make_args(_input("NCX"))
    per_device = tuple(a.reshape(8, 1, *a.shape[1:]) for a in args)
    if op in UNPOOL_WINDOWS:
        offsets = np.arange(8).reshape(8, 1, 1, 1, 1) * C * H * W  # each device's own image
        per_device = (per_device[0], per_device[1] - offsets)

        def fn(y, i):
            return (jaxpool.max_unpool(y, i, (1, C, H, W), axis=0, **UNPOOL_WINDOWS[op]),)

    shape = jax.eval_shape(fn, *(a[0] for a in per_device))[0].shape
    ct = np.random.default_rng(3).standard_normal((8, *shape)).astype(np.float32)
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
