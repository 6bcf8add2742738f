"""The implementation of :func:`jaxpool.onnx.export`: jaxpool's ops as ONNX nodes, through
jax2onnx (imported here, and this module only on first use).

While jax2onnx traces a model, :mod:`jaxpool._src.exporting` sends every call of a public op to
:func:`_bind`, which binds the op's primitive (``jaxpool_<op>``) with the call's arrays as
operands and every other argument as a parameter.  The primitive's abstract evaluation and
implementation are the op itself, so shapes, dtypes and errors are the op's.  jax2onnx then
lowers each primitive through the op's entry of :data:`EXPORTS`: a *plan*, a function from the
call (its parameters, the shapes and dtypes of its operands and results, the opset) to the
nodes that compute it, which refuses with a ``ValueError`` what ONNX cannot express exactly.
The plan runs once at trace time too, so a refusal names the op where the model calls it.

The per-op table (:data:`TABLE`, also the docs' table) says for every public op whether it
exports as its ONNX node, as a composition of nodes, or not at all, and why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import onnx_ir as ir
from jax.extend.core import Primitive
from jax.interpreters import batching
from jax2onnx.plugins._patching import AssignSpec, MonkeyPatchSpec
from jax2onnx.plugins.plugin_system import PrimitiveLeafPlugin, register_primitive

from jaxpool._src import bins as bins_lib
from jaxpool._src import exporting
from jaxpool._src import window as window_lib
from jaxpool._src.adaptive_avg_pool import adaptive_avg_pool
from jaxpool._src.adaptive_max_pool import adaptive_max_pool
from jaxpool._src.avg_pool import avg_pool
from jaxpool._src.lp_pool import lp_pool
from jaxpool._src.max_pool import max_pool
from jaxpool._src.roi_align import ONNX_MAX, roi_align, roi_align_any_mode
from jaxpool._src.roi_pool import roi_pool
from jaxpool._src.unpool import max_unpool


class Row(NamedTuple):
    """How a public op exports: ``"node"`` (its ONNX node, with the Transposes of NXC and the
    Casts of types the node lacks), ``"composition"`` (several nodes) or ``"refused"`` (a
    ``ValueError``), and what decides it."""

    op: str
    export: str
    onnx: str
    notes: str


# The per-op table: generated into the docs, and the reasons the refusals give.
TABLE: tuple[Row, ...] = (
    Row(
        "max_pool",
        "node",
        "MaxPool (with Indices)",
        "explicit pads (auto_pad resolved), ceil_mode for ceil/ceil_torch, dilations; "
        "axis > 0: Indices modulo the counted dimensions (Mod); int16/uint16/bfloat16 pool in "
        "float32 and int32/uint32 in float64 (exact Casts); refused: int64, a window holding "
        "no input element, pads not smaller than the kernel (ONNX Runtime refuses them)",
    ),
    Row(
        "min_pool",
        "composition",
        "Neg (integers: BitwiseNot) + MaxPool + Neg",
        "max_pool's node on the order-reversed input, reversed back; max_pool's refusals",
    ),
    Row(
        "avg_pool",
        "node",
        "AveragePool",
        "count_include_pad=0 for exclude_pad=True or no pads in force; =1 otherwise (the "
        "end pads grow to hold ceil windows where jaxpool's divisor is the whole kernel); "
        "dilations from opset 19; 16-bit floats average in float32; int8/uint8 in float32, "
        "then Round (half to even) or truncation; refused: divisor_override, other integer "
        "types, windows without input elements",
    ),
    Row(
        "lp_pool",
        "node",
        "LpPool",
        "as max_pool's windows; also a window over the whole input (ONNX Runtime implements "
        "GlobalLpPool only before opset 22); p must be an integer (ONNX's p is an int); 16-bit "
        "floats pool in float32",
    ),
    Row(
        "adaptive_max_pool",
        "node or composition",
        "GlobalMaxPool, MaxPool; Gather + ReduceMax / ArgMax",
        "output 1 everywhere: GlobalMaxPool (MaxPool over the whole plane with indices); bins "
        "of one size and stride on every axis: MaxPool; other bins: per axis a Gather of each "
        "bin's elements and a ReduceMax (with indices: ArgMax and GatherElements), axis by axis",
    ),
    Row(
        "adaptive_avg_pool",
        "node or composition",
        "GlobalAveragePool, AveragePool; Gather + Where + ReduceSum + Div",
        "as adaptive_max_pool: the bins' sums per axis, divided once by the bin sizes",
    ),
    Row(
        "max_unpool",
        "node or composition",
        "MaxUnpool (combine='max'); ScatterElements (combine='sum')",
        "MaxUnpool with output_shape, kernel_shape/strides/pads chosen so that its inferred "
        "shape is output_shape; indices of axis 1 or 2 get their planes' offsets (Add); "
        "combine='sum': ScatterElements with reduction='add' over the flat output; refused: "
        "combine='torch' (ONNX leaves the winner of a repeated index undefined)",
    ),
    Row(
        "roi_pool",
        "node",
        "MaxRoiPool",
        "method='max'; refused: method='bilinear' (no ONNX node samples bilinearly per bin)",
    ),
    Row(
        "roi_align",
        "node",
        "RoiAlign",
        "aligned_mode 'half_pixel_for_nn' -> half_pixel, 'asymmetric' -> output_half_pixel, "
        "'half_pixel' -> half_pixel of rois + 0.5; mode='avg'; batch_indices cast to int64; "
        "refused: mode='max' (ONNX's max is the largest weighted corner term, not the largest "
        "sample); jaxpool.onnx.node's RoiAlign max exports as RoiAlign max",
    ),
    Row("roi_align_rotated", "refused", "", "ONNX has no rotated RoiAlign"),
    Row("psroi_pool", "refused", "", "ONNX has no position-sensitive ROI pooling"),
    Row("psroi_align", "refused", "", "ONNX has no position-sensitive RoiAlign"),
    Row(
        "deformable_psroi_pool",
        "refused",
        "",
        "ONNX has no deformable position-sensitive ROI pooling",
    ),
    Row(
        "multilevel_roi_align",
        "refused",
        "",
        "ONNX has no pyramid RoiAlign; call roi_align per level to export RoiAlign nodes",
    ),
    Row("fractional_max_pool", "refused", "", "ONNX has no fractional max pooling"),
)

_REFUSED = {row.op: row.notes for row in TABLE if row.export == "refused"}


# --------------------------------------------------------------------------------------------
# The call of an op, as plans see it, and the graph they write into.
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Call:
    """One call of an op: its parameters (every argument but the operands, defaults
    included), its operands' and results' shapes and dtypes, and the opset (``None`` while
    tracing, before the opset is known)."""

    op: str
    params: dict[str, Any]
    inputs: tuple[jax.ShapeDtypeStruct, ...]
    outputs: tuple[jax.ShapeDtypeStruct, ...]
    opset: int | None

    def refuse(self, what: str) -> ValueError:
        return ValueError(f"jaxpool.{self.op} cannot be exported to ONNX: {what}.")


Emit = Callable[["Graph", Sequence[ir.Value]], Sequence[ir.Value]]
Plan = Callable[[Call], Emit]


class Graph:
    """Writes nodes through jax2onnx's builder, giving every value its type and shape."""

    def __init__(self, ctx: Any):
        self.ctx = ctx

    def op(
        self,
        op_type: str,
        *inputs: ir.Value | None,
        shape: Sequence[int],
        dtype: Any,
        **attributes: Any,
    ) -> ir.Value:
        return self.ops(op_type, *inputs, outputs=((shape, dtype),), **attributes)[0]

    def ops(
        self,
        op_type: str,
        *inputs: ir.Value | None,
        outputs: Sequence[tuple[Sequence[int], Any]],
        **attributes: Any,
    ) -> tuple[ir.Value, ...]:
        names = [self.ctx.fresh_name(op_type) for _ in outputs]
        made = getattr(self.ctx.builder, op_type)(*inputs, _outputs=names, **attributes)
        values = (made,) if len(outputs) == 1 else tuple(made)
        for value, (shape, dtype) in zip(values, outputs):
            value.type = ir.TensorType(ir.DataType.from_numpy(np.dtype(dtype)))
            value.shape = ir.Shape([int(d) for d in shape])
        return values

    def const(self, array: Any) -> ir.Value:
        return self.ctx.builder.add_initializer_from_array(
            self.ctx.fresh_name("jaxpool_const"), np.asarray(array)
        )

    def cast(self, value: ir.Value, shape: Sequence[int], dtype: Any) -> ir.Value:
        to = ir.DataType.from_numpy(np.dtype(dtype))
        return self.op("Cast", value, shape=shape, dtype=dtype, to=int(to.value))

    def transpose(
        self, value: ir.Value, shape: Sequence[int], dtype: Any, perm: Sequence[int]
    ) -> ir.Value:
        out = [shape[p] for p in perm]
        return self.op("Transpose", value, shape=out, dtype=dtype, perm=list(perm))


