"""``jaxpool.onnx.export``: jaxpool's ops exported to ONNX through jax2onnx, round-tripped.

Every case exports a small function calling one op, runs the model in ONNX Runtime and
compares its outputs with the op's, exactly for maxima and indices (and dtypes), to float
rounding for sums; then reads every exported pooling node back with ``jaxpool.onnx.node``
(the other nodes of the graph run in ONNX's reference evaluator) and compares again.  Each
refusal is checked with its message.
"""

from __future__ import annotations

import functools
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("jax2onnx")

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from onnx.reference.op_run import OpRun  # noqa: E402

import jaxpool  # noqa: E402
import jaxpool.onnx  # noqa: E402
import jaxpool.torch  # noqa: E402

ort.set_default_logger_severity(3)

_POOL_NODES = (
    "MaxPool",
    "AveragePool",
    "LpPool",
    "GlobalMaxPool",
    "GlobalAveragePool",
    "GlobalLpPool",
    "MaxUnpool",
    "MaxRoiPool",
    "RoiAlign",
)


def _read_back(op_type):
    """A reference-evaluator operator that computes the node with ``jaxpool.onnx.node``."""

    def _run(self, *inputs, **attributes):
        op = jaxpool.onnx.node(self.onnx_node, index_element_type="i32")
        if op_type == "MaxUnpool":
            inputs = (*inputs[:2], np.asarray(inputs[2]))
        outputs = op(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        results = [np.asarray(o) for o in outputs]
        if len(results) == 2:  # ONNX's Indices are int64
            results[1] = results[1].astype(np.int64)
        return tuple(results)

    return type(op_type, (OpRun,), {"op_domain": "", "_run": _run})


_READ_BACK = [_read_back(op_type) for op_type in _POOL_NODES]


def _run_ort(model, args):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, (np.asarray(a) for a in args))))


def _run_read_back(model, args):
    evaluator = ReferenceEvaluator(model, new_ops=_READ_BACK)
    feeds = dict(zip(evaluator.input_names, (np.asarray(a) for a in args)))
    with jax.enable_x64(True):  # the nodes' float64 (a widened int32) stays float64
        return evaluator.run(None, feeds)


def _compare(got, want, rtol, what):
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, (what, g.dtype, w.dtype)
        assert g.shape == w.shape, (what, g.shape, w.shape)
        if rtol == 0 or w.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w, err_msg=what)
        else:
            np.testing.assert_allclose(
                g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=rtol, err_msg=what
            )


def roundtrip(fn, *args, rtol=0.0, nodes=None):
    """Exports ``fn``, checks ONNX Runtime and the read-back nodes against ``fn``; returns the
    model's node types."""
    want = [np.asarray(w) for w in jax.tree.leaves(fn(*args))]
    model = jaxpool.onnx.export(fn, *args)
    types = [n.op_type for n in model.graph.node]
    if nodes is not None:
        assert types == nodes
    _compare(_run_ort(model, args), want, rtol, f"ONNX Runtime, {types}")
    _compare(_run_read_back(model, args), want, rtol, f"read back, {types}")
    return types


def _both_layouts(pool):
    """``pool(x, data_format)`` of an NCX input and of another, NXC input, in one model."""
    return lambda x, x_nxc: (pool(x, "NCX"), pool(x_nxc, "NXC"))


def _inputs(shape, **kwargs):
    """An NCX input and a different NXC one, for :func:`_both_layouts`."""
    return _x(shape, **kwargs), _x(shape, data_format="NXC", seed=1, **kwargs)


def _x(shape, dtype=np.float32, seed=0, data_format="NCX"):
    rng = np.random.default_rng(seed)
    if data_format == "NXC":
        shape = (shape[0], *shape[2:], shape[1])
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -100), min(info.max, 100), shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


# --------------------------------------------------------------------------------------------
# max_pool -> MaxPool
# --------------------------------------------------------------------------------------------

# (NCX shape, attributes, axis), each exported in both layouts, all in one model.
MAX_POOL_CASES = [
    ((2, 3, 7, 6), dict(kernel=3, strides=2, pads_begin=1, pads_end=1, rounding_type="ceil"), 0),
    ((1, 2, 9), dict(kernel=2, strides=2, pads_begin=1, pads_end=1, dilations=2,
                     rounding_type="ceil_torch"), 2),
    ((1, 2, 4, 5, 3), dict(kernel=2, strides=(2, 1, 1)), 1),
    ((1, 2, 7, 7), dict(kernel=3, strides=2, auto_pad="same_upper"), 0),
    ((1, 1, 6, 5), dict(kernel=2, strides=1, dilations=2, auto_pad="same_lower"), 2),
    ((1, 1, 1, 5), dict(kernel=(1, 2), strides=1, auto_pad="valid"), 0),
]  # fmt: skip


