"""multilevel_roi_align against ``reference.multilevel_roi_align`` and the OpenVINO runtime.

Random pyramids (fixed seeds) of one to five levels, boxes from a pixel to four times the
image; the ``"openvino"`` rule against ExperimentalDetectronROIFeatureExtractor-6 (its
``aligned`` false and true are the aligned modes ``"asymmetric"`` and ``"half_pixel_for_nn"``);
every rule on boxes around the sizes where it moves a box up a level.
"""

from __future__ import annotations

import functools
import itertools
import math

import cases
import chex
import jax
import jax.numpy as jnp
import numpy as np
import oracle
import pytest
import reference
import regions

import jaxpool

RULES = reference.LEVEL_RULES
MODES = ("avg", "max")
ALIGNED_MODES = ("half_pixel_for_nn", "asymmetric", "half_pixel")
# Spatial scales of the maps, finest first.
PYRAMIDS = (
    (1 / 4, 1 / 8, 1 / 16, 1 / 32),
    (1 / 8, 1 / 16, 1 / 32, 1 / 64),
    (1 / 4, 1 / 8, 1 / 16),
    (1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64),
    (1 / 16,),
)
FPN = PYRAMIDS[0]
ATOL = 2e-5


def call(features, rois, batch, out, data_format="NCX", **kwargs):
    """multilevel_roi_align of NCX ``features`` laid out in ``data_format``."""
    maps = [cases.to_layout(f, data_format) for f in features]
    return jaxpool.multilevel_roi_align(maps, rois, batch, out, data_format=data_format, **kwargs)


def check(got, want, data_format="NCX", atol=ATOL, err_msg=""):
    got = cases.from_layout(got, data_format).astype(np.float32)
    want = np.asarray(want, np.float32)
    atol *= max(1.0, np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=0, atol=atol, err_msg=err_msg)


def pyramid(rng, scales, image, n=2, channels=3, dtype=np.float32):
    """Random NCX maps of ``ceil(image * scale)`` pixels, finest first."""
    shapes = [(n, channels, math.ceil(image[0] * s), math.ceil(image[1] * s)) for s in scales]
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


def pyramid_boxes(rng, count, image):
    """``(x_1, y_1, x_2, y_2)`` in image pixels: a quarter from 1 to 16 pixels, the others
    log-uniform from 16 pixels to four times the image (so every level of a pyramid gets
    boxes, and the largest are larger than its maps), partly outside the image; an eighth
    inverted in both axes (a positive area), a sixteenth of area 0."""
    small = rng.uniform(size=count) < 0.25
    middle, high = np.log(16), np.log(4 * max(image))
    below, above = rng.uniform(0, middle, count), rng.uniform(middle, high, count)
    size = np.exp(np.where(small, below, above))
    aspect = np.exp(rng.uniform(-1, 1, count))
    w, h = size * np.sqrt(aspect), size / np.sqrt(aspect)
    cx = rng.uniform(-0.2, 1.2, count) * image[1]
    cy = rng.uniform(-0.2, 1.2, count) * image[0]
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1)
    kind = rng.integers(0, 16, count)
    boxes[kind < 2] = boxes[kind < 2][:, [2, 3, 0, 1]]
    boxes[kind == 2, 2] = boxes[kind == 2, 0]
    return boxes.astype(np.float32)


def random_batch(rng, count, n=2):
    """Batch indices, a few outside ``[0, n)``."""
    return rng.choice([-1, *range(n), n], count, p=[0.05] + [0.9 / n] * n + [0.05])


# --------------------------------------------------------------------------------------------
# Values.
# --------------------------------------------------------------------------------------------

# Boxes the runtime treats apart: narrower than a pixel on their level (clamped to 1 in both
# aligned modes), of area 0 and of negative area (zeros), inverted in both axes (a positive
# area), larger than the image (sampled without a cap: as densely as the runtime samples them).
SPECIAL_BOXES = np.array(
    [
        [30.0, 40.0, 30.6, 40.2],
        [20.0, 20.0, 20.0, 60.0],
        [20.0, 20.0, 60.0, 20.0],
        [50.0, 50.0, 50.0, 50.0],
        [60.0, 20.0, 20.0, 60.0],
        [60.0, 60.0, 20.0, 20.0],
        [-300.0, -250.0, 700.0, 600.0],
        [-900.0, -900.0, 1200.0, 1100.0],
        [-400.0, -300.0, 500.0, 600.0],
        [-50.0, 10.0, 1000.0, 70.0],
    ],
    np.float32,
)

