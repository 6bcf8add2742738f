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
import regions
from cases import random_boxes

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


# The runtime's ops with jaxpool's arguments: (x, rois, [batch,] output size or dims, attributes).
def ov_roi_align(x, rois, batch, output_size, *, spatial_scale=1.0, sampling_ratio=0, **attrs):
    attrs = {"mode": "avg", "aligned_mode": "asymmetric", "sampling_ratio": sampling_ratio, **attrs}
    return runtime("roi_align", x, rois, batch, **_pooled(output_size, spatial_scale), **attrs)


def ov_roi_align_rotated(x, rois, batch, output_size, *, spatial_scale=1.0, clockwise=False, **a):
    attrs = {"sampling_ratio": 0, "clockwise_mode": clockwise, **a}
    return runtime(
        "roi_align_rotated", x, rois, batch, **_pooled(output_size, spatial_scale), **attrs
    )


def _pooled(output_size, spatial_scale):
    h, w = output_size
    return dict(pooled_h=h, pooled_w=w, spatial_scale=float(spatial_scale))


def ov_roi_pool(x, rois, output_size, *, spatial_scale=1.0, method="max"):
    attrs = dict(output_roi=tuple(output_size), spatial_scale=float(spatial_scale), method=method)
    return runtime("roi_pool", x, rois, **attrs)


def ov_psroi_pool(
    x, rois, output_dim, group_size, *, spatial_scale=1.0, spatial_bins=(1, 1), mode="average"
):
    dims = dict(output_dim=output_dim, group_size=group_size, spatial_scale=float(spatial_scale))
    bins = dict(spatial_bins_x=spatial_bins[1], spatial_bins_y=spatial_bins[0])
    return runtime("psroi_pool", x, rois, mode=mode, **dims, **bins)


# --------------------------------------------------------------------------------------------
# Random cases.
# --------------------------------------------------------------------------------------------


def features(rng, channels, height=None, width=None, n=2):
    height = height or int(rng.integers(1, 13))
    width = width or int(rng.integers(1, 13))
    return rng.standard_normal((n, channels, height, width)).astype(np.float32)


def to_nxc(a):
    return np.moveaxis(np.asarray(a), 1, -1)


def in_layout(x, data_format):
    return x if data_format == "NCX" else to_nxc(x)


def check(got, want, data_format="NCX", err_msg=""):
    got = np.asarray(got)
    if data_format == "NXC":
        got = np.moveaxis(got, -1, 1)
    atol = ATOL * max(1.0, np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=0, atol=atol, err_msg=err_msg)


def rows5(rng, boxes, n=2):
    """``(batch_index, x_1, y_1, x_2, y_2)`` rows of ``boxes`` on random images."""
    return np.concatenate([rng.integers(0, n, (len(boxes), 1)), boxes], 1).astype(np.float32)


def against_runtime(op, oracle, table):
    """``table``: case -> ``(x, data_format, attributes, draws)``, each draw a tuple of box
    arrays.  ``op(x, *boxes, data_format=..., **attributes)`` of every case in one program, a
    draw at a time (equal shapes: one compilation), against ``oracle(x, *boxes, **attributes)``
    of the NCX ``x``."""

    @jax.jit
    def every(inputs):
        return {
            name: op(x, *boxes, data_format=table[name][1], **table[name][2])
            for name, (x, boxes) in inputs.items()
        }

    for k in range(2):
        inputs = {name: (in_layout(x, fmt), draws[k]) for name, (x, fmt, _, draws) in table.items()}
        for name, got in every(inputs).items():
            x, fmt, attrs, draws = table[name]
            check(got, oracle(x, *draws[k], **attrs), fmt, name)


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
        scale = SCALES[seed % 4]
        x = features(rng, 3)
        out = tuple(int(v) for v in rng.integers(1, 5, 2))
        attrs = dict(output_size=out, spatial_scale=scale, sampling_ratio=sampling_ratio)
        attrs.update(mode=mode, aligned_mode=aligned_mode)
        draws = [
            (random_boxes(rng, 16, *x.shape[2:], scale), rng.integers(0, 2, 16)) for _ in range(2)
        ]
        table[f"{mode}-{aligned_mode}-{sampling_ratio}"] = x, LAYOUTS[seed % 2], attrs, draws
    against_runtime(jaxpool.roi_align, ov_roi_align, table)


