"""The ROI pooling family against the OpenVINO runtime, and its derivatives and transforms.

Expected values come from the runtime (CPU plugin) on a random grid with fixed seeds: boxes
from sub-pixel to the whole map and partly outside it, every mode, sampling ratios 0 to 4 and
scales 1 to 1/32.  Each row of a value table compiles its programs once and checks two draws
of boxes with them; the rows cover every mode with every sampling ratio, scale and layout, and
every aligned mode with each mode and with adaptive sampling.  Derivatives: the gradient in
``x`` is the adjoint of the map whose forward values the runtime computes
(``<J v, w> = <v, J^T w>``), and the derivatives in the boxes agree with central differences
in float64.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import openvino as ov
import openvino.opset1 as opset1
import openvino.opset2 as opset2
import openvino.opset9 as opset9
import openvino.opset15 as opset15
import pytest
import reference
import regions
from cases import from_layout, random_boxes, to_layout

import jaxpool

SCALES = (1.0, 0.5, 1 / 16, 1 / 32)
LAYOUTS = ("NCX", "NXC")
ALIGNED_MODES = ("asymmetric", "half_pixel_for_nn", "half_pixel")
MODES = ("avg", "max")
ATOL = 2e-5

# --------------------------------------------------------------------------------------------
# The runtime.
# --------------------------------------------------------------------------------------------

_CORE = ov.Core()
_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}


def _model(kind, x_shape, rois_shape, attrs):
    x = opset9.parameter(list(x_shape), ov.Type.f32)
    rois = opset9.parameter(list(rois_shape), ov.Type.f32)
    params = [x, rois]
    kwargs = {k: list(v) if isinstance(v, tuple) else v for k, v in attrs}
    if kind in ("roi_align", "roi_align_rotated"):
        batch = opset9.parameter([rois_shape[0]], ov.Type.i32)
        params.append(batch)
        build = opset9.roi_align if kind == "roi_align" else opset15.roi_align_rotated
        node = build(x, rois, batch, **kwargs)
    elif kind == "roi_pool":
        node = opset2.roi_pooling(x, rois, **kwargs)
    else:
        node = opset1.psroi_pooling(x, rois, **kwargs)
    return ov.Model(node.outputs(), params)


@functools.cache
def _compiled(kind, x_shape, rois_shape, attrs):
    return _CORE.compile_model(_model(kind, x_shape, rois_shape, attrs), "CPU", _CONFIG)


def runtime(kind, x, rois, batch=None, **attrs):
    """The runtime's output for NCX ``x`` (float32)."""
    inputs = [np.ascontiguousarray(x, np.float32), np.ascontiguousarray(rois, np.float32)]
    if batch is not None:
        inputs.append(np.asarray(batch, np.int32))
    model = _compiled(kind, inputs[0].shape, inputs[1].shape, tuple(sorted(attrs.items())))
    return np.asarray(model(inputs)[model.outputs[0]])


def _pair(size):
    return (size, size) if isinstance(size, int) else tuple(size)


def _pooled(size, spatial_scale):
    h, w = _pair(size)
    return dict(pooled_h=h, pooled_w=w, spatial_scale=float(spatial_scale))


# The runtime's ops with jaxpool's arguments (ORACLE: the runtime's op of each public op).
def ov_roi_align(x, rois, batch, output_size, *, spatial_scale=1.0, **attrs):
    attrs = {"mode": "avg", "aligned_mode": "asymmetric", "sampling_ratio": 0, **attrs}
    return runtime("roi_align", x, rois, batch, **_pooled(output_size, spatial_scale), **attrs)


def ov_roi_align_rotated(x, rois, batch, output_size, *, spatial_scale=1.0, clockwise=False, **a):
    attrs = {"sampling_ratio": 0, "clockwise_mode": clockwise, **a}
    pooled = _pooled(output_size, spatial_scale)
    return runtime("roi_align_rotated", x, rois, batch, **pooled, **attrs)


def ov_roi_pool(x, rois, output_size, *, spatial_scale=1.0, method="max"):
    attrs = dict(output_roi=_pair(output_size), spatial_scale=float(spatial_scale), method=method)
    return runtime("roi_pool", x, rois, **attrs)


def ov_psroi_pool(x, rois, output_dim, group_size, *, spatial_scale=1.0, spatial_bins=1, **a):
    bins_y, bins_x = _pair(spatial_bins)
    dims = dict(output_dim=output_dim, group_size=group_size, spatial_scale=float(spatial_scale))
    attrs = {"mode": "average", "spatial_bins_x": bins_x, "spatial_bins_y": bins_y, **a}
    return runtime("psroi_pool", x, rois, **dims, **attrs)


ORACLE = {
    jaxpool.roi_align: ov_roi_align,
    jaxpool.roi_align_rotated: ov_roi_align_rotated,
    jaxpool.roi_pool: ov_roi_pool,
    jaxpool.psroi_pool: ov_psroi_pool,
}


