"""``jaxpool.onnx.node``: ONNX's own backend node tests, and ONNX Runtime on random nodes.

Every pooling case of ``onnx.backend.test.case.node`` (the ``export*`` cases of its maxpool,
averagepool, lppool, globalmaxpool, globalaveragepool, maxunpool and roialign modules) runs
through the bridge and must give ONNX's expected outputs, dtypes included.  Random nodes of
every pooling operation are checked against ONNX Runtime (RoiAlign's ``mode="max"`` in
``test_roialign_onnx_max.py``).
"""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import subprocess
import sys
import warnings

import cases
import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import jaxpool.onnx
from jaxpool._src import dispatch

ort.set_default_logger_severity(3)  # ONNX Runtime warns when its output shape differs from onnx's

# ONNX's pooling node-test modules, and the op types of their cases.
_CASE_TYPES = {
    "maxpool": "MaxPool",
    "averagepool": "AveragePool",
    "lppool": "LpPool",
    "globalmaxpool": "GlobalMaxPool",
    "globalaveragepool": "GlobalAveragePool",
    "maxunpool": "MaxUnpool",
    "roialign": "RoiAlign",
}


def _node_test_cases():
    """The cases the ``export*`` methods of ONNX's pooling test modules register on import."""
    import onnx.backend.test.case.node as node_cases

    node_cases._TargetOpType = None  # register every op type's cases
    cases = []
    for module in _CASE_TYPES:
        name = f"onnx.backend.test.case.node.{module}"
        start = len(node_cases._NodeTestCases)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if name in sys.modules:
                importlib.reload(sys.modules[name])
            else:
                importlib.import_module(name)
        cases += node_cases._NodeTestCases[start:]
    return [case for case in cases if len(case.model.graph.node) == 1]


NODE_TEST_CASES = _node_test_cases()


def test_every_pooling_module_has_cases():
    ops = {case.model.graph.node[0].op_type for case in NODE_TEST_CASES}
    assert ops == set(_CASE_TYPES.values())


@pytest.mark.parametrize("case", NODE_TEST_CASES, ids=lambda case: case.name)
def test_onnx_backend_node_test(case, x64):
    inputs, expected = case.data_sets[0]
    node = case.model.graph.node[0]
    (opset,) = (o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx"))
    outputs = jax.tree.leaves(jaxpool.onnx.node(node, opset=opset)(*inputs))
    for actual, want in zip(outputs, expected, strict=True):
        actual = np.asarray(actual)
        assert (actual.shape, actual.dtype) == (want.shape, want.dtype)
        np.testing.assert_allclose(actual, want, rtol=case.rtol, atol=case.atol)


# --------------------------------------------------------------------------------------------
# ONNX Runtime on random nodes.
# --------------------------------------------------------------------------------------------


def _onnxruntime(node, inputs, opset=22):
    names, info = [name for name in node.input if name], helper.make_tensor_value_info
    ins = [
        info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in zip(names, inputs)
    ]
    values_indices = (TensorProto.FLOAT, TensorProto.INT64)
    outs = [info(n, t, None) for n, t in zip(node.output, values_indices)]
    graph = helper.make_graph([node], "pool", ins, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, dict(zip(names, inputs)))


def _check(node, inputs, rtol=2e-5, atol=1e-5, index_element_type=None, opset=22):
    expected = _onnxruntime(node, inputs, opset)
    actual = jaxpool.onnx.node(node, index_element_type=index_element_type, opset=opset)(*inputs)
    for a, e in zip(jax.tree.leaves(actual), expected, strict=True):
        a = np.asarray(a)
        assert a.shape == e.shape, (node, a.shape, e.shape)
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=str(node))


CONFIGS = 30


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool", "LpPool"])
def test_sliding_nodes_match_onnxruntime(op_type, x64):
    rng = np.random.default_rng(["MaxPool", "AveragePool", "LpPool"].index(op_type))
    for i in range(CONFIGS):
        attrs, _, shape = cases.onnx_window(rng)
        # Ties are resolved alike, but random floats keep the indices unambiguous.
        x = rng.standard_normal(shape).astype(np.float32)
        outputs = ["y"]
        if op_type == "MaxPool":
            if i % 2:
                outputs.append("indices")
            if i % 4 == 3 and len(shape) == 4:
                attrs["storage_order"] = 1
        elif op_type == "AveragePool":
            attrs["count_include_pad"] = i % 2
        else:
            attrs["p"] = int(rng.integers(1, 4))
        node = helper.make_node(op_type, ["x"], outputs, **attrs)
        with dispatch.force(("portable", "cpu")[i % 2]):
            _check(node, [x])


