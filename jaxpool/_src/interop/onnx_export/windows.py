"""Sliding windows: ``max_pool``, ``avg_pool`` and ``lp_pool`` as MaxPool, AveragePool and
LpPool; ``fractional_max_pool`` refused."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from jaxpool._src import indices as indices_lib
from jaxpool._src import window as window_lib
from jaxpool._src.avg_pool import avg_pool
from jaxpool._src.interop.onnx_export.entry import (
    Export,
    flat_axis,
    merge_pool,
    offsets,
    refused,
)
from jaxpool._src.interop.onnx_export.graph import (
    Call,
    Emit,
    Graph,
    average_types,
    back,
    float_types,
    index_planes,
    indices_output,
    max_compute_type,
    ncx_input,
    ncx_shape,
    returned,
)
from jaxpool._src.interop.onnx_names import CEIL_MODES
from jaxpool._src.lp_pool import lp_pool
from jaxpool._src.max_pool import max_pool


def _window(call: Call) -> window_lib.Window:
    p = call.params
    return window_lib.make_window(
        call.inputs[0].shape,
        p["kernel"],
        p["strides"],
        p["pads_begin"],
        p["pads_end"],
        p["dilations"],
        rounding_type=p["rounding_type"],
        auto_pad=p["auto_pad"],
        data_format=p["data_format"],
    )


def _check_inside(call: Call, window: window_lib.Window) -> None:
    """Refuses a window that holds no input element: ONNX's pools have none."""
    for i in range(window.nd):
        length, k, s, d = (
            window.in_spatial[i],
            window.kernel[i],
            window.strides[i],
            window.dilations[i],
        )
        pb, out = window.pads_begin[i], window.out_spatial[i]
        taps = np.arange(out)[:, None] * s + np.arange(k)[None, :] * d - pb
        inside = ((taps >= 0) & (taps < length)).any(axis=1)
        if not inside.all():
            raise call.refuse(
                f"window {int(np.argmin(inside))} of spatial axis {i} holds no input element "
                f"(kernel {window.kernel}, strides {window.strides}, dilations "
                f"{window.dilations}, pads {window.pads_begin}/{window.pads_end} on an input "
                f"of spatial shape {window.in_spatial}); ONNX's pools have no such window"
            )


def _sliding(call: Call, window: window_lib.Window, *, whole_kernel: bool) -> dict[str, Any]:
    """ONNX's attributes for jaxpool's windows: explicit pads (after ``auto_pad``), and the
    ``ceil_mode`` whose rounding (:data:`CEIL_MODES`) counts the windows that jaxpool's rounding
    gave.  Where neither does, or where ``whole_kernel`` (the divisor is the whole kernel also
    past ``pads_end``, ``avg_pool``'s OpenVINO rule), the windows are floor windows over end
    pads grown to hold them, which ``count_include_pad=1`` counts whole."""
    _check_inside(call, window)
    modes = (0,) if whole_kernel else tuple(CEIL_MODES)
    counted = (
        m for m in modes if window_lib.window_counts(window, CEIL_MODES[m]) == window.out_spatial
    )
    ceil_mode = next(counted, None)
    pads_end = window.pads_end if ceil_mode is not None else window.pads_end_reached
    for name, pads in (("pads_begin", window.pads_begin), ("pads_end", pads_end)):
        if any(pad >= k for pad, k in zip(pads, window.kernel)):
            raise call.refuse(
                f"its pads ({name} {tuple(pads)}) are not all smaller than `kernel` "
                f"{window.kernel}, which ONNX Runtime requires"
            )
    attributes: dict[str, Any] = {
        "kernel_shape": list(window.kernel),
        "strides": list(window.strides),
        "pads": [*window.pads_begin, *pads_end],
    }
    if ceil_mode:
        attributes["ceil_mode"] = 1
    if any(d != 1 for d in window.dilations):
        attributes["dilations"] = list(window.dilations)
    return attributes


def _plan_max_pool(call: Call) -> Emit:
    p = call.params
    window = _window(call)
    attributes = _sliding(call, window, whole_kernel=False)
    dtype = np.dtype(call.inputs[0].dtype)
    compute = max_compute_type(call, dtype)
    with_indices = bool(p["return_indices"])
    axis = 0
    if with_indices:
        axis = indices_lib.normalize_axis(p["axis"], len(window.shape))
    data_format = window.data_format

    def emit(g: Graph, operands: Sequence[ir.Value]) -> list[ir.Value]:
        x, ncx = ncx_input(g, operands[0], window.shape, dtype, compute, data_format)
        out_ncx = ncx_shape(window.out_shape, data_format)
        if not with_indices:
            (y,) = g.ops("MaxPool", x, outputs=[(out_ncx, compute)], **attributes)
            results = [y]
        else:
            y, i = g.ops(
                "MaxPool", x, outputs=[(out_ncx, compute), (out_ncx, np.int64)], **attributes
            )
            i = index_planes(g, i, out_ncx, ncx, axis)
            results = [y, i]
        if compute != dtype:
            results[0] = g.cast(results[0], out_ncx, dtype)
        values = back(g, results[0], out_ncx, dtype, data_format)
        if not with_indices:
            return [values]
        return [values, indices_output(g, call, results[1], out_ncx, data_format)]

    return emit


