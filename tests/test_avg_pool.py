"""avg_pool against the OpenVINO runtime (AvgPool-1/-14), PyTorch and ``tests/reference.py``.

The classes' tests (the runtime, PyTorch and gradient checks) run on both programs
(``class_program``).
"""

import functools

import cases
import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import oracle
import pytest
import reference
import torch
from jax.test_util import check_grads

import jaxpool

torch.set_num_threads(1)

ROUNDINGS = cases.ROUNDINGS
AUTO_PADS = cases.AUTO_PADS


def _attrs(cfg):
    return {
        k: cfg[k]
        for k in ("strides", "pads_begin", "pads_end", "exclude_pad", "rounding_type", "auto_pad")
    }


# float16 and bfloat16 averages round once more than the runtime's float32 ones.
TOL = {"float16": (1e-3, 1e-3), "bfloat16": (8e-3, 8e-3), "float32": (2e-6, 1e-6)}


def check_average(actual, expected, dtype):
    """An average of ``dtype`` against the runtime's: integers exactly, floats to ``TOL``."""
    if dtype in ("int8", "uint8", "int32"):
        np.testing.assert_array_equal(actual, expected)
    else:
        rtol, atol = TOL[dtype]
        np.testing.assert_allclose(
            np.asarray(actual, np.float32), expected.astype(np.float32), rtol=rtol, atol=atol
        )


