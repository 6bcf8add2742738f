"""``jaxpool.onnx.export``: jaxpool's ops exported to ONNX through jax2onnx, round-tripped.

Every case exports a small function calling one op, runs the model in ONNX Runtime and
compares its outputs with the op's, exactly for maxima and indices (and dtypes), to float
rounding for sums; then reads every exported pooling node back with ``jaxpool.onnx.node``
(the other nodes of the graph run in ONNX's reference evaluator) and compares again.  Each
refusal is checked with its message.
"""

from __future__ import annotations

import functools
import re

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

# The pooling nodes that jaxpool.onnx.node reads back.
_POOL_NODES = "MaxPool AveragePool LpPool GlobalMaxPool GlobalAveragePool GlobalLpPool".split()
_POOL_NODES += ["MaxUnpool", "MaxRoiPool", "RoiAlign"]


def _read_back(op_type):
    """A reference-evaluator operator that computes the node with ``jaxpool.onnx.node``."""

    def _run(self, *inputs, **attributes):
        op = jaxpool.onnx.node(self.onnx_node, index_element_type="i32")
        if op_type == "MaxUnpool":
            inputs = (*inputs[:2], np.asarray(inputs[2]))
        values, *indices = [np.asarray(o) for o in jax.tree.leaves(op(*inputs))]
        return values, *(i.astype(np.int64) for i in indices)  # ONNX's Indices are int64

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
    """Exports ``fn``, checks ONNX Runtime and the read-back nodes against ``fn``, and the node
    types (joined by spaces) against the regex ``nodes``; returns the node types."""
    want = [np.asarray(w) for w in jax.tree.leaves(fn(*args))]
    model = jaxpool.onnx.export(fn, *args)
    types = [n.op_type for n in model.graph.node]
    if nodes is not None:
        assert re.fullmatch(nodes, " ".join(types)), types
    _compare(_run_ort(model, args), want, rtol, f"ONNX Runtime, {types}")
    _compare(_run_read_back(model, args), want, rtol, f"read back, {types}")
    return types


def _x(shape, dtype=np.float32, seed=0, data_format="NCX"):
    rng = np.random.default_rng(seed)
    if data_format == "NXC":
        shape = (shape[0], *shape[2:], shape[1])
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -100), min(info.max, 100), shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _inputs(shape):
    """An NCX input and a different NXC one."""
    return _x(shape), _x(shape, data_format="NXC", seed=1)


# --------------------------------------------------------------------------------------------
# Tables of cases, each table in both layouts in one model.
# --------------------------------------------------------------------------------------------

K3S2P1 = dict(kernel=3, strides=2, pads_begin=1, pads_end=1)
# (NCX shape, attributes, axis)
MAX_POOL_CASES = [
    ((2, 3, 7, 6), dict(K3S2P1, rounding_type="ceil"), 0),
    ((1, 2, 9), dict(kernel=2, strides=2, pads_begin=1, pads_end=1, dilations=2,
                     rounding_type="ceil_torch"), 2),
    ((1, 2, 4, 5, 3), dict(kernel=2, strides=(2, 1, 1)), 1),
    ((1, 2, 7, 7), dict(kernel=3, strides=2, auto_pad="same_upper"), 0),
    ((1, 1, 6, 5), dict(kernel=2, strides=1, dilations=2, auto_pad="same_lower"), 2),
    ((1, 1, 1, 5), dict(kernel=(1, 2), strides=1, auto_pad="valid"), 0),
]  # fmt: skip
AVG_POOL_CASES = [
    ((1, 2, 7, 6), dict(K3S2P1, exclude_pad=True, rounding_type="ceil")),
    ((1, 2, 6), dict(K3S2P1, rounding_type="ceil")),
    ((1, 2, 6), dict(K3S2P1, rounding_type="ceil_torch", divisor_rule="padded_input")),
    ((1, 2, 5, 5), dict(kernel=2, strides=2, rounding_type="ceil")),
    ((1, 1, 5, 5, 4), dict(kernel=2, strides=1, pads_begin=1, dilations=(2, 1, 2))),
    ((1, 2, 7, 6), dict(kernel=(3, 2), strides=2, auto_pad="same_lower")),
]  # fmt: skip
LP_POOL_CASES = [
    ((1, 2, 6, 5), dict(kernel=2, strides=1, p=1)),
    ((1, 2, 7), dict(K3S2P1, p=2, rounding_type="ceil_torch")),
    ((1, 1, 7, 6), dict(kernel=2, strides=1, dilations=2, p=3)),
    ((1, 2, 4, 4), dict(kernel=2, p=2.0)),
]  # fmt: skip
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
ROIS = np.array(
    [[0, 1.2, 0.7, 6.1, 5.3], [1, 0.0, 0.0, 7.0, 7.0], [0, 3.4, 2.2, 4.1, 7.9]], np.float32
)


