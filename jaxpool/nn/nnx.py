"""Flax NNX pooling modules: stateless wrappers of the jaxpool functions, channels-last.

Each module stores its attributes at construction and calls the function of the same name
with them; see that function for the formula, the output shape and the errors.
"""

from jaxpool.nn._nnx import AdaptiveAvgPool as AdaptiveAvgPool
from jaxpool.nn._nnx import AdaptiveMaxPool as AdaptiveMaxPool
from jaxpool.nn._nnx import AvgPool as AvgPool
from jaxpool.nn._nnx import LpPool as LpPool
from jaxpool.nn._nnx import MaxPool as MaxPool
from jaxpool.nn._nnx import MaxUnpool as MaxUnpool
from jaxpool.nn._nnx import MinPool as MinPool

__all__ = [
    "AdaptiveAvgPool",
    "AdaptiveMaxPool",
    "AvgPool",
    "LpPool",
    "MaxPool",
    "MaxUnpool",
    "MinPool",
]
