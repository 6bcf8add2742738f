"""Bad inputs of ``jaxpool.torch``: ``torch.nn.functional``'s pooling functions and
torchvision's region ops, refusing what PyTorch refuses (PyTorch's wording where it is clear;
rows as in ``bad_inputs``)."""

from __future__ import annotations

import bad_inputs
import numpy as np
from bad_inputs import (
    F32,
    IDX,
    PYRAMID,
    R4,
    R5,
    S8,
    S_X,
    X_ROI,
    T,
    V,
    Y,
    bad_input_test,
    defaults,
    names,
    non_numeric,
)

import jaxpool.torch as jtorch

XT = np.zeros((1, 2, 6, 6), F32)
YT = np.zeros((1, 2, 3, 3), F32)
IT = np.zeros((1, 2, 3, 3), np.int32)
X7 = np.zeros((2, 3, 7, 8), F32)
X37 = np.zeros((2, 3, 6, 7, 8), F32)
S3 = np.zeros((2, 3, 3), F32)
IMAGES = [(32, 32), (32, 32)]
# The functions whose rows leave out required arguments.
WITH_DEFAULTS = {
    "fractional_max_pool2d": defaults(jtorch.fractional_max_pool2d, _random_samples=S8),
    "fractional_max_pool3d": defaults(jtorch.fractional_max_pool3d, _random_samples=S3),
    "multi_scale_roi_align": defaults(
        jtorch.multi_scale_roi_align,
        features=PYRAMID,
        boxes=[R4, R4],
        image_shapes=IMAGES,
        output_size=2,
        sampling_ratio=2,
    ),
}


def row(case, *args, error=V, match, **kwargs):
    """A row of the function that ``case`` (``"{function}-{what}"``) names, id ``torch.{case}``."""
    name = case.split("-")[0]
    fn = WITH_DEFAULTS.get(name) or getattr(jtorch, name)
    return bad_inputs.row(f"torch.{case}", fn, *args, error=error, match=match, **kwargs)


def rows_of(name, *first):
    """Rows of ``name``: ``(what, *args, ...)`` is the row ``row(f"{name}-{what}", *first,
    *args, ...)``, and ``on`` replaces ``first``."""
    return lambda what, *args, on=first, **kwargs: row(f"{name}-{what}", *on, *args, **kwargs)


mp2, unpool2 = rows_of("max_pool2d", XT), rows_of("max_unpool2d", YT)
avg2, amp2 = rows_of("avg_pool2d", XT), rows_of("adaptive_max_pool2d", XT)
frac2, frac3 = rows_of("fractional_max_pool2d", X7), rows_of("fractional_max_pool3d", X37)
align, msra = rows_of("roi_align", X_ROI), rows_of("multi_scale_roi_align")
pspool = rows_of("ps_roi_pool", X_ROI, R5)


