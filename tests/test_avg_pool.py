"""avg_pool against the OpenVINO runtime (AvgPool-1/-14) and PyTorch."""

import chex
import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import oracle
import pytest
import torch
from jax.test_util import check_grads

import jaxpool

torch.set_num_threads(1)

ROUNDINGS = ("floor", "ceil", "ceil_torch")
AUTO_PADS = ("explicit", "valid", "same_upper", "same_lower")
DTYPES = ("float16", "bfloat16", "float32", "int8", "uint8", "int32")


def _sample(rng, dtype, shape):
    if dtype == "int8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    if dtype == "uint8":
        return rng.integers(0, 256, shape).astype(np.uint8)
    if dtype == "int32":  # int8 values: see _runtime
        return rng.integers(-128, 128, shape).astype(np.int32)
    values = rng.standard_normal(shape).astype(np.float32)
    return values.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)


def _config(seed):
    """A random AvgPool configuration that the runtime accepts."""
    rng = np.random.default_rng(seed)
    nd = int(rng.integers(1, 4))
    spatial = [int(v) for v in rng.integers(1, 8 if nd < 3 else 5, nd)]
    kernel, pads_begin, pads_end = [], [], []
    exclude_pad = bool(rng.integers(2))
    auto_pad = AUTO_PADS[int(rng.integers(4))] if rng.integers(3) else "explicit"
    for length in spatial:
        k = int(rng.integers(1, min(4, length + (0 if auto_pad == "valid" else 2)) + 1))
        # The runtime refuses exclude_pad with a pad as large as the kernel.
        top = k - 1 if exclude_pad else 2
        pb, pe = (int(v) for v in rng.integers(0, top + 1, 2))
        while k > length + pb + pe:
            pe += 1
        kernel.append(k)
        pads_begin.append(pb)
        pads_end.append(pe)
    rounding_type = ROUNDINGS[int(rng.integers(3))]
    return dict(
        shape=(int(rng.integers(1, 3)), int(rng.integers(1, 4)), *spatial),
        kernel=kernel,
        strides=[int(v) for v in rng.integers(1, 4, nd)],
        pads_begin=pads_begin,
        pads_end=pads_end,
        exclude_pad=exclude_pad,
        rounding_type=rounding_type,
        auto_pad=auto_pad,
        opset=14 if rounding_type == "ceil_torch" or rng.integers(2) else 1,
        dtype=DTYPES[seed % len(DTYPES)],
        data_format=("NCX", "NXC")[int(rng.integers(2))],
    )


def _attrs(cfg):
    return {k: cfg[k] for k in ("strides", "pads_begin", "pads_end", "exclude_pad",
                                "rounding_type", "auto_pad")}


def _check(actual, expected, dtype):
    actual = np.asarray(actual)
    if dtype in ("int8", "uint8", "int32"):
        np.testing.assert_array_equal(actual, expected)
    elif dtype == "float16":
        np.testing.assert_allclose(actual.astype(np.float32), expected.astype(np.float32),
                                   rtol=1e-3, atol=1e-3)
    elif dtype == "bfloat16":
        np.testing.assert_allclose(actual.astype(np.float32), expected.astype(np.float32),
                                   rtol=8e-3, atol=8e-3)
    else:
        np.testing.assert_allclose(actual, expected, rtol=2e-6, atol=1e-6)


def _empty_windows(shape, kernel, strides, pads_begin, pads_end, rounding_type, auto_pad,
                   **_):
    """The windows that hold no input element, from the runtime's MaxPool on ones (which
    gives the lowest finite value there)."""
    y, _ = oracle.max_pool(np.ones(shape, np.float32), kernel, strides, pads_begin, pads_end,
                           rounding_type=rounding_type, auto_pad=auto_pad, opset=14)
    return y < 0