def _runtime(x, kernel, **attrs):
    """The runtime's AvgPool, with jaxpool's 0 for windows with no input element (where the
    runtime gives NaN, -0, or for int32 the NaN cast to the type's minimum): those where the
    runtime's MaxPool on ones gives the lowest finite value.

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
        attrs["auto_pad"] != "explicit" or max(pads) < min(np.ravel(kernel))
    ):
        return y  # every window holds an input element
    empty = oracle.max_pool(np.ones(x.shape, np.float32), kernel, opset=14, **attrs)[0] < 0
    return np.where(empty, np.zeros((), y.dtype), y)


SEEDS = range(48)


def test_random_configurations_cover_every_mode():
    configs = [cases.avg_config(seed) for seed in SEEDS]
    assert {c["dtype"] for c in configs} == set(cases.AVG_DTYPES)
    assert {len(c["shape"]) for c in configs} == {3, 4, 5}
    assert {(c["rounding_type"], c["exclude_pad"]) for c in configs} == {
        (r, e) for r in ROUNDINGS for e in (False, True)
    }
    assert {c["auto_pad"] for c in configs} == set(AUTO_PADS)
    assert {(c["opset"], c["data_format"]) for c in configs} == {
        (o, f) for o in (1, 14) for f in ("NCX", "NXC")
    }


@pytest.mark.usefixtures("class_program")
class TestRuntime:
    @pytest.mark.parametrize("seed", SEEDS)
    def test_matches_runtime(self, seed):
        cfg = cases.avg_config(seed)
        x = cases.avg_sample(np.random.default_rng(1000 + seed), cfg["dtype"], cfg["shape"])
        # The runtime sees bf16 as the float32 of the same values.
        x_ov = x.astype(np.float32) if cfg["dtype"] == "bfloat16" else x
        expected = _runtime(x_ov, cfg["kernel"], opset=cfg["opset"], **_attrs(cfg))
        x_in = cases.to_layout(x, cfg["data_format"])
        y = jaxpool.avg_pool(x_in, cfg["kernel"], data_format=cfg["data_format"], **_attrs(cfg))
        assert y.dtype == x.dtype
        y = cases.from_layout(y, cfg["data_format"])
        assert y.shape == expected.shape
        check_average(y, expected, cfg["dtype"])

    @pytest.mark.parametrize("auto_pad", AUTO_PADS)
    @pytest.mark.parametrize("rounding_type", ROUNDINGS)
    @pytest.mark.parametrize("exclude_pad", [False, True])
    def test_every_mode(self, auto_pad, rounding_type, exclude_pad):
        x = np.random.default_rng(7).standard_normal((2, 3, 7, 6)).astype(np.float32)
        window = dict(kernel=[3, 2], strides=[2, 3], pads_begin=[1, 0], pads_end=[0, 1])
        modes = dict(exclude_pad=exclude_pad, rounding_type=rounding_type, auto_pad=auto_pad)
        expected = _runtime(x, **window, **modes)
        y = jaxpool.avg_pool(x, **window, **modes)
        np.testing.assert_allclose(y, expected, rtol=2e-6, atol=1e-6)

    @pytest.mark.parametrize("seed", range(4))
    def test_dilations_match_avg_pool_16(self, seed):
        """AvgPool-16's ``dilations`` on a random grid: 1-3 spatial axes, dilations 1-3, every
        rounding type and auto_pad, ``exclude_pad`` both ways (both programs, both layouts)."""
        rng = np.random.default_rng(160 + seed)
        for i in range(12):
            nd = 1 + (seed + i) % 3
            kernel = [int(v) for v in rng.integers(1, 4, nd)]
            dilations = [int(v) for v in rng.integers(1, 4, nd)]
            spatial = [
                int(rng.integers((k - 1) * d + 1, (k - 1) * d + 6))
                for k, d in zip(kernel, dilations)
            ]
            attrs = dict(
                strides=[int(v) for v in rng.integers(1, 4, nd)],
                pads_begin=[int(rng.integers(0, k)) for k in kernel],
                pads_end=[int(rng.integers(0, k)) for k in kernel],
                dilations=dilations,
                exclude_pad=bool(i % 2),
                rounding_type=ROUNDINGS[i % 3],
                auto_pad=AUTO_PADS[(i // 3 + seed) % 4],
            )
            x = rng.standard_normal((2, 3, *spatial)).astype(np.float32)
            expected = oracle.avg_pool(x, kernel, opset=16, **attrs)
            fmt = ("NCX", "NXC")[(i + i // 6) % 2]  # both layouts with either exclude_pad
            y = jaxpool.avg_pool(cases.to_layout(x, fmt), kernel, data_format=fmt, **attrs)
            y = cases.from_layout(y, fmt)
            assert y.shape == expected.shape, attrs
            # An exclude_pad window with no input element: the CPU plugin's NaN, jaxpool's 0.
            assert np.all(y[np.isnan(expected)] == 0)
            np.testing.assert_allclose(
                y, np.nan_to_num(expected, nan=0.0), rtol=2e-6, atol=1e-6, err_msg=str(attrs)
            )

    def test_dilated_divisor_counts_every_tap(self):
        """AvgPool-16 counts every tap of a window with pads and ``exclude_pad=False``, also a
        tap past ``pads_end`` in ceil mode (ONNX's AveragePool-19 counts the taps inside the
        padded input only: ``jaxpool.onnx.node`` gives 1.0 for the last window below)."""
        x = np.ones((1, 1, 6), np.float32)
        attrs = dict(dilations=[2], rounding_type="ceil", exclude_pad=False)
        expected = oracle.avg_pool(x, [2], [3], [1], [1], opset=16, **attrs)
        np.testing.assert_array_equal(expected, [[[0.5, 1.0, 0.5]]])
        np.testing.assert_array_equal(jaxpool.avg_pool(x, 2, 3, 1, 1, **attrs), expected)

    @pytest.mark.parametrize("pads", [(0, 0), (1, 0), (0, 1), (2, 2)])
    @pytest.mark.parametrize("rounding_type", ["floor", "ceil"])
    def test_divisor_rule_on_ones(self, pads, rounding_type):
        """On ones, each output is (input elements in the window) / divisor: the divisor rule alone,
        including ceil windows that reach past pads_end, pads on one axis only and 3-D."""
        x = np.ones((1, 1, 5, 6, 4), np.float32)
        attrs = dict(strides=[2, 3, 3], pads_begin=[pads[0], 0, 0], pads_end=[pads[1], 0, 0])
        attrs["rounding_type"] = rounding_type
        for exclude_pad in (False, True):
            if exclude_pad and max(pads) >= 2:
                continue
            expected = _runtime(x, [2, 2, 2], exclude_pad=exclude_pad, auto_pad="explicit", **attrs)
            y = jaxpool.avg_pool(x, [2, 2, 2], exclude_pad=exclude_pad, **attrs)
            np.testing.assert_allclose(y, expected, rtol=1e-7)

    def test_64_bit_types(self, x64):
        """float64 against the runtime's float32; with x64 an int32 sum is int64 and the
        quotient exact (the runtime wraps here)."""
        x = np.array([[[2**30 + 1, 2**30 + 2, 2**31 - 1, 2**31 - 1]]], np.int32)
        exact = (x[..., :-1].astype(np.int64) + x[..., 1:]) / 2
        np.testing.assert_array_equal(jaxpool.avg_pool(x, 2, 1), np.round(exact).astype(np.int32))
        rng = np.random.default_rng(3)
        for seed in range(6):
            cfg = cases.avg_config(seed * 6 + 2)  # float32 configurations
            x = rng.standard_normal(cfg["shape"])
            expected = oracle.avg_pool(
                x.astype(np.float32), cfg["kernel"], opset=cfg["opset"], **_attrs(cfg)
            )
            y = jaxpool.avg_pool(x, cfg["kernel"], **_attrs(cfg))
            assert y.dtype == jnp.float64
            np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)

    @pytest.mark.parametrize("dtype", ["int8", "uint8", "int32"])
    def test_integer_rounds_half_to_even(self, dtype):
        """Means ending in .5 (kernel 2) and in .25/.75 (kernel 4), positive and negative."""
        lo = 0 if dtype == "uint8" else -20
        x = np.arange(lo, lo + 40).astype(dtype).reshape(1, 2, 20)
        for kernel, pads in ((2, 0), (2, 1), (4, 1)):
            expected = oracle.avg_pool(x, kernel, 1, pads, pads)
            y = jaxpool.avg_pool(x, kernel, 1, pads, pads)
            assert y.dtype == x.dtype
            np.testing.assert_array_equal(y, expected)

    def test_float16_accumulates_in_float32(self):
        """Sums past float16's range still give the right average in float16."""
        x = np.full((1, 1, 64), 60000.0, np.float16)
        y = jaxpool.avg_pool(x, 64)
        assert y.dtype == jnp.float16
        np.testing.assert_array_equal(y, oracle.avg_pool(x, 64))
        np.testing.assert_array_equal(y, np.full((1, 1, 1), 60000.0, np.float16))

    def test_all_padding_window_with_exclude_pad_is_zero(self):
        """An average over no element is 0.  The runtime refuses pads as large as the kernel with
        exclude_pad and gives -0 (or NaN) where ceil creates such a window; 0 is the value of the
        OpenVINO reference implementation and of an empty sum, and keeps training finite."""
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
        grad = jax.grad(lambda v: jaxpool.avg_pool(v, 2, 1, 2, 2, exclude_pad=True).sum())
        assert jnp.isfinite(grad(jnp.ones((1, 1, 3)))).all()

    def test_specials(self):
        x = np.concatenate([cases.special(seed) for seed in range(2)])  # along the batch axis
        for exclude_pad in (False, True):
            for config in (
                dict(kernel=3, strides=1, pads_begin=1, pads_end=1),
                dict(kernel=2, strides=2, rounding_type="ceil", pads_end=1),
            ):
                pool = functools.partial(jaxpool.avg_pool, **config, exclude_pad=exclude_pad)
                expected = reference.avg_pool(x, **config, exclude_pad=exclude_pad)
                np.testing.assert_allclose(np.asarray(pool(x)), expected, rtol=1e-6)  # NaN: NaN
                grad = jax.jit(jax.grad(lambda x, pool=pool: pool(x).sum()))
                g = grad(x)
                assert np.all(np.isfinite(np.asarray(g))), "a linear op's gradient ignores x"
                np.testing.assert_array_equal(np.asarray(g), np.asarray(grad(np.zeros_like(x))))