# NXC -> NCX and back.
def _to_ncx_perm(rank: int) -> list[int]:
    return [0, rank - 1, *range(1, rank - 1)]


def _from_ncx_perm(rank: int) -> list[int]:
    return [0, *range(2, rank), 1]


def _ncx(g: Graph, value: ir.Value, shape: Sequence[int], dtype: Any, data_format: str):
    """The operand in NCX, and its NCX shape."""
    if data_format == "NCX":
        return value, tuple(shape)
    perm = _to_ncx_perm(len(shape))
    return g.transpose(value, shape, dtype, perm), tuple(shape[p] for p in perm)


def _ncx_input(
    g: Graph, value: ir.Value, shape: Sequence[int], dtype: Any, compute: Any, data_format: str
):
    """The input of a pooling node: in NCX and in the type the node computes in, and its NCX
    shape."""
    x, ncx = _ncx(g, value, shape, dtype, data_format)
    return (x if compute == dtype else g.cast(x, ncx, compute)), ncx


def _indices_output(
    g: Graph, call: Call, indices: ir.Value, out_ncx: Sequence[int], data_format: str
) -> ir.Value:
    """A node's int64 NCX indices as the op's indices output: its dtype, its layout."""
    index_dtype = np.dtype(call.outputs[1].dtype)
    if index_dtype != np.int64:
        indices = g.cast(indices, out_ncx, index_dtype)
    return _back(g, indices, out_ncx, index_dtype, data_format)