def _in_one_model(table, pool, rtol=0.0, ties=False):
    """Every row of ``table`` (its first entry the NCX shape), in both layouts, exported in one
    model and round-tripped: ``pool(x, data_format, *rest)`` for each; ``ties`` rounds the
    inputs to halves."""
    inputs = [np.round(a * 2) / 2 if ties else a for row in table for a in _inputs(row[0])]
    calls = [(row, data_format) for row in table for data_format in ("NCX", "NXC")]
    fn = lambda *xs: [pool(x, f, *row[1:]) for x, (row, f) in zip(xs, calls)]  # noqa: E731
    return roundtrip(fn, *inputs, rtol=rtol)


# (node, table, pool(x, data_format, *rest), rtol)
NODE_TABLES = [
    ("MaxPool", MAX_POOL_CASES, lambda x, f, attrs, axis: jaxpool.max_pool(
        x, **attrs, data_format=f, return_indices=True, axis=axis), 0.0),
    ("AveragePool", AVG_POOL_CASES,
     lambda x, f, attrs: jaxpool.avg_pool(x, **attrs, data_format=f), 1e-6),
    ("LpPool", LP_POOL_CASES, lambda x, f, attrs: jaxpool.lp_pool(x, **attrs, data_format=f), 1e-5),
    ("MaxRoiPool", [((2, 3, 8, 9),)],
     lambda x, f: jaxpool.roi_pool(x, ROIS, (2, 3), spatial_scale=0.9, data_format=f), 0.0),
]  # fmt: skip


@pytest.mark.parametrize("node, table, pool, rtol", NODE_TABLES, ids=[r[0] for r in NODE_TABLES])
def test_pools_in_both_layouts(node, table, pool, rtol):
    types = _in_one_model(table, pool, rtol)
    assert types.count(node) == 2 * len(table)
    # each NXC case: its input into NCX, and every output back (MaxPool's indices too)
    assert types.count("Transpose") == len(table) * (3 if node == "MaxPool" else 2)


def test_adaptive_pools():
    def pool(x, data_format, output_size):
        return (
            jaxpool.adaptive_max_pool(x, output_size, data_format=data_format),
            jaxpool.adaptive_max_pool(x, output_size, data_format=data_format, return_indices=True),
            jaxpool.adaptive_avg_pool(x, output_size, data_format=data_format),
        )

    _in_one_model(ADAPTIVE_CASES, pool, rtol=1e-6, ties=True)


def test_avg_pool_grows_end_pads_for_the_whole_kernel_divisor():
    fn = lambda x: jaxpool.avg_pool(x, 3, 2, 1, 1, rounding_type="ceil")  # noqa: E731
    model = jaxpool.onnx.export(fn, _x((1, 1, 6)))
    (node,) = model.graph.node
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attributes["pads"] == [1, 2] and attributes.get("ceil_mode", 0) == 0
    assert attributes["count_include_pad"] == 1


# --------------------------------------------------------------------------------------------
# One call per model: types, ties, infinities, and the nodes each call exports as.
# --------------------------------------------------------------------------------------------