def _runtime(x, kernel, **attrs):
    """The runtime's AvgPool, with API.md's 0 for windows with no input element (where the
    runtime gives NaN, -0, or for int32 the NaN cast to the type's minimum).

    The CPU plugin cannot compile some int32 poolings (a kernel larger than the input); their
    int8-range values then run as int8.
    """
    try:
        y = oracle.avg_pool(x, kernel, **attrs)
    except RuntimeError as error:
        if x.dtype != np.int32 or "primitive descriptors" not in str(error):
            raise
        y = oracle.avg_pool(x.astype(np.int8), kernel, **attrs).astype(np.int32)
    attrs.pop("opset", None)
    attrs.pop("exclude_pad")
    pads = [*np.ravel(attrs.get("pads_begin", 0)), *np.ravel(attrs.get("pads_end", 0))]
    if attrs["rounding_type"] == "floor" and (
            attrs["auto_pad"] != "explicit" or max(pads) < min(np.ravel(kernel))):
        return y  # every window holds an input element
    empty = _empty_windows(x.shape, kernel, **attrs)
    return np.where(empty, np.zeros((), y.dtype), y)


@pytest.mark.parametrize("seed", range(100))
def test_matches_runtime(seed):
    cfg = _config(seed)
    x = _sample(np.random.default_rng(1000 + seed), cfg["dtype"], cfg["shape"])
    # The runtime sees bf16 as the float32 of the same values.
    x_ov = x.astype(np.float32) if cfg["dtype"] == "bfloat16" else x
    expected = _runtime(x_ov, cfg["kernel"], opset=cfg["opset"], **_attrs(cfg))
    x_in = x if cfg["data_format"] == "NCX" else oracle.to_nxc(x)
    y = jaxpool.avg_pool(x_in, cfg["kernel"], data_format=cfg["data_format"], **_attrs(cfg))
    assert y.dtype == x.dtype
    if cfg["data_format"] == "NXC":
        y = oracle.to_ncx(np.asarray(y))
    assert y.shape == expected.shape
    _check(y, expected, cfg["dtype"])