def _back(g: Graph, value: ir.Value, ncx_shape: Sequence[int], dtype: Any, data_format: str):
    """An NCX result in ``data_format``'s layout."""
    if data_format == "NCX":
        return value
    return g.transpose(value, ncx_shape, dtype, _from_ncx_perm(len(ncx_shape)))


def _ncx_shape(shape: Sequence[int], data_format: str) -> tuple[int, ...]:
    return window_lib.to_ncx_shape(shape, data_format)


# --------------------------------------------------------------------------------------------
# Sliding windows: MaxPool, AveragePool, LpPool.
# --------------------------------------------------------------------------------------------


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


def _sliding(call: Call, window: window_lib.Window, *, whole_kernel: bool) -> dict[str, Any]:
    """ONNX's attributes for jaxpool's windows: explicit pads (after ``auto_pad``) and
    ``ceil_mode`` where rounding added windows.  ``whole_kernel``: the divisor is the whole
    kernel also past ``pads_end`` (``avg_pool``'s OpenVINO rule), so ceil windows become floor
    windows over pads grown to hold them, which ``count_include_pad=1`` counts whole."""
    pads_end = list(window.pads_end)
    floor_count, onnx_ceil_count = [], []
    for i in range(window.nd):
        length, k, s, d = (
            window.in_spatial[i],
            window.kernel[i],
            window.strides[i],
            window.dilations[i],
        )
        pb, pe, out = window.pads_begin[i], window.pads_end[i], window.out_spatial[i]
        taps = np.arange(out)[:, None] * s + np.arange(k)[None, :] * d - pb
        inside = ((taps >= 0) & (taps < length)).any(axis=1)
        if not inside.all():
            raise call.refuse(
                f"window {int(np.argmin(inside))} of spatial axis {i} holds no input element "
                f"(kernel {window.kernel}, strides {window.strides}, dilations "
                f"{window.dilations}, pads {window.pads_begin}/{window.pads_end} on an input "
                f"of spatial shape {window.in_spatial}); ONNX's pools have no such window"
            )
        dk = (k - 1) * d + 1
        floor_count.append(window_lib._rounded_out(length, pb, pe, dk, s, "floor"))
        onnx_ceil_count.append(window_lib._rounded_out(length, pb, pe, dk, s, "ceil_torch"))
    counts = list(window.out_spatial)
    ceil_mode = 0
    if floor_count != counts:
        if whole_kernel or onnx_ceil_count != counts:
            for i in range(window.nd):
                dk = (window.kernel[i] - 1) * window.dilations[i] + 1
                need = (counts[i] - 1) * window.strides[i] + dk - window.in_spatial[i]
                pads_end[i] = max(pads_end[i], need - window.pads_begin[i])
        else:
            ceil_mode = 1
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


# Types MaxPool takes in ONNX Runtime, and where others pool exactly.
_MAX_TYPES = {np.dtype(t) for t in ("float16", "float32", "float64", "int8", "uint8")}
_MAX_WIDENED: dict[np.dtype, np.dtype] = {
    np.dtype(jnp.bfloat16): np.dtype("float32"),
    np.dtype("int16"): np.dtype("float32"),
    np.dtype("uint16"): np.dtype("float32"),
    np.dtype("int32"): np.dtype("float64"),
    np.dtype("uint32"): np.dtype("float64"),
}


def _max_compute_type(call: Call, dtype: np.dtype) -> np.dtype:
    if dtype in _MAX_TYPES:
        return dtype
    if dtype in _MAX_WIDENED:
        return _MAX_WIDENED[dtype]
    raise call.refuse(
        f"`x` of dtype {dtype} has no MaxPool: ONNX's takes float16/32/64, int8 and uint8, "
        "and no other float type holds every value of this one"
    )


def _index_planes(
    g: Graph, indices: ir.Value, shape: Sequence[int], ncx_shape: Sequence[int], axis: int
) -> ir.Value:
    """MaxPool's whole-tensor indices modulo the dimensions from ``axis`` on."""
    if axis == 0:
        return indices
    bound = g.const(np.asarray(math.prod(ncx_shape[axis:]), np.int64))
    return g.op("Mod", indices, bound, shape=shape, dtype=np.int64)


def _plan_max_pool(call: Call) -> Emit:
    p = call.params
    window = _window(call)
    attributes = _sliding(call, window, whole_kernel=False)
    dtype = np.dtype(call.inputs[0].dtype)
    compute = _max_compute_type(call, dtype)
    with_indices = bool(p["return_indices"])
    axis = 0
    if with_indices:
        from jaxpool._src import indices as indices_lib

        axis = indices_lib.normalize_axis(p["axis"], len(window.shape))
    data_format = window.data_format

    def emit(g: Graph, operands: Sequence[ir.Value]) -> list[ir.Value]:
        x, ncx = _ncx_input(g, operands[0], window.shape, dtype, compute, data_format)
        out_ncx = _ncx_shape(window.out_shape, data_format)
        if not with_indices:
            (y,) = g.ops("MaxPool", x, outputs=[(out_ncx, compute)], **attributes)
            results = [y]
        else:
            y, i = g.ops(
                "MaxPool", x, outputs=[(out_ncx, compute), (out_ncx, np.int64)], **attributes
            )
            i = _index_planes(g, i, out_ncx, ncx, axis)
            results = [y, i]
        if compute != dtype:
            results[0] = g.cast(results[0], out_ncx, dtype)
        values = _back(g, results[0], out_ncx, dtype, data_format)
        if not with_indices:
            return [values]
        return [values, _indices_output(g, call, results[1], out_ncx, data_format)]

    return emit