def _in_one_model(table, pool, rtol=0.0, ties=False):
    """Every row of ``table`` (its first entry the NCX shape), in both layouts, exported in one
    model and round-tripped: ``pool(x, data_format, *rest)`` for each; ``ties`` rounds the
    inputs to halves."""
    inputs = [np.round(a * 2) / 2 if ties else a for row in table for a in _inputs(row[0])]

    def fn(*xs):
        return [
            pool(x, fmt, *row[1:])
            for x, (row, fmt) in zip(xs, ((r, f) for r in table for f in ("NCX", "NXC")))
        ]

    return roundtrip(fn, *inputs, rtol=rtol)


def test_max_pool():
    def pool(x, data_format, attrs, axis):
        return jaxpool.max_pool(x, **attrs, data_format=data_format, return_indices=True, axis=axis)

    types = _in_one_model(MAX_POOL_CASES, pool)
    assert types.count("MaxPool") == 2 * len(MAX_POOL_CASES)
    # into NCX, and the values and indices back
    assert types.count("Transpose") == 3 * len(MAX_POOL_CASES)


def test_max_pool_values_only_is_one_node():
    assert roundtrip(lambda x: jaxpool.max_pool(x, 2, 1), _x((1, 2, 5, 5))) == ["MaxPool"]


def test_max_pool_ties_and_infinities():
    x = np.random.default_rng(1).integers(0, 2, (2, 2, 6, 6)).astype(np.float32)
    x[0, 0, 0, :] = np.inf
    x[0, 1, :3, :3] = -np.inf  # a window of -inf only
    x[1, 0, 2, 2] = -np.inf
    roundtrip(lambda x: jaxpool.max_pool(x, 3, 2, 1, 1, return_indices=True), x)


def _in_bfloat16(pool):
    """``pool`` of a bfloat16 input, for a model ONNX Runtime's Python API can feed (it takes no
    bfloat16 arrays): float32 in and out."""

    def fn(x):
        out = pool(x.astype(jnp.bfloat16))
        if isinstance(out, tuple):
            return out[0].astype(jnp.float32), *out[1:]
        return out.astype(jnp.float32)

    return fn


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "float16", "bfloat16"])
def test_max_pool_dtypes(dtype):
    pool = lambda x: jaxpool.max_pool(x, 2, 1, 0, 1, return_indices=True)  # noqa: E731
    if dtype == "bfloat16":
        x, pool = _x((1, 2, 5, 5)), _in_bfloat16(pool)
    else:
        x = _x((1, 2, 5, 5), dtype)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        x[0, 0, 0, 0], x[0, 1, 4, 4] = info.min, info.max
    types = roundtrip(pool, x)
    widened = dtype in ("int16", "int32", "bfloat16")
    assert ("Cast" in types[: types.index("MaxPool")]) == widened


# --------------------------------------------------------------------------------------------
# avg_pool -> AveragePool, lp_pool -> LpPool
# --------------------------------------------------------------------------------------------

AVG_POOL_CASES = [
    ((1, 2, 7, 6), dict(kernel=3, strides=2, pads_begin=1, pads_end=1, exclude_pad=True,
                        rounding_type="ceil")),
    ((1, 2, 6), dict(kernel=3, strides=2, pads_begin=1, pads_end=1, rounding_type="ceil")),
    ((1, 2, 6), dict(kernel=3, strides=2, pads_begin=1, pads_end=1, rounding_type="ceil_torch",
                     divisor_rule="padded_input")),
    ((1, 2, 5, 5), dict(kernel=2, strides=2, rounding_type="ceil")),
    ((1, 1, 5, 5, 4), dict(kernel=2, strides=1, pads_begin=1, dilations=(2, 1, 2))),
    ((1, 2, 7, 6), dict(kernel=(3, 2), strides=2, auto_pad="same_lower")),
]  # fmt: skip


