"""torch.nn.functional's pooling functions, bound to jaxpool's ops.

Each function has PyTorch's name, signature and defaults and takes PyTorch's layout, batched
``(N, C, *spatial)`` or unbatched ``(C, *spatial)``; a binder turns its arguments, read and
checked as PyTorch reads them (:mod:`.torch_arguments`), into one call of a core op:

* ``max_pool*d``: :func:`jaxpool.max_pool` with ``pads_begin = pads_end = padding``,
  ``rounding_type="ceil_torch"`` for ``ceil_mode`` (a last window that would start in the end
  padding is dropped) and indices counted in each ``(n, c)`` plane (``axis=2``), int64 with
  ``jax_enable_x64``, else int32.  Ties give the first element of the window, a window of
  ``-inf`` its first element, as PyTorch does.  A NaN is the window's maximum, and its index
  (and so its gradient) is the *last* NaN of the window, PyTorch's rule (its kernels scan
  with ``val > max || isnan(val)``), where jaxpool's own ops give the first: the two differ
  only in a window holding several NaNs.
* ``avg_pool*d``: :func:`jaxpool.avg_pool` with ``divisor_rule="padded_input"``: with
  ``count_include_pad=True`` a window divides by the number of its positions inside the padded
  input (a ``ceil_mode`` window past the end padding counts less than the kernel), with
  ``False`` by those inside the input; ``divisor_override`` divides every window by itself.
  Like PyTorch's, they take int64 (with ``jax_enable_x64``) and divide it toward zero.
* ``lp_pool*d``: as PyTorch computes it, ``avg_pool(x**p, kernel_size, stride, 0,
  ceil_mode)``, then ``sign(out) * relu(abs(out)) * prod(kernel_size)``, then ``**(1 / p)``:
  no absolute value of ``x``, a partial ``ceil_mode`` window scaled by
  ``prod(kernel_size) / count``; a window whose sum is negative gives NaN (for a fractional
  ``1 / p``), and the gradient is NaN where a window's sum is 0 (for ``p > 1``), as PyTorch's.
* ``adaptive_max_pool*d``, ``adaptive_avg_pool*d``: :func:`jaxpool.adaptive_max_pool` (indices
  in each plane, the last NaN of a bin as for ``max_pool*d``) and
  :func:`jaxpool.adaptive_avg_pool`; ``None`` in ``output_size`` keeps that input size.
* ``max_unpool*d``: :func:`jaxpool.max_unpool` with ``combine="torch"`` (the last value named to
  a position is kept, as PyTorch's CPU kernel keeps it, and every value's gradient is the
  output gradient at its index), into PyTorch's output size, by default ``(in - 1) * stride -
  2 * padding + kernel_size``.

Bad arguments raise ``ValueError``/``TypeError`` where PyTorch raises ``RuntimeError``: a rank
PyTorch refuses, a ``padding`` over half the kernel, an empty channel or spatial axis, an
``output_size`` of ``max_unpool`` outside PyTorch's range.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import arguments
from jaxpool._src import window as window_lib
from jaxpool._src.adaptive_avg_pool import adaptive_avg_pool
from jaxpool._src.adaptive_max_pool import with_nan_rule as adaptive_max_pool_with
from jaxpool._src.avg_pool import avg_pool
from jaxpool._src.interop import torch_arguments as torch_args
from jaxpool._src.max_pool import with_nan_rule as max_pool_with
from jaxpool._src.unpool import max_unpool

# --------------------------------------------------------------------------------------------
# The binders.
# --------------------------------------------------------------------------------------------


def _max_pool(nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    def pool(x):
        window = torch_args.sliding(x, nd, kernel_size, stride, padding, dilation, ceil_mode)
        return max_pool_with("last", x, **window, return_indices=return_indices, axis=2)

    return torch_args.over_batch(f"max_pool{nd}d", nd, input, pool)


def _avg_pool(
    nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
):
    name = f"avg_pool{nd}d"
    if divisor_override is not None:
        divisor_override = window_lib.static_int("divisor_override", divisor_override)
        if divisor_override == 0:
            raise ValueError("`divisor_override` (=0) must not be zero (divisor must be not zero).")
    if not isinstance(count_include_pad, (bool, np.bool_)):
        raise TypeError(f"`count_include_pad` must be a bool, got {count_include_pad!r}.")

    def pool(x):
        torch_args.check_floating(name, x, np.int64)
        window = torch_args.sliding(x, nd, kernel_size, stride, padding, 1, ceil_mode)
        return avg_pool(
            x,
            **window,
            exclude_pad=not count_include_pad,
            divisor_rule="padded_input",
            divisor_override=divisor_override,
            integer_division="truncate",
        )

    return torch_args.over_batch(name, nd, input, pool)


def _lp_pool(nd, input, norm_type, kernel_size, stride, ceil_mode):
    name = f"lp_pool{nd}d"
    p = torch_args.lp_norm(norm_type)

    def pool(x):
        torch_args.check_floating(name, x)
        window = torch_args.sliding(x, nd, kernel_size, stride, 0, 1, ceil_mode)
        # PyTorch's formula, step by step, so that values and gradients (NaN included) are its.
        out = avg_pool(x**p, **window, divisor_rule="padded_input")
        out = jnp.sign(out) * jax.nn.relu(jnp.abs(out))
        return (out * math.prod(window["kernel"])) ** (1 / p)

    return torch_args.over_batch(name, nd, input, pool)


def _adaptive_max_pool(nd, input, output_size, return_indices):
    def pool(x):
        return adaptive_max_pool_with("last", x, output_size, return_indices=return_indices)

    return torch_args.over_batch(f"adaptive_max_pool{nd}d", nd, input, pool)


def _adaptive_avg_pool(nd, input, output_size):
    def pool(x):
        torch_args.check_floating(f"adaptive_avg_pool{nd}d", x)
        return adaptive_avg_pool(x, output_size)

    return torch_args.over_batch(f"adaptive_avg_pool{nd}d", nd, input, pool, empty_channels=True)


def _max_unpool(nd, input, indices, kernel_size, stride, padding, output_size):
    kernel = torch_args.per_dim("kernel_size", kernel_size, nd, 1)
    strides = torch_args.default_stride(stride, kernel, nd)
    pads = torch_args.per_dim("padding", padding, nd, 0)

    def sizes(y):
        default = tuple(
            (i - 1) * s - 2 * p + k for i, s, p, k in zip(y.shape[2:], strides, pads, kernel)
        )
        return torch_args.unpool_size(output_size, default, strides)

    return unpool_to(nd, input, indices, sizes)


def unpool_to(
    nd: int, input: Any, indices: Any, sizes: Callable[[jax.Array], tuple[int, ...]]
) -> jax.Array:
    """PyTorch's unpooling of ``input`` at ``indices`` (positions in each plane) into planes
    of the spatial ``sizes(input)``: its last write wins, and its gradient.  Indices outside
    the planes are refused where they are concrete (``max_unpool``'s check)."""
    name = f"max_unpool{nd}d"
    arguments.check_numeric("indices", indices)
    indices = jnp.asarray(indices)
    if indices.shape != jnp.shape(input):
        raise ValueError(
            f"`indices` of shape {indices.shape} must have the shape of `input` "
            f"({jnp.shape(input)})."
        )
    if indices.ndim == nd + 1:
        indices = indices[None]

    def unpool(y):
        return max_unpool(y, indices, (*y.shape[:2], *sizes(y)), axis=2, combine="torch")

    return torch_args.over_batch(name, nd, input, unpool)


# --------------------------------------------------------------------------------------------
# PyTorch's functions.
# --------------------------------------------------------------------------------------------


def max_pool1d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """``torch.nn.functional.max_pool1d``: see the module's docstring."""
    return _max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """``torch.nn.functional.max_pool2d``: see the module's docstring.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpool import torch as F
      >>> y, i = F.max_pool2d(jnp.arange(16.0).reshape(1, 4, 4), 2, return_indices=True)
      >>> y.tolist(), i.tolist()
      ([[[5.0, 7.0], [13.0, 15.0]]], [[[5, 7], [13, 15]]])
    """
    return _max_pool(2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """``torch.nn.functional.max_pool3d``: see the module's docstring."""
    return _max_pool(3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """``torch.nn.functional.avg_pool1d``: see the module's docstring."""
    return _avg_pool(1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    """``torch.nn.functional.avg_pool2d``: see the module's docstring.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpool import torch as F
      >>> x = jnp.arange(16.0).reshape(1, 4, 4)
      >>> F.avg_pool2d(x, 3, 2, 1, ceil_mode=True)[0, -1, 1:].tolist()
      [7.0, 3.75]
    """
    return _avg_pool(
        2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


def avg_pool3d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    """``torch.nn.functional.avg_pool3d``: see the module's docstring."""
    return _avg_pool(
        3, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``torch.nn.functional.lp_pool1d``: see the module's docstring."""
    return _lp_pool(1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``torch.nn.functional.lp_pool2d``: see the module's docstring.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpool import torch as F
      >>> F.lp_pool2d(jnp.array([[[3.0, 4.0], [0.0, 0.0]]]), 2, 2).tolist()
      [[[5.0]]]
    """
    return _lp_pool(2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``torch.nn.functional.lp_pool3d``: see the module's docstring."""
    return _lp_pool(3, input, norm_type, kernel_size, stride, ceil_mode)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """``torch.nn.functional.adaptive_max_pool1d``: see the module's docstring."""
    return _adaptive_max_pool(1, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """``torch.nn.functional.adaptive_max_pool2d``: see the module's docstring.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpool import torch as F
      >>> y, i = F.adaptive_max_pool2d(jnp.arange(6.0).reshape(1, 2, 3), (1, None), True)
      >>> y.tolist(), i.tolist()
      ([[[3.0, 4.0, 5.0]]], [[[3, 4, 5]]])
    """
    return _adaptive_max_pool(2, input, output_size, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """``torch.nn.functional.adaptive_max_pool3d``: see the module's docstring."""
    return _adaptive_max_pool(3, input, output_size, return_indices)


def adaptive_avg_pool1d(input, output_size):
    """``torch.nn.functional.adaptive_avg_pool1d``: see the module's docstring."""
    return _adaptive_avg_pool(1, input, output_size)


def adaptive_avg_pool2d(input, output_size):
    """``torch.nn.functional.adaptive_avg_pool2d``: see the module's docstring."""
    return _adaptive_avg_pool(2, input, output_size)


def adaptive_avg_pool3d(input, output_size):
    """``torch.nn.functional.adaptive_avg_pool3d``: see the module's docstring."""
    return _adaptive_avg_pool(3, input, output_size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """``torch.nn.functional.max_unpool1d``: see the module's docstring."""
    return _max_unpool(1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """``torch.nn.functional.max_unpool2d``: see the module's docstring.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxpool import torch as F
      >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
      >>> y, i = F.max_pool2d(x, 2, return_indices=True)
      >>> F.max_unpool2d(y, i, 2)[0, 0, :2].tolist()
      [[0.0, 0.0, 0.0, 0.0], [0.0, 5.0, 0.0, 7.0]]
    """
    return _max_unpool(2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """``torch.nn.functional.max_unpool3d``: see the module's docstring."""
    return _max_unpool(3, input, indices, kernel_size, stride, padding, output_size)


# PyTorch's name -> the function that binds it.
BINDERS = {
    "max_pool1d": max_pool1d,
    "max_pool2d": max_pool2d,
    "max_pool3d": max_pool3d,
    "avg_pool1d": avg_pool1d,
    "avg_pool2d": avg_pool2d,
    "avg_pool3d": avg_pool3d,
    "lp_pool1d": lp_pool1d,
    "lp_pool2d": lp_pool2d,
    "lp_pool3d": lp_pool3d,
    "adaptive_max_pool1d": adaptive_max_pool1d,
    "adaptive_max_pool2d": adaptive_max_pool2d,
    "adaptive_max_pool3d": adaptive_max_pool3d,
    "adaptive_avg_pool1d": adaptive_avg_pool1d,
    "adaptive_avg_pool2d": adaptive_avg_pool2d,
    "adaptive_avg_pool3d": adaptive_avg_pool3d,
    "max_unpool1d": max_unpool1d,
    "max_unpool2d": max_unpool2d,
    "max_unpool3d": max_unpool3d,
}
