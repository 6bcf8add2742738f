"""Reference outputs of the OpenVINO runtime (CPU plugin): NCX NumPy inputs, NumPy outputs of
the compiled model.  Models are cached by their attributes, so a test grid compiles each
configuration once.
"""

from __future__ import annotations

import functools

import numpy as np
import openvino as ov
import openvino.opset1 as opset1
import openvino.opset8 as opset8
import openvino.opset9 as opset9
import openvino.opset14 as opset14
import openvino.opset16 as opset16
from reference import _per_axis

_CORE = ov.Core()
_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
_OPSETS = {1: opset1, 8: opset8, 14: opset14, 16: opset16}


@functools.cache
def _compile(builder, inputs: tuple[tuple[tuple[int, ...], str], ...], attrs: tuple):
    params = [opset8.parameter(list(shape), ov.Type(np.dtype(dtype))) for shape, dtype in inputs]
    model = ov.Model(builder(*params, **dict(attrs)).outputs(), params)
    return _CORE.compile_model(model, "CPU", _CONFIG)


def _run(builder, *inputs: np.ndarray, **attrs) -> list[np.ndarray]:
    inputs = [np.ascontiguousarray(x) for x in inputs]
    key = tuple((tuple(x.shape), np.dtype(x.dtype).str) for x in inputs)
    compiled = _compile(builder, key, tuple(sorted(attrs.items())))
    result = compiled(inputs)
    return [np.asarray(result[out]) for out in compiled.outputs]


def _window(x, kernel, strides, pads_begin, pads_end, dilations=None, **attrs):
    """The runtime's attributes of a window over NCX ``x`` (``strides`` defaults to ``kernel``,
    the pads to 0, ``dilations`` to 1 where given)."""
    nd = x.ndim - 2
    kernel = _per_axis(kernel, nd, None)
    window = dict(
        kernel_shape=kernel,
        strides=kernel if strides is None else _per_axis(strides, nd, None),
        pads_begin=_per_axis(pads_begin, nd, 0),
        pads_end=_per_axis(pads_end, nd, 0),
        **attrs,
    )
    if dilations is not None:
        window["dilations"] = _per_axis(dilations, nd, 1)
    return window


def _pool_node(param, *, op, opset, **attrs):
    attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}
    return getattr(_OPSETS[opset], op)(param, **attrs)


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
    extra = {} if opset == 1 else dict(index_element_type=index_element_type, axis=axis)
    dilations = None if opset == 1 else (1 if dilations is None else dilations)
    window = _window(x, kernel, strides, pads_begin, pads_end, dilations, **extra)
    window.update(rounding_type=rounding_type, auto_pad=auto_pad)
    return _run(_pool_node, x, op="max_pool", opset=opset, **window)


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
    dilations=None,
    opset=14,
):
    """OpenVINO AvgPool-``opset`` (1, 14 or 16: ``dilations`` needs 16) on NCX ``x``."""
    window = _window(x, kernel, strides, pads_begin, pads_end, dilations)
    window.update(exclude_pad=bool(exclude_pad), rounding_type=rounding_type, auto_pad=auto_pad)
    return _run(_pool_node, x, op="avg_pool", opset=opset, **window)[0]


def _adaptive_node(param, *, kind, output_size, index_element_type):
    size = opset8.constant(np.asarray(output_size, np.int64))
    if kind == "max":
        return opset8.adaptive_max_pool(param, size, index_element_type=index_element_type)
    return opset8.adaptive_avg_pool(param, size)


def adaptive_max_pool(x, output_size, *, index_element_type="i32"):
    """OpenVINO AdaptiveMaxPool-8 on NCX ``x``: ``(y, indices)`` (the CPU plugin compiles it
    with i32 indices only)."""
    size, index = tuple(output_size), index_element_type
    return _run(_adaptive_node, x, kind="max", output_size=size, index_element_type=index)


def adaptive_avg_pool(x, output_size):
    """OpenVINO AdaptiveAvgPool-8 on NCX ``x``."""
    return _run(
        _adaptive_node, x, kind="avg", output_size=tuple(output_size), index_element_type="i32"
    )[0]


to_nxc = functools.partial(np.moveaxis, source=1, destination=-1)
to_ncx = functools.partial(np.moveaxis, source=-1, destination=1)


