"""The implementation of :mod:`jaxpool.onnx`, whose docstring states the semantics."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import onnx_ops
from jaxpool._src import roi_align as roi_align_lib

_SLIDING = ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides")
_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "MaxPool": (*_SLIDING, "storage_order"),
    "AveragePool": (*_SLIDING, "count_include_pad"),
    "LpPool": (*_SLIDING, "p"),
    "GlobalMaxPool": (),
    "GlobalAveragePool": (),
    "GlobalLpPool": ("p",),
    "MaxUnpool": ("kernel_shape", "pads", "strides"),
    "MaxRoiPool": ("pooled_shape", "spatial_scale"),
    "RoiAlign": (
        "coordinate_transformation_mode",
        "mode",
        "output_height",
        "output_width",
        "sampling_ratio",
        "spatial_scale",
    ),
}
_FUNCTIONS = {
    "MaxPool": "max_pool",
    "AveragePool": "avg_pool",
    "LpPool": "lp_pool",
    "GlobalMaxPool": "adaptive_max_pool",
    "GlobalAveragePool": "adaptive_avg_pool",
    "GlobalLpPool": "lp_pool",
    "MaxUnpool": "max_unpool",
    "MaxRoiPool": "roi_pool",
    "RoiAlign": "roi_align",
}
_AUTO_PADS = {
    "NOTSET": "explicit",
    "VALID": "valid",
    "SAME_UPPER": "same_upper",
    "SAME_LOWER": "same_lower",
}
_INDEX_TYPES = ("i32", "i64")

# AttributeProto.AttributeType values.
_FLOAT, _INT, _STRING, _FLOATS, _INTS = 1, 2, 3, 6, 7
_KINDS = {
    "auto_pad": (_STRING,),
    "ceil_mode": (_INT,),
    "count_include_pad": (_INT,),
    "storage_order": (_INT,),
    "dilations": (_INTS,),
    "kernel_shape": (_INTS,),
    "pads": (_INTS,),
    "strides": (_INTS,),
    "p": (_INT, _FLOAT),  # a float before LpPool-2 and GlobalLpPool-2
    "pooled_shape": (_INTS,),
    "spatial_scale": (_FLOAT,),
    "coordinate_transformation_mode": (_STRING,),
    "mode": (_STRING,),
    "output_height": (_INT,),
    "output_width": (_INT,),
    "sampling_ratio": (_INT,),
}
# RoiAlign's coordinate_transformation_mode -> roi_align's aligned_mode.
_ROI_ALIGN_MODES = {"half_pixel": "half_pixel_for_nn", "output_half_pixel": "asymmetric"}
_KIND_NAMES = {_FLOAT: "a float", _INT: "an int", _STRING: "a string", _INTS: "ints"}


@dataclasses.dataclass(frozen=True)
class Node:
    """An ONNX pooling node, bound to the jaxpool function that computes it.

    Call it with the node's inputs, in ONNX's NCX layout: ``node(x)`` for the pools,
    ``node(x, indices)`` or ``node(x, indices, output_shape)`` for ``MaxUnpool`` (a concrete
    ``output_shape``: it decides the shape), ``node(x, rois)`` for ``MaxRoiPool`` and
    ``node(x, rois, batch_indices)`` for ``RoiAlign``.  It returns one array, or
    ``(values, indices)`` for a ``MaxPool`` whose ``Indices`` output is named.

    Attributes:
      op_type: the ONNX operation, e.g. ``"MaxPool"``.
      function: the name of the jaxpool function, e.g. ``"max_pool"``.
      arguments: the attributes as jaxpool arguments, ``(name, value)`` pairs (for
        ``GlobalLpPool`` and ``MaxUnpool``, those that do not depend on the input's shape).
      num_outputs: 2 for a ``MaxPool`` with ``Indices``, else 1.
      index_element_type: the dtype of ``MaxPool``'s indices, ``"i64"`` unless overridden.
      storage_order: ``MaxPool``'s ``storage_order`` (1: column-major spatial indices).
      onnx_divisor: an ``AveragePool`` with ``count_include_pad=1``, whose divisor for a window
        past the end padding is ONNX's.
    """

    op_type: str
    function: str
    arguments: tuple[tuple[str, Any], ...]
    num_outputs: int = 1
    index_element_type: str = "i64"
    storage_order: int = 0
    onnx_divisor: bool = False

    @property
    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :attr:`function`, as a dict."""
        return dict(self.arguments)

    def __call__(self, *inputs: Any) -> jax.Array | tuple[jax.Array, ...]:
        counts, expected = _INPUTS.get(self.op_type, ((1,), "`x`"))
        if len(inputs) not in counts:
            raise TypeError(f"{self.op_type} takes {expected}, got {len(inputs)} input(s).")
        if self.op_type == "MaxUnpool":
            return self._max_unpool(*inputs)
        if self.op_type in ("MaxRoiPool", "RoiAlign"):
            import jaxpool

            if self.kwargs.get("mode") == roi_align_lib.ONNX_MAX:
                return roi_align_lib.roi_align_any_mode(*inputs, **self.kwargs)

            return getattr(jaxpool, self.function)(*inputs, **self.kwargs)
        x = jnp.asarray(inputs[0])
        if self.op_type == "MaxPool":
            return self._max_pool(x)
        if self.op_type == "AveragePool" and self.onnx_divisor:
            return self._average_pool(x)
        import jaxpool

        kwargs = self.kwargs
        if self.op_type.startswith("Global"):
            if self.op_type == "GlobalLpPool":
                kwargs.update(kernel=x.shape[2:], strides=1)
        return getattr(jaxpool, self.function)(x, **kwargs)

    def _max_pool(self, x: jax.Array) -> jax.Array | tuple[jax.Array, jax.Array]:
        import jaxpool

        if self.num_outputs == 1:
            return jaxpool.max_pool(x, **self.kwargs)
        if self.index_element_type == "i64" and not _x64_enabled():
            raise ValueError(
                "`index_element_type` is ONNX's int64 for the `Indices` of MaxPool, which "
                "needs `jax_enable_x64`; enable it, or pass `index_element_type='i32'`."
            )
        y, indices = jaxpool.max_pool(x, **self.kwargs)
        if self.storage_order == 1:
            indices = onnx_ops.column_major(indices, x.shape[2:])
        return y, indices

    def _average_pool(self, x: jax.Array) -> jax.Array:
        return onnx_ops.average_pool(x, self.kwargs)

    def _max_unpool(self, x: Any, indices: Any, output_shape: Any = None) -> jax.Array:
        return onnx_ops.max_unpool(x, indices, output_shape, self.kwargs)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments)
        notes = "".join(
            note
            for note, present in (
                (", column-major indices", self.storage_order == 1),
                (", ONNX's divisor past the end padding", self.onnx_divisor),
            )
            if present
        )
        return f"<{self.op_type}: jaxpool.{self.function}({args}){notes}>"