def _typed(pool, dtype, shape, seed=0, extremes=False):
    """``pool`` and an input of ``dtype`` (``extremes``: an integer type's least and largest
    values in it).  A bfloat16 model takes and gives float32, which ONNX Runtime's Python API
    can feed (it takes no bfloat16 arrays)."""
    if dtype == "bfloat16":

        def fn(x):
            values, *indices = jax.tree.leaves(pool(x.astype(jnp.bfloat16)))
            return values.astype(jnp.float32), *indices

        return fn, _x(shape, seed=seed)
    x = _x(shape, dtype, seed=seed)
    if extremes and np.dtype(dtype).kind in "iu":
        x[0, 0, 0, 0], x[0, 1, -1, -1] = np.iinfo(dtype).min, np.iinfo(dtype).max
    return pool, x


def _infinite(shape, at_inf, at_neg_inf):
    x = _x(shape)
    x[at_inf], x[at_neg_inf] = np.inf, -np.inf
    return x


def _ties_and_infinities():
    x = np.random.default_rng(1).integers(0, 2, (2, 2, 6, 6)).astype(np.float32)
    x[0, 0, 0, :] = np.inf
    x[0, 1, :3, :3] = -np.inf  # a window of -inf only
    x[1, 0, 2, 2] = -np.inf
    return x


def case(id, fn, *args, rtol=0.0, nodes=None):
    """``fn(*args)`` round-tripped (``nodes``: as :func:`roundtrip`'s)."""
    return pytest.param(fn, args, rtol, nodes, id=id)


X6, X75 = _x((1, 2, 6, 6)), _infinite((1, 2, 7, 5), (0, 0, 0, 0), (0, 1, 6, 4))
MIN_X = np.random.default_rng(0).permutation(2 * 3 * 6 * 5 * 2).reshape(2, 3, 6, 5, 2)
MAX = functools.partial(jaxpool.max_pool, kernel=2, strides=1, pads_end=1, return_indices=True)
AVG = functools.partial(jaxpool.avg_pool, kernel=2, strides=1, pads_begin=1, exclude_pad=True)
MIN_POOL = functools.partial(jaxpool.min_pool, kernel=(2, 2), strides=1, data_format="NXC")
WIDENED = "(Cast )+MaxPool( Cast)+"  # pooled in float32 or float64 (exact Casts)
CASES = [
    case("max_pool-values-only", lambda x: jaxpool.max_pool(x, 2, 1), _x((1, 2, 5, 5)),
         nodes="MaxPool"),
    case("max_pool-ties-infinities", lambda x: jaxpool.max_pool(x, 3, 2, 1, 1, return_indices=True),
         _ties_and_infinities()),
    *(case(f"max_pool-{dtype}", *_typed(MAX, dtype, (1, 2, 5, 5), extremes=True), nodes=nodes)
      for dtype, nodes in [("int8", "MaxPool Cast"), ("uint8", "MaxPool Cast"), ("int16", WIDENED),
                           ("int32", WIDENED), ("float16", "MaxPool Cast"), ("bfloat16", WIDENED)]),
    *(case(f"avg_pool-{dtype}", *_typed(AVG, dtype, (1, 2, 6, 5), seed=3), rtol=rtol)
      for dtype, rtol in [("float16", 1e-3), ("bfloat16", 1e-2), ("int8", 0), ("uint8", 0)]),
    # halves: 1.5, 3.5, -1.5, 5.5, rounded to even
    case("avg_pool-int8-ties", lambda x: jaxpool.avg_pool(x, 2),
         np.array([[[1, 2, 3, 4, -1, -2, 5, 6]]], np.int8), nodes="Cast AveragePool Round Cast"),
    case("avg_pool-infinities", lambda x: jaxpool.avg_pool(x, 2, 1, exclude_pad=True),
         _infinite((1, 1, 5, 5), (0, 0, 0, 0), (0, 0, 3, 3)), rtol=1e-6),
    case("lp_pool-whole-input", lambda x: jaxpool.lp_pool(x, (4, 5), p=3), _x((2, 3, 4, 5)),
         rtol=1e-5, nodes="LpPool"),
    case("adaptive_max_pool-global", lambda x: jaxpool.adaptive_max_pool(x, 1), X6,
         nodes="GlobalMaxPool"),
    case("adaptive_avg_pool-global", lambda x: jaxpool.adaptive_avg_pool(x, 1), X6, rtol=1e-6,
         nodes="GlobalAveragePool"),
    case("adaptive_avg_pool-window", lambda x: jaxpool.adaptive_avg_pool(x, 3), X6, rtol=1e-6,
         nodes="AveragePool"),
    case("adaptive_max_pool-window", lambda x: jaxpool.adaptive_max_pool(x, 2, return_indices=True),
         X6, nodes="MaxPool Mod Cast"),
    *(case(f"adaptive_avg_pool-bins-{name}", lambda x: jaxpool.adaptive_avg_pool(x, (3, 2)), x,
           rtol=1e-6 if name == "infinities" else 0)
      for name, x in [("infinities", X75), ("int8", _x((1, 2, 7, 5), np.int8))]),
    *(case(f"adaptive_max_pool-bins-{name}",
           lambda x: jaxpool.adaptive_max_pool(x, (3, 2), return_indices=True), x)
      for name, x in [("infinities", X75), ("int8", _x((1, 2, 7, 5), np.int8))]),
    case("min_pool", lambda x: MIN_POOL(x, return_indices=True, axis=2), MIN_X.astype(np.float32),
         nodes="(?=.*Neg).*MaxPool.*"),
    case("min_pool-int32", MIN_POOL, MIN_X[0].astype(np.int32), nodes=".*BitwiseNot.*"),
    # torchvision's roi_pool scans as MaxRoiPool does (a strict `>` from the lowest finite value)
    case("torch.roi_pool", lambda x: jaxpool.torch.roi_pool(x, ROIS, (2, 3), spatial_scale=0.9),
         _x((2, 3, 8, 9)), nodes="MaxRoiPool"),
    # a RoiAlign node with mode="max" read by jaxpool.onnx.node exports as itself
    case("onnx.node-RoiAlign-max", jaxpool.onnx.node(onnx.helper.make_node(
        "RoiAlign", ["x", "rois", "b"], ["y"], mode="max", output_height=2, output_width=3,
        sampling_ratio=2)), _x((2, 3, 8, 9)), ROIS[:, 1:], ROIS[:, 0].astype(np.int32),
        rtol=1e-5, nodes="Cast RoiAlign"),
]  # fmt: skip


