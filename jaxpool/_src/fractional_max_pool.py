"""Fractional max pooling (Graham, "Fractional Max-Pooling", 2014) as PyTorch computes it.

Windows of a fixed size ``kernel`` start, along each spatial axis, at a pseudo-random
increasing sequence that one sample ``u`` in ``[0, 1)`` per ``(n, c)`` plane and axis decides
(PyTorch's ``generate_intervals``).  The starts are data, so the elements of the windows are
gathered in each plane, one per window and tap, and one reduction of ``(value, position)``
pairs over the taps keeps PyTorch's maximum and its position; the derivative routes through
the positions.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import batch_axes, exporting
from jaxpool._src import indices as indices_lib
from jaxpool._src import window as window_lib


@dataclasses.dataclass(frozen=True)
class FractionalWindow:
    """Windows of ``kernel`` elements, ``out_spatial`` of them per spatial axis, over an input of
    ``shape`` in ``data_format``'s layout; their starts come from the samples at run time."""

    data_format: str
    shape: tuple[int, ...]
    kernel: tuple[int, ...]
    out_spatial: tuple[int, ...]

    @property
    def nd(self) -> int:
        return len(self.kernel)

    @property
    def in_spatial(self) -> tuple[int, ...]:
        axes = window_lib.spatial_axes(len(self.shape), self.data_format)
        return tuple(self.shape[a] for a in axes)

    @property
    def ncx_shape(self) -> tuple[int, ...]:
        return window_lib.to_ncx_shape(self.shape, self.data_format)

    @property
    def out_shape(self) -> tuple[int, ...]:
        n, c = self.ncx_shape[:2]
        if self.data_format == "NCX":
            return (n, c, *self.out_spatial)
        return (n, *self.out_spatial, c)


def make_fractional_window(
    x_shape: tuple[int, ...], kernel: Any, output_size: Any, data_format: str
) -> FractionalWindow:
    """Validates ``kernel`` and ``output_size``: each window lies in the input, and the
    ``output_size`` starts along an axis of length ``L`` can all differ
    (``output_size + kernel - 1 <= L``)."""
    data_format = window_lib.choice("data_format", data_format, window_lib.DATA_FORMATS)
    x_shape = window_lib.input_shape("x", x_shape, data_format)
    nd = len(x_shape) - 2
    kernels = window_lib.per_axis("kernel", kernel, nd, 1)
    out = window_lib.per_axis("output_size", output_size, nd, 1)
    in_spatial = window_lib.to_ncx_shape(x_shape, data_format)[2:]
    window_lib.check_spatial(tuple(x_shape), in_spatial)
    for i, (length, k, o) in enumerate(zip(in_spatial, kernels, out)):
        if o + k - 1 > length:
            raise ValueError(
                f"`output_size` (={output_size!r}) and `kernel` (={kernel!r}) need "
                f"output_size + kernel - 1 <= {length}, the length of spatial axis {i} of `x` of "
                f"shape {tuple(x_shape)}, got {o} + {k} - 1."
            )
    return FractionalWindow(data_format, tuple(x_shape), kernels, out)


def _rounded(a: jax.typing.ArrayLike, dtype: np.dtype) -> jax.Array:
    """``a`` (float32) rounded to ``dtype``'s precision where ``dtype`` is a 16-bit float:
    PyTorch's ``Half`` and ``BFloat16`` arithmetic rounds the float result of every operation;
    XLA may drop a pair of conversions (excess precision), never a ``reduce_precision``."""
    if dtype.itemsize >= 4:
        return jnp.asarray(a)
    info = jnp.finfo(dtype)
    return lax.reduce_precision(a, exponent_bits=info.nexp, mantissa_bits=info.nmant)


def starts(u: jax.Array, length: int, out: int, kernel: int) -> jax.Array:
    """The window starts along one axis of ``length``, ``[*u.shape, out]`` int32, for the
    samples ``u`` (PyTorch's ``generate_intervals``, in the samples' dtype)::

        alpha = (length - kernel) / (out - 1)
        start[i] = int((i + u) * alpha) - int(u * alpha)    for i < out - 1
        start[out - 1] = length - kernel

    Samples outside ``[0, 1)`` (where PyTorch reads outside the input) give starts clamped to
    ``[0, length - kernel]``.
    """
    last = length - kernel
    dtype = np.dtype(u.dtype)
    tail = jnp.full((*u.shape, 1), last, np.int32)
    if out == 1:
        return tail
    wide = np.dtype(np.float32) if dtype.itemsize < 4 else dtype
    # Both operands of the quotient, and the counter `i`, take the samples' dtype first.
    alpha = (np.asarray(last, dtype) / np.asarray(out - 1, dtype)).astype(wide)
    i = np.arange(out - 1).astype(dtype).astype(wide).reshape((1,) * u.ndim + (-1,))
    u = u.astype(wide)[..., None]
    scaled = _rounded(_rounded(i + u, dtype) * alpha, dtype)
    head = scaled.astype(np.int32) - _rounded(u * alpha, dtype).astype(np.int32)
    return jnp.clip(jnp.concatenate([head, tail], axis=-1), 0, last)