def test_avg_pool():
    def pool(x, data_format, attrs):
        return jaxpool.avg_pool(x, **attrs, data_format=data_format)

    types = _in_one_model(AVG_POOL_CASES, pool, rtol=1e-6)
    assert types.count("AveragePool") == 2 * len(AVG_POOL_CASES)


def test_avg_pool_grows_end_pads_for_the_whole_kernel_divisor():
    fn = lambda x: jaxpool.avg_pool(x, 3, 2, 1, 1, rounding_type="ceil")  # noqa: E731
    model = jaxpool.onnx.export(fn, _x((1, 1, 6)))
    (node,) = model.graph.node
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attributes["pads"] == [1, 2] and attributes.get("ceil_mode", 0) == 0
    assert attributes["count_include_pad"] == 1


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8", "uint8"])
def test_avg_pool_dtypes(dtype):
    fn = lambda x: jaxpool.avg_pool(x, 2, 1, 1, 0, exclude_pad=True)  # noqa: E731
    if dtype == "bfloat16":
        x, fn = _x((1, 2, 6, 5), seed=3), _in_bfloat16(fn)
    else:
        x = _x((1, 2, 6, 5), dtype, seed=3)
    roundtrip(fn, x, rtol=1e-2 if dtype == "bfloat16" else 1e-3 if dtype == "float16" else 0)


def test_avg_pool_rounds_integer_ties_to_even():
    x = np.array([[[1, 2, 3, 4, -1, -2, 5, 6]]], np.int8)  # halves: 1.5, 3.5, -1.5, 5.5
    assert roundtrip(lambda x: jaxpool.avg_pool(x, 2), x) == [
        "Cast",
        "AveragePool",
        "Round",
        "Cast",
    ]


def test_avg_pool_infinities():
    x = _x((1, 1, 5, 5))
    x[0, 0, 0, 0], x[0, 0, 3, 3] = np.inf, -np.inf
    roundtrip(lambda x: jaxpool.avg_pool(x, 2, 1, exclude_pad=True), x, rtol=1e-6)


LP_POOL_CASES = [
    ((1, 2, 6, 5), dict(kernel=2, strides=1, p=1)),
    ((1, 2, 7), dict(kernel=3, strides=2, pads_begin=1, pads_end=1, p=2,
                     rounding_type="ceil_torch")),
    ((1, 1, 7, 6), dict(kernel=2, strides=1, dilations=2, p=3)),
    ((1, 2, 4, 4), dict(kernel=2, p=2.0)),
]  # fmt: skip


def test_lp_pool():
    def pool(x, data_format, attrs):
        return jaxpool.lp_pool(x, **attrs, data_format=data_format)

    types = _in_one_model(LP_POOL_CASES, pool, rtol=1e-5)
    assert types.count("LpPool") == 2 * len(LP_POOL_CASES)


def test_lp_pool_over_the_whole_input():
    x = _x((2, 3, 4, 5))
    assert roundtrip(lambda x: jaxpool.lp_pool(x, (4, 5), p=3), x, rtol=1e-5) == ["LpPool"]


# --------------------------------------------------------------------------------------------
# Adaptive pools: global nodes, sliding windows, or bins gathered per axis.
# --------------------------------------------------------------------------------------------

# (NCX shape, output size): global, uniform bins that divide the input, overlapping uniform
# bins (of 2, stride 1), bins of 7 to 3, 3-D with an axis left as it is, more outputs than
# inputs.
ADAPTIVE_CASES = [
    ((2, 3, 5, 4), 1),
    ((1, 2, 6, 4), (3, 2)),
    ((1, 2, 5), 4),
    ((2, 2, 7, 5), (3, 3)),
    ((1, 2, 5, 4, 7), (3, None, 2)),
    ((1, 1, 3, 2), (5, 3)),
]


def test_adaptive_pools():
    def pool(x, data_format, output_size):
        return (
            jaxpool.adaptive_max_pool(x, output_size, data_format=data_format),
            jaxpool.adaptive_max_pool(x, output_size, data_format=data_format, return_indices=True),
            jaxpool.adaptive_avg_pool(x, output_size, data_format=data_format),
        )

    _in_one_model(ADAPTIVE_CASES, pool, rtol=1e-6, ties=True)


