"""The ONNX semantics that :class:`jaxpool.onnx.Node` adds to the jaxpool functions when it is
called: column-major indices, ONNX's divisor for ``AveragePool`` windows past the end padding,
and ``MaxUnpool``'s inferred and given output shapes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import indices as indices_lib
from jaxpool._src import window as window_lib
from jaxpool._src.avg_pool import avg_pool
from jaxpool._src.unpool import max_unpool as unpool


def column_major(indices: jax.Array, spatial: Sequence[int]) -> jax.Array:
    """Row-major spatial offsets to column-major ones, in each ``(n, c)`` plane
    (``MaxPool``'s ``storage_order=1``)."""
    size = math.prod(spatial)
    plane = indices - indices % size
    position = indices % size
    result = jnp.zeros_like(position)
    stride = 1
    for axis, length in enumerate(spatial):
        row_stride = math.prod(spatial[axis + 1 :])
        result = result + (position // row_stride % length) * stride
        stride *= length
    return plane + result


def average_pool(x: jax.Array, kwargs: dict[str, Any]) -> jax.Array:
    """``AveragePool`` with ``count_include_pad=1``: ONNX counts the taps inside the padded
    input, so pool the zero-padded input, excluding only what lies beyond it, then keep the
    node's windows."""

    window = window_lib.make_window(
        x.shape,
        kwargs["kernel"],
        kwargs["strides"],
        kwargs["pads_begin"],
        kwargs["pads_end"],
        kwargs["dilations"],
        rounding_type=kwargs["rounding_type"],
        auto_pad=kwargs["auto_pad"],
    )
    widths = [(0, 0), (0, 0), *zip(window.pads_begin, window.pads_end)]
    # The windows that reach past the padded input (rounding up), which exclude_pad leaves out.
    ends = [r - pe for r, pe in zip(window.pads_end_reached, window.pads_end)]
    if not any(ends) or not (any(window.pads_begin) or any(window.pads_end)):
        return avg_pool(x, **kwargs)  # the divisors agree with OpenVINO's
    padded = jnp.pad(x, widths)
    y = avg_pool(
        padded,
        window.kernel,
        window.strides,
        0,
        ends,
        exclude_pad=True,
        dilations=window.dilations,
    )
    keep = (slice(None), slice(None)) + tuple(slice(0, o) for o in window.out_spatial)
    return y[keep]


def max_unpool(x: Any, indices: Any, output_shape: Any, kwargs: dict[str, Any]) -> jax.Array:
    """``MaxUnpool``: scatters into the shape the attributes infer, keeping the larger value
    where indices repeat, and places that at the start of ``output_shape`` where given."""

    x = jnp.asarray(x)
    kernel, strides, pads_begin, pads_end = (
        kwargs[name] for name in ("kernel", "strides", "pads_begin", "pads_end")
    )
    if x.ndim < 3:
        raise ValueError(f"`x` of MaxUnpool must have rank 3 or more, got shape {x.shape}.")
    nd = x.ndim - 2
    check_length("kernel_shape", kernel, nd)
    strides = strides or (1,) * nd
    pads_begin, pads_end = pads_begin or (0,) * nd, pads_end or (0,) * nd
    for name, value in (("strides", strides), ("pads", pads_begin)):
        check_length(name, value, nd)
    inferred = (
        *x.shape[:2],
        *(
            (n - 1) * s - pb - pe + k
            for n, s, pb, pe, k in zip(x.shape[2:], strides, pads_begin, pads_end, kernel)
        ),
    )
    if isinstance(indices, np.ndarray) and not indices_lib.x64_enabled():
        if indices.size and indices.max() > np.iinfo(np.int32).max:
            raise ValueError(
                f"`indices` of MaxUnpool go up to {indices.max()}, beyond int32; enable "
                "`jax_enable_x64`."
            )
        indices = indices.astype(np.int32)
    y = unpool(x, indices, inferred, axis=0, combine="max")
    if output_shape is None:
        return y
    shape = tuple(int(v) for v in np.asarray(output_shape).reshape(-1))
    if len(shape) != len(inferred) or any(s < i for s, i in zip(shape, inferred)):
        raise ValueError(
            f"`output_shape` (={shape}) of MaxUnpool must have one entry per dimension of "
            f"`x` and be at least the inferred shape {inferred}."
        )
    return jnp.pad(y, [(0, s - i) for s, i in zip(shape, inferred)])


def check_length(name: str, value: tuple[int, ...], nd: int) -> None:
    if len(value) != nd:
        raise ValueError(
            f"`{name}` (={list(value)}) must have one entry per spatial axis of `x` ({nd})."
        )
