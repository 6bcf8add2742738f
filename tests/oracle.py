"""Reference outputs computed by running the OpenVINO runtime (CPU plugin).

Every function takes NCX NumPy inputs and returns NumPy outputs of the compiled model.  Models
are cached by their attributes, so a test grid compiles each configuration once.
"""

from __future__ import annotations

import functools

import numpy as np
import openvino as ov
import openvino.opset1 as opset1
import openvino.opset8 as opset8
import openvino.opset14 as opset14

_CORE = ov.Core()
_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
_OPSETS = {1: opset1, 8: opset8, 14: opset14}


def _ov_type(dtype: np.dtype) -> ov.Type:
    return ov.Type(np.dtype(dtype))


@functools.cache
def _compile(builder, shape: tuple[int, ...], dtype: str, attrs: tuple):
    param = opset8.parameter(list(shape), _ov_type(np.dtype(dtype)))
    node = builder(param, **dict(attrs))
    model = ov.Model(node.outputs(), [param])
    return _CORE.compile_model(model, "CPU", _CONFIG)


def _run(builder, x: np.ndarray, **attrs) -> list[np.ndarray]:
    key = tuple(sorted(attrs.items()))
    compiled = _compile(builder, tuple(x.shape), np.dtype(x.dtype).str, key)
    result = compiled([x])
    return [np.asarray(result[out]) for out in compiled.outputs]


def _per_axis(value, nd, default):
    if value is None:
        return [default] * nd
    if isinstance(value, int):
        return [value] * nd
    return list(value)


def _max_pool_node(
    param,
    *,
    opset,
    kernel,
    strides,
    pads_begin,
    pads_end,
    dilations,
    rounding_type,
    auto_pad,
    index_element_type,
    axis,
):
    args = dict(
        strides=list(strides),
        pads_begin=list(pads_begin),
        pads_end=list(pads_end),
        kernel_shape=list(kernel),
        rounding_type=rounding_type,
        auto_pad=auto_pad,
    )
    if opset == 1:
        return opset1.max_pool(param, **args)
    return _OPSETS[opset].max_pool(
        param, dilations=list(dilations), index_element_type=index_element_type, axis=axis, **args
    )


def max_pool(
    x,
    kernel,
    strides=None,
    pads_begin=None,
    pads_end=None,
    *,
    dilations=None,
    rounding_type="floor",
    auto_pad="explicit",
    opset=8,
    index_element_type="i64",
    axis=0,
):
    """OpenVINO MaxPool-``opset`` on NCX ``x``: ``(y, indices)`` (``(y,)`` for opset 1)."""
    nd = x.ndim - 2
    kernel = _per_axis(kernel, nd, None)
    return _run(
        _max_pool_node,
        np.ascontiguousarray(x),
        opset=opset,
        kernel=tuple(kernel),
        strides=tuple(_per_axis(strides, nd, None) if strides is not None else kernel),
        pads_begin=tuple(_per_axis(pads_begin, nd, 0)),
        pads_end=tuple(_per_axis(pads_end, nd, 0)),
        dilations=tuple(_per_axis(dilations, nd, 1)),
        rounding_type=rounding_type,
        auto_pad=auto_pad,
        index_element_type=index_element_type,
        axis=axis,
    )


def _avg_pool_node(
    param, *, opset, kernel, strides, pads_begin, pads_end, exclude_pad, rounding_type, auto_pad
):
    return _OPSETS[opset].avg_pool(
        param,
        strides=list(strides),
        pads_begin=list(pads_begin),
        pads_end=list(pads_end),
        kernel_shape=list(kernel),
        exclude_pad=exclude_pad,
        rounding_type=rounding_type,
        auto_pad=auto_pad,
    )


def avg_pool(
    x,
    kernel,
    strides=None,
    pads_begin=None,
    pads_end=None,
    *,
    exclude_pad=False,
    rounding_type="floor",
    auto_pad="explicit",
    opset=14,
):
    """OpenVINO AvgPool-``opset`` (1 or 14) on NCX ``x``."""
    nd = x.ndim - 2
    kernel = _per_axis(kernel, nd, None)
    return _run(
        _avg_pool_node,
        np.ascontiguousarray(x),
        opset=opset,
        kernel=tuple(kernel),
        strides=tuple(_per_axis(strides, nd, None) if strides is not None else kernel),
        pads_begin=tuple(_per_axis(pads_begin, nd, 0)),
        pads_end=tuple(_per_axis(pads_end, nd, 0)),
        exclude_pad=bool(exclude_pad),
        rounding_type=rounding_type,
        auto_pad=auto_pad,
    )[0]


def _adaptive_node(param, *, kind, output_size, index_element_type):
    size = opset8.constant(np.asarray(output_size, np.int64))
    if kind == "max":
        return opset8.adaptive_max_pool(param, size, index_element_type=index_element_type)
    return opset8.adaptive_avg_pool(param, size)


def adaptive_max_pool(x, output_size, *, index_element_type="i32"):
    """OpenVINO AdaptiveMaxPool-8 on NCX ``x``: ``(y, indices)``.

    The CPU plugin compiles it with i32 indices only.
    """
    return _run(
        _adaptive_node,
        np.ascontiguousarray(x),
        kind="max",
        output_size=tuple(output_size),
        index_element_type=index_element_type,
    )


def adaptive_avg_pool(x, output_size):
    """OpenVINO AdaptiveAvgPool-8 on NCX ``x``."""
    return _run(
        _adaptive_node,
        np.ascontiguousarray(x),
        kind="avg",
        output_size=tuple(output_size),
        index_element_type="i32",
    )[0]


def to_nxc(a: np.ndarray) -> np.ndarray:
    return np.moveaxis(a, 1, -1)


def to_ncx(a: np.ndarray) -> np.ndarray:
    return np.moveaxis(a, -1, 1)