def _plan_avg_pool(call: Call) -> Emit:
    p = call.params
    if p["divisor_override"] is not None:
        raise call.refuse(
            f"`divisor_override` (={p['divisor_override']}) has no AveragePool attribute"
        )
    window = _window(call)
    padded = any(window.pads_begin) or any(window.pads_end)
    include_pad = not p["exclude_pad"] and padded
    whole_kernel = include_pad and p["divisor_rule"] == "kernel"
    attributes = _sliding(call, window, whole_kernel=whole_kernel)
    if include_pad:
        attributes["count_include_pad"] = 1
    dtype = np.dtype(call.inputs[0].dtype)
    compute, how = average_types(call, dtype)
    data_format = window.data_format

    def emit(g: Graph, operands: Sequence[ir.Value]) -> list[ir.Value]:
        if "dilations" in attributes and g.opset < 19:
            raise call.refuse(
                f"`dilations` {window.dilations} need AveragePool-19; the opset is {g.opset}"
            )
        x, ncx = ncx_input(g, operands[0], window.shape, dtype, compute, data_format)
        out_ncx = ncx_shape(window.out_shape, data_format)
        y = g.op("AveragePool", x, shape=out_ncx, dtype=compute, **attributes)
        y = returned(g, y, out_ncx, dtype, how, p["integer_division"])
        return [back(g, y, out_ncx, dtype, data_format)]

    return emit


def _integer_p(call: Call) -> int:
    p = call.params["p"]
    if float(p) != int(p):
        raise call.refuse(f"`p` (={p!r}) is not an integer, and LpPool's `p` is an int")
    return int(p)


def _plan_lp_pool(call: Call) -> Emit:
    window = _window(call)
    attributes = {**_sliding(call, window, whole_kernel=False), "p": _integer_p(call)}
    dtype = np.dtype(call.inputs[0].dtype)
    compute = float_types(call, dtype)
    data_format = window.data_format

    def emit(g: Graph, operands: Sequence[ir.Value]) -> list[ir.Value]:
        x, ncx = ncx_input(g, operands[0], window.shape, dtype, compute, data_format)
        out_ncx = ncx_shape(window.out_shape, data_format)
        y = g.op("LpPool", x, shape=out_ncx, dtype=compute, **attributes)
        if compute != dtype:
            y = g.cast(y, out_ncx, dtype)
        return [back(g, y, out_ncx, dtype, data_format)]

    return emit


def _merge_max_pool(bind: Callable[..., Any], operands: Sequence[Any], params: dict[str, Any]):
    """As :func:`merge_pool`, the flat positions (``axis`` 0) made each example's own again."""
    outs = merge_pool(bind, operands, params)
    if outs is not None and len(outs) == 2 and flat_axis(params, operands[0].ndim - 1):
        x = operands[0]
        outs[1] = outs[1] - offsets(x.shape[0], math.prod(x.shape[1:]), outs[1])
    return outs


ENTRIES = (
    Export(
        "max_pool",
        "node",
        "MaxPool (with Indices)",
        "explicit pads (auto_pad resolved), ceil_mode for ceil/ceil_torch, dilations; "
        "axis > 0: Indices modulo the counted dimensions (Mod); int16/uint16/bfloat16 pool in "
        "float32 and int32/uint32 in float64 (exact Casts); refused: int64, a window holding "
        "no input element, pads not smaller than the kernel (ONNX Runtime refuses them)",
        _plan_max_pool,
        max_pool,
        ("x",),
        _merge_max_pool,
    ),
    # max_pool between order reversals: its calls reach the exporter as max_pool's (no plan)
    Export(
        "min_pool",
        "composition",
        "Neg (integers: BitwiseNot) + MaxPool + Neg",
        "max_pool's node on the order-reversed input, reversed back; max_pool's refusals",
    ),
    Export(
        "avg_pool",
        "node",
        "AveragePool",
        "count_include_pad=0 for exclude_pad=True or no pads in force; =1 otherwise (the "
        "end pads grow to hold ceil windows where jaxpool's divisor is the whole kernel); "
        "dilations from opset 19; 16-bit floats average in float32; int8/uint8 in float32, "
        "then Round (half to even) or truncation; refused: divisor_override, other integer "
        "types, windows without input elements",
        _plan_avg_pool,
        avg_pool,
        ("x",),
        merge_pool,
    ),
    Export(
        "lp_pool",
        "node",
        "LpPool",
        "as max_pool's windows; also a window over the whole input (ONNX Runtime implements "
        "GlobalLpPool only before opset 22); p must be an integer (ONNX's p is an int); 16-bit "
        "floats pool in float32",
        _plan_lp_pool,
        lp_pool,
        ("x",),
        merge_pool,
    ),
)

REFUSED = (refused("fractional_max_pool", "ONNX has no fractional max pooling"),)
