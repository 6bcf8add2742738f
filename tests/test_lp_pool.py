"""``lp_pool`` (ONNX LpPool-18) and ``avg_pool``'s ``dilations`` (ONNX AveragePool-19).

ONNX Runtime computes the expected values: ONNX's Python reference evaluator scales a partial
``ceil_mode`` LpPool window like an average and misplaces dilated ``ceil_mode`` AveragePool
windows, while ONNX Runtime matches the hand sums.  Random configurations (seeded) cover 1 to 3
spatial axes, both layouts, every rounding and ``auto_pad`` mode, and run under both programs
(``dispatch.force``).  ONNX's ``ceil_mode`` is jaxpool's ``rounding_type="ceil_torch"``: ONNX
Runtime drops a last window that would start in the end padding.
"""

from __future__ import annotations

import itertools

import cases
import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
import pytest
import torch
from jax.test_util import check_grads
from onnx import TensorProto, helper

import jaxpool

ort.set_default_logger_severity(3)  # ONNX Runtime warns when its output shape differs from onnx's


def _onnxruntime(op: str, x: np.ndarray, opset: int, **attrs) -> np.ndarray:
    """Runs one ONNX node on ``x`` (NCX, float32) with ONNX Runtime's CPU provider."""
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))
    y_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "pool", [x_info], [y_info])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"x": x})[0]


def _lp_reference(x, kernel, strides, dilations, pads_begin, out_spatial, p):
    """A NumPy loop over the output positions: the p-norm of each window's input elements."""
    x = np.asarray(x, np.float64)
    in_spatial = x.shape[2:]
    y = np.zeros(x.shape[:2] + tuple(out_spatial))
    for o in itertools.product(*(range(n) for n in out_spatial)):
        total = np.zeros(x.shape[:2])
        for k in itertools.product(*(range(n) for n in kernel)):
            pos = [
                oi * s + ki * d - pb
                for oi, s, ki, d, pb in zip(o, strides, k, dilations, pads_begin)
            ]
            if all(0 <= q < n for q, n in zip(pos, in_spatial)):
                total += np.abs(x[(slice(None), slice(None), *pos)]) ** p
        y[(slice(None), slice(None), *o)] = total ** (1 / p)
    return y


CHUNKS = 4
PER_CHUNK = 14  # 4 chunks x 14 configurations x 2 programs


def _chunk(chunk):
    """``(attrs, kwargs, x, p, data_format)``: random configurations, inputs, a ``p`` for
    LpPool, and the layouts by turns."""
    rng = np.random.default_rng([20, chunk])
    rows = []
    for i in range(PER_CHUNK):
        attrs, kwargs, shape = cases.onnx_window(rng)
        p = int(rng.integers(1, 4))
        x = rng.standard_normal(shape).astype(np.float32)
        rows.append((attrs, kwargs, x, p, ("NCX", "NXC")[i % 2]))
    return rows


