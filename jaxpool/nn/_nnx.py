"""Flax NNX pooling modules: stateless wrappers of the jaxpool functions, channels-last.

Each module stores its attributes at construction and calls the function of the same name
with them; see that function for the formula, the output shape and the errors.
"""

from __future__ import annotations

from typing import Any

import jax
from flax import nnx

import jaxpool


def _static(value: Any) -> Any:
    """Lists become tuples, so that attributes stay hashable static module fields."""
    return tuple(value) if isinstance(value, list) else value


class MaxPool(nnx.Module):
    """Max pooling, :func:`jaxpool.max_pool`; ``(y, indices)`` with ``return_indices``.

    Example:
      >>> import jax.numpy as jnp
      >>> MaxPool(2, auto_pad="same_upper")(jnp.ones((1, 5, 5, 3))).shape
      (1, 3, 3, 3)
    """

    def __init__(
        self,
        kernel: Any,
        strides: Any = None,
        pads_begin: Any = None,
        pads_end: Any = None,
        *,
        dilations: Any = None,
        rounding_type: str = "floor",
        auto_pad: str = "explicit",
        data_format: str = "NXC",
        return_indices: bool = False,
        index_element_type: Any = None,
        axis: int = 0,
    ):
        self.kernel = _static(kernel)
        self.strides = _static(strides)
        self.pads_begin = _static(pads_begin)
        self.pads_end = _static(pads_end)
        self.dilations = _static(dilations)
        self.rounding_type = rounding_type
        self.auto_pad = auto_pad
        self.data_format = data_format
        self.return_indices = return_indices
        self.index_element_type = index_element_type
        self.axis = axis

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
    """Min pooling, :func:`jaxpool.min_pool`; ``(y, indices)`` with ``return_indices``.

    Example:
      >>> import jax.numpy as jnp
      >>> MinPool((2, 2))(jnp.arange(16.0).reshape(4, 4, 1))[:, :, 0].tolist()  # no batch axis
      [[0.0, 2.0], [8.0, 10.0]]
    """

    _pool = staticmethod(jaxpool.min_pool)


class AvgPool(nnx.Module):
    """Average pooling, :func:`jaxpool.avg_pool`.

    Example:
      >>> import jax.numpy as jnp
      >>> AvgPool(3, 1, 1, 1, exclude_pad=True)(jnp.ones((1, 4, 4, 2)))[0, 0, 0].tolist()
      [1.0, 1.0]
    """

    def __init__(
        self,
        kernel: Any,
        strides: Any = None,
        pads_begin: Any = None,
        pads_end: Any = None,
        *,
        exclude_pad: bool = False,
        dilations: Any = None,
        rounding_type: str = "floor",
        auto_pad: str = "explicit",
        data_format: str = "NXC",
        divisor_rule: str = "kernel",
        divisor_override: int | None = None,
        integer_division: str = "round",
    ):
        self.kernel = _static(kernel)
        self.strides = _static(strides)
        self.pads_begin = _static(pads_begin)
        self.pads_end = _static(pads_end)
        self.exclude_pad = exclude_pad
        self.dilations = _static(dilations)
        self.rounding_type = rounding_type
        self.auto_pad = auto_pad
        self.data_format = data_format
        self.divisor_rule = divisor_rule
        self.divisor_override = divisor_override
        self.integer_division = integer_division

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


class LpPool(nnx.Module):
    """Lp pooling, :func:`jaxpool.lp_pool`.

    Example:
      >>> import jax.numpy as jnp
      >>> LpPool(2, p=1)(jnp.ones((1, 4, 4, 2)))[0, 0, 0].tolist()
      [4.0, 4.0]
    """

    def __init__(
        self,
        kernel: Any,
        strides: Any = None,
        pads_begin: Any = None,
        pads_end: Any = None,
        *,
        p: float = 2,
        dilations: Any = None,
        rounding_type: str = "floor",
        auto_pad: str = "explicit",
        data_format: str = "NXC",
    ):
        self.kernel = _static(kernel)
        self.strides = _static(strides)
        self.pads_begin = _static(pads_begin)
        self.pads_end = _static(pads_end)
        self.p = p
        self.dilations = _static(dilations)
        self.rounding_type = rounding_type
        self.auto_pad = auto_pad
        self.data_format = data_format

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


class AdaptiveMaxPool(nnx.Module):
    """Adaptive max pooling to ``output_size``, :func:`jaxpool.adaptive_max_pool`.

    Example:
      >>> import jax.numpy as jnp
      >>> AdaptiveMaxPool((2, None))(jnp.ones((1, 7, 5, 3))).shape
      (1, 2, 5, 3)
    """

    def __init__(
        self,
        output_size: Any,
        *,
        data_format: str = "NXC",
        return_indices: bool = False,
        index_element_type: Any = None,
    ):
        self.output_size = _static(output_size)
        self.data_format = data_format
        self.return_indices = return_indices
        self.index_element_type = index_element_type

    def __call__(self, x: jax.typing.ArrayLike) -> jax.Array | tuple[jax.Array, jax.Array]:
        return jaxpool.adaptive_max_pool(
            x,
            self.output_size,
            data_format=self.data_format,
            return_indices=self.return_indices,
            index_element_type=self.index_element_type,
        )


class AdaptiveAvgPool(nnx.Module):
    """Adaptive average pooling to ``output_size``, :func:`jaxpool.adaptive_avg_pool`.

    Example:
      >>> import jax.numpy as jnp
      >>> AdaptiveAvgPool(1)(jnp.ones((2, 7, 5, 3))).shape
      (2, 1, 1, 3)
    """

    def __init__(self, output_size: Any, *, data_format: str = "NXC"):
        self.output_size = _static(output_size)
        self.data_format = data_format

    def __call__(self, x: jax.typing.ArrayLike) -> jax.Array:
        return jaxpool.adaptive_avg_pool(x, self.output_size, data_format=self.data_format)


class MaxUnpool(nnx.Module):
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

    def __init__(
        self,
        *,
        axis: int,
        combine: str = "sum",
        data_format: str = "NXC",
        kernel: Any = None,
        strides: Any = None,
        pads_begin: Any = None,
        pads_end: Any = None,
        dilations: Any = None,
        rounding_type: str = "floor",
        auto_pad: str = "explicit",
    ):
        self.axis = axis
        self.combine = combine
        self.data_format = data_format
        self.kernel = _static(kernel)
        self.strides = _static(strides)
        self.pads_begin = _static(pads_begin)
        self.pads_end = _static(pads_end)
        self.dilations = _static(dilations)
        self.rounding_type = rounding_type
        self.auto_pad = auto_pad

    def __call__(
        self, y: jax.typing.ArrayLike, indices: jax.typing.ArrayLike, output_shape: Any
    ) -> jax.Array:
        return jaxpool.max_unpool(
            y,
            indices,
            _static(output_shape),
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
