"""Flax Linen pooling modules: the twins of :mod:`jaxpool.nn`'s NNX modules, channels-last.

Each module's fields are the arguments of the function of the same name; see that function
for the formula, the output shape and the errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import jax
from flax import linen

import jaxpool
from jaxpool.nn import _fields

# A layer's fields are declared when its class is created, from its function's signature,
# where a static type checker cannot see them: to one, a layer takes any arguments.
_Module: Any = linen.Module


class Layer(_Module):
    """Calls ``function`` on its inputs with the module's fields, which are the function's
    parameters (the subclass's ``function=`` keyword), ``data_format="NXC"`` by default.  A
    sequence window (``kernel``, ``output_size``) lets the functions take no batch axis or
    several, as Flax's pools do."""

    _function: ClassVar[Callable[..., Any]]

    def __init_subclass__(cls, *, function: Callable[..., Any] | None = None, **kwargs: Any):
        if function is not None:
            cls._function = staticmethod(function)
            options = _fields.options(function, cls.__call__, defaults={"data_format": "NXC"})
            # Linen's fields are positional, as its dataclass transform makes every field.
            _fields.declare(cls, options, keyword_only=False)
        super().__init_subclass__(**kwargs)

    def __call__(self, x: jax.typing.ArrayLike) -> Any:
        return self._function(x, **_fields.values(self))


class MaxPool(Layer, function=jaxpool.max_pool):
    """Max pooling, :func:`jaxpool.max_pool`; ``(y, indices)`` with ``return_indices``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> pool = MaxPool(2, auto_pad="same_upper")
      >>> pool.apply({}, jnp.ones((1, 5, 5, 3))).shape
      (1, 3, 3, 3)
    """


class MinPool(MaxPool, function=jaxpool.min_pool):
    """Min pooling, :func:`jaxpool.min_pool`; ``(y, indices)`` with ``return_indices``."""


class AvgPool(Layer, function=jaxpool.avg_pool):
    """Average pooling, :func:`jaxpool.avg_pool`."""


class LpPool(Layer, function=jaxpool.lp_pool):
    """Lp pooling, :func:`jaxpool.lp_pool`."""


class AdaptiveMaxPool(Layer, function=jaxpool.adaptive_max_pool):
    """Adaptive max pooling to ``output_size``, :func:`jaxpool.adaptive_max_pool`."""


class AdaptiveAvgPool(Layer, function=jaxpool.adaptive_avg_pool):
    """Adaptive average pooling to ``output_size``, :func:`jaxpool.adaptive_avg_pool`."""


class MaxUnpool(Layer, function=jaxpool.max_unpool):
    """Scatters pooled values back to their argmax positions, :func:`jaxpool.max_unpool`.

    Applied eagerly, indices outside ``output_shape`` raise a ``ValueError`` that counts the
    values they would lose; under ``jit`` (traced indices) such values are dropped, as in
    :func:`jaxpool.max_unpool`.  ``kernel`` and the other window attributes of the
    ``MaxPool`` that took the indices, where given, place the values without a scatter
    (a map split along a spatial axis then exchanges only halos).
    """

    def __call__(  # type: ignore[override]  # called on the pooled values and their indices
        self, y: jax.typing.ArrayLike, indices: jax.typing.ArrayLike, output_shape: Any
    ) -> jax.Array:
        return self._function(y, indices, tuple(output_shape), **_fields.values(self))
