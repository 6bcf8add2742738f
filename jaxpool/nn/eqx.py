"""Equinox pooling modules (needs the ``equinox`` extra), following Equinox's conventions.

Each module takes one unbatched input ``(C, *spatial)`` (batch it with :func:`jax.vmap`),
has ``num_spatial_dims`` fixed at construction and is called as ``module(x, *, key=None)``;
its configuration is static, so :func:`equinox.filter_jit` and :func:`equinox.filter_grad`
see no array leaves.  Indices are positions in each channel's plane (``axis=2`` of the
functions), which :class:`MaxUnpool` consumes.
"""

from jaxpool.nn._eqx import AdaptiveAvgPool as AdaptiveAvgPool
from jaxpool.nn._eqx import AdaptiveMaxPool as AdaptiveMaxPool
from jaxpool.nn._eqx import AvgPool as AvgPool
from jaxpool.nn._eqx import LpPool as LpPool
from jaxpool.nn._eqx import MaxPool as MaxPool
from jaxpool.nn._eqx import MaxUnpool as MaxUnpool
from jaxpool.nn._eqx import MinPool as MinPool

__all__ = [
    "AdaptiveAvgPool",
    "AdaptiveMaxPool",
    "AvgPool",
    "LpPool",
    "MaxPool",
    "MaxUnpool",
    "MinPool",
]