_INPUTS = {
    "MaxUnpool": ((2, 3), "`x`, `indices` and an optional `output_shape`"),
    "MaxRoiPool": ((2,), "`x` and `rois`"),
    "RoiAlign": ((3,), "`x`, `rois` and `batch_indices`"),
}


def _x64_enabled() -> bool:
    from jaxpool._src import indices as indices_lib

    return indices_lib.x64_enabled()


def _attributes(node: Any, op_type: str) -> dict[str, Any]:
    known = _ATTRIBUTES[op_type]
    values: dict[str, Any] = {}
    for attribute in node.attribute:
        name = attribute.name
        if name not in known:
            allowed = f"its attributes are {list(known)}" if known else "it has no attributes"
            raise ValueError(f"`{name}` is not an attribute of {op_type}; {allowed}.")
        kind = attribute.type
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


def _flag(name: str, values: dict[str, Any], op_type: str) -> bool:
    value = values.get(name, 0)
    if value not in (0, 1):
        raise ValueError(f"`{name}` (={value!r}) of {op_type} must be 0 or 1.")
    return bool(value)


def _sliding(op_type: str, values: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    if "kernel_shape" not in values:
        raise ValueError(f"`kernel_shape` is a required attribute of {op_type} and is missing.")
    kernel = values["kernel_shape"]
    nd = len(kernel)
    for name in ("strides", "dilations"):
        if name in values:
            onnx_ops.check_length(name, values[name], nd)
    pads = values.get("pads", (0,) * 2 * nd)
    if len(pads) != 2 * nd:
        raise ValueError(
            f"`pads` (={list(pads)}) of {op_type} must have two entries per spatial axis "
            f"({2 * nd}): all begins, then all ends."
        )
    auto_pad = values.get("auto_pad", "NOTSET")
    if auto_pad not in _AUTO_PADS:
        raise ValueError(
            f"`auto_pad` (={auto_pad!r}) of {op_type} must be one of {list(_AUTO_PADS)}."
        )
    return (
        ("kernel", kernel),
        ("strides", values.get("strides", (1,) * nd)),
        ("pads_begin", pads[:nd]),
        ("pads_end", pads[nd:]),
        ("dilations", values.get("dilations", (1,) * nd)),
        ("rounding_type", "ceil_torch" if _flag("ceil_mode", values, op_type) else "floor"),
        ("auto_pad", _AUTO_PADS[auto_pad]),
    )


def _p(values: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return (("p", values.get("p", 2)),)


def node(node: Any, *, index_element_type: Any = None, opset: int | None = None) -> Node:
    """Builds the jaxpool callable of an ONNX pooling node.

    ``node`` is an ``onnx.NodeProto`` (or anything with its fields ``op_type``, ``domain``,
    ``attribute``, ``input`` and ``output``) of the default domain:

    =====================  ===========================================  ===================
    ONNX node              jaxpool call                                 result
    =====================  ===========================================  ===================
    MaxPool                ``max_pool(x, ...)``                         ``Y`` or ``(Y, Indices)``
    AveragePool            ``avg_pool(x, ..., exclude_pad=...)``        ``Y``
    LpPool                 ``lp_pool(x, ..., p=p)``                     ``Y``
    GlobalMaxPool          ``adaptive_max_pool(x, 1)``                  ``Y``
    GlobalAveragePool      ``adaptive_avg_pool(x, 1)``                  ``Y``
    GlobalLpPool           ``lp_pool(x, x.shape[2:], 1, p=p)``           ``Y``
    MaxUnpool              ``max_unpool(x, indices, ..., axis=0)``      ``output``
    MaxRoiPool             ``roi_pool(x, rois, pooled_shape, ...)``     ``Y``
    RoiAlign               ``roi_align(x, rois, batch_indices, ...)``   ``Y``
    =====================  ===========================================  ===================

    The module docstring lists where ONNX's semantics are not jaxpool's defaults
    (``ceil_mode``, ``pads``, ``count_include_pad``, ``storage_order``, ``MaxUnpool``'s
    ``output_shape``).

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
      >>> lp = jaxpool.onnx.node(onnx.helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2]))
      >>> lp(jnp.array([[[3.0, 4.0]]])).tolist()
      [[[5.0]]]
    """
    op_type = getattr(node, "op_type", None)
    if not isinstance(op_type, str):
        raise TypeError(f"`node` must be an ONNX NodeProto, got {type(node).__name__}.")
    domain = getattr(node, "domain", "")
    if domain not in ("", "ai.onnx"):
        raise ValueError(
            f"`node` is a {op_type} node of the domain {domain!r}; jaxpool.onnx knows the "
            "default domain ('' or 'ai.onnx')."
        )
    if op_type not in _ATTRIBUTES:
        raise ValueError(
            f"`node` has the op_type {op_type!r}; jaxpool.onnx knows {sorted(_ATTRIBUTES)}."
        )
    if opset is not None and (isinstance(opset, bool) or not isinstance(opset, int) or opset < 1):
        raise ValueError(f"`opset` (={opset!r}) must be None or a positive int.")
    if index_element_type is None:
        index_type = "i64"
    elif isinstance(index_element_type, str) and index_element_type in _INDEX_TYPES:
        index_type = index_element_type
    elif index_element_type in (jnp.int32, np.int32, jnp.int64, np.int64):
        index_type = "i32" if np.dtype(index_element_type) == np.int32 else "i64"
    else:
        raise ValueError(
            f"`index_element_type` (={index_element_type!r}) must be None, 'i32' or 'i64' "
            "(or jnp.int32, jnp.int64)."
        )
    values = _attributes(node, op_type)
    function = _FUNCTIONS[op_type]
    if op_type == "MaxPool":
        outputs = [name for name in node.output]
        with_indices = len(outputs) > 1 and outputs[1] != ""
        storage_order = values.get("storage_order", 0)
        if storage_order not in (0, 1):
            raise ValueError(f"`storage_order` (={storage_order!r}) of MaxPool must be 0 or 1.")
        arguments = _sliding(op_type, values)
        if with_indices:
            arguments += (
                ("return_indices", True),
                ("index_element_type", index_type),
                ("axis", 0),
            )
        return Node(
            op_type,
            function,
            arguments,
            num_outputs=2 if with_indices else 1,
            index_element_type=index_type,
            storage_order=storage_order,
        )
    if op_type == "AveragePool":
        include_pad = _flag("count_include_pad", values, op_type)
        arguments = (*_sliding(op_type, values), ("exclude_pad", not include_pad))
        return Node(op_type, function, arguments, onnx_divisor=include_pad)
    if op_type == "LpPool":
        return Node(op_type, function, (*_sliding(op_type, values), *_p(values)))
    if op_type == "GlobalLpPool":
        return Node(op_type, function, _p(values))
    if op_type == "MaxUnpool":
        if "kernel_shape" not in values:
            raise ValueError("`kernel_shape` is a required attribute of MaxUnpool and is missing.")
        kernel = values["kernel_shape"]
        nd = len(kernel)
        pads = values.get("pads", (0,) * 2 * nd)
        if len(pads) != 2 * nd:
            raise ValueError(
                f"`pads` (={list(pads)}) of MaxUnpool must have two entries per spatial axis "
                f"({2 * nd}): all begins, then all ends."
            )
        arguments = (
            ("kernel", kernel),
            ("strides", values.get("strides", (1,) * nd)),
            ("pads_begin", pads[:nd]),
            ("pads_end", pads[nd:]),
        )
        return Node(op_type, function, arguments)
    if op_type == "MaxRoiPool":
        if "pooled_shape" not in values:
            raise ValueError("`pooled_shape` is a required attribute of MaxRoiPool and is missing.")
        arguments = (
            ("output_size", values["pooled_shape"]),
            ("spatial_scale", values.get("spatial_scale", 1.0)),
            ("method", "max"),
        )
        return Node(op_type, function, arguments)
    if op_type == "RoiAlign":
        default = "output_half_pixel" if opset is not None and opset < 16 else "half_pixel"
        transform = values.get("coordinate_transformation_mode", default)
        if transform not in _ROI_ALIGN_MODES:
            raise ValueError(
                f"`coordinate_transformation_mode` (={transform!r}) of RoiAlign must be one of "
                f"{list(_ROI_ALIGN_MODES)}."
            )
        mode = values.get("mode", "avg")
        if mode not in ("avg", "max"):
            raise ValueError(f"`mode` (={mode!r}) of RoiAlign must be one of ['avg', 'max'].")
        # ONNX's max is the largest weighted corner term, not roi_align's largest sample.
        mode = {"max": roi_align_lib.ONNX_MAX}.get(mode, mode)
        arguments = (
            ("output_size", (values.get("output_height", 1), values.get("output_width", 1))),
            ("spatial_scale", values.get("spatial_scale", 1.0)),
            ("sampling_ratio", values.get("sampling_ratio", 0)),
            ("mode", mode),
            ("aligned_mode", _ROI_ALIGN_MODES[transform]),
        )
        return Node(op_type, function, arguments)
    return Node(op_type, function, (("output_size", 1),))