def test_adaptive_nodes():
    x = _x((1, 2, 6, 6))
    assert roundtrip(lambda x: jaxpool.adaptive_max_pool(x, 1), x) == ["GlobalMaxPool"]
    assert roundtrip(lambda x: jaxpool.adaptive_avg_pool(x, 1), x, rtol=1e-6) == [
        "GlobalAveragePool"
    ]
    assert roundtrip(lambda x: jaxpool.adaptive_avg_pool(x, 3), x, rtol=1e-6) == ["AveragePool"]
    max_indices = roundtrip(lambda x: jaxpool.adaptive_max_pool(x, 2, return_indices=True), x)
    assert max_indices == ["MaxPool", "Mod", "Cast"]


def test_adaptive_infinities_and_integers():
    x = _x((1, 2, 7, 5))
    x[0, 0, 0, 0], x[0, 1, 6, 4] = np.inf, -np.inf
    roundtrip(lambda x: jaxpool.adaptive_avg_pool(x, (3, 2)), x, rtol=1e-6)
    roundtrip(lambda x: jaxpool.adaptive_max_pool(x, (3, 2), return_indices=True), x)
    xi = _x((1, 2, 7, 5), np.int8)
    roundtrip(lambda x: jaxpool.adaptive_avg_pool(x, (3, 2)), xi)
    roundtrip(lambda x: jaxpool.adaptive_max_pool(x, (3, 2), return_indices=True), xi)


# --------------------------------------------------------------------------------------------
# max_unpool -> MaxUnpool (combine="max") or ScatterElements (combine="sum")
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_max_unpool(axis):
    x, nxc = _inputs((2, 2, 5, 7))
    pooled = [
        jaxpool.max_pool(a, 3, 2, 0, 1, data_format=f, return_indices=True, axis=axis)
        for a, f in ((x, "NCX"), (nxc, "NXC"))
    ]

    def fn(y, indices, y_nxc, indices_nxc):
        return [
            jaxpool.max_unpool(a, i, shape, axis=axis, combine=combine, data_format=f)
            for a, i, shape, f in (
                (y, indices, x.shape, "NCX"),
                (y_nxc, indices_nxc, nxc.shape, "NXC"),
            )
            for combine in ("max", "sum")
        ]

    args = [np.asarray(a) for pair in pooled for a in pair]
    types = roundtrip(fn, *args, rtol=1e-6)
    assert types.count("MaxUnpool") == 2 and types.count("ScatterElements") == 2


def test_max_unpool_repeated_positions_sum():
    # overlapping windows name some positions twice: their values add up
    x = _x((1, 1, 6))
    y, indices = jaxpool.max_pool(x, 3, 1, return_indices=True)
    fn = lambda y, i: jaxpool.max_unpool(y, i, x.shape, axis=0)  # noqa: E731
    roundtrip(fn, np.asarray(y), np.asarray(indices), rtol=1e-6)


# --------------------------------------------------------------------------------------------
# roi_pool -> MaxRoiPool, roi_align -> RoiAlign
# --------------------------------------------------------------------------------------------

ROIS = np.array(
    [[0, 1.2, 0.7, 6.1, 5.3], [1, 0.0, 0.0, 7.0, 7.0], [0, 3.4, 2.2, 4.1, 7.9]], np.float32
)


def test_roi_pool():
    pool = lambda x, data_format: jaxpool.roi_pool(  # noqa: E731
        x, ROIS, (2, 3), spatial_scale=0.9, data_format=data_format
    )
    assert roundtrip(_both_layouts(pool), *_inputs((2, 3, 8, 9))).count("MaxRoiPool") == 2


def test_torch_roi_pool():
    """torchvision's roi_pool scans as MaxRoiPool does (a strict `>` from the lowest finite
    value): ``jaxpool.torch.roi_pool`` exports as that node."""
    pool = lambda x: jaxpool.torch.roi_pool(x, ROIS, (2, 3), spatial_scale=0.9)  # noqa: E731
    assert roundtrip(pool, _x((2, 3, 8, 9))).count("MaxRoiPool") == 1


# Adaptive sampling (sampling_ratio=0) traces several programs: one case of it.
ROI_ALIGN_CASES = [
    (0, "asymmetric", "NCX"),
    (2, "asymmetric", "NXC"),
    (2, "half_pixel_for_nn", "NCX"),
    (2, "half_pixel", "NCX"),
    (3, "half_pixel", "NXC"),
]


