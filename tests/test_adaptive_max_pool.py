"""adaptive_max_pool and adaptive_avg_pool against the OpenVINO runtime (AdaptiveMaxPool-8,
AdaptiveAvgPool-8), PyTorch and ``tests/reference.py`` (for NaN, which the runtime skips, and
signed zeros), both ops on the same inputs.

The classes' tests (the runtime, PyTorch and gradient checks) run on both programs
(``class_program``).
"""

import functools
import math

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
from test_avg_pool import check_average, check_fuzzed_average

import jaxpool

torch.set_num_threads(1)


def _with_indices(x, output_size, **kwargs):
    return jaxpool.adaptive_max_pool(x, output_size, return_indices=True, **kwargs)


SEEDS = range(48)


def test_random_configurations_cover_every_kind_of_bin():
    configs = [cases.adaptive_config(seed) for seed in SEEDS]
    sizes = [
        (length, out)
        for cfg in configs
        for length, out in zip(cfg["shape"][2:], cfg["output_size"])
    ]
    assert any(out is None for _, out in sizes)
    assert any(out == 1 and length > 1 for length, out in sizes)
    assert any(out is not None and out > length for length, out in sizes)
    assert any(out is not None and 1 < out < length and length % out for length, out in sizes)
    assert {len(cfg["shape"]) for cfg in configs} == {3, 4, 5}
    # Small bins (at most 25 elements in all) and large ones, one and several pooled axes.
    widths = [
        math.prod(
            max(b - a for a, b in reference.adaptive_bins(length, out))
            for length, out in zip(cfg["shape"][2:], cases.runtime_size(cfg))
        )
        for cfg in configs
    ]
    assert min(widths) == 1 and any(w <= 25 < max(widths) for w in widths)
    pooled = [
        sum(o != n for o, n in zip(cases.runtime_size(cfg), cfg["shape"][2:])) for cfg in configs
    ]
    assert {0, 1, 2, 3} <= set(pooled)
    assert {c["dtype"] for c in configs} == set(cases.ADAPTIVE_DTYPES)
    assert {(c["data_format"], c["ties"]) for c in configs} == {
        (f, t) for f in ("NCX", "NXC") for t in (False, True)
    }
    assert any(set(cases.runtime_size(c)) == {1} for c in configs if c["dtype"] == "int8")


# (input, NCX shape, output size, layouts): NaN among normal values with bins of -inf;
# cases.special's maps (2, 2, 6, 6); tied signed zeros with NaNs of several payloads (a run is
# a stretch of bins of one width, which the programs pool as one region).
REFERENCE_CASES = [
    *[("nan-inf", s, o, "NCX") for s, o in [((2, 2, 9, 7), (4, 3)), ((1, 2, 30), (2,)),
                                            ((1, 2, 50, 50), (16, 16))]],
    *[("specials", (4, 2, 6, 6), o, "NCX") for o in [(4, 4), (3, 5), (6, 2)]],
    *[("signed-zeros", s, o, f) for s, o in [
        ((2, 3, 8, 12), (4, 3)),  # one regular run per axis
        ((2, 3, 7, 7), (1, 1)),  # global
        ((2, 3, 50), (16,)),  # several runs along one axis
        ((2, 3, 11, 10), (4, 3)),  # several runs along two axes
        ((1, 2, 50, 50), (16, 16)),  # two periods of one run of 8 bins per axis: one region
        ((1, 2, 17, 17, 17), (8, 8, 8)),  # one run of 8 bins per axis, in 3-D
        ((1, 2, 4, 6, 5), (2, 3, 2)),
    ] for f in ("NCX", "NXC")],
]  # fmt: skip


def _reference_input(data, shape):
    if data == "specials":
        return np.concatenate([cases.special(seed) for seed in range(2)])  # along the batch
    rng = np.random.default_rng(4 if data == "nan-inf" else 7)
    if data == "nan-inf":
        x = rng.standard_normal(shape).astype(np.float32)
        x[rng.random(shape) < 0.1] = np.nan
        x[..., :3] = -np.inf
        return x
    bits = np.where(rng.random(shape) < 0.5, 0x80000000, 0).astype(np.uint32)  # -0.0 or 0.0
    nan = rng.random(shape) < 0.05
    bits[nan] = 0x7FC00000 + rng.integers(1, 1 << 20, int(nan.sum())).astype(np.uint32)
    x = bits.view(np.float32)
    x[rng.random(shape) < 0.1] = -1.0
    return x


