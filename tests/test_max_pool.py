"""max_pool against the OpenVINO runtime, PyTorch and ``tests/reference.py``.

The runtime, PyTorch and gradient checks are the classes below, whose tests run through the
``class_program`` fixture: once on the portable program (what GPUs and TPUs run) and once on
the CPU program.
"""

from __future__ import annotations

import itertools
import math
import os
import time

import cases
import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import oracle
import pytest
import reference
import torch
import torch.nn.functional as F
from jax import lax
from jax.test_util import check_grads

import jaxpool

torch.set_num_threads(1)

DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32"]


def _np_dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _random_input(rng, shape, dtype_name, *, ties: bool) -> np.ndarray:
    """Random data; ``ties`` draws from few values so that windows hold equal maxima."""
    dtype = _np_dtype(dtype_name)
    if np.issubdtype(dtype, np.integer):
        # The type's minimum is left out: a window of minima is where the runtime and jaxpool
        # differ (see test_window_of_integer_minima).
        info = np.iinfo(dtype)
        lo, hi = (max(info.min + 1, -6), min(info.max, 6)) if ties else (info.min + 1, info.max)
        if dtype == np.int32 and not ties:
            # The CPU plugin computes int32 pooling in float32: exact up to 2**24 only.
            lo, hi = -(2**24), 2**24
        return rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)
    if ties:
        return rng.integers(-4, 5, size=shape).astype(dtype)
    # Values exact in float16 and bfloat16 alike, so every dtype compares with an f32 runtime.
    return (rng.integers(-128, 128, size=shape) / 16.0).astype(np.float32).astype(dtype)


def _runtime_input(x: np.ndarray) -> np.ndarray:
    """The runtime computes bf16 and f64 inputs as exactly representable float32 values."""
    if x.dtype in (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float64)):
        return x.astype(np.float32)
    return x


def _max_pool_runtime(x_ncx, opset, index_element_type="i64", axis=0, **attrs):
    out = oracle.max_pool(
        _runtime_input(x_ncx),
        opset=opset,
        index_element_type=index_element_type,
        axis=axis,
        **attrs,
    )
    y = out[0]
    if np.issubdtype(y.dtype, np.floating):
        # A window with no input element: the runtime gives the lowest finite value, jaxpool
        # the padding value -inf (the random data never holds the lowest finite value).
        y = np.where(y == np.finfo(y.dtype).min, np.asarray(-np.inf, y.dtype), y)
    return y.astype(x_ncx.dtype), (out[1] if opset > 1 else None)


def _bits(a: np.ndarray) -> np.ndarray:
    """The bytes of ``a``, so that equality is bit-exact (signed zeros, NaN payloads)."""
    return np.ascontiguousarray(a).view(np.uint8)


def _compare(x_ncx, data_format, opset, index_element_type, axis, attrs, values_only=False):
    y_ref, i_ref = _max_pool_runtime(
        x_ncx, opset, "i32" if index_element_type == "i32" else "i64", axis, **attrs
    )
    x = x_ncx if data_format == "NCX" else oracle.to_nxc(x_ncx)
    y, i = jaxpool.max_pool(
        x,
        data_format=data_format,
        return_indices=True,
        index_element_type=index_element_type,
        axis=axis,
        **attrs,
    )
    y, i = np.asarray(y), np.asarray(i)
    if data_format == "NXC":
        y, i = oracle.to_ncx(y), oracle.to_ncx(i)
    assert y.dtype == x_ncx.dtype
    np.testing.assert_array_equal(_bits(y), _bits(y_ref), err_msg=str(attrs))
    if i_ref is not None:
        assert i.dtype == (np.int32 if index_element_type == "i32" else np.int64)
        np.testing.assert_array_equal(i, i_ref, err_msg=str(attrs))
    if values_only:  # the program without indices: equal values (a signed zero may differ)
        y = np.asarray(jaxpool.max_pool(x, data_format=data_format, **attrs))
        y = oracle.to_ncx(y) if data_format == "NXC" else y
        assert y.dtype == x_ncx.dtype
        np.testing.assert_array_equal(y, y_ref, err_msg=str(attrs))


# --------------------------------------------------------------------------------------------
# The OpenVINO runtime.
# --------------------------------------------------------------------------------------------