# (level_rule, mode, aligned_mode, sampling_ratio, pyramid, layout, dtype, canonical size and
# level): every rule with every aligned mode, both modes with each aligned mode and rule, ratios
# 0 to 3 on every pyramid; other canonical sizes and levels; each rule with its library's own
# aligned mode (None: the reference's default is the library's); the 16-bit types.
VALUE_CASES = [
    ("torchvision", "avg", "half_pixel_for_nn", 0, 0, "NCX"),
    ("torchvision", "max", "asymmetric", 2, 1, "NXC"),
    ("torchvision", "avg", "half_pixel", 1, 2, "NCX"),
    ("detectron2", "max", "half_pixel_for_nn", 2, 3, "NXC"),
    ("detectron2", "avg", "asymmetric", 3, 4, "NCX"),
    ("detectron2", "max", "half_pixel", 3, 0, "NXC"),
    ("openvino", "avg", "half_pixel_for_nn", 2, 1, "NCX"),
    ("openvino", "max", "asymmetric", 2, 2, "NXC"),
    ("openvino", "avg", "half_pixel", 0, 3, "NCX"),
    ("torchvision", "avg", None, 2, 3, "NCX", "float32", (200, 3)),
    ("detectron2", "avg", None, 2, 3, "NXC", "float32", (320, 5)),
    ("torchvision", "avg", None, 0, 0, "NXC"),
    ("torchvision", "avg", "half_pixel_for_nn", 2, 4, "NXC"),
    ("detectron2", "avg", None, 0, 0, "NCX"),
    ("torchvision", "avg", None, 2, 0, "NCX", "bfloat16"),
    ("detectron2", "avg", None, 1, 0, "NXC", "float16"),
]
# 16-bit types sum in float32 and round once, at the end.
TOLERANCES = {"float32": ATOL, "bfloat16": 1e-2, "float16": 1e-3}


@pytest.mark.parametrize("case", VALUE_CASES, ids=lambda c: "-".join(map(str, c)))
def test_matches_reference(case):
    """Random boxes and the special ones; batch indices outside ``[0, N)`` give zeros."""
    level_rule, scales, data_format = case[0], case[4], case[5]
    dtype, (canonical_size, canonical_level) = (case + ("float32", (224, 4))[len(case) - 6 :])[6:]
    rng = np.random.default_rng(VALUE_CASES.index(case))
    image = tuple(int(v) for v in rng.integers(64, 200, 2))
    wide = pyramid(rng, PYRAMIDS[scales], image)
    features = [np.asarray(jnp.asarray(f, dtype)) for f in wide]
    out = tuple(int(v) for v in rng.integers(1, 4, 2))
    names = ("level_rule", "mode", "aligned_mode", "sampling_ratio")
    kwargs = dict(zip(names, case), spatial_scales=PYRAMIDS[scales])
    kwargs.update(canonical_size=canonical_size, canonical_level=canonical_level)
    # Area 0 goes to the finest level in torchvision's and detectron2's rules (log2(0) = -inf,
    # clamped), and a negative area nowhere; the runtime's rule gives zeros for both.
    levels = reference.pyramid_levels(SPECIAL_BOXES[1:5], PYRAMIDS[scales], level_rule)
    assert levels.tolist() == ([-1] * 4 if level_rule == "openvino" else [0, 0, 0, -1])
    for _ in range(4):  # equal shapes: one compilation
        rois = np.concatenate([pyramid_boxes(rng, 16, image), SPECIAL_BOXES])
        batch = random_batch(rng, len(rois))
        want = reference.multilevel_roi_align(wide, rois, batch, out, **kwargs)
        got = call(features, rois, batch, out, data_format, **kwargs)
        assert got.dtype == dtype
        check(got, want, data_format, TOLERANCES[dtype])
        assert not np.any(np.asarray(got)[(batch < 0) | (batch >= 2)])