def test_random_configurations_cover_every_mode():
    rows = [row for chunk in range(CHUNKS) for row in _chunk(chunk)]
    assert {row[2].ndim for row in rows} == {3, 4, 5}
    assert {(a["auto_pad"], a["ceil_mode"]) for a, *_ in rows} == {
        (p, c) for p in cases.ONNX_AUTO_PADS for c in (0, 1)
    }
    assert any(max(a["dilations"]) > 1 and a["auto_pad"] == "NOTSET" for a, *_ in rows)


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_matches_onnxruntime(chunk, program):
    """LpPool, and AveragePool with count_include_pad=0, and =1 where no window reaches past
    pads_end: ONNX counts the taps inside the padded input, OpenVINO the whole kernel once any
    pad is non-zero."""
    for attrs, kwargs, x, p, fmt in _chunk(chunk):
        x_in = cases.to_layout(x, fmt)
        y = cases.from_layout(jaxpool.lp_pool(x_in, p=p, data_format=fmt, **kwargs), fmt)
        expected = _onnxruntime("LpPool", x, 18, p=p, **attrs)
        np.testing.assert_allclose(y, expected, rtol=2e-5, atol=1e-5, err_msg=str(attrs))
        pads = np.reshape(attrs.get("pads", [0] * 2 * (x.ndim - 2)), (2, -1))
        for include_pad in (0, 1):
            y = jaxpool.avg_pool(x_in, exclude_pad=not include_pad, data_format=fmt, **kwargs)
            expected = _onnxruntime("AveragePool", x, 19, count_include_pad=include_pad, **attrs)
            y = cases.from_layout(y, fmt)
            np.testing.assert_allclose(y, expected, rtol=2e-5, atol=1e-6, err_msg=str(attrs))
            ends = (
                (np.asarray(y.shape[2:]) - 1) * kwargs["strides"]
                + (np.asarray(kwargs["kernel"]) - 1) * kwargs["dilations"]
                + 1
            )
            if attrs["auto_pad"] != "NOTSET" or np.any(ends > x.shape[2:] + pads.sum(0)):
                break  # count_include_pad=1 differs here


@pytest.mark.parametrize("p", [0.5, 1.5, 2.5, 4])
def test_lp_pool_matches_numpy_reference_for_any_p(p):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 7, 6))
    x[0, 0, :2, :2] = 0.0  # a window of zeros
    with jax.enable_x64(True):
        y = jaxpool.lp_pool(
            x, (3, 2), (2, 2), (1, 0), (1, 1), p=p, dilations=(1, 2), rounding_type="ceil"
        )
    expected = _lp_reference(x, (3, 2), (2, 2), (1, 2), (1, 0), y.shape[2:], p)
    np.testing.assert_allclose(np.asarray(y), expected, rtol=1e-12, atol=1e-300)


