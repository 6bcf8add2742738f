"""ONNX's attribute values and the jaxpool arguments they stand for: one table, read one way by
ONNX import (:mod:`jaxpool._src.interop.onnx`) and the other by export
(:mod:`jaxpool._src.interop.onnx_export`)."""

from __future__ import annotations

from jaxpool._src import window as window_lib
from jaxpool._src.roi_align import ONNX_MAX

# The pools' auto_pad -> the window's auto_pad, in the order of window.AUTO_PADS.
AUTO_PADS = dict(zip(("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"), window_lib.AUTO_PADS))

# The pools' ceil_mode -> the window's rounding_type.
CEIL_MODES = {0: "floor", 1: "ceil_torch"}

# RoiAlign's coordinate_transformation_mode -> roi_align's aligned_mode that reads the same
# boxes.
ROI_ALIGN_TRANSFORMS = {"half_pixel": "half_pixel_for_nn", "output_half_pixel": "asymmetric"}

# roi_align's aligned_modes that no coordinate_transformation_mode reads as such: the mode that
# computes them once the boxes are shifted by the amount ((x + 0.5) * scale - 0.5).
ROI_ALIGN_SHIFTED = {"half_pixel": ("half_pixel", 0.5)}

# RoiAlign's mode -> roi_align's mode.  ONNX's max is ONNX Runtime's largest weighted corner
# term of a bin's samples, an internal mode of roi_align's program, not its largest sample
# (OpenVINO's max, roi_align's public one).
ROI_ALIGN_POOLING = {"avg": "avg", "max": ONNX_MAX}