@pytest.mark.usefixtures("class_program")
class TestRuntime:
    @pytest.mark.parametrize("seed", SEEDS)
    def test_matches_runtime(self, seed):
        """adaptive_max_pool's values and int32 indices (every fourth configuration also the
        program without indices) and adaptive_avg_pool's averages."""
        cfg, rng = cases.adaptive_config(seed), np.random.default_rng(seed)
        x = cases.adaptive_sample(rng, cfg["dtype"], cfg["shape"], cfg["ties"])
        x_ov = x.astype(np.float32) if cfg["dtype"] == "bfloat16" else x
        size = cases.runtime_size(cfg)
        expected, expected_i = oracle.adaptive_max_pool(x_ov, size)
        y, i = cases.call_in_layout(_with_indices, x, cfg)
        assert y.dtype == x.dtype and i.dtype == np.int32
        np.testing.assert_array_equal(y.astype(expected.dtype), expected)
        np.testing.assert_array_equal(i, expected_i)
        if seed % 4 == 0:  # the values-only program
            np.testing.assert_array_equal(
                cases.call_in_layout(jaxpool.adaptive_max_pool, x, cfg), y
            )
        if x.dtype.kind in "iu" and set(size) == {1}:
            # The runtime's global integer average truncates (see below); its AvgPool rounds.
            expected = oracle.avg_pool(x_ov, list(x.shape[2:]))
        else:
            expected = oracle.adaptive_avg_pool(x_ov, size)
        y = cases.call_in_layout(jaxpool.adaptive_avg_pool, x, cfg)
        assert y.dtype == x.dtype
        check_average(y, expected, cfg["dtype"])

    @pytest.mark.parametrize("data_format", ["NCX", "NXC"])
    @pytest.mark.parametrize("form", range(len(cases.ADAPTIVE_FORMS)))
    def test_every_form_matches_runtime(self, form, data_format):
        """Each form the programs take (global, small bins in one chain, large bins one axis at
        a time), with and without ties: the averages, then, with infinities added, the maxima
        with and without indices; the average's gradient is the transpose of the runtime's
        linear map."""
        cfg = cases.form_config(form, data_format)
        size = cases.runtime_size(cfg)
        rng = np.random.default_rng(form)
        for ties in (False, True):
            x = cases.adaptive_sample(rng, "float32", cfg["shape"], ties)
            y = cases.call_in_layout(jaxpool.adaptive_avg_pool, x, cfg)
            np.testing.assert_allclose(y, oracle.adaptive_avg_pool(x, size), rtol=2e-6, atol=1e-6)
            x[rng.random(x.shape) < 0.05] = np.inf
            x[rng.random(x.shape) < 0.05] = -np.inf
            expected, expected_i = oracle.adaptive_max_pool(x, size)
            y, i = cases.call_in_layout(_with_indices, x, cfg)
            np.testing.assert_array_equal(y, expected)
            np.testing.assert_array_equal(i, expected_i)
            values = cases.call_in_layout(jaxpool.adaptive_max_pool, x, cfg)
            np.testing.assert_array_equal(values, expected)
        # The average is linear: <f(v), w> = <v, grad> for a random v and w, in the layout.
        v = rng.standard_normal(x.shape).astype(np.float32)
        w = rng.standard_normal(y.shape).astype(np.float32)
        fmt, w_in = data_format, cases.to_layout(w, data_format)
        grad = jax.jit(
            jax.grad(
                lambda a: jnp.sum(
                    jaxpool.adaptive_avg_pool(a, cfg["output_size"], data_format=fmt) * w_in
                )
            )
        )(cases.to_layout(v, fmt))
        lhs = float(np.sum(oracle.adaptive_avg_pool(v, size) * w))
        assert abs(lhs - float(np.sum(cases.from_layout(grad, fmt) * v))) < 1e-4 * (1 + abs(lhs))

    @pytest.mark.parametrize("dtype", ["float32", "int8", "uint8", "int32"])
    @pytest.mark.parametrize("data_format", ["NCX", "NXC"])
    def test_global_max_matches_runtime(self, dtype, data_format):
        """One bin per plane (the portable program reduces the merged spatial axes).  With NaN,
        against tests/reference.py: the runtime skips NaN."""
        rng = np.random.default_rng(len(dtype))
        for shape in [(2, 3, 9), (2, 3, 7, 7), (1, 2, 1, 5), (2, 2, 3, 4, 5)]:
            output_size = [1] * (len(shape) - 2)
            for data in ("random", "ties", "-inf", "nan"):
                if dtype != "float32" and data in ("-inf", "nan"):
                    continue
                x = cases.adaptive_sample(rng, dtype, shape, ties=data == "ties")
                if data in ("-inf", "nan"):
                    x[rng.random(shape) < 0.3] = -np.inf
                    x[:, 0] = -np.inf
                if data == "nan":
                    x[rng.random(shape) < 0.1] = np.nan
                    expected, expected_i = reference.adaptive_max_pool(x, output_size)
                else:
                    expected, expected_i = oracle.adaptive_max_pool(x, output_size)
                cfg = dict(data_format=data_format, output_size=output_size)
                y, i = cases.call_in_layout(_with_indices, x, cfg)
                np.testing.assert_array_equal(y, expected, err_msg=f"{shape} {data}")
                np.testing.assert_array_equal(i, expected_i, err_msg=f"{shape} {data}")

    def test_float64(self, x64):
        """Against the runtime's float32: adaptive_max_pool's values and int64 indices (every
        form of the type), adaptive_avg_pool's values."""
        rng = np.random.default_rng(11)
        for seed in (2, 8, 14, 20):  # float32 configurations
            cfg = cases.adaptive_config(seed)
            x = rng.standard_normal(cfg["shape"])
            x32, size = x.astype(np.float32), cases.runtime_size(cfg)
            y = jaxpool.adaptive_avg_pool(x, cfg["output_size"])
            assert y.dtype == jnp.float64
            np.testing.assert_allclose(y, oracle.adaptive_avg_pool(x32, size), rtol=1e-5, atol=1e-6)
            expected, expected_i = oracle.adaptive_max_pool(x32, size)
            for index_element_type in (None, "i64", jnp.int64):
                y, i = _with_indices(x, cfg["output_size"], index_element_type=index_element_type)
                assert y.dtype == jnp.float64 and i.dtype == jnp.int64
                np.testing.assert_array_equal(i, expected_i)
                np.testing.assert_array_equal(y.astype(np.float32), expected)

    def test_output_size_none_and_identity(self, jit_mode):
        x = np.random.default_rng(2).standard_normal((2, 3, 4, 1, 5)).astype(np.float32)
        y, i = jit_mode(
            lambda v: jaxpool.adaptive_max_pool(v, (None, None, 5), return_indices=True), x
        )
        np.testing.assert_array_equal(y, x)
        np.testing.assert_array_equal(i, np.broadcast_to(np.arange(20).reshape(4, 1, 5), x.shape))
        np.testing.assert_array_equal(
            jit_mode(lambda v: jaxpool.adaptive_avg_pool(v, (4, 1, 5)), x), x
        )
        np.testing.assert_array_equal(jaxpool.adaptive_avg_pool(x, (None, None, 5)), x)
        y, i = jaxpool.adaptive_max_pool(x, (None, 1, 2), return_indices=True)
        expected, expected_i = oracle.adaptive_max_pool(x, (4, 1, 2))
        np.testing.assert_array_equal(y, expected)
        np.testing.assert_array_equal(i, expected_i)
        y, expected = (
            jaxpool.adaptive_avg_pool(x, (None, 1, 2)),
            oracle.adaptive_avg_pool(x, (4, 1, 2)),
        )
        np.testing.assert_allclose(y, expected, rtol=2e-6, atol=1e-6)

    @pytest.mark.parametrize("dtype", ["int8", "uint8", "int32"])
    def test_integer_global_average_rounds(self, dtype):
        """To output size 1 the CPU runtime's integer AdaptiveAvgPool truncates toward zero and
        sums 8-bit inputs in their own type, saturating; ours rounds half to even like every other
        output size of the runtime and its AvgPool."""
        x = np.array([[[2, 3, 3, 3, 100, 100, 100, 100]]]).astype(dtype)
        for size in ([1], [2]):
            expected = oracle.avg_pool(x, 8 // size[0])
            np.testing.assert_array_equal(jaxpool.adaptive_avg_pool(x, size), expected)
        np.testing.assert_array_equal(
            jaxpool.adaptive_avg_pool(x[..., :4], 1),
            oracle.adaptive_avg_pool(x[..., :4], [2])[..., 1:],
        )
        assert oracle.adaptive_avg_pool(x[..., :4], [1])[0, 0, 0] == 2  # 2.75 truncated

    @pytest.mark.parametrize("data, shape, output_size, data_format", REFERENCE_CASES)
    def test_special_values_match_reference(self, data, shape, output_size, data_format):
        """NaN is the maximum with the first NaN's index (the runtime skips NaN), a bin of -inf
        gives -inf and its first element, and of tied signed zeros the first is the maximum:
        the values bit for bit (NaN payloads, signs of zeros; the values-only program: NaN where
        NaN, zeros of either sign); the gradient goes to the indices; the averages of
        cases.special's maps (NaN where NaN)."""
        x = _reference_input(data, shape)
        expected, expected_i = reference.adaptive_max_pool(x, output_size)
        cfg = dict(data_format=data_format, output_size=output_size)
        y, i = cases.call_in_layout(_with_indices, x, cfg)
        np.testing.assert_array_equal(y.view(np.uint32), expected.view(np.uint32))
        np.testing.assert_array_equal(i, expected_i)
        np.testing.assert_array_equal(
            cases.call_in_layout(jaxpool.adaptive_max_pool, x, cfg), expected
        )
        if data == "signed-zeros":
            return
        grad = jax.jit(jax.grad(lambda v: jaxpool.adaptive_max_pool(v, output_size).sum()))(x)
        counts = reference.max_unpool(np.ones(i.shape, np.float32), i, x.shape, axis=2)
        np.testing.assert_array_equal(grad, counts)
        if data == "specials":
            y = jaxpool.adaptive_avg_pool(x, output_size)
            np.testing.assert_allclose(y, reference.adaptive_avg_pool(x, output_size), rtol=1e-6)


def _planes(a, data_format):
    """``a`` as ``(N, C, spatial elements)`` planes."""
    a = cases.from_layout(a, data_format)
    return a.reshape(*a.shape[:2], -1)


@pytest.mark.usefixtures("class_program")
class TestPyTorchAndGradients:
    @pytest.mark.parametrize("kind", ["max", "avg"])
    @pytest.mark.parametrize("nd", [1, 2, 3])
    def test_matches_torch_with_grads(self, nd, kind):
        """adaptive_max_pool's values, indices and gradient; adaptive_avg_pool's values and
        gradient."""
        rng = np.random.default_rng(nd)
        shape = (2, 3, *[13, 9, 5][:nd])
        output_size = [5, 4, 3][:nd]
        x = rng.permutation(np.prod(shape)).reshape(shape).astype(np.float64) / 7  # tie-free
        xt = torch.tensor(x, requires_grad=True)
        torch_op = getattr(torch.nn.functional, f"adaptive_{kind}_pool{nd}d")
        out = torch_op(xt, output_size, **({"return_indices": True} if kind == "max" else {}))
        yt, it = out if kind == "max" else (out, None)
        g = rng.standard_normal(tuple(yt.shape))
        yt.backward(torch.tensor(g))

        f = functools.partial(getattr(jaxpool, f"adaptive_{kind}_pool"), output_size=output_size)
        y, grad = jax.jit(lambda v, g: (f(v), jax.vjp(f, v)[1](g)[0]))(
            x.astype(np.float32), g.astype(np.float32)
        )
        np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(grad, xt.grad.numpy(), rtol=1e-5, atol=1e-6)
        if kind == "max":
            _, i = _with_indices(x.astype(np.float32), output_size)
            np.testing.assert_array_equal(i, it.numpy())

    @pytest.mark.parametrize("kind", ["max", "avg"])
    def test_grads(self, kind, x64):
        """Order 2 in both modes: a narrow-bin axis, a wide-bin axis (11 -> 1) and output larger
        than input."""
        rng = np.random.default_rng(0)
        x = rng.permutation(2 * 3 * 5 * 11).reshape(2, 3, 5, 11) / 13.0  # tie-free
        f = getattr(jaxpool, f"adaptive_{kind}_pool")
        check_grads(jax.jit(lambda v: f(v, (7, 1))), (x,), order=2, modes=("fwd", "rev"))

    @pytest.mark.parametrize(
        "shape, data_format",
        [
            ((2, 3, 4, 5), "NCX"),
            ((2, 4, 5, 3), "NXC"),
            ((3, 2, 7), "NCX"),
            ((2, 3, 2, 3, 4), "NXC"),
        ],
    )
    def test_global_max_derivatives_read_the_argmax(self, shape, data_format, x64):
        """One bin per plane: the gradient places each cotangent at the argmax (a NaN, or the
        first of tied maxima, included) and the tangent reads ``x_dot`` there only."""
        rng = np.random.default_rng(len(shape))
        x = rng.integers(-3, 3, shape).astype(np.float32)  # many ties
        x.reshape(-1)[rng.choice(x.size, 3, replace=False)] = np.nan
        output_size = (1,) * (len(shape) - 2)
        f = functools.partial(
            jaxpool.adaptive_max_pool, output_size=output_size, data_format=data_format
        )
        y, i = f(x, return_indices=True)
        planes, positions = _planes(x, data_format), _planes(i, data_format)[..., 0]
        ct = rng.standard_normal(y.shape).astype(np.float32)
        expected = np.zeros_like(planes)
        np.put_along_axis(expected, positions[..., None], _planes(ct, data_format), axis=2)
        grad = jax.jit(jax.grad(lambda v: jnp.sum(f(v) * ct)))(x)
        np.testing.assert_array_equal(_planes(grad, data_format), expected)

        x_dot = rng.standard_normal(shape).astype(np.float32)
        x_dot.reshape(-1)[rng.choice(x.size, 4, replace=False)] = np.inf
        y_dot = jax.jit(lambda x, t: jax.jvp(f, (x,), (t,))[1])(x, x_dot)
        read = np.take_along_axis(_planes(x_dot, data_format), positions[..., None], axis=2)
        np.testing.assert_array_equal(_planes(y_dot, data_format), read)

        tie_free = rng.permutation(x.size).reshape(shape) / 7.0
        check_grads(jax.jit(f), (tie_free,), order=2, modes=("fwd", "rev"))


def test_huge_input_without_indices():
    """Checked abstractly (2**32 elements, 16 GiB); with int32 plane indices the 2**32
    elements of one plane overflow (see test_errors_adaptive.py)."""
    huge = jax.ShapeDtypeStruct((2**12, 2**10, 2**5, 2**5), jnp.float32)
    y = jax.eval_shape(lambda x: jaxpool.adaptive_max_pool(x, 2), huge)
    assert y.shape == (2**12, 2**10, 2, 2)
    y, i = jax.eval_shape(lambda x: jaxpool.adaptive_max_pool(x, 2, return_indices=True), huge)
    assert y.shape == i.shape == (2**12, 2**10, 2, 2) and i.dtype == jnp.int32


@cases.fuzz(40)
@hypothesis.given(cases.adaptive_cases())
def test_fuzz_against_reference(config):
    """Random output sizes, valid and invalid, against tests/reference.py: the maxima and
    their indices exactly, the averages as test_avg_pool.py's fuzz test checks them."""
    x, size, fmt = config
    x_in = cases.to_layout(x, fmt)
    if not cases.valid_adaptive(x, size, fmt):
        for pool in (_with_indices, jaxpool.adaptive_avg_pool):
            with pytest.raises((ValueError, TypeError)):
                pool(x_in, size, data_format=fmt)
        return
    y_ref, i_ref = reference.adaptive_max_pool(x, size)
    y, i = _with_indices(x_in, size, data_format=fmt)
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(cases.from_layout(y, fmt), y_ref)
    np.testing.assert_array_equal(cases.from_layout(i, fmt), i_ref)
    assert 0 <= np.min(i_ref) and np.max(i_ref) < math.prod(x.shape[2:])
    y = jaxpool.adaptive_avg_pool(x_in, size, data_format=fmt)
    assert y.dtype == x.dtype
    check_fuzzed_average(
        cases.from_layout(y, fmt), x, lambda v: reference.adaptive_avg_pool(v, size)
    )
