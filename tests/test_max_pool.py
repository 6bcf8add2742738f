"""max_pool against the OpenVINO runtime, PyTorch and ``tests/reference.py``.

The classes' tests (the runtime, PyTorch and gradient checks) run on both programs
(``class_program``).  (The specification's examples, as the runtime computes them:
test_openvino_bridge.py.)
"""

from __future__ import annotations

import functools
import itertools
import math
import os

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
        # differ (the lowest-* rows of HAND).
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


def _max_pool_runtime(x_ncx, opset, index_element_type="i64", axis=0, **attrs):
    # The runtime computes bf16 and f64 inputs as exactly representable float32 values.
    wide = x_ncx.dtype in (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float64))
    x_ov = x_ncx.astype(np.float32) if wide else x_ncx
    out = oracle.max_pool(
        x_ov, opset=opset, index_element_type=index_element_type, axis=axis, **attrs
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


def _check(x, attrs, y_ref, i_ref, data_format="NCX", values_only=True, ct=None, grad=None):
    """max_pool of NCX ``x`` in ``data_format``: the values bit for bit and the indices (unless
    ``i_ref`` is None); with ``values_only`` the program without indices gives the same values (a
    signed zero may differ); with a cotangent ``ct`` its gradient is ``grad``, by default ``ct``
    added at ``i_ref``.  Returns the indices."""
    xin = cases.to_layout(x, data_format)
    y, i = jaxpool.max_pool(xin, **attrs, data_format=data_format, return_indices=True)
    y, i = cases.from_layout(y, data_format), cases.from_layout(i, data_format)
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(_bits(y), _bits(np.asarray(y_ref, x.dtype)), err_msg=str(attrs))
    if i_ref is not None:
        np.testing.assert_array_equal(i, i_ref, err_msg=str(attrs))
    if values_only:
        y = cases.from_layout(jaxpool.max_pool(xin, **attrs, data_format=data_format), data_format)
        assert y.dtype == x.dtype
        np.testing.assert_array_equal(y, y_ref, err_msg=str(attrs))
    if ct is not None:
        ct_in = cases.to_layout(ct, data_format)
        g = jax.grad(
            lambda v: jnp.sum(jaxpool.max_pool(v, **attrs, data_format=data_format) * ct_in)
        )(jnp.asarray(xin))
        if grad is None:
            grad = reference.max_unpool(ct, i_ref, x.shape, axis=attrs.get("axis", 0))
        np.testing.assert_array_equal(cases.from_layout(g, data_format), grad, err_msg=str(attrs))
    return i


def _compare(x_ncx, data_format, opset, index_element_type, axis, attrs, values_only=False):
    y_ref, i_ref = _max_pool_runtime(x_ncx, opset, index_element_type, axis, **attrs)
    attrs = dict(attrs, index_element_type=index_element_type, axis=axis)
    i = _check(x_ncx, attrs, y_ref, i_ref, data_format, values_only)
    assert i.dtype == (np.int32 if index_element_type == "i32" else np.int64)


def _grid(seed: int, count: int):
    rng = np.random.default_rng(seed)
    configs = []
    while len(configs) < count:
        nd = int(rng.integers(1, 4))
        spatial = tuple(int(v) for v in rng.integers(1, [12, 9, 6][nd - 1], size=nd))
        opset = int(rng.choice([1, 8, 14]))
        kernel, strides = ([int(v) for v in rng.integers(1, 4, size=nd)] for _ in range(2))
        dilations = [1] * nd if opset == 1 else [int(v) for v in rng.integers(1, 3, size=nd)]
        # The pads may exceed the kernel.
        pads_begin, pads_end = ([int(v) for v in rng.integers(0, 4, size=nd)] for _ in range(2))
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
        ties, seed = bool(rng.integers(0, 2)), int(rng.integers(0, 2**31))
        configs.append(
            (shape, dtype, data_format, opset, index_element_type, axis, attrs, ties, seed)
        )
    return configs


# One grid, on both programs; every third configuration also runs the program without indices.
GRID = _grid(seed=20261122, count=120)


def test_runtime_refuses_a_dilated_kernel_larger_than_the_input():
    """As jaxpool does (test_errors_windows.py, dilated-kernel-refused-by-the-runtime-too)."""
    x = np.zeros((1, 1, 4, 4), np.float32)
    with pytest.raises(RuntimeError):
        oracle.max_pool(x, [3, 3], [1, 1], [0, 0], [0, 0], dilations=[3, 1])


@pytest.mark.usefixtures("class_program")
class TestRuntime:
    @pytest.mark.parametrize("k", range(len(GRID)), ids=lambda k: f"{k}-{GRID[k][0]}")
    def test_matches_runtime_on_random_grid(self, k):
        shape, dtype, data_format, opset, index_element_type, axis, attrs, ties, seed = GRID[k]
        x = _random_input(np.random.default_rng(seed), shape, dtype, ties=ties)
        with jax.enable_x64(dtype == "float64" or index_element_type == "i64"):
            _compare(x, data_format, opset, index_element_type, axis, attrs, k % 3 == 0)


EDGE_ATTRS = [
    dict(kernel=[3, 3], strides=[2, 2], pads_begin=[1, 1], pads_end=[1, 1]),
    dict(kernel=[2, 2], strides=[3, 3], pads_begin=[2, 2], pads_end=[2, 2], rounding_type="ceil"),
    dict(kernel=[4, 5], strides=[1, 1]),  # the kernel equals the input
    dict(kernel=[1, 1], strides=[1, 1]),
    dict(kernel=[2, 2], strides=[1, 2], dilations=[3, 2], pads_begin=[0, 1], pads_end=[2, 0]),
    # The specification says H_out = H for same_*; the runtime gives ceil(H / stride).
    *[dict(kernel=[3, 2], strides=[2, 3], auto_pad=p, rounding_type=r)
      for p in ("same_upper", "same_lower") for r in ("floor", "ceil")],
]  # fmt: skip


def _edge_input(dtype):
    """float32: a constant input, ties and +inf among normal values, one after the other along
    the batch axis; int8: the type's extremes (but its minimum) and zeros."""
    shape = (2, 3, 4, 5)
    if dtype == "int8":
        return np.random.default_rng(7).choice(np.asarray([-127, 127, 0], np.int8), size=shape)
    ties = np.random.default_rng(7).integers(0, 2, size=shape).astype(np.float32)
    rng = np.random.default_rng(7)
    posinf = rng.standard_normal(shape).astype(np.float32)
    posinf[rng.random(shape) < 0.2] = np.inf
    return np.concatenate([np.full(shape, 1.5, np.float32), ties, posinf])


LOWEST = {"float32": -np.inf, **{d: np.iinfo(d).min for d in ("int8", "uint8", "int32")}}
NAN, INF = np.nan, np.inf
# (id, one plane, attributes, values, indices, gradient of the values' sum).
HAND = [
    # A NaN is the window's maximum (also beside +inf) and the first NaN's index is returned.
    # The runtime skips NaN instead, which would hide a diverging training run.
    ("nan-overlapping", np.float32([1, NAN, 3, NAN, 2, 0, 5]), dict(kernel=3, strides=1),
     np.float32([NAN, NAN, NAN, NAN, 5]), [1, 1, 3, 3, 6], [0, 2, 0, 2, 0, 0, 1]),
    ("nan-beside-inf", np.float32([1, NAN, NAN, 5, -INF, -INF, INF, NAN, 2, 2]),
     dict(kernel=2, strides=2), np.float32([NAN, NAN, -INF, NAN, 2]), [1, 2, 4, 7, 8],
     [0, 1, 1, 0, 1, 0, 0, 1, 1, 0]),
    # A window whose elements all equal the type's lowest value (-inf, an integer type's
    # minimum) is a tie, and its first element wins.  The runtime gives the lowest finite
    # value and index 0 of the plane there.
    *[(f"lowest-{d}", np.asarray([5, low, low, low, low], d),
       dict(kernel=2, strides=2, pads_begin=1, pads_end=0), np.asarray([5, low, low], d),
       [0, 1, 3], [1, 1, 0, 1, 0]) for d, low in LOWEST.items()],
]  # fmt: skip


@pytest.mark.usefixtures("class_program")
class TestEdgeCases:
    @pytest.mark.parametrize("attrs", EDGE_ATTRS)
    @pytest.mark.parametrize("dtype", ["float32", "int8"])
    @pytest.mark.parametrize("data_format", ["NCX", "NXC"])
    def test_edge_cases_match_runtime(self, attrs, dtype, data_format):
        _compare(_edge_input(dtype), data_format, 8, "i32", 0, attrs, values_only=True)

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

    @pytest.mark.parametrize("name, x, attrs, y, i, grad", HAND, ids=[r[0] for r in HAND])
    def test_hand_computed(self, name, x, attrs, y, i, grad):
        plane = (1, 1, -1)
        x, y = x.reshape(plane), y.reshape(plane)
        ct = np.ones(y.shape, x.dtype) if x.dtype.kind == "f" else None
        _check(x, attrs, y, np.reshape(i, plane), ct=ct, grad=np.reshape(grad, plane))

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
        y, i = reference.max_pool(x, kernel, axis=0)
        ct = rng.standard_normal(y.shape).astype(np.float32) if dtype == "float32" else None
        _check(x, dict(kernel=kernel), y, i, data_format, ct=ct)

    @pytest.mark.parametrize("dtype", ["float32", "int8", "uint8", "int32"])
    def test_window_without_input_elements(self, dtype):
        # Ceil rounding with large pads creates windows that hold only padding: the value is the
        # padding value (-inf; the type's minimum for integers), the index is the first element of
        # the plane (as the runtime gives), and no gradient flows from there.
        x = _random_input(np.random.default_rng(1), (2, 3, 2), dtype, ties=False)
        attrs = dict(kernel=[1], strides=[3], pads_begin=[3], pads_end=[3], rounding_type="ceil")
        y, i = _max_pool_runtime(x, 8, **attrs)
        np.testing.assert_array_equal(y[..., 0], np.full((2, 3), LOWEST[dtype], dtype))
        ct = np.ones(y.shape, x.dtype) if dtype == "float32" else None
        _check(x, attrs, y, i, ct=ct, grad=np.ones_like(x) * [1, 0])

    @pytest.mark.parametrize(
        "config",
        [
            dict(kernel=3, strides=1, pads_begin=1, pads_end=1),
            dict(kernel=2, strides=2, pads_begin=1, pads_end=0, rounding_type="ceil", dilations=2),
        ],
    )
    def test_specials_and_gradient(self, config):
        x = np.concatenate([cases.special(seed) for seed in range(3)])  # along the batch axis
        y, i = reference.max_pool(x, **config, axis=0)
        ct = np.random.default_rng(10).integers(1, 5, y.shape).astype(np.float32)
        _check(x, dict(config, axis=0), y, i, ct=ct)  # every window holds input


TORCH_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}


