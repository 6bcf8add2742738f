"""The Flax modules of `jaxpool.nn`: equal to the functions, trainable, and optional."""

from __future__ import annotations

import functools
import re
import subprocess
import sys

import jax
import numpy as np
import optax
import pytest
from flax import linen, nnx
from flax.linen import pooling as flax_pooling

import jaxpool
from jaxpool import nn as pnn

X = np.random.default_rng(0).standard_normal((2, 7, 6, 3)).astype(np.float32)  # NXC

# (module, its keyword arguments): the function takes the same, lists as tuples, and the module
# is channels-last unless the row says otherwise.
CASES = [
    ("MaxPool", dict(kernel=2)),  # an int kernel fixes no number of spatial axes: one batch axis
    ("MaxPool", dict(kernel=[3, 2], strides=[2, 1], pads_begin=[1, 0], pads_end=[1, 1],
                     dilations=[1, 2], rounding_type="ceil_torch", return_indices=True,
                     index_element_type="i32", axis=2)),
    ("MaxPool", dict(kernel=3, strides=2, auto_pad="same_lower", return_indices=True)),
    ("AvgPool", dict(kernel=3, strides=2, pads_begin=1, pads_end=1, exclude_pad=True,
                     rounding_type="ceil")),
    ("AvgPool", dict(kernel=2, auto_pad="same_upper")),
    ("AvgPool", dict(kernel=2, data_format="NCX")),
    ("AdaptiveMaxPool", dict(output_size=[3, None], return_indices=True)),
    ("AdaptiveMaxPool", dict(output_size=2, data_format="NCX")),
    ("AdaptiveAvgPool", dict(output_size=[4, 5])),
]  # fmt: skip


def function_of(name):
    """The function of a module: ``MaxPool`` -> ``jaxpool.max_pool``."""
    return getattr(jaxpool, re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower())


