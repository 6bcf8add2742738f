"""The Equinox modules of :mod:`jaxpool.nn.eqx`: each adds a batch axis of one, calls the
jaxpool function in NCX layout and drops the batch axis again."""

from __future__ import annotations

from typing import Any

import equinox
import jax
import jax.numpy as jnp

import jaxpool
from jaxpool._src import arguments
from jaxpool._src import window as window_lib


def _num_spatial_dims(value: Any) -> int:
    n = window_lib.static_int("num_spatial_dims", value)
    if n not in (1, 2, 3):
        raise ValueError(f"`num_spatial_dims` (={value!r}) must be 1, 2 or 3.")
    return n


def _per_axis(name: str, value: Any, n: int, minimum: int) -> tuple[int, ...] | None:
    return None if value is None else window_lib.per_axis(name, value, n, minimum)


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


def _unbatched(out: Any) -> Any:
    return jax.tree.map(lambda a: a[0], out)


class _Sliding(equinox.Module):
    """The attributes of a sliding window, checked at construction."""

    num_spatial_dims: int = equinox.field(static=True)
    kernel: tuple[int, ...] = equinox.field(static=True)
    strides: tuple[int, ...] | None = equinox.field(static=True)
    pads_begin: tuple[int, ...] | None = equinox.field(static=True)
    pads_end: tuple[int, ...] | None = equinox.field(static=True)
    dilations: tuple[int, ...] | None = equinox.field(static=True)
    rounding_type: str = equinox.field(static=True)
    auto_pad: str = equinox.field(static=True)

    def _init_window(self, n, kernel, strides, pads_begin, pads_end, dilations, rounding, pad):
        n = _num_spatial_dims(n)
        self.num_spatial_dims = n
        self.kernel = window_lib.per_axis("kernel", kernel, n, 1)
        self.strides = _per_axis("strides", strides, n, 1)
        self.pads_begin = _per_axis("pads_begin", pads_begin, n, 0)
        self.pads_end = _per_axis("pads_end", pads_end, n, 0)
        self.dilations = _per_axis("dilations", dilations, n, 1)
        self.rounding_type = window_lib.choice("rounding_type", rounding, window_lib.ROUNDING_TYPES)
        self.auto_pad = window_lib.choice("auto_pad", pad, window_lib.AUTO_PADS)

    def _window(self) -> dict[str, Any]:
        return dict(
            kernel=self.kernel,
            strides=self.strides,
            pads_begin=self.pads_begin,
            pads_end=self.pads_end,
            dilations=self.dilations,
            rounding_type=self.rounding_type,
            auto_pad=self.auto_pad,
        )


class MaxPool(_Sliding):
    """Max pooling of one unbatched input, :func:`jaxpool.max_pool`; ``(y, indices)`` with
    ``return_indices``, the indices positions in each channel's plane.

    Example:
      >>> import jax.numpy as jnp
      >>> pool = MaxPool(2, num_spatial_dims=2, return_indices=True)
      >>> y, i = pool(jnp.arange(16.0).reshape(1, 4, 4))
      >>> y[0].tolist(), i[0].tolist()
      ([[5.0, 7.0], [13.0, 15.0]], [[5, 7], [13, 15]])
    """

    return_indices: bool = equinox.field(static=True)
    index_element_type: Any = equinox.field(static=True)

    def __init__(
        self,
        kernel: Any,
        strides: Any = None,
        pads_begin: Any = None,
        pads_end: Any = None,
        *,
        num_spatial_dims: int,
        dilations: Any = None,
        rounding_type: str = "floor",
        auto_pad: str = "explicit",
        return_indices: bool = False,
        index_element_type: Any = None,
    ):
        self._init_window(
            num_spatial_dims, kernel, strides, pads_begin, pads_end, dilations, rounding_type,
            auto_pad,
        )  # fmt: skip
        self.return_indices = return_indices
        self.index_element_type = index_element_type

    _pool = staticmethod(jaxpool.max_pool)

    def __call__(self, x: jax.typing.ArrayLike, *, key: Any = None) -> Any:
        out = self._pool(
            _batched(x, self.num_spatial_dims),
            **self._window(),
            return_indices=self.return_indices,
            index_element_type=self.index_element_type,
            axis=2,
        )
        return _unbatched(out)


class MinPool(MaxPool):
    """Min pooling of one unbatched input, :func:`jaxpool.min_pool`; ``(y, indices)`` with
    ``return_indices``, the indices positions in each channel's plane.

    Example:
      >>> import jax.numpy as jnp
      >>> MinPool(2, num_spatial_dims=1)(jnp.array([[3.0, 1.0, -2.0, 4.0]])).tolist()
      [[1.0, -2.0]]
    """

    _pool = staticmethod(jaxpool.min_pool)


