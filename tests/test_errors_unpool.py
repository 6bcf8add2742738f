"""Bad inputs of ``jaxpool.max_unpool``: values, their indices, the output shape and the axis
the indices were taken with (rows as in ``bad_inputs``)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from bad_inputs import (
    HUGE,
    I8,
    IDX,
    LOST,
    TRACED,
    Y8,
    T,
    V,
    X,
    Y,
    bad_input_test,
    defaults,
    family,
    names,
    non_numeric,
    row,
    rule,
    traced,
)

import jaxpool

UNPOOL = jaxpool.max_unpool
Y1 = np.ones((1, 2, 3), np.float32)
IDX1 = np.zeros((1, 2, 3), np.int32)
# NXC values with the batch axes (2, 3), one spatial plane of 2 x 2 and one channel.
Y5 = np.zeros((2, 3, 2, 2, 1))
NXC = {"axis": 2, "kernel": (2, 2), "data_format": "NXC"}


@functools.wraps(UNPOOL)
def abstract_unpool(shape, **kwargs):
    """``max_unpool`` of float32 ``y`` and int32 indices of ``shape``, never allocated."""
    y = jax.ShapeDtypeStruct(shape, jnp.float32)
    i = jax.ShapeDtypeStruct(shape, jnp.int32)
    return jax.eval_shape(functools.partial(UNPOOL, **kwargs), y, i)


# fmt: off
# Values unpooled along axis 0 unless a row says otherwise.
RULES = [
    rule("y-complex", Y.astype(np.complex64), IDX, X.shape, error=T, match=names("y", "complex64")),
    rule("y-rank2", Y[0, 0], IDX[0, 0], (8, 8), error=V, match=names("y", r"\(4, 4\)")),
    rule("y-rank6", np.ones((1, 2, 3, 4, 5, 6)), np.zeros((1, 2, 3, 4, 5, 6), np.int32),
         (1, 2, 3, 4, 5, 6), error=V, match="`y` must have rank"),
    rule("indices-float", Y, IDX.astype(np.float32), X.shape, error=T,
         match="`indices` must have an integer dtype, got float32"),
    rule("indices-strings", Y, IDX.astype(str), X.shape, error=T, match=non_numeric("indices")),
    rule("indices-shape", Y, IDX[:, :, :2], X.shape, error=V,
         match=r"`indices` of shape \(2, 3, 2, 4\) must have the shape"),
    rule("output_shape-rank", Y, IDX, (2, 3, 8), error=V,
         match=r"`output_shape` \(=\(2, 3, 8\)\) must have one entry per dimension of `y` \(4\)"),
    rule("output_shape-batch", Y, IDX, (5, 3, 8, 8), error=V,
         match=r"`output_shape` \(=\(5, 3, 8, 8\)\) must keep the batch and channel sizes"),
    rule("output_shape-channels", Y1, IDX1, (1, 3, 6), error=V,
         match="must keep the batch and channel sizes"),
    rule("output_shape-zero", Y, IDX, (2, 3, 0, 8), error=V,
         match=r"`output_shape` \(=\(2, 3, 0, 8\)\) must be positive on every dimension of `y`"),
    rule("output_shape-int", Y1, IDX1, 6, error=T,
         match="`output_shape` must be a sequence of ints"),
    rule("output_shape-float", Y, IDX, (2, 3, 8.0, 8), error=T,
         match=r"`output_shape` must be an int, got 8\.0"),
    rule("indices-outside-output_shape", Y8, I8, (2, 3, 5, 5), axis=2, error=V,
         match=LOST % "2, 3, 5, 5" + r".*the indices need at least 64"),
    rule("indices-negative", Y1, np.array([[[0, -1, 2], [0, 1, 2]]]), (1, 2, 6), axis=2, error=V,
         match=r"1 of 6 values would be lost"),
    rule("axis-None", Y, IDX, X.shape, axis=None, error=T, match=names("axis", "None")),
    rule("axis-3", Y, IDX, X.shape, axis=3, error=V, match=r"`axis` \(=3\) must be 0, 1 or 2"),
    rule("axis--1-lost-coordinates", Y, IDX, X.shape, axis=-1, error=V,
         match=r"`axis` \(=-1\) must be 0, 1 or 2"),
    rule("axis-out-of-range", Y, IDX, X.shape, axis=7, error=V, match=names("axis", "7")),
    rule("axis-3-of-rank-3", Y1, IDX1, (1, 2, 6), axis=3, error=V,
         match=r"`axis` \(=3\) must be in \[-3, 3\)"),
    rule("axis--4-of-rank-3", Y1, IDX1, (1, 2, 6), axis=-4, error=V,
         match=r"`axis` \(=-4\) must be in"),
    rule("data_format-nxc", Y, IDX, X.shape, data_format="nxc", error=V,
         match=names("data_format", "'nxc'")),
    rule("data_format-NWC", Y1, IDX1, (1, 2, 6), data_format="NWC", error=V,
         match=r"`data_format` \(='NWC'\)"),
    rule("combine-min", Y, IDX, X.shape, combine="min", error=V, match=names("combine", "'min'")),
    rule("combine-unknown", Y, IDX, X.shape, combine="last", error=V,
         match=names("combine", "'last'")),
    rule("combine-type", Y, IDX, X.shape, combine=max, error=T, match="`combine` must be a string"),
    # Leading batch axes (NXC with a sequence window).
    rule("NXC-output_shape-batch-axes", Y5, Y5.astype(np.int32), (3, 2, 4, 4, 1), **NXC, error=V,
         match=names("output_shape", r"\(2, 3\)")),
    rule("NXC-output_shape-rank", Y5, Y5.astype(np.int32), (2, 3, 4, 4), **NXC, error=V,
         match=names("output_shape", r"\(2, 3, 4, 4\)")),
    rule("NXC-indices-shape", Y5, np.zeros((3, 2, 2, 2, 1), np.int32), (2, 3, 4, 4, 1), **NXC,
         error=V, match=names("indices", r"\(3, 2, 2, 2, 1\)")),
]
ROWS = [
    *family([defaults(UNPOOL, axis=0)], RULES),
    row("max_unpool-axis-missing", UNPOOL, Y, IDX, X.shape, error=T,
        match="required keyword-only argument: 'axis'"),
    row("max_unpool-output_shape-traced", traced(UNPOOL, "output_shape", Y, IDX, axis=0),
        X.shape, error=T, match=names("output_shape", TRACED)),
    *(row(f"max_unpool-output_shape-huge-axis{axis}", abstract_unpool, (2**12, 2**10, 16, 16),
          output_shape=HUGE, axis=axis, error=V, match=r"`output_shape`.*4294967296")
      for axis in (0, 2)),
]
# fmt: on

test_bad_input = bad_input_test(ROWS)