@pytest.mark.parametrize("fn, args, rtol, nodes", CASES)
def test_roundtrip(fn, args, rtol, nodes):
    roundtrip(fn, *args, rtol=rtol, nodes=nodes)


def test_max_unpool():
    """``combine="max"`` as MaxUnpool, ``"sum"`` as ScatterElements, for every ``axis`` and both
    layouts; and overlapping windows that name some positions twice, whose values add up."""
    x, nxc = _inputs((2, 2, 5, 7))
    calls = [(axis, a, f) for axis in (0, 1, 2) for a, f in ((x, "NCX"), (nxc, "NXC"))]
    pooled = [
        np.asarray(o)
        for axis, a, f in calls
        for o in jaxpool.max_pool(a, 3, 2, 0, 1, data_format=f, return_indices=True, axis=axis)
    ]
    x6 = _x((1, 1, 6))
    pooled += [np.asarray(o) for o in jaxpool.max_pool(x6, 3, 1, return_indices=True)]

    def fn(*args):
        ys, indices = args[::2], args[1::2]
        return [
            jaxpool.max_unpool(y, i, a.shape, axis=axis, combine=combine, data_format=f)
            for (axis, a, f), y, i in zip(calls, ys, indices)
            for combine in ("max", "sum")
        ] + [jaxpool.max_unpool(ys[-1], indices[-1], x6.shape, axis=0)]

    types = roundtrip(fn, *pooled, rtol=1e-6)
    assert types.count("MaxUnpool") == 6 and types.count("ScatterElements") == 7


