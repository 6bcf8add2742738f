"""Adaptive pools: a global node where the output is 1, a sliding window where the bins are one,
else each axis's bins gathered and reduced."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from jaxpool._src import bins as bins_lib
from jaxpool._src import window as window_lib
from jaxpool._src.adaptive_avg_pool import adaptive_avg_pool
from jaxpool._src.adaptive_max_pool import adaptive_max_pool
from jaxpool._src.interop.onnx_export.entry import Export, merge_pool
from jaxpool._src.interop.onnx_export.graph import (
    Call,
    Emit,
    Graph,
    average_types,
    back,
    index_planes,
    indices_output,
    max_compute_type,
    ncx_input,
    ncx_shape,
    returned,
)


def _uniform_bins(length: int, out: int) -> tuple[int, int] | None:
    """``(kernel, stride)`` where the ``out`` bins over ``length`` are one sliding window."""
    starts, ends = bins_lib.bounds(length, out)
    sizes = ends - starts
    if (sizes != sizes[0]).any():
        return None
    kernel = int(sizes[0])
    if out == 1:
        return kernel, 1
    steps = np.diff(starts)
    if steps[0] < 1 or (steps != steps[0]).any():
        return None
    return kernel, int(steps[0])


def _reduce(
    g: Graph, op_type: str, value: ir.Value, axis: int, shape: Sequence[int], dtype: Any
) -> ir.Value:
    """A reduction over ``axis`` without keeping it (ReduceSum's ``axes`` is an input from
    opset 13, the others' from opset 18)."""
    out = [d for i, d in enumerate(shape) if i != axis]
    if g.opset >= (13 if op_type == "ReduceSum" else 18):
        axes = g.const(np.asarray([axis], np.int64))
        return g.op(op_type, value, axes, shape=out, dtype=dtype, keepdims=0)
    return g.op(op_type, value, shape=out, dtype=dtype, axes=[axis], keepdims=0)


def _gather_bins(
    g: Graph, value: ir.Value, shape: Sequence[int], dtype: Any, axis: int, out: int
) -> tuple[ir.Value, list[int], np.ndarray, np.ndarray]:
    """The elements of every bin along ``axis``: shape ``[..., out, widest, ...]``, a shorter
    bin repeating its last element; with the bins' starts and each tap's realness."""
    length = shape[axis]
    starts, ends = bins_lib.bounds(length, out)
    width = int((ends - starts).max())
    taps = starts[:, None] + np.arange(width)[None, :]
    real = taps < ends[:, None]
    positions = np.minimum(taps, ends[:, None] - 1).reshape(-1).astype(np.int64)
    gathered_shape = [*shape[:axis], out * width, *shape[axis + 1 :]]
    binned_shape = [*shape[:axis], out, width, *shape[axis + 1 :]]
    gathered = g.op(
        "Gather", value, g.const(positions), shape=gathered_shape, dtype=dtype, axis=axis
    )
    binned = g.op(
        "Reshape",
        gathered,
        g.const(np.asarray(binned_shape, np.int64)),
        shape=binned_shape,
        dtype=dtype,
    )
    return binned, binned_shape, starts, real


def _along(values: np.ndarray, axis: int, rank: int) -> np.ndarray:
    """``values`` (of rank 1 or 2) placed from dimension ``axis`` of a rank-``rank`` array."""
    shape = [1] * rank
    shape[axis : axis + values.ndim] = values.shape
    return values.reshape(shape)


def _adaptive_max_bins(
    g: Graph,
    x: ir.Value,
    ncx: Sequence[int],
    dtype: Any,
    out_spatial: Sequence[int],
    with_indices: bool,
):
    """Max (and the plane position of the first maximum) over the bins, one spatial axis at a
    time from the last: per axis, the bins' elements gathered, ReduceMax, and ArgMax (its first
    maximum) with the positions carried from the axes already reduced."""
    shape = list(ncx)
    rank = len(shape)
    value, position = x, None
    for axis in reversed(range(2, rank)):
        out = out_spatial[axis - 2]
        before = list(shape)
        binned, binned_shape, starts, _ = _gather_bins(g, value, before, dtype, axis, out)
        shape[axis] = out
        value = _reduce(g, "ReduceMax", binned, axis + 1, binned_shape, dtype)
        if not with_indices:
            continue
        keep_shape = [*shape[: axis + 1], 1, *shape[axis + 1 :]]
        first = g.op(
            "ArgMax",
            binned,
            shape=keep_shape,
            dtype=np.int64,
            axis=axis + 1,
            keepdims=1,
            select_last_index=0,
        )
        stride = math.prod(ncx[axis + 1 :])
        start = g.const(_along((starts * stride).astype(np.int64), axis, rank + 1))
        moved = g.op(
            "Mul", first, g.const(np.asarray(stride, np.int64)), shape=keep_shape, dtype=np.int64
        )
        here = g.op("Add", moved, start, shape=keep_shape, dtype=np.int64)
        if position is not None:
            carried, _, _, _ = _gather_bins(g, position, before, np.int64, axis, out)
            chosen = g.op(
                "GatherElements", carried, first, shape=keep_shape, dtype=np.int64, axis=axis + 1
            )
            here = g.op("Add", here, chosen, shape=keep_shape, dtype=np.int64)
        position = g.op(
            "Reshape", here, g.const(np.asarray(shape, np.int64)), shape=shape, dtype=np.int64
        )
    return value, position


def _adaptive_window(call: Call) -> window_lib.AdaptiveWindow:
    p = call.params
    return window_lib.make_adaptive_window(call.inputs[0].shape, p["output_size"], p["data_format"])


def _plan_adaptive_max_pool(call: Call) -> Emit:
    window = _adaptive_window(call)
    with_indices = bool(call.params["return_indices"])
    dtype = np.dtype(call.inputs[0].dtype)
    compute = max_compute_type(call, dtype)
    uniform = [_uniform_bins(n, o) for n, o in zip(window.in_spatial, window.out_spatial)]
    data_format = window.data_format

    def emit(g: Graph, operands: Sequence[ir.Value]) -> list[ir.Value]:
        x, ncx = ncx_input(g, operands[0], window.shape, dtype, compute, data_format)
        out_ncx = ncx_shape(window.out_shape, data_format)
        indices = None
        if window.is_global and not with_indices:
            y = g.op("GlobalMaxPool", x, shape=out_ncx, dtype=compute)
        elif all(u is not None for u in uniform):
            attributes = {
                "kernel_shape": [u[0] for u in uniform if u],
                "strides": [u[1] for u in uniform if u],
            }
            if not with_indices:
                y = g.op("MaxPool", x, shape=out_ncx, dtype=compute, **attributes)
            else:
                y, indices = g.ops(
                    "MaxPool", x, outputs=[(out_ncx, compute), (out_ncx, np.int64)], **attributes
                )
                indices = index_planes(g, indices, out_ncx, ncx, 2)
        else:
            y, indices = _adaptive_max_bins(g, x, ncx, compute, window.out_spatial, with_indices)
        if compute != dtype:
            y = g.cast(y, out_ncx, dtype)
        results = [back(g, y, out_ncx, dtype, data_format)]
        if indices is not None:
            results.append(indices_output(g, call, indices, out_ncx, data_format))
        return results

    return emit


def _plan_adaptive_avg_pool(call: Call) -> Emit:
    window = _adaptive_window(call)
    dtype = np.dtype(call.inputs[0].dtype)
    compute, how = average_types(call, dtype)
    uniform = [_uniform_bins(n, o) for n, o in zip(window.in_spatial, window.out_spatial)]
    data_format = window.data_format

    def emit(g: Graph, operands: Sequence[ir.Value]) -> list[ir.Value]:
        x, ncx = ncx_input(g, operands[0], window.shape, dtype, compute, data_format)
        out_ncx = ncx_shape(window.out_shape, data_format)
        if window.is_global:
            y = g.op("GlobalAveragePool", x, shape=out_ncx, dtype=compute)
        elif all(u is not None for u in uniform):
            y = g.op(
                "AveragePool",
                x,
                shape=out_ncx,
                dtype=compute,
                kernel_shape=[u[0] for u in uniform if u],
                strides=[u[1] for u in uniform if u],
            )
        else:
            y = _adaptive_sums(g, x, ncx, compute, window)
        y = returned(g, y, out_ncx, dtype, how)
        return [back(g, y, out_ncx, dtype, data_format)]

    return emit


def _adaptive_sums(
    g: Graph,
    x: ir.Value,
    ncx: Sequence[int],
    dtype: Any,
    window: window_lib.AdaptiveWindow,
) -> ir.Value:
    """The bins' averages: per axis, the bins' elements gathered and summed (a repeated
    element masked out with Where, which keeps infinities), then one division by the bins'
    sizes."""
    shape = list(ncx)
    rank = len(shape)
    value = x
    sizes = np.ones((1,) * rank, np.float64)
    for axis in range(2, rank):
        out = window.out_spatial[axis - 2]
        starts, ends = bins_lib.bounds(shape[axis], out)
        sizes = sizes * _along((ends - starts).astype(np.float64), axis, rank)
        binned, binned_shape, _, real = _gather_bins(g, value, shape, dtype, axis, out)
        if not real.all():
            mask = g.const(_along(real, axis, rank + 1))
            zero = g.const(np.zeros((), dtype))
            binned = g.op("Where", mask, binned, zero, shape=binned_shape, dtype=dtype)
        shape[axis] = out
        value = _reduce(g, "ReduceSum", binned, axis + 1, binned_shape, dtype)
    return g.op("Div", value, g.const(sizes.astype(dtype)), shape=shape, dtype=dtype)


ENTRIES = (
    Export(
        "adaptive_max_pool",
        "node or composition",
        "GlobalMaxPool, MaxPool; Gather + ReduceMax / ArgMax",
        "output 1 everywhere: GlobalMaxPool (MaxPool over the whole plane with indices); bins "
        "of one size and stride on every axis: MaxPool; other bins: per axis a Gather of each "
        "bin's elements and a ReduceMax (with indices: ArgMax and GatherElements), axis by axis",
        _plan_adaptive_max_pool,
        adaptive_max_pool,
        ("x",),
        merge_pool,
    ),
    Export(
        "adaptive_avg_pool",
        "node or composition",
        "GlobalAveragePool, AveragePool; Gather + Where + ReduceSum + Div",
        "as adaptive_max_pool: the bins' sums per axis, divided once by the bin sizes",
        _plan_adaptive_avg_pool,
        adaptive_avg_pool,
        ("x",),
        merge_pool,
    ),
)