def _window_origins(samples: jax.Array, window: FractionalWindow, dtype: np.dtype) -> jax.Array:
    """The spatial position ``flat(start)`` of each window's first element, in the output's
    layout: ``samples[n, c, i]`` decides the starts along spatial axis ``i`` of plane
    ``(n, c)``."""
    rank = 2 + window.nd
    shape = window.ncx_shape[:2] + window.out_spatial
    strides = indices_lib.plane_strides(window.in_spatial)
    origin = None
    for i, (length, out, k) in enumerate(zip(window.in_spatial, window.out_spatial, window.kernel)):
        s = starts(samples[:, :, i], length, out, k).astype(dtype) * np.asarray(strides[i], dtype)
        s = lax.broadcast_in_dim(s, shape, (0, 1, 2 + i))
        origin = s if origin is None else origin + s
    assert origin is not None
    return origin if window.data_format == "NCX" else jnp.moveaxis(origin, 1, rank - 1)


def _pick(floating: bool):
    """The reducer of ``(value, position)`` pairs for ``lax.reduce`` that gives PyTorch's
    choice, ``val > max || isnan(val)`` in row-major window order (where positions increase):
    the larger value, on a tie the smaller position; a NaN over a number, and of two NaNs the
    larger position (the last NaN).  A maximum under a total order, so associative and
    commutative."""

    def pick(a, b):
        (va, pa), (vb, pb) = a, b
        take_b = (vb > va) | ((vb == va) & (pb < pa))
        if floating:
            a_nan, b_nan = va != va, vb != vb
            take_b = jnp.where(a_nan, b_nan & (pb > pa), take_b | b_nan)
        return lax.select(take_b, vb, va), lax.select(take_b, pb, pa)

    return pick


def _argmax(
    x: jax.Array, samples: jax.Array, window: FractionalWindow
) -> tuple[jax.Array, jax.Array]:
    """The window maxima, with their exact bits, and their spatial positions: the elements of
    every window gathered along a tap axis (:func:`indices.gather_planes`; before the channels
    in NXC, so that they stay innermost), then one reduction of ``(value, position)`` pairs
    over it, which compiles to one loop whatever the number of taps."""
    pos_dtype = indices_lib.position_dtype(window.in_spatial)
    origin = _window_origins(samples, window, pos_dtype)
    strides = indices_lib.plane_strides(window.in_spatial)
    taps = itertools.product(*(range(k) for k in window.kernel))
    deltas = np.array([sum(t * s for t, s in zip(tap, strides)) for tap in taps], pos_dtype)
    tap_axis = 2 + window.nd if window.data_format == "NCX" else 1 + window.nd
    shape = [1] * (origin.ndim + 1)
    shape[tap_axis] = deltas.size
    position = jnp.expand_dims(origin, tap_axis) + deltas.reshape(shape)
    values = indices_lib.gather_planes(x, position, window.data_format)
    floating = jnp.issubdtype(x.dtype, jnp.floating)
    y, position = lax.reduce(
        (values, position),
        indices_lib.argmax_init(x.dtype, pos_dtype),
        _pick(floating),
        (tap_axis,),
    )
    return y, position


@functools.partial(jax.jit, static_argnames=("window", "index_dtype"))
def _fractional_max_pool(
    x: jax.Array, samples: jax.Array, window: FractionalWindow, index_dtype: np.dtype | None
):
    y, position = _argmax(lax.stop_gradient(x), lax.stop_gradient(samples), window)
    read = functools.partial(indices_lib.gather_planes, data_format=window.data_format)
    y = indices_lib.maxima_at(read, x, y, position)
    if index_dtype is None:
        return y
    return y, indices_lib.from_position(
        position, window.ncx_shape, window.data_format, 2, index_dtype
    )