RUNTIME_CASES = [
    (False, 0, (4, 8, 16, 32)),
    (False, 2, (8, 16, 32, 64)),
    (True, 0, (8, 16, 32, 64)),
    (True, 2, (4, 8, 16, 32)),
]


@pytest.mark.parametrize("aligned,sampling_ratio,pyramid_scales", RUNTIME_CASES)
def test_matches_runtime(aligned, sampling_ratio, pyramid_scales):
    """The ``"openvino"`` rule is the runtime's extractor, whole: its level index counts from
    the first map whatever that map's scale, and the reference agrees with it too; with its
    defaults, the extractor's (``aligned`` false, adaptive sampling).  So is
    ``openvino.layer`` of ExperimentalDetectronROIFeatureExtractor-6: both outputs, the pooled
    features and the rois (unchanged)."""
    seed = RUNTIME_CASES.index((aligned, sampling_ratio, pyramid_scales))
    rng = np.random.default_rng(100 + seed)
    image = (200, 248)
    scales = tuple(1 / s for s in pyramid_scales)
    features = pyramid(rng, scales, image, n=1)
    rois = np.concatenate([pyramid_boxes(rng, 40, image), SPECIAL_BOXES])
    batch = np.zeros(len(rois), np.int32)
    runtime = dict(sampling_ratio=sampling_ratio, pyramid_scales=pyramid_scales, aligned=aligned)
    want = oracle.roi_feature_extractor(features, rois, 3, **runtime)
    rule = dict(spatial_scales=scales, level_rule="openvino")
    kwargs = dict(rule, sampling_ratio=sampling_ratio)
    kwargs["aligned_mode"] = "half_pixel_for_nn" if aligned else "asymmetric"
    check(reference.multilevel_roi_align(features, rois, batch, 3, **kwargs), want[0])
    data_format = ("NCX", "NXC")[seed % 2]
    check(call(features, rois, batch, 3, data_format, **kwargs), want[0], data_format)
    if not (aligned or sampling_ratio):
        check(jaxpool.multilevel_roi_align(features, rois, batch, 3, **rule), want[0])
    data = (
        f'aligned="{str(aligned).lower()}" output_size="3" sampling_ratio="{sampling_ratio}" '
        f'pyramid_scales="{",".join(map(str, pyramid_scales))}"'
    )
    name = "ExperimentalDetectronROIFeatureExtractor"
    layer = jaxpool.openvino.layer(
        f'<layer id="4" name="extractor" type="{name}" version="opset6"><data {data}/></layer>'
    )
    assert (layer.type, layer.version, layer.fn) == (name, 6, jaxpool.multilevel_roi_align)
    pooled, same_rois = layer(rois, *features)
    check(pooled, want[0])
    np.testing.assert_array_equal(np.asarray(same_rois), want[1])


def test_reference_roi_align_matches_runtime():
    """The reference pools a box on its level as ROIAlign-9 does: every mode and aligned mode,
    boxes larger than the map sampled without a cap."""
    rng = np.random.default_rng(30)
    for k, (mode, aligned) in enumerate(itertools.product(MODES, ALIGNED_MODES)):
        image = tuple(int(v) for v in rng.integers(40, 120, 2))
        (x,) = pyramid(rng, (1 / 4,), image)
        rois = pyramid_boxes(rng, 24, image)
        batch = rng.integers(0, 2, 24)
        kwargs = dict(spatial_scale=1 / 4, sampling_ratio=k % 3, mode=mode, aligned_mode=aligned)
        want = oracle.roi_align(x, rois, batch, (2, 3), **kwargs)
        got = reference.roi_align(x, rois, batch, (2, 3), **kwargs)
        # A bin without samples: the runtime divides 0 by 0, the library's rule gives 0.
        empty = np.isnan(want)
        assert not np.any(got[empty])
        check(np.where(empty, 0, got), np.where(empty, 0, want))


