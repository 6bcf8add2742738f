"""MaxUnpool: scatters pooled values back to the positions their indices name.

Two placements of the values, chosen by what the caller states.  Without the window the
indices were taken with, any position in a value's own ``(n, c)`` plane may be named: a scatter
into each plane (:class:`Planes`), the batch and channels as its batching dimensions.  With
the window (``kernel`` and the other attributes of ``max_pool``), every index names an element
of its own window, and the dense program of :mod:`unpool_windows` places the values with pads,
comparisons and selects, which XLA partitions along a sharded spatial axis by exchanging halos.
One derivative rule serves both, through the placement's sum and its transpose.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxpool._src import batch_axes, exporting, unpool_planes, unpool_windows
from jaxpool._src import indices as indices_lib
from jaxpool._src import window as window_lib
from jaxpool._src.unpool_planes import Planes
from jaxpool._src.unpool_windows import Reach

COMBINES = unpool_windows.COMBINES


def _static_dims(name: str, shape: Sequence[Any], data_format: str) -> None:
    """Refuses a symbolic dimension other than the batch: it decides the program."""
    for a, d in enumerate(shape[1:], start=1):
        if jax.export.is_symbolic_dim(d):
            kind = "channel" if a == window_lib.channel_axis(len(shape), data_format) else "spatial"
            raise ValueError(
                f"`{name}` has the symbolic dimension {d} on its {kind} axis {a} (shape "
                f"{tuple(shape)}): only the batch may be symbolic under `jax.export`; the "
                "channel and spatial sizes must be static."
            )


def _output_shape(output_shape: Any, y_shape: tuple[Any, ...], data_format: str) -> tuple:
    """Validates ``output_shape``: the full shape of the pooled input, in ``data_format``; its
    batch may be the symbolic batch of ``y``."""
    _static_dims("y", y_shape, data_format)
    entries, batch = output_shape, None
    if isinstance(output_shape, Sequence) and not isinstance(output_shape, (str, bytes)):
        _static_dims("output_shape", output_shape, data_format)
        if len(output_shape) and jax.export.is_symbolic_dim(output_shape[0]):
            entries, batch = [0, *output_shape[1:]], output_shape[0]
    shape: tuple[Any, ...] = window_lib.per_axis(
        "output_shape", entries, len(y_shape), 0, scalar=False, what="dimension of `y`"
    )
    if batch is not None:
        shape = (batch, *shape[1:])
    # A batch or channel axis may be empty, as pooling's; a spatial one may not.
    if 0 in (shape[a] for a in window_lib.spatial_axes(len(shape), data_format)):
        raise ValueError(
            f"`output_shape` (={shape}) must be positive on every dimension of `y` but the "
            f"batch and channel axes (which may be empty), in {data_format} layout."
        )
    c_dim = window_lib.channel_axis(len(shape), data_format)
    if shape[0] != y_shape[0] or shape[c_dim] != y_shape[c_dim]:
        raise ValueError(
            f"`output_shape` (={shape}) must keep the batch and channel sizes of `y` of shape "
            f"{y_shape} in {data_format} layout."
        )
    return shape


def _index_dtype(ncx_shape: tuple[Any, ...], dtype: np.dtype) -> np.dtype:
    """int32, or int64 for 64-bit ``indices`` or an output with more than 2**31 - 1 elements
    (with a symbolic batch, for 64-bit ``indices`` or planes of more than 2**31 - 1)."""
    wide = dtype.itemsize == 8
    if isinstance(ncx_shape[0], int):
        size, what = math.prod(ncx_shape), f"`output_shape` of NCX shape {ncx_shape} has"
    else:
        size, what = math.prod(ncx_shape[2:]), f"each plane of `output_shape` {ncx_shape} has"
    if not wide and size <= np.iinfo(np.int32).max:
        return np.dtype(np.int32)
    if not indices_lib.x64_enabled():
        raise ValueError(
            f"{what} {size} elements, more than 32-bit indices address; enable `jax_enable_x64`."
        )
    return np.dtype(np.int64)


def _plane_positions(indices: jax.Array, channels: int, size: int, data_format: str, axis: int):
    """Each index as a position in its own ``(n, c)`` plane of ``size`` elements; where it
    names no element of that plane, a position outside ``[0, size)``.

    An index taken with ``axis`` 0 or 1 names plane ``index // size`` (counted over the batch
    and channels, or the channels), which must be the plane of its own place in ``indices``.
    """
    if axis == 2:
        return indices
    dtype = indices.dtype
    plane = lax.div(indices, np.asarray(size, dtype))
    position = lax.rem(indices, np.asarray(size, dtype))
    c_dim = window_lib.channel_axis(indices.ndim, data_format)
    own = lax.broadcasted_iota(dtype, indices.shape, c_dim)
    if axis == 0:
        own = own + lax.broadcasted_iota(dtype, indices.shape, 0) * np.asarray(channels, dtype)
    return jnp.where((position >= 0) & (plane == own), position, np.asarray(-1, dtype))


Placement = Planes | Reach


def _program(placement: Placement):
    """The module that places values for ``placement``."""
    return unpool_windows if isinstance(placement, Reach) else unpool_planes


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def _unpool(y: jax.Array, position: jax.Array, placement: Placement, combine: str) -> jax.Array:
    return _program(placement).program(y, position, placement, combine)


@_unpool.defjvp
def _unpool_jvp(placement, combine, primals, tangents):
    # "sum" is linear; "torch" differentiates as "sum", as PyTorch does (every value gets the
    # output's derivative at its position, in full, even where another value was kept);
    # "max" sends it to the values that were kept, split evenly among equal ones.
    (y, position), (y_dot, _) = primals, tangents
    out = _unpool(y, position, placement, combine)
    if y_dot.dtype == jax.dtypes.float0:
        return out, np.zeros(out.shape, jax.dtypes.float0)
    places = _program(placement)
    if combine != "max":
        return out, places.spread(y_dot, position, placement)
    won, count = places.winners(y, position, placement, out)
    share = y_dot / jnp.maximum(count, 1).astype(y.dtype)
    return out, places.spread(jnp.where(won, share, np.zeros((), y.dtype)), position, placement)


@functools.partial(jax.jit, static_argnames=("placement", "axis", "combine", "dtype"))
def _max_unpool(y, indices, placement: Placement, axis: int, combine: str, dtype: np.dtype):
    """Places ``y`` at the plane position of each index, combined by ``combine`` where
    positions repeat.  An index that names no element of its own plane (which no pooling
    gives) is dropped, and so is one outside its window where the window is known."""
    c_dim = window_lib.channel_axis(y.ndim, placement.data_format)
    size = math.prod(placement.in_spatial)
    position = _plane_positions(
        indices.astype(dtype), y.shape[c_dim], size, placement.data_format, axis
    )
    return _unpool(y, position, placement, combine)


_WINDOW_DEFAULTS = {"rounding_type": "floor", "auto_pad": "explicit"}  # the others: None


def _placement(
    y_shape: tuple[Any, ...], shape: tuple[Any, ...], data_format: str, kernel: Any, **attrs: Any
) -> Placement:
    """The windows of ``kernel`` and ``attrs`` (``max_pool``'s) over ``shape``, checked to pool
    it to ``y``'s spatial size; without ``kernel``, the planes."""
    spatial = window_lib.spatial_axes(len(shape), data_format)
    in_spatial = tuple(shape[a] for a in spatial)
    given = {
        name: value
        for name, value in attrs.items()
        if value is not _WINDOW_DEFAULTS.get(name)
        and not (isinstance(value, str) and value == _WINDOW_DEFAULTS.get(name))
    }
    if kernel is None:
        if given:
            name = next(iter(given))
            raise ValueError(
                f"`{name}` (={given[name]!r}) describes the window the indices were taken "
                "with, which `kernel` must state too (without `kernel`, the indices may name "
                "any element of their plane)."
            )
        return Planes(data_format, in_spatial)
    window = window_lib.make_window((1, 1, *in_spatial), kernel, **attrs)
    pooled = tuple(y_shape[a] for a in spatial)
    if window.out_spatial != pooled:
        stated = "".join(f", `{name}`={value!r}" for name, value in given.items())
        raise ValueError(
            f"`kernel` (={kernel!r}){stated} pools the spatial size {in_spatial} of "
            f"`output_shape` to {window.out_spatial}, but `y` has the spatial size {pooled}; "
            "pass the attributes and the input shape that `max_pool` was given."
        )
    return unpool_windows.make_reach(window, data_format)


def _check_concrete(
    indices: jax.Array, shape: tuple[int, ...], axis: int, placement: Placement, dtype: np.dtype
) -> None:
    """Refuses concrete ``indices`` of which any names no element of its own plane of
    ``shape``, or, where the window is known, an element outside its window: its value would
    be dropped, which is never what a caller means."""
    c_dim = window_lib.channel_axis(len(shape), placement.data_format)
    size = math.prod(placement.in_spatial)
    # Concrete indices inside a traced function (a constant under `jit`) are checked too.
    with jax.ensure_compile_time_eval():
        position = np.asarray(
            _plane_positions(indices.astype(dtype), shape[c_dim], size, placement.data_format, axis)
        )
    lost = int(((position < 0) | (position >= size)).sum())
    if lost:
        # Plane positions taken with axis 2 do not depend on the plane's size: the largest one
        # says how large the plane must be.  Those taken with axis 0 or 1 do.
        need = (
            f" and the indices need at least {np.asarray(indices).max() + 1}" if axis == 2 else ""
        )
        raise ValueError(
            f"`indices` (taken with `axis`={axis}) name positions outside `output_shape` "
            f"(={shape}): {lost} of {indices.size} values would be lost. The spatial axes of "
            f"`output_shape` hold {size} elements per plane{need}; pass the shape of the input "
            "the indices were taken on."
        )
    if isinstance(placement, Reach):
        lost = int(unpool_windows.outside(position, placement).sum())
        if lost:
            raise ValueError(
                f"`indices` name positions outside the windows they come from: {lost} of "
                f"{indices.size} values name no element of their own window (nor, for a "
                "window with no input element, their plane's first element, which `max_pool` "
                "gives it) and would be lost; pass the attributes `max_pool` was given, or "
                "`kernel=None` to place values anywhere in their plane."
            )


@batch_axes.merges_batch_axes("kernel", ("y", "indices"), "output_shape")
@exporting.exportable
def max_unpool(
    y: jax.typing.ArrayLike,
    indices: jax.typing.ArrayLike,
    output_shape: Any,
    *,
    axis: int,
    combine: str = "sum",
    data_format: str = "NCX",
    kernel: Any = None,
    strides: Any = None,
    pads_begin: Any = None,
    pads_end: Any = None,
    dilations: Any = None,
    rounding_type: str = "floor",
    auto_pad: str = "explicit",
) -> jax.Array:
    """Max unpooling: the adjoint of a max pool, given its indices.

    Scatters every pooled value to the input element its index names, in a zero tensor of
    ``output_shape``; a position named several times (overlapping windows) receives the sum
    of its values (``combine="sum"``, the adjoint of pooling) or the largest of them
    (``combine="max"``)::

        x[element(indices[n, c, o])] += y[n, c, o]        # combine="sum"
        x[p] = max(y[n, c, o] for every o naming p)     # combine="max"; 0 where none does
        x[p] = y[n, c, last o naming p]                 # combine="torch"; 0 where none does

    ``axis`` has no default: the indices' convention must be stated, as
    :func:`numpy.take_along_axis` requires its axis (indices taken with ``axis=2`` and read
    with ``axis=0`` would land in the first plane).  With ``combine="max"`` the result is
    deterministic, and where the values sent to one position are equal (unpooling the pooled
    values themselves) it is PyTorch's ``max_unpool``, which keeps one of them.
    ``combine="torch"`` is PyTorch's CPU ``max_unpool`` whatever the values: the last value
    (in row-major order of its ``(n, c)`` plane of ``y``) named to a position is kept, and it
    differentiates as PyTorch does: the gradient of every value is the output gradient at its
    index, in full even where several values name one position (the derivative of ``"sum"``,
    not of keeping one value).

    ``indices`` follow the index convention of :func:`max_pool` with the same ``axis``
    (``adaptive_max_pool`` indices use ``axis=2``): the row-major offset in the NCX view of the
    pooled input, modulo ``prod(ncx_shape[axis:])``; the coordinates that ``axis`` dropped come
    from each index's own position in ``indices``.  An index that names no element of its own
    ``(n, c)`` plane (outside ``[0, prod(ncx_shape[axis:]))``, or, with ``axis`` 0 or 1,
    another plane; pooling produces neither, but indices taken on a larger input than
    ``output_shape`` do) is refused with a ``ValueError`` that counts the values it would lose,
    when ``indices`` is a concrete array.  Traced indices (under ``jit``, ``vmap`` or
    ``grad``) cannot be inspected: there such an index contributes nothing, its value is
    dropped and its gradient is zero, and no other position receives it (no wrap-around into
    a neighbouring plane).  With ``"sum"`` it is linear in ``y`` and its gradient gathers at the
    indices; with ``"max"`` the gradient goes to the values that won (split evenly among equal
    ones); with ``"torch"`` as with ``"sum"``.

    The window the indices were taken with, where given (``kernel`` and the other attributes
    of :func:`max_pool`, which must pool ``output_shape`` to the spatial size of ``y``), says
    where each index lies: in its own window, or, for a window with no input element
    (``rounding_type="ceil"`` or large pads), at its plane's first element, as ``max_pool``
    gives them.  The values are then placed by a dense program of pads, comparisons and
    selects instead of a scatter, with the same result: on a map sharded along a spatial axis
    under ``jit``, the devices exchange only the halos of the windows (collective-permutes),
    where a scatter, whose indices XLA cannot bound, reduces the whole output across them.
    (The values of windows with no input element are reduced into each plane's first element:
    across the devices, one value per plane.)  An index elsewhere is refused where the indices
    are concrete and dropped where they are traced, as one outside its plane; without
    ``kernel`` any position in the plane is placed, exactly, by the scatter (PyTorch's
    ``max_unpool`` accepts such indices).

    Args:
      y: pooled values of shape ``[N, C, *pooled]`` (``NCX``) or ``[N, *pooled, C]``
        (``NXC``), with 1 to 3 spatial axes.  ``N`` may be symbolic (``jax.export``).  In
        ``NXC`` with a sequence ``kernel``, also no or several batch axes, as ``max_pool``'s.
      indices: integer indices of the shape of ``y``.
      output_shape: the full shape of the pooled input, in ``data_format``'s layout, with the
        batch and channel sizes of ``y`` (the batch may be ``y``'s symbolic batch).
      axis: the ``axis`` the indices were taken with: 0, 1 or 2 (or -rank to 2 - rank).
      combine: ``"sum"``, ``"max"`` or ``"torch"``: how values sent to one position combine.
      data_format: ``"NCX"`` or ``"NXC"``.
      kernel, strides, pads_begin, pads_end, dilations, rounding_type, auto_pad: the
        attributes :func:`max_pool` took the indices with (``None``: the indices may name any
        element of their plane).

    Returns:
      An array of ``output_shape`` with the dtype of ``y``.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
      >>> y, i = jaxpool.max_pool(x, 2, return_indices=True)
      >>> jaxpool.max_unpool(y, i, x.shape, axis=0)[0, 0].tolist()
      [[0.0, 0.0, 0.0, 0.0], [0.0, 5.0, 0.0, 7.0], [0.0, 0.0, 0.0, 0.0], [0.0, 13.0, 0.0, 15.0]]
      >>> jaxpool.max_unpool(y, i, x.shape, axis=0, kernel=2)[0, 0, 1].tolist()
      [0.0, 5.0, 0.0, 7.0]
    """
    y = jnp.asarray(y)
    indices = jnp.asarray(indices)
    data_format = window_lib.choice("data_format", data_format, window_lib.DATA_FORMATS)
    combine = window_lib.choice("combine", combine, COMBINES)
    window_lib.check_input("y", y.shape, y.dtype)
    if not jnp.issubdtype(indices.dtype, jnp.integer):
        raise TypeError(f"`indices` must have an integer dtype, got {indices.dtype}.")
    if indices.shape != y.shape:
        raise ValueError(
            f"`indices` of shape {indices.shape} must have the shape of `y` ({y.shape})."
        )
    given = axis
    axis = indices_lib.normalize_axis(axis, y.ndim)
    if axis > 2:
        raise ValueError(
            f"`axis` (={given}) must be 0, 1 or 2 (or {-y.ndim} to {2 - y.ndim}): indices "
            "taken over fewer than all spatial axes have lost the coordinates of the others."
        )
    shape = _output_shape(output_shape, tuple(y.shape), data_format)
    placement = _placement(
        tuple(y.shape),
        shape,
        data_format,
        kernel,
        strides=strides,
        pads_begin=pads_begin,
        pads_end=pads_end,
        dilations=dilations,
        rounding_type=rounding_type,
        auto_pad=auto_pad,
    )
    if 0 in shape:  # an empty batch or no channels: nothing to scatter
        return jnp.zeros(shape, y.dtype)
    dtype = _index_dtype(window_lib.to_ncx_shape(shape, data_format), np.dtype(indices.dtype))
    if not isinstance(indices, jax.core.Tracer):
        _check_concrete(indices, shape, axis, placement, dtype)
    return _max_unpool(y, indices, placement, axis, combine, dtype)