def test_roi_align_larger_map_matches_runtime():
    """A 38x50 map at scale 1/16 (adaptive sampling up to 6 x 8 samples per bin)."""
    rng = np.random.default_rng(100)
    x = features(rng, 4, 38, 50)
    rois = random_boxes(rng, 24, 38, 50, 1 / 16)
    batch = rng.integers(0, 2, 24)
    for mode in ("avg", "max"):
        want = ov_roi_align(x, rois, batch, (7, 7), spatial_scale=1 / 16, mode=mode)
        check(jaxpool.roi_align(x, rois, batch, 7, spatial_scale=1 / 16, mode=mode), want)


# Each method at every scale, the layouts taking turns (one program).
POOL_CASES = list(itertools.product(["max", "bilinear"], SCALES))


def test_roi_pool_matches_runtime():
    table = {}
    for method, scale in POOL_CASES:
        rng = np.random.default_rng(SCALES.index(scale) + 10 * (method == "max"))
        x = features(rng, 3)
        out = tuple(int(v) for v in rng.integers(1, 5, 2))
        draws = []
        for _ in range(2):
            if method == "max":
                boxes = random_boxes(rng, 16, x.shape[2], x.shape[3], scale)
                boxes[:, 2:] = np.maximum(boxes[:, 2:], boxes[:, :2])
            else:
                low = rng.uniform(-0.2, 1.0, (16, 2))
                boxes = np.concatenate([low, rng.uniform(low, 1.2)], 1)
            draws.append((rows5(rng, boxes),))
        attrs = dict(output_size=out, spatial_scale=scale, method=method)
        table[f"{method}-{scale}"] = x, LAYOUTS[SCALES.index(scale) % 2], attrs, draws
    against_runtime(jaxpool.roi_pool, ov_roi_pool, table)


def _beyond_the_map(rng):
    """20 rows of boxes up to four times a 9 x 13 map at scale 0.5, most far outside it."""
    corner = rng.uniform(-30, 30, (20, 2))
    size = rng.uniform(0, 4, (20, 2)) * np.array([26, 18])
    return rows5(rng, np.concatenate([corner, corner + size], 1))


@pytest.mark.parametrize("data_format", LAYOUTS)
def test_roi_pool_boxes_larger_than_the_map_match_runtime(data_format):
    """Boxes up to four times the map, whose bins are longer than one chunk of reads: every
    element of a bin counts (torchvision's ``roi_pool`` gives the same), under ``jit`` and
    ``vmap``, and the gradient reaches the maximal element of each bin."""
    rng = np.random.default_rng(31)
    x = features(rng, 3, 9, 13)
    rois = _beyond_the_map(rng)
    want = ov_roi_pool(x, rois, (3, 4), spatial_scale=0.5)
    xs = in_layout(x, data_format)

    def pool(v, r):
        return jaxpool.roi_pool(v, r, (3, 4), spatial_scale=0.5, data_format=data_format)

    @jax.jit  # one program: the pool, the pool under vmap, the gradient
    def every(v, r):
        halves = jax.vmap(pool, in_axes=(None, 0))(v, r.reshape(2, 10, 5))
        return pool(v, r), halves, jax.grad(lambda v: pool(v, r).sum())(v)

    pooled, halves, grad = every(jnp.asarray(xs), rois)
    check(pooled, want, data_format)
    check(halves.reshape(20, *halves.shape[2:]), want, data_format)
    want_grad = np.zeros_like(x)
    for r, box in enumerate(rois):
        for c in range(x.shape[1]):
            for value in want[r, c].ravel():
                if value != 0.0 or np.any(x[int(box[0]), c] == 0.0):
                    hit = np.argwhere(x[int(box[0]), c] == value)
                    if len(hit):
                        want_grad[int(box[0]), c, hit[0][0], hit[0][1]] += 1.0
    check(grad, want_grad, data_format)