def threshold_boxes(level_rule, spatial_scales, canonical_size=224, canonical_level=4):
    """Boxes at and around every size at which ``level_rule`` moves a box up a level, and the
    level each must get: for each threshold ``t`` (a ``sqrt(area)``) boxes of exactly that size
    (square and 1:4), a little above it, in the band below it that the rule's epsilon still
    sends up (where wider than float32's rounding), just below that band and well below it.
    Every box keeps several float32 ulps from where the level changes, so that the rule in
    float32 (as the libraries and the runtime compute it) and in float64 agree; boxes far
    below the first threshold and far above the last test the clamp."""
    count = len(spatial_scales)
    if level_rule == "openvino":
        sizes = [224 * 2.0 ** (i - 2) for i in range(1, count)]
    else:
        k_min = -round(math.log2(spatial_scales[0]))
        sizes = [canonical_size * 2.0 ** (k_min + i - canonical_level) for i in range(1, count)]
    boxes, levels = [], []
    for i, t in enumerate(sizes, 1):
        # How far below t (relative) the epsilon moves the rule's edge.
        band = {
            "torchvision": 1 - 2.0**-1e-6,
            "detectron2": canonical_size * 1e-8 / t,
            "openvino": 224e-6 / t,
        }[level_rule]
        relative = [0.0, 5e-7, 1e-4, -band - 4e-7, -1e-4]
        if band >= 6e-7:
            relative.append(-band / 2)
        for r in relative:
            height = np.float32(t * (1 + r) ** 2)
            boxes.append([16.0, 0.0, 16.0 + t, height])
            levels.append(i if math.sqrt(t * float(height)) >= t * (1 - band) else i - 1)
        boxes.append([8.0, 0.0, 8.0 + t / 2, 2 * t])
        levels.append(i)
    if sizes:
        boxes += [[4.0, 4.0, 4.0 + sizes[0] / 8, 4.0 + sizes[0] / 8]]
        boxes += [[0.0, 0.0, 8 * sizes[-1], 8 * sizes[-1]]]
        levels += [0, count - 1]
    boxes = np.array(boxes, np.float32)
    wide = boxes.astype(np.float64)  # widths and heights are exact in float32
    np.testing.assert_array_equal(boxes[:, 2:] - boxes[:, :2], wide[:, 2:] - wide[:, :2])
    rule = dict(
        spatial_scales=spatial_scales,
        level_rule=level_rule,
        canonical_size=canonical_size,
        canonical_level=canonical_level,
    )
    np.testing.assert_array_equal(reference.pyramid_levels(boxes, **rule), levels)
    np.testing.assert_array_equal(reference.pyramid_levels(boxes, **rule, dtype=np.float32), levels)
    assert len(set(levels)) == count
    return boxes, np.array(levels)


THRESHOLD_CASES = [
    ("torchvision", FPN, 224, 4),
    ("torchvision", PYRAMIDS[1], 224, 4),
    ("torchvision", PYRAMIDS[3], 200, 3),
    ("detectron2", FPN, 224, 4),
    ("openvino", FPN, 224, 4),
    ("openvino", PYRAMIDS[1], 224, 4),
    ("openvino", PYRAMIDS[3], 224, 4),
]


@pytest.mark.parametrize("level_rule,scales,size,level", THRESHOLD_CASES)
def test_level_thresholds(level_rule, scales, size, level):
    rng = np.random.default_rng(THRESHOLD_CASES.index((level_rule, scales, size, level)))
    rois, levels = threshold_boxes(level_rule, scales, size, level)
    features = pyramid(rng, scales, (512, 512), n=1, channels=2)
    batch = np.zeros(len(rois), np.int32)
    kwargs = dict(spatial_scales=scales, sampling_ratio=2, aligned_mode="asymmetric")
    kwargs.update(level_rule=level_rule, canonical_size=size, canonical_level=level)
    want = reference.multilevel_roi_align(features, rois, batch, 3, **kwargs)
    got = np.asarray(call(features, rois, batch, 3, **kwargs))
    for r, box_level in enumerate(levels):
        check(got[r], want[r], err_msg=f"box {rois[r].tolist()} belongs to level {box_level}")
    if level_rule == "openvino":
        ratios = [round(1 / s) for s in scales]
        runtime, _ = oracle.roi_feature_extractor(
            features, rois, 3, sampling_ratio=2, pyramid_scales=ratios
        )
        check(got, runtime)


