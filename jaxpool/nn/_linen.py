"""Flax Linen pooling modules: the twins of :mod:`jaxpool.nn`'s NNX modules, channels-last.

Each module's fields are the arguments of the function of the same name; see that function
for the formula, the output shape and the errors.
"""

from __future__ import annotations

from typing import Any

import jax
from flax import linen

import jaxpool


class MaxPool(linen.Module):
    """Max pooling, :func:`jaxpool.max_pool`; ``(y, indices)`` with ``return_indices``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> pool = MaxPool(2, auto_pad="same_upper")
      >>> pool.apply({}, jnp.ones((1, 5, 5, 3))).shape
      (1, 3, 3, 3)
    """

    kernel: Any
    strides: Any = None
    pads_begin: Any = None
    pads_end: Any = None
    dilations: Any = None
    rounding_type: str = "floor"
    auto_pad: str = "explicit"
    data_format: str = "NXC"
    return_indices: bool = False
    index_element_type: Any = None
    axis: int = 0

    _pool = staticmethod(jaxpool.max_pool)

    def __call__(self, x: jax.typing.ArrayLike) -> jax.Array | tuple[jax.Array, jax.Array]:
        return self._pool(
            x,
            self.kernel,
            self.strides,
            self.pads_begin,
            self.pads_end,
            dilations=self.dilations,
            rounding_type=self.rounding_type,
            auto_pad=self.auto_pad,
            data_format=self.data_format,
            return_indices=self.return_indices,
            index_element_type=self.index_element_type,
            axis=self.axis,
        )


class MinPool(MaxPool):
    """Min pooling, :func:`jaxpool.min_pool`; ``(y, indices)`` with ``return_indices``."""

    _pool = staticmethod(jaxpool.min_pool)


class AvgPool(linen.Module):
    """Average pooling, :func:`jaxpool.avg_pool`."""

    kernel: Any
    strides: Any = None
    pads_begin: Any = None
    pads_end: Any = None
    exclude_pad: bool = False
    dilations: Any = None
    rounding_type: str = "floor"
    auto_pad: str = "explicit"
    data_format: str = "NXC"
    divisor_rule: str = "kernel"
    divisor_override: int | None = None
    integer_division: str = "round"

    def __call__(self, x: jax.typing.ArrayLike) -> jax.Array:
        return jaxpool.avg_pool(
            x,
            self.kernel,
            self.strides,
            self.pads_begin,
            self.pads_end,
            exclude_pad=self.exclude_pad,
            dilations=self.dilations,
            rounding_type=self.rounding_type,
            auto_pad=self.auto_pad,
            data_format=self.data_format,
            divisor_rule=self.divisor_rule,
            divisor_override=self.divisor_override,
            integer_division=self.integer_division,
        )


class LpPool(linen.Module):
    """Lp pooling, :func:`jaxpool.lp_pool`."""

    kernel: Any
    strides: Any = None
    pads_begin: Any = None
    pads_end: Any = None
    p: float = 2
    dilations: Any = None
    rounding_type: str = "floor"
    auto_pad: str = "explicit"
    data_format: str = "NXC"

    def __call__(self, x: jax.typing.ArrayLike) -> jax.Array:
        return jaxpool.lp_pool(
            x,
            self.kernel,
            self.strides,
            self.pads_begin,
            self.pads_end,
            p=self.p,
            dilations=self.dilations,
            rounding_type=self.rounding_type,
            auto_pad=self.auto_pad,
            data_format=self.data_format,
        )


class AdaptiveMaxPool(linen.Module):
    """Adaptive max pooling to ``output_size``, :func:`jaxpool.adaptive_max_pool`."""

    output_size: Any
    data_format: str = "NXC"
    return_indices: bool = False
    index_element_type: Any = None

    def __call__(self, x: jax.typing.ArrayLike) -> jax.Array | tuple[jax.Array, jax.Array]:
        return jaxpool.adaptive_max_pool(
            x,
            self.output_size,
            data_format=self.data_format,
            return_indices=self.return_indices,
            index_element_type=self.index_element_type,
        )


class AdaptiveAvgPool(linen.Module):
    """Adaptive average pooling to ``output_size``, :func:`jaxpool.adaptive_avg_pool`."""

    output_size: Any
    data_format: str = "NXC"

    def __call__(self, x: jax.typing.ArrayLike) -> jax.Array:
        return jaxpool.adaptive_avg_pool(x, self.output_size, data_format=self.data_format)


class MaxUnpool(linen.Module):
    """Scatters pooled values back to their argmax positions, :func:`jaxpool.max_unpool`.

    Applied eagerly, indices outside ``output_shape`` raise a ``ValueError`` that counts the
    values they would lose; under ``jit`` (traced indices) such values are dropped, as in
    :func:`jaxpool.max_unpool`.  ``kernel`` and the other window attributes of the
    ``MaxPool`` that took the indices, where given, place the values without a scatter
    (a map split along a spatial axis then exchanges only halos).
    """

    axis: int
    combine: str = "sum"
    data_format: str = "NXC"
    kernel: Any = None
    strides: Any = None
    pads_begin: Any = None
    pads_end: Any = None
    dilations: Any = None
    rounding_type: str = "floor"
    auto_pad: str = "explicit"

    def __call__(
        self, y: jax.typing.ArrayLike, indices: jax.typing.ArrayLike, output_shape: Any
    ) -> jax.Array:
        return jaxpool.max_unpool(
            y,
            indices,
            tuple(output_shape),
            axis=self.axis,
            combine=self.combine,
            data_format=self.data_format,
            kernel=self.kernel,
            strides=self.strides,
            pads_begin=self.pads_begin,
            pads_end=self.pads_end,
            dilations=self.dilations,
            rounding_type=self.rounding_type,
            auto_pad=self.auto_pad,
        )