def test_psroi_pool_boxes_larger_than_the_map_match_runtime():
    """Average bins longer than one chunk of reads count every element, under ``jit`` and
    ``vmap``, and forward and reverse derivatives are adjoint."""
    rng = np.random.default_rng(32)
    x = features(rng, 2 * 9, 9, 13)
    rois = _beyond_the_map(rng)
    want = ov_psroi_pool(x, rois, 2, 3, spatial_scale=0.5)

    def pool(v, r):
        return jaxpool.psroi_pool(v, r, 2, 3, spatial_scale=0.5)

    @jax.jit  # one program: the pool, the pool under vmap, both derivatives
    def every(x, r, v, w):
        halves = jax.vmap(pool, in_axes=(None, 0))(x, r.reshape(2, 10, 5))
        jv = jax.jvp(lambda a: pool(a, r), (x,), (v,))[1]
        return pool(x, r), halves, jv, jax.vjp(lambda a: pool(a, r), x)[1](w)[0]

    v = rng.standard_normal(x.shape).astype(np.float32)
    w = rng.standard_normal(want.shape).astype(np.float32)
    pooled, halves, jv, jtw = every(jnp.asarray(x), rois, v, w)
    check(pooled, want)
    check(halves.reshape(20, *halves.shape[2:]), want)
    np.testing.assert_allclose(np.vdot(jv, w), np.vdot(v, jtw), rtol=1e-5)


PSROI_CASES = list(itertools.product(["average", "bilinear"], SCALES))


def test_psroi_pool_matches_runtime():
    table = {}
    for mode, scale in PSROI_CASES:
        rng = np.random.default_rng(SCALES.index(scale) + 10 * (mode == "average"))
        group_size, output_dim = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        bins = tuple(int(v) for v in rng.integers(1, 4, 2)) if mode == "bilinear" else (1, 1)
        x = features(rng, output_dim * (group_size**2 if mode == "average" else bins[0] * bins[1]))
        draws = []
        for _ in range(2):
            if mode == "average":
                boxes = random_boxes(rng, 16, x.shape[2], x.shape[3], scale)
                boxes[:, 2:] = np.maximum(boxes[:, 2:], boxes[:, :2])
            else:
                low = rng.uniform(0, 1, (16, 2))
                boxes = np.concatenate([low, rng.uniform(low, 1)], 1) / scale
            draws.append((rows5(rng, boxes),))
        attrs = dict(output_dim=output_dim, group_size=group_size, spatial_scale=scale)
        attrs.update(mode=mode, spatial_bins=bins)
        table[f"{mode}-{scale}"] = x, LAYOUTS[SCALES.index(scale) % 2], attrs, draws
    against_runtime(jaxpool.psroi_pool, ov_psroi_pool, table)


@pytest.mark.parametrize("mode", ["average", "bilinear"])
def test_psroi_pool_batch_index_minus_one_ends_the_boxes(mode):
    """The runtime reads no box from the first batch index of -1 on (later boxes on valid
    images give zeros too)."""
    rng = np.random.default_rng(3)
    x = features(rng, 8)
    rois = np.array(
        [[0, 0, 0, 4, 4], [-1, 0, 0, 4, 4], [1, 1, 1, 5, 5], [0, 1, 0, 3, 5]], np.float32
    )
    bins = (2, 1) if mode == "bilinear" else (1, 1)
    output_dim = 4 if mode == "bilinear" else 2
    want = ov_psroi_pool(x, rois, output_dim, 2, spatial_scale=1.0, mode=mode, spatial_bins=bins)
    assert np.abs(want[0]).max() > 0 and not want[1:].any()
    got = jaxpool.psroi_pool(x, rois, output_dim, 2, mode=mode, spatial_bins=bins)
    check(got, want)


# Every sampling ratio, clockwise in turns and both ways with adaptive sampling.
ROTATED_CASES = [(False, 0), (True, 1), (False, 2), (True, 3), (False, 4), (True, 0)]


def test_roi_align_rotated_matches_runtime():
    table = {}
    for clockwise, sampling_ratio in ROTATED_CASES:
        seed = 2 * sampling_ratio + clockwise
        rng = np.random.default_rng(seed)
        scale = SCALES[seed % 4]
        x = features(rng, 3)
        height, width = x.shape[2] / scale, x.shape[3] / scale
        out = tuple(int(v) for v in rng.integers(1, 5, 2))
        low = [-0.2 * width, -0.2 * height, 0, 0, -4]
        high = [1.2 * width, 1.2 * height, width, height, 4]
        draws = [
            (rng.uniform(low, high, (16, 5)).astype(np.float32), rng.integers(0, 2, 16))
            for _ in range(2)
        ]
        attrs = dict(output_size=out, spatial_scale=scale, sampling_ratio=sampling_ratio)
        attrs.update(clockwise=clockwise)
        table[f"{clockwise}-{sampling_ratio}"] = x, LAYOUTS[sampling_ratio % 2], attrs, draws
    against_runtime(jaxpool.roi_align_rotated, ov_roi_align_rotated, table)


