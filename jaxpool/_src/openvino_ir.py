"""The implementation of :mod:`jaxpool.openvino`, whose docstring states the rules."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from jaxpool._src import ir_values, openvino_roi

# Versions of each operation, and the opsets that introduced them.
_VERSIONS = {
    "MaxPool": (1, 8, 14),
    "AvgPool": (1, 14),
    "AdaptiveMaxPool": (8,),
    "AdaptiveAvgPool": (8,),
    "ROIPooling": (1, 2),
    "ROIAlign": (3, 9),
    "ROIAlignRotated": (15,),
    "PSROIPooling": (1,),
}
_NEWEST_OPSET = 16  # openvino.opset16 is the newest opset that defines these operations

_INT_LISTS = {"kernel": 1, "strides": 1, "dilations": 1, "pads_begin": 0, "pads_end": 0}
_SLIDING = ("strides", "pads_begin", "pads_end", "kernel", "rounding_type", "auto_pad")
_ATTRIBUTES = {
    ("MaxPool", 1): _SLIDING,
    ("MaxPool", 8): (*_SLIDING, "dilations", "index_element_type", "axis"),
    ("MaxPool", 14): (*_SLIDING, "dilations", "index_element_type", "axis"),
    ("AvgPool", 1): (*_SLIDING, "exclude-pad"),
    ("AvgPool", 14): (*_SLIDING, "exclude-pad"),
    ("AdaptiveMaxPool", 8): ("index_element_type",),
    ("AdaptiveAvgPool", 8): (),
    ("ROIPooling", 1): (
        "output_size",
        "output_roi",
        "pooled_h",
        "pooled_w",
        "spatial_scale",
        "method",
    ),
    ("ROIPooling", 2): (
        "output_size",
        "output_roi",
        "pooled_h",
        "pooled_w",
        "spatial_scale",
        "method",
    ),
    ("ROIAlign", 3): ("pooled_h", "pooled_w", "sampling_ratio", "spatial_scale", "mode"),
    ("ROIAlign", 9): (
        "pooled_h",
        "pooled_w",
        "sampling_ratio",
        "spatial_scale",
        "mode",
        "aligned_mode",
    ),
    ("ROIAlignRotated", 15): (
        "pooled_h",
        "pooled_w",
        "sampling_ratio",
        "spatial_scale",
        "clockwise_mode",
    ),
    ("PSROIPooling", 1): (
        "output_dim",
        "group_size",
        "spatial_scale",
        "spatial_bins_x",
        "spatial_bins_y",
        "mode",
    ),
}
# The ROI layers: their inputs, in the IR's order.
_ROI_INPUTS = {
    "ROIPooling": ("x", "rois"),
    "ROIAlign": ("x", "rois", "batch_indices"),
    "ROIAlignRotated": ("x", "rois", "batch_indices"),
    "PSROIPooling": ("x", "rois"),
}
_REQUIRED = ("kernel", "strides")
_AUTO_PADS = ("explicit", "valid", "same_upper", "same_lower")
_TYPE_RE = re.compile(r"^([A-Za-z]+)(?:-(\d+))?$")
_OPSET_RE = re.compile(r"^opset(\d+)$")


@dataclasses.dataclass(frozen=True)
class Layer:
    """A pooling layer of an OpenVINO IR, bound to the jaxpool function that computes it.

    Call it with the layer's inputs, in the IR's NCX layout: ``layer(x)`` for MaxPool and
    AvgPool, ``layer(x, output_size)`` for the adaptive pools, where ``output_size`` is a
    concrete array or sequence (it decides the output shape), ``layer(x, rois)`` for
    ROIPooling and PSROIPooling, ``layer(x, rois, batch_indices)`` for ROIAlign and
    ROIAlignRotated.  It returns one array, or
    ``(values, indices)`` for MaxPool-8/-14 and AdaptiveMaxPool-8.

    Attributes:
      type: the IR type name, e.g. ``"MaxPool"``.
      version: the operation version, e.g. ``8`` for MaxPool-8.
      function: the name of the jaxpool function, e.g. ``"max_pool"``.
      arguments: the keyword arguments passed to it, as ``(name, value)`` pairs.
    """

    type: str
    version: int
    function: str
    arguments: tuple[tuple[str, Any], ...]

    @property
    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :attr:`function`, as a dict."""
        return dict(self.arguments)

    @property
    def num_inputs(self) -> int:
        if self.type in _ROI_INPUTS:
            return len(_ROI_INPUTS[self.type])
        return 2 if self.type.startswith("Adaptive") else 1

    def __call__(self, *inputs: Any) -> jax.Array | tuple[jax.Array, jax.Array]:
        import jaxpool

        name = f"{self.type}-{self.version}"
        if len(inputs) != self.num_inputs:
            expected = "`x` and `output_size`" if self.num_inputs == 2 else "`x`"
            if self.type in _ROI_INPUTS:
                expected = ", ".join(f"`{n}`" for n in _ROI_INPUTS[self.type])
            raise TypeError(
                f"{name} takes {self.num_inputs} input(s) ({expected}), got {len(inputs)}."
            )
        fn = getattr(jaxpool, self.function)
        if self.type in _ROI_INPUTS:
            return fn(*inputs, **self.kwargs)
        if self.num_inputs == 1:
            return fn(inputs[0], **self.kwargs)
        x, output_size = inputs
        if isinstance(output_size, jax.Array) and not isinstance(output_size, jax.core.Tracer):
            output_size = np.asarray(output_size)
        if isinstance(output_size, np.ndarray) and output_size.ndim != 1:
            raise ValueError(
                f"`output_size` of {name} must be a 1-D array of one size per spatial axis, "
                f"got shape {output_size.shape}."
            )
        return fn(x, output_size, **self.kwargs)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments)
        return f"<{self.type}-{self.version}: jaxpool.{self.function}({args})>"