class AvgPool(_Sliding):
    """Average pooling of one unbatched input, :func:`jaxpool.avg_pool`.

    Example:
      >>> import jax.numpy as jnp
      >>> AvgPool(2, num_spatial_dims=1)(jnp.arange(4.0).reshape(1, 4)).tolist()
      [[0.5, 2.5]]
    """

    exclude_pad: bool = equinox.field(static=True)
    divisor_rule: str = equinox.field(static=True)
    divisor_override: int | None = equinox.field(static=True)
    integer_division: str = equinox.field(static=True)

    def __init__(
        self,
        kernel: Any,
        strides: Any = None,
        pads_begin: Any = None,
        pads_end: Any = None,
        *,
        num_spatial_dims: int,
        exclude_pad: bool = False,
        dilations: Any = None,
        rounding_type: str = "floor",
        auto_pad: str = "explicit",
        divisor_rule: str = "kernel",
        divisor_override: int | None = None,
        integer_division: str = "round",
    ):
        self._init_window(
            num_spatial_dims, kernel, strides, pads_begin, pads_end, dilations, rounding_type,
            auto_pad,
        )  # fmt: skip
        self.exclude_pad = exclude_pad
        self.divisor_rule = divisor_rule
        self.divisor_override = divisor_override
        self.integer_division = integer_division

    def __call__(self, x: jax.typing.ArrayLike, *, key: Any = None) -> jax.Array:
        out = jaxpool.avg_pool(
            _batched(x, self.num_spatial_dims),
            **self._window(),
            exclude_pad=self.exclude_pad,
            divisor_rule=self.divisor_rule,
            divisor_override=self.divisor_override,
            integer_division=self.integer_division,
        )
        return _unbatched(out)


class LpPool(_Sliding):
    """Lp pooling of one unbatched input, :func:`jaxpool.lp_pool`.

    Example:
      >>> import jax.numpy as jnp
      >>> LpPool(2, num_spatial_dims=1, p=1)(jnp.arange(4.0).reshape(1, 4)).tolist()
      [[1.0, 5.0]]
    """

    p: float = equinox.field(static=True)

    def __init__(
        self,
        kernel: Any,
        strides: Any = None,
        pads_begin: Any = None,
        pads_end: Any = None,
        *,
        num_spatial_dims: int,
        p: float = 2,
        dilations: Any = None,
        rounding_type: str = "floor",
        auto_pad: str = "explicit",
    ):
        self._init_window(
            num_spatial_dims, kernel, strides, pads_begin, pads_end, dilations, rounding_type,
            auto_pad,
        )  # fmt: skip
        self.p = p

    def __call__(self, x: jax.typing.ArrayLike, *, key: Any = None) -> jax.Array:
        out = jaxpool.lp_pool(_batched(x, self.num_spatial_dims), **self._window(), p=self.p)
        return _unbatched(out)


class _Adaptive(equinox.Module):
    num_spatial_dims: int = equinox.field(static=True)
    output_size: tuple[int | None, ...] = equinox.field(static=True)

    def _init_output(self, n: Any, output_size: Any) -> None:
        n = _num_spatial_dims(n)
        self.num_spatial_dims = n
        # `None` entries keep the input's size, which is known only at the call.
        keep = (None,) * n
        self.output_size = window_lib.per_axis("output_size", output_size, n, 1, keep=keep)


class AdaptiveMaxPool(_Adaptive):
    """Adaptive max pooling of one unbatched input, :func:`jaxpool.adaptive_max_pool`;
    ``(y, indices)`` with ``return_indices``.  Its bins are PyTorch's and OpenVINO's
    (``[floor(i * L / O), ceil((i + 1) * L / O))``), not those of Equinox's own adaptive pools.

    Example:
      >>> import jax.numpy as jnp
      >>> AdaptiveMaxPool(3, num_spatial_dims=1)(jnp.arange(5.0).reshape(1, 5)).tolist()
      [[1.0, 3.0, 4.0]]
    """

    return_indices: bool = equinox.field(static=True)
    index_element_type: Any = equinox.field(static=True)

    def __init__(
        self,
        output_size: Any,
        *,
        num_spatial_dims: int,
        return_indices: bool = False,
        index_element_type: Any = None,
    ):
        self._init_output(num_spatial_dims, output_size)
        self.return_indices = return_indices
        self.index_element_type = index_element_type

    def __call__(self, x: jax.typing.ArrayLike, *, key: Any = None) -> Any:
        out = jaxpool.adaptive_max_pool(
            _batched(x, self.num_spatial_dims),
            self.output_size,
            return_indices=self.return_indices,
            index_element_type=self.index_element_type,
        )
        return _unbatched(out)


class AdaptiveAvgPool(_Adaptive):
    """Adaptive average pooling of one unbatched input, :func:`jaxpool.adaptive_avg_pool`
    (PyTorch's and OpenVINO's bins, not those of Equinox's own adaptive pools).

    Example:
      >>> import jax.numpy as jnp
      >>> AdaptiveAvgPool(3, num_spatial_dims=1)(jnp.arange(5.0).reshape(1, 5)).tolist()
      [[0.5, 2.0, 3.5]]
    """

    def __init__(self, output_size: Any, *, num_spatial_dims: int):
        self._init_output(num_spatial_dims, output_size)

    def __call__(self, x: jax.typing.ArrayLike, *, key: Any = None) -> jax.Array:
        out = jaxpool.adaptive_avg_pool(_batched(x, self.num_spatial_dims), self.output_size)
        return _unbatched(out)


class MaxUnpool(equinox.Module):
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

    num_spatial_dims: int = equinox.field(static=True)
    combine: str = equinox.field(static=True)

    def __init__(self, *, num_spatial_dims: int, combine: str = "sum"):
        self.num_spatial_dims = _num_spatial_dims(num_spatial_dims)
        self.combine = combine

    def __call__(
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
        out = jaxpool.max_unpool(
            _batched(y, n),
            _batched(indices, n),
            (1, *shape),
            axis=2,
            combine=self.combine,
        )
        return out[0]