def test_lp_pool_matches_torch_on_non_negative_inputs():
    rng = np.random.default_rng(3)
    x = np.abs(rng.standard_normal((2, 4, 11, 9))).astype(np.float32)
    for p, kernel, stride in [(2, 3, 2), (1, (2, 3), (1, 2)), (3, 2, 2)]:
        expected = torch.nn.functional.lp_pool2d(torch.from_numpy(x), p, kernel, stride).numpy()
        y = jaxpool.lp_pool(x, kernel, stride, p=p)
        np.testing.assert_allclose(np.asarray(y), expected, rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_16_bit_inputs_accumulate_in_float32(dtype):
    x = jnp.asarray(np.random.default_rng(1).standard_normal((1, 2, 9, 9)) * 30, dtype)
    y = jaxpool.lp_pool(x, 3, 1, 1, 1, p=3)
    expected = jaxpool.lp_pool(x.astype(jnp.float32), 3, 1, 1, 1, p=3).astype(dtype)
    assert y.dtype == dtype
    np.testing.assert_array_equal(np.asarray(y, np.float32), np.asarray(expected, np.float32))


@pytest.mark.parametrize(
    ("p", "data_format", "order"),
    [(1, "NCX", 1), (2, "NXC", 1), (3, "NCX", 1), (1.5, "NXC", 1), (2, "NCX", 2)],
)
def test_gradients_in_both_modes(p, data_format, order, program):
    rng = np.random.default_rng(11)
    with jax.enable_x64(True):
        x = rng.uniform(0.5, 2.0, (1, 7, 6, 2)) * rng.choice([-1.0, 1.0], (1, 7, 6, 2))
        x = jnp.asarray(x if data_format == "NXC" else np.moveaxis(x, -1, 1))

        f = jax.jit(
            lambda x: jaxpool.lp_pool(
                x, (3, 2), (2, 1), (1, 0), (0, 1), p=p, dilations=(1, 2), data_format=data_format,
                rounding_type="ceil",
            )
        )  # fmt: skip

        if order == 2 and program == "cpu":
            order = 1  # second derivatives once, under the portable program: they compile slowly
        check_grads(f, (x,), order=order, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("p", [0.5, 1, 2, 3, 2.5])
def test_gradient_is_finite_at_zero(p):
    x = jnp.zeros((1, 1, 6), jnp.float32).at[0, 0, 4].set(2.0)
    g = jax.grad(lambda x: jaxpool.lp_pool(x, 2, p=p).sum())(x)
    # The windows of zeros give 0; in the last window only the non-zero element counts.
    np.testing.assert_allclose(np.asarray(g)[0, 0], [0, 0, 0, 0, 1, 0], atol=1e-6)
    _, tangent = jax.jvp(lambda x: jaxpool.lp_pool(x, 2, p=p), (x,), (jnp.ones_like(x),))
    assert np.all(np.isfinite(np.asarray(tangent)))


def test_transformations(jit_mode):
    x = jnp.asarray(np.random.default_rng(5).standard_normal((3, 2, 8)), jnp.float32)
    f = lambda x: jaxpool.lp_pool(x, 3, 2, 1, 1, p=2)  # noqa: E731
    y = jit_mode(f, x)
    np.testing.assert_allclose(jax.vmap(f)(x[:, None])[:, 0], y, rtol=1e-6)
    y_lin, f_lin = jax.linearize(f, x)
    np.testing.assert_allclose(f_lin(x), y, rtol=1e-5)  # degree-1 homogeneous
    np.testing.assert_allclose(y_lin, y, rtol=1e-6)


def test_avg_pool_without_dilations_is_unchanged():
    x = jnp.asarray(np.random.default_rng(2).standard_normal((2, 3, 9, 8)), jnp.float32)
    for kwargs in [dict(exclude_pad=True), dict(exclude_pad=False, rounding_type="ceil")]:
        a = jaxpool.avg_pool(x, 3, 2, 1, 1, **kwargs)
        b = jaxpool.avg_pool(x, 3, 2, 1, 1, dilations=1, **kwargs)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# (id, pool, input, positional arguments, keyword arguments, expected values).
HAND = [
    ("lp-windows-in-the-padding", jaxpool.lp_pool, np.ones((1, 1, 2)), (2, 3, 0, 4),
     dict(rounding_type="ceil"), [2**0.5, 0.0, 0.0]),
    ("lp-no-tap-reads-the-input", jaxpool.lp_pool, np.ones((1, 1, 1)), (2, 3, 3, 0), {}, [0.0]),
    # Taps at -1, 1 | 0, 2 | 1, 3 | 2, 4 | 3, 5: the first and last windows have one tap inside.
    ("avg-dilated-exclude_pad", jaxpool.avg_pool, np.ones((1, 1, 5)), (2, 1, 1, 1),
     dict(dilations=2, exclude_pad=True), [1, 1, 1, 1, 1]),
    ("avg-dilated-include_pad", jaxpool.avg_pool, np.ones((1, 1, 5)), (2, 1, 1, 1),
     dict(dilations=2, exclude_pad=False), [0.5, 1, 1, 1, 0.5]),
]  # fmt: skip


@pytest.mark.parametrize(
    "pool, x, args, kwargs, expected", [r[1:] for r in HAND], ids=[r[0] for r in HAND]
)
def test_hand_computed(pool, x, args, kwargs, expected):
    y = pool(jnp.asarray(x, jnp.float32), *args, **kwargs)
    # Exact but for the square root of 2.
    np.testing.assert_allclose(np.asarray(y)[0, 0], expected, rtol=1e-6)


def test_dilated_avg_pool_gradients(program):
    with jax.enable_x64(True):
        x = jnp.asarray(np.random.default_rng(4).standard_normal((1, 2, 7, 5)))

        def f(x):
            return jaxpool.avg_pool(x, (2, 2), (2, 1), 1, 1, dilations=(2, 3), exclude_pad=True)

        check_grads(jax.jit(f), (x,), order=1, modes=("fwd", "rev"))