def _grid(seed: int, count: int):
    rng = np.random.default_rng(seed)
    configs = []
    while len(configs) < count:
        nd = int(rng.integers(1, 4))
        spatial = tuple(int(v) for v in rng.integers(1, [12, 9, 6][nd - 1], size=nd))
        opset = int(rng.choice([1, 8, 14]))
        kernel = [int(v) for v in rng.integers(1, 4, size=nd)]
        strides = [int(v) for v in rng.integers(1, 4, size=nd)]
        dilations = [1] * nd if opset == 1 else [int(v) for v in rng.integers(1, 3, size=nd)]
        pads_begin = [int(v) for v in rng.integers(0, 4, size=nd)]  # may exceed the kernel
        pads_end = [int(v) for v in rng.integers(0, 4, size=nd)]
        roundings = ["floor", "ceil"] + (["ceil_torch"] if opset == 14 else [])
        rounding_type = str(rng.choice(roundings))
        auto_pad = str(rng.choice(["explicit", "explicit", "valid", "same_upper", "same_lower"]))
        dtype = str(rng.choice(DTYPES))
        index_element_type = "i32" if dtype != "float64" else str(rng.choice(["i32", "i64"]))
        axis = int(rng.integers(-(nd + 2), nd + 2))
        data_format = str(rng.choice(["NCX", "NXC"]))
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), *spatial)
        dk = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
        if auto_pad == "explicit" and any(
            k > s + b + e for k, s, b, e in zip(dk, spatial, pads_begin, pads_end)
        ):
            continue
        if auto_pad == "valid" and any(k > s for k, s in zip(dk, spatial)):
            continue
        attrs = dict(
            kernel=kernel,
            strides=strides,
            pads_begin=pads_begin,
            pads_end=pads_end,
            rounding_type=rounding_type,
            auto_pad=auto_pad,
        )
        if opset > 1:
            attrs["dilations"] = dilations
        configs.append(
            (
                shape,
                dtype,
                data_format,
                opset,
                index_element_type,
                axis,
                attrs,
                bool(rng.integers(0, 2)),
                int(rng.integers(0, 2**31)),
            )
        )
    return configs


GRID = _grid(seed=20261122, count=360)


def test_all_modes_exercised_by_the_grid():
    assert {c[3] for c, _ in PROGRAM_GRID} == {1, 8, 14}
    assert {c[1] for c, _ in PROGRAM_GRID} == set(DTYPES)
    seen = {(c[6]["rounding_type"], c[6]["auto_pad"]) for c in GRID}
    assert seen == set(
        itertools.product(
            ["floor", "ceil", "ceil_torch"], ["explicit", "valid", "same_upper", "same_lower"]
        )
    )
    assert {c[1] for c in GRID} == set(DTYPES)
    assert {len(c[0]) for c in GRID} == {3, 4, 5}
    assert {c[2] for c in GRID} == {"NCX", "NXC"}
    assert {c[3] for c in GRID} == {1, 8, 14}


def test_refuses_what_the_runtime_refuses():
    x = np.zeros((1, 1, 4, 4), np.float32)
    attrs = dict(
        kernel=[3, 3], strides=[1, 1], pads_begin=[0, 0], pads_end=[0, 0], dilations=[3, 1]
    )
    with pytest.raises(RuntimeError):
        oracle.max_pool(x, **attrs)
    with pytest.raises(ValueError, match="`kernel`"):
        jaxpool.max_pool(x, **attrs)


SPEC_INPUT = [[-1, 2, 3], [4, 5, -6], [-7, 8, 9]]
SPEC_EXAMPLES = [
    ([[SPEC_INPUT]], dict(kernel=[2, 2], strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1])),
    ([[[-1, 2, 3, 5, -7, 9, 1]]], dict(kernel=[3], strides=[1], auto_pad="valid")),
    ([[SPEC_INPUT]], dict(kernel=[2, 2], strides=[1, 1], auto_pad="same_lower")),
    (
        [[SPEC_INPUT, [[2, -1, 5], [6, -7, 1], [8, 2, -3]]]],
        dict(kernel=[2, 2], strides=[1, 1], auto_pad="same_upper"),
    ),
    ([[SPEC_INPUT]], dict(kernel=[2, 2], strides=[2, 2], auto_pad="valid", rounding_type="ceil")),
    (
        [[[[1, 2, 3], [4, 5, 6], [7, 8, 9]]]],
        dict(kernel=[2, 2], strides=[1, 1], dilations=[2, 2], pads_begin=[1, 1], pads_end=[1, 1]),
    ),
]