@pytest.mark.parametrize("sampling_ratio, aligned_mode, data_format", ROI_ALIGN_CASES)
def test_roi_align(sampling_ratio, aligned_mode, data_format):
    x = _x((2, 3, 8, 9), data_format=data_format)
    rois, batch_indices = ROIS[:, 1:], ROIS[:, 0].astype(np.int32)

    def fn(x, rois, batch_indices):
        return jaxpool.roi_align(
            x,
            rois,
            batch_indices,
            (3, 2),
            spatial_scale=0.8,
            sampling_ratio=sampling_ratio,
            aligned_mode=aligned_mode,
            data_format=data_format,
        )

    assert roundtrip(fn, x, rois, batch_indices, rtol=1e-5).count("RoiAlign") == 1


def test_roi_align_onnx_max_from_a_read_node():
    node = onnx.helper.make_node(
        "RoiAlign",
        ["x", "rois", "b"],
        ["y"],
        mode="max",
        output_height=2,
        output_width=3,
        sampling_ratio=2,
    )
    op = jaxpool.onnx.node(node)
    x = _x((2, 3, 8, 9))
    rois, batch_indices = ROIS[:, 1:], ROIS[:, 0].astype(np.int32)
    assert roundtrip(op, x, rois, batch_indices, rtol=1e-5) == ["Cast", "RoiAlign"]


# --------------------------------------------------------------------------------------------
# Refusals.
# --------------------------------------------------------------------------------------------

X = np.zeros((1, 4, 6, 6), np.float32)
BOXES5 = np.array([[0, 0, 0, 3, 3]], np.float32)
BOXES4, BATCH = BOXES5[:, 1:], np.zeros(1, np.int32)

# (call, its arguments, the message): what ONNX cannot express, refused by name.
REFUSALS = [
    (lambda x: jaxpool.max_pool(x, 2, 2, 0, 3, rounding_type="ceil"), (X,),
     r"jaxpool.max_pool cannot be exported to ONNX: window 3 of spatial axis 0 holds no input"),
    (lambda x: jaxpool.max_pool(x, 2, 1, 2, 0), (X,),
     r"max_pool .*: window 0 of spatial axis 0 holds no input element"),
    (lambda x: jaxpool.max_pool(x, 2, 1, 0, 0, dilations=3, auto_pad="same_upper"), (X,),
     r"max_pool .*: its pads \(pads_end \(2, 2\)\) are not all smaller than `kernel` \(2, 2\), "
     r"which ONNX Runtime requires"),
    (lambda x: jaxpool.avg_pool(x, 2, divisor_override=3), (X,),
     r"avg_pool cannot be exported to ONNX: `divisor_override` \(=3\) has no AveragePool"),
    (lambda x: jaxpool.avg_pool(x.astype(jnp.int32), 2), (X,),
     r"avg_pool .*: `x` of dtype int32 has no exact average in ONNX"),
    (lambda x: jaxpool.lp_pool(x, 2, p=1.5), (X,),
     r"lp_pool .*: `p` \(=1.5\) is not an integer, and LpPool's `p` is an int"),
    (lambda y, i: jaxpool.max_unpool(y, i, (1, 4, 6, 6), axis=2, combine="torch"),
     (X, X.astype(np.int32)),
     r"max_unpool .*: `combine` \(='torch'\): ONNX leaves which of the values at a repeated"),
    (lambda x, r: jaxpool.roi_pool(x, r, 2, method="bilinear"), (X, BOXES5),
     r"roi_pool .*: `method` \(='bilinear'\): MaxRoiPool pools boxes rounded"),
    (lambda x, r, b: jaxpool.roi_align(x, r, b, 2, mode="max"), (X, BOXES4, BATCH),
     r"roi_align .*: `mode` \(='max'\): RoiAlign's max is the largest weighted corner term"),
    (lambda x, r, b: jaxpool.roi_align_rotated(x, jnp.pad(r, ((0, 0), (0, 1))), b, 2),
     (X, BOXES4, BATCH),
     r"jaxpool.roi_align_rotated cannot be exported to ONNX: ONNX has no rotated RoiAlign"),
    (lambda x, r: jaxpool.psroi_pool(x, r, 1, 2), (X, BOXES5),
     r"psroi_pool cannot be exported to ONNX: ONNX has no position-sensitive ROI pooling"),
    (lambda x, r, b: jaxpool.psroi_align(x, r, b, 2), (X, BOXES4, BATCH),
     r"psroi_align cannot be exported to ONNX: ONNX has no position-sensitive RoiAlign"),
    (lambda x, r: jaxpool.torch.ps_roi_align(x, r, 2), (X, BOXES5),
     r"psroi_align_any_empty_bin cannot be exported to ONNX: ONNX has no position-sensitive"),
    (lambda x, r: jaxpool.deformable_psroi_pool(x, r, output_dim=1, group_size=2), (X, BOXES5),
     r"deformable_psroi_pool cannot be exported to ONNX: ONNX has no deformable"),
    (lambda x, r, b: jaxpool.multilevel_roi_align([x], r, b, 2, spatial_scales=[1.0]),
     (X, BOXES4, BATCH),
     r"multilevel_roi_align cannot be exported to ONNX: ONNX has no pyramid"),
    (lambda x: jaxpool.fractional_max_pool(x, 2, 3, jnp.full((1, 4, 2), 0.5)), (X,),
     r"fractional_max_pool cannot be exported to ONNX: ONNX has no fractional max pooling"),
]  # fmt: skip


