"""The implementation of :mod:`jaxpool.onnx`, whose docstring states the semantics: ONNX nodes
bound to jaxpool functions through one table, :data:`BINDERS`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, cast

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import indices as indices_lib
from jaxpool._src.adaptive_avg_pool import adaptive_avg_pool
from jaxpool._src.adaptive_max_pool import adaptive_max_pool
from jaxpool._src.avg_pool import avg_pool
from jaxpool._src.interop import onnx_names, onnx_ops
from jaxpool._src.interop.bound import Arguments, Attributes, Bound
from jaxpool._src.lp_pool import lp_pool
from jaxpool._src.max_pool import max_pool
from jaxpool._src.roi_align import ONNX_MAX, roi_align, roi_align_any_mode
from jaxpool._src.roi_pool import roi_pool
from jaxpool._src.unpool import max_unpool

_AUTO_PADS = onnx_names.AUTO_PADS
_ROI_ALIGN_MODES = onnx_names.ROI_ALIGN_TRANSFORMS
# RoiAlign's mode -> function and mode (ONNX's max is an internal mode of roi_align's program).
_ROI_ALIGN_POOLING = {
    onnx_mode: (roi_align_any_mode if mode == ONNX_MAX else roi_align, mode)
    for onnx_mode, mode in onnx_names.ROI_ALIGN_POOLING.items()
}

# AttributeProto.AttributeType values, and the kinds each attribute may have.
_FLOAT, _INT, _STRING, _FLOATS, _INTS = 1, 2, 3, 6, 7
_KIND_NAMES = {_FLOAT: "a float", _INT: "an int", _STRING: "a string", _INTS: "ints"}
_KINDS = {
    **dict.fromkeys(("ceil_mode", "count_include_pad", "storage_order"), (_INT,)),
    **dict.fromkeys(("output_height", "output_width", "sampling_ratio"), (_INT,)),
    **dict.fromkeys(("dilations", "kernel_shape", "pads", "strides", "pooled_shape"), (_INTS,)),
    **dict.fromkeys(("auto_pad", "coordinate_transformation_mode", "mode"), (_STRING,)),
    "spatial_scale": (_FLOAT,),
    "p": (_INT, _FLOAT),  # a float before LpPool-2 and GlobalLpPool-2
}


class Node(Bound):
    """An ONNX node, bound to the jaxpool function that computes it (``type`` is its
    ``op_type``).

    Call it with the node's inputs, in ONNX's NCX layout: ``node(x)`` for the pools,
    ``node(x, indices)`` or ``node(x, indices, output_shape)`` for ``MaxUnpool`` (a concrete
    ``output_shape``: it decides the shape), ``node(x, rois)`` for ``MaxRoiPool`` and
    ``node(x, rois, batch_indices)`` for ``RoiAlign``.  It returns one array, or
    ``(values, indices)`` for a ``MaxPool`` whose ``Indices`` output is named.  For
    ``GlobalLpPool`` and ``MaxUnpool``, ``arguments`` holds those that do not depend on the
    input's shape.
    """

    @property
    def op_type(self) -> str:
        return self.type


class ONNXAttributes(Attributes):
    """A node's attributes, read from its ``AttributeProto``s, with what binders need of the
    node besides: its outputs, its opset, the index type asked for."""

    outputs: tuple[str, ...]
    opset: int | None
    index_type: str

    def get(self, name: str, default: Any) -> Any:
        return self.values.get(name, default)

    def flag(self, name: str) -> bool:
        value = self.values.get(name, 0)
        if value not in (0, 1):
            raise ValueError(f"`{name}` (={value!r}) of {self.where} must be 0 or 1.")
        return bool(value)

    def pads(self, nd: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        pads = self.values.get("pads", (0,) * 2 * nd)
        if len(pads) != 2 * nd:
            raise ValueError(
                f"`pads` (={list(pads)}) of {self.where} must have two entries per spatial "
                f"axis ({2 * nd}): all begins, then all ends."
            )
        return pads[:nd], pads[nd:]


class Binder(NamedTuple):
    """How a node type is bound: the attributes it has, and the function from those to the
    :class:`Node`."""

    attributes: tuple[str, ...]
    bind: Callable[[ONNXAttributes], Bound]


# The binders.


def _sliding(a: ONNXAttributes) -> Arguments:
    a.require("kernel_shape")
    kernel = a.values["kernel_shape"]
    nd = len(kernel)
    for name in ("strides", "dilations"):
        if name in a:
            onnx_ops.check_length(name, a.values[name], nd)
    pads_begin, pads_end = a.pads(nd)
    auto_pad = a.get("auto_pad", "NOTSET")
    if auto_pad not in _AUTO_PADS:
        raise ValueError(
            f"`auto_pad` (={auto_pad!r}) of {a.type} must be one of {list(_AUTO_PADS)}."
        )
    return (
        ("kernel", kernel),
        ("strides", a.get("strides", (1,) * nd)),
        ("pads_begin", pads_begin),
        ("pads_end", pads_end),
        ("dilations", a.get("dilations", (1,) * nd)),
        ("rounding_type", onnx_names.CEIL_MODES[a.flag("ceil_mode")]),
        ("auto_pad", _AUTO_PADS[auto_pad]),
    )


def _indices(op: Bound, x: Any) -> tuple[jax.Array, jax.Array]:
    """Calls a ``MaxPool`` with ``Indices``: int64 unless asked otherwise, flat NCX positions."""
    if op.kwargs["index_element_type"] == "i64" and not indices_lib.x64_enabled():
        raise ValueError(
            "`index_element_type` is ONNX's int64 for the `Indices` of MaxPool, which "
            "needs `jax_enable_x64`; enable it, or pass `index_element_type='i32'`."
        )
    return op.fn(x, **op.kwargs)


def _column_major_indices(op: Bound, x: Any) -> tuple[jax.Array, jax.Array]:
    """Calls a ``MaxPool`` with ``Indices`` and ``storage_order=1``."""
    x = jnp.asarray(x)
    y, indices = _indices(op, x)
    return y, onnx_ops.column_major(indices, x.shape[2:])


def _max_pool(a: ONNXAttributes) -> Bound:
    storage_order = a.get("storage_order", 0)
    if storage_order not in (0, 1):
        raise ValueError(f"`storage_order` (={storage_order!r}) of MaxPool must be 0 or 1.")
    arguments = _sliding(a)
    if len(a.outputs) < 2 or a.outputs[1] == "":
        return a.bind(max_pool, arguments)
    arguments += (("return_indices", True), ("index_element_type", a.index_type), ("axis", 0))
    if storage_order == 0:
        return a.bind(max_pool, arguments, outputs=2, call=_indices)
    return a.bind(
        max_pool, arguments, outputs=2, call=_column_major_indices, note="column-major indices"
    )


def _onnx_divisor(op: Bound, x: Any) -> jax.Array:
    return onnx_ops.average_pool(jnp.asarray(x), op.kwargs)


def _average_pool(a: ONNXAttributes) -> Bound:
    include_pad = a.flag("count_include_pad")
    arguments = (*_sliding(a), ("exclude_pad", not include_pad))
    if not include_pad:
        return a.bind(avg_pool, arguments)
    note = "ONNX's divisor past the end padding"
    return a.bind(avg_pool, arguments, call=_onnx_divisor, note=note)


def _lp_pool(a: ONNXAttributes) -> Bound:
    return a.bind(lp_pool, (*_sliding(a), ("p", a.get("p", 2))))


def _global_lp(op: Bound, x: Any) -> jax.Array:
    """Calls ``GlobalLpPool``: an ``LpPool`` whose kernel is the whole spatial extent."""
    x = jnp.asarray(x)
    return op.fn(x, x.shape[2:], 1, **op.kwargs)


def _global_lp_pool(a: ONNXAttributes) -> Bound:
    return a.bind(lp_pool, (("p", a.get("p", 2)),), call=_global_lp)


def _global(fn: Callable[..., Any]) -> Callable[[ONNXAttributes], Bound]:
    return lambda a: a.bind(fn, (("output_size", 1),))


def _max_unpool_call(op: Bound, x: Any, indices: Any, output_shape: Any = None) -> jax.Array:
    return onnx_ops.max_unpool(x, indices, output_shape, op.kwargs)


def _max_unpool(a: ONNXAttributes) -> Bound:
    a.require("kernel_shape")
    kernel = a.values["kernel_shape"]
    pads_begin, pads_end = a.pads(len(kernel))
    arguments = (
        ("kernel", kernel),
        ("strides", a.get("strides", (1,) * len(kernel))),
        ("pads_begin", pads_begin),
        ("pads_end", pads_end),
    )
    inputs = ("x", "indices", "output_shape")
    return a.bind(max_unpool, arguments, inputs=inputs, optional=1, call=_max_unpool_call)


def _max_roi_pool(a: ONNXAttributes) -> Bound:
    a.require("pooled_shape")
    arguments = (
        ("output_size", a.values["pooled_shape"]),
        ("spatial_scale", a.get("spatial_scale", 1.0)),
        ("method", "max"),
    )
    return a.bind(roi_pool, arguments, inputs=("x", "rois"))


def _roi_align(a: ONNXAttributes) -> Bound:
    default = "output_half_pixel" if a.opset is not None and a.opset < 16 else "half_pixel"
    transform = a.get("coordinate_transformation_mode", default)
    if transform not in _ROI_ALIGN_MODES:
        raise ValueError(
            f"`coordinate_transformation_mode` (={transform!r}) of RoiAlign must be one of "
            f"{list(_ROI_ALIGN_MODES)}."
        )
    mode = a.get("mode", "avg")
    if mode not in _ROI_ALIGN_POOLING:
        raise ValueError(
            f"`mode` (={mode!r}) of RoiAlign must be one of {list(_ROI_ALIGN_POOLING)}."
        )
    fn, mode = _ROI_ALIGN_POOLING[mode]
    arguments = (
        ("output_size", (a.get("output_height", 1), a.get("output_width", 1))),
        ("spatial_scale", a.get("spatial_scale", 1.0)),
        ("sampling_ratio", a.get("sampling_ratio", 0)),
        ("mode", mode),
        ("aligned_mode", _ROI_ALIGN_MODES[transform]),
    )
    return a.bind(fn, arguments, inputs=("x", "rois", "batch_indices"))


# The table: {op_type: binder}, for the default domain.

_SLIDING = ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides")
_ROI_ALIGN = (
    "coordinate_transformation_mode",
    "mode",
    "output_height",
    "output_width",
    "sampling_ratio",
    "spatial_scale",
)

BINDERS: dict[str, Binder] = {
    "MaxPool": Binder((*_SLIDING, "storage_order"), _max_pool),
    "AveragePool": Binder((*_SLIDING, "count_include_pad"), _average_pool),
    "LpPool": Binder((*_SLIDING, "p"), _lp_pool),
    "GlobalMaxPool": Binder((), _global(adaptive_max_pool)),
    "GlobalAveragePool": Binder((), _global(adaptive_avg_pool)),
    "GlobalLpPool": Binder(("p",), _global_lp_pool),
    "MaxUnpool": Binder(("kernel_shape", "pads", "strides"), _max_unpool),
    "MaxRoiPool": Binder(("pooled_shape", "spatial_scale"), _max_roi_pool),
    "RoiAlign": Binder(_ROI_ALIGN, _roi_align),
}


def node(node: Any, *, index_element_type: Any = None, opset: int | None = None) -> Node:
    """Builds the jaxpool callable of an ONNX pooling node.

    ``node`` is an ``onnx.NodeProto`` (or anything with its fields ``op_type``, ``domain``,
    ``attribute``, ``input`` and ``output``) of the default domain.  The module's docstring
    lists the nodes, the calls they become and where ONNX's semantics are not jaxpool's
    defaults (``ceil_mode``, ``pads``, ``count_include_pad``, ``storage_order``,
    ``MaxUnpool``'s ``output_shape``).

    Args:
      node: the ONNX node.
      index_element_type: the dtype of ``MaxPool``'s ``Indices``: ``None`` for ONNX's int64
        (``"i64"``, which needs ``jax_enable_x64``), or ``"i32"`` (or ``jnp.int32``) to run
        without it.
      opset: the version of the default domain's opset that the node belongs to (a model's
        ``opset_import``); ``None`` means the newest.  Only RoiAlign's default depends on it:
        before RoiAlign-16, a node without ``coordinate_transformation_mode`` is
        ``"output_half_pixel"``.

    Returns:
      A :class:`Node`, called with the node's inputs.

    Raises:
      ValueError: for an unknown operation or domain, an unknown, missing or malformed
        attribute, or an unknown ``index_element_type``.

    Example:
      >>> import jax.numpy as jnp
      >>> import onnx.helper
      >>> import jaxpool.onnx
      >>> pool = jaxpool.onnx.node(onnx.helper.make_node(
      ...     "MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 2]),
      ...     index_element_type="i32")
      >>> y, i = pool(jnp.arange(16.0).reshape(1, 1, 4, 4))
      >>> y[0, 0].tolist(), i[0, 0].tolist()
      ([[5.0, 7.0], [13.0, 15.0]], [[5, 7], [13, 15]])
      >>> lp = jaxpool.onnx.node(
      ...     onnx.helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2]))
      >>> lp(jnp.array([[[3.0, 4.0]]])).tolist()
      [[[5.0]]]
    """
    op_type = _op_type(node)
    if opset is not None and (isinstance(opset, bool) or not isinstance(opset, int) or opset < 1):
        raise ValueError(f"`opset` (={opset!r}) must be None or a positive int.")
    if index_element_type is None:
        index_type = "i64"
    else:
        dtype = indices_lib.index_type(index_element_type)
        index_type = "i64" if dtype == np.int64 else "i32"
    a = ONNXAttributes(Node, op_type, None, _attributes(node, op_type))
    a.outputs, a.opset, a.index_type = tuple(node.output), opset, index_type
    return cast(Node, BINDERS[op_type].bind(a))


def _op_type(node: Any) -> str:
    op_type = getattr(node, "op_type", None)
    if not isinstance(op_type, str):
        raise TypeError(f"`node` must be an ONNX NodeProto, got {type(node).__name__}.")
    domain = getattr(node, "domain", "")
    if domain not in ("", "ai.onnx"):
        raise ValueError(
            f"`node` is a {op_type} node of the domain {domain!r}; jaxpool.onnx knows the "
            "default domain ('' or 'ai.onnx')."
        )
    if op_type not in BINDERS:
        raise ValueError(
            f"`node` has the op_type {op_type!r}; jaxpool.onnx knows {sorted(BINDERS)}."
        )
    return op_type


def _attributes(node: Any, op_type: str) -> dict[str, Any]:
    """The node's attributes as Python values, each checked to be one the node type has, of
    a kind it may have."""
    known = BINDERS[op_type].attributes
    values: dict[str, Any] = {}
    for attribute in node.attribute:
        name, kind = attribute.name, attribute.type
        if name not in known:
            allowed = f"its attributes are {list(known)}" if known else "it has no attributes"
            raise ValueError(f"`{name}` is not an attribute of {op_type}; {allowed}.")
        if kind not in _KINDS[name]:
            expected = " or ".join(_KIND_NAMES[k] for k in _KINDS[name])
            raise ValueError(
                f"`{name}` of {op_type} must be {expected}, got an attribute of type {kind}."
            )
        if kind == _INTS:
            values[name] = tuple(int(v) for v in attribute.ints)
        elif kind == _INT:
            values[name] = int(attribute.i)
        elif kind == _FLOAT:
            values[name] = float(attribute.f)
        else:
            text = attribute.s
            values[name] = text.decode() if isinstance(text, bytes) else str(text)
    return values


# The way back: jaxpool's ops as ONNX nodes, through jax2onnx (imported on first use).


def register_export() -> None:
    """Registers jaxpool's ops with jax2onnx, so that ``jax2onnx.to_onnx`` exports each call of
    a jaxpool op as its ONNX node (or composition), as :func:`export` does.

    Needs the ``jax2onnx`` package (``pip install "jaxpool[export]"``).  Registering twice
    does nothing more.

    Raises:
      ImportError: where jax2onnx is not installed.
    """
    from jaxpool._src.interop import onnx_export

    onnx_export.register()


def export_table() -> tuple[tuple[str, str, str, str], ...]:
    """How each public op exports, a row per op: ``(op, exports, onnx, notes)``: as a node, a
    composition of nodes or refused; the nodes; what decides it (a refusal's reason, as its
    error gives it).  The Deploying page prints it.

    Raises:
      ImportError: without jax2onnx (``pip install "jaxpool[export]"``).
    """
    from jaxpool._src.interop import onnx_export

    return tuple((row.op, row.export, row.onnx, row.notes) for row in onnx_export.TABLE)


def export(
    fn: Callable[..., Any],
    *example_args: Any,
    opset: int = 21,
    path: Any = None,
    **jax2onnx_kwargs: Any,
) -> Any:
    """Exports ``fn``, a JAX function (or Flax NNX / Equinox model) calling jaxpool's ops, to an
    ONNX model through jax2onnx.

    Every call of a jaxpool op becomes its ONNX node with its attributes mapped exactly
    (``max_pool`` -> ``MaxPool`` with ``Indices``, ``avg_pool`` -> ``AveragePool``, ``lp_pool``
    -> ``LpPool``, global adaptive pools -> ``GlobalMaxPool``/``GlobalAveragePool``,
    ``max_unpool`` -> ``MaxUnpool``, ``roi_pool`` -> ``MaxRoiPool``, ``roi_align`` ->
    ``RoiAlign``), or the smallest exact composition of nodes where it has none (adaptive
    bins that are not one sliding window, index conventions and types the node lacks); NXC
    inputs are transposed to NCX around the node.  What ONNX cannot express (the ROI ops
    without an ONNX node, attributes without an ONNX counterpart) is refused with a
    ``ValueError`` naming the op and the attribute (:func:`export_table`, op by op).  The rest
    of ``fn`` is jax2onnx's.

    Args:
      fn: the function to export; its arguments are arrays.
      *example_args: one array (or anything with ``shape`` and ``dtype``, such as a
        ``jax.ShapeDtypeStruct``) per argument of ``fn``: the shapes and dtypes of the model's
        inputs.
      opset: the default domain's opset of the model: by default 21, the newest whose
        pooling nodes ONNX Runtime implements every one of (it has no kernel for RoiAlign-22,
        MaxRoiPool-22 and GlobalLpPool-22); AveragePool's ``dilations`` need 19, RoiAlign's
        half-pixel modes 16.
      path: where to save the model as well (a path or file name), or ``None``.
      **jax2onnx_kwargs: passed to ``jax2onnx.to_onnx`` (``input_names``,
        ``enable_double_precision``, ...).

    Returns:
      The ``onnx.ModelProto``.

    Raises:
      ImportError: without jax2onnx (``pip install "jaxpool[export]"``).
      ValueError: for an op or attribute that ONNX cannot express, naming both.

    Example:
      >>> import numpy as np, jaxpool, jaxpool.onnx
      >>> model = jaxpool.onnx.export(
      ...     lambda x: jaxpool.max_pool(x, 2), np.zeros((1, 3, 8, 8), np.float32))
      >>> [node.op_type for node in model.graph.node]
      ['MaxPool']
    """
    from jaxpool._src.interop import onnx_export

    return onnx_export.export(fn, *example_args, opset=opset, path=path, **jax2onnx_kwargs)