def as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def assert_equal_outputs(got, want):
    for g, w in zip(as_tuple(got), as_tuple(want), strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_import_jaxpool_does_not_import_flax_or_the_runtime():
    code = (
        "import sys, jaxpool\n"
        "jaxpool.openvino.layer('MaxPool-1', {'kernel': '2', 'strides': '1'})\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('flax', 'openvino', 'optax')]\n"
        "assert not bad, bad\n"
        "import jaxpool.nn.eqx\n"
        "assert 'flax' not in sys.modules  # Equinox layers need no Flax\n"
        "jaxpool.nn.MaxPool\n"
        "assert 'flax' in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name,kwargs", CASES)
def test_modules_match_functions(name, kwargs):
    options = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    module = getattr(pnn, name)(**kwargs)
    # Lists become tuples, so that a module is a static argument of `nnx.jit`.
    assert {k: getattr(module, k) for k in options} == options
    data_format = options.pop("data_format", "NXC")
    first = options.pop("kernel" if "kernel" in options else "output_size")
    ncx = function_of(name)(np.moveaxis(X, -1, 1), first, data_format="NCX", **options)
    nxc = function_of(name)(X, first, data_format="NXC", **options)
    # The same data in either layout gives the same result.
    assert_equal_outputs(tuple(np.moveaxis(np.asarray(o), 1, -1) for o in as_tuple(ncx)), nxc)
    x, want = (X, nxc) if data_format == "NXC" else (np.moveaxis(X, -1, 1), ncx)
    assert_equal_outputs(module(x), want)
    assert_equal_outputs(nnx.jit(lambda m, x: m(x))(module, x), want)
    assert_equal_outputs(getattr(pnn.linen, name)(**kwargs).apply({}, x), want)


def blobs(seed, n=32, size=8):
    """Images with one bright 2x2 blob; the label says which quadrant holds it."""
    rng = np.random.default_rng(seed)
    label = rng.integers(0, 4, n)
    half = size // 2
    row = (label // 2) * half + rng.integers(0, half - 1, n)
    col = (label % 2) * half + rng.integers(0, half - 1, n)
    x = 0.1 * rng.standard_normal((n, size, size, 1)).astype(np.float32)
    for k in range(n):
        x[k, row[k] : row[k] + 2, col[k] : col[k] + 2] += 1
    return x, label.astype(np.int32)


def assert_learns(step):
    """25 steps of Adam on :func:`blobs` (``step()`` -> the loss) halve the loss."""
    with jax.numpy_dtype_promotion("standard"):  # optax's Adam mixes Python floats and ints
        losses = [float(step()) for _ in range(25)]
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.5 * losses[0], losses


def cross_entropy(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


class NnxNet(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.conv = nnx.Conv(1, 8, (3, 3), rngs=rngs)
        self.pool = pnn.MaxPool(2, auto_pad="same_upper")
        self.avg = pnn.AvgPool(2, strides=1, pads_end=1, exclude_pad=True)
        self.head_pool = pnn.AdaptiveMaxPool(2)
        self.linear = nnx.Linear(8 * 4, 4, rngs=rngs)

    def __call__(self, x):
        x = self.avg(self.pool(nnx.relu(self.conv(x))))
        return self.linear(self.head_pool(x).reshape(x.shape[0], -1))


def test_nnx_training_lowers_the_loss():
    model = nnx.jit(lambda: NnxNet(nnx.Rngs(0)))()  # one compilation, not one per init op
    optimizer = nnx.Optimizer(model, optax.adam(3e-2), wrt=nnx.Param)
    x, labels = blobs(1)

    @nnx.jit
    def step(model, optimizer, x, labels):
        loss, grads = nnx.value_and_grad(lambda model: cross_entropy(model(x), labels))(model)
        optimizer.update(model, grads)
        return loss

    assert_learns(lambda: step(model, optimizer, x, labels))


class LinenNet(linen.Module):
    @linen.compact
    def __call__(self, x):
        x = linen.relu(linen.Conv(8, (3, 3))(x))
        y, i = pnn.linen.MaxPool(2, return_indices=True, axis=2, index_element_type="i32")(x)
        x = x + pnn.linen.MaxUnpool(axis=2)(y, i, x.shape)  # a skip through the argmax
        x = pnn.linen.AvgPool(2)(x)
        x = pnn.linen.AdaptiveAvgPool((2, 2))(x)
        return linen.Dense(4)(x.reshape(x.shape[0], -1))


def test_linen_training_lowers_the_loss():
    model = LinenNet()
    x, labels = blobs(2)
    params = jax.jit(model.init)(jax.random.key(3), x)
    tx = optax.adam(3e-2)
    state = [params, tx.init(params)]

    @jax.jit
    def step(params, opt_state):
        loss, grads = jax.value_and_grad(lambda p: cross_entropy(model.apply(p, x), labels))(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def advance():
        state[0], state[1], loss = step(*state)
        return loss

    assert_learns(advance)


# --------------------------------------------------------------------------------------------
# flax.linen's pools are the oracle, values and gradients, of the functions and the modules:
# batch axes as flax takes them (none, one or several, where a tuple window fixes the spatial
# axes) and Flax's own min_pool test cases.
# --------------------------------------------------------------------------------------------

BATCHES = [(), (2, 3)]  # none and several (one is the ops' own rule, tested above)


def tie_free(shape, seed=0):
    """Distinct float32 values, so that every window has one maximum and one minimum."""
    values = np.random.default_rng(seed).permutation(int(np.prod(shape))).reshape(shape)
    return (values / values.size - 0.5).astype(np.float32)


def flax_row(name, x, kernel, strides=None, **kwargs):
    """A module's row on NXC ``x`` (a shape: tie-free data), with flax.linen's keyword
    arguments of its pool of the same name: "SAME" for ``same_upper`` (Flax pads only one batch
    axis where `padding` is explicit), ``count_include_pad`` for ``exclude_pad``."""
    x = tie_free(x) if isinstance(x, tuple) else x
    flax = dict(window_shape=kernel, strides=strides)
    if kwargs.get("auto_pad") == "same_upper":
        flax["padding"] = "SAME"
    if "exclude_pad" in kwargs:
        flax["count_include_pad"] = not kwargs["exclude_pad"]
    kwargs = dict(strides=strides or (1,) * len(kernel), **kwargs)
    ties = "-ties" if np.unique(x).size < x.size else ""
    id = f"{name}-{'x'.join(map(str, x.shape))}{ties}-{flax.get('padding', '')}"
    return pytest.param(name, x, kernel, kwargs, flax, id=id)


ARANGE = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
FLAX_ROWS = [
    *(
        flax_row(name, (*batch, *(7, 6, 5)[: len(kernel)], 3), kernel, strides, **kwargs)
        for batch in BATCHES
        for name, kernel, strides, kwargs in [
            ("MaxPool", (2, 2), (1, 1), {}),
            ("MinPool", (3, 2), (2, 1), dict(auto_pad="same_upper")),
            ("MinPool", (3,), (2,), dict(auto_pad="same_upper")),
            ("AvgPool", (3, 2), (1, 2), dict(auto_pad="same_upper", exclude_pad=True)),
            ("MaxPool", (2, 1, 2), (1, 1, 2), {}),
        ]
    ),
    # flax's linen_test.py min_pool cases
    flax_row("MinPool", ARANGE, (2, 2), auto_pad="valid"),
    flax_row("MinPool", ARANGE[0], (2, 2), auto_pad="valid"),  # no batch axis
    flax_row("MinPool", np.arange(1.0, 5.0, dtype=np.float32).reshape(1, 2, 2, 1), (2, 2),
             auto_pad="same_upper"),
    flax_row("MinPool", np.full((1, 3, 3, 1), 2.0, np.float32), (2, 2), auto_pad="valid"),
    flax_row("MinPool", (1, 4, 8, 8, 3), (2, 2), (2, 2), auto_pad="valid"),  # variable batch dims
    flax_row("MinPool", (8, 8, 3), (2, 2), (2, 2), auto_pad="valid"),  # no batch dims
]  # fmt: skip


@pytest.mark.parametrize("name,x,kernel,kwargs,flax_kwargs", FLAX_ROWS)
def test_pools_match_flax(name, x, kernel, kwargs, flax_kwargs):
    fn, flax_pool = function_of(name), getattr(flax_pooling, function_of(name).__name__)
    ours = functools.partial(fn, kernel=kernel, data_format="NXC", **kwargs)
    theirs = functools.partial(flax_pool, **flax_kwargs)
    module = getattr(pnn, name)(kernel, **kwargs)
    linen_module = getattr(pnn.linen, name)(kernel, **kwargs)

    @jax.jit  # one compilation per row
    def results(x):
        values = (ours(x), theirs(x), module(x), linen_module.apply({}, x))
        grads = [jax.grad(lambda x, f=f: (f(x) ** 2).sum())(x) for f in (ours, theirs)]
        return values, grads, jax.grad(lambda x: ours(x).sum())(x)

    (got, want, nnx_got, linen_got), grads, sum_grad = results(x)
    batch = x.shape[: x.ndim - len(kernel) - 1]
    assert got.shape == want.shape == (*batch, *want.shape[len(batch) :])
    exact = fn is not jaxpool.avg_pool  # sums add in another order
    tol = dict(rtol=0, atol=0) if exact else dict(rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got, want, **tol)
    assert_equal_outputs(nnx_got, got)
    assert_equal_outputs(linen_got, got)
    if np.unique(x).size == x.size:  # tie-free: one argmin per window, both agree
        np.testing.assert_allclose(*grads, **tol)
    else:  # ties: each window's gradient goes to its first minimum (flax's leaves it open)
        first = jaxpool.max_pool(np.ones_like(x), kernel, return_indices=True, axis=2,
                                 data_format="NXC", **kwargs)[1]  # fmt: skip
        ones = np.ones(first.shape, x.dtype)
        np.testing.assert_array_equal(sum_grad, pnn.MaxUnpool(axis=2)(ones, first, x.shape))


def merged_call(fn, x, lead, *args, **kwargs):
    """``fn`` of ``x`` reshaped to one batch axis, its outputs split back into ``lead``."""
    out = fn(x.reshape(int(np.prod(lead)), *x.shape[len(lead) :]), *args, **kwargs)
    return jax.tree.map(lambda o: np.asarray(o).reshape(*lead, *o.shape[1:]), out)


@pytest.mark.parametrize("batch", [(), (2,), (2, 3)], ids=lambda b: f"batch{b}")
@pytest.mark.parametrize("axis", [0, 2])
def test_batch_axes_indices_are_those_of_the_merged_batch(batch, axis):
    """With several batch axes, `axis=0` indices are row-major positions in the whole tensor,
    the batch axes first (the NCX view of the input on one merged batch axis), and `axis=2`
    positions in each (n, c) plane; without a batch axis, `axis=0` counts over (C, *spatial).
    `MaxUnpool` places every maximum back, the rest zero: with the same window on any batch
    axes, without one (a scatter) on one batch axis, as `max_unpool` does."""
    x, lead = tie_free((*batch, 6, 4, 3), seed=1) + 1, len(batch)  # no maximum is 0
    y, i = pnn.MaxPool((2, 2), return_indices=True, axis=axis, index_element_type="i32")(x)
    want = merged_call(jaxpool.max_pool, x, batch, (2, 2), return_indices=True, axis=axis,
                       data_format="NXC")  # fmt: skip
    assert_equal_outputs((y, i), want)
    ncx, y_ncx, i_ncx = (np.moveaxis(np.asarray(a), -1, lead) for a in (x, y, i))
    if axis == 0:  # positions in the NCX view of the whole tensor, batch axes first
        np.testing.assert_array_equal(ncx.ravel()[i_ncx], y_ncx)
    else:  # positions in each plane
        planes = ncx.reshape(*batch, 3, -1)
        picked = np.take_along_axis(planes, i_ncx.reshape(*batch, 3, -1), -1)
        np.testing.assert_array_equal(picked.reshape(y_ncx.shape), y_ncx)
    for kernel in [(2, 2), None][: 1 + (lead == 1)]:
        back = pnn.MaxUnpool(axis=axis, kernel=kernel)(y, i, list(x.shape))
        assert np.count_nonzero(back) == y.size
        np.testing.assert_array_equal(back, np.where(back != 0, x, 0))
        linen_back = pnn.linen.MaxUnpool(axis, kernel=kernel).apply({}, y, i, x.shape)
        np.testing.assert_array_equal(linen_back, back)
    if lead == 1:
        want = jaxpool.max_unpool(y, i, x.shape, axis=axis, data_format="NXC")
        np.testing.assert_array_equal(back, want)


@pytest.mark.parametrize("batch", [(), (2, 3)], ids=lambda b: f"batch{b}")
@pytest.mark.parametrize("name", ["AdaptiveMaxPool", "AdaptiveAvgPool"])
def test_adaptive_batch_axes_are_the_merged_batch(batch, name):
    x = tie_free((*batch, 7, 5, 3), seed=2)
    extra = dict(return_indices=True) if name == "AdaptiveMaxPool" else {}
    want = merged_call(function_of(name), x, batch, (3, None), data_format="NXC", **extra)
    got = getattr(pnn, name)((3, None), **extra)(x)
    assert_equal_outputs(got, want)
    assert_equal_outputs(getattr(pnn.linen, name)((3, None), **extra).apply({}, x), got)


def test_several_batch_axes_export_symbolically():
    module = pnn.MinPool((2, 2), return_indices=True, axis=2)
    specs = jax.export.symbolic_args_specs((tie_free((2, 3, 6, 4, 2)),), "b1, b2, ...")
    exported = jax.export.export(jax.jit(module.__call__))(*specs)
    for shape in [(2, 3, 6, 4, 2), (1, 4, 6, 4, 2)]:
        x = tie_free(shape, seed=3)
        assert_equal_outputs(exported.call(x), module(x))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32"])
def test_min_pool_of_integers_reaches_the_types_ends(dtype, program):
    info = np.iinfo(dtype)
    x = np.random.default_rng(4).integers(info.min, info.max, (2, 3, 4, 6), endpoint=True)
    x = x.astype(dtype)
    x[0, 0, :2, :2], x[0, 1, :2, :2] = info.min, info.max
    y, i = jaxpool.min_pool(x, 2, return_indices=True, axis=2)
    want = x.reshape(2, 3, 2, 2, 3, 2).min(axis=(3, 5))
    assert_equal_outputs(y, want)
    picked = np.take_along_axis(x.reshape(2, 3, -1), np.asarray(i).reshape(2, 3, -1), -1)
    np.testing.assert_array_equal(picked.reshape(want.shape), want)
    # a window in the padding only gives the type's maximum, as +inf for floats
    assert jaxpool.min_pool(x, 2, 2, 0, 2, rounding_type="ceil")[..., -1].max() == info.max


def test_min_pool_nan_and_infinities(program):
    x = np.array([[[3.0, np.nan, 1.0, -np.inf, np.inf, np.inf]]], np.float32)
    y, i = jaxpool.min_pool(x, 2, return_indices=True)
    np.testing.assert_array_equal(y, [[[np.nan, -np.inf, np.inf]]])
    np.testing.assert_array_equal(i, [[[1, 3, 4]]])
    flax_y = flax_pooling.min_pool(x.transpose(0, 2, 1), (2,), (2,))
    np.testing.assert_array_equal(y, flax_y.transpose(0, 2, 1))
