"""Bad inputs of the region ops: ``jaxpool.roi_align``, ``psroi_align``, ``roi_align_rotated``,
``multilevel_roi_align``, ``roi_pool``, ``psroi_pool`` and ``deformable_psroi_pool`` (rows as in
``bad_inputs``; each op is called with good arguments but the ones a row names)."""

from __future__ import annotations

import numpy as np
from bad_inputs import (
    F32,
    FPN2,
    PYRAMID,
    R4,
    R5,
    TRACED,
    X_ROI,
    B,
    T,
    V,
    bad_input_test,
    defaults,
    family,
    names,
    non_numeric,
    row,
    rule,
    traced,
)
from onnx import helper

import jaxpool
import jaxpool.onnx

ALIGN = (
    defaults(jaxpool.roi_align, x=X_ROI, rois=R4, batch_indices=B, output_size=2),
    defaults(jaxpool.psroi_align, x=X_ROI, rois=R4, batch_indices=B, output_size=2),
)
ROTATED = defaults(jaxpool.roi_align_rotated, x=X_ROI, rois=R5, batch_indices=B, output_size=2)
LEVELS = defaults(
    jaxpool.multilevel_roi_align,
    features=PYRAMID,
    rois=R4,
    batch_indices=B,
    output_size=2,
    spatial_scales=FPN2,
)
POOL = defaults(jaxpool.roi_pool, x=X_ROI, rois=R5, output_size=2)
PSPOOL = defaults(jaxpool.psroi_pool, x=X_ROI, rois=R5, output_dim=2, group_size=2)
DEFORM = defaults(jaxpool.deformable_psroi_pool, x=X_ROI, rois=R5, output_dim=2, group_size=2)
ROIS4 = r"`rois` \(shape \(3, 4\)\) must have shape \[R, 5\]"
ADAPTIVE_SAMPLING = r"`sampling_ratio` \(=-1\).*0 samples adaptively.*jaxpool\.torch"
SCALES = "`spatial_scales`"

