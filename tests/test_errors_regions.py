"""Bad inputs of the region ops: ``jaxpool.roi_align``, ``psroi_align``, ``roi_align_rotated``,
``multilevel_roi_align``, ``roi_pool``, ``psroi_pool`` and ``deformable_psroi_pool`` (rows as in
``bad_inputs``; each op is called with good arguments but the ones a row names)."""

from __future__ import annotations

import bad_inputs
import numpy as np
from bad_inputs import F32, FPN2, PYRAMID, R4, R5, X_ROI, B, T, V, defaults, names, non_numeric, row
from onnx import helper

import jaxpool
import jaxpool.onnx

GOOD = dict(rois=R4, batch_indices=B, output_size=2)
ALIGN = tuple(defaults(f, x=X_ROI, **GOOD) for f in (jaxpool.roi_align, jaxpool.psroi_align))
ROTATED = defaults(jaxpool.roi_align_rotated, x=X_ROI, **{**GOOD, "rois": R5})
LEVELS = defaults(jaxpool.multilevel_roi_align, features=PYRAMID, spatial_scales=FPN2, **GOOD)
POOL = defaults(jaxpool.roi_pool, x=X_ROI, rois=R5, output_size=2)
PSPOOL = defaults(jaxpool.psroi_pool, x=X_ROI, rois=R5, output_dim=2, group_size=2)
DEFORM = defaults(jaxpool.deformable_psroi_pool, x=X_ROI, rois=R5, output_dim=2, group_size=2)
ROIS4 = r"`rois` \(shape \(3, 4\)\) must have shape \[R, 5\]"
ADAPTIVE_SAMPLING = r"`sampling_ratio` \(=-1\).*0 samples adaptively.*jaxpool\.torch"
SCALES = "`spatial_scales`"


def rule(name, *args, error=V, match, **kwargs):
    return bad_inputs.rule(name, *args, error=error, match=match, **kwargs)


# fmt: off
# Every op of one map: its features and scale.
FEATURES = [
    rule("x-rank", x=X_ROI[0], match=r"`x` must have rank 4 \(\[N, C, H, W\]\)"),
    rule("x-int", x=X_ROI.astype(np.int32), error=T, match=r"`x` must have a floating dtype"),
    rule("x-strings", x=X_ROI.astype(str), error=T, match=non_numeric("x")),
    rule("spatial_scale-string", spatial_scale="1", error=T,
         match=r"`spatial_scale` must be a float, got '1'"),
    rule("spatial_scale-nan", spatial_scale=float("nan"), match=r"`spatial_scale` \(=nan\)"),
]
# The boxes and layout of the ops whose boxes are rows of five numbers.
FIVE = [
    rule("rois-width", rois=R4, match=ROIS4),
    rule("rois-rank", rois=R5[0], match="`rois`"),
    rule("rois-int", rois=R5.astype(np.int32), error=T,
         match="`rois` must have a floating dtype, got int32"),
    rule("rois-strings", rois=R5.astype(str), error=T, match=non_numeric("rois")),
    rule("data_format-NHWC", data_format="NHWC", match=names("data_format", "'NHWC'")),
]
# roi_align and psroi_align (boxes of four corners and their images), and multilevel_roi_align.
BOXES = [
    rule("rois-width", rois=R5, match=r"`rois` \(shape \(3, 5\)\)"),
    rule("rois-rank", rois=R4[0], match="`rois`"),
    rule("rois-int", rois=R4.astype(np.int32), error=T, match=names("rois", "int32")),
    rule("rois-strings", rois=R4.astype(str), error=T, match=non_numeric("rois")),
    rule("batch_indices-shape", batch_indices=B[:2], match=r"`batch_indices` \(shape \(2,\)\)"),
    rule("batch_indices-rank", batch_indices=B[:, None], match="`batch_indices`"),
    rule("batch_indices-float", batch_indices=B.astype(F32), error=T,
         match=names("batch_indices", "float32")),
    rule("batch_indices-strings", batch_indices=B.astype(str), error=T,
         match=non_numeric("batch_indices")),
    rule("output_size-zero", output_size=0, match=r"`output_size` \(=0\)"),
    rule("output_size-len3", output_size=(2, 2, 2), match="`output_size`"),
    rule("output_size-negative", output_size=(2, -1), match="`output_size`"),
    rule("aligned_mode-center", aligned_mode="center", match="`aligned_mode`"),
    rule("aligned_mode-aligned", aligned_mode="aligned", match=names("aligned_mode", "'aligned'")),
    rule("sampling_ratio-torchvision", sampling_ratio=-1, match=ADAPTIVE_SAMPLING),
    rule("sampling_ratio-float", sampling_ratio=1.5, error=T, match="`sampling_ratio`"),
    rule("data_format-NHWC", data_format="NHWC", match=names("data_format", "'NHWC'")),
]
# fmt: on