def test_runtime_rules():
    """The rules the docstrings state: ROIAlign's max starts from 0, asymmetric boxes are at
    least 1 wide, empty ROIPooling bins give 0."""
    x = -np.ones((1, 1, 4, 4), np.float32)
    rois = np.array([[0.5, 0.5, 2.5, 2.5]], np.float32)
    got = jaxpool.roi_align(x, rois, np.array([0]), 2, mode="max")
    assert np.all(np.asarray(got) == 0)
    check(got, ov_roi_align(x, rois, [0], (2, 2), mode="max"))
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    point = np.array([[1.2, 1.2, 1.2, 1.2]], np.float32)
    check(jaxpool.roi_align(x, point, np.array([0]), 2), ov_roi_align(x, point, [0], (2, 2)))
    outside = np.array([[0, 10, 10, 12, 12]], np.float32)
    got = jaxpool.roi_pool(x, outside, 2)
    assert np.all(np.asarray(got) == 0)
    check(got, ov_roi_pool(x, outside, (2, 2)))


def test_bin_edges_are_correctly_rounded():
    """Bin edges on exact integers: XLA:CPU divides by a broadcast scalar through an
    approximate reciprocal (7 / 3 * 3 > 7) and contracts ``a + b * c`` into a fused
    multiply-add (``-1 + 3 * fl(1 / 3) > 0``); either moves a ceil by one element."""
    rng = np.random.default_rng(8)
    x = features(rng, 8, 8, 8)
    boxes = np.tile(np.array([[0, 0, 0, 6, 6], [1, 1, 0, 7, 6]], np.float32), (8, 1))
    check(jaxpool.roi_pool(x, boxes, 3), ov_roi_pool(x, boxes, (3, 3)))
    boxes = np.tile(np.array([[0, 4, -1.2, 5, -0.7], [1, -1.1, 2, -0.6, 3]], np.float32), (8, 1))
    check(
        jaxpool.psroi_pool(x[:, :1].repeat(9, 1), boxes, 1, 3),
        ov_psroi_pool(x[:, :1].repeat(9, 1), boxes, 1, 3),
    )


def test_adaptive_count_beyond_the_map():
    """Boxes larger than the map take ``ceil(bin size)`` samples per bin and axis, as the
    runtime does, however large: torchvision's own case (9-pixel boxes on a 5 x 5 map), boxes
    many times the map, and boxes far outside it."""
    rng = np.random.default_rng(7)
    x = features(rng, 2, 8, 8)
    rois = np.array(
        [
            [-20.0, -20.0, 30.0, 30.0],
            [0.0, 0.0, 8.0, 8.0],
            [-500.0, -300.0, 700.0, 900.0],
            [3.0, -1000.0, 5.0, 1000.0],
            [40.0, 40.0, 90.0, 95.0],
        ],
        np.float32,
    )
    batch = np.array([0, 1, 0, 1, 0])
    # Each pair compiles its own programs; each mode and each aligned mode once.
    for mode, aligned_mode in (("avg", "asymmetric"), ("max", "half_pixel_for_nn")):
        got = jaxpool.roi_align(x, rois, batch, 2, mode=mode, aligned_mode=aligned_mode)
        want = ov_roi_align(x, rois, batch, (2, 2), mode=mode, aligned_mode=aligned_mode)
        check(got, want)
    small = features(rng, 1, 5, 5, n=1)
    boxes = np.array([[0.0, 0.0, 9.0, 9.0], [-2.0, 1.0, 7.0, 10.0]], np.float32)
    check(
        jaxpool.roi_align(small, boxes, np.array([0, 0]), 5, aligned_mode="half_pixel_for_nn"),
        ov_roi_align(small, boxes, [0, 0], (5, 5), aligned_mode="half_pixel_for_nn"),
    )


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_half_precision(dtype):
    rng = np.random.default_rng(3)
    x = features(rng, 4, 9, 11)
    rois = random_boxes(rng, 8, 9, 11, 0.5)
    batch = rng.integers(0, 2, 8)
    low = jnp.asarray(x, dtype)
    want = jaxpool.roi_align(np.asarray(low, np.float32), rois, batch, 3, spatial_scale=0.5)
    got = jaxpool.roi_align(low, rois, batch, 3, spatial_scale=0.5)
    assert got.dtype == dtype
    tol = 1e-2 if dtype == jnp.bfloat16 else 1e-3
    np.testing.assert_allclose(np.asarray(got, np.float32), want, atol=tol * 4)
    prois = np.concatenate([batch[:, None], np.abs(rois)], 1).astype(np.float32)
    got = jaxpool.roi_pool(low, prois, 3, spatial_scale=0.5)
    assert got.dtype == dtype


