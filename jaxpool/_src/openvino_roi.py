"""The ROI layers of an OpenVINO IR (ROIPooling, ROIAlign, ROIAlignRotated, PSROIPooling):
their attributes as jaxpool arguments, for :mod:`jaxpool._src.openvino_ir`."""

from __future__ import annotations

from typing import Any

from jaxpool._src import ir_values

_REQUIRED = {
    "ROIPooling": ("spatial_scale",),
    "ROIAlign": ("pooled_h", "pooled_w", "sampling_ratio", "spatial_scale", "mode"),
    "ROIAlignRotated": ("pooled_h", "pooled_w", "sampling_ratio", "spatial_scale"),
    "PSROIPooling": ("output_dim", "group_size", "spatial_scale"),
}


def roi_arguments(
    op_type: str, version: int, attrs: dict[str, str]
) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """The jaxpool function of an ROI layer (ROIPooling-1/-2, ROIAlign-3/-9,
    ROIAlignRotated-15, PSROIPooling-1) and its keyword arguments."""
    where = f"{op_type}-{version}"
    for name in _REQUIRED[op_type]:
        if name not in attrs:
            raise ValueError(f"`{name}` is a required attribute of {where} and is missing.")
    scale = ("spatial_scale", ir_values.number("spatial_scale", attrs["spatial_scale"]))
    if op_type == "PSROIPooling":
        mode = ir_values.word("mode", attrs.get("mode", "average"), ("average", "bilinear"), where)
        bins = (
            ir_values.integer("spatial_bins_y", attrs.get("spatial_bins_y", "1"), 1),
            ir_values.integer("spatial_bins_x", attrs.get("spatial_bins_x", "1"), 1),
        )
        arguments: tuple[tuple[str, Any], ...] = (
            ("output_dim", ir_values.integer("output_dim", attrs["output_dim"], 1)),
            ("group_size", ir_values.integer("group_size", attrs["group_size"], 1)),
            scale,
            ("mode", mode),
            ("spatial_bins", bins),
        )
        return "psroi_pool", arguments
    if op_type == "ROIPooling":
        # The runtime saves the output size three times: pooled_h/pooled_w, output_size and
        # output_roi.  Any of them will do; those given must agree.
        sizes = {}
        if "pooled_h" in attrs or "pooled_w" in attrs:
            sizes["pooled_h, pooled_w"] = (
                ir_values.integer("pooled_h", attrs.get("pooled_h", ""), 1),
                ir_values.integer("pooled_w", attrs.get("pooled_w", ""), 1),
            )
        for name in ("output_size", "output_roi"):
            if name in attrs:
                text = attrs[name]
                if not ir_values.INT_LIST_RE.match(text) or len(text.split(",")) != 2:
                    raise ValueError(f"`{name}` (={text!r}) of {where} must be two integers.")
                sizes[name] = (
                    ir_values.integer(name, text.split(",")[0], 1),
                    ir_values.integer(name, text.split(",")[1], 1),
                )
        if not sizes:
            raise ValueError(
                f"{where} needs its output size: `pooled_h` and `pooled_w`, or `output_size`."
            )
        if len(set(sizes.values())) > 1:
            raise ValueError(f"The output sizes of {where} disagree: {sizes}.")
        size = ("output_size", next(iter(sizes.values())))
        method = ir_values.word("method", attrs.get("method", "max"), ("max", "bilinear"), where)
        return "roi_pool", (size, scale, ("method", method))
    size = (
        "output_size",
        (
            ir_values.integer("pooled_h", attrs["pooled_h"], 1),
            ir_values.integer("pooled_w", attrs["pooled_w"], 1),
        ),
    )
    ratio = ("sampling_ratio", ir_values.integer("sampling_ratio", attrs["sampling_ratio"], 0))
    if op_type == "ROIAlignRotated":
        clockwise = ir_values.boolean("clockwise_mode", attrs.get("clockwise_mode", "false"))
        arguments = (size, scale, ratio, ("clockwise", clockwise))
        return "roi_align_rotated", arguments
    mode = ir_values.word("mode", attrs["mode"], ("avg", "max"), where)
    aligned = ir_values.word(
        "aligned_mode",
        attrs.get("aligned_mode", "asymmetric"),
        ("asymmetric", "half_pixel_for_nn", "half_pixel"),
        where,
    )
    arguments = (size, scale, ratio, ("mode", mode), ("aligned_mode", aligned))
    return "roi_align", arguments