# (attributes, input length, opset, expected): windows that reach past the end padding, where
# ONNX divides by fewer taps than OpenVINO's AvgPool (and avg_pool, test_avg_pool.py).
DIVISORS = [
    # The last window of [0, 5) with pads (1, 0) covers 3, 4 and a position past the end
    # padding: ONNX divides by 2, OpenVINO by 3.
    (dict(kernel_shape=[3], strides=[2], pads=[1, 0]), 5, 22, [2 / 3, 1, 1]),
    # Taps at 5 and 7 of [0, 6) with pads (1, 1): 7 lies past the end padding, so ONNX divides
    # by 1 where OpenVINO's AvgPool-16 divides by 2.
    (dict(kernel_shape=[2], strides=[3], pads=[1, 1], dilations=[2]), 6, 19, [0.5, 1, 1]),
]


@pytest.mark.parametrize("attrs, length, opset, expected", DIVISORS)
def test_onnx_divisor_past_the_end_padding(x64, attrs, length, opset, expected):
    node = helper.make_node("AveragePool", ["x"], ["y"], **attrs, ceil_mode=1, count_include_pad=1)
    x = np.ones((1, 1, length), np.float32)
    np.testing.assert_allclose(np.asarray(jaxpool.onnx.node(node)(x)), [[expected]], rtol=1e-7)
    _check(node, [x], opset=opset)


@pytest.mark.parametrize("op_type", ["GlobalMaxPool", "GlobalAveragePool", "GlobalLpPool"])
def test_global_nodes_match_onnxruntime(op_type):
    rng = np.random.default_rng(5)
    for nd in (1, 2, 3):
        shape = (2, 3, *(int(v) for v in rng.integers(1, 6, nd)))
        x = rng.standard_normal(shape).astype(np.float32)
        attrs = {"p": int(rng.integers(1, 4))} if op_type == "GlobalLpPool" else {}
        # ONNX Runtime implements GlobalLpPool up to opset 21, which it is unchanged in.
        _check(helper.make_node(op_type, ["x"], ["y"], **attrs), [x], opset=21)


def test_max_unpool_matches_onnxruntime(x64):
    """Unpools ONNX Runtime's MaxPool outputs; the pooled input has the shape that MaxUnpool
    infers (ONNX Runtime refuses indices beyond it)."""
    rng = np.random.default_rng(9)
    checked = 0
    while checked < 12:
        nd = 1 + checked % 3
        kernel = [int(v) for v in rng.integers(1, 4, nd)]
        strides = [int(v) for v in rng.integers(1, 4, nd)]
        pads = [int(rng.integers(0, k)) for k in kernel * 2]
        pooled = [int(v) for v in rng.integers(1, 5, nd)]
        spatial = [
            (n - 1) * s - pb - pe + k
            for n, s, pb, pe, k in zip(pooled, strides, pads[:nd], pads[nd:], kernel)
        ]
        if any(length < k for length, k in zip(spatial, kernel)):
            continue  # keep every window on the input
        x = rng.standard_normal((2, 2, *spatial)).astype(np.float32)
        attrs = dict(kernel_shape=kernel, strides=strides, pads=pads)
        y, indices = _onnxruntime(helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs), [x])
        names, values = ["y", "i"], [y, indices]
        if checked % 2:  # an output_shape equal to the inferred shape
            names.append("shape")
            values.append(np.asarray(x.shape, np.int64))
        _check(helper.make_node("MaxUnpool", names, ["z"], **attrs), values)
        checked += 1