# --------------------------------------------------------------------------------------------
# Derivatives.
# --------------------------------------------------------------------------------------------


def _adjoint_gap(jv, w, v, jtw):
    """``<J v, w> - <v, J^T w>`` relative to the terms' size."""
    jv_w = np.asarray(jv, np.float64).ravel() @ w.ravel().astype(np.float64)
    v_jtw = np.asarray(jtw, np.float64).ravel() @ v.ravel().astype(np.float64)
    return abs(jv_w - v_jtw) / (1 + abs(jv_w))


LINEAR = {
    "roi_align_avg": (
        lambda x, r, b: jaxpool.roi_align(x, r, b, 3, spatial_scale=0.5),
        lambda x, r, b: ov_roi_align(x, r, b, (3, 3), spatial_scale=0.5),
    ),
    "roi_align_avg_half_pixel": (
        lambda x, r, b: jaxpool.roi_align(
            x, r, b, (2, 3), spatial_scale=0.5, sampling_ratio=2, aligned_mode="half_pixel"
        ),
        lambda x, r, b: ov_roi_align(
            x, r, b, (2, 3), spatial_scale=0.5, sampling_ratio=2, aligned_mode="half_pixel"
        ),
    ),
    "roi_align_rotated": (
        lambda x, r, b: jaxpool.roi_align_rotated(x, _rotated(r), b, 3, spatial_scale=0.5),
        lambda x, r, b: ov_roi_align_rotated(x, _rotated(r), b, (3, 3), spatial_scale=0.5),
    ),
    "roi_pool_bilinear": (
        lambda x, r, b: jaxpool.roi_pool(x, _normalised(r, b), 3, method="bilinear"),
        lambda x, r, b: ov_roi_pool(x, _normalised(r, b), (3, 3), method="bilinear"),
    ),
    "psroi_pool_average": (
        lambda x, r, b: jaxpool.psroi_pool(x[:, :8], _with_batch(r, b), 2, 2, spatial_scale=0.5),
        lambda x, r, b: ov_psroi_pool(x[:, :8], _with_batch(r, b), 2, 2, spatial_scale=0.5),
    ),
    "psroi_pool_bilinear": (
        lambda x, r, b: jaxpool.psroi_pool(
            x[:, :12], _normalised(r, b), 2, 3, mode="bilinear", spatial_bins=(2, 3)
        ),
        lambda x, r, b: ov_psroi_pool(
            x[:, :12], _normalised(r, b), 2, 3, mode="bilinear", spatial_bins=(2, 3)
        ),
    ),
}


def _with_batch(r, b):
    return np.concatenate([np.asarray(b, np.float32)[:, None], np.abs(r)], 1)


def _normalised(r, b):
    r = np.abs(r) / 20
    return np.concatenate([np.asarray(b, np.float32)[:, None], np.minimum(r, 1)], 1)


def _rotated(r):
    return np.concatenate([r, np.linspace(-3, 3, len(r))[:, None]], 1).astype(np.float32)