def bind(op, inputs, *args, channels=None, **kwargs):
    """``a -> op(a[:, :channels], *inputs, *args, **kwargs)``."""
    return lambda a: op(a[:, :channels], *inputs, *args, **kwargs)


# --------------------------------------------------------------------------------------------
# Random cases.
# --------------------------------------------------------------------------------------------


def features(rng, channels, height=None, width=None, n=2):
    height = height or int(rng.integers(1, 13))
    width = width or int(rng.integers(1, 13))
    return rng.standard_normal((n, channels, height, width)).astype(np.float32)


def check(got, want, data_format="NCX", err_msg="", atol=ATOL):
    got = from_layout(got, data_format)
    atol = atol * max(1.0, np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=0, atol=atol, err_msg=err_msg)


def rows5(rng, boxes, n=2):
    """``(batch_index, x_1, y_1, x_2, y_2)`` rows of ``boxes`` on random images."""
    return np.concatenate([rng.integers(0, n, (len(boxes), 1)), boxes], 1).astype(np.float32)


def _size(rng):
    return tuple(int(v) for v in rng.integers(1, 5, 2))


def _ordered(rng, x, scale):
    """16 random boxes on ``x`` at ``scale``, their second corners below and right of the first."""
    boxes = random_boxes(rng, 16, *x.shape[2:], scale)
    boxes[:, 2:] = np.maximum(boxes[:, 2:], boxes[:, :2])
    return boxes


def _spans(rng, low, high, top):
    """16 boxes of corners in map fractions: the first in ``[low, high)``, the second up to
    ``top``."""
    first = rng.uniform(low, high, (16, 2))
    return np.concatenate([first, rng.uniform(first, top)], 1)


def _with_images(rng, boxes):
    """``boxes`` and their batch indices on two images."""
    return boxes, rng.integers(0, 2, len(boxes))


def against_runtime(op, table):
    """``table``: case -> ``(x, data_format, attributes, draws)``, each draw a tuple of box
    arrays.  ``op(x, *boxes, data_format=..., **attributes)`` of every case in one program, a
    draw at a time (equal shapes: one compilation), against the runtime's op on the NCX ``x``."""

    @jax.jit
    def every(inputs):
        return {
            name: op(x, *boxes, data_format=table[name][1], **table[name][2])
            for name, (x, boxes) in inputs.items()
        }

    for k in range(2):
        inputs = {name: (to_layout(x, fmt), draws[k]) for name, (x, fmt, _, draws) in table.items()}
        for name, got in every(inputs).items():
            x, fmt, attrs, draws = table[name]
            check(got, ORACLE[op](x, *draws[k], **attrs), fmt, name)


# --------------------------------------------------------------------------------------------
# Values against the runtime.
# --------------------------------------------------------------------------------------------

# Adaptive sampling (ratio 0) with both modes and every aligned mode; ratios 1 to 4 with both
# modes, the aligned modes taking turns; the layouts taking turns (one program).
ALIGN_CASES = [(m, a, 0) for m in MODES for a in ALIGNED_MODES] + [
    (m, ALIGNED_MODES[(r + k) % 3], r) for r in range(1, 5) for k, m in enumerate(MODES)
]


def test_roi_align_matches_runtime():
    table = {}
    for seed, (mode, aligned_mode, sampling_ratio) in enumerate(ALIGN_CASES):
        rng = np.random.default_rng(seed)
        scale, x = SCALES[seed % 4], features(rng, 3)
        attrs = dict(output_size=_size(rng), spatial_scale=scale, sampling_ratio=sampling_ratio)
        attrs.update(mode=mode, aligned_mode=aligned_mode)
        draws = [_with_images(rng, random_boxes(rng, 16, *x.shape[2:], scale)) for _ in range(2)]
        table[f"{mode}-{aligned_mode}-{sampling_ratio}"] = x, LAYOUTS[seed % 2], attrs, draws
    against_runtime(jaxpool.roi_align, table)


# Each method at every scale, the layouts taking turns (one program).
POOL_CASES = list(itertools.product(["max", "bilinear"], SCALES))


def test_roi_pool_matches_runtime():
    table = {}
    for method, scale in POOL_CASES:
        rng = np.random.default_rng(SCALES.index(scale) + 10 * (method == "max"))
        x, out = features(rng, 3), _size(rng)
        draws = [
            (rows5(rng, _ordered(rng, x, scale) if method == "max" else _spans(rng, -0.2, 1, 1.2)),)
            for _ in range(2)
        ]
        attrs = dict(output_size=out, spatial_scale=scale, method=method)
        table[f"{method}-{scale}"] = x, LAYOUTS[SCALES.index(scale) % 2], attrs, draws
    against_runtime(jaxpool.roi_pool, table)


def _beyond_the_map(rng):
    """20 rows of boxes up to four times a 9 x 13 map at scale 0.5, most far outside it."""
    corner = rng.uniform(-30, 30, (20, 2))
    size = rng.uniform(0, 4, (20, 2)) * np.array([26, 18])
    return rows5(rng, np.concatenate([corner, corner + size], 1))