def of(fn, name=None):
    """A row builder of ``fn``: ``{name}-{row}`` ids, ``ValueError`` unless a row says."""
    name = name or fn.__name__
    return lambda id, *args, error=V, **kwargs: row(
        f"{name}-{id}", fn, *args, error=error, **kwargs
    )


roi_align, psroi_align, rotated = of(ALIGN[0]), of(ALIGN[1]), of(ROTATED)
levels, pool, pspool, deform = of(LEVELS), of(POOL), of(PSPOOL), of(DEFORM)
OFFSETS = r"`offsets` \(shape \(%s\)\)"
# fmt: off
ROWS = [
    *bad_inputs.family((*ALIGN, ROTATED, POOL, PSPOOL, DEFORM), FEATURES),
    *bad_inputs.family((ROTATED, POOL, PSPOOL, DEFORM), FIVE),
    *bad_inputs.family((*ALIGN, LEVELS), BOXES),
    roi_align("mode", mode="mean", match=r"`mode` \(='mean'\)"),
    roi_align("mode-onnx_max", mode="onnx_max", match=r"`mode` \(='onnx_max'\)"),
    of(jaxpool.onnx.node, "onnx.node-RoiAlign")(
        "mode", helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], mode="sum"),
        match=r"`mode` \(='sum'\) of RoiAlign must be one of"),
    psroi_align("channels", output_size=3,
                match=r"`x` has 8 channels.*3 \* 3 = 9 \(`output_size`=3\)"),
    psroi_align("channels-pair", output_size=(2, 3),
                match=r"`x` has 8 channels.*2 \* 3 = 6 \(`output_size`=\(2, 3\)\)"),
    of(bad_inputs.traced(jaxpool.psroi_align, "spatial_scale", X_ROI, R4, B, 2), "psroi_align")(
        "spatial_scale-traced", 0.5, error=T,
        match=r"`spatial_scale` must be a static Python float, got a " + bad_inputs.TRACED),
    # roi_align_rotated: boxes of a center, a size and an angle.
    rotated("batch_indices", batch_indices=B[:1], match="`batch_indices`"),
    rotated("clockwise", clockwise=1, error=T, match="`clockwise`"),
    rotated("sampling_ratio-torchvision", sampling_ratio=-1,
            match=r"`sampling_ratio` \(=-1\).*jaxpool\.torch"),
    # multilevel_roi_align: a pyramid of feature maps and the scales of its levels.
    levels("features-array", features=X_ROI, spatial_scales=(1 / 4,), error=T, match="`features`"),
    levels("features-empty", features=[], spatial_scales=(), match="`features`"),
    *(levels(f"features-{name}", features=[PYRAMID[0], np.zeros(shape, F32)], match=match)
      for name, shape, match in [("batch", (1, 8, 4, 4), "`features`"),
                                 ("channels", (2, 4, 4, 4), "`features`"),
                                 ("rank", (8, 4, 4), r"`features\[1\]`")]),
    levels("features-int", features=[p.astype(np.int32) for p in PYRAMID], error=T,
           match=names("features[0]", "int32")),
    levels("features-strings", features=[PYRAMID[0], PYRAMID[1].astype(str)], error=T,
           match=non_numeric("features[1]")),
    *(levels(f"spatial_scales-{name}", spatial_scales=s, match=SCALES)
      for name, s in [("too-few", (1 / 4,)), ("too-many", (1 / 4, 1 / 8, 1 / 16)),
                      ("not-power-of-two", (1 / 4, 1 / 6)), ("not-halving", (0.3, 0.15)),
                      ("increasing", (1 / 8, 1 / 4)), ("equal", (1 / 4, 1 / 4)),
                      ("zero", (1 / 4, 0.0))]),
    levels("torchvision-increasing", spatial_scales=(1 / 16, 1 / 4),
           match=r"`spatial_scales` \(=\(0.0625, 0.25\)\) must decrease"),
    *(levels(f"{level_rule}-skipped-level", features=[PYRAMID[0], np.zeros((2, 8, 2, 2), F32)],
             spatial_scales=(1 / 4, 1 / 16), level_rule=level_rule, match=match)
      for level_rule, match in [
          ("detectron2",
           r"`spatial_scales` \(=\(0.25, 0.0625\)\) must halve.*level_rule='torchvision'"),
          ("openvino", names("spatial_scales", "must halve"))]),
    *(levels(f"{name}-{value}", **{name: value}, match=names(name, repr(value)))
      for name, value in [("level_rule", "fpn"), ("level_rule", "Torchvision"),
                          ("canonical_size", 0), ("canonical_size", -224), ("mode", "mean")]),
    # roi_pool and psroi_pool: boxes of a batch index and four corners.
    pool("method", method="avg", match=r"`method` \(='avg'\)"),
    pspool("channels", output_dim=3, match="8 channels.*`output_dim`"),
    pspool("channels-bilinear", mode="bilinear", spatial_bins=3, match="8 channels.*bins_y"),
    pspool("output_dim", output_dim=0, match="`output_dim`"),
    pspool("mode", mode="max", match="`mode`"),
    pspool("rounding", rounding="torch", match=names("rounding", "'torch'")),
    pspool("rounding-bilinear", mode="bilinear", rounding="torchvision",
           match=names("rounding", "'torchvision'.*bilinear")),
    pspool("group_size-pair", group_size=(2, 1, 1), match=names("group_size", r"\(2, 1, 1\)")),
    pspool("group_size-channels", group_size=(2, 3),
           match=names("group_size", r"8 channels.*\(2, 3\)")),
    # deformable_psroi_pool: psroi_pool's bins, moved by offsets per box, class and part.
    deform("channels", output_dim=3, match=r"`x` has 8 channels.*3 \* 2\*\*2 = 12"),
    deform("output_dim", output_dim=0, match=r"`output_dim` \(=0\)"),
    of(jaxpool.deformable_psroi_pool)("output_dim-missing", X_ROI, R5, group_size=2, error=T,
                                      match="output_dim"),
    deform("group_size", output_dim=8, group_size=0, match=r"`group_size` \(=0\)"),
    deform("spatial_bins-zero", spatial_bins=0, match=r"`spatial_bins` \(=0\)"),
    deform("spatial_bins-length", spatial_bins=(2, 2, 2), match=r"`spatial_bins` \(=\(2, 2, 2\)\)"),
    deform("spatial_bins-float", spatial_bins=1.5, error=T,
           match=r"`spatial_bins` must be an int, got 1.5"),
    deform("offsets-rois", offsets=np.zeros((2, 2, 2, 2), F32),
           match=OFFSETS % "2, 2, 2, 2" + r" must have shape \[R, 2 \* K, P, P\] = \[3, "),
    deform("offsets-odd", offsets=np.zeros((3, 3, 2, 2), F32), match=OFFSETS % "3, 3, 2, 2"),
    deform("offsets-rank", offsets=np.zeros((3, 2, 2), F32), match=OFFSETS % "3, 2, 2"),
    deform("offsets-not-square", offsets=np.zeros((3, 2, 2, 3), F32),
           match=OFFSETS % "3, 2, 2, 3" + ".*square grid"),
    deform("offsets-part_size", offsets=np.zeros((3, 2, 2, 2), F32), part_size=3,
           match=OFFSETS % "3, 2, 2, 2" + ".*`part_size`=3"),
    deform("offsets-classes", offsets=np.zeros((3, 6, 2, 2), F32),
           match=r"K = 3 classes, which must divide `output_dim` \(=2\)"),
    deform("offsets-dtype", offsets=np.zeros((3, 2, 2, 2), np.int32), error=T,
           match=r"`offsets` must have a floating dtype, got int32"),
    deform("offsets-strings", offsets=np.zeros((3, 2, 2, 2), str), error=T,
           match=non_numeric("offsets")),
    deform("part_size", part_size=0, match=r"`part_size` \(=0\)"),
    deform("trans_std-type", trans_std="1", error=T, match=r"`trans_std` must be a float, got '1'"),
    deform("trans_std-nan", trans_std=float("nan"), match=r"`trans_std` \(=nan\) must be finite"),
]
# fmt: on

test_bad_input = bad_inputs.bad_input_test(ROWS)
