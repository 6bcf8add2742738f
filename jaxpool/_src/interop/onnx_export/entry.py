"""An exported op's entry: everything about how it exports (its plan or its refusal, its row of
the docs' table, its rule under ``vmap``), and the pieces the rules under ``vmap`` share."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxpool._src.interop.onnx_export.graph import Plan

INT32_MAX = int(np.iinfo(np.int32).max)


class Row(NamedTuple):
    """How a public op exports: ``"node"`` (its ONNX node, with the Transposes of NXC and the
    Casts of types the node lacks), ``"composition"`` (several nodes) or ``"refused"`` (a
    ``ValueError``), and what decides it."""

    op: str
    export: str
    onnx: str
    notes: str


# A rule under `vmap`: from the primitive's bind, the operands (the mapped axis first) and the
# parameters, the results of one call over the merged batch (the mapped axis first), or None
# where the call does not merge (then every example binds on its own).
Merge = Callable[[Callable[..., Any], Sequence[Any], dict[str, Any]], "list[Any] | None"]


@dataclasses.dataclass(frozen=True)
class Export:
    """An op's entry.  ``exports``, ``onnx`` and ``notes`` are its row of the docs' table;
    ``plan`` is ``None`` for a refused op, whose ``notes`` are the reason its error gives.  An
    exported op has its function, the names of its array arguments (the primitive's operands),
    in order, and its ``merge`` rule (``None``: never merged).  ``listed``: whether the docs'
    table lists it (not an op that only :func:`jaxpool.onnx.node` calls)."""

    op: str
    exports: str
    onnx: str
    notes: str
    plan: Plan | None = None
    fn: Callable[..., Any] | None = None
    operands: tuple[str, ...] = ()
    merge: Merge | None = None
    listed: bool = True

    @property
    def row(self) -> Row:
        return Row(self.op, self.exports, self.onnx, self.notes)


def refused(op: str, reason: str) -> Export:
    """The entry of an op ONNX cannot express, and why."""
    return Export(op, "refused", "", reason)


def flat_axis(params: dict[str, Any], rank: int) -> bool:
    """Whether the call's indices are positions in the whole tensor (``axis`` 0)."""
    axis = params.get("axis", 2)
    return (axis + rank if axis < 0 else axis) == 0


def folded(operands: Sequence[Any]) -> list[Any]:
    """``[B, N, ...]`` operands as ``[B * N, ...]``."""
    return [o.reshape(o.shape[0] * o.shape[1], *o.shape[2:]) for o in operands]


def unfolded(outs: Sequence[Any], b: int) -> list[Any]:
    """``[B * N, ...]`` results as ``[B, N, ...]``."""
    return [o.reshape(b, o.shape[0] // b, *o.shape[1:]) for o in outs]


def offsets(b: int, per_example: int, like: Any) -> Any:
    """Each example's first flat position in the merged tensor, broadcast against ``like``."""
    steps = jnp.arange(b, dtype=like.dtype) * np.asarray(per_example, like.dtype)
    return steps.reshape(b, *[1] * (like.ndim - 1))


def merge_pool(bind: Callable[..., Any], operands: Sequence[Any], params: dict[str, Any]):
    """A pool whose operands and results lead with the batch axis N, each example pooled on its
    own: the mapped axis merges into N, while its flat positions (``axis`` 0) fit int32."""
    x = operands[0]
    whole = flat_axis(params, x.ndim - 1) and params.get("return_indices", False)
    if whole and math.prod(x.shape) > INT32_MAX:
        return None
    return unfolded(bind(*folded(operands), **params), x.shape[0])