@pytest.mark.parametrize("data_format", LAYOUTS)
def test_boxes_larger_than_the_map_match_runtime(data_format):
    """Boxes up to four times the map, whose bins are longer than one chunk of reads: every
    element of a bin counts (torchvision's ``roi_pool`` gives the same), under ``jit`` and
    ``vmap``; roi_pool's gradient reaches the maximal element of each bin, psroi_pool's
    forward and reverse derivatives are adjoint."""
    rng = np.random.default_rng(31)
    x = features(rng, 2 * 9, 9, 13)
    rois = _beyond_the_map(rng)
    want = (
        ov_roi_pool(x, rois, (3, 4), spatial_scale=0.5),
        ov_psroi_pool(x, rois, 2, 3, spatial_scale=0.5),
    )

    def pools(v, r):
        kwargs = dict(spatial_scale=0.5, data_format=data_format)
        return jaxpool.roi_pool(v, r, (3, 4), **kwargs), jaxpool.psroi_pool(v, r, 2, 3, **kwargs)

    @jax.jit  # one program: the pools, the pools under vmap, the derivatives
    def every(x, r, v, w):
        halves = jax.vmap(pools, in_axes=(None, 0))(x, r.reshape(2, 10, 5))
        grad = jax.grad(lambda a: pools(a, r)[0].sum())(x)
        jv = jax.jvp(lambda a: pools(a, r)[1], (x,), (v,))[1]
        pullback = jax.vjp(lambda a: pools(a, r)[1], x)[1]
        return pools(x, r), halves, grad, jv, pullback(w)[0]

    v = to_layout(rng.standard_normal(x.shape).astype(np.float32), data_format)
    w = to_layout(rng.standard_normal(want[1].shape).astype(np.float32), data_format)
    pooled, halves, grad, jv, jtw = every(jnp.asarray(to_layout(x, data_format)), rois, v, w)
    for got, half, expected in zip(pooled, halves, want):
        check(got, expected, data_format)
        check(half.reshape(20, *half.shape[2:]), expected, data_format)
    np.testing.assert_allclose(np.vdot(jv, w), np.vdot(v, jtw), rtol=1e-5)
    want_grad = np.zeros_like(x)
    for r, box in enumerate(rois):
        for c in range(x.shape[1]):
            for value in want[0][r, c].ravel():
                if value != 0.0 or np.any(x[int(box[0]), c] == 0.0):
                    hit = np.argwhere(x[int(box[0]), c] == value)
                    if len(hit):
                        want_grad[int(box[0]), c, hit[0][0], hit[0][1]] += 1.0
    check(grad, want_grad, data_format)


PSROI_CASES = list(itertools.product(["average", "bilinear"], SCALES))


def test_psroi_pool_matches_runtime():
    table = {}
    for mode, scale in PSROI_CASES:
        rng = np.random.default_rng(SCALES.index(scale) + 10 * (mode == "average"))
        group_size, output_dim = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        bins = tuple(int(v) for v in rng.integers(1, 4, 2)) if mode == "bilinear" else (1, 1)
        x = features(rng, output_dim * (group_size**2 if mode == "average" else bins[0] * bins[1]))
        average = mode == "average"
        draws = [
            (rows5(rng, _ordered(rng, x, scale) if average else _spans(rng, 0, 1, 1) / scale),)
            for _ in range(2)
        ]
        attrs = dict(output_dim=output_dim, group_size=group_size, spatial_scale=scale)
        attrs.update(mode=mode, spatial_bins=bins)
        table[f"{mode}-{scale}"] = x, LAYOUTS[SCALES.index(scale) % 2], attrs, draws
    against_runtime(jaxpool.psroi_pool, table)


# Every sampling ratio, clockwise in turns and both ways with adaptive sampling.
ROTATED_CASES = [(False, 0), (True, 1), (False, 2), (True, 3), (False, 4), (True, 0)]


def test_roi_align_rotated_matches_runtime():
    table = {}
    for clockwise, sampling_ratio in ROTATED_CASES:
        seed = 2 * sampling_ratio + clockwise
        rng = np.random.default_rng(seed)
        scale, x = SCALES[seed % 4], features(rng, 3)
        height, width = x.shape[2] / scale, x.shape[3] / scale
        out = _size(rng)
        low = [-0.2 * width, -0.2 * height, 0, 0, -4]
        high = [1.2 * width, 1.2 * height, width, height, 4]
        draws = [
            _with_images(rng, rng.uniform(low, high, (16, 5)).astype(np.float32)) for _ in range(2)
        ]
        attrs = dict(output_size=out, spatial_scale=scale, sampling_ratio=sampling_ratio)
        attrs.update(clockwise=clockwise)
        table[f"{clockwise}-{sampling_ratio}"] = x, LAYOUTS[sampling_ratio % 2], attrs, draws
    against_runtime(jaxpool.roi_align_rotated, table)