def test_gradient_is_adjoint_of_runtime():
    """For the modes linear in ``x``, the runtime applied to ``v`` is ``J v`` (every mode in one
    program)."""
    rng = np.random.default_rng(11)
    x = features(rng, 12, 10, 13)
    rois = np.abs(random_boxes(rng, 8, 10, 13, 0.5))
    batch = rng.integers(0, 2, 8)
    v = rng.standard_normal(x.shape).astype(np.float32)
    jv = {name: theirs(v, rois, batch) for name, (_, theirs) in LINEAR.items()}
    w = {name: rng.standard_normal(a.shape).astype(np.float32) for name, a in jv.items()}

    @jax.jit
    def values_and_pullbacks(x, w):
        out = {}
        for name, (ours, _) in LINEAR.items():
            y, pullback = jax.vjp(lambda a, ours=ours: ours(a, rois, batch), x)
            out[name] = y, pullback(w[name])[0]
        return out

    for name, (y, jtw) in values_and_pullbacks(jnp.asarray(x), w).items():
        check(y, LINEAR[name][1](x, rois, batch))
        assert _adjoint_gap(jv[name], w[name], v, jtw) < 1e-5, name


def test_max_gradient_is_adjoint_of_jvp():
    """The derivatives of the maxima: reverse and forward adjoint; the tangent is the input's
    tangent at the maximal element (or sample), which the runtime finds: its value on the
    tangent sharpened by a large multiple of x is J v."""
    rng = np.random.default_rng(12)
    x = features(rng, 3, 10, 13)
    rois = np.abs(random_boxes(rng, 8, 10, 13, 0.5))
    batch = rng.integers(0, 2, 8)
    functions = {
        "roi_align_max": lambda a: jaxpool.roi_align(
            a, rois, batch, 3, spatial_scale=0.5, mode="max"
        ),
        "roi_pool_max": lambda a: jaxpool.roi_pool(
            a, _with_batch(rois, batch), 3, spatial_scale=0.5
        ),
    }
    v = rng.standard_normal(x.shape).astype(np.float32)
    w = {name: rng.standard_normal((8, 3, 3, 3)).astype(np.float32) for name in functions}

    @jax.jit
    def derivatives(x, v, w):
        return {
            name: (jax.jvp(f, (x,), (v,))[1], jax.vjp(f, x)[1](w[name])[0])
            for name, f in functions.items()
        }

    got = derivatives(jnp.asarray(x), jnp.asarray(v), w)
    for name, (jv, jtw) in got.items():
        assert _adjoint_gap(np.asarray(jv), w[name], v, jtw) < 1e-5, name
    want = ov_roi_pool(x * 1e3 + v, _with_batch(rois, batch), (3, 3), spatial_scale=0.5)
    want = want - 1e3 * ov_roi_pool(x, _with_batch(rois, batch), (3, 3), spatial_scale=0.5)
    np.testing.assert_allclose(np.asarray(got["roi_pool_max"][0]), want, atol=2e-2)


BOX_SMOOTH = {
    "roi_align_asymmetric": lambda x, r: jaxpool.roi_align(
        x, r[:, :4], np.array([0, 1, 0]), 2, sampling_ratio=2
    ),
    "roi_align_half_pixel_for_nn": lambda x, r: jaxpool.roi_align(
        x, r[:, :4], np.array([0, 1, 0]), (2, 3), sampling_ratio=1, aligned_mode="half_pixel_for_nn"
    ),
    "roi_align_half_pixel": lambda x, r: jaxpool.roi_align(
        x, r[:, :4], np.array([1, 1, 0]), 2, sampling_ratio=1, aligned_mode="half_pixel"
    ),
    "roi_align_rotated": lambda x, r: jaxpool.roi_align_rotated(
        x,
        jnp.concatenate([r[:, :2], r[:, 2:4] - r[:, :2], r[:, 4:]], 1),
        np.array([0, 1, 0]),
        2,
        sampling_ratio=1,
    ),
    "roi_pool_bilinear": lambda x, r: jaxpool.roi_pool(
        x, jnp.concatenate([jnp.zeros_like(r[:, :1]), r[:, :4] / 12], 1), 3, method="bilinear"
    ),
    "psroi_pool_bilinear": lambda x, r: jaxpool.psroi_pool(
        x[:, :4],
        jnp.concatenate([jnp.ones_like(r[:, :1]), r[:, :4] / 12], 1),
        1,
        2,
        mode="bilinear",
        spatial_bins=2,
    ),
}