@pytest.mark.parametrize("level_rule,sampling_ratio", [("torchvision", 2), ("openvino", 3)])
def test_equals_roi_align_on_the_assigned_level(level_rule, sampling_ratio):
    """Each box is pooled exactly as ``roi_align`` pools it on its level alone, with that
    level's scale (the runtime's extractor clamps box sizes to 1 also when aligned, which
    ``roi_align``'s half-pixel modes do not: its boxes here are ``"asymmetric"``)."""
    rng = np.random.default_rng(RULES.index(level_rule) + 3 * sampling_ratio)
    image = (120, 136)
    features = pyramid(rng, FPN, image)
    # Random boxes and one of each level's sizes (sqrt(area) 60, 150, 300 and 700).
    rois = np.concatenate(
        [
            pyramid_boxes(rng, 12, image),
            np.array([[10, 10, 70, 70], [20, 5, 170, 155], [0, 0, 300, 300], [-90, -50, 610, 650]]),
        ]
    ).astype(np.float32)
    batch = rng.integers(0, 2, 16)
    aligned_mode = "asymmetric" if level_rule == "openvino" else "half_pixel_for_nn"
    mode = MODES[sampling_ratio % 2]
    kwargs = dict(sampling_ratio=sampling_ratio, mode=mode, aligned_mode=aligned_mode)
    rule = dict(spatial_scales=FPN, level_rule=level_rule)
    got = np.asarray(jaxpool.multilevel_roi_align(features, rois, batch, (2, 3), **rule, **kwargs))
    levels = reference.pyramid_levels(rois, FPN, level_rule)
    assert set(levels) >= {0, 1, 2, 3}
    # roi_align pools each box alone: all of them on each level, one compilation per level.
    alone = [
        np.asarray(jaxpool.roi_align(f, rois, batch, (2, 3), spatial_scale=s, **kwargs))
        for f, s in zip(features, FPN)
    ]
    for r, level in enumerate(levels):
        want = alone[level][r] if level >= 0 else 0
        np.testing.assert_allclose(got[r], want, rtol=0, atol=1e-6, err_msg=f"level {level}")


def test_torchvision_rule_takes_maps_that_skip_levels():
    """Maps that skip a level, as torchvision's own ONNX test of MultiScaleRoIAlign builds them:
    64 and 16 pixels for a 512 x 512 image (scales 1/8 and 1/32).  Levels are clamped to [3, 5]
    and level index ``i`` is pooled on the ``i``-th map with that map's scale: level 4's boxes
    on the 1/32 map, level 5's, which has no map, give zeros.  The native rule and the
    ``jaxpool.torch`` binder alike."""
    rng = np.random.default_rng(50)
    maps = [rng.standard_normal((1, 2, s, s)).astype(np.float32) for s in (64, 16)]
    scales = (1 / 8, 1 / 32)
    # sqrt(area) 40 and 150 (level 3), 300 (level 4) and 600 (level 5), and random boxes.
    special = np.array(
        [[10, 20, 50, 60], [100, 100, 250, 250], [50, 80, 350, 380], [-40, -60, 560, 540]],
        np.float32,
    )
    rois = np.concatenate([pyramid_boxes(rng, 12, (512, 512)), special])
    batch = np.zeros(len(rois), np.int32)
    got = np.asarray(jaxpool.multilevel_roi_align(maps, rois, batch, 2, spatial_scales=scales))
    check(got, reference.multilevel_roi_align(maps, rois, batch, 2, spatial_scales=scales))
    binder = jaxpool.torch.multi_scale_roi_align(maps, [rois], [(512, 512)], 2, -1)
    check(binder, reference.multi_scale_roi_align(maps, [rois], [(512, 512)], 2, -1))
    check(binder, got)
    level4 = jaxpool.roi_align(
        maps[1], rois[-2:-1], batch[:1], 2, spatial_scale=1 / 32, aligned_mode="asymmetric"
    )
    check(got[-2:-1], level4)
    assert np.any(got[-2]) and not np.any(got[-1])