def _rule_cases():
    """Rows ``(name, op, arguments, keyword arguments, which boxes give zeros)`` of NCX cases
    with a rule of their own."""
    rng = np.random.default_rng(100)
    large = features(rng, 4, 38, 50), random_boxes(rng, 24, 38, 50, 1 / 16), rng.integers(0, 2, 24)
    ramp = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    x8 = features(np.random.default_rng(8), 8, 8, 8)
    edges = np.tile(np.array([[0, 0, 0, 6, 6], [1, 1, 0, 7, 6]], np.float32), (8, 1))
    halves = [[0, 4, -1.2, 5, -0.7], [1, -1.1, 2, -0.6, 3]]
    halves = np.tile(np.array(halves, np.float32), (8, 1))
    rng = np.random.default_rng(7)
    beyond = [[-20, -20, 30, 30], [0, 0, 8, 8], [-500, -300, 700, 900], [3, -1000, 5, 1000]]
    beyond = np.array([*beyond, [40, 40, 90, 95]], np.float32)
    beyond = features(rng, 2, 8, 8), beyond, np.array([0, 1, 0, 1, 0])
    small = features(rng, 1, 5, 5, n=1)
    nine = small, np.array([[0.0, 0.0, 9.0, 9.0], [-2.0, 1.0, 7.0, 10.0]], np.float32), [0, 0]
    ends = [[0, 0, 0, 4, 4], [-1, 0, 0, 4, 4], [1, 1, 1, 5, 5], [0, 1, 0, 3, 5]]
    ends = features(np.random.default_rng(3), 8), np.array(ends, np.float32)
    first = [False, True, True, True]
    align, pool, ps = jaxpool.roi_align, jaxpool.roi_pool, jaxpool.psroi_pool
    # fmt: off
    rows = [
        # A 38 x 50 map at scale 1/16: adaptive sampling up to 6 x 8 samples per bin.
        ("larger-map-avg", align, (*large, 7), dict(spatial_scale=1 / 16), None),
        ("larger-map-max", align, (*large, 7), dict(spatial_scale=1 / 16, mode="max"), None),
        # ROIAlign's max starts from 0; asymmetric boxes are at least 1 wide; empty ROIPooling
        # bins give 0.
        ("max-starts-from-0", align, (-np.ones((1, 1, 4, 4), np.float32),
         np.array([[0.5, 0.5, 2.5, 2.5]], np.float32), [0], 2), dict(mode="max"), [True]),
        ("point-box", align, (ramp, np.full((1, 4), 1.2, np.float32), [0], 2), {}, None),
        ("empty-bins", pool, (ramp, np.array([[0, 10, 10, 12, 12]], np.float32), 2), {}, [True]),
        # Bin edges on exact integers: XLA:CPU divides by a broadcast scalar through an
        # approximate reciprocal (7 / 3 * 3 > 7) and contracts ``a + b * c`` into a fused
        # multiply-add (``-1 + 3 * fl(1 / 3) > 0``); either moves a ceil by one element.
        ("roi_pool-bin-edges", pool, (x8, edges, 3), {}, None),
        ("psroi_pool-bin-edges", ps, (x8[:, :1].repeat(9, 1), halves, 1, 3), {}, None),
        # Boxes larger than the map take ceil(bin size) samples per bin and axis, however
        # large, as the runtime does; torchvision's own case: 9-pixel boxes on a 5 x 5 map.
        ("beyond-the-map-avg", align, (*beyond, 2), {}, None),
        ("beyond-the-map-max", align, (*beyond, 2),
         dict(mode="max", aligned_mode="half_pixel_for_nn"), None),
        ("torchvision-9-pixel-boxes", align, (*nine, 5), dict(aligned_mode="half_pixel_for_nn"),
         None),
        # PSROIPooling reads no box from the first batch index of -1 on (later boxes on valid
        # images give zeros too).
        ("minus-one-ends-average", ps, (*ends, 2, 2), {}, first),
        ("minus-one-ends-bilinear", ps, (*ends, 4, 2), dict(mode="bilinear", spatial_bins=(2, 1)),
         first),
    ]
    # fmt: on
    return [pytest.param(*row[1:], id=row[0]) for row in rows]


@pytest.mark.parametrize("op,args,kwargs,zeros", _rule_cases())
def test_rules_match_runtime(op, args, kwargs, zeros):
    """The rules the docstrings state, each against the runtime; ``zeros`` (where given) the
    boxes whose output is 0, the others not."""
    got = op(*(np.asarray(a) if isinstance(a, list) else a for a in args), **kwargs)
    want = ORACLE[op](*args, **kwargs)
    check(got, want)
    if zeros is not None:
        np.testing.assert_array_equal(~want.reshape(len(want), -1).any(1), zeros)
        assert not np.asarray(got)[np.asarray(zeros)].any()


# --------------------------------------------------------------------------------------------
# Derivatives.
# --------------------------------------------------------------------------------------------


