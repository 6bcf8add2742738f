"""Pooling layers over the jaxpool functions, for Flax and Equinox models.

``jaxpool.nn`` holds the Flax NNX modules (``pip install jaxpool[flax]``), ``jaxpool.nn.linen``
their Linen twins, and ``jaxpool.nn.eqx`` Equinox modules (``pip install jaxpool[equinox]``).
The Flax modules are channels-last by default (``data_format="NXC"``) as Flax layers are, and,
as Flax's pools, a tuple window takes no batch axis or several (``(H, W, C)``,
``(B1, B2, H, W, C)``); every other argument has the name, meaning and default of the function
the module calls.
Each framework is imported on first use of its modules: ``import jaxpool.nn.eqx`` needs no
Flax.

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

import importlib
from typing import Any

__all__ = [
    "AdaptiveAvgPool",
    "AdaptiveMaxPool",
    "AvgPool",
    "LpPool",
    "MaxPool",
    "MaxUnpool",
    "MinPool",
    "eqx",
    "linen",
    "nnx",
]

_SUBMODULES = ("eqx", "linen", "nnx")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"jaxpool.nn.{name}")
    if name in __all__:
        return getattr(importlib.import_module("jaxpool.nn.nnx"), name)
    raise AttributeError(f"module 'jaxpool.nn' has no attribute {name!r}")


def __dir__() -> list[str]:
    return list(__all__)
