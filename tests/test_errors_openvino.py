"""Bad inputs of ``jaxpool.openvino.layer``: IR layers and attributes it refuses to build, and
the calls a built layer refuses (rows as in ``bad_inputs``)."""

from __future__ import annotations

import functools

import jax
import numpy as np
from bad_inputs import S_X, X1, T, V, bad_input_test, names, non_numeric, row

from jaxpool import openvino as jov

K = {"kernel": "2, 2", "strides": "1, 1"}
X4 = np.ones((1, 1, 4, 4), np.float32)
EXTRACTOR = "ExperimentalDetectronROIFeatureExtractor"
MAX8 = '<layer type="MaxPool" version="opset8"'
MAX, DATA = '<layer type="MaxPool" version="{}">', '<data kernel="2" strides="1"/></layer>'


@functools.wraps(jov.layer)
def layer_call(args, *inputs, jit=False):
    """Builds ``openvino.layer(*args)`` and calls it on ``inputs`` (``jit``: every one traced)."""
    layer = jov.layer(*args)
    return (jax.jit(layer) if jit else layer)(*inputs)


# fmt: off
# (name, xml_or_type, attrs, error, match): `openvino.layer(xml_or_type, attrs)` refuses them.
BUILD = [
    # The layer: its type, version and XML.
    ("unknown-type", "FooPool", K, V, names("xml_or_type", "FooPool")),
    ("type-MaxPooling", "MaxPooling", None, V, r"layer type 'MaxPooling'.*'MaxPool'"),
    *((f"type-{t}", t, None, V, rf"layer type '{t}'") for t in ("maxpool", "Convolution")),
    ("type-not-a-name", "MaxPool_8", K, V, r"`xml_or_type` \(='MaxPool_8'\) must be a type name"),
    ("type-int", 8, None, T, r"`xml_or_type` must be <layer> XML text or a type name"),
    ("version-3", "MaxPool-3", K, V, names("xml_or_type", "MaxPool-3")),
    ("version-9", "MaxPool-9", K, V, r"MaxPool-9; MaxPool has the versions \[1, 8, 14\]"),
    ("version-AvgPool-8", "AvgPool-8", K, V, r"AvgPool-8; AvgPool has the versions \[1, 14, 16\]"),
    ("version-AdaptiveMaxPool-14", "AdaptiveMaxPool-14", None, V, r"AdaptiveMaxPool-14"),
    ("version-extractor-5", EXTRACTOR + "-5", None, V, EXTRACTOR + r" has the versions \[6\]"),
    ("xml-malformed", "<layer type='MaxPool' version='opset8'><data", None, V,
     names("xml_or_type", "<layer")),
    ("xml-not-well-formed", '<layer ... type="MaxPool" ... >', None, V, r"not well-formed XML"),
    *((f"xml-{v}", MAX.format(v) + DATA, None, V, rf"`version` \(='{v}'\).*unknown opset")
      for v in ("opset0", "opset17")),
    ("xml-version-experimental", MAX.format("experimental") + "</layer>", None, V,
     r"`version` \(='experimental'\).*must be 'opsetN'"),
    ("xml-version-predates-type", '<layer type="AdaptiveAvgPool" version="opset7"/>', None, V,
     r"`version` \(='opset7'\) predates AdaptiveAvgPool"),
    ("xml-without-version", '<layer type="MaxPool">' + DATA, None, V,
     r"without a `version` attribute"),
    ("xml-without-type", '<layer version="opset8"/>', None, V, r"without a `type` attribute"),
    ("xml-net", '<net><layer type="MaxPool" version="opset8"/></net>', None, V,
     r"must be a <layer> element, got a <net>"),
    ("xml-two-data", MAX8 + '><data kernel="2"/><data strides="2"/></layer>', None, V,
     r"2 <data> elements"),
    ("xml-kernel-missing", MAX8 + "/>", None, V, r"`kernel` is a required"),
    ("xml-with-attrs", MAX8 + "/>", {"kernel": "2"}, T,
     r"`attrs` must be None when `xml_or_type` is a <layer>"),
    # Its attributes: names, presence and types.
    ("attrs-not-a-mapping", "MaxPool", [("kernel", "2")], T, r"`attrs` must be a mapping"),
    ("attrs-list-value", "MaxPool", {"kernel": [2, 2], "strides": "1"}, T,
     r"`attrs\['kernel'\]` must be an IR string .* got \[2, 2\] of type list"),
    ("adaptive-no-attributes", "AdaptiveAvgPool", {"output_type": "i64"}, V,
     r"`output_type` is not an attribute of AdaptiveAvgPool-8; it has no attributes"),
    ("kernel-missing", "MaxPool", {"strides": "1, 1"}, V,
     r"`kernel` is a required attribute of MaxPool-14 and is missing"),
    ("strides-missing", "AvgPool-1", {"kernel": "2"}, V,
     r"`strides` is a required attribute of AvgPool-1"),
    ("pyramid_scales-missing", EXTRACTOR, {"output_size": "7", "sampling_ratio": "2"}, V,
     r"`pyramid_scales` is a required attribute of " + EXTRACTOR + "-6"),
    ("kernel-not-int", "MaxPool", {"kernel": "2,x", "strides": "2,2"}, V, names("kernel", "'2,x'")),
    ("pyramid_scales-not-int", EXTRACTOR,
     {"output_size": "7", "sampling_ratio": "2", "pyramid_scales": "4,x"}, V,
     r"`pyramid_scales` \(='4,x'\) must be comma-separated integers"),
    ("strides-negative", "AvgPool", {"kernel": "2,2", "strides": "-1,2"}, V,
     names("strides", "-1")),
    ("index_element_type-int32", "AdaptiveMaxPool", {"index_element_type": "int32"}, V,
     r"`index_element_type` \(='int32'\)"),
]
# (name, type, attribute, value, match): `openvino.layer(type, {**K, attribute: value})` raises
# a ValueError: an attribute the version lacks, or a bad value.
KNOWN = r"not an attribute of {}; its attributes are \["
WITH_K = [
    ("unknown-attribute", "MaxPool-8", "bogus", "1", r"`bogus` is " + KNOWN.format("MaxPool-8")),
    ("exclude_pad-spelling", "AvgPool-1", "exclude_pad", "true",
     r"`exclude_pad` is not an attribute of AvgPool-1 \(IR spells it `exclude-pad`\)"),
    ("dilations-before-8", "MaxPool-1", "dilations", "2, 2",
     r"`dilations` is not an attribute of MaxPool-1 \(dilations need MaxPool-8"),
    ("axis-before-8", "MaxPool-1", "axis", "2", r"`axis` is not an attribute of MaxPool-1"),
    ("dilations-AvgPool-14", "AvgPool-14", "dilations", "2, 2",
     r"`dilations` is not an attribute of AvgPool-14 \(dilations need AvgPool-16\)"),
    ("data_format", "MaxPool-1", "data_format", "NCX", r"`data_format` is not an attribute"),
    ("kernel-spaces", "MaxPool", "kernel", "2 2",
     r"`kernel` \(='2 2'\) must be comma-separated integers"),
    *((f"kernel-{name}", "MaxPool", "kernel", value, rf"`kernel` \(='{value}'\)")
      for name, value in [("empty-entry", "2,,2"), ("float", "2.0, 2"), ("empty", "")]),
    ("kernel-zero", "MaxPool", "kernel", "0, 2", r"`kernel` \(='0, 2'\) must be positive"),
    ("strides-zero", "MaxPool", "strides", "1, 0", r"`strides` \(='1, 0'\) must be positive"),
    ("pads_begin-negative", "MaxPool", "pads_begin", "-1, 0",
     r"`pads_begin` \(='-1, 0'\) must be non-negative"),
    ("dilations-zero", "MaxPool", "dilations", "0, 1", r"`dilations` \(='0, 1'\)"),
    ("dilations-zero-AvgPool", "AvgPool", "dilations", "1, 0",
     r"`dilations` \(='1, 0'\) must be positive"),
    ("rounding-round-8", "MaxPool-8", "rounding_type", "round", names("rounding_type", "'round'")),
    ("rounding-round", "MaxPool", "rounding_type", "round", r"`rounding_type` \(='round'\)"),
    ("ceil_torch-before-14", "MaxPool-8", "rounding_type", "ceil_torch",
     r"`rounding_type` \(='ceil_torch'\) of MaxPool-8 must be one of \['floor', 'ceil'\] "
     r"\('ceil_torch' needs version 14\)"),
    ("ceil_torch-AvgPool-1", "AvgPool-1", "rounding_type", "ceil_torch", r"needs version 14"),
    ("auto_pad-notset", "AvgPool", "auto_pad", "notset",
     r"`auto_pad` \(='notset'\) of AvgPool-16 must be one of \['explicit', 'valid'"),
    ("index_element_type-u8", "MaxPool", "index_element_type", "u8",
     r"`index_element_type` \(='u8'\) of MaxPool-14 must be one of \['i32', 'i64'\]"),
    ("axis-x", "MaxPool-8", "axis", "x", names("axis", "'x'")),
    ("axis-two", "MaxPool", "axis", "two", r"`axis` \(='two'\) must be an integer"),
    ("exclude-pad-maybe", "AvgPool", "exclude-pad", "maybe", names("exclude-pad", "'maybe'")),
    ("exclude-pad-yes", "AvgPool", "exclude-pad", "yes",
     r"`exclude-pad` \(='yes'\) must be 'true' or 'false'"),
]
ROWS = [
    *(row(f"layer-{name}", jov.layer, xml_or_type, attrs, error=error, match=match)
      for name, xml_or_type, attrs, error, match in BUILD),
    *(row(f"layer-{name}", jov.layer, type_name, {**K, attribute: value}, error=V, match=match)
      for name, type_name, attribute, value, match in WITH_K),
    row("layer-index_element_type-AvgPool", jov.layer, "AvgPool-1", K, index_element_type="i32",
        error=V, match=r"`index_element_type`.*AvgPool-1"),
    # A built layer, called.
    row("layer-call-kernel-wrong-length", layer_call, ("MaxPool", dict(K, kernel="2,2,2")),
        X4, error=V, match=r"`kernel` \(=\(2, 2, 2\)\) must have one entry per spatial axis"),
    row("layer-call-i64-without-x64", layer_call, ("MaxPool-8", K), X4, error=V,
        match=r"`index_element_type`"),
    row("layer-call-x-strings", layer_call, ("MaxPool", K), S_X, error=T, match=non_numeric("x")),
    row("layer-call-avg-two-inputs", layer_call, ("AvgPool", K), X1, [2, 2], error=T,
        match=r"AvgPool-16 takes 1 input\(s\) \(`x`\), got 2"),
    row("layer-call-extractor-one-input", layer_call,
        (EXTRACTOR, {"output_size": "2", "sampling_ratio": "2", "pyramid_scales": "4,8"}),
        np.zeros((3, 4), np.float32), error=T,
        match=r"takes 3 input\(s\) \(`rois`, `level_0` and `level_1`\), got 1"),
    row("layer-call-adaptive-one-input", layer_call, ("AdaptiveMaxPool",), X1, error=T,
        match=r"AdaptiveMaxPool-8 takes 2 input\(s\) \(`x` and `output_size`\), got 1"),
    row("layer-call-output_size-2d", layer_call, ("AdaptiveAvgPool",), X1, np.array([[2, 2]]),
        error=V, match=r"`output_size` of AdaptiveAvgPool-8 must be a 1-D"),
    row("layer-call-output_size-traced", layer_call, ("AdaptiveAvgPool",), X4, np.array([2, 2]),
        jit=True, error=T, match=r"`output_size`"),
]
# fmt: on

test_bad_input = bad_input_test(ROWS)