def _adjoint_gap(jv, w, v, jtw):
    """``<J v, w> - <v, J^T w>`` relative to the terms' size."""
    jv_w = np.asarray(jv, np.float64).ravel() @ w.ravel().astype(np.float64)
    v_jtw = np.asarray(jtw, np.float64).ravel() @ v.ravel().astype(np.float64)
    return abs(jv_w - v_jtw) / (1 + abs(jv_w))


def _with_batch(r, b):
    return (np.concatenate([np.asarray(b, np.float32)[:, None], np.abs(r)], 1),)


def _normalised(r, b):
    return (np.concatenate([np.asarray(b, np.float32)[:, None], np.minimum(np.abs(r) / 20, 1)], 1),)


def _rotated(r, b):
    return np.concatenate([r, np.linspace(-3, 3, len(r))[:, None]], 1).astype(np.float32), b


def _as_is(r, b):
    return r, b


# (name, op, boxes of (rois, batch), arguments, keyword arguments): the modes linear in x ...
# fmt: off
LINEAR = [
    ("roi_align_avg", jaxpool.roi_align, _as_is, (3,), dict(spatial_scale=0.5)),
    ("roi_align_avg_half_pixel", jaxpool.roi_align, _as_is, ((2, 3),),
     dict(spatial_scale=0.5, sampling_ratio=2, aligned_mode="half_pixel")),
    ("roi_align_rotated", jaxpool.roi_align_rotated, _rotated, (3,), dict(spatial_scale=0.5)),
    ("roi_pool_bilinear", jaxpool.roi_pool, _normalised, (3,), dict(method="bilinear")),
    ("psroi_pool_average", jaxpool.psroi_pool, _with_batch, (2, 2),
     dict(spatial_scale=0.5, channels=8)),
    ("psroi_pool_bilinear", jaxpool.psroi_pool, _normalised, (2, 3),
     dict(mode="bilinear", spatial_bins=(2, 3))),
]
# ... and the maxima.
MAXIMA = [
    ("roi_align_max", jaxpool.roi_align, _as_is, (3,), dict(spatial_scale=0.5, mode="max")),
    ("roi_pool_max", jaxpool.roi_pool, _with_batch, (3,), dict(spatial_scale=0.5)),
]
# fmt: on


def test_gradient_is_adjoint_of_runtime():
    """For the modes linear in ``x``, the runtime applied to ``v`` is ``J v``, whose adjoint is
    the gradient.  For the maxima, the reverse and forward derivatives are adjoint, and the
    tangent is the input's tangent at the maximal element (or sample), which the runtime finds:
    its value on the tangent sharpened by a large multiple of x is J v.  Every mode in one
    program."""
    rng = np.random.default_rng(11)
    x = features(rng, 12, 10, 13)
    rois = np.abs(random_boxes(rng, 8, 10, 13, 0.5))
    batch = rng.integers(0, 2, 8)
    v = rng.standard_normal(x.shape).astype(np.float32)
    ours, theirs = {}, {}
    for name, op, boxes, args, kwargs in LINEAR + MAXIMA:
        ours[name] = bind(op, boxes(rois, batch), *args, **kwargs)
        theirs[name] = bind(ORACLE[op], boxes(rois, batch), *args, **kwargs)
    jv = {name: f(v) for name, f in theirs.items()}  # of the maxima: their shapes alone
    w = {name: rng.standard_normal(a.shape).astype(np.float32) for name, a in jv.items()}
    maxima = [row[0] for row in MAXIMA]

    @jax.jit
    def derivatives(x, v, w):
        out = {}
        for name, f in ours.items():
            y, pullback = jax.vjp(f, x)
            out[name] = y, pullback(w[name])[0], jax.jvp(f, (x,), (v,))[1] if name in maxima else 0
        return out

    got = derivatives(jnp.asarray(x), jnp.asarray(v), w)
    for name, (y, jtw, tangent) in got.items():
        check(y, theirs[name](x))
        jv_name = np.asarray(tangent) if name in maxima else jv[name]
        assert _adjoint_gap(jv_name, w[name], v, jtw) < 1e-5, name
    rows = _with_batch(rois, batch)
    want = ov_roi_pool(x * 1e3 + v, *rows, 3, spatial_scale=0.5)
    want = want - 1e3 * ov_roi_pool(x, *rows, 3, spatial_scale=0.5)
    np.testing.assert_allclose(np.asarray(got["roi_pool_max"][2]), want, atol=2e-2)


