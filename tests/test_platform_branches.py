"""The programs that run off the CPU (GPU, TPU), checked here on the CPU.

``max_pool``, ``avg_pool`` and ``adaptive_max_pool`` choose some of their programs with
``lax.platform_dependent``: a CPU runs its own branch, so these tests make every
``platform_dependent`` take its default branch and run the runtime, PyTorch and gradient
checks of the op modules through it.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import oracle
import pytest
import test_adaptive
import test_avg_pool
import test_max_pool

import jaxpool
from jaxpool._src import adaptive
from jaxpool._src import taps as taps_lib
from jaxpool._src import window as window_lib


@pytest.fixture(autouse=True)
def default_branch(monkeypatch):
    """Every ``lax.platform_dependent`` takes its ``default`` branch; the test must use one."""
    taken = []

    def platform_dependent(*args, default, **per_platform):
        taken.append(sorted(per_platform))
        return default(*args)

    jax.clear_caches()
    monkeypatch.setattr(jax.lax, "platform_dependent", platform_dependent)
    yield
    jax.clear_caches()
    assert taken, "no platform-dependent branch was traced"


@pytest.mark.parametrize("config", test_max_pool._grid(seed=20261123, count=48),
                         ids=lambda c: f"{c[0]}")
def test_max_pool_matches_runtime_on_random_grid(config):
    test_max_pool.test_matches_runtime_on_random_grid(config)


@pytest.mark.parametrize("config", test_max_pool._grid(seed=20261124, count=32),
                         ids=lambda c: f"{c[0]}")
def test_max_pool_values_only_match_runtime(config):
    shape, dtype, data_format, opset, _, _, attrs, ties, seed = config
    x = test_max_pool._random_input(np.random.default_rng(seed), shape, dtype, ties=ties)
    with jax.enable_x64(dtype == "float64"):
        expected, _ = test_max_pool._max_pool_runtime(x, opset, **attrs)
        if data_format == "NXC":
            y = oracle.to_ncx(np.asarray(jaxpool.max_pool(oracle.to_nxc(x), data_format="NXC",
                                                          **attrs)))
        else:
            y = np.asarray(jaxpool.max_pool(x, **attrs))
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y, expected, err_msg=str(attrs))


@pytest.mark.parametrize("attrs", test_max_pool.EDGE_ATTRS)
@pytest.mark.parametrize("data", ["constant", "ties", "posinf", "int8_extremes"])
@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_max_pool_edge_cases(attrs, data, data_format):
    test_max_pool.test_edge_cases_match_runtime(attrs, data, data_format)


@pytest.mark.parametrize("dtype", ["float32", "int8", "uint8", "int32"])
def test_max_pool_special_windows(dtype):
    if dtype == "float32":
        test_max_pool.test_nan_propagates_with_the_first_nan_index()
        test_max_pool.test_minus_inf_window_gives_its_first_element()
    else:
        test_max_pool.test_window_of_integer_minima(dtype)
    test_max_pool.test_window_without_input_elements(dtype)


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_max_pool_windows_that_tile_one_axis(data_format):
    for shape, kernel in [((2, 3, 13), 3), ((2, 3, 2, 12), (1, 3))]:
        for dtype in ("float32", "int8"):
            test_max_pool.test_windows_that_tile_one_axis(shape, kernel, dtype, data_format)


@pytest.mark.parametrize("config", test_max_pool._torch_grid(8))
@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_max_pool_matches_pytorch(config, data_format):
    test_max_pool.test_matches_pytorch_values_indices_and_gradients(config, data_format)


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_max_pool_check_grads(data_format, x64):
    for attrs in [dict(kernel=3, strides=2, pads_begin=1, pads_end=1),
                  dict(kernel=(2, 3), strides=(2, 1), auto_pad="same_lower")]:
        test_max_pool.test_check_grads_both_modes_order_two(attrs, data_format, None)
    test_max_pool.test_forward_mode_transformations(None)


def _joint_chain_seeds():
    """The runtime-check seeds whose bins are small enough for the one-chain argmax."""
    for seed in range(0, 100, 2):
        cfg = test_adaptive._config(seed)
        window = window_lib.make_adaptive_window(cfg["shape"], cfg["output_size"], "NCX")
        if math.prod(window.max_bin(i) for i in range(window.nd)) <= adaptive._JOINT_TAPS:
            yield seed


@pytest.mark.parametrize("seed", list(_joint_chain_seeds()))
def test_adaptive_max_matches_runtime(seed):
    test_adaptive.test_max_matches_runtime(seed)


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_adaptive_max_keeps_the_first_maximum_bit_for_bit(data_format):
    for shape, output_size in test_adaptive.BIT_CASES:
        test_adaptive.test_max_keeps_the_first_maximum_bit_for_bit(shape, output_size,
                                                                     data_format)


@pytest.mark.parametrize("dtype", ["float32", "int8", "uint8", "int32"])
@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_adaptive_global_max_matches_runtime(dtype, data_format):
    """One bin per plane: one reduction over the merged spatial axes.  (With NaN, against
    the NumPy reference: the runtime skips NaN.)"""
    rng = np.random.default_rng(len(dtype))
    for shape in [(2, 3, 9), (2, 3, 7, 7), (1, 2, 1, 5), (2, 2, 3, 4, 5)]:
        output_size = [1] * (len(shape) - 2)
        for data in ("random", "ties", "-inf", "nan"):
            if dtype != "float32" and data in ("-inf", "nan"):
                continue
            x = test_adaptive._sample(rng, dtype, shape, ties=data == "ties")
            if data in ("-inf", "nan"):
                x[rng.random(shape) < 0.3] = -np.inf
                x[:, 0] = -np.inf
            if data == "nan":
                x[rng.random(shape) < 0.1] = np.nan
                expected, expected_i = test_adaptive._reference_max(x, output_size)
            else:
                expected, expected_i = oracle.adaptive_max_pool(x, output_size)
            cfg = dict(data_format=data_format, output_size=output_size)
            y, i = test_adaptive._call(jaxpool.adaptive_max_pool, x, cfg, return_indices=True)
            np.testing.assert_array_equal(y, expected, err_msg=f"{shape} {data}")
            np.testing.assert_array_equal(i, expected_i, err_msg=f"{shape} {data}")


@pytest.mark.parametrize("shape, data_format", [
    ((2, 3, 4, 5), "NCX"), ((2, 4, 5, 3), "NXC"), ((3, 2, 7), "NCX"), ((2, 3, 2, 3, 4), "NXC")])
def test_adaptive_global_max_derivatives(shape, data_format, x64):
    test_adaptive.test_global_max_derivatives_read_the_argmax(shape, data_format, None)


def _one_pooled_axis_seeds():
    """The runtime-check seeds with one pooled axis (there a CPU chains over the runs)."""
    for seed in range(100):
        cfg = test_adaptive._config(seed)
        window = window_lib.make_adaptive_window(cfg["shape"], cfg["output_size"], "NCX")
        if adaptive._one_pooled_axis(window):
            yield seed


@pytest.mark.parametrize("seed", list(_one_pooled_axis_seeds())[:16])
def test_adaptive_one_pooled_axis_matches_runtime(seed):
    test_adaptive.test_max_matches_runtime(seed)
    test_adaptive.test_avg_matches_runtime(seed)


def test_adaptive_nan_inf_and_grads(x64):
    test_adaptive.test_nan_and_inf()
    test_adaptive.test_grads(None)
    for nd in (1, 2, 3):
        test_adaptive.test_matches_torch_with_grads(nd)


def _avg_seeds_with_input():
    """The runtime-check seeds where some window holds an input element (the others give 0
    without a reduction)."""
    for seed in range(0, 100, 3):
        cfg = test_avg_pool._config(seed)
        window = window_lib.make_window(
            cfg["shape"], cfg["kernel"], cfg["strides"], cfg["pads_begin"], cfg["pads_end"],
            None, rounding_type=cfg["rounding_type"], auto_pad=cfg["auto_pad"],
            data_format="NCX")
        if next(taps_lib.taps(window), None) is not None:
            yield seed


@pytest.mark.parametrize("seed", list(_avg_seeds_with_input()))
def test_avg_pool_matches_runtime(seed):
    test_avg_pool.test_matches_runtime(seed)


def test_avg_pool_special_cases_and_grads(x64):
    test_avg_pool.test_all_padding_window_with_exclude_pad_is_zero()
    test_avg_pool.test_grads(None)
    for nd in (1, 2, 3):
        test_avg_pool.test_matches_torch(nd, True, False)
        test_avg_pool.test_matches_torch(nd, False, True)


def test_avg_pool_float16_and_integers():
    test_avg_pool.test_float16_accumulates_in_float32()
    for dtype in ("int8", "uint8", "int32"):
        test_avg_pool.test_integer_rounds_half_to_even(dtype, lambda fn, *args: fn(*args))