def layer(
    xml_or_type: str | ElementTree.Element,
    attrs: Mapping[str, str] | None = None,
    *,
    index_element_type: Any = None,
) -> Layer:
    """Builds the jaxpool callable of an OpenVINO IR pooling layer.

    Two forms: the text of a ``<layer type="MaxPool" version="opset8">`` element (its
    ``<data>`` attributes are the layer's attributes; the ``<input>``/``<output>`` ports are
    not needed), or a type name with an optional version suffix and the attributes as IR
    strings.  ``version="opsetN"`` selects the version that opset ``N`` defines (MaxPool-8 for
    ``opset8`` to ``opset13``); a bare ``"MaxPool"`` or ``"AvgPool"`` means version 14, the
    newest.  An already parsed :class:`xml.etree.ElementTree.Element` is accepted too.

    ===================  ====================================  ===========================
    IR layer             jaxpool call                          result
    ===================  ====================================  ===========================
    MaxPool-1            ``max_pool(x, ...)``                  values
    MaxPool-8, -14       ``max_pool(x, ..., return_indices)``  ``(values, indices)``
    AvgPool-1, -14       ``avg_pool(x, ...)``                  values
    AdaptiveMaxPool-8    ``adaptive_max_pool(x, size, ...)``   ``(values, indices)``
    AdaptiveAvgPool-8    ``adaptive_avg_pool(x, size)``        values
    ROIPooling-1, -2     ``roi_pool(x, rois, ...)``            values
    ROIAlign-3, -9       ``roi_align(x, rois, batch, ...)``    values
    ROIAlignRotated-15   ``roi_align_rotated(x, rois, ...)``   values
    PSROIPooling-1       ``psroi_pool(x, rois, ...)``          values
    ===================  ====================================  ===========================

    Args:
      xml_or_type: ``<layer>`` XML text (or element), or a type name: ``"MaxPool"``,
        ``"AvgPool"``, ``"AdaptiveMaxPool"``, ``"AdaptiveAvgPool"``, ``"ROIPooling"``,
        ``"ROIAlign"``, ``"ROIAlignRotated"``, ``"PSROIPooling"``, optionally with
        ``-<version>`` (``"MaxPool-8"``).
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
    if isinstance(xml_or_type, ElementTree.Element) or (
        isinstance(xml_or_type, (str, bytes)) and xml_or_type.lstrip()[:1] in ("<", b"<")
    ):
        if attrs is not None:
            raise TypeError(
                f"`attrs` must be None when `xml_or_type` is a <layer> element (its <data> "
                f"holds the attributes), got {attrs!r}."
            )
        op_type, version, attrs = _parse_xml(xml_or_type)
    elif isinstance(xml_or_type, str):
        op_type, version = _parse_type_name(xml_or_type)
        if attrs is None:
            attrs = {}
        if not isinstance(attrs, Mapping):
            raise TypeError(
                f"`attrs` must be a mapping of attribute names to IR strings, got {attrs!r}."
            )
        attrs = dict(attrs)
        for key, value in attrs.items():
            if not isinstance(value, str):
                raise TypeError(
                    f"`attrs[{key!r}]` must be an IR string (such as '2, 2' or 'true'), "
                    f"got {value!r} of type {type(value).__name__}."
                )
    else:
        raise TypeError(
            f"`xml_or_type` must be <layer> XML text or a type name such as 'MaxPool-8', "
            f"got {xml_or_type!r} of type {type(xml_or_type).__name__}."
        )
    bound = _bind(op_type, version, attrs)
    if index_element_type is None:
        return bound
    arguments = dict(bound.arguments)
    if "index_element_type" not in arguments:
        raise ValueError(
            f"`index_element_type` (={index_element_type!r}) applies to layers with indices "
            f"(MaxPool-8/-14, AdaptiveMaxPool-8), not to {op_type}-{version}."
        )
    arguments["index_element_type"] = index_element_type
    return dataclasses.replace(bound, arguments=tuple(arguments.items()))


# --------------------------------------------------------------------------------------------
# Type, version and XML.
# --------------------------------------------------------------------------------------------


def _check_type(op_type: str, given: Any) -> None:
    if op_type not in _VERSIONS:
        raise ValueError(
            f"`xml_or_type` names the layer type {given!r}; jaxpool.openvino knows "
            f"{sorted(_VERSIONS)}."
        )


def _parse_type_name(name: str) -> tuple[str, int]:
    match = _TYPE_RE.match(name.strip())
    if match is None:
        raise ValueError(
            f"`xml_or_type` (={name!r}) must be a type name with an optional version suffix, "
            f"such as 'MaxPool' or 'MaxPool-8'."
        )
    op_type, suffix = match.groups()
    _check_type(op_type, name)
    versions = _VERSIONS[op_type]
    if suffix is None:
        return op_type, versions[-1]
    version = int(suffix)
    if version not in versions:
        raise ValueError(
            f"`xml_or_type` (={name!r}) asks for {op_type}-{version}; {op_type} has the "
            f"versions {list(versions)}."
        )
    return op_type, version


def _version_in_opset(op_type: str, opset: str) -> int:
    match = _OPSET_RE.match(opset)
    if match is None:
        raise ValueError(
            f"`version` (={opset!r}) of the {op_type} layer must be 'opsetN' (opset1 to "
            f"opset{_NEWEST_OPSET})."
        )
    number = int(match.group(1))
    if not 1 <= number <= _NEWEST_OPSET:
        raise ValueError(
            f"`version` (={opset!r}) of the {op_type} layer names an unknown opset; "
            f"jaxpool.openvino knows opset1 to opset{_NEWEST_OPSET}."
        )
    versions = [v for v in _VERSIONS[op_type] if v <= number]
    if not versions:
        raise ValueError(
            f"`version` (={opset!r}) predates {op_type}, which opset{_VERSIONS[op_type][0]} "
            f"introduced."
        )
    return versions[-1]


def _parse_xml(xml: str | bytes | ElementTree.Element) -> tuple[str, int, dict[str, str]]:
    if isinstance(xml, ElementTree.Element):
        element = xml
    else:
        try:
            element = ElementTree.fromstring(xml)
        except ElementTree.ParseError as error:
            shown: str | bytes = xml
            if len(xml) > 80:
                shown = xml[:77] + "..." if isinstance(xml, str) else xml[:77] + b"..."
            raise ValueError(
                f"`xml_or_type` (={shown!r}) is not well-formed XML: {error}."
            ) from None
    if element.tag != "layer":
        raise ValueError(f"`xml_or_type` must be a <layer> element, got a <{element.tag}> element.")
    op_type = element.get("type")
    if op_type is None:
        raise ValueError("`xml_or_type` is a <layer> element without a `type` attribute.")
    _check_type(op_type, op_type)
    opset = element.get("version")
    if opset is None:
        raise ValueError(
            f"`xml_or_type` is a {op_type} <layer> without a `version` attribute "
            f'(such as version="opset8").'
        )
    version = _version_in_opset(op_type, opset)
    data = element.findall("data")
    if len(data) > 1:
        raise ValueError(f"`xml_or_type` is a {op_type} <layer> with {len(data)} <data> elements.")
    attrs = dict(data[0].attrib) if data else {}
    return op_type, version, attrs


def _bind(op_type: str, version: int, attrs: dict[str, str]) -> Layer:
    where = f"{op_type}-{version}"
    known = _ATTRIBUTES[(op_type, version)]
    for name in attrs:
        if name not in known:
            hint = ""
            if name == "exclude_pad" and "exclude-pad" in known:
                hint = " (IR spells it `exclude-pad`)"
            elif name == "dilations" and op_type == "MaxPool":
                hint = " (dilations need MaxPool-8 or later)"
            elif name in ("index_element_type", "axis") and op_type == "MaxPool":
                hint = " (indices need MaxPool-8 or later)"
            allowed = f"its attributes are {list(known)}" if known else "it has no attributes"
            raise ValueError(f"`{name}` is not an attribute of {where}{hint}; {allowed}.")

    if op_type in _ROI_INPUTS:
        return Layer(op_type, version, *openvino_roi.roi_arguments(op_type, version, attrs))
    if op_type.startswith("Adaptive"):
        if op_type == "AdaptiveAvgPool":
            return Layer(op_type, version, "adaptive_avg_pool", ())
        index_type = ir_values.word(
            "index_element_type", attrs.get("index_element_type", "i64"), ("i32", "i64"), where
        )
        return Layer(
            op_type,
            version,
            "adaptive_max_pool",
            (("return_indices", True), ("index_element_type", index_type)),
        )

    for name in _REQUIRED:
        if name not in attrs:
            raise ValueError(f"`{name}` is a required attribute of {where} and is missing.")
    lists = {
        name: ir_values.int_list(name, attrs[name], _INT_LISTS[name]) if name in attrs else None
        for name in ("kernel", "strides", "pads_begin", "pads_end", "dilations")
    }
    rounding_types = ("floor", "ceil", "ceil_torch") if version >= 14 else ("floor", "ceil")
    hint = "" if version >= 14 else " ('ceil_torch' needs version 14)"
    rounding_type = ir_values.word(
        "rounding_type", attrs.get("rounding_type", "floor"), rounding_types, where, hint
    )
    auto_pad = ir_values.word("auto_pad", attrs.get("auto_pad", "explicit"), _AUTO_PADS, where)
    common = (
        ("kernel", lists["kernel"]),
        ("strides", lists["strides"]),
        ("pads_begin", lists["pads_begin"]),
        ("pads_end", lists["pads_end"]),
    )

    if op_type == "AvgPool":
        exclude_pad = ir_values.boolean("exclude-pad", attrs.get("exclude-pad", "true"))
        return Layer(
            op_type,
            version,
            "avg_pool",
            (
                *common,
                ("exclude_pad", exclude_pad),
                ("rounding_type", rounding_type),
                ("auto_pad", auto_pad),
            ),
        )

    arguments = (*common, ("rounding_type", rounding_type), ("auto_pad", auto_pad))
    if version == 1:
        return Layer(op_type, version, "max_pool", arguments)
    index_type = ir_values.word(
        "index_element_type", attrs.get("index_element_type", "i64"), ("i32", "i64"), where
    )
    axis_text = attrs.get("axis", "0")
    if not ir_values.INT_RE.match(axis_text):
        raise ValueError(f"`axis` (={axis_text!r}) must be an integer, such as '0' or '2'.")
    return Layer(
        op_type,
        version,
        "max_pool",
        (
            *arguments,
            ("dilations", lists["dilations"]),
            ("return_indices", True),
            ("index_element_type", index_type),
            ("axis", int(axis_text)),
        ),
    )