# fmt: off
# Every op of one map: its features and scale.
FEATURES = [
    rule("x-rank", x=X_ROI[0], error=V, match=r"`x` must have rank 4 \(\[N, C, H, W\]\)"),
    rule("x-int", x=X_ROI.astype(np.int32), error=T, match=r"`x` must have a floating dtype"),
    rule("x-strings", x=X_ROI.astype(str), error=T, match=non_numeric("x")),
    rule("spatial_scale-string", spatial_scale="1", error=T,
         match=r"`spatial_scale` must be a float, got '1'"),
    rule("spatial_scale-nan", spatial_scale=float("nan"), error=V,
         match=r"`spatial_scale` \(=nan\)"),
]
# The boxes and layout of the ops whose boxes are rows of five numbers.
FIVE = [
    rule("rois-width", rois=R4, error=V, match=ROIS4),
    rule("rois-rank", rois=R5[0], error=V, match="`rois`"),
    rule("rois-int", rois=R5.astype(np.int32), error=T,
         match="`rois` must have a floating dtype, got int32"),
    rule("rois-strings", rois=R5.astype(str), error=T, match=non_numeric("rois")),
    rule("data_format-NHWC", data_format="NHWC", error=V, match=names("data_format", "'NHWC'")),
]
# roi_align and psroi_align (boxes of four corners and their images), and multilevel_roi_align.
BOXES = [
    rule("rois-width", rois=R5, error=V, match=r"`rois` \(shape \(3, 5\)\)"),
    rule("rois-rank", rois=R4[0], error=V, match="`rois`"),
    rule("rois-int", rois=R4.astype(np.int32), error=T, match=names("rois", "int32")),
    rule("rois-strings", rois=R4.astype(str), error=T, match=non_numeric("rois")),
    rule("batch_indices-shape", batch_indices=B[:2], error=V,
         match=r"`batch_indices` \(shape \(2,\)\)"),
    rule("batch_indices-rank", batch_indices=B[:, None], error=V, match="`batch_indices`"),
    rule("batch_indices-float", batch_indices=B.astype(F32), error=T,
         match=names("batch_indices", "float32")),
    rule("batch_indices-strings", batch_indices=B.astype(str), error=T,
         match=non_numeric("batch_indices")),
    rule("output_size-zero", output_size=0, error=V, match=r"`output_size` \(=0\)"),
    rule("output_size-len3", output_size=(2, 2, 2), error=V, match="`output_size`"),
    rule("output_size-negative", output_size=(2, -1), error=V, match="`output_size`"),
    rule("aligned_mode-center", aligned_mode="center", error=V, match="`aligned_mode`"),
    rule("aligned_mode-aligned", aligned_mode="aligned", error=V,
         match=names("aligned_mode", "'aligned'")),
    rule("sampling_ratio-torchvision", sampling_ratio=-1, error=V, match=ADAPTIVE_SAMPLING),
    rule("sampling_ratio-float", sampling_ratio=1.5, error=T, match="`sampling_ratio`"),
    rule("data_format-NHWC", data_format="NHWC", error=V, match=names("data_format", "'NHWC'")),
]
ROWS = [
    *family((*ALIGN, ROTATED, POOL, PSPOOL, DEFORM), FEATURES),
    *family((ROTATED, POOL, PSPOOL, DEFORM), FIVE),
    *family((*ALIGN, LEVELS), BOXES),
    row("roi_align-mode", ALIGN[0], mode="mean", error=V, match=r"`mode` \(='mean'\)"),
    row("roi_align-mode-onnx_max", ALIGN[0], mode="onnx_max", error=V,
        match=r"`mode` \(='onnx_max'\)"),
    row("onnx.node-RoiAlign-mode", jaxpool.onnx.node,
        helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], mode="sum"), error=V,
        match=r"`mode` \(='sum'\) of RoiAlign must be one of"),
    row("psroi_align-channels", ALIGN[1], output_size=3, error=V,
        match=r"`x` has 8 channels.*3 \* 3 = 9 \(`output_size`=3\)"),
    row("psroi_align-channels-pair", ALIGN[1], output_size=(2, 3), error=V,
        match=r"`x` has 8 channels.*2 \* 3 = 6 \(`output_size`=\(2, 3\)\)"),
    row("psroi_align-spatial_scale-traced",
        traced(jaxpool.psroi_align, "spatial_scale", X_ROI, R4, B, 2), 0.5, error=T,
        match=r"`spatial_scale` must be a static Python float, got a " + TRACED),
    # roi_align_rotated: boxes of a center, a size and an angle.
    row("roi_align_rotated-batch_indices", ROTATED, batch_indices=B[:1], error=V,
        match="`batch_indices`"),
    row("roi_align_rotated-clockwise", ROTATED, clockwise=1, error=T, match="`clockwise`"),
    row("roi_align_rotated-sampling_ratio-torchvision", ROTATED, sampling_ratio=-1, error=V,
        match=r"`sampling_ratio` \(=-1\).*jaxpool\.torch"),
    # multilevel_roi_align: a pyramid of feature maps and the scales of its levels.
    row("multilevel_roi_align-features-array", LEVELS, features=X_ROI, spatial_scales=(1 / 4,),
        error=T, match="`features`"),
    row("multilevel_roi_align-features-empty", LEVELS, features=[], spatial_scales=(), error=V,
        match="`features`"),
    row("multilevel_roi_align-features-batch", LEVELS,
        features=[PYRAMID[0], np.zeros((1, 8, 4, 4), F32)], error=V, match="`features`"),
    row("multilevel_roi_align-features-channels", LEVELS,
        features=[PYRAMID[0], np.zeros((2, 4, 4, 4), F32)], error=V, match="`features`"),
    row("multilevel_roi_align-features-rank", LEVELS,
        features=[PYRAMID[0], np.zeros((8, 4, 4), F32)], error=V, match=r"`features\[1\]`"),
    row("multilevel_roi_align-features-int", LEVELS,
        features=[p.astype(np.int32) for p in PYRAMID], error=T,
        match=names("features[0]", "int32")),
    row("multilevel_roi_align-features-strings", LEVELS,
        features=[PYRAMID[0], PYRAMID[1].astype(str)], error=T, match=non_numeric("features[1]")),
    *(row(f"multilevel_roi_align-spatial_scales-{name}", LEVELS, spatial_scales=s, error=V,
          match=SCALES)
      for name, s in [("too-few", (1 / 4,)), ("too-many", (1 / 4, 1 / 8, 1 / 16)),
                      ("not-power-of-two", (1 / 4, 1 / 6)), ("not-halving", (0.3, 0.15)),
                      ("increasing", (1 / 8, 1 / 4)), ("equal", (1 / 4, 1 / 4)),
                      ("zero", (1 / 4, 0.0))]),
    row("multilevel_roi_align-torchvision-increasing", LEVELS, spatial_scales=(1 / 16, 1 / 4),
        error=V, match=r"`spatial_scales` \(=\(0.0625, 0.25\)\) must decrease"),
    row("multilevel_roi_align-detectron2-skipped-level", LEVELS,
        features=[PYRAMID[0], np.zeros((2, 8, 2, 2), F32)], spatial_scales=(1 / 4, 1 / 16),
        level_rule="detectron2", error=V,
        match=r"`spatial_scales` \(=\(0.25, 0.0625\)\) must halve.*level_rule='torchvision'"),
    row("multilevel_roi_align-openvino-skipped-level", LEVELS,
        features=[PYRAMID[0], np.zeros((2, 8, 2, 2), F32)], spatial_scales=(1 / 4, 1 / 16),
        level_rule="openvino", error=V, match=names("spatial_scales", "must halve")),
    row("multilevel_roi_align-level_rule-fpn", LEVELS, level_rule="fpn", error=V,
        match=names("level_rule", "'fpn'")),
    row("multilevel_roi_align-level_rule-Torchvision", LEVELS, level_rule="Torchvision", error=V,
        match=names("level_rule", "'Torchvision'")),
    row("multilevel_roi_align-canonical_size-zero", LEVELS, canonical_size=0, error=V,
        match=names("canonical_size", "0")),
    row("multilevel_roi_align-canonical_size-negative", LEVELS, canonical_size=-224, error=V,
        match=names("canonical_size", "-224")),
    row("multilevel_roi_align-mode", LEVELS, mode="mean", error=V, match=names("mode", "'mean'")),
    # roi_pool and psroi_pool: boxes of a batch index and four corners.
    row("roi_pool-method", POOL, method="avg", error=V, match=r"`method` \(='avg'\)"),
    row("psroi_pool-channels", PSPOOL, output_dim=3, error=V, match="8 channels.*`output_dim`"),
    row("psroi_pool-channels-bilinear", PSPOOL, mode="bilinear", spatial_bins=3, error=V,
        match="8 channels.*bins_y"),
    row("psroi_pool-output_dim", PSPOOL, output_dim=0, error=V, match="`output_dim`"),
    row("psroi_pool-mode", PSPOOL, mode="max", error=V, match="`mode`"),
    row("psroi_pool-rounding", PSPOOL, rounding="torch", error=V,
        match=names("rounding", "'torch'")),
    row("psroi_pool-rounding-bilinear", PSPOOL, mode="bilinear", rounding="torchvision", error=V,
        match=names("rounding", "'torchvision'.*bilinear")),
    row("psroi_pool-group_size-pair", PSPOOL, group_size=(2, 1, 1), error=V,
        match=names("group_size", r"\(2, 1, 1\)")),
    row("psroi_pool-group_size-channels", PSPOOL, group_size=(2, 3), error=V,
        match=names("group_size", r"8 channels.*\(2, 3\)")),
    # deformable_psroi_pool: psroi_pool's bins, moved by offsets per box, class and part.
    row("deformable_psroi_pool-channels", DEFORM, output_dim=3, error=V,
        match=r"`x` has 8 channels.*3 \* 2\*\*2 = 12"),
    row("deformable_psroi_pool-output_dim", DEFORM, output_dim=0, error=V,
        match=r"`output_dim` \(=0\)"),
    row("deformable_psroi_pool-output_dim-missing", jaxpool.deformable_psroi_pool, X_ROI, R5,
        group_size=2, error=T, match="output_dim"),
    row("deformable_psroi_pool-group_size", DEFORM, output_dim=8, group_size=0, error=V,
        match=r"`group_size` \(=0\)"),
    row("deformable_psroi_pool-spatial_bins-zero", DEFORM, spatial_bins=0, error=V,
        match=r"`spatial_bins` \(=0\)"),
    row("deformable_psroi_pool-spatial_bins-length", DEFORM, spatial_bins=(2, 2, 2), error=V,
        match=r"`spatial_bins` \(=\(2, 2, 2\)\)"),
    row("deformable_psroi_pool-spatial_bins-float", DEFORM, spatial_bins=1.5, error=T,
        match=r"`spatial_bins` must be an int, got 1.5"),
    row("deformable_psroi_pool-offsets-rois", DEFORM, offsets=np.zeros((2, 2, 2, 2), F32), error=V,
        match=r"`offsets` \(shape \(2, 2, 2, 2\)\) must have shape \[R, 2 \* K, P, P\] = \[3, "),
    row("deformable_psroi_pool-offsets-odd", DEFORM, offsets=np.zeros((3, 3, 2, 2), F32), error=V,
        match=r"`offsets` \(shape \(3, 3, 2, 2\)\)"),
    row("deformable_psroi_pool-offsets-rank", DEFORM, offsets=np.zeros((3, 2, 2), F32), error=V,
        match=r"`offsets` \(shape \(3, 2, 2\)\)"),
    row("deformable_psroi_pool-offsets-not-square", DEFORM, offsets=np.zeros((3, 2, 2, 3), F32),
        error=V, match=r"`offsets` \(shape \(3, 2, 2, 3\)\).*square grid"),
    row("deformable_psroi_pool-offsets-part_size", DEFORM, offsets=np.zeros((3, 2, 2, 2), F32),
        part_size=3, error=V, match=r"`offsets` \(shape \(3, 2, 2, 2\)\).*`part_size`=3"),
    row("deformable_psroi_pool-offsets-classes", DEFORM, offsets=np.zeros((3, 6, 2, 2), F32),
        error=V, match=r"K = 3 classes, which must divide `output_dim` \(=2\)"),
    row("deformable_psroi_pool-offsets-dtype", DEFORM, offsets=np.zeros((3, 2, 2, 2), np.int32),
        error=T, match=r"`offsets` must have a floating dtype, got int32"),
    row("deformable_psroi_pool-offsets-strings", DEFORM, offsets=np.zeros((3, 2, 2, 2), str),
        error=T, match=non_numeric("offsets")),
    row("deformable_psroi_pool-part_size", DEFORM, part_size=0, error=V,
        match=r"`part_size` \(=0\)"),
    row("deformable_psroi_pool-trans_std-type", DEFORM, trans_std="1", error=T,
        match=r"`trans_std` must be a float, got '1'"),
    row("deformable_psroi_pool-trans_std-nan", DEFORM, trans_std=float("nan"), error=V,
        match=r"`trans_std` \(=nan\) must be finite"),
]
# fmt: on

test_bad_input = bad_input_test(ROWS)