def test_region_nodes_match_onnxruntime(x64):
    """MaxRoiPool and RoiAlign (avg) on random boxes, some partly or wholly off the map, some
    of negative size.  ONNX Runtime implements both up to opset 21.  Each iteration compiles
    its own programs: six take every pair of sampling ratio and transformation mode once."""
    rng = np.random.default_rng(13)
    for i in range(6):
        x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
        corner = rng.uniform(-2, 10, (4, 2))
        boxes = np.concatenate([corner, corner + rng.uniform(-1, 8, (4, 2))], 1).astype(np.float32)
        scale = float(rng.choice([1.0, 0.5, 0.25]))
        shape = [int(v) for v in rng.integers(1, 4, 2)]
        images = rng.integers(0, 2, 4)
        rois = np.concatenate([images[:, None].astype(np.float32), boxes], 1)
        node = helper.make_node(
            "MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=shape, spatial_scale=scale
        )
        _check(node, [x, rois], opset=21)
        mode = ("half_pixel", "output_half_pixel")[i % 2]
        attrs = dict(spatial_scale=scale, sampling_ratio=i % 3, coordinate_transformation_mode=mode)
        attrs.update(output_height=shape[0], output_width=shape[1])
        node = helper.make_node("RoiAlign", ["x", "rois", "batch_indices"], ["y"], **attrs)
        _check(node, [x, boxes, images.astype(np.int64)], rtol=1e-4, opset=21)


def test_roi_align_default_before_opset_16(x64):
    node = helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], output_height=2, output_width=3)
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 7)).astype(np.float32)
    rois = np.array([[0.5, 1.0, 4.0, 5.5], [2.0, 0.0, 2.5, 0.2]], np.float32)
    for opset in (10, 21):
        _check(node, [x, rois, np.zeros(2, np.int64)], rtol=1e-4, opset=opset)


def test_max_pool_i32_indices_without_x64():
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2], strides=[2])
    _, indices = jaxpool.onnx.node(node, index_element_type="i32")(jnp.arange(4.0).reshape(1, 1, 4))
    assert indices.dtype == jnp.int32 and indices.tolist() == [[[1, 3]]]


def test_storage_order_gives_column_major_indices(x64):
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], storage_order=1)
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(1, 2, 3, 4)
    _, indices = jaxpool.onnx.node(node)(x)
    # Element (c, h, w) of a 3 x 4 plane: c * 12 + w * 3 + h.
    expected = [[[c * 12 + w * 3 + h for w in (1, 2, 3)] for h in (1, 2)] for c in (0, 1)]
    assert np.asarray(indices).tolist() == [expected]


def test_max_unpool_output_shape_places_the_inferred_shape_first():
    node = helper.make_node("MaxUnpool", ["x", "i", "s"], ["y"], kernel_shape=[2], strides=[2])
    y = jaxpool.onnx.node(node)(
        np.array([[[5.0, 6.0]]], np.float32), np.array([[[1, 2]]], np.int32), [1, 1, 6]
    )
    np.testing.assert_array_equal(np.asarray(y), [[[0, 5, 6, 0, 0, 0]]])


def test_gradients_flow_through_a_node(x64):
    node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], p=3, ceil_mode=1)
    pool = jaxpool.onnx.node(node)
    x = jnp.asarray(np.random.default_rng(0).standard_normal((1, 1, 5, 5)))
    g = jax.grad(lambda x: pool(x).sum())(x)
    assert g.shape == x.shape and bool(jnp.all(jnp.isfinite(g)))


def test_onnx_convert_example(tmp_path, capsys):
    path = pathlib.Path(__file__).resolve().parent.parent / "examples" / "onnx_convert.py"
    spec = importlib.util.spec_from_file_location("example_onnx_convert", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    differences = module.main(model_dir=str(tmp_path), shape=(1, 2, 12, 16))
    assert (tmp_path / "model.onnx").exists()
    assert len(differences) == 10  # every output of the eight nodes
    assert max(differences.values()) <= 1e-5
    assert "end to end" in capsys.readouterr().out


def test_import_jaxpool_imports_neither_onnx_nor_jax2onnx():
    code = (
        "import sys, jaxpool; assert not {'onnx', 'jaxpool.onnx'} & set(sys.modules); "
        "import jaxpool.onnx, jaxpool.nn; assert 'jax2onnx' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
