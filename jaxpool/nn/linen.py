"""Flax Linen pooling modules: the twins of :mod:`jaxpool.nn`'s NNX modules, channels-last.

Each module's fields are the arguments of the function of the same name; see that function
for the formula, the output shape and the errors.
"""

from jaxpool.nn._linen import AdaptiveAvgPool as AdaptiveAvgPool
from jaxpool.nn._linen import AdaptiveMaxPool as AdaptiveMaxPool
from jaxpool.nn._linen import AvgPool as AvgPool
from jaxpool.nn._linen import LpPool as LpPool
from jaxpool.nn._linen import MaxPool as MaxPool
from jaxpool.nn._linen import MaxUnpool as MaxUnpool
from jaxpool.nn._linen import MinPool as MinPool

__all__ = [
    "AdaptiveAvgPool",
    "AdaptiveMaxPool",
    "AvgPool",
    "LpPool",
    "MaxPool",
    "MaxUnpool",
    "MinPool",
]
