"""Unpooling: ``max_unpool`` as MaxUnpool (``combine='max'``) or a summing ScatterElements
(``combine='sum'``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from jaxpool._src import indices as indices_lib
from jaxpool._src.interop.onnx_export.entry import (
    INT32_MAX,
    Export,
    flat_axis,
    folded,
    offsets,
    unfolded,
)
from jaxpool._src.interop.onnx_export.graph import Call, Emit, Graph, back, ncx_shape, to_ncx
from jaxpool._src.unpool import max_unpool


def _check(call: Call, dtype: np.dtype) -> None:
    combine = call.params["combine"]
    if combine not in ("max", "sum"):
        raise call.refuse(
            f"`combine` (={combine!r}): ONNX leaves which of the values at a repeated "
            "index wins undefined"
        )
    if combine == "max" and dtype.kind != "f":
        raise call.refuse(f"`y` of dtype {dtype}: MaxUnpool takes floating types only")


def _scatter_sum(
    g: Graph,
    y: ir.Value,
    indices: ir.Value,
    y_ncx: Sequence[int],
    out_ncx: Sequence[int],
    dtype: np.dtype,
) -> ir.Value:
    """``y`` summed into zeros at its flat ``indices``: ScatterElements with ``add``."""
    flat = [math.prod(out_ncx)]
    count = [math.prod(y_ncx)]
    zeros = g.op(
        "ConstantOfShape",
        g.const(np.asarray(flat, np.int64)),
        shape=flat,
        dtype=dtype,
        value=ir.tensor(np.zeros(1, dtype)),
    )
    minus_one = g.const(np.asarray([-1], np.int64))
    updates = g.op("Reshape", y, minus_one, shape=count, dtype=dtype)
    where = g.op("Reshape", indices, minus_one, shape=count, dtype=np.int64)
    summed = g.op(
        "ScatterElements",
        zeros,
        where,
        updates,
        shape=flat,
        dtype=dtype,
        axis=0,
        reduction="add",
    )
    return g.op(
        "Reshape",
        summed,
        g.const(np.asarray(out_ncx, np.int64)),
        shape=out_ncx,
        dtype=dtype,
    )


def _plan_max_unpool(call: Call) -> Emit:
    p = call.params
    data_format = p["data_format"]
    y_shape, dtype = call.inputs[0].shape, np.dtype(call.inputs[0].dtype)
    rank = len(y_shape)
    axis = indices_lib.normalize_axis(p["axis"], rank)
    y_ncx, out_ncx = ncx_shape(y_shape, data_format), ncx_shape(call.outputs[0].shape, data_format)
    plane = math.prod(out_ncx[2:])
    plane_offsets = None
    if axis > 0:
        n, c = out_ncx[:2]
        planes = np.arange(n)[:, None] * c + (np.arange(c)[None, :] if axis == 2 else 0)
        plane_offsets = (planes * plane).reshape(n, c if axis == 2 else 1, *(1,) * (rank - 2))
    # kernel_shape, strides and pads under which MaxUnpool infers `output_shape` itself, so
    # that readers which scatter into the inferred shape (ONNX's reference) agree.
    kernel = [max(1, o - i + 1) for i, o in zip(y_ncx[2:], out_ncx[2:])]
    pads_end = [max(0, i - o) for i, o in zip(y_ncx[2:], out_ncx[2:])]
    _check(call, dtype)

    def emit(g: Graph, operands: Sequence[ir.Value]) -> list[ir.Value]:
        y, _ = to_ncx(g, operands[0], y_shape, dtype, data_format)
        index_dtype = np.dtype(call.inputs[1].dtype)
        indices, _ = to_ncx(g, operands[1], y_shape, index_dtype, data_format)
        if index_dtype != np.int64:
            indices = g.cast(indices, y_ncx, np.int64)
        if plane_offsets is not None:
            indices = g.op("Add", indices, g.const(plane_offsets), shape=y_ncx, dtype=np.int64)
        if p["combine"] == "max":
            x = g.op(
                "MaxUnpool",
                y,
                indices,
                g.const(np.asarray(out_ncx, np.int64)),
                shape=out_ncx,
                dtype=dtype,
                kernel_shape=kernel,
                strides=[1] * (rank - 2),
                pads=[0] * (rank - 2) + pads_end,
            )
        else:
            x = _scatter_sum(g, y, indices, y_ncx, out_ncx, dtype)
        return [back(g, x, out_ncx, dtype, data_format)]

    return emit


def _merge_max_unpool(
    bind: Callable[..., Any], operands: Sequence[Any], params: dict[str, Any]
) -> list[Any] | None:
    """Unpooling of ``[B, N, ...]`` as one call over ``[B * N, ...]`` into an output ``B``
    times as long, while its flat positions (``axis`` 0) fit int32; those are offset by the
    examples before each in the merged output."""
    y, indices = operands
    shape = tuple(params["output_shape"])
    whole = flat_axis(params, y.ndim - 1)
    b = y.shape[0]
    if whole and b * math.prod(shape) > INT32_MAX:
        return None
    merged = folded(operands)
    # Added also where they are 0: jax2onnx folds a reshape of a reshape into one and loses the
    # first's result where the model also returns it (the indices).
    step = math.prod(shape) if whole else 0
    merged[1] = (indices + offsets(b, step, indices)).reshape(merged[1].shape)
    params = {**params, "output_shape": (b * shape[0], *shape[1:])}
    return unfolded(bind(*merged, **params), b)


ENTRIES = (
    Export(
        "max_unpool",
        "node or composition",
        "MaxUnpool (combine='max'); ScatterElements (combine='sum')",
        "MaxUnpool with output_shape, kernel_shape/strides/pads chosen so that its inferred "
        "shape is output_shape; indices of axis 1 or 2 get their planes' offsets (Add); "
        "combine='sum': ScatterElements with reduction='add' over the flat output; refused: "
        "combine='torch' (ONNX leaves the winner of a repeated index undefined)",
        _plan_max_unpool,
        max_unpool,
        ("y", "indices"),
        _merge_max_unpool,
    ),
)
