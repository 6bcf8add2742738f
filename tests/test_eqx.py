"""The Equinox modules of ``jaxpool.nn.eqx``: Equinox's conventions over the functions."""

from __future__ import annotations

import importlib.util
import inspect
import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpool
from jaxpool.nn import eqx as peqx

RNG = np.random.default_rng(20261124)
X = jnp.asarray(RNG.standard_normal((4, 3, 9, 7)), jnp.float32)  # a batch of (C, H, W)


def _batched(module, x):
    return jax.vmap(module)(x)


@pytest.mark.parametrize(
    "module, function",
    [
        (
            peqx.MaxPool(3, 2, 1, 1, num_spatial_dims=2, rounding_type="ceil"),
            lambda x: jaxpool.max_pool(x, 3, 2, 1, 1, rounding_type="ceil"),
        ),
        (
            peqx.MaxPool(2, num_spatial_dims=2, return_indices=True),
            lambda x: jaxpool.max_pool(x, 2, return_indices=True, axis=2),
        ),
        (
            peqx.MinPool(3, 2, 1, 1, num_spatial_dims=2, return_indices=True),
            lambda x: jaxpool.min_pool(x, 3, 2, 1, 1, return_indices=True, axis=2),
        ),
        (
            peqx.AvgPool(3, 1, 1, 1, num_spatial_dims=2, exclude_pad=True),
            lambda x: jaxpool.avg_pool(x, 3, 1, 1, 1, exclude_pad=True),
        ),
        (
            peqx.AvgPool(
                3, 2, 1, 1, num_spatial_dims=2, rounding_type="ceil", divisor_rule="padded_input"
            ),
            lambda x: jaxpool.avg_pool(
                x, 3, 2, 1, 1, rounding_type="ceil", divisor_rule="padded_input"
            ),
        ),
        (
            peqx.AvgPool(2, num_spatial_dims=2, divisor_override=3),
            lambda x: jaxpool.avg_pool(x, 2, divisor_override=3),
        ),
        (
            peqx.LpPool(2, num_spatial_dims=2, p=3),
            lambda x: jaxpool.lp_pool(x, 2, p=3),
        ),
        (
            peqx.AdaptiveMaxPool((4, None), num_spatial_dims=2, return_indices=True),
            lambda x: jaxpool.adaptive_max_pool(x, (4, None), return_indices=True),
        ),
        (peqx.AdaptiveAvgPool(3, num_spatial_dims=2), lambda x: jaxpool.adaptive_avg_pool(x, 3)),
    ],
    ids=[
        "max",
        "max-indices",
        "min-indices",
        "avg",
        "avg-padded-input",
        "avg-divisor-override",
        "lp",
        "adaptive-max",
        "adaptive-avg",
    ],
)
def test_vmap_of_the_module_is_the_function(module, function):
    expected = function(X)
    got = _batched(module, X)
    jax.tree.map(np.testing.assert_array_equal, got, expected)
    got_jit = eqx.filter_jit(_batched)(module, X)
    jax.tree.map(np.testing.assert_array_equal, got_jit, expected)
    assert not jax.tree.leaves(eqx.filter(module, eqx.is_array))  # configuration is static


K = inspect.Parameter.KEYWORD_ONLY

# module: (its function, the arrays the module is called on, the options it keeps; None: all)
MODULES = {
    "MaxPool": (jaxpool.max_pool, 1, None),
    "MinPool": (jaxpool.min_pool, 1, None),
    "AvgPool": (jaxpool.avg_pool, 1, None),
    "LpPool": (jaxpool.lp_pool, 1, None),
    "AdaptiveMaxPool": (jaxpool.adaptive_max_pool, 1, None),
    "AdaptiveAvgPool": (jaxpool.adaptive_avg_pool, 1, None),
    "MaxUnpool": (jaxpool.max_unpool, 3, ("combine",)),
}


def _described(parameters):
    return [(p.name, p.kind, p.default) for p in parameters]


