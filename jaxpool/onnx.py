"""ONNX pooling nodes as jaxpool callables, and jaxpool's ops exported as ONNX nodes.

Reading (:func:`node`) needs no ``onnx`` package; exporting (:func:`export`,
:func:`register_export`) needs jax2onnx (``pip install "jaxpool[export]"``), imported on
first use.

Reading.  This module only turns a node's attributes into arguments: it reads an ONNX ``NodeProto``
through its fields (``op_type``, ``domain``, ``attribute``, ``input``, ``output``) and binds
them to a jaxpool function.  It does not import the ``onnx`` package, which is needed only to
build a node (``onnx.helper.make_node``) or to read a model.  The nodes and their calls:

* ``MaxPool``: ``max_pool(x, ...)``, ``Y`` or ``(Y, Indices)``; ``AveragePool``:
  ``avg_pool(x, ..., exclude_pad=...)``; ``LpPool``: ``lp_pool(x, ..., p=p)``;
* ``GlobalMaxPool``: ``adaptive_max_pool(x, 1)``; ``GlobalAveragePool``:
  ``adaptive_avg_pool(x, 1)``; ``GlobalLpPool``: ``lp_pool(x, x.shape[2:], 1, p=p)``;
* ``MaxUnpool``: ``max_unpool(x, indices, ..., axis=0)``;
* ``MaxRoiPool``: ``roi_pool(x, rois, pooled_shape, ...)``; ``RoiAlign``: ``roi_align(x,
  rois, batch_indices, ...)``.

Where an attribute is absent, ONNX's default applies: unit strides and dilations, zero pads,
``auto_pad="NOTSET"``, ``ceil_mode=0``, ``count_include_pad=0``, ``storage_order=0``, ``p=2``.
ONNX's semantics, where they are not jaxpool's defaults:

* ``ceil_mode=1`` is ``rounding_type="ceil_torch"``: a last window that would start in the
  end padding is dropped (the specification says so, and ONNX Runtime does it).
* ``pads`` are ``[x1_begin, x2_begin, ..., x1_end, x2_end]``.
* ``SAME_UPPER``/``SAME_LOWER`` pad the dilated kernel to ``ceil(L / stride)`` outputs, as the
  specification's formula does (ONNX Runtime pads the undilated kernel there).
* ``AveragePool`` with ``count_include_pad=1`` divides by the number of taps inside the padded
  input: where a ``ceil_mode`` window reaches past the end padding this is fewer than the
  kernel size that OpenVINO (and :func:`jaxpool.avg_pool`) divides by, so those nodes pool an
  explicitly zero-padded input with ``exclude_pad=True``.
* ``MaxPool``'s ``Indices`` are flat NCX positions (``axis=0``), int64 as ONNX has them: they
  need ``jax_enable_x64``, or ``index_element_type="i32"``.  With ``storage_order=1`` the
  spatial part of an index is column-major.
* ``MaxUnpool`` scatters into the shape its attributes infer, ``(in - 1) * strides - pads_begin
  - pads_end + kernel_shape``, and places that at the start of ``output_shape`` where the node
  has that input, as ONNX's reference does; a position named twice keeps the larger value.
* ``GlobalLpPool`` is an ``LpPool`` whose kernel is the whole spatial extent.
* ``RoiAlign``'s ``coordinate_transformation_mode="half_pixel"`` (the default since RoiAlign-16;
  before, the default is ``"output_half_pixel"``: pass ``opset``) is
  ``aligned_mode="half_pixel_for_nn"``, ``"output_half_pixel"`` is ``"asymmetric"``.  Its
  ``mode="max"`` is ONNX Runtime's (and ONNX's reference's): the largest weighted bilinear
  term ``w_k * x_k`` of a bin's samples, starting from the first sample, not
  ``roi_align(..., mode="max")``'s largest sample starting from 0.
* ``MaxRoiPool`` is ``roi_pool(..., method="max")``: boxes rounded to elements, as Caffe's.

Attributes the node does not define for its operation are refused with a ``ValueError``,
as are unknown operations and domains.

Exporting.  :func:`export` (or ``jax2onnx.to_onnx`` after :func:`register_export`) turns each
call of a jaxpool op into its node, with the attributes the reading above maps back to the
same call, so an exported node read by :func:`node` computes the op again:

* ``max_pool``: ``MaxPool`` (``Indices`` with ``return_indices``; ``axis`` > 0 takes them
  modulo the counted dimensions with ``Mod``); ``avg_pool``: ``AveragePool``
  (``count_include_pad=1`` where pads are in force and ``exclude_pad=False``); ``lp_pool``:
  ``LpPool`` (an integer ``p``).  Pads are explicit (``auto_pad`` resolved); ``ceil_mode=1``
  stands for ``rounding_type`` ``"ceil"``/``"ceil_torch"`` where it gives the same windows,
  and where ``avg_pool``'s divisor is the whole kernel past ``pads_end``, the end pads grow to
  hold those windows instead.
* ``adaptive_max_pool``/``adaptive_avg_pool``: ``GlobalMaxPool``/``GlobalAveragePool`` to an
  output of 1, ``MaxPool``/``AveragePool`` where the bins of every axis are one sliding
  window, and otherwise, per axis, a ``Gather`` of each bin's elements reduced by
  ``ReduceMax`` (indices: ``ArgMax``, whose first maximum is the tie rule) or summed
  (``Where`` masks a shorter bin's repeats) and divided by the bin sizes.
* ``max_unpool``: ``MaxUnpool`` with its ``output_shape`` input for ``combine="max"`` (its
  attributes chosen so that the shape it infers is ``output_shape``), ``ScatterElements``
  with ``reduction="add"`` for ``combine="sum"``; indices of ``axis`` 1 or 2 get their
  planes' offsets added.
* ``roi_pool(method="max")``: ``MaxRoiPool``; ``roi_align(mode="avg")``: ``RoiAlign`` with
  ``coordinate_transformation_mode`` ``"half_pixel"`` (``aligned_mode="half_pixel_for_nn"``,
  and ``"half_pixel"`` with the boxes shifted by 0.5) or ``"output_half_pixel"``
  (``"asymmetric"``), ``batch_indices`` cast to int64.  A ``RoiAlign`` node with
  ``mode="max"`` read by :func:`node` exports as itself.
* NXC inputs are transposed to NCX before the node and back after it; types a node lacks are
  cast to one that holds every value (``MaxPool`` of int16/int32/bfloat16 in float32 or
  float64, averages of 16-bit floats in float32 as jaxpool accumulates them, of int8/uint8 in
  float32 followed by ``Round``).
* Under :func:`jax.vmap` (an Equinox model's batch), the window ops and ``max_unpool`` pool
  the mapped axis as part of their batch axis, one node for the batch (flat indices stay the
  example's); the ROI ops are exported once per example.

Refused with a ``ValueError`` that names the op and what ONNX lacks: ``roi_align_rotated``,
``psroi_pool``, ``psroi_align``, ``deformable_psroi_pool``, ``multilevel_roi_align``,
``fractional_max_pool`` (no ONNX node); ``roi_align(mode="max")`` (ONNX's max is another
reduction); ``roi_pool(method="bilinear")``; ``avg_pool``'s ``divisor_override``; a
non-integer ``p``; ``max_unpool(combine="torch")``; windows holding no input element, and
pads as large as the kernel (ONNX Runtime refuses both); types with no exact ONNX
counterpart (int64 maxima, averages of integers wider than 8 bits).  ONNX Runtime's
``MaxPool`` skips NaN where jaxpool propagates it.
"""

from jaxpool._src.interop.onnx import Node as Node
from jaxpool._src.interop.onnx import export as export
from jaxpool._src.interop.onnx import export_table as export_table
from jaxpool._src.interop.onnx import node as node
from jaxpool._src.interop.onnx import register_export as register_export

__all__ = ["Node", "export", "export_table", "node", "register_export"]