@pytest.mark.parametrize("example", range(7))
def test_specification_examples_as_the_runtime_computes_them(example):
    if example < 6:
        data, attrs = SPEC_EXAMPLES[example]
        axis = 0
    else:
        data = [[[[1, 2, 3], [4, 5, 6], [7, 8, 9]], [[10, 11, 12], [13, 14, 15], [16, 17, 18]]]]
        attrs, axis = dict(kernel=[2, 2], strides=[1, 1]), 2
    x = np.asarray(data, np.float32)
    _compare(x, "NCX", 8, "i32", axis, attrs)


def test_specification_example_1_differs_from_the_runtime():
    # The text of MaxPool-8's Example 1 shows -6 (index 5) at output (1, 3); the window there
    # holds input elements 3 and -6, and the runtime, like jaxpool, gives 3 (index 2).
    x = np.asarray([[SPEC_INPUT]], np.float32)
    y_ref, i_ref = _max_pool_runtime(x, 8, **SPEC_EXAMPLES[0][1])
    y, i = jaxpool.max_pool(x, return_indices=True, **SPEC_EXAMPLES[0][1])
    assert (float(y_ref[0, 0, 1, 3]), int(i_ref[0, 0, 1, 3])) == (3.0, 2)
    assert (float(y[0, 0, 1, 3]), int(i[0, 0, 1, 3])) == (3.0, 2)


@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("auto_pad", ["same_upper", "same_lower"])
@pytest.mark.parametrize("rounding_type", ["floor", "ceil"])
def test_same_padding_with_strides_follows_the_runtime(stride, auto_pad, rounding_type):
    # The specification says H_out = H for same_*; the runtime gives ceil(H / stride).
    x = _random_input(np.random.default_rng(stride), (1, 2, 7, 8), "float32", ties=False)
    attrs = dict(
        kernel=[3, 2], strides=[stride, stride], auto_pad=auto_pad, rounding_type=rounding_type
    )
    _compare(x, "NCX", 8, "i32", 0, attrs)


# Configurations that both programs run: the portable programs (what GPUs and TPUs run) and
# the CPU programs, on any backend.  (config, whether to run the program without indices too)
PROGRAM_GRID = [(c, k % 3 == 0) for k, c in enumerate(_grid(seed=20261123, count=48))] + [
    (c, True) for c in _grid(seed=20261124, count=32)
]


def _check_grid_config(config, values_only):
    """Values and indices, and the values of the program without indices."""
    shape, dtype, data_format, opset, index_element_type, axis, attrs, ties, seed = config
    x = _random_input(np.random.default_rng(seed), shape, dtype, ties=ties)
    with jax.enable_x64(dtype == "float64" or index_element_type == "i64"):
        _compare(x, data_format, opset, index_element_type, axis, attrs, values_only=values_only)


@pytest.mark.parametrize("k", range(len(GRID)), ids=lambda k: f"{k}-{GRID[k][0]}")
def test_matches_runtime_on_random_grid(k):
    """The programs of the current backend (the CPU programs on a CPU); every third
    configuration also runs the program without indices."""
    _check_grid_config(GRID[k], values_only=k % 3 == 0)


@pytest.mark.usefixtures("class_program")
class TestRuntime:
    """The runtime's values and indices, on both programs."""

    @pytest.mark.parametrize(
        "k", range(len(PROGRAM_GRID)), ids=lambda k: f"{k}-{PROGRAM_GRID[k][0][0]}"
    )
    def test_matches_runtime_on_random_grid(self, k):
        _check_grid_config(*PROGRAM_GRID[k])


# --------------------------------------------------------------------------------------------
# Edge cases.
# --------------------------------------------------------------------------------------------

EDGE_ATTRS = [
    dict(kernel=[3, 3], strides=[2, 2], pads_begin=[1, 1], pads_end=[1, 1]),
    dict(kernel=[2, 2], strides=[3, 3], pads_begin=[2, 2], pads_end=[2, 2], rounding_type="ceil"),
    dict(kernel=[4, 5], strides=[1, 1]),  # the kernel equals the input
    dict(kernel=[1, 1], strides=[1, 1]),
    dict(kernel=[2, 2], strides=[1, 2], dilations=[3, 2], pads_begin=[0, 1], pads_end=[2, 0]),
]