@pytest.mark.parametrize(
    "fn, args, message", REFUSALS, ids=lambda v: "" if callable(v) or isinstance(v, tuple) else None
)
def test_refusals(fn, args, message):
    with pytest.raises(ValueError, match=message):
        jaxpool.onnx.export(fn, *args)


def test_refusal_of_int64_max_pool():
    with jax.enable_x64(True):
        with pytest.raises(ValueError, match=r"max_pool .*`x` of dtype int64 has no MaxPool"):
            jaxpool.onnx.export(
                lambda x: jaxpool.max_pool(x, 2), X.astype(np.int64), enable_double_precision=True
            )


def test_refusal_of_dilated_average_before_opset_19():
    fn = lambda x: jaxpool.avg_pool(x, 2, 1, dilations=2)  # noqa: E731
    with pytest.raises(ValueError, match=r"`dilations` \(2, 2\) need AveragePool-19; the opset"):
        jaxpool.onnx.export(fn, X, opset=18)


# --------------------------------------------------------------------------------------------
# Entry points.
# --------------------------------------------------------------------------------------------


def test_plain_jax2onnx_after_register_export(tmp_path):
    import jax2onnx

    jaxpool.onnx.register_export()
    jaxpool.onnx.register_export()  # once is enough; twice does nothing more
    spec = jax.ShapeDtypeStruct((1, 2, 6, 6), jnp.float32)
    model = jax2onnx.to_onnx(lambda x: jaxpool.avg_pool(jax.nn.relu(x), 2), [spec])
    assert [n.op_type for n in model.graph.node][-1] == "AveragePool"
    path = tmp_path / "pool.onnx"
    jaxpool.onnx.export(lambda x: jaxpool.max_pool(x, 2), spec, path=path)
    assert [n.op_type for n in onnx.load(path).graph.node] == ["MaxPool"]


def test_the_ops_run_as_before_after_an_export():
    x = _x((1, 2, 6, 6))
    before = jaxpool.max_pool(x, 3, 1, return_indices=True)
    jaxpool.onnx.export(lambda x: jaxpool.max_pool(x, 3, 1, return_indices=True), x)
    after = jaxpool.max_pool(x, 3, 1, return_indices=True)
    jitted = jax.jit(lambda x: jaxpool.max_pool(x, 3, 1, return_indices=True))(x)
    for a, b, c in zip(before, after, jitted):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


def test_import_jaxpool_does_not_import_jax2onnx():
    code = "import sys, jaxpool, jaxpool.onnx, jaxpool.nn; print('jax2onnx' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_table_covers_every_public_op():
    from jaxpool._src.interop import onnx_export

    ops = {row.op for row in onnx_export.TABLE}
    assert ops == set(jaxpool.__all__) - {"openvino"}


def test_min_pool_and_batch_axes_export_as_max_pool_nodes():
    x = np.random.default_rng(0).permutation(2 * 3 * 6 * 5 * 2).reshape(2, 3, 6, 5, 2)
    pool = functools.partial(jaxpool.min_pool, kernel=(2, 2), strides=1, data_format="NXC")
    types = roundtrip(lambda x: pool(x, return_indices=True, axis=2), x.astype(np.float32))
    assert "MaxPool" in types and "Neg" in types
    assert "BitwiseNot" in roundtrip(pool, x[0].astype(np.int32))
