"""Model formats read as jaxpool calls: each format's table maps an operation type to a short
binder, which reads the operation's attributes and returns a :class:`bound.Bound`, the jaxpool
function with its arguments and the operation's inputs.  ``openvino`` reads OpenVINO IR layers
(``ir_values`` reads their attribute strings), ``onnx`` ONNX nodes (``onnx_ops`` applies the
semantics of ONNX's that are not the functions' own)."""