@batch_axes.merges_batch_axes("kernel", per_plane=("samples",))
@exporting.exportable
def fractional_max_pool(
    x: jax.typing.ArrayLike,
    kernel: Any,
    output_size: Any,
    samples: jax.typing.ArrayLike,
    *,
    data_format: str = "NCX",
    return_indices: bool = False,
    index_element_type: Any = None,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Fractional max pooling as PyTorch's ``fractional_max_pool2d/3d``, with optional argmax
    indices.

    Along a spatial axis of length ``L`` pooled to ``O`` outputs by windows of ``K`` elements,
    the sample ``u = samples[n, c, i]`` of plane ``(n, c)`` and spatial axis ``i`` places the
    windows at PyTorch's starts, computed in the samples' dtype::

        alpha = (L - K) / (O - 1)
        start[o] = int((o + u) * alpha) - int(u * alpha)    for o < O - 1
        start[O - 1] = L - K                                (the only start when O == 1)
        y[n, c, o] = max x[n, c, start(o):start(o) + K]     (a box over the spatial axes)

    With ``u`` in ``[0, 1)`` the starts increase and every window lies in the input; samples
    outside that range (where PyTorch reads outside the input) give starts clamped to
    ``[0, L - K]``.  The samples carry no derivative.

    Args:
      x: input of shape ``[N, C, *spatial]`` (``NCX``) or ``[N, *spatial, C]`` (``NXC``), with
        1 to 3 spatial axes; a floating or integer dtype.  In ``NXC`` with a sequence
        ``kernel``, any number of leading batch axes, none included (``samples`` then leads
        with the same ones), as ``flax.linen``'s pools take them.
      kernel: window size, an int or one per spatial axis.
      output_size: the output spatial size, an int or one per spatial axis, with
        ``output_size + kernel - 1 <= L`` on every axis.
      samples: ``[N, C, nd]`` floating samples, ``samples[..., i]`` for spatial axis ``i`` in
        the order of the axes (PyTorch's 2-D ``_random_samples`` hold ``(w, h)``: reverse
        them); in either layout.  Their dtype is the dtype of the arithmetic above (PyTorch's
        is the input's).
      data_format: ``"NCX"`` or ``"NXC"``.
      return_indices: also return the argmax indices.
      index_element_type: ``"i32"``, ``"i64"`` (or ``"int32"``, ``"int64"``), ``jnp.int32``,
        ``jnp.int64`` or ``None`` (int64 with ``jax_enable_x64``, int32 without).

    Returns:
      ``y`` of shape ``[N, C, *output_size]`` (or its NXC form) with the dtype of ``x``, or
      ``(y, indices)``: the spatial position ``flat(p)`` of each maximum within its own
      ``(n, c)`` plane (PyTorch's indices, the ``axis=2`` convention of :func:`max_pool`).
      Ties give the first element in row-major window order; a NaN is the maximum and, as in
      PyTorch's kernels (``val > max || isnan(val)``), the *last* NaN of the window is
      returned, the one exception to jaxpool's first-NaN rule.  The gradient flows to the
      argmax.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(25.0).reshape(1, 1, 5, 5)
      >>> u = jnp.full((1, 1, 2), 0.5)  # starts 0, 2, 3 on both axes
      >>> y, i = jaxpool.fractional_max_pool(x, 2, 3, u, return_indices=True)
      >>> y[0, 0].tolist()
      [[6.0, 8.0, 9.0], [16.0, 18.0, 19.0], [21.0, 23.0, 24.0]]
      >>> i[0, 0].tolist()
      [[6, 8, 9], [16, 18, 19], [21, 23, 24]]
    """
    x = jnp.asarray(x)
    window_lib.check_input("x", x.shape, x.dtype)
    window = make_fractional_window(x.shape, kernel, output_size, data_format)
    samples = jnp.asarray(samples)
    if not jnp.issubdtype(samples.dtype, jnp.floating):
        raise TypeError(f"`samples` must have a floating dtype, got {samples.dtype}.")
    expected = (*window.ncx_shape[:2], window.nd)
    if samples.shape != expected:
        raise ValueError(
            f"`samples` must have shape [N, C, nd] = {expected} for `x` of shape {x.shape} "
            f"({window.data_format}), got {samples.shape}."
        )
    if not isinstance(return_indices, (bool, np.bool_)):
        raise TypeError(f"`return_indices` must be a bool, got {return_indices!r}.")
    dtype = indices_lib.index_dtype(index_element_type)
    if not return_indices:
        return _fractional_max_pool(x, samples, window, None)
    indices_lib.check_fits(window.ncx_shape, 2, dtype)
    return _fractional_max_pool(x, samples, window, dtype)