@pytest.mark.usefixtures("class_program")
class TestEdgeCases:
    """Edge cases and special values, on both programs."""

    @pytest.mark.parametrize("attrs", EDGE_ATTRS)
    @pytest.mark.parametrize("data", ["constant", "ties", "posinf", "int8_extremes"])
    @pytest.mark.parametrize("data_format", ["NCX", "NXC"])
    def test_edge_cases_match_runtime(self, attrs, data, data_format):
        rng = np.random.default_rng(7)
        shape = (2, 3, 4, 5)
        if data == "constant":
            x = np.full(shape, 1.5, np.float32)
        elif data == "ties":
            x = rng.integers(0, 2, size=shape).astype(np.float32)
        elif data == "posinf":
            x = rng.standard_normal(shape).astype(np.float32)
            x[rng.random(shape) < 0.2] = np.inf
        else:
            x = rng.choice(np.asarray([-127, 127, 0], np.int8), size=shape)
        _compare(x, data_format, 8, "i32", 0, attrs, values_only=True)

    @pytest.mark.parametrize("shape", [(1, 1, 1), (1, 1, 1, 1), (1, 1, 1, 1, 1), (3, 1, 1, 5)])
    def test_size_one_dims(self, shape):
        x = _random_input(np.random.default_rng(0), shape, "float32", ties=False)
        nd = len(shape) - 2
        for attrs in [
            dict(kernel=[1] * nd),
            dict(kernel=[2] * nd, pads_end=[1] * nd),
            dict(kernel=[1] * nd, strides=[2] * nd, rounding_type="ceil"),
        ]:
            _compare(x, "NCX", 8, "i32", 0, attrs)

    def test_nan_propagates_with_the_first_nan_index(self):
        # A NaN is the window's maximum and the first NaN's index is returned.  The runtime skips
        # NaN instead, which would hide a diverging training run.
        x = np.asarray([[[1.0, np.nan, 3.0, np.nan, 2.0, 0.0, 5.0]]], np.float32)
        y, i = jaxpool.max_pool(x, 3, 1, return_indices=True)
        np.testing.assert_array_equal(np.asarray(y)[0, 0], [np.nan, np.nan, np.nan, np.nan, 5.0])
        np.testing.assert_array_equal(np.asarray(i)[0, 0], [1, 1, 3, 3, 6])
        np.testing.assert_array_equal(
            np.asarray(jaxpool.max_pool(x, 3, 1))[0, 0], [np.nan, np.nan, np.nan, np.nan, 5.0]
        )
        grad = jax.grad(lambda x: jaxpool.max_pool(x, 3, 1)[..., 2:].sum())(jnp.asarray(x))
        np.testing.assert_array_equal(np.asarray(grad)[0, 0], [0, 0, 0, 2, 0, 0, 1])

    def test_minus_inf_window_gives_its_first_element(self):
        # -inf and the first element of the window; the runtime gives the lowest finite value and
        # index 0 of the plane.
        x = np.asarray([[[5.0, -np.inf, -np.inf, -np.inf, -np.inf]]], np.float32)
        y, i = jaxpool.max_pool(x, 2, 2, 1, 0, return_indices=True)
        np.testing.assert_array_equal(np.asarray(y)[0, 0], [5.0, -np.inf, -np.inf])
        np.testing.assert_array_equal(np.asarray(i)[0, 0], [0, 1, 3])
        grad = jax.grad(lambda x: jaxpool.max_pool(x, 2, 2, 1, 0).sum())(jnp.asarray(x))
        np.testing.assert_array_equal(np.asarray(grad)[0, 0], [1, 1, 0, 1, 0])

    @pytest.mark.parametrize("data_format", ["NCX", "NXC"])
    @pytest.mark.parametrize("dtype", ["float32", "int8", "int32"])
    @pytest.mark.parametrize("shape, kernel", [((2, 3, 13), 3), ((2, 3, 2, 12), (1, 3))])
    def test_windows_that_tile_one_axis(self, shape, kernel, dtype, data_format):
        """Windows with stride = kernel along one axis and no padding (on a CPU, one reduction of
        (value, index) pairs): the first NaN, the first of ties (its bits: -0.0 before 0.0 stays
        -0.0), and in a window of the type's minimum its first element."""
        rng = np.random.default_rng(3)
        if dtype == "float32":
            choices = np.asarray([-0.0, 0.0, 1.0, np.nan, -np.inf], np.float32)
        else:
            choices = np.asarray([np.iinfo(dtype).min, 0, 1], dtype)
        x = rng.choice(
            choices, size=shape, p=None if dtype != "float32" else [0.3, 0.3, 0.15, 0.1, 0.15]
        )
        x[..., :3] = choices[-1] if dtype == "float32" else choices[0]  # a window of the lowest
        expected, expected_i = reference.max_pool(x, kernel, axis=0)
        nxc = data_format == "NXC"
        xin = oracle.to_nxc(x) if nxc else x
        y, i = jaxpool.max_pool(xin, kernel, data_format=data_format, return_indices=True)
        y, i = (oracle.to_ncx(np.asarray(a)) if nxc else np.asarray(a) for a in (y, i))
        np.testing.assert_array_equal(_bits(y), _bits(expected))
        np.testing.assert_array_equal(i, expected_i)
        y_only = jaxpool.max_pool(xin, kernel, data_format=data_format)
        y_only = oracle.to_ncx(np.asarray(y_only)) if nxc else np.asarray(y_only)
        np.testing.assert_array_equal(y_only, expected)  # values: a signed zero may differ
        if dtype == "float32":
            ct = rng.standard_normal(y.shape).astype(np.float32)
            ct_in = oracle.to_nxc(ct) if nxc else ct
            grad = jax.grad(
                lambda v: jnp.sum(jaxpool.max_pool(v, kernel, data_format=data_format) * ct_in)
            )(jnp.asarray(xin))
            grad = oracle.to_ncx(np.asarray(grad)) if nxc else np.asarray(grad)
            np.testing.assert_array_equal(grad, reference.max_unpool(ct, expected_i, shape))

    @pytest.mark.parametrize("dtype", ["int8", "uint8", "int32"])
    def test_window_of_integer_minima(self, dtype):
        # Like a window of -inf, a window whose elements all equal the integer type's minimum is a
        # tie, and its first element wins.  The runtime gives index 0 of the plane there.
        lowest = np.iinfo(dtype).min
        x = np.asarray([[[3, lowest, lowest, lowest, lowest]]], dtype)
        y, i = jaxpool.max_pool(x, 2, 2, 1, 0, return_indices=True)
        np.testing.assert_array_equal(np.asarray(y)[0, 0], [3, lowest, lowest])
        np.testing.assert_array_equal(np.asarray(i)[0, 0], [0, 1, 3])
        np.testing.assert_array_equal(
            np.asarray(jaxpool.max_pool(x, 2, 2, 1, 0))[0, 0], [3, lowest, lowest]
        )

    @pytest.mark.parametrize("dtype", ["float32", "int8", "uint8", "int32"])
    def test_window_without_input_elements(self, dtype):
        # Ceil rounding with large pads creates windows that hold only padding: the value is the
        # padding value (-inf; the type's minimum for integers), the index is the first element of
        # the plane (as the runtime gives), and no gradient flows from there.
        x = _random_input(np.random.default_rng(1), (2, 3, 2), dtype, ties=False)
        attrs = dict(kernel=[1], strides=[3], pads_begin=[3], pads_end=[3], rounding_type="ceil")
        y, i = jaxpool.max_pool(x, return_indices=True, **attrs)
        _, i_ref = _max_pool_runtime(x, 8, **attrs)
        np.testing.assert_array_equal(np.asarray(i), i_ref)
        lowest = -np.inf if dtype == "float32" else np.iinfo(dtype).min
        np.testing.assert_array_equal(np.asarray(y)[..., 0], np.full((2, 3), lowest, dtype))
        np.testing.assert_array_equal(np.asarray(y)[..., 1:2], x[..., 0:1])
        np.testing.assert_array_equal(np.asarray(jaxpool.max_pool(x, **attrs)), np.asarray(y))
        if dtype == "float32":
            grad = jax.grad(lambda x: jaxpool.max_pool(x, **attrs).sum())(jnp.asarray(x))
            np.testing.assert_array_equal(np.asarray(grad), np.ones_like(x) * [1, 0])

    @pytest.mark.parametrize("seed", range(3))
    @pytest.mark.parametrize(
        "config",
        [
            dict(kernel=3, strides=1, pads_begin=1, pads_end=1),
            dict(kernel=2, strides=2, pads_begin=1, pads_end=0, rounding_type="ceil", dilations=2),
        ],
    )
    def test_specials_and_gradient(self, config, seed):
        x = cases.special(seed)
        y, i = jaxpool.max_pool(x, **config, return_indices=True, axis=0)
        y_ref, i_ref = reference.max_pool(x, **config, axis=0)
        np.testing.assert_array_equal(np.asarray(y), y_ref)
        np.testing.assert_array_equal(np.asarray(i), i_ref)
        ct = np.random.default_rng(seed + 10).integers(1, 5, y.shape).astype(np.float32)
        grad = jax.grad(lambda x: jnp.sum(jaxpool.max_pool(x, **config) * ct))(x)
        expected = np.zeros(x.size, np.float32)
        np.add.at(expected, i_ref.ravel(), ct.ravel())  # every window holds input
        assert np.all(np.isfinite(np.asarray(grad)))
        np.testing.assert_array_equal(np.asarray(grad).reshape(-1), expected)

    def test_numeric_policy_by_hand(self):
        nan, inf = np.nan, np.inf
        x = np.array([[[1, nan, nan, 5, -inf, -inf, inf, nan, 2, 2]]], np.float32)
        y, i = jaxpool.max_pool(x, 2, 2, return_indices=True)
        np.testing.assert_array_equal(np.asarray(y)[0, 0], [nan, nan, -inf, nan, 2])
        np.testing.assert_array_equal(np.asarray(i)[0, 0], [1, 2, 4, 7, 8])
        # A window in the padding only: -inf, the plane's first element, no gradient.
        x = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2)
        y, i = jaxpool.max_pool(x, 1, 2, 0, 2, rounding_type="ceil", return_indices=True, axis=0)
        np.testing.assert_array_equal(np.asarray(y)[..., -1], np.full((2, 3), -inf))
        np.testing.assert_array_equal(np.asarray(i)[..., -1], np.arange(6).reshape(2, 3) * 2)
        g = jax.grad(
            lambda x: jnp.sum(
                jnp.where(
                    jnp.isfinite(jaxpool.max_pool(x, 1, 2, 0, 2, rounding_type="ceil")),
                    jaxpool.max_pool(x, 1, 2, 0, 2, rounding_type="ceil"),
                    0,
                )
            )
        )(x)
        np.testing.assert_array_equal(np.asarray(g)[..., 0], 1)
        np.testing.assert_array_equal(np.asarray(g)[..., 1], 0)