def _average_types(call: Call, dtype: np.dtype) -> tuple[np.dtype, str | None]:
    """The type an average computes in, and how its result returns to ``dtype``."""
    if dtype in (np.dtype("float32"), np.dtype("float64")):
        return dtype, None
    if dtype in (np.dtype("float16"), np.dtype(jnp.bfloat16)):
        return np.dtype("float32"), "cast"  # jaxpool accumulates 16-bit floats in float32
    if dtype in (np.dtype("int8"), np.dtype("uint8")):
        # Sums and quotients of 8-bit integers are exact enough in float32 for Round to see
        # every tie as jaxpool does.
        return np.dtype("float32"), "round"
    raise call.refuse(
        f"`x` of dtype {dtype} has no exact average in ONNX: its pools take floating types, "
        "and only 8-bit integers average exactly in float32"
    )


def _returned(
    g: Graph,
    y: ir.Value,
    shape: Sequence[int],
    dtype: np.dtype,
    how: str | None,
    integer_division: str = "round",
) -> ir.Value:
    if how is None:
        return y
    if how == "round" and integer_division == "round":
        y = g.op("Round", y, shape=shape, dtype=np.float32)
    return g.cast(y, shape, dtype)


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
    if "dilations" in attributes and call.opset is not None and call.opset < 19:
        raise call.refuse(
            f"`dilations` {window.dilations} need AveragePool-19; the opset is {call.opset}"
        )
    dtype = np.dtype(call.inputs[0].dtype)
    compute, how = _average_types(call, dtype)
    data_format = window.data_format

    def emit(g: Graph, operands: Sequence[ir.Value]) -> list[ir.Value]:
        x, ncx = _ncx_input(g, operands[0], window.shape, dtype, compute, data_format)
        out_ncx = _ncx_shape(window.out_shape, data_format)
        y = g.op("AveragePool", x, shape=out_ncx, dtype=compute, **attributes)
        y = _returned(g, y, out_ncx, dtype, how, p["integer_division"])
        return [_back(g, y, out_ncx, dtype, data_format)]

    return emit


def _integer_p(call: Call) -> int:
    p = call.params["p"]
    if float(p) != int(p):
        raise call.refuse(f"`p` (={p!r}) is not an integer, and LpPool's `p` is an int")
    return int(p)


def _float_types(call: Call, dtype: np.dtype) -> np.dtype:
    if dtype in (np.dtype("float32"), np.dtype("float64")):
        return dtype
    if dtype in (np.dtype("float16"), np.dtype(jnp.bfloat16)):
        return np.dtype("float32")
    raise call.refuse(f"`x` of dtype {dtype}: the ONNX node takes floating types only")


def _plan_lp_pool(call: Call) -> Emit:
    window = _window(call)
    attributes = {**_sliding(call, window, whole_kernel=False), "p": _integer_p(call)}
    dtype = np.dtype(call.inputs[0].dtype)
    compute = _float_types(call, dtype)
    data_format = window.data_format

    def emit(g: Graph, operands: Sequence[ir.Value]) -> list[ir.Value]:
        x, ncx = _ncx_input(g, operands[0], window.shape, dtype, compute, data_format)
        out_ncx = _ncx_shape(window.out_shape, data_format)
        y = g.op("LpPool", x, shape=out_ncx, dtype=compute, **attributes)
        if compute != dtype:
            y = g.cast(y, out_ncx, dtype)
        return [_back(g, y, out_ncx, dtype, data_format)]

    return emit


# --------------------------------------------------------------------------------------------
# Adaptive pools: global nodes, sliding windows where the bins are, else bins gathered per axis.
# --------------------------------------------------------------------------------------------


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
    g: Graph, op_type: str, value: ir.Value, axis: int, shape: Sequence[int], dtype: Any, opset: int
) -> ir.Value:
    """A reduction over ``axis`` without keeping it (ReduceSum's ``axes`` is an input from
    opset 13, the others' from opset 18)."""
    out = [d for i, d in enumerate(shape) if i != axis]
    if opset >= (13 if op_type == "ReduceSum" else 18):
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
    opset: int,
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
        value = _reduce(g, "ReduceMax", binned, axis + 1, binned_shape, dtype, opset)
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
    compute = _max_compute_type(call, dtype)
    uniform = [_uniform_bins(n, o) for n, o in zip(window.in_spatial, window.out_spatial)]
    data_format = window.data_format

    def emit(g: Graph, operands: Sequence[ir.Value]) -> list[ir.Value]:
        x, ncx = _ncx_input(g, operands[0], window.shape, dtype, compute, data_format)
        out_ncx = _ncx_shape(window.out_shape, data_format)
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
                indices = _index_planes(g, indices, out_ncx, ncx, 2)
        else:
            y, indices = _adaptive_max_bins(
                g, x, ncx, compute, window.out_spatial, call.opset or 23, with_indices
            )
        if compute != dtype:
            y = g.cast(y, out_ncx, dtype)
        results = [_back(g, y, out_ncx, dtype, data_format)]
        if indices is not None:
            results.append(_indices_output(g, call, indices, out_ncx, data_format))
        return results

    return emit