def test_box_derivatives(x64):
    """Forward and reverse derivatives in the boxes against central differences (float64),
    every op and aligned mode in one program."""
    rng = np.random.default_rng(5)
    x = jnp.asarray(rng.standard_normal((2, 4, 12, 12)))
    low = rng.uniform(1, 5, (3, 2))
    rois = jnp.asarray(
        np.concatenate([low, low + rng.uniform(2, 6, (3, 2)), rng.uniform(-1, 1, (3, 1))], 1)
    )
    functions = {name: functools.partial(f, x) for name, f in BOX_SMOOTH.items()}
    regions.check_box_derivatives(functions, rois, rng)


# --------------------------------------------------------------------------------------------
# Transforms.
# --------------------------------------------------------------------------------------------


def test_vmap_over_box_sets_and_images():
    rng = np.random.default_rng(9)
    x = features(rng, 3, 9, 10, n=2)
    rois = np.stack([random_boxes(rng, 5, 9, 10, 1.0) for _ in range(4)])
    batch = rng.integers(0, 2, (4, 5))
    f = functools.partial(jaxpool.roi_align, output_size=2, sampling_ratio=2)
    got = jax.vmap(lambda r, b: f(x, r, b))(rois, batch)
    check(
        got,
        np.stack([ov_roi_align(x, r, b, (2, 2), sampling_ratio=2) for r, b in zip(rois, batch)]),
    )
    images = np.stack([x, x[::-1] * 2])
    got = jax.vmap(lambda a: f(a, rois[0], batch[0]))(images)
    check(
        got,
        np.stack([ov_roi_align(a, rois[0], batch[0], (2, 2), sampling_ratio=2) for a in images]),
    )
    g = jax.vmap(jax.grad(lambda a: f(a, rois[0], batch[0]).sum()))(images)
    assert g.shape == images.shape


# --------------------------------------------------------------------------------------------
# Bad input.
# --------------------------------------------------------------------------------------------


def test_batch_index_outside_gives_zeros():
    rng = np.random.default_rng(2)
    x = features(rng, 3, 6, 6) + 10
    rois = np.array([[0.0, 0.0, 4.0, 4.0]] * 4, np.float32)
    batch = np.array([-1, 2, 7, 1])
    for mode in ("avg", "max"):
        got = np.asarray(jaxpool.roi_align(x, rois, batch, 2, mode=mode))
        assert np.all(got[:3] == 0) and np.all(got[3] > 0)
    got = np.asarray(jaxpool.roi_align_rotated(x, np.c_[rois, np.zeros(4)], batch, 2))
    assert np.all(got[:3] == 0) and np.all(got[3] > 0)
    prois = np.c_[batch, rois].astype(np.float32)
    for method in ("max", "bilinear"):
        got = np.asarray(
            jaxpool.roi_pool(
                x, prois / [1, 6, 6, 6, 6] if method == "bilinear" else prois, 2, method=method
            )
        )
        assert np.all(got[:3] == 0) and np.all(got[3] > 0)
    # A batch index of -1 ends PSROIPooling's list of boxes (the runtime's rule): last here.
    got = np.asarray(jaxpool.psroi_pool(x[:, :1], prois[[1, 2, 3, 0]], 1, 1))
    assert np.all(got[[0, 1, 3]] == 0) and np.all(got[2] > 0)


def _indexed(r, b):
    """Boxes ``[R, 5]`` with their batch indices first, traceable."""
    return jnp.concatenate([b[:, None].astype(r.dtype), r], 1)


# Each ROI function of (x, boxes [R, 4], batch indices [R]), NCX, and its output channels and
# size for an x of 8 channels.
EMPTY_CALLS = {
    "roi_align": (lambda x, r, b: jaxpool.roi_align(x, r, b, (3, 2)), 8, (3, 2)),
    "roi_align_max": (lambda x, r, b: jaxpool.roi_align(x, r, b, 2, mode="max"), 8, (2, 2)),
    "roi_align_rotated": (
        lambda x, r, b: jaxpool.roi_align_rotated(x, jnp.c_[r, r[:, :1]], b, 3),
        8,
        (3, 3),
    ),
    "roi_pool": (lambda x, r, b: jaxpool.roi_pool(x, _indexed(r, b), 2), 8, (2, 2)),
    "roi_pool_bilinear": (
        lambda x, r, b: jaxpool.roi_pool(x, _indexed(r, b), 2, method="bilinear"),
        8,
        (2, 2),
    ),
    "psroi_align": (lambda x, r, b: jaxpool.psroi_align(x, r, b, 2), 2, (2, 2)),
    "psroi_pool": (lambda x, r, b: jaxpool.psroi_pool(x, _indexed(r, b), 2, 2), 2, (2, 2)),
    "psroi_pool_bilinear": (
        lambda x, r, b: jaxpool.psroi_pool(
            x, _indexed(r, b), 2, 2, mode="bilinear", spatial_bins=2
        ),
        2,
        (2, 2),
    ),
}