# fmt: off
BOX_SMOOTH = {
    "roi_align_asymmetric": lambda x, r: jaxpool.roi_align(
        x, r[:, :4], np.array([0, 1, 0]), 2, sampling_ratio=2),
    "roi_align_half_pixel_for_nn": lambda x, r: jaxpool.roi_align(
        x, r[:, :4], np.array([0, 1, 0]), (2, 3), sampling_ratio=1,
        aligned_mode="half_pixel_for_nn"),
    "roi_align_half_pixel": lambda x, r: jaxpool.roi_align(
        x, r[:, :4], np.array([1, 1, 0]), 2, sampling_ratio=1, aligned_mode="half_pixel"),
    "roi_align_rotated": lambda x, r: jaxpool.roi_align_rotated(
        x, jnp.concatenate([r[:, :2], r[:, 2:4] - r[:, :2], r[:, 4:]], 1), np.array([0, 1, 0]),
        2, sampling_ratio=1),
    "roi_pool_bilinear": lambda x, r: jaxpool.roi_pool(
        x, jnp.concatenate([jnp.zeros_like(r[:, :1]), r[:, :4] / 12], 1), 3, method="bilinear"),
    "psroi_pool_bilinear": lambda x, r: jaxpool.psroi_pool(
        x[:, :4], jnp.concatenate([jnp.ones_like(r[:, :1]), r[:, :4] / 12], 1), 1, 2,
        mode="bilinear", spatial_bins=2),
    # psroi_align in every aligned mode at a fixed ratio, and with adaptive sampling.
    **{f"psroi_align_{mode}_{ratio}": lambda x, r, mode=mode, ratio=ratio: jaxpool.psroi_align(
        x, r[:, :4], np.array([0, 1, 0]), (2, 3), spatial_scale=0.9, sampling_ratio=ratio,
        aligned_mode=mode) for mode, ratio in [(m, 2) for m in ALIGNED_MODES] + [(
        "half_pixel_for_nn", 0)]},
}
# fmt: on


def test_box_derivatives(x64):
    """Forward and reverse derivatives in the boxes against central differences (float64),
    every op and aligned mode in one program."""
    rng = np.random.default_rng(5)
    x = jnp.asarray(rng.standard_normal((2, 2 * 6, 12, 12)))
    low = rng.uniform(1, 5, (3, 2))
    rois = jnp.asarray(
        np.concatenate([low, low + rng.uniform(2, 6, (3, 2)), rng.uniform(-1, 1, (3, 1))], 1)
    )
    functions = {name: functools.partial(f, x) for name, f in BOX_SMOOTH.items()}
    regions.check_box_derivatives(functions, rois, rng)


# --------------------------------------------------------------------------------------------
# Transforms.
# --------------------------------------------------------------------------------------------


DEFORM = dict(output_dim=4, group_size=2, spatial_bins=(1, 2), trans_std=-0.75)
# Each op of (map, *boxes) at a fixed ratio, psroi_align with adaptive sampling, and its oracle.
# fmt: off
TRANSFORMED = {
    "roi_align": (lambda a, r, b, **k: jaxpool.roi_align(a, r, b, 2, sampling_ratio=2, **k),
                  lambda a, r, b: ov_roi_align(a, r, b, (2, 2), sampling_ratio=2)),
    "roi_pool": (lambda a, r, **k: jaxpool.roi_pool(a, r, 2, **k),
                 lambda a, r: ov_roi_pool(a, r, 2)),
    "psroi_align": (lambda a, r, b, **k: jaxpool.psroi_align(a, r, b, 2, **k),
                    lambda a, r, b: reference.ps_roi_align(a, r, b, (2, 2))),
    "deformable_psroi_pool": (
        lambda a, r, o, **k: jaxpool.deformable_psroi_pool(a, r, o, **DEFORM, **k),
        lambda a, r, o: reference.deformable_psroi_pool(a, r, o, **DEFORM)),
}
# fmt: on


@pytest.mark.parametrize("name", TRANSFORMED)
def test_transforms(name):
    """Eagerly and under ``jit`` the oracle's values, channels-last the same bits; ``vmap`` over
    sets of boxes and over the maps the oracle's values on each, and the gradient under
    ``vmap`` a loop of gradients; on 16-bit maps, in both layouts, their type and the oracle's
    values on the rounded map."""
    f, oracle = TRANSFORMED[name]
    rng = np.random.default_rng(9)
    x = features(rng, 16, 9, 10)
    rois = np.stack([random_boxes(rng, 5, 9, 10, 1.0) for _ in range(3)])
    batch = rng.integers(0, 2, (3, 5))
    rows = np.concatenate([batch[..., None], np.abs(rois)], 2).astype(np.float32)
    offsets = rng.uniform(-1, 1, (3, 5, 4, 3, 3)).astype(np.float32)
    sets = {"roi_pool": (rows,), "deformable_psroi_pool": (rows, offsets)}.get(name, (rois, batch))
    boxes = [a[0] for a in sets]
    eager, want = f(x, *boxes), oracle(x, *boxes)
    check(eager, want)
    check(jax.jit(f)(x, *boxes), want)
    nxc = f(to_layout(x, "NXC"), *boxes, data_format="NXC")
    np.testing.assert_array_equal(eager, from_layout(nxc, "NXC"))
    want = np.stack([oracle(x, *b) for b in zip(*sets)])
    check(jax.vmap(lambda *b: f(x, *b))(*sets), want)

    def loss(a):
        return (f(a, *boxes) ** 2).sum()

    images = np.stack([x, x[::-1] * 2])
    got, grads = jax.vmap(lambda a: (f(a, *boxes), jax.grad(loss)(a)))(images)
    check(got, np.stack([oracle(a, *boxes) for a in images]))
    loop = np.stack([jax.grad(loss)(a) for a in images])
    np.testing.assert_allclose(grads, loop, rtol=0, atol=1e-5)
    for dtype, data_format in itertools.product([jnp.bfloat16, jnp.float16], LAYOUTS):
        low = np.asarray(jnp.asarray(x, dtype))
        got = f(to_layout(low, data_format), *boxes, data_format=data_format)
        assert got.dtype == dtype
        # Sampled and summed in float32, one rounding to the 16-bit type at the end.
        want = oracle(low.astype(np.float32), *boxes)
        check(
            got.astype(np.float32), want, data_format, atol=1e-2 if dtype == jnp.bfloat16 else 1e-3
        )


