"""The Equinox modules of ``jaxpool.nn.eqx``: Equinox's conventions over the functions."""

from __future__ import annotations

import pathlib
import re
import runpy

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpool
from jaxpool.nn import eqx as peqx

X = jnp.asarray(np.random.default_rng(20261124).standard_normal((4, 3, 9, 7)), jnp.float32)


def _batched(module, x):
    return jax.vmap(module)(x)


# id -> (module, the arguments it and its function take, the function's own): the module
# takes the same arguments after `num_spatial_dims=2`, indices in each plane (`axis=2`).
CASES = {
    "max": ("MaxPool", (3, 2, 1, 1), dict(rounding_type="ceil"), {}),
    "max-indices": ("MaxPool", (2,), dict(return_indices=True), dict(axis=2)),
    "min-indices": ("MinPool", (3, 2, 1, 1), dict(return_indices=True), dict(axis=2)),
    "avg": ("AvgPool", (3, 1, 1, 1), dict(exclude_pad=True), {}),
    "avg-padded-input": (
        "AvgPool", (3, 2, 1, 1), dict(rounding_type="ceil", divisor_rule="padded_input"), {}
    ),
    "avg-divisor-override": ("AvgPool", (2,), dict(divisor_override=3), {}),
    "lp": ("LpPool", (2,), dict(p=3), {}),
    "adaptive-max": ("AdaptiveMaxPool", ((4, None),), dict(return_indices=True), {}),
    "adaptive-avg": ("AdaptiveAvgPool", (3,), {}, {}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_vmap_of_the_module_is_the_function(case):
    name, args, kwargs, own = CASES[case]
    module = getattr(peqx, name)(*args, num_spatial_dims=2, **kwargs)
    function = getattr(jaxpool, re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower())
    expected = function(X, *args, **kwargs, **own)
    jax.tree.map(np.testing.assert_array_equal, _batched(module, X), expected)
    jax.tree.map(np.testing.assert_array_equal, eqx.filter_jit(_batched)(module, X), expected)
    assert not jax.tree.leaves(eqx.filter(module, eqx.is_array))  # configuration is static


def test_window_is_normalised_at_construction():
    """Equal windows give equal, hashable modules, so `eqx.filter_jit` does not retrace."""
    pool = peqx.MaxPool([2, 2], 1, [0, 1], 1, num_spatial_dims=2, dilations=(1, 2))
    window = (pool.kernel, pool.strides, pool.pads_begin, pool.pads_end, pool.dilations)
    assert window == ((2, 2), (1, 1), (0, 1), (1, 1), (1, 2)) and pool.rounding_type == "floor"
    twin = peqx.MaxPool((2, 2), (1, 1), (0, 1), (1, 1), num_spatial_dims=2, dilations=[1, 2])
    assert hash(pool) == hash(twin) and eqx.tree_equal(pool, twin)
    assert peqx.AdaptiveMaxPool([3, None], num_spatial_dims=2).output_size == (3, None)


def test_max_unpool_consumes_the_modules_indices():
    pool = peqx.MaxPool(2, num_spatial_dims=2, return_indices=True)
    unpool = peqx.MaxUnpool(num_spatial_dims=2)
    y, i = jax.vmap(pool)(X)
    got = jax.vmap(lambda y, i: unpool(y, i, X.shape[1:]))(y, i)
    np.testing.assert_array_equal(got, jaxpool.max_unpool(y, i, X.shape, axis=2))
    maxed = peqx.MaxUnpool(num_spatial_dims=2, combine="max")
    best = jax.vmap(lambda y, i: maxed(y, i, X.shape[1:]))(y, i)
    np.testing.assert_array_equal(best, got)  # no overlap: max and sum agree


def test_filter_grad_reaches_the_argmax_and_matches_equinox_where_the_semantics_agree():
    pool = peqx.MaxPool(2, num_spatial_dims=2)
    grad = eqx.filter_grad(lambda x: jnp.sum(_batched(pool, x) ** 2))(X)
    expected = jax.grad(lambda x: jnp.sum(jaxpool.max_pool(x, 2) ** 2))(X)
    np.testing.assert_array_equal(grad, expected)
    ours = _batched(peqx.MaxPool(3, 2, 1, 1, num_spatial_dims=2), X)
    np.testing.assert_array_equal(ours, _batched(eqx.nn.MaxPool2d(3, 2, 1), X))


def test_adaptive_bins_are_pytorchs_not_equinoxs():
    x = jnp.arange(10.0).reshape(1, 10)
    # Bins of 10 over 4: [0, 3), [2, 5), [5, 8), [7, 10) (PyTorch and OpenVINO).
    np.testing.assert_array_equal(peqx.AdaptiveMaxPool(4, num_spatial_dims=1)(x), [[2, 4, 7, 9]])
    np.testing.assert_array_equal(eqx.nn.AdaptiveMaxPool1d(4)(x), [[2, 5, 7, 9]])


def test_example_trains(capsys):
    path = pathlib.Path(__file__).resolve().parent.parent / "examples" / "eqx_classifier.py"
    main = runpy.run_path(str(path))["main"]
    with jax.numpy_dtype_promotion("standard"):  # optax's Adam mixes Python floats and ints
        out = main(epochs=3)
    assert out["losses"][-1] < 0.5 * out["losses"][0], out["losses"]
    assert out["test_accuracy"] >= 0.8, out
    assert capsys.readouterr().out.count("epoch ") == 3
