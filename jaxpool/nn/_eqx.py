"""The Equinox modules of :mod:`jaxpool.nn.eqx`: each adds a batch axis of one, calls the
jaxpool function in NCX layout and drops the batch axis again."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Sequence
from typing import Any, ClassVar

import equinox
import jax
import jax.numpy as jnp

import jaxpool
from jaxpool._src import arguments
from jaxpool._src import window as window_lib
from jaxpool.nn import _fields

# Equinox's layout, with indices that are positions in each channel's plane (PyTorch's): the
# arguments of the functions that the modules fix rather than take.
_FIXED = {"data_format": "NCX", "axis": 2}

_NUM_SPATIAL_DIMS = inspect.Parameter(
    "num_spatial_dims", inspect.Parameter.KEYWORD_ONLY, annotation="int"
)


def _num_spatial_dims(value: Any) -> int:
    n = window_lib.static_int("num_spatial_dims", value)
    if n not in (1, 2, 3):
        raise ValueError(f"`num_spatial_dims` (={value!r}) must be 1, 2 or 3.")
    return n


def _per_axis(minimum: int) -> Callable[[str, Any, int], Any]:
    def check(name: str, value: Any, n: int) -> tuple[int, ...] | None:
        return None if value is None else window_lib.per_axis(name, value, n, minimum)

    return check


def _choice(allowed: Sequence[str]) -> Callable[[str, Any, int], str]:
    return lambda name, value, n: window_lib.choice(name, value, allowed)


def _output_size(name: str, value: Any, n: int) -> tuple[int | None, ...]:
    # `None` entries keep the input's size, which is known only at the call.
    return window_lib.per_axis(name, value, n, 1, keep=(None,) * n)


# The attributes checked and normalised at construction (once `num_spatial_dims` is known),
# in the order their errors are raised; the others are stored as given.
_CHECKS: dict[str, Callable[[str, Any, int], Any]] = {
    "kernel": lambda name, value, n: window_lib.per_axis(name, value, n, 1),
    "output_size": _output_size,
    "strides": _per_axis(1),
    "pads_begin": _per_axis(0),
    "pads_end": _per_axis(0),
    "dilations": _per_axis(1),
    "rounding_type": _choice(window_lib.ROUNDING_TYPES),
    "auto_pad": _choice(window_lib.AUTO_PADS),
}


def _batched(x: jax.typing.ArrayLike, n: int) -> jax.Array:
    """``x`` of shape ``(C, *spatial)`` with a batch axis of one in front."""
    arguments.check_numeric("x", x)
    x = jnp.asarray(x)
    if x.ndim != n + 1:
        raise ValueError(
            f"`x` must be unbatched, of shape (C, *spatial) with {n} spatial axes "
            f"(`num_spatial_dims`), got shape {x.shape}; batch it with `jax.vmap`."
        )
    return x[None]


# A layer's fields are declared when its class is created, from its function's signature,
# where a static type checker cannot see them: to one, a layer takes any arguments.
_Module: Any = equinox.Module


class Layer(_Module):
    """Calls ``function`` (the subclass's ``function=`` keyword) on its unbatched input, with
    a batch axis of one around it, in NCX layout and with the module's fields: the function's
    parameters (those in ``keep`` where given) less ``data_format`` and ``axis``, and a
    ``num_spatial_dims`` that checks the window at construction.  Every field is static."""

    _function: ClassVar[Callable[..., Any]]
    _fixed: ClassVar[dict[str, Any]]

    def __init_subclass__(
        cls,
        *,
        function: Callable[..., Any] | None = None,
        keep: Collection[str] | None = None,
        **kwargs: Any,
    ):
        if function is not None:
            cls._function = staticmethod(function)
            takes = inspect.signature(function).parameters
            cls._fixed = {name: value for name, value in _FIXED.items() if name in takes}
            options = _fields.options(function, cls.__call__, without=_FIXED, keep=keep)
            _fields.declare(cls, [_NUM_SPATIAL_DIMS, *options], equinox.field, static=True)
        super().__init_subclass__(**kwargs)

    def __post_init__(self) -> None:
        values = _fields.values(self)
        self.num_spatial_dims: int = _num_spatial_dims(values["num_spatial_dims"])
        for name, check in _CHECKS.items():
            if name in values:
                setattr(self, name, check(name, values[name], self.num_spatial_dims))

    def _arguments(self) -> dict[str, Any]:
        values = _fields.values(self)
        del values["num_spatial_dims"]
        return {**values, **self._fixed}

    def __call__(self, x: jax.typing.ArrayLike, *, key: Any = None) -> Any:
        out = self._function(_batched(x, self.num_spatial_dims), **self._arguments())
        return jax.tree.map(lambda a: a[0], out)


class MaxPool(Layer, function=jaxpool.max_pool):
    """Max pooling of one unbatched input, :func:`jaxpool.max_pool`; ``(y, indices)`` with
    ``return_indices``, the indices positions in each channel's plane.

    Example:
      >>> import jax.numpy as jnp
      >>> pool = MaxPool(2, num_spatial_dims=2, return_indices=True)
      >>> y, i = pool(jnp.arange(16.0).reshape(1, 4, 4))
      >>> y[0].tolist(), i[0].tolist()
      ([[5.0, 7.0], [13.0, 15.0]], [[5, 7], [13, 15]])
    """


class MinPool(MaxPool, function=jaxpool.min_pool):
    """Min pooling of one unbatched input, :func:`jaxpool.min_pool`; ``(y, indices)`` with
    ``return_indices``, the indices positions in each channel's plane.

    Example:
      >>> import jax.numpy as jnp
      >>> MinPool(2, num_spatial_dims=1)(jnp.array([[3.0, 1.0, -2.0, 4.0]])).tolist()
      [[1.0, -2.0]]
    """


class AvgPool(Layer, function=jaxpool.avg_pool):
    """Average pooling of one unbatched input, :func:`jaxpool.avg_pool`.

    Example:
      >>> import jax.numpy as jnp
      >>> AvgPool(2, num_spatial_dims=1)(jnp.arange(4.0).reshape(1, 4)).tolist()
      [[0.5, 2.5]]
    """


class LpPool(Layer, function=jaxpool.lp_pool):
    """Lp pooling of one unbatched input, :func:`jaxpool.lp_pool`.

    Example:
      >>> import jax.numpy as jnp
      >>> LpPool(2, num_spatial_dims=1, p=1)(jnp.arange(4.0).reshape(1, 4)).tolist()
      [[1.0, 5.0]]
    """


class AdaptiveMaxPool(Layer, function=jaxpool.adaptive_max_pool):
    """Adaptive max pooling of one unbatched input, :func:`jaxpool.adaptive_max_pool`;
    ``(y, indices)`` with ``return_indices``.  Its bins are PyTorch's and OpenVINO's
    (``[floor(i * L / O), ceil((i + 1) * L / O))``), not those of Equinox's own adaptive pools.

    Example:
      >>> import jax.numpy as jnp
      >>> AdaptiveMaxPool(3, num_spatial_dims=1)(jnp.arange(5.0).reshape(1, 5)).tolist()
      [[1.0, 3.0, 4.0]]
    """


class AdaptiveAvgPool(Layer, function=jaxpool.adaptive_avg_pool):
    """Adaptive average pooling of one unbatched input, :func:`jaxpool.adaptive_avg_pool`
    (PyTorch's and OpenVINO's bins, not those of Equinox's own adaptive pools).

    Example:
      >>> import jax.numpy as jnp
      >>> AdaptiveAvgPool(3, num_spatial_dims=1)(jnp.arange(5.0).reshape(1, 5)).tolist()
      [[0.5, 2.0, 3.5]]
    """


class MaxUnpool(Layer, function=jaxpool.max_unpool, keep=("combine",)):
    """Scatters the values of one unbatched pooled input back to the positions its indices
    (positions in each channel's plane, as this module's pools return them) name,
    :func:`jaxpool.max_unpool` with ``axis=2``.

    Called on concrete indices, an index outside ``output_shape`` raises a ``ValueError`` that
    counts the values it would lose.  Under ``jax.vmap`` or ``eqx.filter_jit`` the indices are
    traced and cannot be inspected: there such a value is dropped (it reaches no position,
    and its gradient is zero), as in :func:`jaxpool.max_unpool`.

    Example:
      >>> import jax.numpy as jnp
      >>> x = jnp.arange(4.0).reshape(1, 4)
      >>> y, i = MaxPool(2, num_spatial_dims=1, return_indices=True)(x)
      >>> MaxUnpool(num_spatial_dims=1)(y, i, x.shape).tolist()
      [[0.0, 1.0, 0.0, 3.0]]
    """

    def __call__(  # type: ignore[override]  # called on the pooled values and their indices
        self,
        y: jax.typing.ArrayLike,
        indices: jax.typing.ArrayLike,
        output_shape: Any,
        *,
        key: Any = None,
    ) -> jax.Array:
        n = self.num_spatial_dims
        shape = window_lib.per_axis(
            "output_shape", output_shape, n + 1, 1, scalar=False, what="dimension of `x`"
        )
        out = self._function(_batched(y, n), _batched(indices, n), (1, *shape), **self._arguments())
        return out[0]
