"""Flax modules over the jaxpool functions (needs the ``flax`` extra).

``jaxpool.nn`` holds the Flax NNX modules, ``jaxpool.nn.linen`` their Linen twins.  Both are
channels-last by default (``data_format="NXC"``) as Flax layers are; every other argument has
the name, meaning and default of the function the module calls.  ``import jaxpool`` does not
import Flax; ``import jaxpool.nn`` does.

Example:
  >>> import jax.numpy as jnp
  >>> from jaxpool import nn
  >>> pool = nn.MaxPool(2, return_indices=True, axis=2)
  >>> y, i = pool(jnp.arange(16.0).reshape(1, 4, 4, 1))
  >>> y[0, :, :, 0].tolist(), i[0, :, :, 0].tolist()
  ([[5.0, 7.0], [13.0, 15.0]], [[5, 7], [13, 15]])
  >>> nn.MaxUnpool(axis=2)(y, i, (1, 4, 4, 1))[0, :, :, 0].tolist()[1]
  [0.0, 5.0, 0.0, 7.0]
"""

from jaxpool.nn import linen as linen
from jaxpool.nn import nnx as nnx
from jaxpool.nn.nnx import AdaptiveAvgPool as AdaptiveAvgPool
from jaxpool.nn.nnx import AdaptiveMaxPool as AdaptiveMaxPool
from jaxpool.nn.nnx import AvgPool as AvgPool
from jaxpool.nn.nnx import MaxPool as MaxPool
from jaxpool.nn.nnx import MaxUnpool as MaxUnpool

__all__ = [
    "AdaptiveAvgPool",
    "AdaptiveMaxPool",
    "AvgPool",
    "MaxPool",
    "MaxUnpool",
    "linen",
    "nnx",
]