# --------------------------------------------------------------------------------------------
# Bad input.
# --------------------------------------------------------------------------------------------


def test_batch_index_outside_gives_zeros():
    """Boxes on images outside ``[0, N)`` give zeros (every op in one program); a batch index
    of -1 ends PSROIPooling's list of boxes (the runtime's rule), so it comes last there."""
    x = features(np.random.default_rng(2), 3, 6, 6) + 10
    rois = np.array([[0.0, 0.0, 4.0, 4.0]] * 4, np.float32)
    batch = np.array([-1, 2, 7, 1])
    rows = np.c_[batch, rois].astype(np.float32)

    @jax.jit
    def every(x):
        return {
            "roi_align_avg": jaxpool.roi_align(x, rois, batch, 2),
            "roi_align_max": jaxpool.roi_align(x, rois, batch, 2, mode="max"),
            "roi_align_rotated": jaxpool.roi_align_rotated(x, np.c_[rois, np.zeros(4)], batch, 2),
            "roi_pool_max": jaxpool.roi_pool(x, rows, 2),
            "roi_pool_bilinear": jaxpool.roi_pool(x, rows / [1, 6, 6, 6, 6], 2, method="bilinear"),
            "psroi_pool": jaxpool.psroi_pool(x[:, :1], rows[[1, 2, 3, 0]], 1, 1),
        }

    for name, got in every(x).items():
        live = 2 if name == "psroi_pool" else 3
        assert np.all(np.asarray(got[live]) > 0), name
        assert not np.delete(np.asarray(got), live, 0).any(), name


def _indexed(r, b):
    """Boxes ``[R, 5]`` with their batch indices first, traceable."""
    return jnp.concatenate([b[:, None].astype(r.dtype), r], 1)


def _nxc(x):
    return jnp.moveaxis(x, 1, -1)


def _deformable(x, r, b, offsets=True, data_format="NCX"):
    """Offsets that depend on the boxes: the gradient in the boxes includes the offsets'."""
    o = jnp.broadcast_to(r[:, :1, None, None], (r.shape[0], 2, 3, 3)) if offsets else None
    return jaxpool.deformable_psroi_pool(
        x, _indexed(r, b), o, output_dim=2, group_size=2, data_format=data_format
    )


# Each ROI function of (NCX x of 8 channels, boxes [R, 4], batch indices [R]).
# fmt: off
EMPTY_CALLS = {
    "roi_align": lambda x, r, b: jaxpool.roi_align(x, r, b, (3, 2)),
    "roi_align_max": lambda x, r, b: jaxpool.roi_align(x, r, b, 2, mode="max"),
    "roi_align_nxc": lambda x, r, b: jaxpool.roi_align(_nxc(x), r, b, 2, data_format="NXC"),
    "roi_align_rotated": lambda x, r, b: jaxpool.roi_align_rotated(x, jnp.c_[r, r[:, :1]], b, 3),
    "roi_pool": lambda x, r, b: jaxpool.roi_pool(x, _indexed(r, b), 2),
    "roi_pool_bilinear": lambda x, r, b: jaxpool.roi_pool(x, _indexed(r, b), 2, method="bilinear"),
    "psroi_align": lambda x, r, b: jaxpool.psroi_align(x, r, b, 2),
    "psroi_align_nxc": lambda x, r, b: jaxpool.psroi_align(_nxc(x), r, b, 2, data_format="NXC"),
    "psroi_pool": lambda x, r, b: jaxpool.psroi_pool(x, _indexed(r, b), 2, 2),
    "psroi_pool_bilinear": lambda x, r, b: jaxpool.psroi_pool(
        x, _indexed(r, b), 2, 2, mode="bilinear", spatial_bins=2),
    "deformable_psroi_pool": _deformable,
    "deformable_psroi_pool_nxc": lambda x, r, b: _deformable(_nxc(x), r, b, data_format="NXC"),
    "deformable_psroi_pool_no_offsets": lambda x, r, b: _deformable(x, r, b, False),
}
# fmt: on