@pytest.mark.parametrize("name", list(MODULES))
def test_modules_take_the_functions_options(name):
    """A keyword-only `num_spatial_dims` ahead of the function's keyword-only options, and
    neither `data_format` nor `axis` (NCX, indices in each channel's plane)."""
    function, arrays, keep = MODULES[name]
    options = [
        p
        for p in list(inspect.signature(function).parameters.values())[arrays:]
        if p.name not in ("data_format", "axis") and (keep is None or p.name in keep)
    ]
    first = next((i for i, p in enumerate(options) if p.kind == K), len(options))
    want = _described(options)
    want.insert(first, ("num_spatial_dims", K, inspect.Parameter.empty))
    assert _described(inspect.signature(getattr(peqx, name)).parameters.values()) == want


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: peqx.MaxPool(num_spatial_dims=2), r"missing 1 required positional.*'kernel'"),
        (lambda: peqx.AvgPool(2, 1, 0, 0, 1, num_spatial_dims=1), r"takes from 2 to 5 posi"),
        (lambda: peqx.LpPool(2, num_spatial_dims=1, q=2), r"unexpected keyword argument 'q'"),
        (lambda: peqx.MaxUnpool(num_spatial_dims=1, kernel=2), r"argument 'kernel'"),
        (lambda: peqx.AdaptiveAvgPool(2), r"keyword-only argument: 'num_spatial_dims'"),
    ],
)
def test_constructor_errors_name_the_argument(build, match):
    with pytest.raises(TypeError, match=match):
        build()


def test_window_is_normalised_at_construction():
    """Equal windows give equal, hashable modules, so `eqx.filter_jit` does not retrace."""
    pool = peqx.MaxPool([2, 2], 1, [0, 1], 1, num_spatial_dims=2, dilations=(1, 2))
    assert (pool.kernel, pool.strides, pool.pads_begin, pool.pads_end) == (
        (2, 2),
        (1, 1),
        (0, 1),
        (1, 1),
    )
    assert pool.dilations == (1, 2) and pool.rounding_type == "floor"
    twin = peqx.MaxPool((2, 2), (1, 1), (0, 1), (1, 1), num_spatial_dims=2, dilations=[1, 2])
    assert hash(pool) == hash(twin) and eqx.tree_equal(pool, twin)
    assert peqx.AdaptiveMaxPool([3, None], num_spatial_dims=2).output_size == (3, None)


def test_max_unpool_consumes_the_modules_indices():
    pool = peqx.MaxPool(2, num_spatial_dims=2, return_indices=True)
    unpool = peqx.MaxUnpool(num_spatial_dims=2)
    y, i = jax.vmap(pool)(X)
    got = jax.vmap(lambda y, i: unpool(y, i, X.shape[1:]))(y, i)
    np.testing.assert_array_equal(got, jaxpool.max_unpool(y, i, X.shape, axis=2))
    best = jax.vmap(
        lambda y, i: peqx.MaxUnpool(num_spatial_dims=2, combine="max")(y, i, X.shape[1:])
    )
    np.testing.assert_array_equal(best(y, i), got)  # no overlap: max and sum agree


def test_filter_grad_reaches_the_argmax():
    pool = peqx.MaxPool(2, num_spatial_dims=2)

    def loss(x):
        return jnp.sum(_batched(pool, x) ** 2)

    grad = eqx.filter_grad(loss)(X)
    expected = jax.grad(lambda x: jnp.sum(jaxpool.max_pool(x, 2) ** 2))(X)
    np.testing.assert_array_equal(grad, expected)


def test_matches_equinox_where_the_semantics_agree():
    ours = _batched(peqx.MaxPool(3, 2, 1, 1, num_spatial_dims=2), X)
    theirs = _batched(eqx.nn.MaxPool2d(3, 2, 1), X)
    np.testing.assert_array_equal(ours, theirs)


def test_adaptive_bins_are_pytorchs_not_equinoxs():
    x = jnp.arange(10.0).reshape(1, 10)
    # Bins of 10 over 4: [0, 3), [2, 5), [5, 8), [7, 10) (PyTorch and OpenVINO).
    np.testing.assert_array_equal(peqx.AdaptiveMaxPool(4, num_spatial_dims=1)(x), [[2, 4, 7, 9]])
    np.testing.assert_array_equal(eqx.nn.AdaptiveMaxPool1d(4)(x), [[2, 5, 7, 9]])


def test_example_trains(capsys):
    path = pathlib.Path(__file__).resolve().parent.parent / "examples" / "eqx_classifier.py"
    spec = importlib.util.spec_from_file_location("example_eqx_classifier", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with jax.numpy_dtype_promotion("standard"):  # optax's Adam mixes Python floats and ints
        out = module.main(epochs=3)
    assert out["losses"][-1] < 0.5 * out["losses"][0], out["losses"]
    assert out["test_accuracy"] >= 0.8, out
    assert capsys.readouterr().out.count("epoch ") == 3