def _plan_adaptive_avg_pool(call: Call) -> Emit:
    window = _adaptive_window(call)
    dtype = np.dtype(call.inputs[0].dtype)
    compute, how = _average_types(call, dtype)
    uniform = [_uniform_bins(n, o) for n, o in zip(window.in_spatial, window.out_spatial)]
    data_format = window.data_format

    def emit(g: Graph, operands: Sequence[ir.Value]) -> list[ir.Value]:
        x, ncx = _ncx_input(g, operands[0], window.shape, dtype, compute, data_format)
        out_ncx = _ncx_shape(window.out_shape, data_format)
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
            y = _adaptive_sums(g, x, ncx, compute, window, call.opset or 23)
        y = _returned(g, y, out_ncx, dtype, how)
        return [_back(g, y, out_ncx, dtype, data_format)]

    return emit


def _adaptive_sums(
    g: Graph,
    x: ir.Value,
    ncx: Sequence[int],
    dtype: Any,
    window: window_lib.AdaptiveWindow,
    opset: int,
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
        value = _reduce(g, "ReduceSum", binned, axis + 1, binned_shape, dtype, opset)
    return g.op("Div", value, g.const(sizes.astype(dtype)), shape=shape, dtype=dtype)


# --------------------------------------------------------------------------------------------
# Unpooling and the ROI ops.
# --------------------------------------------------------------------------------------------


def _plan_max_unpool(call: Call) -> Emit:
    from jaxpool._src import indices as indices_lib

    p = call.params
    data_format = p["data_format"]
    y_shape, dtype = call.inputs[0].shape, np.dtype(call.inputs[0].dtype)
    out_shape = call.outputs[0].shape
    rank = len(y_shape)
    axis = indices_lib.normalize_axis(p["axis"], rank)
    y_ncx, out_ncx = _ncx_shape(y_shape, data_format), _ncx_shape(out_shape, data_format)
    plane = math.prod(out_ncx[2:])
    offsets = None
    if axis > 0:
        n, c = out_ncx[:2]
        planes = np.arange(n)[:, None] * c + (np.arange(c)[None, :] if axis == 2 else 0)
        offsets = (planes * plane).reshape(n, c if axis == 2 else 1, *(1,) * (rank - 2))
    # kernel_shape, strides and pads under which MaxUnpool infers `output_shape` itself, so
    # that readers which scatter into the inferred shape (ONNX's reference) agree.
    kernel = [max(1, o - i + 1) for i, o in zip(y_ncx[2:], out_ncx[2:])]
    pads_end = [max(0, i - o) for i, o in zip(y_ncx[2:], out_ncx[2:])]
    if p["combine"] not in ("max", "sum"):
        raise call.refuse(
            f"`combine` (={p['combine']!r}): ONNX leaves which of the values at a repeated "
            "index wins undefined"
        )
    if p["combine"] == "max" and dtype.kind != "f":
        raise call.refuse(f"`y` of dtype {dtype}: MaxUnpool takes floating types only")

    def emit(g: Graph, operands: Sequence[ir.Value]) -> list[ir.Value]:
        y, _ = _ncx(g, operands[0], y_shape, dtype, data_format)
        index_dtype = np.dtype(call.inputs[1].dtype)
        indices, _ = _ncx(g, operands[1], y_shape, index_dtype, data_format)
        if index_dtype != np.int64:
            indices = g.cast(indices, y_ncx, np.int64)
        if offsets is not None:
            indices = g.op("Add", indices, g.const(offsets), shape=y_ncx, dtype=np.int64)
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
            x = g.op(
                "Reshape",
                summed,
                g.const(np.asarray(out_ncx, np.int64)),
                shape=out_ncx,
                dtype=dtype,
            )
        return [_back(g, x, out_ncx, dtype, data_format)]

    return emit


def _pair(call: Call, name: str) -> list[int]:
    return list(window_lib.per_axis(name, call.params[name], 2, 1))


def _roi_input(call: Call, g: Graph, operands: Sequence[ir.Value], compute: np.dtype):
    """``x`` in NCX and ``compute``, and the boxes in ``compute`` (the nodes take one type)."""
    x_shape, dtype = call.inputs[0].shape, np.dtype(call.inputs[0].dtype)
    x, ncx = _ncx(g, operands[0], x_shape, dtype, call.params["data_format"])
    if compute != dtype:
        x = g.cast(x, ncx, compute)
    rois = operands[1]
    if np.dtype(call.inputs[1].dtype) != compute:
        rois = g.cast(rois, call.inputs[1].shape, compute)
    return x, rois


def _roi_output(call: Call, g: Graph, y: ir.Value, compute: np.dtype) -> list[ir.Value]:
    dtype, data_format = np.dtype(call.outputs[0].dtype), call.params["data_format"]
    out_ncx = _ncx_shape(call.outputs[0].shape, data_format)
    if compute != dtype:
        y = g.cast(y, out_ncx, dtype)
    return [_back(g, y, out_ncx, dtype, data_format)]


def _plan_roi_pool(call: Call) -> Emit:
    p = call.params
    if p["method"] != "max":
        raise call.refuse(
            f"`method` (={p['method']!r}): MaxRoiPool pools boxes rounded to elements "
            "(method='max'), and no ONNX node samples bilinearly per bin"
        )
    compute = _float_types(call, np.dtype(call.inputs[0].dtype))
    pooled_shape = _pair(call, "output_size")
    out_ncx = _ncx_shape(call.outputs[0].shape, p["data_format"])

    def emit(g: Graph, operands: Sequence[ir.Value]) -> list[ir.Value]:
        x, rois = _roi_input(call, g, operands, compute)
        y = g.op(
            "MaxRoiPool",
            x,
            rois,
            shape=out_ncx,
            dtype=compute,
            pooled_shape=pooled_shape,
            spatial_scale=float(p["spatial_scale"]),
        )
        return _roi_output(call, g, y, compute)

    return emit


# roi_align's aligned_mode -> RoiAlign's coordinate_transformation_mode, and the shift of the
# boxes that makes ONNX's mode compute jaxpool's.
_ALIGNED_MODES = {
    "half_pixel_for_nn": ("half_pixel", 0.0),
    "asymmetric": ("output_half_pixel", 0.0),
    "half_pixel": ("half_pixel", 0.5),  # (x + 0.5) * scale - 0.5
}
_ROI_ALIGN_MODES = {"avg": "avg", ONNX_MAX: "max"}


def _plan_roi_align(call: Call) -> Emit:
    p = call.params
    if p["mode"] not in _ROI_ALIGN_MODES:
        raise call.refuse(
            f"`mode` (={p['mode']!r}): RoiAlign's max is the largest weighted corner term of a "
            "bin's samples, not the largest sample (roi_align's max, OpenVINO's)"
        )
    transform, shift = _ALIGNED_MODES[p["aligned_mode"]]
    if transform == "half_pixel" and call.opset is not None and call.opset < 16:
        raise call.refuse(
            f"`aligned_mode` (={p['aligned_mode']!r}) needs RoiAlign-16's half_pixel; the "
            f"opset is {call.opset}"
        )
    compute = _float_types(call, np.dtype(call.inputs[0].dtype))
    out_h, out_w = _pair(call, "output_size")
    out_ncx = _ncx_shape(call.outputs[0].shape, p["data_format"])
    attributes = {
        "mode": _ROI_ALIGN_MODES[p["mode"]],
        "output_height": out_h,
        "output_width": out_w,
        "sampling_ratio": int(p["sampling_ratio"]),
        "spatial_scale": float(p["spatial_scale"]),
    }
    if call.opset is None or call.opset >= 16:
        attributes["coordinate_transformation_mode"] = transform

    def emit(g: Graph, operands: Sequence[ir.Value]) -> list[ir.Value]:
        x, rois = _roi_input(call, g, operands, compute)
        if shift:
            rois = g.op(
                "Add",
                rois,
                g.const(np.asarray(shift, compute)),
                shape=call.inputs[1].shape,
                dtype=compute,
            )
        batch_indices = operands[2]
        if np.dtype(call.inputs[2].dtype) != np.int64:
            batch_indices = g.cast(batch_indices, call.inputs[2].shape, np.int64)
        y = g.op("RoiAlign", x, rois, batch_indices, shape=out_ncx, dtype=compute, **attributes)
        return _roi_output(call, g, y, compute)

    return emit


# --------------------------------------------------------------------------------------------
# The table of plans.
# --------------------------------------------------------------------------------------------


class Export(NamedTuple):
    """An exported op: the names of its array arguments (the primitive's operands), in
    order, and its plan."""

    fn: Callable[..., Any]
    operands: tuple[str, ...]
    plan: Plan


EXPORTS: dict[str, Export] = {
    "max_pool": Export(max_pool, ("x",), _plan_max_pool),
    "avg_pool": Export(avg_pool, ("x",), _plan_avg_pool),
    "lp_pool": Export(lp_pool, ("x",), _plan_lp_pool),
    "adaptive_max_pool": Export(adaptive_max_pool, ("x",), _plan_adaptive_max_pool),
    "adaptive_avg_pool": Export(adaptive_avg_pool, ("x",), _plan_adaptive_avg_pool),
    "max_unpool": Export(max_unpool, ("y", "indices"), _plan_max_unpool),
    "roi_pool": Export(roi_pool, ("x", "rois"), _plan_roi_pool),
    "roi_align": Export(roi_align, ("x", "rois", "batch_indices"), _plan_roi_align),
    "roi_align_any_mode": Export(
        roi_align_any_mode, ("x", "rois", "batch_indices"), _plan_roi_align
    ),
}


# --------------------------------------------------------------------------------------------
# Primitives, the exporter that binds them, and jax2onnx's plugins that lower them.
# --------------------------------------------------------------------------------------------


def _original(fn: Callable[..., Any]) -> Callable[..., Any]:
    return getattr(fn, "__wrapped__", fn)


def _static(value: Any) -> Any:
    """A hashable parameter: sequences become tuples."""
    if isinstance(value, (list, tuple)):
        return tuple(_static(v) for v in value)
    if isinstance(value, np.ndarray):
        return tuple(_static(v) for v in value.tolist())
    return value


def _evaluate(export: Export, operands: Sequence[Any], params: dict[str, Any]) -> Any:
    with exporting.suspended():
        return _original(export.fn)(**dict(zip(export.operands, operands)), **params)


# The modules whose functions jax2onnx replaces while it converts, so that tracing a model
# binds its primitives; the op computes its shapes with the originals.
_PATCHED_MODULES = (
    "jax.numpy",
    "jax.numpy.linalg",
    "jax.lax",
    "jax.nn",
    "jax.random",
    "jax.scipy.special",
    "jax.image",
)
_ORIGINALS: dict[Any, dict[str, Any]] = {}


@contextlib.contextmanager
def _unpatched() -> Iterator[None]:
    """JAX's own functions, for the duration (jax2onnx's replacements refuse arguments that
    the ops pass, such as ``jnp.max``'s ``initial``)."""
    replaced = []
    for module, originals in _ORIGINALS.items():
        current = vars(module)
        for name, value in originals.items():
            if current.get(name, value) is not value:
                replaced.append((module, name, current[name]))
                setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in reversed(replaced):
            setattr(module, name, value)


def _eval_shape(export: Export, structs: Sequence[Any], params: dict[str, Any]) -> Any:
    """The op's results' shapes and dtypes, from the op itself.  Its jitted programs are
    inlined (``disable_jit``) rather than traced into jit's caches, where programs traced
    during an export would outlive it."""
    key = (export.fn, tuple(structs), tuple(sorted(params.items())))
    if key not in _SHAPES:  # the exporter and the primitive's abstract evaluation ask alike
        with _unpatched(), jax.disable_jit():
            _SHAPES[key] = jax.eval_shape(lambda *o: _evaluate(export, o, params), *structs)
    return _SHAPES[key]


_SHAPES: dict[Any, Any] = {}


def _shapes(tree: Any) -> tuple[jax.ShapeDtypeStruct, ...]:
    return tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in jax.tree.leaves(tree))