# fmt: off
ROWS = [
    # torch.nn.functional's window pools and max_unpool.
    row("max_pool2d-rank2", np.zeros((4, 4), F32), 2,
        match=names("input", r"max_pool2d must have 3 \(unbatched\) or 4.*\(4, 4\)")),
    row("max_pool1d-rank4", XT, 2, match=names("input", r"\(1, 2, 6, 6\)")),
    row("max_pool3d-rank3", XT[0], 2, match=names("input", r"\(2, 6, 6\)")),
    mp2("padding-over-half", 2, 1, 2,
        match=names("padding", r"=2\).*at most half of `kernel_size` \(=2\)")),
    mp2("padding-over-half-dilated", 2, 1, 2, dilation=3, match="at most half of `kernel_size`"),
    row("avg_pool3d-padding-over-half", np.zeros((1, 1, 6, 6, 6), F32), (2, 2, 4), 1, (1, 1, 3),
        match=names("padding", r"\(1, 1, 3\)")),
    row("max_pool2d-no-channels", np.zeros((1, 0, 4, 4), F32), 2,
        match=names("input", r"non-empty channel.*\(1, 0, 4, 4\)")),
    mp2("kernel_size-zero", 0, match=names("kernel_size", "0")),
    mp2("kernel_size-len3", (2, 2, 2), match=names("kernel_size", r"\(2, 2, 2\)")),
    mp2("stride-zero", 2, 0, match=names("stride", "0")),
    mp2("padding-negative", 2, 1, -1, match=names("padding", "-1")),
    mp2("dilation-zero", 2, 1, 0, 0, match=names("dilation", "0")),
    mp2("ceil_mode-type", 2, ceil_mode="yes", error=T, match=names("ceil_mode", "'yes'")),
    mp2("return_indices-type", 2, return_indices=1, error=T,
        match="`return_indices` must be a bool"),
    row("max_pool1d-kernel-beyond-input", np.zeros((1, 1, 2), F32), 3,
        match=names("kernel_size", "3") + "(?=.*too small)"),
    mp2("kernel_size-float", 2.0, error=T, match=names("kernel_size", r"2\.0")),
    avg2("divisor_override-zero", 2, divisor_override=0, match=names("divisor_override", "0")),
    avg2("divisor_override-negative", 2, divisor_override=-2,
        match=names("divisor_override", "-2")),
    row("avg_pool2d-integer-input", XT.astype(np.int32), 2, error=T, match=names("input", "int32")),
    row("avg_pool1d-count_include_pad-type", XT[0], 2, count_include_pad=None, error=T,
        match=names("count_include_pad", "None")),
    row("lp_pool2d-norm_type-zero", XT, 0, 2, match=names("norm_type", "0")),
    row("lp_pool2d-norm_type-string", XT, "2", 2, error=T, match=names("norm_type", "'2'")),
    row("lp_pool1d-rank2", np.zeros((4,), F32), 2, 2, match=names("input", r"\(4,\)")),
    row("lp_pool3d-integer-input", np.zeros((1, 2, 2, 2), np.int32), 2, 2, error=T,
        match=names("input", "int32")),
    amp2("output_size-zero", (0, 2), match=names("output_size", r"\(0, 2\)")),
    amp2("output_size-len3", (2, 2, 2), match=names("output_size", r"\(2, 2, 2\)")),
    row("adaptive_max_pool3d-rank6", np.zeros((1,) * 6, F32), 2,
        match=names("input", r"\(1, 1, 1, 1, 1, 1\)")),
    row("adaptive_max_pool1d-empty-spatial", np.zeros((1, 2, 0), F32), 2,
        match=names("input", r"\(1, 2, 0\)")),
    row("adaptive_avg_pool1d-rank4", XT, 2, match=names("input", r"\(1, 2, 6, 6\)")),
    row("adaptive_avg_pool2d-output_size-float", XT, (2.5, 2), error=T,
        match=names("output_size", r"2\.5")),
    row("adaptive_avg_pool3d-integer-input", np.zeros((1, 2, 2, 2), np.int32), 1, error=T,
        match=names("input", "int32")),
    unpool2("output_size-too-large", IT, 2, output_size=(8, 6),
        match=names("output_size", r"\(8, 6\)") + "(?=.*dim 0 must be between 4 and 8)"),
    unpool2("output_size-too-small", IT, 2, output_size=(1, 2, 6, 4),
        match="dim 1 must be between 4 and 8"),
    unpool2("output_size-length", IT, 2, output_size=(6, 6, 6),
        match=names("output_size", r"\(6, 6, 6\)") + "(?=.*containing 2 or 4 elements)"),
    row("max_unpool1d-output_size-int", YT[0], IT[0], 2, output_size=6, error=T,
        match=names("output_size", "6")),
    unpool2("indices-shape", IT[0], 2, match=names("indices", r"\(2, 3, 3\)")),
    row("max_unpool2d-rank5", YT[None], IT[None], 2,
        match=names("input", r"max_unpool2d.*\(1, 1, 2, 3, 3\)")),
    row("max_unpool3d-kernel_size-len2", YT, IT, (2, 2), match=names("kernel_size", r"\(2, 2\)")),
    unpool2("index-outside", IT + 40, 2, match=r"`indices`.*18 of 18 values would be lost"),
    unpool2("indices-float", IT.astype(F32), 2, error=T,
        match="`indices` must have an integer dtype"),

    row("max_pool2d-input-strings", S_X, 2, error=T, match=non_numeric("input")),
    row("max_unpool2d-indices-strings", Y, IDX.astype(str), 2, error=T,
        match=non_numeric("indices")),
    frac2("input-strings", 2, on=[S_X], output_size=3, error=T, match=non_numeric("input")),
    # fractional max pooling: an output size or ratio, and samples or a key.
    frac2("neither", 2, match="requires specifying either an `output_size` or an `output_ratio`"),
    frac3("neither", 2, match="fractional_max_pool3d requires specifying either an `output_size`"),
    frac2("both", 2, 3, 0.5,
        match=r"only one of `output_size` \(=3\) and `output_ratio` \(=0.5\) may be specified"),
    frac2("ratio-one", 1, output_ratio=(1.0, 0.5),
        match=r"`output_ratio` must be between 0 and 1 \(got \(1.0, 0.5\)\)"),
    frac2("ratio-zero", 1, output_ratio=0.0,
        match=r"`output_ratio` must be between 0 and 1 \(got 0.0\)"),
    frac2("ratio-len3", 1, output_ratio=(0.5,) * 3,
        match=names("output_ratio", r"\(0.5, 0.5, 0.5\)")),
    frac2("ratio-string", 1, output_ratio="half", error=T, match=names("output_ratio", "'half'")),
    frac2("ratio-empty-output", 1, output_ratio=0.1,
        match=names("output_ratio", r"0.1.*empty output \(0, 0\)")),
    frac2("too-large-height", 3, (6, 4),
        match="pool height 3 too large relative to input height 7"),
    frac2("too-large-width", 3, (4, 7),
        match=r"(?s)pool width 3 too large relative to input width 8.*`kernel_size`"),
    frac3("exact-fit-refused", 2, (5, 6, 7),
        match="pool time 2 too large relative to input time 6"),
    frac2("rank2", 2, 3, on=[np.zeros((7, 8), F32)], match=names("input", r"3D or 4D.*\(7, 8\)")),
    frac2("rank5", 2, 3, on=[X37], match=names("input", r"\(2, 3, 6, 7, 8\)")),
    frac3("rank3", 2, 2, on=[np.zeros((6, 7, 8), F32)],
        match=names("input", r"4D or 5D.*\(6, 7, 8\)")),
    frac2("empty-channels", 2, 3, on=[np.zeros((2, 0, 7, 8), F32)], _random_samples=S8[:, :0],
        match=names("input", r"\(2, 0, 7, 8\)")),
    frac2("int-input", 2, 3, on=[X7.astype(np.int32)], error=T, match=names("input", "int32")),
    frac2("no-key", 2, 3, _random_samples=None, error=T,
        match=r"`key`.*`_random_samples` is None, got key=None"),
    frac2("samples-dtype", 2, 3, _random_samples=S8.astype(np.float16), error=T,
        match=names("_random_samples", "float16")),
    frac2("samples-batch", 2, 3, _random_samples=S8[:1],
        match=names("_random_samples", r"N' >= 2.*\(1, 3, 2\)")),
    frac2("samples-channels", 2, 3, _random_samples=np.zeros((2, 4, 2), F32),
        match=names("_random_samples", r"\(2, 4, 2\)")),
    frac3("samples-axes", 2, 2, _random_samples=S8,
        match=names("_random_samples", r"\[N', 3, 3\].*\(2, 3, 2\)")),
    frac2("kernel_size-zero", 0, 3, match=names("kernel_size", r"0\) must be positive")),
    frac2("kernel_size-len3", (2, 2, 2), 3, match=names("kernel_size", r"\(2, 2, 2\)")),
    frac2("output_size-len3", 2, (3, 3, 3), match=names("output_size", r"\(3, 3, 3\)")),
    frac2("output_size-float", 2, 3.0, error=T, match=names("output_size", "3.0")),

    # torchvision's region ops: boxes as a [K, 5] array or a list of [L, 4] arrays per image.
    align("boxes-width", R4, 2, match=names("boxes", r"\(3, 4\)")),
    align("boxes-list-width", [R4, R5], 2, match=names("boxes[1]", r"\(3, 5\)")),
    align("boxes-list-rank", [np.zeros(4, F32)], 2, match=names("boxes[0]", r"\(4,\)")),
    align("boxes-empty-list", [], 2, match=names("boxes", "empty list")),
    align("boxes-type", "boxes", 2, error=T, match=names("boxes", "str")),
    align("boxes-integer", R5.astype(np.int32), 2, error=T, match=names("boxes", "int32")),
    align("boxes-strings", R5.astype(str), 2, error=T, match=non_numeric("boxes")),
    align("boxes-list-strings", [R4, R4.astype(str)], 2, error=T, match=non_numeric("boxes[1]")),
    align("input-rank", R5, 2, on=[X_ROI[0]], match=names("input", r"\(8, 6, 6\)")),
    align("sampling_ratio-float", R5, 2, sampling_ratio=1.5, error=T,
        match=names("sampling_ratio", "1.5")),
    align("aligned-type", R5, 2, aligned="yes", error=T, match=names("aligned", "yes")),
    align("output_size-zero", R5, (2, 0), match=names("output_size", r"\(2, 0\)")),
    row("roi_pool-boxes-width", X_ROI, np.zeros((3, 6), F32), 2, match=names("boxes", r"\(3, 6\)")),
    row("roi_pool-spatial_scale-type", X_ROI, R5, 2, spatial_scale="half", error=T,
        match=names("spatial_scale", "half")),
    row("ps_roi_align-channels", X_ROI, R5, 3, match=names("output_size", "8 channels")),
    row("ps_roi_align-boxes-list-width", X_ROI, [R5], 2, match=names("boxes[0]", r"\(3, 5\)")),
    pspool("channels", (1, 3), match=names("output_size", r"8 channels.*\(1, 3\)")),
    row("ps_roi_pool-boxes-width", X_ROI, R4, 2, match=names("boxes", r"\(3, 4\)")),
    pspool("input-dtype", 2, on=[X_ROI.astype(np.int32), R5], error=T,
        match=names("input", "int32")),
    msra("image_shapes-length", image_shapes=IMAGES[:1],
        match=names("image_shapes", r"\[\(32, 32\)\]")),
    msra("image_shapes-pair", image_shapes=[(32, 32), (32, 32, 3)],
        match=names("image_shapes", r"\(32, 32, 3\)")),
    msra("image_shapes-type", image_shapes="32x32", error=T, match=names("image_shapes", "32x32")),
    msra("boxes-array", boxes=R5, error=T, match=names("boxes", "ndarray")),
    msra("boxes-count", boxes=[R4], image_shapes=IMAGES[:1], match=names("boxes", "1 arrays")),
    msra("boxes-width", boxes=[R4, R5], match=names("boxes[1]", r"\(3, 5\)")),
    msra("features-empty", features=[], match=names("features", "empty")),
    msra("features-rank", features=[np.zeros((2, 8, 8), F32)],
        match=names("features[0]", r"\(2, 8, 8\)")),
    msra("features-strings", features=[PYRAMID[0].astype(str)], error=T,
        match=non_numeric("features[0]")),
    msra("scales-increasing", features=PYRAMID[::-1],
        match=names("features", r"\[0.125, 0.25\].*must decrease")),
    msra("canonical_scale", canonical_scale=0, match=names("canonical_scale", "0")),
    msra("sampling_ratio", sampling_ratio=None, error=T, match=names("sampling_ratio", "None")),
]
# fmt: on

test_bad_input = bad_input_test(ROWS)
