"""Bad inputs of ``jaxpool.onnx.node``: ONNX nodes it refuses to bind, and the call of a bound
node (rows as in ``bad_inputs``)."""

from __future__ import annotations

import functools

from bad_inputs import S_X, X1, T, V, bad_input_test, non_numeric, row
from onnx import helper

import jaxpool.onnx


@functools.wraps(jaxpool.onnx.node)
def node(op_type, domain="", outputs=("y",), options=None, call=(), **attributes):
    """``jaxpool.onnx.node(..., **options)`` of an ``op_type`` node from ``x`` to ``outputs``
    with ``attributes``; called on ``call`` where given."""
    proto = helper.make_node(op_type, ["x"], list(outputs), domain=domain, **attributes)
    bound = jaxpool.onnx.node(proto, **(options or {}))
    return bound(*call) if call else bound


# fmt: off
ROWS = [
    row("onnx.node-op_type", node, "Conv", error=V, match="op_type 'Conv'"),
    row("onnx.node-domain", node, "MaxPool", "custom", kernel_shape=[2], error=V,
        match="domain 'custom'"),
    row("onnx.node-unknown-attribute", node, "MaxPool", kernel_shape=[2], p=2, error=V,
        match="`p` is not an attribute of MaxPool"),
    row("onnx.node-kernel_shape-missing", node, "LpPool", error=V,
        match="`kernel_shape` is a required"),
    row("onnx.node-kernel_shape-float", node, "MaxPool", kernel_shape=2.0, error=V,
        match="`kernel_shape` of MaxPool must be ints"),
    row("onnx.node-pads-length", node, "AveragePool", kernel_shape=[2], pads=[1], error=V,
        match=r"`pads` \(=\[1\]\)"),
    row("onnx.node-auto_pad", node, "AveragePool", kernel_shape=[2], auto_pad="SAME", error=V,
        match=r"`auto_pad` \(='SAME'\)"),
    row("onnx.node-ceil_mode", node, "MaxPool", kernel_shape=[2], ceil_mode=2, error=V,
        match=r"`ceil_mode` \(=2\)"),
    row("onnx.node-storage_order", node, "MaxPool", kernel_shape=[2], storage_order=3, error=V,
        match=r"`storage_order` \(=3\)"),
    row("onnx.node-index_element_type", node, "MaxPool", kernel_shape=[2],
        options={"index_element_type": "u8"}, error=V, match=r"`index_element_type` \(='u8'\)"),
    row("onnx.node-opset", node, "MaxPool", kernel_shape=[2], options={"opset": 0}, error=V,
        match=r"`opset` \(=0\)"),
    # ONNX's indices are int64: without jax_enable_x64 they need index_element_type="i32"
    row("onnx.node-indices-without-x64", node, "MaxPool", call=(X1,), outputs=("y", "i"),
        kernel_shape=[2], strides=[2], error=V, match=r"`index_element_type='i32'`"),
    row("onnx.node-x-strings", node, "MaxPool", call=(S_X,), kernel_shape=[2, 2], error=T,
        match=non_numeric("x")),
]
# fmt: on

test_bad_input = bad_input_test(ROWS)