def _make_primitive(name: str, export: Export) -> Any:
    primitive = Primitive(f"jaxpool_{name}")
    primitive.multiple_results = True

    def impl(*operands: Any, **params: Any) -> list[Any]:
        return list(jax.tree.leaves(_evaluate(export, operands, params)))

    def abstract_eval(*avals: Any, **params: Any) -> list[Any]:
        structs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
        out = _eval_shape(export, structs, params)
        return [jax.core.ShapedArray(s.shape, s.dtype) for s in jax.tree.leaves(out)]

    def batch(operands: Sequence[Any], dims: Sequence[Any], **params: Any) -> Any:
        # Under `jax.vmap` (Equinox models map their unbatched layers over the batch) the
        # window ops and unpooling pool the mapped axis as part of their batch axis N, one
        # node for the whole batch; the ROI ops, whose boxes name their images, and calls
        # whose flat indices would not fit int32 once merged, bind every example on its own.
        size = next(o.shape[d] for o, d in zip(operands, dims) if d is not None)
        mapped = all(d is not None for d in dims)
        operands = [batching.bdim_at_front(o, d, size) for o, d in zip(operands, dims)]
        if mapped and _mergeable(name, operands, params):
            outs = _merged(primitive, name, operands, params)
            return outs, [0] * len(outs)
        rows = [primitive.bind(*(o[b] for o in operands), **params) for b in range(size)]
        return [jnp.stack(r) for r in zip(*rows)], [0] * len(rows[0])

    primitive.def_impl(impl)
    primitive.def_abstract_eval(abstract_eval)
    batching.primitive_batchers[primitive] = batch
    return primitive


