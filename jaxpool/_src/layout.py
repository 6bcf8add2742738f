"""``row_major(a)``: ``a`` stored in row-major order, by a program that exports and partitions.

XLA chooses the physical layout of every intermediate array.  Next to a transpose, its GPU
layout assignment makes the transposition a change of layout (a bitcast), so that a gather of
channel vectors from the channels-last view of an NCX map reads each with a stride of
``H * W`` elements.  Layout assignment gives both sides of a ``bitcast_convert`` that changes
the rank one fixed layout, the narrow type's extra axis the most minor one: ``a`` converted to
pairs of half-width unsigned integers and back is stored row-major, and a transposition before
it is a pass of its own, whose reads and writes XLA makes coalesced.  An optimization barrier
between the two conversions keeps XLA from folding them (folded, they constrain nothing).  Both
are StableHLO operations, which ``jax.export`` serializes for every platform and XLA's
partitioner splits like an elementwise operation (JAX's layout constraint, the other way to
ask for a layout, lowers to a custom call that ``jax.export`` refuses and the partitioner
replicates).

Where a dimension is symbolic (``jax.export`` with a symbolic batch or box count) the
conversions cannot be lowered: StableHLO's shape refinement does not refine a
``bitcast_convert`` that changes the rank.  There ``row_major`` is the identity, and the layout
is XLA's choice.  The values are the same either way; ``row_major`` is linear, its own
derivative and transpose.
"""

from __future__ import annotations

import jax
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

row_major_p = Primitive("jaxpool_row_major")


def row_major(a: jax.Array) -> jax.Array:
    """``a``, stored in row-major order (the module docstring)."""
    return row_major_p.bind(a)


def _halves(a: jax.Array) -> jax.Array:
    """``a`` through a rank-changing ``bitcast_convert`` and back, the pair kept apart."""
    itemsize = np.dtype(a.dtype).itemsize
    if a.ndim == 0 or itemsize < 2:
        return a
    half = lax.bitcast_convert_type(a, np.dtype(f"uint{4 * itemsize}"))
    return lax.bitcast_convert_type(lax.optimization_barrier(half), a.dtype)


def _lowering(ctx: mlir.LoweringRuleContext, a: mlir.ir.Value) -> list[mlir.ir.Value]:
    (aval,) = ctx.avals_in
    if not all(isinstance(d, int) for d in aval.shape):  # type: ignore[attr-defined]
        return [a]
    return mlir.lower_fun(_halves, multiple_results=False)(ctx, a)


row_major_p.def_impl(_halves)
row_major_p.def_abstract_eval(lambda a: a)
mlir.register_lowering(row_major_p, _lowering)
ad.deflinear2(row_major_p, lambda ct, a: [row_major(ct)])
batching.defvectorized(row_major_p)