# --------------------------------------------------------------------------------------------
# Derivatives.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mode,aligned_mode,sampling_ratio",
    [("avg", "half_pixel_for_nn", 0), ("avg", "half_pixel", 2), ("max", "asymmetric", 2)],
)
def test_gradient_is_adjoint(mode, aligned_mode, sampling_ratio):
    """``<J v, w> = <v, J^T w>`` with the gradient (``vjp``) as ``J^T w``.  The average is
    linear in the features: the reference applied to ``v`` is ``J v``, and ``jvp`` must be it
    (with a fixed ratio: adaptive sampling's forward mode is its forward program, which the
    value tests check, and takes long to compile); the max's ``J v`` is its ``jvp``."""
    rng = np.random.default_rng(50 + sampling_ratio + len(mode))
    image = (96, 112)
    features = [jnp.asarray(a) for a in pyramid(rng, FPN, image)]
    rois = pyramid_boxes(rng, 16, image)
    batch = random_batch(rng, 16)
    kwargs = dict(
        spatial_scales=FPN, sampling_ratio=sampling_ratio, mode=mode, aligned_mode=aligned_mode
    )

    def f(maps):
        return jaxpool.multilevel_roi_align(maps, rois, batch, (2, 3), **kwargs)

    v = [rng.standard_normal(a.shape).astype(np.float32) for a in features]
    if mode == "avg":
        jv = reference.multilevel_roi_align(
            [a.astype(np.float64) for a in v], rois, batch, (2, 3), **kwargs
        )
    if sampling_ratio:
        jvp = jax.jvp(f, (features,), ([jnp.asarray(a) for a in v],))[1]
        if mode == "avg":
            check(jvp, jv)
        else:
            jv = np.asarray(jvp, np.float64)
            assert np.abs(jv).max() > 0
    w = rng.standard_normal(jv.shape).astype(np.float32)
    (jtw,) = jax.vjp(f, features)[1](jnp.asarray(w))
    jv_w = jv.ravel() @ w.ravel().astype(np.float64)
    v_jtw = sum(np.asarray(g, np.float64).ravel() @ a.ravel() for g, a in zip(jtw, v))
    assert abs(jv_w - v_jtw) / (1 + abs(jv_w)) < 1e-5


def test_box_derivatives(x64):
    """Forward and reverse derivatives in the boxes against central differences (float64),
    for boxes well inside the size range of their level: two rules, in one program."""
    rng = np.random.default_rng(5)
    features = [jnp.asarray(a) for a in pyramid(rng, FPN, (128, 128), dtype=np.float64)]
    # sqrt(area) about 60, 150, 300 and 600 pixels: a level each, far from its edges, and
    # bins of no integer size on their level (where adaptive sampling changes its count).
    sizes = np.array([[50.0, 70.0], [170.0, 130.0], [290.0, 310.0], [650.0, 560.0]])
    low = rng.uniform(-20, 60, (4, 2))
    rois = jnp.asarray(np.concatenate([low, low + sizes], 1))
    batch = np.array([0, 1, 0, 1])
    kwargs = dict(spatial_scales=FPN, aligned_mode="half_pixel_for_nn")

    def f(level_rule, ratio):
        return lambda r: jaxpool.multilevel_roi_align(
            features, r, batch, (2, 3), sampling_ratio=ratio, level_rule=level_rule, **kwargs
        )

    regions.check_box_derivatives(
        {r: f(r, k) for r, k in (("torchvision", 1), ("openvino", 2))}, rois, rng
    )