# The ops whose operands all lead with the batch axis N and whose results lead with it too,
# each example pooled on its own: under `vmap` the mapped axis merges into N.
_WINDOW_OPS = ("max_pool", "avg_pool", "lp_pool", "adaptive_max_pool", "adaptive_avg_pool")


def _flat_axis(params: dict[str, Any], rank: int) -> bool:
    """Whether the call's indices are positions in the whole tensor (``axis`` 0)."""
    axis = params.get("axis", 2)
    return (axis + rank if axis < 0 else axis) == 0


def _mergeable(name: str, operands: Sequence[Any], params: dict[str, Any]) -> bool:
    """Whether the mapped call is one call over ``[B * N, ...]``: a window op or unpooling,
    whose flat positions (``axis`` 0), offset by each example's size, still fit int32."""
    if name in _WINDOW_OPS:
        x = operands[0]
        whole = _flat_axis(params, x.ndim - 1) and params.get("return_indices", False)
        return not whole or math.prod(x.shape) <= np.iinfo(np.int32).max
    if name == "max_unpool":
        size = operands[0].shape[0] * math.prod(params["output_shape"])
        return not _flat_axis(params, operands[0].ndim - 1) or size <= np.iinfo(np.int32).max
    return False


def _merged(primitive: Any, name: str, operands: Sequence[Any], params: dict[str, Any]) -> Any:
    """The call over ``[B, N, ...]`` operands as one call over ``[B * N, ...]``, its results
    split again; flat positions (``axis`` 0) are the example's own, offset by the examples
    before it in the merged tensor."""
    b = operands[0].shape[0]

    def offsets(per_example: int, like: Any) -> Any:
        steps = jnp.arange(b, dtype=like.dtype) * np.asarray(per_example, like.dtype)
        return steps.reshape(b, *[1] * (like.ndim - 1))

    merged = [o.reshape(b * o.shape[1], *o.shape[2:]) for o in operands]
    if name == "max_unpool":
        y, indices = operands
        shape = tuple(params["output_shape"])
        # Added also where they are 0: jax2onnx folds a reshape of a reshape into one and
        # loses the first's result where the model also returns it (the indices).
        step = math.prod(shape) if _flat_axis(params, y.ndim - 1) else 0
        merged[1] = (indices + offsets(step, indices)).reshape(merged[1].shape)
        params = {**params, "output_shape": (b * shape[0], *shape[1:])}
    outs = primitive.bind(*merged, **params)
    outs = [o.reshape(b, o.shape[0] // b, *o.shape[1:]) for o in outs]
    if name == "max_pool" and len(outs) == 2 and _flat_axis(params, operands[0].ndim - 1):
        outs[1] = outs[1] - offsets(math.prod(operands[0].shape[1:]), outs[1])
    return outs


_PRIMITIVES: dict[str, Any] = {}


def _bind(op: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The exporter: a call of a public op, bound as the op's primitive."""
    name = op.__name__
    if name in _REFUSED:
        raise ValueError(f"jaxpool.{name} cannot be exported to ONNX: {_REFUSED[name]}.")
    export = EXPORTS[name]
    arguments = inspect.signature(op).bind(*args, **kwargs)
    arguments.apply_defaults()
    values = dict(arguments.arguments)
    operands = [jnp.asarray(values.pop(n)) for n in export.operands]
    params = {k: _static(v) for k, v in values.items()}
    structs = _shapes(operands)
    out = _eval_shape(export, structs, params)
    export.plan(Call(name, params, structs, _shapes(out), None))  # refusals, at trace time
    flat = _PRIMITIVES[name].bind(*operands, **params)
    return jax.tree.unflatten(jax.tree.structure(out), flat)


class _Plugin(PrimitiveLeafPlugin):
    """Lowers one jaxpool primitive through its op's plan."""

    _PRIM: Any = None
    _OP: str = ""
    _ABSTRACT_EVAL_BOUND = True  # bound where the primitive is made

    @classmethod
    def binding_specs(cls) -> list[AssignSpec | MonkeyPatchSpec]:
        return [AssignSpec(exporting, "EXPORTER", _bind, delete_if_missing=False)]

    def lower(self, ctx: Any, eqn: Any) -> None:
        export = EXPORTS[self._OP]
        structs = tuple(jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in eqn.invars)
        outputs = tuple(jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in eqn.outvars)
        call = Call(self._OP, dict(eqn.params), structs, outputs, int(ctx.builder.opset))
        emit = export.plan(call)
        operands = [ctx.get_value_for_var(v, name_hint=ctx.fresh_name("in")) for v in eqn.invars]
        results = emit(Graph(ctx), operands)
        for var, value in zip(eqn.outvars, results):
            ctx.bind_value_for_var(var, value)


_REGISTERED = False


def register() -> None:
    """Registers jaxpool's plugins with jax2onnx (once)."""
    global _REGISTERED
    if _REGISTERED:
        return
    for module_name in _PATCHED_MODULES:
        module = importlib.import_module(module_name)
        _ORIGINALS[module] = dict(vars(module))
    for name, export in EXPORTS.items():
        primitive = _make_primitive(name, export)
        _PRIMITIVES[name] = primitive
        plugin = type(f"_{name}_plugin", (_Plugin,), {"_PRIM": primitive, "_OP": name})
        register_primitive(
            jaxpr_primitive=primitive.name,
            jax_doc=f"jaxpool.{name}",
            onnx=[{"component": row.onnx} for row in TABLE if row.op == name],
            since="0.1.0",
            context="primitives.jaxpool",
            component=name,
        )(plugin)
    _REGISTERED = True


def _array_like(a: Any) -> Any:
    return a if hasattr(a, "shape") and hasattr(a, "dtype") else np.asarray(a)


def export(
    fn: Callable[..., Any],
    *example_args: Any,
    opset: int = 21,
    path: Any = None,
    **jax2onnx_kwargs: Any,
) -> Any:
    """See :func:`jaxpool.onnx.export`."""
    import jax2onnx
    import onnx

    register()
    inputs = [
        a if isinstance(a, jax.ShapeDtypeStruct) else jax.ShapeDtypeStruct(np.shape(a), a.dtype)
        for a in map(_array_like, example_args)
    ]
    model = jax2onnx.to_onnx(fn, inputs, opset=opset, **jax2onnx_kwargs)
    if path is not None:
        onnx.save_model(model, path)
    return model
