"""An OpenVINO IR layer read from its ``<layer>`` XML or from a type name: its type, the
version of the operation (from ``version="opsetN"`` or a ``-N`` suffix) and its ``<data>``
attributes as IR strings, each malformed part refused naming ``xml_or_type``."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Collection, Mapping
from typing import Any

NEWEST_OPSET = 16  # openvino.opset16 is the newest opset that defines these operations

_TYPE_RE = re.compile(r"^([A-Za-z]+)(?:-(\d+))?$")
_OPSET_RE = re.compile(r"^opset(\d+)$")


def read_layer(
    xml_or_type: Any, attrs: Any, versions: Mapping[str, Collection[int]]
) -> tuple[str, int, dict[str, str]]:
    """The type, version and attributes of a layer given as XML or as a type name; ``versions``
    holds the versions of every type known, oldest first."""
    if isinstance(xml_or_type, ElementTree.Element) or (
        isinstance(xml_or_type, (str, bytes)) and xml_or_type.lstrip()[:1] in ("<", b"<")
    ):
        if attrs is not None:
            raise TypeError(
                f"`attrs` must be None when `xml_or_type` is a <layer> element (its <data> "
                f"holds the attributes), got {attrs!r}."
            )
        return _parse_xml(xml_or_type, versions)
    if not isinstance(xml_or_type, str):
        raise TypeError(
            f"`xml_or_type` must be <layer> XML text or a type name such as 'MaxPool-8', "
            f"got {xml_or_type!r} of type {type(xml_or_type).__name__}."
        )
    op_type, version = _parse_type_name(xml_or_type, versions)
    attrs = {} if attrs is None else attrs
    if not isinstance(attrs, Mapping):
        raise TypeError(
            f"`attrs` must be a mapping of attribute names to IR strings, got {attrs!r}."
        )
    for key, value in attrs.items():
        if not isinstance(value, str):
            raise TypeError(
                f"`attrs[{key!r}]` must be an IR string (such as '2, 2' or 'true'), "
                f"got {value!r} of type {type(value).__name__}."
            )
    return op_type, version, dict(attrs)


def _check_type(op_type: str, given: Any, versions: Mapping[str, Collection[int]]) -> None:
    if op_type not in versions:
        raise ValueError(
            f"`xml_or_type` names the layer type {given!r}; jaxpool.openvino knows "
            f"{sorted(versions)}."
        )


def _parse_type_name(name: str, versions: Mapping[str, Collection[int]]) -> tuple[str, int]:
    match = _TYPE_RE.match(name.strip())
    if match is None:
        raise ValueError(
            f"`xml_or_type` (={name!r}) must be a type name with an optional version suffix, "
            f"such as 'MaxPool' or 'MaxPool-8'."
        )
    op_type, suffix = match.groups()
    _check_type(op_type, name, versions)
    known = list(versions[op_type])
    if suffix is None:
        return op_type, known[-1]
    if int(suffix) not in known:
        raise ValueError(
            f"`xml_or_type` (={name!r}) asks for {op_type}-{int(suffix)}; {op_type} has the "
            f"versions {known}."
        )
    return op_type, int(suffix)


def _version_in_opset(op_type: str, opset: str, versions: Mapping[str, Collection[int]]) -> int:
    match = _OPSET_RE.match(opset)
    if match is None:
        raise ValueError(
            f"`version` (={opset!r}) of the {op_type} layer must be 'opsetN' (opset1 to "
            f"opset{NEWEST_OPSET})."
        )
    number = int(match.group(1))
    if not 1 <= number <= NEWEST_OPSET:
        raise ValueError(
            f"`version` (={opset!r}) of the {op_type} layer names an unknown opset; "
            f"jaxpool.openvino knows opset1 to opset{NEWEST_OPSET}."
        )
    defined = [v for v in versions[op_type] if v <= number]
    if not defined:
        raise ValueError(
            f"`version` (={opset!r}) predates {op_type}, which opset{min(versions[op_type])} "
            f"introduced."
        )
    return defined[-1]


def _parse_xml(
    xml: str | bytes | ElementTree.Element, versions: Mapping[str, Collection[int]]
) -> tuple[str, int, dict[str, str]]:
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
    _check_type(op_type, op_type, versions)
    opset = element.get("version")
    if opset is None:
        raise ValueError(
            f"`xml_or_type` is a {op_type} <layer> without a `version` attribute "
            f'(such as version="opset8").'
        )
    data = element.findall("data")
    if len(data) > 1:
        raise ValueError(f"`xml_or_type` is a {op_type} <layer> with {len(data)} <data> elements.")
    return (
        op_type,
        _version_in_opset(op_type, opset, versions),
        dict(data[0].attrib) if data else {},
    )
