"""ONNX RoiAlign ``mode="max"`` through ``jaxpool.onnx.node``: ONNX Runtime's maximum, over a
bin's samples, of the largest weighted corner term ``w_k * x_k``.

The values come from ONNX Runtime (single-node models, its CPU kernel) for RoiAlign-10 and -16,
both coordinate transformation modes and sampling ratios 0 to 3, on random boxes: sub-pixel,
partly outside the map, larger than it, and (in ``half_pixel``) of negative size; on features
of both signs and wholly negative ones, where the maximum must not start from 0; and with NaN.
The derivative in the features is checked as the adjoint of the forward derivative and against
the term the reference (``reference.roi_align_onnx_max``, ONNX Runtime's kernel in NumPy)
selects.
"""

from __future__ import annotations

import functools

import cases
import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import reference
from onnx import TensorProto, helper

import jaxpool
import jaxpool.onnx

ort.set_default_logger_severity(3)


def _node(transform=None, **attrs):
    if transform is not None:
        attrs["coordinate_transformation_mode"] = transform
    return helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], mode="max", **attrs)


@functools.cache
def _session(node_bytes, opset, shapes):
    """An ONNX Runtime session of one RoiAlign node (its CPU kernel, one thread)."""
    node = onnx.NodeProto.FromString(node_bytes)
    types = dict(zip("xrb", (TensorProto.FLOAT, TensorProto.FLOAT, TensorProto.INT64)))
    inputs = [helper.make_tensor_value_info(k, types[k[0]], list(s)) for k, s in shapes]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "roi_align", inputs, [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    cpu = ["CPUExecutionProvider"]
    return ort.InferenceSession(model.SerializeToString(), options, providers=cpu)


def _onnxruntime(node, x, rois, batch, opset):
    inputs = {"x": x, "rois": rois, "b": batch}
    shapes = tuple((k, v.shape) for k, v in inputs.items())
    return _session(node.SerializeToString(), opset, shapes).run(None, inputs)[0]


def _boxes(rng, count, height, width, scale, half_pixel):
    """``cases.random_boxes`` (sub-pixel, up to the map, partly outside, the whole map), a
    third of them grown to up to three times the map, and in ``half_pixel`` some inverted
    (bins of negative size, which hold no sample there)."""
    boxes = cases.random_boxes(rng, count, height, width, scale, 0.2 if half_pixel else 0.0)
    grow = rng.uniform(size=count) < 1 / 3
    centre = (boxes[:, :2] + boxes[:, 2:]) / 2
    reach = rng.uniform(0, 1.5, (count, 1)) * np.array([width, height]) / scale
    half = (boxes[:, 2:] - boxes[:, :2]) / 2 + reach
    grown = np.concatenate([centre - half, centre + half], 1)
    return np.where(grow[:, None], grown, boxes).astype(np.float32)


def _features(rng, shape, kind):
    x = rng.standard_normal(shape)
    if kind == "negative":
        x = -np.abs(x) - 0.25
    return x.astype(np.float32)


# RoiAlign-10 has no coordinate_transformation_mode (its rule is output_half_pixel); from
# RoiAlign-16 both modes, and half_pixel by default.
VERSIONS = [(10, None), (16, None), (16, "half_pixel"), (16, "output_half_pixel")]
# Each version at two sampling ratios, each ratio in both coordinate transformation modes, the
# layouts taking turns (channels-last through the node's bound function and arguments).
CASES = [
    (*v, ratio, ("NCX", "NXC")[k // 2])
    for ratio in range(4)
    for k, v in enumerate(VERSIONS)
    if (ratio + k) % 2 == 0
]


@pytest.mark.parametrize(("opset", "transform", "sampling_ratio", "data_format"), CASES)
def test_matches_onnxruntime(opset, transform, sampling_ratio, data_format):
    half_pixel = transform == "half_pixel" or (transform is None and opset >= 16)
    rng = np.random.default_rng([opset, VERSIONS.index((opset, transform)), sampling_ratio])
    # Both kinds of features on one shape, scale and output size: one program.
    height, width = (int(v) for v in rng.integers(3, 12, 2))
    scale = float(rng.choice([1.0, 0.5, 0.25]))
    size = dict(zip(("output_height", "output_width"), (int(v) for v in rng.integers(1, 4, 2))))
    node = _node(transform, sampling_ratio=sampling_ratio, spatial_scale=scale, **size)
    pool = jaxpool.onnx.node(node, opset=opset)
    for kind in ("signed", "negative"):
        x = _features(rng, (2, 3, height, width), kind)
        # The random boxes, and one whose samples lie between the map's elements.
        inside = np.array([[0.6, 0.7, 1.9, 2.1]], np.float32) / np.float32(scale)
        rois = np.concatenate([_boxes(rng, 7, height, width, scale, half_pixel), inside])
        batch = rng.integers(0, 2, 8).astype(np.int64)
        expected = _onnxruntime(node, x, rois, batch, opset)
        if data_format == "NCX":
            actual = np.asarray(pool(x, rois, batch))
        else:
            nxc = pool.fn(cases.to_layout(x, "NXC"), rois, batch, data_format="NXC", **pool.kwargs)
            actual = cases.from_layout(nxc, "NXC")
        assert actual.shape == expected.shape and actual.dtype == expected.dtype
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6, err_msg=str(node))
        if kind == "negative":
            # Every term of a sample on the map is negative or a zero-weight 0: the runtime's
            # maximum is not roi_align's, which starts from 0.
            assert (expected < 0).any()


def test_largest_corner_term_not_largest_sample():
    """One sample at (1.5, 1.5) reads elements 5, 6, 9 and 10 of ``arange(16) - 16`` with
    weight 1/4 each: ONNX's maximum is the largest term, -6 / 4; the sample is -8.5, and
    ``roi_align``'s maximum, which starts from 0, is 0."""
    x = (np.arange(16, dtype=np.float32) - 16).reshape(1, 1, 4, 4)
    rois = np.array([[1.0, 1.0, 2.0, 2.0]], np.float32)
    batch = np.zeros(1, np.int64)
    node = _node("output_half_pixel", sampling_ratio=1)
    expected = _onnxruntime(node, x, rois, batch, 16)
    assert expected.ravel().tolist() == [-1.5]
    np.testing.assert_array_equal(np.asarray(jaxpool.onnx.node(node)(x, rois, batch)), expected)
    public = jaxpool.roi_align(x, rois, batch, 1, sampling_ratio=1, mode="max")
    assert np.asarray(public).ravel().tolist() == [0.0]


@pytest.mark.parametrize(
    ("box", "sampling_ratio", "transform"),
    [
        ((0.5, 0.5, 4.5, 4.5), 2, "half_pixel"),
        ((0.5, 0.5, 4.5, 4.5), 2, "output_half_pixel"),
        ((0.3, 0.7, 5.2, 4.9), 0, "half_pixel"),
        # Adaptive bins whose first samples lie left of the map, then far past its end.
        ((-9.0, 1.2, 4.0, 3.4), 0, "output_half_pixel"),
        ((2.2, -0.4, 19.0, 30.0), 0, "half_pixel"),
    ],
)
def test_nan_as_onnxruntime(box, sampling_ratio, transform):
    """A NaN counts only where it is the first corner term of a bin's first sample (the
    runtime takes a later term or sample only where strictly larger); a sample outside the map
    reads ``0 * x[0, 0]``."""
    rng = np.random.default_rng(4)
    rois = np.array([box], np.float32)
    batch = np.zeros(1, np.int64)
    node = _node(transform, output_height=2, output_width=2, sampling_ratio=sampling_ratio)
    pool = jaxpool.onnx.node(node)
    x = _features(rng, (1, 1, 6, 6), "negative")
    for row, column in [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (2, 1), (3, 3), (5, 5)]:
        for value in (np.nan, np.inf):
            poisoned = x.copy()
            poisoned[0, 0, row, column] = value
            expected = _onnxruntime(node, poisoned, rois, batch, 16)
            actual = np.asarray(pool(poisoned, rois, batch))
            np.testing.assert_allclose(actual, expected, 1e-5, 1e-6, err_msg=f"{row, column}")


# Adaptive sampling compiles several programs and their derivatives: one case of it.
@pytest.mark.parametrize(("half_pixel", "sampling_ratio"), [(True, 0), (False, 2), (True, 3)])
def test_gradient_takes_the_selected_term(half_pixel, sampling_ratio, x64):
    """The derivative in ``x`` is the weight of the term each output took, at its element:
    the reverse derivative equals the reference's selection, and is the forward one's
    adjoint (``<J v, w> = <v, J^T w>``; with fixed ratios: adaptive sampling's forward mode
    compiles programs of its own, and its reverse derivative is already the selection)."""
    rng = np.random.default_rng(7 + sampling_ratio + half_pixel)
    x = rng.standard_normal((2, 3, 8, 9)) - 0.5
    rois = _boxes(rng, 6, 8, 9, 0.5, half_pixel).astype(np.float64)
    batch = rng.integers(0, 2, 6)
    transform = "half_pixel" if half_pixel else "output_half_pixel"
    attrs = dict(spatial_scale=0.5, sampling_ratio=sampling_ratio)
    pool = jaxpool.onnx.node(_node(transform, output_height=2, output_width=3, **attrs))

    def f(a):
        return pool(a, rois, batch)

    expected, winners = reference.roi_align_onnx_max(
        x, rois, batch, (2, 3), half_pixel=half_pixel, **attrs
    )
    y, vjp = jax.vjp(f, jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(y), expected, rtol=1e-12, atol=1e-12)
    w = rng.standard_normal(y.shape)
    (jtw,) = vjp(jnp.asarray(w))
    selected = np.zeros_like(x)
    n, row, column = (winners[..., k].astype(np.int64) for k in range(3))
    channel = np.arange(x.shape[1])[None, :, None, None]
    np.add.at(selected, (n, channel, row, column), winners[..., 3] * w)
    np.testing.assert_allclose(np.asarray(jtw), selected, rtol=1e-12, atol=1e-12)
    if not sampling_ratio:
        return
    v = rng.standard_normal(x.shape)
    _, jv = jax.jvp(f, (jnp.asarray(x),), (jnp.asarray(v),))
    np.testing.assert_allclose(jnp.vdot(jv, w), jnp.vdot(v, jtw), rtol=1e-12)


def test_box_derivatives(x64):
    rng = np.random.default_rng(31)
    x = jnp.asarray(rng.standard_normal((1, 2, 7, 8)))
    node = _node("half_pixel", output_height=2, output_width=2, sampling_ratio=2)
    pool = jaxpool.onnx.node(node)
    rois = jnp.asarray([[0.7, 1.3, 5.2, 4.6], [2.1, 0.4, 6.3, 6.1]])
    cases.check_box_derivatives(lambda r: pool(x, r, np.zeros(2, np.int64)), rois, rng)
