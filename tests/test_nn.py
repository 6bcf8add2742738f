"""The Flax modules of `jaxpool.nn`: equal to the functions, trainable, and optional."""

from __future__ import annotations

import subprocess
import sys

import jax
import numpy as np
import optax
import pytest
from flax import linen, nnx

import jaxpool
from jaxpool import nn as pnn

X = np.random.default_rng(0).standard_normal((2, 7, 6, 3)).astype(np.float32)  # NXC

# (module kwargs, function, function kwargs); the module adds data_format="NXC".
CASES = [
    ("MaxPool", dict(kernel=2), jaxpool.max_pool, dict(kernel=2)),
    (
        "MaxPool",
        dict(
            kernel=[3, 2],
            strides=[2, 1],
            pads_begin=[1, 0],
            pads_end=[1, 1],
            dilations=[1, 2],
            rounding_type="ceil_torch",
            return_indices=True,
            index_element_type="i32",
            axis=2,
        ),
        jaxpool.max_pool,
        dict(
            kernel=(3, 2),
            strides=(2, 1),
            pads_begin=(1, 0),
            pads_end=(1, 1),
            dilations=(1, 2),
            rounding_type="ceil_torch",
            return_indices=True,
            index_element_type="i32",
            axis=2,
        ),
    ),
    (
        "MaxPool",
        dict(kernel=3, strides=2, auto_pad="same_lower", return_indices=True),
        jaxpool.max_pool,
        dict(kernel=3, strides=2, auto_pad="same_lower", return_indices=True),
    ),
    (
        "AvgPool",
        dict(kernel=3, strides=2, pads_begin=1, pads_end=1, exclude_pad=True, rounding_type="ceil"),
        jaxpool.avg_pool,
        dict(kernel=3, strides=2, pads_begin=1, pads_end=1, exclude_pad=True, rounding_type="ceil"),
    ),
    (
        "AvgPool",
        dict(kernel=2, auto_pad="same_upper"),
        jaxpool.avg_pool,
        dict(kernel=2, auto_pad="same_upper"),
    ),
    (
        "AdaptiveMaxPool",
        dict(output_size=[3, None], return_indices=True),
        jaxpool.adaptive_max_pool,
        dict(output_size=(3, None), return_indices=True),
    ),
    (
        "AdaptiveAvgPool",
        dict(output_size=(4, 5)),
        jaxpool.adaptive_avg_pool,
        dict(output_size=(4, 5)),
    ),
]


def as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def assert_equal_outputs(got, want):
    for g, w in zip(as_tuple(got), as_tuple(want), strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def call_function(fn, kwargs, x, data_format):
    kwargs = dict(kwargs)
    if "kernel" in kwargs:
        return fn(x, kwargs.pop("kernel"), data_format=data_format, **kwargs)
    return fn(x, kwargs.pop("output_size"), data_format=data_format, **kwargs)


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


@pytest.mark.parametrize("name,module_kwargs,fn,fn_kwargs", CASES)
def test_modules_match_functions(name, module_kwargs, fn, fn_kwargs):
    want = call_function(fn, fn_kwargs, X, "NXC")
    # NXC is the modules' default, and the same data in NCX gives the same result.
    ncx = call_function(fn, fn_kwargs, np.moveaxis(X, -1, 1), "NCX")
    assert_equal_outputs(
        tuple(np.moveaxis(np.asarray(o), 1, -1) for o in as_tuple(ncx)),
        tuple(np.asarray(o) for o in as_tuple(want)),
    )

    module = getattr(pnn, name)(**module_kwargs)
    assert_equal_outputs(module(X), want)
    assert_equal_outputs(nnx.jit(lambda m, x: m(x))(module, X), want)

    linen_module = getattr(pnn.linen, name)(**module_kwargs)
    assert_equal_outputs(linen_module.apply({}, X), want)


@pytest.mark.parametrize("axis", [0, 2])
def test_max_unpool_modules(axis):
    y, i = pnn.MaxPool(2, return_indices=True, axis=axis, index_element_type="i32")(X)
    want = jaxpool.max_unpool(y, i, X.shape, axis=axis, data_format="NXC")
    np.testing.assert_array_equal(pnn.MaxUnpool(axis=axis)(y, i, list(X.shape)), want)
    np.testing.assert_array_equal(pnn.linen.MaxUnpool(axis=axis).apply({}, y, i, X.shape), want)
    # Every pooled maximum is back at its place, the rest is zero.
    assert np.count_nonzero(want) == y.size
    np.testing.assert_allclose(np.sort(np.asarray(want)[want != 0]), np.sort(np.ravel(y)))


def test_channels_first_modules():
    x = np.moveaxis(X, -1, 1)
    np.testing.assert_array_equal(pnn.AvgPool(2, data_format="NCX")(x), jaxpool.avg_pool(x, 2))
    np.testing.assert_array_equal(
        pnn.linen.AdaptiveMaxPool(2, data_format="NCX").apply({}, x),
        jaxpool.adaptive_max_pool(x, 2),
    )


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
        def loss_fn(model):
            logits = model(x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    with jax.numpy_dtype_promotion("standard"):  # optax's Adam mixes Python floats and ints
        losses = [float(step(model, optimizer, x, labels)) for _ in range(25)]
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.5 * losses[0], losses


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
    opt_state = tx.init(params)

    @jax.jit
    def step(params, opt_state):
        def loss_fn(params):
            logits = model.apply(params, x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    losses = []
    with jax.numpy_dtype_promotion("standard"):  # optax's Adam mixes Python floats and ints
        for _ in range(25):
            params, opt_state, loss = step(params, opt_state)
            losses.append(float(loss))
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.5 * losses[0], losses