def test_torch_differs_past_pads_end():
    """With pads and ceil windows past pads_end, OpenVINO divides by the whole kernel and
    PyTorch by the part inside the padded input."""
    x = np.ones((1, 1, 6), np.float32)
    y = jaxpool.avg_pool(x, 4, 3, 1, 1, rounding_type="ceil_torch")
    np.testing.assert_allclose(y, oracle.avg_pool(x, 4, 3, 1, 1, rounding_type="ceil_torch"))
    yt = torch.nn.functional.avg_pool1d(torch.tensor(x), 4, 3, 1, ceil_mode=True)
    assert y.shape == tuple(yt.shape)
    assert not np.allclose(y, yt.numpy())


# PyTorch's divisor equals OpenVINO's for count_include_pad=False (exclude_pad=True) and for
# count_include_pad=True without ceil windows past pads_end (no pads there); ``divisor_rule=
# "padded_input"`` is PyTorch's divisor, ceil windows past the end padding included, and
# ``divisor_override`` its override, with per-axis pads, one of them zero.
TORCH_ROWS = [
    (False, False, (1, 1, 1), "kernel", None),
    (False, True, (1, 1, 1), "kernel", None),
    (True, False, (1, 1, 1), "kernel", None),
    (True, True, (0, 0, 0), "kernel", None),
    *[(True, c, (1, 0, 1), "padded_input", d) for c in (False, True) for d in (None, 3)],
]


