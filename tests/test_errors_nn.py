"""Bad inputs of the layers of ``jaxpool.nn``: Flax NNX and Linen modules and Equinox modules,
built with bad attributes or called on bad inputs (rows as in ``bad_inputs``)."""

from __future__ import annotations

import numpy as np
from bad_inputs import I8, LOST, S_X, Y8, T, V, bad_input_test, non_numeric, row

from jaxpool import nn as pnn
from jaxpool.nn import eqx as peqx

X_NXC = np.zeros((2, 7, 6, 3), np.float32)


def module_called(module, *inputs):
    """Calls an NNX module, or applies a Linen module without variables."""
    return module.apply({}, *inputs) if hasattr(module, "apply") else module(*inputs)


# fmt: off
ROWS = [
    row("nn.MaxPool-rounding_type", module_called, pnn.MaxPool(2, rounding_type="round"), X_NXC,
        error=V, match=r"`rounding_type` \(='round'\)"),
    # An int kernel keeps one batch axis: rank 6 would be 4-D.
    row("nn.MaxPool-int-kernel-rank", module_called, pnn.MaxPool(2),
        np.zeros((1, 2, 4, 4, 4, 3), np.float32), error=V, match="rank"),
    row("nn.MaxPool-x-strings", module_called, pnn.MaxPool((2, 2)), S_X, error=T,
        match=non_numeric("x")),
    row("nn.linen.AvgPool-data_format", module_called, pnn.linen.AvgPool(2, data_format="NHWC"),
        X_NXC, error=V, match=r"`data_format` \(='NHWC'\)"),
    *(row(f"nn.{kind}MaxUnpool-indices-outside-output_shape", module_called,
          unpool(axis=2, data_format="NCX"), Y8, I8, (2, 3, 5, 5), error=V,
          match=LOST % "2, 3, 5, 5")
      for kind, unpool in [("", pnn.MaxUnpool), ("linen.", pnn.linen.MaxUnpool)]),
    # Python's own errors of a constructor's call name the argument.
    row("nn.MaxPool-kernel-missing", pnn.MaxPool, error=T,
        match=r"MaxPool.__init__\(\) missing 1 required positional.*'kernel'"),
    row("nn.AvgPool-options-by-position", pnn.AvgPool, 2, 1, 0, 0, True, error=T,
        match=r"takes from 2 to 5 positional arguments"),
    row("nn.MaxUnpool-axis-missing", pnn.MaxUnpool, error=T,
        match=r"missing 1 required keyword-only argument: 'axis'"),
    row("nn.AdaptiveMaxPool-axis", pnn.AdaptiveMaxPool, 2, axis=2, error=T,
        match=r"unexpected keyword argument 'axis'"),
    row("nn.linen.LpPool-q", pnn.linen.LpPool, 2, q=3, error=T,
        match=r"unexpected keyword argument 'q'"),
    row("nn.linen.MaxUnpool-axis-missing", pnn.linen.MaxUnpool, error=T,
        match=r"missing 1 required positional argument: 'axis'"),
    row("nn.eqx.MaxPool-kernel-missing", peqx.MaxPool, num_spatial_dims=2, error=T,
        match=r"missing 1 required positional.*'kernel'"),
    row("nn.eqx.AvgPool-options-by-position", peqx.AvgPool, 2, 1, 0, 0, 1, num_spatial_dims=1,
        error=T, match=r"takes from 2 to 5 posi"),
    row("nn.eqx.LpPool-q", peqx.LpPool, 2, num_spatial_dims=1, q=2, error=T,
        match=r"unexpected keyword argument 'q'"),
    row("nn.eqx.MaxUnpool-kernel", peqx.MaxUnpool, num_spatial_dims=1, kernel=2, error=T,
        match=r"argument 'kernel'"),
    row("nn.eqx.AdaptiveAvgPool-num_spatial_dims-missing", peqx.AdaptiveAvgPool, 2, error=T,
        match=r"keyword-only argument: 'num_spatial_dims'"),
    # Equinox: one example per call, and the number of spatial axes fixed when built.
    row("nn.eqx.num_spatial_dims", lambda: peqx.MaxPool(2, num_spatial_dims=4), error=V,
        match=r"`num_spatial_dims` \(=4\)"),
    row("nn.eqx.num_spatial_dims-missing", lambda: peqx.MaxPool(2), error=T,
        match=r"num_spatial_dims"),
    row("nn.eqx.kernel-length", lambda: peqx.MaxPool((2, 2, 2), num_spatial_dims=2), error=V,
        match=r"`kernel`"),
    row("nn.eqx.strides", lambda: peqx.AvgPool(2, -1, num_spatial_dims=1), error=V,
        match=r"`strides` \(=-1\)"),
    row("nn.eqx.rounding_type", lambda: peqx.MaxPool(2, num_spatial_dims=1, rounding_type="up"),
        error=V, match=r"`rounding_type` \(='up'\)"),
    row("nn.eqx.output_size", lambda: peqx.AdaptiveAvgPool(0, num_spatial_dims=2), error=V,
        match=r"`output_size`"),
    row("nn.eqx.batched", lambda: peqx.MaxPool(2, num_spatial_dims=2)(X_NXC),
        error=V, match=r"`x` must be unbatched"),
    row("nn.eqx.MaxPool-x-strings", module_called, peqx.MaxPool(2, num_spatial_dims=2), S_X[0],
        error=T, match=non_numeric("x")),
    row("nn.eqx.MaxUnpool-indices-outside-output_shape",
        lambda: peqx.MaxUnpool(num_spatial_dims=2)(Y8[0], I8[0], (3, 5, 5)), error=V,
        match=r"(?s)`indices` \(taken with `axis`=2\).*\(=\(1, 3, 5, 5\)\): 36 of 48 values"),
]
# fmt: on

test_bad_input = bad_input_test(ROWS)