@pytest.mark.parametrize("auto_pad", AUTO_PADS)
@pytest.mark.parametrize("rounding_type", ROUNDINGS)
@pytest.mark.parametrize("exclude_pad", [False, True])
def test_every_mode(auto_pad, rounding_type, exclude_pad):
    x = np.random.default_rng(7).standard_normal((2, 3, 7, 6)).astype(np.float32)
    attrs = dict(strides=[2, 3], pads_begin=[1, 0], pads_end=[0, 1], exclude_pad=exclude_pad,
                 rounding_type=rounding_type, auto_pad=auto_pad)
    expected = _runtime(x, [3, 2], **attrs)
    y = jaxpool.avg_pool(x, [3, 2], **attrs)
    np.testing.assert_allclose(y, expected, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("pads", [(0, 0), (1, 0), (0, 1), (2, 2)])
@pytest.mark.parametrize("rounding_type", ["floor", "ceil"])
def test_divisor_rule_on_ones(pads, rounding_type):
    """On ones, each output is (input elements in the window) / divisor: the divisor rule alone,
    including ceil windows that reach past pads_end, pads on one axis only and 3-D."""
    x = np.ones((1, 1, 5, 6, 4), np.float32)
    attrs = dict(strides=[2, 3, 3], pads_begin=[pads[0], 0, 0], pads_end=[pads[1], 0, 0],
                 rounding_type=rounding_type)
    for exclude_pad in (False, True):
        if exclude_pad and max(pads) >= 2:
            continue
        expected = _runtime(x, [2, 2, 2], exclude_pad=exclude_pad, auto_pad="explicit", **attrs)
        y = jaxpool.avg_pool(x, [2, 2, 2], exclude_pad=exclude_pad, **attrs)
        np.testing.assert_allclose(y, expected, rtol=1e-7)


def test_float64(x64):
    rng = np.random.default_rng(3)
    for seed in range(6):
        cfg = _config(seed * 6 + 2)  # float32 configurations
        x = rng.standard_normal(cfg["shape"])
        expected = oracle.avg_pool(x.astype(np.float32), cfg["kernel"], opset=cfg["opset"],
                                   **_attrs(cfg))
        y = jaxpool.avg_pool(x, cfg["kernel"], **_attrs(cfg))
        assert y.dtype == jnp.float64
        np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32"])
def test_integer_rounds_half_to_even(dtype, jit_mode):
    """Means ending in .5 (kernel 2) and in .25/.75 (kernel 4), positive and negative."""
    lo = 0 if dtype == "uint8" else -20
    x = np.arange(lo, lo + 40).astype(dtype).reshape(1, 2, 20)
    for kernel, pads in ((2, 0), (2, 1), (4, 1)):
        expected = oracle.avg_pool(x, kernel, 1, pads, pads)
        y = jit_mode(lambda v, k=kernel, p=pads: jaxpool.avg_pool(v, k, 1, p, p), x)
        assert y.dtype == x.dtype
        np.testing.assert_array_equal(y, expected)


def test_int32_exact_with_x64(x64):
    """With x64 the sum is int64 and the quotient exact (the runtime wraps here)."""
    x = np.array([[[2**30 + 1, 2**30 + 2, 2**31 - 1, 2**31 - 1]]], np.int32)
    y = jaxpool.avg_pool(x, 2, 1)
    exact = (x[..., :-1].astype(np.int64) + x[..., 1:]) / 2
    np.testing.assert_array_equal(y, np.round(exact).astype(np.int32))


def test_float16_accumulates_in_float32():
    """Sums past float16's range still give the right average in float16."""
    x = np.full((1, 1, 64), 60000.0, np.float16)
    y = jaxpool.avg_pool(x, 64)
    assert y.dtype == jnp.float16
    np.testing.assert_array_equal(y, oracle.avg_pool(x, 64))
    np.testing.assert_array_equal(y, np.full((1, 1, 1), 60000.0, np.float16))


def test_all_padding_window_with_exclude_pad_is_zero():
    """API: an average over no element is 0.  The runtime refuses pads as large as the kernel
    with exclude_pad and gives -0 (or NaN) where ceil creates such a window; 0 is the value of
    the OpenVINO reference implementation and of an empty sum, and keeps training finite."""
    x = np.arange(1.0, 4.0, dtype=np.float32).reshape(1, 1, 3)
    y = jaxpool.avg_pool(x, 2, 1, 2, 2, exclude_pad=True)
    np.testing.assert_array_equal(y[0, 0], [0.0, 1.0, 1.5, 2.5, 3.0, 0.0])
    with pytest.raises(RuntimeError, match="entirely in the padding"):
        oracle.avg_pool(x, 2, 1, 2, 2, exclude_pad=True)
    # A ceil window that starts past the input: the runtime accepts this one.
    x = np.arange(1.0, 6.0, dtype=np.float32).reshape(1, 1, 5)
    expected = oracle.avg_pool(x, 2, 3, 0, 1, exclude_pad=True, rounding_type="ceil")
    y = jaxpool.avg_pool(x, 2, 3, 0, 1, exclude_pad=True, rounding_type="ceil")
    np.testing.assert_array_equal(y, expected)
    assert not np.isnan(np.asarray(y)).any() and y[0, 0, -1] == 0
    assert jnp.isfinite(jax.grad(lambda v: jaxpool.avg_pool(
        v, 2, 1, 2, 2, exclude_pad=True).sum())(jnp.ones((1, 1, 3)))).all()


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("count_include_pad", [False, True])
def test_matches_torch(nd, ceil_mode, count_include_pad):
    """PyTorch's divisor equals OpenVINO's for count_include_pad=False (exclude_pad=True) and
    for count_include_pad=True without ceil windows past pads_end (floor mode here)."""
    rng = np.random.default_rng(nd)
    x = rng.standard_normal((2, 3, *[7, 6, 5][:nd]))
    padding = 1
    if count_include_pad and ceil_mode:
        padding = 0  # no pads: both count input elements only
    fn = getattr(torch.nn.functional, f"avg_pool{nd}d")
    xt = torch.tensor(x, requires_grad=True)
    yt = fn(xt, 3, 2, padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad)
    g = rng.standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(g))
    x32 = x.astype(np.float32)

    def f(v):
        return jaxpool.avg_pool(v, 3, 2, padding, padding, exclude_pad=not count_include_pad,
                                rounding_type="ceil_torch" if ceil_mode else "floor")

    y, vjp = jax.vjp(f, x32)
    np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    (grad,) = vjp(jnp.asarray(g, jnp.float32))
    np.testing.assert_allclose(grad, xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_torch_differs_past_pads_end():
    """With pads and ceil windows past pads_end, OpenVINO divides by the whole kernel and
    PyTorch by the part inside the padded input."""
    x = np.ones((1, 1, 6), np.float32)
    y = jaxpool.avg_pool(x, 4, 3, 1, 1, rounding_type="ceil_torch")
    np.testing.assert_allclose(y, oracle.avg_pool(x, 4, 3, 1, 1, rounding_type="ceil_torch"))
    yt = torch.nn.functional.avg_pool1d(torch.tensor(x), 4, 3, 1, ceil_mode=True)
    assert y.shape == tuple(yt.shape)
    assert not np.allclose(y, yt.numpy())


def test_grads(x64):
    """Both divisor rules, ceil windows past the pads, order 2 in both modes."""
    rng = np.random.default_rng(5)
    for x in (rng.standard_normal((1, 1, 3, 4, 3)),):
        check_grads(lambda v: jaxpool.avg_pool(v, 2, 2, 1, 1, rounding_type="ceil")
                    + jaxpool.avg_pool(v, 2, 2, 1, 1, exclude_pad=True, rounding_type="ceil"),
                    (x,), order=2, modes=("fwd", "rev"))


@hypothesis.settings(max_examples=6, deadline=None, derandomize=True, database=None)
@hypothesis.given(seed=st.integers(0, 10_000))
def test_nxc_equals_ncx(seed):
    cfg = _config(seed)
    x = _sample(np.random.default_rng(seed), "float32", cfg["shape"])
    ncx = jaxpool.avg_pool(x, cfg["kernel"], **_attrs(cfg))
    nxc = jaxpool.avg_pool(oracle.to_nxc(x), cfg["kernel"], data_format="NXC", **_attrs(cfg))
    np.testing.assert_array_equal(oracle.to_ncx(np.asarray(nxc)), ncx)


def test_transforms_and_no_retrace():
    x = jnp.asarray(np.random.default_rng(0).standard_normal((4, 2, 3, 6, 5)), jnp.float32)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def f(v):
        return jaxpool.avg_pool(v, 2, 1, 1, 0)

    batched = jax.vmap(f)(x)
    np.testing.assert_allclose(batched[1], f(x[1]), rtol=1e-6)
    f(x[0] + 1.0)
    y, tangent = jax.jvp(f, (x[0],), (jnp.ones_like(x[0]),))
    np.testing.assert_allclose(tangent, f(jnp.ones_like(x[0])), rtol=1e-6)


ERRORS = [
    (dict(x=np.ones((2, 3), np.float32), kernel=1), ValueError, "`x` must have rank"),
    (dict(x=np.ones((1, 1, 4), bool), kernel=1), TypeError, "`x` must have a floating"),
    (dict(kernel=0), ValueError, r"`kernel` \(=0\) must be positive"),
    (dict(kernel=[2, 2]), ValueError, r"`kernel` \(=\[2, 2\]\) must have one entry"),
    (dict(kernel=2, strides=0), ValueError, r"`strides` \(=0\)"),
    (dict(kernel=2, pads_begin=-1), ValueError, r"`pads_begin` \(=-1\)"),
    (dict(kernel=2, rounding_type="round"), ValueError, r"`rounding_type` \(='round'\)"),
    (dict(kernel=2, auto_pad="same"), ValueError, r"`auto_pad` \(='same'\)"),
    (dict(kernel=2, data_format="NHWC"), ValueError, r"`data_format` \(='NHWC'\)"),
    (dict(kernel=9), ValueError, "more than the padded input"),
    (dict(kernel=2, exclude_pad="yes"), TypeError, r"`exclude_pad` must be a bool, got 'yes'"),
    (dict(kernel=2.0), TypeError, "`kernel` must be an int"),
]


@pytest.mark.parametrize("kwargs,error,match", ERRORS)
def test_errors(kwargs, error, match):
    kwargs = dict(kwargs)
    x = kwargs.pop("x", np.ones((1, 1, 4), np.float32))
    with pytest.raises(error, match=match):
        jaxpool.avg_pool(x, **kwargs)