def roi_align(
    x, rois, batch_indices, output_size, *, spatial_scale, sampling_ratio, mode, aligned_mode
):
    """OpenVINO ROIAlign-9 on NCX ``x`` (float32), ``(x_1, y_1, x_2, y_2)`` boxes and their
    batch indices (all in ``[0, N)``)."""
    inputs = [np.ascontiguousarray(a, np.float32) for a in (x, rois)]
    inputs.append(np.asarray(batch_indices, np.int32))
    attrs = dict(pooled_h=int(output_size[0]), pooled_w=int(output_size[1]), mode=mode)
    attrs.update(spatial_scale=float(spatial_scale), sampling_ratio=int(sampling_ratio))
    attrs["aligned_mode"] = aligned_mode
    return _run(opset9.roi_align, *inputs, **attrs)[0]


# --------------------------------------------------------------------------------------------
# ExperimentalDetectronROIFeatureExtractor-6: the openvino package has no Python builder for it,
# so its model is read from IR text.
# --------------------------------------------------------------------------------------------


def _dims(shape) -> str:
    return "".join(f"<dim>{d}</dim>" for d in shape)


def _extractor_ir(rois_shape, level_shapes, output_size, sampling_ratio, pyramid_scales, aligned):
    shapes = [rois_shape, *level_shapes]
    op = len(shapes)
    out_shapes = [(rois_shape[0], level_shapes[0][1], output_size, output_size), rois_shape]
    layers = [
        f'<layer id="{i}" name="input{i}" type="Parameter" version="opset1">'
        f'<data shape="{",".join(map(str, s))}" element_type="f32"/>'
        f'<output><port id="0" precision="FP32">{_dims(s)}</port></output></layer>'
        for i, s in enumerate(shapes)
    ]
    layers.append(
        f'<layer id="{op}" name="extractor" type="ExperimentalDetectronROIFeatureExtractor" '
        f'version="opset6"><data aligned="{str(aligned).lower()}" output_size="{output_size}" '
        f'pyramid_scales="{",".join(map(str, pyramid_scales))}" '
        f'sampling_ratio="{sampling_ratio}"/><input>'
        + "".join(f'<port id="{i}">{_dims(s)}</port>' for i, s in enumerate(shapes))
        + "</input><output>"
        + "".join(
            f'<port id="{op + j}" precision="FP32">{_dims(s)}</port>'
            for j, s in enumerate(out_shapes)
        )
        + "</output></layer>"
    )
    layers += [
        f'<layer id="{op + 1 + j}" name="output{j}" type="Result" version="opset1">'
        f'<input><port id="0">{_dims(s)}</port></input></layer>'
        for j, s in enumerate(out_shapes)
    ]
    edges = [
        f'<edge from-layer="{i}" from-port="0" to-layer="{op}" to-port="{i}"/>' for i in range(op)
    ]
    edges += [
        f'<edge from-layer="{op}" from-port="{op + j}" to-layer="{op + 1 + j}" to-port="0"/>'
        for j in range(2)
    ]
    return (
        '<?xml version="1.0"?><net name="extractor" version="11"><layers>'
        + "".join(layers)
        + "</layers><edges>"
        + "".join(edges)
        + "</edges></net>"
    )


@functools.cache
def _compile_extractor(*key):
    model = _CORE.read_model(_extractor_ir(*key), ov.Tensor(np.empty(0, np.uint8)))
    return _CORE.compile_model(model, "CPU", _CONFIG)


def roi_feature_extractor(
    levels, rois, output_size, *, sampling_ratio, pyramid_scales, aligned=False
):
    """OpenVINO ExperimentalDetectronROIFeatureExtractor-6: ``(features [R, C, output_size,
    output_size], rois [R, 4])`` for NCX ``levels`` of one image each (the runtime refuses
    more) and ``(x_1, y_1, x_2, y_2)`` ``rois`` in image pixels."""
    rois = np.ascontiguousarray(rois, np.float32)
    levels = [np.ascontiguousarray(level, np.float32) for level in levels]
    shapes, scales = tuple(level.shape for level in levels), tuple(int(s) for s in pyramid_scales)
    compiled = _compile_extractor(
        rois.shape, shapes, int(output_size), int(sampling_ratio), scales, bool(aligned)
    )
    result = compiled([rois, *levels])
    return tuple(np.asarray(result[out]) for out in compiled.outputs)