def _torch_grid(count: int):
    """Random configurations, in NCX and NXC by turns."""
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
        data_format = ("NCX", "NXC")[len(configs) % 2]
        configs.append((spatial, kernel, strides, dilations, pads, ceil_mode, data_format))
    return configs


TORCH_GRID = _torch_grid(24)


def test_grids_cover_every_mode():
    seen = {(c[6]["rounding_type"], c[6]["auto_pad"]) for c in GRID}
    assert seen == set(
        itertools.product(
            ["floor", "ceil", "ceil_torch"], ["explicit", "valid", "same_upper", "same_lower"]
        )
    )
    assert {c[1] for c in GRID[::3]} == {c[1] for c in GRID} == set(DTYPES)
    assert {len(c[0]) for c in GRID} == {3, 4, 5}
    assert {c[2] for c in GRID} == {"NCX", "NXC"}
    assert {c[3] for c in GRID[::3]} == {c[3] for c in GRID} == {1, 8, 14}
    assert {c[4] for c in GRID} == {"i32", "i64"}
    assert {c[5] for c in GRID} >= {-1, 0, 1, 2}
    assert {c[7] for c in GRID} == {False, True}
    seen = {(len(c[0]), c[5], c[6]) for c in TORCH_GRID}
    assert seen == set(itertools.product([1, 2, 3], [False, True], ["NCX", "NXC"]))