@pytest.mark.parametrize("n,r", [(0, 0), (0, 3), (2, 0)])
def test_empty_inputs(n, r):
    """No images or no boxes: zeros of each op's output shape (every batch index is outside
    ``[0, 0)``), eagerly, under ``jit`` and ``vmap``, with zero gradients: every op in one
    program."""
    x = jnp.ones((n, 8, 10, 10), jnp.bfloat16)
    rois = jnp.tile(jnp.array([[1.0, 1.0, 6.0, 5.0]]), (r, 1))
    batch = jnp.zeros((r,), jnp.int32)

    def every(x, rois, batch):
        return {name: f(x, rois, batch) for name, (f, _, _) in EMPTY_CALLS.items()}

    def gradients(x, rois):
        return {
            name: jax.grad(lambda *a, f=f: f(*a, batch).astype(jnp.float32).sum(), (0, 1))(x, rois)
            for name, (f, _, _) in EMPTY_CALLS.items()
        }

    eager, jitted = every(x, rois, batch), jax.jit(every)(x, rois, batch)
    stacked = jax.jit(jax.vmap(every))(*(jnp.stack([a, a]) for a in (x, rois, batch)))
    for name, (_, channels, size) in EMPTY_CALLS.items():
        want = np.zeros((r, channels, *size), np.float32)
        for got in (eager[name], jitted[name]):
            assert got.dtype == jnp.bfloat16, name
            np.testing.assert_array_equal(got.astype(np.float32), want, err_msg=name)
        assert stacked[name].shape == (2, *want.shape), name
    for name, (gx, grois) in jax.jit(gradients)(x.astype(jnp.float32), rois).items():
        assert gx.shape == x.shape and grois.shape == rois.shape, name
        assert not np.any(np.asarray(gx)) and not np.any(np.asarray(grois)), name
    nxc = jaxpool.roi_align(jnp.moveaxis(x, 1, -1), rois, batch, 2, data_format="NXC")
    assert nxc.shape == (r, 2, 2, 8)


# --------------------------------------------------------------------------------------------
# OpenVINO IR layers.
# --------------------------------------------------------------------------------------------


# (IR type, the runtime's op, its attributes)
LAYERS = [
    (
        "ROIAlign",
        "roi_align",
        dict(
            pooled_h=2,
            pooled_w=3,
            sampling_ratio=0,
            spatial_scale=0.5,
            mode="max",
            aligned_mode="half_pixel_for_nn",
        ),
    ),
    (
        "ROIAlignRotated",
        "roi_align_rotated",
        dict(pooled_h=2, pooled_w=2, sampling_ratio=2, spatial_scale=0.5, clockwise_mode=True),
    ),
    ("ROIPooling", "roi_pool", dict(output_roi=(3, 2), spatial_scale=0.5, method="max")),
    (
        "PSROIPooling",
        "psroi_pool",
        dict(
            output_dim=2,
            group_size=2,
            spatial_scale=0.5,
            spatial_bins_x=1,
            spatial_bins_y=1,
            mode="average",
        ),
    ),
]


def test_openvino_layers(tmp_path):
    """``openvino.layer`` of the ``<layer>`` XML the runtime saves: the runtime's values."""
    import xml.etree.ElementTree as ElementTree

    rng = np.random.default_rng(21)
    x = features(rng, 8, 9, 11)
    rois = np.abs(random_boxes(rng, 6, 9, 11, 0.5))
    batch = rng.integers(0, 2, 6)
    boxes = {"roi_align": rois, "roi_align_rotated": _rotated(rois)}
    for kind, op, attrs in LAYERS:
        inputs = [boxes[op], batch] if op in boxes else [_with_batch(rois, batch)]
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
        }
    )
