"""OpenVINO IR pooling layers as jaxpool callables.

This module only turns IR text into arguments: it parses a ``<layer>`` element (or a type name
and its ``<data>`` attributes) with the standard library and binds them to
:func:`jaxpool.max_pool`, :func:`jaxpool.avg_pool`, :func:`jaxpool.adaptive_max_pool`,
:func:`jaxpool.adaptive_avg_pool`, :func:`jaxpool.roi_pool`, :func:`jaxpool.roi_align`,
:func:`jaxpool.roi_align_rotated` or :func:`jaxpool.psroi_pool`.  It does not import the
OpenVINO runtime.

Attribute strings are read as the runtime reads them: integer lists are comma separated
(``"2, 2"`` as ``openvino.save_model`` writes them, or ``"2,2"``); ``rounding_type``,
``auto_pad``, ``index_element_type`` and the ``exclude-pad`` boolean (``true``/``false``/``1``/
``0``) are case-insensitive.  Missing optional attributes take the runtime's defaults:
``rounding_type="floor"``, ``auto_pad="explicit"``, zero pads, unit dilations,
``index_element_type="i64"``, ``axis=0`` and, as the runtime does when the attribute is absent,
``exclude-pad="true"``.  Attributes the runtime would silently ignore (unknown names,
``dilations`` on MaxPool-1, ``ceil_torch`` before version 14) are refused here.
"""

from jaxpool._src.interop.openvino import Layer as Layer
from jaxpool._src.interop.openvino import layer as layer

__all__ = ["Layer", "layer"]
