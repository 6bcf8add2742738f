"""The implementation of :mod:`jaxpool.openvino`, whose docstring states the rules: OpenVINO IR
layers bound to jaxpool functions through one table, :data:`BINDERS` (a layer's type, version
and attributes are read from its XML or type name by :mod:`.openvino_ir`)."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, cast

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import indices as indices_lib
from jaxpool._src import window as window_lib
from jaxpool._src.adaptive_avg_pool import adaptive_avg_pool
from jaxpool._src.adaptive_max_pool import adaptive_max_pool
from jaxpool._src.avg_pool import avg_pool
from jaxpool._src.deformable_psroi_pool import MODES as DEFORMABLE_MODES
from jaxpool._src.deformable_psroi_pool import deformable_psroi_pool
from jaxpool._src.interop import openvino_ir
from jaxpool._src.interop.bound import Arguments, Bound
from jaxpool._src.interop.ir_values import INT_LIST_RE, INT_RE, IRAttributes, integer
from jaxpool._src.max_pool import max_pool
from jaxpool._src.multilevel_roi_align import multilevel_roi_align
from jaxpool._src.psroi_pool import MODES as PSROI_MODES
from jaxpool._src.psroi_pool import psroi_pool
from jaxpool._src.roi import ALIGNED_MODES
from jaxpool._src.roi_align import MODES as ROI_ALIGN_MODES
from jaxpool._src.roi_align import roi_align
from jaxpool._src.roi_align_rotated import roi_align_rotated
from jaxpool._src.roi_pool import METHODS as ROI_POOL_METHODS
from jaxpool._src.roi_pool import roi_pool


class Layer(Bound):
    """A layer of an OpenVINO IR, bound to the jaxpool function that computes it.

    Call it with the layer's inputs in the IR's order and NCX layout (``layer(x)`` for MaxPool,
    ``layer(x, output_size)`` for the adaptive pools, with a concrete ``output_size``: it
    decides the output shape); :mod:`jaxpool.openvino` lists each layer's inputs and outputs.
    """


class Binder(NamedTuple):
    """How one version of a layer is bound: the ``<data>`` attributes it has, and the function
    from those (read by :class:`IRAttributes`) to the :class:`Layer`."""

    attributes: tuple[str, ...]
    bind: Callable[[IRAttributes], Bound]


# --------------------------------------------------------------------------------------------
# The binders.
# --------------------------------------------------------------------------------------------

_SLIDING = ("strides", "pads_begin", "pads_end", "kernel", "rounding_type", "auto_pad")
_INDICES = ("index_element_type", "axis")


def _sliding(a: IRAttributes) -> Arguments:
    a.require("kernel", "strides")
    lists = tuple(
        (name, a.ints(name, 1 if name in ("kernel", "strides") else 0))
        for name in ("kernel", "strides", "pads_begin", "pads_end")
    )
    # ceil_torch came with MaxPool-14 and AvgPool-14.
    rounding_types = window_lib.ROUNDING_TYPES if a.version >= 14 else window_lib.ROUNDING_TYPES[:2]
    hint = "" if a.version >= 14 else " ('ceil_torch' needs version 14)"
    rounding_type = a.word("rounding_type", rounding_types, "floor", hint)
    auto_pad = a.word("auto_pad", window_lib.AUTO_PADS, "explicit")
    return (*lists, ("rounding_type", rounding_type), ("auto_pad", auto_pad))


def _index_type(a: IRAttributes) -> str:
    return a.word("index_element_type", indices_lib.IR_INDEX_TYPES, "i64")


def _max_pool(a: IRAttributes) -> Bound:
    arguments = _sliding(a)
    if a.version == 1:
        return a.bind(max_pool, arguments)
    axis = a.text("axis", "0")
    if not INT_RE.match(axis):
        raise ValueError(f"`axis` (={axis!r}) must be an integer, such as '0' or '2'.")
    indices = (("return_indices", True), ("index_element_type", _index_type(a)))
    arguments += (("dilations", a.ints("dilations", 1)), *indices, ("axis", int(axis)))
    return a.bind(max_pool, arguments, outputs=2)


def _avg_pool(a: IRAttributes) -> Bound:
    arguments = (*_sliding(a), ("exclude_pad", a.boolean("exclude-pad", "true")))
    if a.version >= 16:
        arguments += (("dilations", a.ints("dilations", 1)),)
    return a.bind(avg_pool, arguments)


def _adaptive(op: Bound, x: Any, output_size: Any) -> Any:
    """Calls an adaptive pool: ``output_size``, a concrete 1-D array or sequence, decides the
    output shape."""
    if isinstance(output_size, jax.Array) and not isinstance(output_size, jax.core.Tracer):
        output_size = np.asarray(output_size)
    if isinstance(output_size, np.ndarray) and output_size.ndim != 1:
        raise ValueError(
            f"`output_size` of {op.name} must be a 1-D array of one size per spatial axis, "
            f"got shape {output_size.shape}."
        )
    return op.fn(x, output_size, **op.kwargs)


def _adaptive_max_pool(a: IRAttributes) -> Bound:
    arguments = (("return_indices", True), ("index_element_type", _index_type(a)))
    return a.bind(
        adaptive_max_pool, arguments, inputs=("x", "output_size"), outputs=2, call=_adaptive
    )


def _adaptive_avg_pool(a: IRAttributes) -> Bound:
    return a.bind(adaptive_avg_pool, inputs=("x", "output_size"), call=_adaptive)


def _roi_pooling(a: IRAttributes) -> Bound:
    # The runtime saves the output size three times: pooled_h/pooled_w, output_size and
    # output_roi.  Any of them will do; those given must agree.
    sizes: dict[str, tuple[int, ...]] = {}
    if "pooled_h" in a or "pooled_w" in a:
        sizes["pooled_h, pooled_w"] = (a.integer("pooled_h", 1, ""), a.integer("pooled_w", 1, ""))
    for name in ("output_size", "output_roi"):
        if name in a:
            text = a.values[name]
            if not INT_LIST_RE.match(text) or len(text.split(",")) != 2:
                raise ValueError(f"`{name}` (={text!r}) of {a.where} must be two integers.")
            sizes[name] = tuple(integer(name, v, 1) for v in text.split(","))
    if not sizes:
        raise ValueError(
            f"{a.where} needs its output size: `pooled_h` and `pooled_w`, or `output_size`."
        )
    if len(set(sizes.values())) > 1:
        raise ValueError(f"The output sizes of {a.where} disagree: {sizes}.")
    arguments = (
        ("output_size", next(iter(sizes.values()))),
        ("spatial_scale", a.number("spatial_scale")),
        ("method", a.word("method", ROI_POOL_METHODS, "max")),
    )
    return a.bind(roi_pool, arguments, inputs=("x", "rois"))


def _pooled(a: IRAttributes) -> Arguments:
    """The output size, scale and sampling ratio that ROIAlign and ROIAlignRotated share."""
    return (
        ("output_size", (a.integer("pooled_h", 1), a.integer("pooled_w", 1))),
        ("spatial_scale", a.number("spatial_scale")),
        ("sampling_ratio", a.integer("sampling_ratio", 0)),
    )


def _roi_align(a: IRAttributes) -> Bound:
    arguments = (
        *_pooled(a),
        ("mode", a.word("mode", ROI_ALIGN_MODES, None)),
        ("aligned_mode", a.word("aligned_mode", ALIGNED_MODES, "asymmetric")),
    )
    return a.bind(roi_align, arguments, inputs=("x", "rois", "batch_indices"))


def _roi_align_rotated(a: IRAttributes) -> Bound:
    arguments = (*_pooled(a), ("clockwise", a.boolean("clockwise_mode", "false")))
    return a.bind(roi_align_rotated, arguments, inputs=("x", "rois", "batch_indices"))


def _psroi_pooling(a: IRAttributes) -> Bound:
    bins = (a.integer("spatial_bins_y", 1, "1"), a.integer("spatial_bins_x", 1, "1"))
    arguments = (
        ("output_dim", a.integer("output_dim", 1)),
        ("group_size", a.integer("group_size", 1)),
        ("spatial_scale", a.number("spatial_scale")),
        ("mode", a.word("mode", PSROI_MODES, "average")),
        ("spatial_bins", bins),
    )
    return a.bind(psroi_pool, arguments, inputs=("x", "rois"))


def _deformable_psroi_pooling(a: IRAttributes) -> Bound:
    a.word("mode", DEFORMABLE_MODES, DEFORMABLE_MODES[0])
    bins = (a.integer("spatial_bins_y", 1, "1"), a.integer("spatial_bins_x", 1, "1"))
    arguments = (
        ("output_dim", a.integer("output_dim", 1)),
        ("group_size", a.integer("group_size", 1, "1")),
        ("spatial_scale", a.number("spatial_scale")),
        ("spatial_bins", bins),
        ("trans_std", a.number("trans_std", "1")),
        ("part_size", a.integer("part_size", 1, "1")),
    )
    return a.bind(deformable_psroi_pool, arguments, inputs=("x", "rois", "offsets"), optional=1)


def _pyramid(op: Bound, rois: Any, *levels: Any) -> tuple[jax.Array, jax.Array]:
    """Calls ExperimentalDetectronROIFeatureExtractor: the maps hold one image each, and the
    second output is the input ``rois``, unchanged (as the runtime returns it)."""
    rois = jnp.asarray(rois)
    batch_indices = jnp.zeros(rois.shape[:1], jnp.int32)
    return op.fn(levels, rois, batch_indices, **op.kwargs), rois


def _roi_feature_extractor(a: IRAttributes) -> Bound:
    a.require("pyramid_scales")
    strides = a.ints("pyramid_scales", 1) or ()
    arguments = (
        ("output_size", a.integer("output_size", 1)),
        ("spatial_scales", tuple(1 / s for s in strides)),
        ("sampling_ratio", a.integer("sampling_ratio", 0)),
        ("aligned_mode", "half_pixel_for_nn" if a.boolean("aligned", "false") else "asymmetric"),
        ("level_rule", "openvino"),
    )
    levels = tuple(f"level_{i}" for i in range(len(strides)))
    return a.bind(
        multilevel_roi_align, arguments, inputs=("rois", *levels), outputs=2, call=_pyramid
    )


# --------------------------------------------------------------------------------------------
# The table: {type: {version: binder}}.  The versions are those of the operation (MaxPool-8 is
# opset8's to opset13's); a bare type name means the newest.
# --------------------------------------------------------------------------------------------

_MAX_POOL = Binder((*_SLIDING, "dilations", *_INDICES), _max_pool)
_AVG_POOL = Binder((*_SLIDING, "exclude-pad"), _avg_pool)
_ROI_POOLING = Binder(
    ("output_size", "output_roi", "pooled_h", "pooled_w", "spatial_scale", "method"), _roi_pooling
)
_ROI_ALIGN = ("pooled_h", "pooled_w", "sampling_ratio", "spatial_scale", "mode")
_PSROI_POOLING = (
    "output_dim",
    "group_size",
    "spatial_scale",
    "spatial_bins_x",
    "spatial_bins_y",
    "mode",
)
_EXTRACTOR = ("output_size", "sampling_ratio", "pyramid_scales", "aligned")

BINDERS: dict[str, dict[int, Binder]] = {
    "MaxPool": {1: Binder(_SLIDING, _max_pool), 8: _MAX_POOL, 14: _MAX_POOL},
    "AvgPool": {
        1: _AVG_POOL,
        14: _AVG_POOL,
        16: Binder((*_AVG_POOL.attributes, "dilations"), _avg_pool),
    },
    "AdaptiveMaxPool": {8: Binder(("index_element_type",), _adaptive_max_pool)},
    "AdaptiveAvgPool": {8: Binder((), _adaptive_avg_pool)},
    "ROIPooling": {1: _ROI_POOLING, 2: _ROI_POOLING},
    "ROIAlign": {
        3: Binder(_ROI_ALIGN, _roi_align),
        9: Binder((*_ROI_ALIGN, "aligned_mode"), _roi_align),
    },
    "ROIAlignRotated": {
        15: Binder((*_ROI_ALIGN[:-1], "clockwise_mode"), _roi_align_rotated),
    },
    "PSROIPooling": {1: Binder(_PSROI_POOLING, _psroi_pooling)},
    "DeformablePSROIPooling": {
        1: Binder((*_PSROI_POOLING, "trans_std", "part_size"), _deformable_psroi_pooling)
    },
    "ExperimentalDetectronROIFeatureExtractor": {6: Binder(_EXTRACTOR, _roi_feature_extractor)},
}

# Hints for an attribute that the version does not have: {(name, type): hint}.
_HINTS = {
    ("exclude_pad", "AvgPool"): " (IR spells it `exclude-pad`)",
    ("dilations", "MaxPool"): " (dilations need MaxPool-8 or later)",
    ("dilations", "AvgPool"): " (dilations need AvgPool-16)",
    ("index_element_type", "MaxPool"): " (indices need MaxPool-8 or later)",
    ("axis", "MaxPool"): " (indices need MaxPool-8 or later)",
}


def layer(
    xml_or_type: str | ElementTree.Element,
    attrs: Mapping[str, str] | None = None,
    *,
    index_element_type: Any = None,
) -> Layer:
    """Builds the jaxpool callable of an OpenVINO IR layer.

    Two forms: a ``<layer type="MaxPool" version="opset8">`` element, as text or parsed (its
    ``<data>`` attributes are the layer's; ports are not needed), or a type name with an
    optional version suffix and the attributes as IR strings.  ``version="opsetN"`` selects the
    version that opset ``N`` defines (MaxPool-8 for ``opset8`` to ``opset13``); a bare type
    name means the newest.  :mod:`jaxpool.openvino` lists the layers and their calls.

    Args:
      xml_or_type: ``<layer>`` XML text (or element), or a type name such as ``"MaxPool"``,
        optionally with ``-<version>`` (``"MaxPool-8"``).
      attrs: with a type name, the ``<data>`` attributes as IR strings, e.g.
        ``{"kernel": "2, 2", "strides": "2,2", "exclude-pad": "true"}``.  Must be ``None``
        with XML.
      index_element_type: overrides the layer's ``index_element_type`` (MaxPool-8/-14 and
        AdaptiveMaxPool-8 only): an IR that ``openvino.save_model`` wrote carries ``"i64"``,
        which needs ``jax_enable_x64``; ``"i32"`` runs without it.  Any value
        :func:`jaxpool.max_pool` takes.

    Returns:
      A :class:`Layer`, called with the layer's inputs in NCX layout.

    Raises:
      ValueError: for malformed XML, an unknown type, version or opset, an unknown, missing
        or malformed attribute, or a value that the version does not allow.
      TypeError: for ``attrs`` with XML, or attribute values that are not strings.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpool import openvino
      >>> pool = openvino.layer(
      ...     '<layer id="3" type="MaxPool" version="opset8"><data kernel="2, 2" '
      ...     'strides="2, 2" pads_begin="0, 0" pads_end="0, 0" axis="2" '
      ...     'index_element_type="i32"/></layer>')
      >>> y, i = pool(jnp.arange(16.0).reshape(1, 1, 4, 4))
      >>> y[0, 0].tolist(), i[0, 0].tolist()
      ([[5.0, 7.0], [13.0, 15.0]], [[5, 7], [13, 15]])
      >>> avg = openvino.layer("AvgPool-1", {"kernel": "2,2", "strides": "1,1",
      ...                                    "exclude-pad": "false"})
      >>> avg.function, avg.kwargs["exclude_pad"], avg(jnp.ones((1, 1, 3, 3))).shape
      ('avg_pool', False, (1, 1, 2, 2))
    """
    op_type, version, values = openvino_ir.read_layer(xml_or_type, attrs, BINDERS)
    bound = _bind(op_type, version, values)
    if index_element_type is None:
        return bound
    arguments = bound.kwargs
    if "index_element_type" not in arguments:
        raise ValueError(
            f"`index_element_type` (={index_element_type!r}) applies to layers with indices "
            f"(MaxPool-8/-14, AdaptiveMaxPool-8), not to {bound.name}."
        )
    arguments["index_element_type"] = index_element_type
    return dataclasses.replace(bound, arguments=tuple(arguments.items()))


def _bind(op_type: str, version: int, values: dict[str, str]) -> Layer:
    binder = BINDERS[op_type][version]
    for name in values:
        if name not in binder.attributes:
            known = binder.attributes
            allowed = f"its attributes are {list(known)}" if known else "it has no attributes"
            raise ValueError(
                f"`{name}` is not an attribute of {op_type}-{version}"
                f"{_HINTS.get((name, op_type), '')}; {allowed}."
            )
    return cast(Layer, binder.bind(IRAttributes(Layer, op_type, version, values)))
