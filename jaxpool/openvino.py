"""OpenVINO IR layers as jaxpool callables.

This module only turns IR text into arguments: it parses a ``<layer>`` element (or a type name
and its ``<data>`` attributes) with the standard library and binds them to a jaxpool function.
It does not import the OpenVINO runtime.  The layers, their inputs in the IR's order and what
a call returns:

* MaxPool-1: ``max_pool(x, ...)``, values; MaxPool-8, -14: ``max_pool(x, ...,
  return_indices=True)``, ``(values, indices)``;
* AvgPool-1, -14, -16 (16 has ``dilations``): ``avg_pool(x, ...)``;
* AdaptiveMaxPool-8: ``adaptive_max_pool(x, output_size, return_indices=True)``,
  ``(values, indices)``; AdaptiveAvgPool-8: ``adaptive_avg_pool(x, output_size)``;
* ROIPooling-1, -2: ``roi_pool(x, rois, ...)``; ROIAlign-3, -9: ``roi_align(x, rois,
  batch_indices, ...)``; ROIAlignRotated-15: ``roi_align_rotated(x, rois, batch_indices,
  ...)``; PSROIPooling-1: ``psroi_pool(x, rois, ...)``; DeformablePSROIPooling-1:
  ``deformable_psroi_pool(x, rois[, offsets], ...)``, its offsets optional as in the IR;
* ExperimentalDetectronROIFeatureExtractor-6: ``multilevel_roi_align(levels, rois, ...)``,
  ``(features, rois)``.

ExperimentalDetectronROIFeatureExtractor-6 is called as the IR orders its inputs,
``layer(rois, level_0, level_1, ...)``, each level one image ``[1, C, H_l, W_l]``; it pools
with ``level_rule="openvino"``, ``spatial_scales`` the inverses of ``pyramid_scales``, and
``aligned`` true as ``aligned_mode="half_pixel_for_nn"`` (false: ``"asymmetric"``), and its
second output is the input ``rois``, unchanged, as the runtime returns them.

Attribute strings are read as the runtime reads them: integer lists are comma separated
(``"2, 2"`` as ``openvino.save_model`` writes them, or ``"2,2"``); ``rounding_type``,
``auto_pad``, ``index_element_type`` and the ``exclude-pad`` boolean (``true``/``false``/``1``/
``0``) are case-insensitive.  Missing optional attributes take the runtime's defaults:
``rounding_type="floor"``, ``auto_pad="explicit"``, zero pads, unit dilations,
``index_element_type="i64"``, ``axis=0`` and, as the runtime does when the attribute is absent,
``exclude-pad="true"``.  Attributes the runtime would silently ignore (unknown names,
``dilations`` on MaxPool-1 and before AvgPool-16, ``ceil_torch`` before version 14) are
refused here.
"""

from jaxpool._src.interop.openvino import Layer as Layer
from jaxpool._src.interop.openvino import layer as layer

__all__ = ["Layer", "layer"]