# --------------------------------------------------------------------------------------------
# Transforms.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_jit_traces_once_for_equal_shapes(sampling_ratio):
    """Under ``jit`` the box count is static: new boxes of the same count do not retrace, and
    the values are the reference's (adaptive sampling included); the public function called
    again with such boxes and equal attributes neither retraces nor recompiles."""
    rng = np.random.default_rng(60 + sampling_ratio)
    image = (100, 120)
    features = pyramid(rng, FPN, image)
    kwargs = dict(spatial_scales=FPN, sampling_ratio=sampling_ratio, level_rule="detectron2")
    chex.clear_trace_counter()

    @jax.jit
    @chex.assert_max_traces(n=1)
    def f(maps, r, b):
        return jaxpool.multilevel_roi_align(maps, r, b, (3, 2), **kwargs)

    for _ in range(3):
        rois, batch = pyramid_boxes(rng, 16, image), random_batch(rng, 16)
        want = reference.multilevel_roi_align(features, rois, batch, (3, 2), **kwargs)
        check(f(features, rois, batch), want)
    if not sampling_ratio:
        return
    g = functools.partial(jaxpool.multilevel_roi_align, features, output_size=(3, 2), **kwargs)
    jax.block_until_ready(g(rois, batch))
    events = []  # traces and backend compilations of any jax.jit

    def listener(event, duration, **kwargs):
        if event.endswith(("/jaxpr_trace_duration", "/backend_compile_duration")):
            events.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        for _ in range(2):
            jax.block_until_ready(g(pyramid_boxes(rng, 16, image), random_batch(rng, 16)))
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert not events, events


def test_vmap_equals_a_loop():
    rng = np.random.default_rng(61)
    image = (90, 100)
    features = pyramid(rng, FPN, image)
    box_sets = np.stack([pyramid_boxes(rng, 6, image) for _ in range(3)])
    batches = rng.integers(0, 2, (3, 6))

    def f(maps, r, b):
        return jaxpool.multilevel_roi_align(maps, r, b, 2, spatial_scales=FPN, sampling_ratio=2)

    got = jax.vmap(lambda r, b: f(features, r, b))(box_sets, batches)
    loop = np.stack([f(features, r, b) for r, b in zip(box_sets, batches)])
    np.testing.assert_allclose(got, loop, rtol=0, atol=1e-6)
    images = [np.stack([a, a[::-1] * 2]) for a in features]
    got = jax.vmap(lambda maps: f(maps, box_sets[0], batches[0]))(images)
    loop = np.stack([f([a[k] for a in images], box_sets[0], batches[0]) for k in range(2)])
    np.testing.assert_allclose(got, loop, rtol=0, atol=1e-6)


@pytest.mark.parametrize("n,r,data_format", [(0, 3, "NCX"), (2, 0, "NXC"), (0, 0, "NCX")])
def test_empty_inputs(n, r, data_format):
    """No images or no boxes: zeros of the output's shape (every batch index is outside
    ``[0, 0)``), eagerly, under ``jit`` and ``vmap``, with zero gradients."""
    maps = [
        cases.to_layout(np.ones((n, 4, size, size + 1), np.float32), data_format)
        for size in (16, 8, 4, 2)
    ]
    rois = np.tile(np.array([[1.0, 1.0, 60.0, 50.0]], np.float32), (r, 1))
    batch = np.zeros(r, np.int32)

    def f(m, b):
        return jaxpool.multilevel_roi_align(
            m, b, batch, (2, 3), spatial_scales=FPN, data_format=data_format
        )

    shape = (r, 4, 2, 3) if data_format == "NCX" else (r, 2, 3, 4)
    for y in (f(maps, rois), jax.jit(f)(maps, rois)):
        assert y.shape == shape and y.dtype == np.float32 and not np.any(np.asarray(y))
    stacked = jax.vmap(f)([np.stack([m, m]) for m in maps], np.stack([rois, rois]))
    assert stacked.shape == (2, *shape)
    gx, gr = jax.grad(lambda m, b: f(m, b).sum(), argnums=(0, 1))(maps, rois)
    assert [g.shape for g in gx] == [m.shape for m in maps] and gr.shape == rois.shape
    assert not any(np.any(np.asarray(g)) for g in gx) and not np.any(np.asarray(gr))
    low = f([m.astype(jnp.bfloat16) for m in maps], rois)
    assert low.shape == shape and low.dtype == jnp.bfloat16


def test_nan_box_gives_nan_for_that_box_alone():
    """A box with a NaN coordinate: NaN in its whole output, no cotangent from it, every other
    box and its gradient in the features unchanged (the row's variants of ``regions.py`` in one
    program)."""
    regions.check_nan_box("multilevel_roi_align", (0, 1, 2))