@pytest.mark.usefixtures("class_program")
class TestPyTorchAndGradients:
    @pytest.mark.parametrize("config", TORCH_GRID)
    def test_matches_pytorch_values_indices_and_gradients(self, config):
        spatial, kernel, strides, dilations, pads, ceil_mode, data_format = config
        rng = np.random.default_rng(sum(spatial) + sum(kernel))
        x = rng.permutation(math.prod((2, 3, *spatial))).reshape(2, 3, *spatial).astype(np.float32)
        xt = torch.tensor(x, requires_grad=True)
        yt, it = TORCH_POOL[len(spatial)](
            xt, kernel, strides, pads, dilations, ceil_mode=ceil_mode, return_indices=True
        )
        ct = rng.standard_normal(yt.shape).astype(np.float32)
        yt.backward(torch.tensor(ct))

        rounding_type = "ceil_torch" if ceil_mode else "floor"
        attrs = dict(dilations=dilations, rounding_type=rounding_type, data_format=data_format)

        def pool(x):
            return jaxpool.max_pool(
                x, kernel, strides, pads, pads, **attrs, return_indices=True, axis=2
            )

        @jax.jit
        def values_indices_and_gradient(x, ct):
            return *pool(x), jax.grad(lambda x: jnp.vdot(pool(x)[0], ct))(x)

        y, i, grad = values_indices_and_gradient(
            cases.to_layout(x, data_format), cases.to_layout(ct, data_format)
        )
        np.testing.assert_array_equal(cases.from_layout(y, data_format), yt.detach().numpy())
        np.testing.assert_array_equal(cases.from_layout(i, data_format), it.numpy())
        reference.assert_sums_equal(cases.from_layout(grad, data_format), xt.grad.numpy())

    @pytest.mark.parametrize(
        "attrs, data_format",
        [
            (dict(kernel=3, strides=2, pads_begin=1, pads_end=1), "NCX"),
            (dict(kernel=2, strides=1, dilations=2, rounding_type="ceil", pads_end=1), "NXC"),
            (dict(kernel=(2, 3), strides=(2, 1), auto_pad="same_lower"), "NXC"),
        ],
    )
    def test_derivatives(self, attrs, data_format, x64):
        """check_grads of order 2 in both modes; every window holds input, so the tangent of
        ones is ones, the op is its own linearization (degree-1 homogeneous), jacfwd equals
        jacrev and the Hessian is zero; the indices carry no gradient."""
        x = np.random.default_rng(3).permutation(2 * 3 * 6 * 5).reshape(2, 3, 6, 5) / 7.0
        x = jnp.asarray(cases.to_layout(x, data_format))
        pool = functools.partial(jaxpool.max_pool, data_format=data_format, **attrs)
        check_grads(jax.jit(pool), (x,), order=2, modes=("fwd", "rev"))
        y, y_dot = jax.jvp(pool, (x,), (jnp.ones_like(x),))
        np.testing.assert_array_equal(y_dot, np.ones(y.shape))
        np.testing.assert_array_equal(jax.linearize(pool, x)[1](x), y)
        np.testing.assert_array_equal(jax.jit(jax.jacfwd(pool))(x), jax.jit(jax.jacrev(pool))(x))
        hessian = jax.jit(jax.hessian(lambda x: pool(x).sum()))(x)
        np.testing.assert_array_equal(hessian, np.zeros(hessian.shape))

        def weighted(v):  # the values weighted by their indices: the weights are constants
            y, i = pool(v, return_indices=True)
            return jnp.vdot(y, i.astype(y.dtype))

        i = cases.from_layout(pool(x, return_indices=True)[1], data_format)
        expected = reference.max_unpool(i.astype(np.float64), i, i.shape[:2] + (6, 5))
        np.testing.assert_array_equal(
            cases.from_layout(jax.grad(weighted)(x), data_format), expected
        )