@pytest.mark.parametrize("n,r", [(0, 0), (0, 3), (2, 0)])
def test_empty_inputs(n, r):
    """No images or no boxes: zeros of each op's output shape (every batch index is outside
    ``[0, 0)``) in 16 and 32 bits, eagerly, under ``jit`` and ``vmap``, with zero gradients:
    every op in one program."""
    x = jnp.ones((n, 8, 10, 10), jnp.bfloat16)
    rois = jnp.tile(jnp.array([[1.0, 1.0, 6.0, 5.0]]), (r, 1))
    batch = jnp.zeros((r,), jnp.int32)

    def every(x, rois, batch):
        return {name: f(x, rois, batch) for name, f in EMPTY_CALLS.items()}

    def gradients(x, rois):
        out = {}
        for name, f in EMPTY_CALLS.items():
            y, pullback = jax.vjp(lambda *a, f=f: f(*a, batch), x, rois)
            out[name] = y, *pullback(jnp.ones_like(y))
        return out

    eager, jitted = every(x, rois, batch), jax.jit(every)(x, rois, batch)
    stacked = jax.jit(jax.vmap(every))(*(jnp.stack([a, a]) for a in (x, rois, batch)))
    wide = jax.jit(gradients)(x.astype(jnp.float32), rois)
    # Each output's shape but the box count: the op's on one image and one box.
    one = jax.eval_shape(every, jnp.ones((1, 8, 10, 10)), jnp.ones((1, 4)), jnp.zeros(1, int))
    for name in EMPTY_CALLS:
        want = np.zeros((r, *one[name].shape[1:]), np.float32)
        dtypes = [jnp.bfloat16] * 2 + [jnp.float32]
        for got, dtype in zip([eager[name], jitted[name], wide[name][0]], dtypes):
            assert got.dtype == dtype, name
            np.testing.assert_array_equal(got.astype(np.float32), want, err_msg=name)
        assert stacked[name].shape == (2, *want.shape), name
        _, gx, grois = wide[name]
        assert gx.shape == x.shape and grois.shape == rois.shape, name
        assert not np.any(np.asarray(gx)) and not np.any(np.asarray(grois)), name


# --------------------------------------------------------------------------------------------
# OpenVINO IR layers.
# --------------------------------------------------------------------------------------------


# (IR type, the runtime's op, its attributes)
# fmt: off
LAYERS = [
    ("ROIAlign", "roi_align", dict(**_pooled((2, 3), 0.5), sampling_ratio=0, mode="max",
                                   aligned_mode="half_pixel_for_nn")),
    ("ROIAlignRotated", "roi_align_rotated", dict(**_pooled(2, 0.5), sampling_ratio=2,
                                                  clockwise_mode=True)),
    ("ROIPooling", "roi_pool", dict(output_roi=(3, 2), spatial_scale=0.5, method="max")),
    ("PSROIPooling", "psroi_pool", dict(output_dim=2, group_size=2, spatial_scale=0.5,
                                        spatial_bins_x=1, spatial_bins_y=1, mode="average")),
]
# fmt: on


def test_openvino_layers(tmp_path):
    """``openvino.layer`` of the ``<layer>`` XML the runtime saves: the runtime's values."""
    import xml.etree.ElementTree as ElementTree

    rng = np.random.default_rng(21)
    x = features(rng, 8, 9, 11)
    rois = np.abs(random_boxes(rng, 6, 9, 11, 0.5))
    batch = rng.integers(0, 2, 6)
    boxes = {"roi_align": (rois, batch), "roi_align_rotated": _rotated(rois, batch)}
    for kind, op, attrs in LAYERS:
        inputs = boxes.get(op, _with_batch(rois, batch))
        path = tmp_path / f"{kind}.xml"
        model = _model(op, x.shape, inputs[0].shape, tuple(attrs.items()))
        ov.save_model(model, str(path), compress_to_fp16=False)
        (element,) = [
            e for e in ElementTree.parse(path).getroot().iter("layer") if e.get("type") == kind
        ]
        layer = jaxpool.openvino.layer(ElementTree.tostring(element, encoding="unicode"))
        check(layer(x, *inputs), runtime(op, x, *inputs, **attrs))


def test_roi_head_example(capsys):
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parent.parent / "examples" / "roi_head.py"
    spec = importlib.util.spec_from_file_location("example_roi_head", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with jax.numpy_dtype_promotion("standard"):  # optax's Adam mixes Python floats and ints
        out = module.main(steps=80)
    assert out["accuracy"] >= 0.8, out
    assert out["iou_after"] > out["iou_before"], out
    assert "held-out accuracy" in capsys.readouterr().out


def test_nan_box_gives_nan_for_that_box_alone():
    """A box with a NaN coordinate: NaN in its whole output, no cotangent from it, every other
    box and its gradient in the features unchanged (the rows' variants of ``regions.py`` in one
    program)."""
    regions.check_nan_boxes(
        {
            "roi_pool": (0, 1),
            "roi_align": (0, 1),
            "roi_align_adaptive": (0, 1),
            "roi_align_rotated": (0,),
            "psroi_pool": (0, 2),
            "psroi_align": (0,),
            "deformable_psroi_pool": (1,),
        }
    )