@pytest.mark.usefixtures("class_program")
class TestPyTorchAndGradients:
    @pytest.mark.parametrize("nd", [1, 2, 3])
    @pytest.mark.parametrize(
        "ceil_mode, count_include_pad, padding, divisor_rule, divisor_override", TORCH_ROWS
    )
    def test_matches_torch(
        self, nd, ceil_mode, count_include_pad, padding, divisor_rule, divisor_override
    ):
        rng = np.random.default_rng(nd)
        x = rng.standard_normal((2, 3, *[7, 6, 5][:nd]))
        padding = padding[:nd]
        fn = getattr(torch.nn.functional, f"avg_pool{nd}d")
        extra = {} if nd == 1 else {"divisor_override": divisor_override}
        xt = torch.tensor(x, requires_grad=True)
        yt = fn(xt, 3, 2, padding, ceil_mode, count_include_pad, **extra)
        g = rng.standard_normal(tuple(yt.shape))
        yt.backward(torch.tensor(g))

        f = functools.partial(
            jaxpool.avg_pool, kernel=3, strides=2, pads_begin=padding, pads_end=padding,
            exclude_pad=not count_include_pad, rounding_type="ceil_torch" if ceil_mode else "floor",
            divisor_rule=divisor_rule, divisor_override=extra.get("divisor_override"),
        )  # fmt: skip

        y, grad = jax.jit(lambda v, g: (f(v), jax.vjp(f, v)[1](g)[0]))(
            x.astype(np.float32), g.astype(np.float32)
        )
        np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grad, xt.grad.numpy(), rtol=1e-5, atol=1e-6)

    def test_integer_division_truncate_is_torchs_int64_average(self, x64):
        x = np.random.default_rng(4).integers(-50, 50, (2, 3, 7, 6))
        torch_rules = dict(divisor_rule="padded_input", integer_division="truncate")
        y = jaxpool.avg_pool(x, 3, 2, 1, 1, rounding_type="ceil_torch", **torch_rules)
        expected = torch.nn.functional.avg_pool2d(torch.tensor(x), 3, 2, 1, ceil_mode=True)
        assert y.dtype == jnp.int64
        np.testing.assert_array_equal(y, expected.numpy())

    def test_grads(self, x64):
        """Both divisor rules, ceil windows past the pads, order 2 in both modes."""
        x = np.random.default_rng(5).standard_normal((1, 1, 3, 4, 3))

        def both(v):
            return jaxpool.avg_pool(v, 2, 2, 1, 1, rounding_type="ceil") + jaxpool.avg_pool(
                v, 2, 2, 1, 1, exclude_pad=True, rounding_type="ceil"
            )

        check_grads(jax.jit(both), (x,), order=2, modes=("fwd", "rev"))


FUZZ = cases.fuzz(60)


@FUZZ
@hypothesis.given(
    cases.sliding_cases(with_dilations=False),
    hypothesis.strategies.sampled_from([False, True, False, True, "yes"]),
)
def test_fuzz_against_reference(config, exclude_pad):
    """A valid configuration of random attributes matches the reference (to float rounding;
    integers rounded half to even); an invalid one raises ``ValueError`` or ``TypeError``."""
    x, attrs = config
    fmt, x_in = attrs["data_format"], cases.to_layout(x, attrs["data_format"])
    if not (cases.valid_sliding(x, attrs) and isinstance(exclude_pad, bool)):
        with pytest.raises((ValueError, TypeError)):
            jaxpool.avg_pool(x_in, **attrs, exclude_pad=exclude_pad)
        return
    y = jaxpool.avg_pool(x_in, **attrs, exclude_pad=exclude_pad)
    assert y.dtype == x.dtype
    ncx_attrs = dict(cases.without_layout(attrs), exclude_pad=exclude_pad)
    check_fuzzed_average(cases.from_layout(y, fmt), x, lambda v: reference.avg_pool(v, **ncx_attrs))


def check_fuzzed_average(y, x, reference_pool):
    """``y`` against ``reference_pool(x)``: floats to rounding, integers rounded half to even
    from the float64 mean, where a float32 mean may sit just across a .5 (one unit off)."""
    expected = reference_pool(x)
    if x.dtype.kind in "iu":
        assert np.max(np.abs(y.astype(np.int64) - expected.astype(np.int64)), initial=0) <= 1
        exact = reference_pool(x.astype(np.float64))
        clear = np.abs(exact - np.floor(exact) - 0.5) > 1e-3
        np.testing.assert_array_equal(y[clear], expected[clear])
    else:
        tol = 1e-3 if x.dtype == np.float16 else 1e-6
        np.testing.assert_allclose(
            y.astype(np.float64), expected.astype(np.float64), rtol=tol, atol=tol
        )