# Adaptive sampling (sampling_ratio=0) traces several programs: one case of it.
ROI_ALIGN_CASES = [
    dict(sampling_ratio=0, aligned_mode="asymmetric", data_format="NCX"),
    dict(sampling_ratio=2, aligned_mode="asymmetric", data_format="NXC"),
    dict(sampling_ratio=2, aligned_mode="half_pixel_for_nn", data_format="NCX"),
    dict(sampling_ratio=2, aligned_mode="half_pixel", data_format="NCX"),
    dict(sampling_ratio=3, aligned_mode="half_pixel", data_format="NXC"),
]


def test_roi_align():
    def fn(x, x_nxc, rois, batch_indices):
        maps = {"NCX": x, "NXC": x_nxc}
        align = functools.partial(jaxpool.roi_align, output_size=(3, 2), spatial_scale=0.8)
        return [align(maps[c["data_format"]], rois, batch_indices, **c) for c in ROI_ALIGN_CASES]

    args = (*_inputs((2, 3, 8, 9)), ROIS[:, 1:], ROIS[:, 0].astype(np.int32))
    assert roundtrip(fn, *args, rtol=1e-5).count("RoiAlign") == len(ROI_ALIGN_CASES)


# --------------------------------------------------------------------------------------------
# Refusals.
# --------------------------------------------------------------------------------------------

X = np.zeros((1, 4, 6, 6), np.float32)
BOXES5 = np.array([[0, 0, 0, 3, 3]], np.float32)
BOXES4, BATCH = BOXES5[:, 1:], np.zeros(1, np.int32)

# (call, its arguments, the message[, export's keywords]): what ONNX cannot express, refused by
# name.
REFUSALS = [
    (lambda x: jaxpool.max_pool(x, 2, 2, 0, 3, rounding_type="ceil"), (X,),
     r"jaxpool.max_pool cannot be exported to ONNX: window 3 of spatial axis 0 holds no input"),
    (lambda x: jaxpool.max_pool(x, 2, 1, 2, 0), (X,),
     r"max_pool .*: window 0 of spatial axis 0 holds no input element"),
    (lambda x: jaxpool.max_pool(x, 2, 1, 0, 0, dilations=3, auto_pad="same_upper"), (X,),
     r"max_pool .*: its pads \(pads_end \(2, 2\)\) are not all smaller than `kernel` \(2, 2\), "
     r"which ONNX Runtime requires"),
    (lambda x: jaxpool.max_pool(x, 2), (X.astype(np.int64),),
     r"max_pool .*`x` of dtype int64 has no MaxPool", {"enable_double_precision": True}),
    (lambda x: jaxpool.avg_pool(x, 2, divisor_override=3), (X,),
     r"avg_pool cannot be exported to ONNX: `divisor_override` \(=3\) has no AveragePool"),
    (lambda x: jaxpool.avg_pool(x.astype(jnp.int32), 2), (X,),
     r"avg_pool .*: `x` of dtype int32 has no exact average in ONNX"),
    (lambda x: jaxpool.avg_pool(x, 2, 1, dilations=2), (X,),
     r"avg_pool .*`dilations` \(2, 2\) need AveragePool-19; the opset", {"opset": 18}),
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
    "fn, args, message, kwargs",
    [(*row, {})[:4] for row in REFUSALS],
    ids=[f"{row[2].split()[0].removeprefix('jaxpool.')}-{i}" for i, row in enumerate(REFUSALS)],
)
def test_refusals(fn, args, message, kwargs):
    with jax.enable_x64(kwargs.get("enable_double_precision", False)):
        with pytest.raises(ValueError, match=message):
            jaxpool.onnx.export(fn, *args, **kwargs)


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
    x, pool = _x((1, 2, 6, 6)), functools.partial(jaxpool.max_pool, kernel=3, strides=1)
    before = pool(x, return_indices=True)
    jaxpool.onnx.export(lambda x: pool(x, return_indices=True), x)
    after = pool(x, return_indices=True)
    jitted = jax.jit(lambda x: pool(x, return_indices=True))(x)
    for a, b, c in zip(before, after, jitted):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


def test_the_export_table_has_every_public_op():
    ops = {row[0] for row in jaxpool.onnx.export_table()}
    assert ops == set(jaxpool.__all__) - {"openvino"}
