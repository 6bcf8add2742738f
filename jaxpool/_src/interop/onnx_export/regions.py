"""The ROI ops: ``roi_pool`` as MaxRoiPool, ``roi_align`` as RoiAlign; the region ops ONNX has
no node for, refused."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from jaxpool._src import window as window_lib
from jaxpool._src.interop.onnx_export.entry import Export, refused
from jaxpool._src.interop.onnx_export.graph import (
    Call,
    Emit,
    Graph,
    back,
    float_types,
    ncx_shape,
    to_ncx,
)
from jaxpool._src.interop.onnx_names import (
    ROI_ALIGN_POOLING,
    ROI_ALIGN_SHIFTED,
    ROI_ALIGN_TRANSFORMS,
)
from jaxpool._src.roi_align import roi_align, roi_align_any_mode
from jaxpool._src.roi_pool import TORCHVISION_MAX, roi_pool, roi_pool_any_method


def _pair(call: Call, name: str) -> list[int]:
    return list(window_lib.per_axis(name, call.params[name], 2, 1))


def _roi_input(call: Call, g: Graph, operands: Sequence[ir.Value], compute: np.dtype):
    """``x`` in NCX and ``compute``, and the boxes in ``compute`` (the nodes take one type)."""
    x_shape, dtype = call.inputs[0].shape, np.dtype(call.inputs[0].dtype)
    x, ncx = to_ncx(g, operands[0], x_shape, dtype, call.params["data_format"])
    if compute != dtype:
        x = g.cast(x, ncx, compute)
    rois = operands[1]
    if np.dtype(call.inputs[1].dtype) != compute:
        rois = g.cast(rois, call.inputs[1].shape, compute)
    return x, rois


def _roi_output(call: Call, g: Graph, y: ir.Value, compute: np.dtype) -> list[ir.Value]:
    dtype, data_format = np.dtype(call.outputs[0].dtype), call.params["data_format"]
    out_ncx = ncx_shape(call.outputs[0].shape, data_format)
    if compute != dtype:
        y = g.cast(y, out_ncx, dtype)
    return [back(g, y, out_ncx, dtype, data_format)]


def _plan_roi_pool(call: Call) -> Emit:
    p = call.params
    # MaxRoiPool's scan is torchvision's: a strict `>` from the lowest finite value.
    if p["method"] not in ("max", TORCHVISION_MAX):
        raise call.refuse(
            f"`method` (={p['method']!r}): MaxRoiPool pools boxes rounded to elements "
            "(method='max'), and no ONNX node samples bilinearly per bin"
        )
    if p.get("return_argmax"):
        raise call.refuse("`return_argmax`: MaxRoiPool gives no argmax")
    compute = float_types(call, np.dtype(call.inputs[0].dtype))
    pooled_shape = _pair(call, "output_size")
    out_ncx = ncx_shape(call.outputs[0].shape, p["data_format"])

    def emit(g: Graph, operands: Sequence[ir.Value]) -> list[ir.Value]:
        x, rois = _roi_input(call, g, operands, compute)
        y = g.op(
            "MaxRoiPool",
            x,
            rois,
            shape=out_ncx,
            dtype=compute,
            pooled_shape=pooled_shape,
            spatial_scale=float(p["spatial_scale"]),
        )
        return _roi_output(call, g, y, compute)

    return emit


# roi_align's aligned_mode -> RoiAlign's coordinate_transformation_mode, and the shift of the
# boxes that makes ONNX's mode compute jaxpool's.
_ALIGNED_MODES = {
    **{aligned: (transform, 0.0) for transform, aligned in ROI_ALIGN_TRANSFORMS.items()},
    **ROI_ALIGN_SHIFTED,
}
# roi_align's modes -> RoiAlign's mode.
_ROI_ALIGN_MODES = {mode: onnx_mode for onnx_mode, mode in ROI_ALIGN_POOLING.items()}


def _plan_roi_align(call: Call) -> Emit:
    p = call.params
    if p["mode"] not in _ROI_ALIGN_MODES:
        raise call.refuse(
            f"`mode` (={p['mode']!r}): RoiAlign's max is the largest weighted corner term of a "
            "bin's samples, not the largest sample (roi_align's max, OpenVINO's)"
        )
    transform, shift = _ALIGNED_MODES[p["aligned_mode"]]
    compute = float_types(call, np.dtype(call.inputs[0].dtype))
    out_h, out_w = _pair(call, "output_size")
    out_ncx = ncx_shape(call.outputs[0].shape, p["data_format"])
    attributes = {
        "mode": _ROI_ALIGN_MODES[p["mode"]],
        "output_height": out_h,
        "output_width": out_w,
        "sampling_ratio": int(p["sampling_ratio"]),
        "spatial_scale": float(p["spatial_scale"]),
    }

    def emit(g: Graph, operands: Sequence[ir.Value]) -> list[ir.Value]:
        node_attributes = attributes
        if g.opset >= 16:
            node_attributes = {**attributes, "coordinate_transformation_mode": transform}
        elif transform == "half_pixel":
            raise call.refuse(
                f"`aligned_mode` (={p['aligned_mode']!r}) needs RoiAlign-16's half_pixel; the "
                f"opset is {g.opset}"
            )
        x, rois = _roi_input(call, g, operands, compute)
        if shift:
            rois = g.op(
                "Add",
                rois,
                g.const(np.asarray(shift, compute)),
                shape=call.inputs[1].shape,
                dtype=compute,
            )
        batch_indices = operands[2]
        if np.dtype(call.inputs[2].dtype) != np.int64:
            batch_indices = g.cast(batch_indices, call.inputs[2].shape, np.int64)
        y = g.op(
            "RoiAlign", x, rois, batch_indices, shape=out_ncx, dtype=compute, **node_attributes
        )
        return _roi_output(call, g, y, compute)

    return emit


_ROI_ALIGN_NOTES = (
    "aligned_mode 'half_pixel_for_nn' -> half_pixel, 'asymmetric' -> output_half_pixel, "
    "'half_pixel' -> half_pixel of rois + 0.5; mode='avg'; batch_indices cast to int64; "
    "refused: mode='max' (ONNX's max is the largest weighted corner term, not the largest "
    "sample); jaxpool.onnx.node's RoiAlign max exports as RoiAlign max"
)
_ROI_ALIGN_OPERANDS = ("x", "rois", "batch_indices")

# The boxes name their images, so no call merges under `vmap`.
ENTRIES = (
    Export(
        "roi_pool",
        "node",
        "MaxRoiPool",
        "method='max'; refused: method='bilinear' (no ONNX node samples bilinearly per bin)",
        _plan_roi_pool,
        roi_pool,
        ("x", "rois"),
    ),
    Export(
        "roi_align",
        "node",
        "RoiAlign",
        _ROI_ALIGN_NOTES,
        _plan_roi_align,
        roi_align,
        _ROI_ALIGN_OPERANDS,
    ),
    Export(
        "roi_align_any_mode",
        "node",
        "RoiAlign",
        _ROI_ALIGN_NOTES,
        _plan_roi_align,
        roi_align_any_mode,
        _ROI_ALIGN_OPERANDS,
        listed=False,
    ),
    Export(
        "roi_pool_any_method",
        "node",
        "MaxRoiPool",
        "",
        _plan_roi_pool,
        roi_pool_any_method,
        ("x", "rois"),
        listed=False,
    ),
    refused("roi_align_rotated", "ONNX has no rotated RoiAlign"),
    refused("psroi_pool", "ONNX has no position-sensitive ROI pooling"),
    refused("psroi_align", "ONNX has no position-sensitive RoiAlign"),
    Export(
        "psroi_align_any_empty_bin",
        "refused",
        "",
        "ONNX has no position-sensitive RoiAlign",
        listed=False,
    ),
    refused("deformable_psroi_pool", "ONNX has no deformable position-sensitive ROI pooling"),
    refused(
        "multilevel_roi_align",
        "ONNX has no pyramid RoiAlign; call roi_align per level to export RoiAlign nodes",
    ),
)
