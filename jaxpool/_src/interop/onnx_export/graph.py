"""The graph writer: one call of an op as its plan sees it, the nodes it writes through
jax2onnx's builder, and what the plans share (NXC <-> NCX, the types ONNX's pools compute in)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import onnx_ir as ir

from jaxpool._src import window as window_lib


@dataclasses.dataclass(frozen=True)
class Call:
    """One call of an op: its parameters (every argument but the operands, defaults
    included) and its operands' and results' shapes and dtypes.  The opset is the graph's
    (:attr:`Graph.opset`), read where the nodes are written."""

    op: str
    params: dict[str, Any]
    inputs: tuple[jax.ShapeDtypeStruct, ...]
    outputs: tuple[jax.ShapeDtypeStruct, ...]

    def refuse(self, what: str) -> ValueError:
        return ValueError(f"jaxpool.{self.op} cannot be exported to ONNX: {what}.")


# A plan reads the call once (its window, its types, its refusals) and returns the function
# that writes its nodes.
Emit = Callable[["Graph", Sequence[ir.Value]], Sequence[ir.Value]]
Plan = Callable[[Call], Emit]


class Graph:
    """Writes nodes through jax2onnx's builder, giving every value its type and shape."""

    def __init__(self, ctx: Any):
        self.ctx = ctx

    @property
    def opset(self) -> int:
        """The default domain's opset of the model being written."""
        return int(self.ctx.builder.opset)

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
def to_ncx_perm(rank: int) -> list[int]:
    return [0, rank - 1, *range(1, rank - 1)]


def from_ncx_perm(rank: int) -> list[int]:
    return [0, *range(2, rank), 1]


def to_ncx(g: Graph, value: ir.Value, shape: Sequence[int], dtype: Any, data_format: str):
    """The operand in NCX, and its NCX shape."""
    if data_format == "NCX":
        return value, tuple(shape)
    perm = to_ncx_perm(len(shape))
    return g.transpose(value, shape, dtype, perm), tuple(shape[p] for p in perm)


def ncx_input(
    g: Graph, value: ir.Value, shape: Sequence[int], dtype: Any, compute: Any, data_format: str
):
    """The input of a pooling node: in NCX and in the type the node computes in, and its NCX
    shape."""
    x, shape_ncx = to_ncx(g, value, shape, dtype, data_format)
    return (x if compute == dtype else g.cast(x, shape_ncx, compute)), shape_ncx


def indices_output(
    g: Graph, call: Call, indices: ir.Value, out_ncx: Sequence[int], data_format: str
) -> ir.Value:
    """A node's int64 NCX indices as the op's indices output: its dtype, its layout."""
    index_dtype = np.dtype(call.outputs[1].dtype)
    if index_dtype != np.int64:
        indices = g.cast(indices, out_ncx, index_dtype)
    return back(g, indices, out_ncx, index_dtype, data_format)


def back(g: Graph, value: ir.Value, ncx_shape: Sequence[int], dtype: Any, data_format: str):
    """An NCX result in ``data_format``'s layout."""
    if data_format == "NCX":
        return value
    return g.transpose(value, ncx_shape, dtype, from_ncx_perm(len(ncx_shape)))


def ncx_shape(shape: Sequence[int], data_format: str) -> tuple[int, ...]:
    return window_lib.to_ncx_shape(shape, data_format)


# Types MaxPool takes in ONNX Runtime, and where others pool exactly.
MAX_TYPES = {np.dtype(t) for t in ("float16", "float32", "float64", "int8", "uint8")}
MAX_WIDENED: dict[np.dtype, np.dtype] = {
    np.dtype(jnp.bfloat16): np.dtype("float32"),
    np.dtype("int16"): np.dtype("float32"),
    np.dtype("uint16"): np.dtype("float32"),
    np.dtype("int32"): np.dtype("float64"),
    np.dtype("uint32"): np.dtype("float64"),
}


def max_compute_type(call: Call, dtype: np.dtype) -> np.dtype:
    if dtype in MAX_TYPES:
        return dtype
    if dtype in MAX_WIDENED:
        return MAX_WIDENED[dtype]
    raise call.refuse(
        f"`x` of dtype {dtype} has no MaxPool: ONNX's takes float16/32/64, int8 and uint8, "
        "and no other float type holds every value of this one"
    )


def index_planes(
    g: Graph, indices: ir.Value, shape: Sequence[int], ncx_shape: Sequence[int], axis: int
) -> ir.Value:
    """MaxPool's whole-tensor indices modulo the dimensions from ``axis`` on."""
    if axis == 0:
        return indices
    bound = g.const(np.asarray(math.prod(ncx_shape[axis:]), np.int64))
    return g.op("Mod", indices, bound, shape=shape, dtype=np.int64)


def average_types(call: Call, dtype: np.dtype) -> tuple[np.dtype, str | None]:
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


def returned(
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


def float_types(call: Call, dtype: np.dtype) -> np.dtype:
    if dtype in (np.dtype("float32"), np.dtype("float64")):
        return dtype
    if dtype in (np.dtype("float16"), np.dtype(jnp.bfloat16)):
        return np.dtype("float32")
    raise call.refuse(f"`x` of dtype {dtype}: the ONNX node takes floating types only")