HUGE = (2**12, 2**10, 2**5, 2**5)  # 2**32 elements, 16 GiB of float32
I32, I64 = np.int32, np.int64
# (id, shape, dtype, keyword arguments, x64, output shape, index dtype).
ABSTRACT = [
    *[(d, (1, 2, 5, 5), d, {}, d == "float64", (1, 2, 2, 2), I64 if d == "float64" else I32)
      for d in DTYPES],
    *[(f"index-{form}", (1, 1, 4, 4), "float32", dict(index_element_type=form), True,
       (1, 1, 2, 2), dtype)
      for form, dtype in [("i32", I32), ("int32", I32), (jnp.int32, I32), ("i64", I64),
                          ("int64", I64), (jnp.int64, I64), (None, I64)]],
    *[(f"index-{form}-without-x64", (1, 1, 4), "float32", dict(index_element_type=form), False,
       (1, 1, 2), I32) for form in ("i32", "int32")],
    # Indices over the whole tensor overflow int32 (test_errors_windows.py); within a plane
    # they fit, and with x64 over the whole tensor too.
    *[(f"huge-axis{axis}", HUGE, "float32", dict(axis=axis), False, (2**12, 2**10, 16, 16), I32)
      for axis in (1, 2, 3, -1)],
    ("huge-int8-axis2", (2**12, 2**10, 2**10), "int8", dict(axis=2), False,
     (2**12, 2**10, 2**9), I32),
    ("huge-i64", HUGE, "float32", dict(axis=0, index_element_type="i64"), True,
     (2**12, 2**10, 16, 16), I64),
]  # fmt: skip