# --------------------------------------------------------------------------------------------
# PyTorch.
# --------------------------------------------------------------------------------------------

TORCH_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}


def _torch_grid(count: int):
    rng = np.random.default_rng(99)
    configs = []
    while len(configs) < count:
        nd = int(rng.integers(1, 4))
        spatial = tuple(int(v) for v in rng.integers(3, [16, 10, 7][nd - 1], size=nd))
        kernel = tuple(int(v) for v in rng.integers(1, 4, size=nd))
        strides = tuple(int(v) for v in rng.integers(1, 4, size=nd))
        dilations = tuple(int(v) for v in rng.integers(1, 3, size=nd))
        pads = tuple(int(rng.integers(0, k // 2 + 1)) for k in kernel)
        ceil_mode = bool(rng.integers(0, 2))
        if any((k - 1) * d + 1 > s + 2 * p for k, d, s, p in zip(kernel, dilations, spatial, pads)):
            continue
        configs.append((spatial, kernel, strides, dilations, pads, ceil_mode))
    return configs


TORCH_GRID = _torch_grid(40)


def _check_pytorch_config(config, data_format):
    spatial, kernel, strides, dilations, pads, ceil_mode = config
    nd = len(spatial)
    rng = np.random.default_rng(sum(spatial) + sum(kernel))
    x = rng.permutation(math.prod((2, 3, *spatial))).reshape(2, 3, *spatial).astype(np.float32)
    xt = torch.tensor(x, requires_grad=True)
    yt, it = TORCH_POOL[nd](
        xt, kernel, strides, pads, dilations, ceil_mode=ceil_mode, return_indices=True
    )
    ct = rng.standard_normal(yt.shape).astype(np.float32)
    yt.backward(torch.tensor(ct))

    def pool(x):
        return jaxpool.max_pool(
            x,
            kernel,
            strides,
            pads,
            pads,
            dilations=dilations,
            rounding_type="ceil_torch" if ceil_mode else "floor",
            data_format=data_format,
            return_indices=True,
            axis=2,
        )

    to_layout = (lambda a: a) if data_format == "NCX" else oracle.to_nxc
    from_layout = (lambda a: a) if data_format == "NCX" else oracle.to_ncx
    y, i = pool(to_layout(x))
    np.testing.assert_array_equal(from_layout(np.asarray(y)), yt.detach().numpy())
    np.testing.assert_array_equal(from_layout(np.asarray(i)), it.numpy())
    grad = jax.grad(lambda x: jnp.vdot(pool(x)[0], to_layout(ct)))(to_layout(x))
    reference.assert_sums_equal(from_layout(np.asarray(grad)), xt.grad.numpy())


@pytest.mark.parametrize("config", TORCH_GRID)
@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_matches_pytorch_values_indices_and_gradients(config, data_format):
    """On the programs of the current backend."""
    _check_pytorch_config(config, data_format)


@pytest.mark.usefixtures("class_program")
class TestPyTorch:
    """PyTorch's values, indices and gradients, on both programs."""

    @pytest.mark.parametrize("config", TORCH_GRID[:8])
    @pytest.mark.parametrize("data_format", ["NCX", "NXC"])
    def test_matches_pytorch_values_indices_and_gradients(self, config, data_format):
        _check_pytorch_config(config, data_format)


# --------------------------------------------------------------------------------------------
# Gradients.
# --------------------------------------------------------------------------------------------


def test_indices_do_not_carry_gradients():
    x = jnp.arange(16.0).reshape(1, 1, 4, 4)

    def f(x):
        y, i = jaxpool.max_pool(x, 2, return_indices=True)
        return (y * i.astype(y.dtype)).sum()

    expected = np.zeros(16)
    expected[[5, 7, 13, 15]] = [5, 7, 13, 15]
    np.testing.assert_array_equal(np.asarray(jax.grad(f)(x)).ravel(), expected)


@pytest.mark.usefixtures("class_program")
class TestGradients:
    """Gradients and forward-mode derivatives, on both programs."""

    @pytest.mark.parametrize(
        "attrs",
        [
            dict(kernel=3, strides=2, pads_begin=1, pads_end=1),
            dict(kernel=2, strides=1, dilations=2, rounding_type="ceil", pads_end=1),
            dict(kernel=(2, 3), strides=(2, 1), auto_pad="same_lower"),
        ],
    )
    @pytest.mark.parametrize("data_format", ["NCX", "NXC"])
    def test_check_grads_both_modes_order_two(self, attrs, data_format, x64):
        x = np.random.default_rng(3).permutation(2 * 3 * 6 * 5).reshape(2, 3, 6, 5) / 7.0
        if data_format == "NXC":
            x = oracle.to_nxc(x)

        def pool(x):
            return jaxpool.max_pool(x, data_format=data_format, **attrs)

        check_grads(pool, (jnp.asarray(x, jnp.float64),), order=2, modes=("fwd", "rev"))

    def test_forward_mode_transformations(self, x64):
        x = jnp.asarray(np.random.default_rng(4).permutation(48).reshape(1, 3, 4, 4), jnp.float64)

        def pool(x):
            return jaxpool.max_pool(x, 2, 1, dilations=1, pads_end=1, rounding_type="ceil")

        y, y_dot = jax.jvp(pool, (x,), (jnp.ones_like(x),))
        np.testing.assert_array_equal(np.asarray(y_dot), np.ones(y.shape))
        y_lin, f_lin = jax.linearize(pool, x)
        np.testing.assert_array_equal(np.asarray(f_lin(x)), np.asarray(y))
        np.testing.assert_array_equal(
            np.asarray(jax.jacfwd(pool)(x)), np.asarray(jax.jacrev(pool)(x))
        )
        hessian = jax.hessian(lambda x: pool(x).sum())(x)
        np.testing.assert_array_equal(np.asarray(hessian), np.zeros(hessian.shape))


# --------------------------------------------------------------------------------------------
# Dtypes, index types and sizes.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_output_dtypes(dtype):
    x = _random_input(np.random.default_rng(5), (1, 2, 5, 5), dtype, ties=True)
    with jax.enable_x64(dtype == "float64"):
        y, i = jaxpool.max_pool(x, 2, return_indices=True)
        assert y.dtype == x.dtype
        assert i.dtype == (np.int64 if dtype == "float64" else np.int32)


def test_index_element_type_forms(x64):
    x = np.zeros((1, 1, 4, 4), np.float32)
    for form, dtype in [
        ("i32", np.int32),
        ("i64", np.int64),
        (jnp.int32, np.int32),
        (jnp.int64, np.int64),
        (None, np.int64),
    ]:
        _, i = jaxpool.max_pool(x, 2, return_indices=True, index_element_type=form)
        assert i.dtype == dtype


def test_attribute_forms_are_equivalent():
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 6)).astype(np.float32)
    a = jaxpool.max_pool(x, 2)
    for kernel in [(2, 2), [2, 2], np.asarray([2, 2]), np.int64(2)]:
        np.testing.assert_array_equal(np.asarray(jaxpool.max_pool(x, kernel)), np.asarray(a))


HUGE = jax.ShapeDtypeStruct((2**12, 2**10, 2**5, 2**5), jnp.float32)  # 2**32 elements, 16 GiB


@pytest.mark.parametrize("axis", [1, 2, 3, -1])
def test_int32_indices_within_a_plane_fit(axis):
    """Indices over the whole tensor overflow int32 (test_errors_windows.py); within a plane they
    fit, checked abstractly."""
    y, i = jax.eval_shape(lambda x: jaxpool.max_pool(x, 2, return_indices=True, axis=axis), HUGE)
    assert y.shape == i.shape == (2**12, 2**10, 16, 16)
    assert y.dtype == jnp.float32 and i.dtype == jnp.int32
    big = jax.ShapeDtypeStruct((2**12, 2**10, 2**10), jnp.int8)
    y, i = jax.eval_shape(lambda x: jaxpool.max_pool(x, 2, return_indices=True, axis=2), big)
    assert y.shape == i.shape == (2**12, 2**10, 2**9)


def test_int64_indices_fit_with_x64(x64):
    y, i = jax.eval_shape(
        lambda x: jaxpool.max_pool(x, 2, return_indices=True, axis=0, index_element_type="i64"),
        HUGE,
    )
    assert i.dtype == jnp.int64 and i.shape == (2**12, 2**10, 16, 16)


BIG_SHAPE = (16, 16, 1024, 1024)  # 2**28 float32 elements: 1 GiB


@pytest.mark.skipif(os.environ.get("JAXPOOL_SKIP_BIG") == "1", reason="JAXPOOL_SKIP_BIG=1")
def test_one_gib_input():
    @jax.jit
    def make():  # a cheap hash of the position: irregular values, some ties
        i = lax.iota(jnp.uint32, 2**28).reshape(BIG_SHAPE)
        return ((i * np.uint32(2654435761)) >> 8).astype(jnp.float32)

    @jax.jit
    def check(x):
        y, i = jaxpool.max_pool(x, 2, 2, return_indices=True, axis=2)
        expected = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        planes = x.reshape(*BIG_SHAPE[:2], -1)
        at_index = jnp.take_along_axis(planes, i.reshape(*BIG_SHAPE[:2], -1), axis=2)
        row, col = i // BIG_SHAPE[3], i % BIG_SHAPE[3]
        out_row = lax.broadcasted_iota(jnp.int32, y.shape, 2)
        out_col = lax.broadcasted_iota(jnp.int32, y.shape, 3)
        in_window = (row // 2 == out_row) & (col // 2 == out_col)
        return (
            jnp.array_equal(y, expected),
            jnp.array_equal(at_index.reshape(y.shape), y),
            jnp.all(in_window),
            y.shape,
        )

    start = time.perf_counter()
    x = make()
    same_values, values_at_indices, indices_in_window, shape = check(x)
    elapsed = time.perf_counter() - start
    del x
    assert shape == (16, 16, 512, 512)
    assert bool(same_values)
    assert bool(values_at_indices)
    assert bool(indices_in_window)
    assert elapsed < 120, f"pooling 1 GiB took {elapsed:.1f} s"


# --------------------------------------------------------------------------------------------
# Random attributes, valid and invalid, against tests/reference.py.
# --------------------------------------------------------------------------------------------

FUZZ = cases.fuzz(80)


@FUZZ
@hypothesis.given(cases.sliding_cases(with_dilations=True), st.integers(-5, 5), st.booleans())
def test_fuzz_against_reference(config, axis, return_indices):
    """A valid configuration matches the reference exactly; an invalid one raises
    ``ValueError`` or ``TypeError``, and nothing else may happen."""
    x, attrs = config
    fmt = attrs["data_format"]
    valid = cases.valid_sliding(x, attrs) and -x.ndim <= axis < x.ndim
    if not valid:
        with pytest.raises((ValueError, TypeError)):
            jaxpool.max_pool(
                cases.to_layout(x, fmt), **attrs, return_indices=return_indices, axis=axis
            )
        return
    y_ref, i_ref = reference.max_pool(x, **cases.without_layout(attrs), axis=axis % x.ndim)
    out = jaxpool.max_pool(
        cases.to_layout(x, fmt), **attrs, return_indices=return_indices, axis=axis
    )
    y = out[0] if return_indices else out
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(cases.from_layout(y, fmt), y_ref)
    if return_indices:
        np.testing.assert_array_equal(cases.from_layout(out[1], fmt), i_ref)


@pytest.mark.parametrize("name, dtype", [("int32", np.int32), ("i32", np.int32)])
def test_index_element_type_takes_numpys_names(name, dtype):
    _, i = jaxpool.max_pool(jnp.ones((1, 1, 4)), 2, return_indices=True, index_element_type=name)
    assert i.dtype == dtype
    with jax.enable_x64(True):
        _, i = jaxpool.max_pool(
            jnp.ones((1, 1, 4)), 2, return_indices=True, index_element_type="int64"
        )
        assert i.dtype == np.int64
