"""torch.nn.functional's arguments as jaxpool's: PyTorch's batched or unbatched inputs, its
per-dimension ints, its sliding-window arguments and their checks, ``norm_type`` and
``max_unpool``'s ``output_size``; each refused as PyTorch refuses it, naming the argument."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import arguments
from jaxpool._src import window as window_lib

Pooled = Any  # an array, or (values, indices)


def over_batch(
    name: str,
    nd: int,
    input: Any,
    pool: Callable[[jax.Array], Pooled],
    *,
    empty_channels: bool = False,
) -> Pooled:
    """``pool`` of ``input`` with a batch axis: an unbatched ``(C, *spatial)`` input gains one,
    and its outputs lose it.  PyTorch's ranks and non-empty axes are checked (a batch of 0 is
    allowed, and with ``empty_channels`` 0 channels)."""
    arguments.check_numeric("input", input)
    x = jnp.asarray(input)
    if x.ndim not in (nd + 1, nd + 2):
        raise ValueError(
            f"`input` of {name} must have {nd + 1} (unbatched) or {nd + 2} (batched) "
            f"dimensions, got shape {x.shape}."
        )
    unbatched = x.ndim == nd + 1
    if unbatched:
        x = x[None]
    if 0 in x.shape[(2 if empty_channels else 1) :]:
        raise ValueError(
            f"`input` of {name} must have non-empty channel and spatial axes (a batch of 0 is "
            f"allowed), got shape {tuple(jnp.shape(input))}."
        )
    out = pool(x)
    if not unbatched:
        return out
    if isinstance(out, tuple):
        return tuple(o[0] for o in out)
    return out[0]


def per_dim(name: str, value: Any, nd: int, minimum: int) -> tuple[int, ...]:
    """A per-dimension argument as PyTorch takes it: an int, or a sequence of one entry or
    of one entry per spatial axis."""
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 1:
        value = value[0]
    return window_lib.per_axis(name, value, nd, minimum)


def default_stride(stride: Any, kernel: tuple[int, ...], nd: int) -> tuple[int, ...]:
    """PyTorch's ``stride``: ``None`` (or an empty sequence) means ``kernel_size``."""
    if stride is None or (isinstance(stride, Sequence) and len(stride) == 0):
        return kernel
    return per_dim("stride", stride, nd, 1)


def rounding_type(ceil_mode: Any) -> str:
    if not isinstance(ceil_mode, (bool, np.bool_)):
        raise TypeError(f"`ceil_mode` must be a bool, got {ceil_mode!r}.")
    return "ceil_torch" if ceil_mode else "floor"


def sliding(
    x: jax.Array,
    nd: int,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: Any,
) -> dict[str, Any]:
    """The sliding-window arguments of a core op, from PyTorch's, with PyTorch's checks:
    ``padding`` at most half of ``kernel_size``, and a dilated kernel within the padded
    input."""
    kernel = per_dim("kernel_size", kernel_size, nd, 1)
    pads = per_dim("padding", padding, nd, 0)
    dilations = per_dim("dilation", dilation, nd, 1)
    if any(2 * p > k for p, k in zip(pads, kernel)):
        raise ValueError(
            f"`padding` (={padding!r}) should be at most half of `kernel_size` "
            f"(={kernel_size!r}) on every spatial axis (PyTorch: pad should be at most half "
            "of effective kernel size)."
        )
    for length, k, d, p in zip(x.shape[2:], kernel, dilations, pads):
        if (k - 1) * d + 1 > length + 2 * p:
            raise ValueError(
                f"`kernel_size` (={kernel_size!r}) with `dilation` (={dilation!r}) spans more "
                f"than the padded `input` of shape {x.shape} (padding {padding!r}): the output "
                "size is too small."
            )
    return {
        "kernel": kernel,
        "strides": default_stride(stride, kernel, nd),
        "pads_begin": pads,
        "pads_end": pads,
        "dilations": dilations,
        "rounding_type": rounding_type(ceil_mode),
    }


def check_floating(name: str, x: jax.Array, *also: Any) -> None:
    """Refuses a dtype that PyTorch's CPU kernel of ``name`` refuses: all but floating types
    and ``also``."""
    if not (jnp.issubdtype(x.dtype, jnp.floating) or x.dtype in also):
        allowed = "a floating dtype" + "".join(f" or {np.dtype(t)}" for t in also)
        raise TypeError(f"`input` of {name} must have {allowed}, got {x.dtype}.")


def lp_norm(norm_type: Any) -> float:
    if isinstance(norm_type, (bool, np.bool_)) or not isinstance(
        norm_type, (int, float, np.integer, np.floating)
    ):
        raise TypeError(f"`norm_type` must be an int or a float, got {norm_type!r}.")
    p = float(norm_type)
    if p == 0 or not math.isfinite(p):
        raise ValueError(f"`norm_type` (={norm_type!r}) must be a finite, non-zero number.")
    return p


def unpool_size(
    output_size: Any, default: tuple[int, ...], strides: tuple[int, ...]
) -> tuple[int, ...]:
    """PyTorch's ``_unpool_output_size``: ``output_size`` as the full shape or its spatial part,
    each entry strictly within ``stride`` of the default size."""
    nd = len(default)
    if output_size is None:
        return default
    if isinstance(output_size, np.ndarray):
        output_size = output_size.tolist()
    if not isinstance(output_size, Sequence) or isinstance(output_size, str):
        raise TypeError(f"`output_size` must be a sequence of ints, got {output_size!r}.")
    if len(output_size) not in (nd, nd + 2):
        raise ValueError(
            f"`output_size` (={output_size!r}) should be a sequence containing {nd} or "
            f"{nd + 2} elements, but it has a length of {len(output_size)}."
        )
    sizes = tuple(window_lib.static_int("output_size", v) for v in output_size[-nd:])
    for d, (size, base, s) in enumerate(zip(sizes, default, strides)):
        if not base - s < size < base + s:
            raise ValueError(
                f"`output_size` (={output_size!r}) is invalid: dim {d} must be between "
                f"{base - s} and {base + s}."
            )
    return sizes