@pytest.mark.parametrize(
    "shape, dtype, kwargs, x64, out_shape, index_dtype",
    [r[1:] for r in ABSTRACT],
    ids=[str(r[0]) for r in ABSTRACT],
)
def test_output_shapes_and_dtypes(shape, dtype, kwargs, x64, out_shape, index_dtype):
    """Output dtypes, index types and sizes, abstractly: nothing is computed."""
    with jax.enable_x64(x64):
        y, i = jax.eval_shape(
            lambda x: jaxpool.max_pool(x, 2, return_indices=True, **kwargs),
            jax.ShapeDtypeStruct(shape, _np_dtype(dtype)),
        )
    assert y.dtype == _np_dtype(dtype) and y.shape == i.shape == out_shape
    assert i.dtype == index_dtype


def test_attribute_forms_are_equivalent():
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 6)).astype(np.float32)
    a = jaxpool.max_pool(x, 2)
    for kernel in [(2, 2), [2, 2], np.asarray([2, 2]), np.int64(2)]:
        np.testing.assert_array_equal(np.asarray(jaxpool.max_pool(x, kernel)), np.asarray(a))


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

    x = make()
    same_values, values_at_indices, indices_in_window, shape = check(x)
    del x
    assert shape == (16, 16, 512, 512)
    assert bool(same_values) and bool(values_at_indices) and bool(indices_in_window)


FUZZ = cases.fuzz(80)


@FUZZ
@hypothesis.given(cases.sliding_cases(with_dilations=True), st.integers(-5, 5), st.booleans())
def test_fuzz_against_reference(config, axis, return_indices):
    """A valid configuration of random attributes matches the reference exactly, and max_unpool
    of its float values at its indices (taken with an axis 0-2) is the reference's scatter-add
    of them, with the window stated or not; an invalid configuration raises ``ValueError`` or
    ``TypeError``, and nothing else may happen."""
    x, attrs = config
    fmt, x_in = attrs["data_format"], cases.to_layout(x, attrs["data_format"])
    valid = cases.valid_sliding(x, attrs) and -x.ndim <= axis < x.ndim
    if not valid:
        with pytest.raises((ValueError, TypeError)):
            jaxpool.max_pool(x_in, **attrs, return_indices=return_indices, axis=axis)
        return
    y_ref, i_ref = reference.max_pool(x, **cases.without_layout(attrs), axis=axis % x.ndim)
    out = jaxpool.max_pool(x_in, **attrs, return_indices=return_indices, axis=axis)
    y = out[0] if return_indices else out
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(cases.from_layout(y, fmt), y_ref)
    if not return_indices:
        return
    np.testing.assert_array_equal(cases.from_layout(out[1], fmt), i_ref)
    if x.dtype.kind == "f" and axis % x.ndim <= 2:
        expected = reference.max_unpool(y_ref, i_ref, x.shape, axis=axis)
        for window in ({}, cases.without_layout(attrs)):
            got = jaxpool.max_unpool(
                *out, x_in.shape, axis=axis % x.ndim, data_format=fmt, **window
            )
            np.testing.assert_array_equal(cases.from_layout(got, fmt), expected)
