"""Flax NNX pooling modules: stateless wrappers of the jaxpool functions, channels-last.

Each module stores its attributes at construction and calls the function of the same name
with them; see that function for the formula, the output shape and the errors.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, ClassVar

import jax
from flax import nnx

import jaxpool
from jaxpool.nn import _fields

# A layer's fields are declared when its class is created, from its function's signature,
# where a static type checker cannot see them: to one, a layer takes any arguments.
_Module: Any = nnx.Module


class _ConstructorSignature:
    """The class's ``__signature__``: its constructor's parameters.  NNX's metaclass
    ``__call__`` takes ``(*args, **kwargs)``, and ``inspect.signature`` (``help``, the API
    pages) reads the metaclass before ``__init__``; an instance has no ``__signature__``, so
    that its own is its ``__call__``'s."""

    def __get__(self, instance: Any, owner: type) -> inspect.Signature:
        if instance is not None:
            raise AttributeError("__signature__")
        init = inspect.signature(
            next(vars(c)["__init__"] for c in owner.__mro__ if "__init__" in vars(c))
        )
        return init.replace(parameters=list(init.parameters.values())[1:])


class Layer(_Module):
    """Calls ``function`` on its inputs with the module's attributes, which are the function's
    parameters (the subclass's ``function=`` keyword), ``data_format="NXC"`` by default.  A
    sequence window (``kernel``, ``output_size``) lets the functions take no batch axis or
    several, as Flax's pools do."""

    _function: ClassVar[Callable[..., Any]]
    __signature__ = _ConstructorSignature()

    def __init_subclass__(cls, *, function: Callable[..., Any] | None = None, **kwargs: Any):
        if function is not None:
            cls._function = staticmethod(function)
            options = _fields.options(function, cls.__call__, defaults={"data_format": "NXC"})
            _fields.declare(cls, options)
            dataclasses.dataclass(cls, eq=False, repr=False)
        super().__init_subclass__(**kwargs)

    def __post_init__(self) -> None:
        # Lists become tuples, so that the attributes stay hashable static module fields.
        for name, value in _fields.values(self).items():
            if isinstance(value, list):
                setattr(self, name, tuple(value))

    def __call__(self, x: jax.typing.ArrayLike) -> Any:
        return self._function(x, **_fields.values(self))


class MaxPool(Layer, function=jaxpool.max_pool):
    """Max pooling, :func:`jaxpool.max_pool`; ``(y, indices)`` with ``return_indices``.

    Example:
      >>> import jax.numpy as jnp
      >>> MaxPool(2, auto_pad="same_upper")(jnp.ones((1, 5, 5, 3))).shape
      (1, 3, 3, 3)
    """


class MinPool(MaxPool, function=jaxpool.min_pool):
    """Min pooling, :func:`jaxpool.min_pool`; ``(y, indices)`` with ``return_indices``.

    Example:
      >>> import jax.numpy as jnp
      >>> MinPool((2, 2))(jnp.arange(16.0).reshape(4, 4, 1))[:, :, 0].tolist()  # no batch axis
      [[0.0, 2.0], [8.0, 10.0]]
    """


class AvgPool(Layer, function=jaxpool.avg_pool):
    """Average pooling, :func:`jaxpool.avg_pool`.

    Example:
      >>> import jax.numpy as jnp
      >>> AvgPool(3, 1, 1, 1, exclude_pad=True)(jnp.ones((1, 4, 4, 2)))[0, 0, 0].tolist()
      [1.0, 1.0]
    """


class LpPool(Layer, function=jaxpool.lp_pool):
    """Lp pooling, :func:`jaxpool.lp_pool`.

    Example:
      >>> import jax.numpy as jnp
      >>> LpPool(2, p=1)(jnp.ones((1, 4, 4, 2)))[0, 0, 0].tolist()
      [4.0, 4.0]
    """


class AdaptiveMaxPool(Layer, function=jaxpool.adaptive_max_pool):
    """Adaptive max pooling to ``output_size``, :func:`jaxpool.adaptive_max_pool`.

    Example:
      >>> import jax.numpy as jnp
      >>> AdaptiveMaxPool((2, None))(jnp.ones((1, 7, 5, 3))).shape
      (1, 2, 5, 3)
    """


class AdaptiveAvgPool(Layer, function=jaxpool.adaptive_avg_pool):
    """Adaptive average pooling to ``output_size``, :func:`jaxpool.adaptive_avg_pool`.

    Example:
      >>> import jax.numpy as jnp
      >>> AdaptiveAvgPool(1)(jnp.ones((2, 7, 5, 3))).shape
      (2, 1, 1, 3)
    """


class MaxUnpool(Layer, function=jaxpool.max_unpool):
    """Scatters pooled values back to their argmax positions, :func:`jaxpool.max_unpool`.

    ``axis`` must be the one the indices were taken with (``MaxPool(..., axis=...)``; ``2``
    for ``AdaptiveMaxPool``): it has no default, as :func:`jaxpool.max_unpool`'s.  Called
    eagerly, indices outside ``output_shape`` raise a ``ValueError`` that counts the values
    they would lose; under ``jit`` (traced indices) such values are dropped, as in
    :func:`jaxpool.max_unpool`.  ``kernel`` and the other window attributes of the
    ``MaxPool`` that took the indices, where given, place the values without a scatter
    (a map split along a spatial axis then exchanges only halos).

    Example:
      >>> import jax.numpy as jnp
      >>> y, i = MaxPool(2, return_indices=True)(jnp.arange(16.0).reshape(1, 4, 4, 1))
      >>> MaxUnpool(axis=0, kernel=2)(y, i, (1, 4, 4, 1)).sum().item()
      40.0
    """

    def __call__(  # type: ignore[override]  # called on the pooled values and their indices
        self, y: jax.typing.ArrayLike, indices: jax.typing.ArrayLike, output_shape: Any
    ) -> jax.Array:
        shape = tuple(output_shape) if isinstance(output_shape, list) else output_shape
        return self._function(y, indices, shape, **_fields.values(self))
