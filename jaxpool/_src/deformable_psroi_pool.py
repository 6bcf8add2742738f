"""DeformablePSROIPooling-1 (mode ``bilinear_deformable``): position-sensitive bilinear pooling
of regions whose bins move by learned offsets, one offset per part of the box and class."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import bilinear, bin_reads, exporting
from jaxpool._src import roi as roi_lib
from jaxpool._src import roi_frame as frame
from jaxpool._src import roi_numerics as numerics
from jaxpool._src import window as window_lib

# The one mode of DeformablePSROIPooling-1 (its IR attribute ``mode``).
MODES = ("bilinear_deformable",)


@dataclasses.dataclass(frozen=True)
class Deformable:
    """The static attributes of a DeformablePSROIPooling, checked (a hashable ``jit`` argument).

    ``spatial_bins`` is ``(spatial_bins_y, spatial_bins_x)``; ``part_size`` and ``trans_std``
    are 1 and 0 where there are no offsets (they do not change the result then).
    """

    output_dim: int
    group_size: int
    spatial_scale: float
    spatial_bins: tuple[int, int]
    trans_std: float
    part_size: int
    data_format: str


def _axis(
    boxes: jax.Array,
    first: int,
    length: int,
    bins: int,
    trans: jax.Array | None,
    attrs: Deformable,
    along_rows: bool,
) -> tuple[jax.Array, jax.Array]:
    """The corners and weights of the sub-bin samples along one axis of the map.

    Returns ``(index, weight)`` of shape ``(K, R, gs_h, gs_w, bins, 2)`` (``gs_w`` or ``gs_h``
    is 1 where the positions do not depend on it), each sample's weights divided by the number
    of the bin's samples that lie on this axis's map, and 0 for the others.  The order of the
    runtime's operations is kept (and no product is fused into a sum), so the floors, clamps
    and the test of each sample fall where the runtime's do.
    """
    gs, scale = attrs.group_size, attrs.spatial_scale
    dtype = boxes.dtype
    start = numerics.product(numerics.round_half_away(boxes[:, first]), scale) - 0.5
    end = numerics.product(numerics.round_half_away(boxes[:, first + 2]) + 1, scale) - 0.5
    size = jnp.maximum(end - start, 0.1)  # also turns an inverted box upright
    bin_size = numerics.divide(size, gs)
    sub_size = numerics.divide(bin_size, bins)
    i = np.arange(gs, dtype=dtype)
    bin_start = numerics.product(i[None, :], bin_size[:, None]) + start[:, None]  # (R, gs)
    # (K, R, gs_h, gs_w): each bin starts by its row (or column) and moves by its part's offset.
    corner = bin_start[None, :, :, None] if along_rows else bin_start[None, :, None, :]
    if trans is not None:
        corner = corner + numerics.product(trans, size[None, :, None, None])
    s = np.arange(bins, dtype=dtype)
    position = corner[..., None] + numerics.product(s, sub_size[None, :, None, None, None])
    # A sample outside [-0.5, L - 0.5] is skipped: it neither reads nor counts.
    on_map = (position >= -0.5) & (position <= length - 0.5)
    count = jnp.sum(on_map, axis=-1, keepdims=True, dtype=np.int32)
    scale_by = on_map.astype(dtype) / jnp.maximum(count, 1).astype(dtype)
    index, weight = bilinear.axis_corners(jnp.clip(position, 0, length - 1), length)
    return index, weight * scale_by[..., None]


@functools.partial(jax.jit, static_argnames=("attrs",))
@frame.nan_boxes
def _deformable_psroi_pool(
    x: jax.Array, rois: jax.Array, offsets: jax.Array | None, attrs: Deformable
) -> jax.Array:
    n, _, height, width = window_lib.to_ncx_shape(x.shape, attrs.data_format)
    gs, dim, num_rois = attrs.group_size, attrs.output_dim, rois.shape[0]
    empty = frame.nothing_read(n, num_rois, dim, (gs, gs), x.dtype, attrs.data_format)
    if empty is not None:
        return empty
    wide = rois.dtype if offsets is None else np.promote_types(rois.dtype, offsets.dtype)
    dtype = numerics.compute_dtype(x.dtype, wide)
    boxes = rois.astype(dtype)
    batch_index = jnp.trunc(jax.lax.stop_gradient(boxes[:, 0]))
    batch, inside = frame.batch_or_zero(batch_index, n)
    keep = (inside & frame.listed(batch_index)).astype(dtype)

    classes, trans_x, trans_y = 1, None, None
    if offsets is not None:
        # Bin (i, j) of class k moves by offsets[r, 2k:2k+2, i * P // gs, j * P // gs]
        # times trans_std, in units of the box's size: (K, R, gs, gs) per axis.
        classes, part = offsets.shape[1] // 2, attrs.part_size
        parts = np.arange(gs) * part // gs
        trans = numerics.product(offsets.astype(dtype), attrs.trans_std)
        trans = trans[:, :, parts[:, None], parts[None, :]]
        trans = trans.reshape(num_rois, classes, 2, gs, gs).transpose(2, 1, 0, 3, 4)
        trans_x, trans_y = trans[0], trans[1]
    bins_y, bins_x = attrs.spatial_bins
    y_index, y_weight = _axis(boxes, 2, height, bins_y, trans_y, attrs, along_rows=True)
    x_index, x_weight = _axis(boxes, 1, width, bins_x, trans_x, attrs, along_rows=False)
    y_weight = y_weight * keep[None, :, None, None, None, None]
    # To pool_samples' sample grid (K, R, gs_h, S_h, gs_w, S_w, 2).
    y_index, y_weight = (
        a.transpose(0, 1, 2, 4, 3, 5)[:, :, :, :, :, None] for a in (y_index, y_weight)
    )
    x_index, x_weight = (a[:, :, :, None] for a in (x_index, x_weight))

    # Input channel ((k * D_k + d) * gs + i) * gs + j serves bin (i, j) of output channel
    # k * D_k + d (D_k = output_dim / K channels per class): the map as [K, N, gs, gs, H, W, D_k].
    xt = frame.channels_last(x, attrs.data_format)
    each = dim // classes
    xg = xt.reshape(n, height, width, classes, each, gs, gs).transpose(3, 0, 5, 6, 1, 2, 4)
    i = jnp.arange(gs, dtype=np.int32)
    lead = (batch[:, None, None], i[None, :, None], i[None, None, :])

    def pool_class(xg_k, y_index, y_weight, x_index, x_weight):
        return bin_reads.pool_samples(xg_k, lead, y_index, y_weight, x_index, x_weight)

    # Each class reads its own channels at its own positions: the class is a batch axis of the
    # reads (no channel moves between classes).
    pooled = jax.vmap(pool_class)(xg, y_index, y_weight, x_index, x_weight)  # (K, R, gs, gs, D_k)
    pooled = pooled.transpose(1, 2, 3, 0, 4).reshape(num_rois, gs, gs, dim)
    return frame.from_channels_last(pooled.astype(x.dtype), attrs.data_format)


def _check_offsets(offsets: jax.Array, num_rois: int, dim: int, part_size: int | None) -> int:
    """Checks offsets ``[R, 2 * K, P, P]`` (``K`` dividing ``output_dim``, ``P`` the
    ``part_size`` where given); returns ``P``."""
    if not jax.dtypes.issubdtype(offsets.dtype, np.floating):
        raise TypeError(f"`offsets` must have a floating dtype, got {offsets.dtype}.")
    shape = tuple(offsets.shape)
    if offsets.ndim == 4:
        axes = {"2 * K": shape[1], "P (rows)": shape[2], "P (columns)": shape[3]}
        roi_lib.static_dims("offsets", shape, axes, "the number of boxes R")
    want = f"[R, 2 * K, P, P] = [{num_rois}, 2 * K, P, P]"
    if part_size is not None:
        want = f"[R, 2 * K, part_size, part_size] = [{num_rois}, 2 * K, {part_size}, {part_size}]"
    if offsets.ndim != 4 or shape[0] != num_rois or shape[1] < 2 or shape[1] % 2 or 0 in shape[1:]:
        raise ValueError(
            f"`offsets` (shape {shape}) must have shape {want}: per box, an (x, y) pair of "
            "channels for each of K classes, on a P x P grid of parts."
        )
    if shape[2] != shape[3] or (part_size is not None and shape[2] != part_size):
        raise ValueError(
            f"`offsets` (shape {shape}) must have shape {want}: its last two axes are the "
            f"square grid of parts (`part_size`={part_size!r})."
        )
    classes = shape[1] // 2
    if dim % classes:
        raise ValueError(
            f"`offsets` (shape {shape}) holds K = {classes} classes, which must divide "
            f"`output_dim` (={dim}): each class moves the bins of output_dim / K channels."
        )
    return shape[2]


@exporting.exportable
def deformable_psroi_pool(
    x: jax.typing.ArrayLike,
    rois: jax.typing.ArrayLike,
    offsets: jax.typing.ArrayLike | None = None,
    *,
    output_dim: int,
    group_size: int = 1,
    spatial_scale: float = 1.0,
    spatial_bins: Any = 1,
    trans_std: float = 1.0,
    part_size: int | None = None,
    data_format: str = "NCX",
) -> jax.Array:
    """Deformable position-sensitive region of interest pooling, as OpenVINO
    DeformablePSROIPooling-1 (mode ``bilinear_deformable``).

    Box ``r`` is ``rois[r] = (batch_index, x_1, y_1, x_2, y_2)``.  Its corners are rounded
    (halves away from zero) and scaled: ``x_1' = round(x_1) * spatial_scale - 0.5`` and
    ``x_2' = (round(x_2) + 1) * spatial_scale - 0.5``, and its width ``w = max(x_2' - x_1',
    0.1)`` (likewise rows; the floor also turns an inverted box into a thin one at ``x_1'``).
    It splits into ``group_size x group_size`` bins of ``b_w = w / group_size``; bin ``(i, j)``
    of output channel ``c`` reads input channel ``(c * group_size + i) * group_size + j``
    (``C = output_dim * group_size**2``) and averages ``bins_y x bins_x`` bilinear samples at
    the top-left corners of its sub-bins::

        x = x_1' + j * b_w + dx * w + v * b_w / bins_x,   v = 0 .. bins_x - 1
        y = y_1' + i * b_h + dy * h + u * b_h / bins_y,   u = 0 .. bins_y - 1

    A sample with ``x`` outside ``[-0.5, W - 0.5]`` or ``y`` outside ``[-0.5, H - 0.5]`` is
    skipped: it neither reads nor counts in the divisor, and a bin with no sample left gives
    0.  The others are clamped to ``[0, W - 1] x [0, H - 1]`` and read the four neighbouring
    elements with bilinear weights.

    ``(dx, dy)`` are 0 without ``offsets``.  With ``offsets`` of shape ``[R, 2 * K, P, P]``
    (``K`` classes, ``P = part_size`` parts per axis), output channel ``c`` belongs to class
    ``k = c // (output_dim / K)``, and bin ``(i, j)`` to part ``(p, q) = (i * P // group_size,
    j * P // group_size)``: ``dx = trans_std * offsets[r, 2 * k, p, q]`` and ``dy = trans_std *
    offsets[r, 2 * k + 1, p, q]``, in units of the box's size.

    The batch index is truncated to an integer.  As in the runtime, a batch index of -1 ends
    the list of boxes: that box and every later one give zeros.  A box whose batch index lies
    otherwise outside ``[0, N)`` gives zeros (the runtime reads outside its input there).

    Where the runtime and the specification's text differ, this follows the runtime: the
    specification gives offsets the shape ``[R, 2 * K, group_size, group_size]`` and says
    ``part_size`` is their size, but the runtime reads them on a grid of ``part_size`` parts,
    whatever ``group_size`` (bins share a part where ``part_size < group_size``); and a batch
    index of -1 ends the list (the specification allows only ``[0, N)``).

    Derivatives: in ``x``, the exact adjoint of the sampling; in ``offsets``, through the
    bilinear weights and sample positions (the tests of samples, floors and clamps carry
    none).  The output is piecewise constant in the boxes, whose corners are rounded: their
    derivative is 0.  16-bit inputs are sampled and summed in float32.

    Sharding: channel-sharded ``x`` pools without collectives when each shard holds whole
    output channels (``output_dim`` divisible by the number of shards): each class reads its
    own channels, the class being a batch axis of the reads.

    Args:
      x: features ``[N, C, H, W]`` (``NCX``) or ``[N, H, W, C]`` (``NXC``), a floating dtype,
        ``C = output_dim * group_size**2``.
      rois: ``[R, 5]``, floating: ``(batch_index, x_1, y_1, x_2, y_2)``.
      offsets: ``[R, 2 * K, P, P]``, floating, ``K`` dividing ``output_dim``; ``None`` for no
        offsets.
      output_dim: output channels.
      group_size: bins per axis of the output.
      spatial_scale: the factor from image pixels to feature-map pixels.
      spatial_bins: samples per bin, ``bins_y`` and ``bins_x`` (the runtime's
        ``spatial_bins_y`` and ``spatial_bins_x``), an int or a pair.
      trans_std: the factor of the offsets.
      part_size: ``P``, the offsets' grid of parts per axis; ``None`` takes it from
        ``offsets``' shape.
      data_format: ``"NCX"`` or ``"NXC"``.

    Returns:
      ``[R, output_dim, group_size, group_size]`` (``NCX``) or ``[R, group_size, group_size,
      output_dim]`` (``NXC``), with the dtype of ``x``.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(64.0).reshape(1, 4, 4, 4)
      >>> rois = jnp.array([[0.0, 0.0, 0.0, 3.0, 3.0]])
      >>> jaxpool.deformable_psroi_pool(x, rois, output_dim=1, group_size=2)[0, 0].tolist()
      [[0.0, 17.5], [38.0, 55.5]]
      >>> offsets = jnp.zeros((1, 2, 1, 1)).at[0, 0].set(0.25)  # a quarter of the box right
      >>> jaxpool.deformable_psroi_pool(
      ...     x, rois, offsets, output_dim=1, group_size=2
      ... )[0, 0].tolist()
      [[0.5, 18.5], [38.5, 56.5]]
    """
    x, rois = jnp.asarray(x), jnp.asarray(rois)
    _, channels, _, _ = roi_lib.check_features(x, data_format)
    num_rois = roi_lib.check_rois(rois, 5, "(batch_index, x_1, y_1, x_2, y_2)")
    dim = window_lib.static_int("output_dim", output_dim)
    gs = window_lib.static_int("group_size", group_size)
    if dim < 1:
        raise ValueError(f"`output_dim` (={output_dim!r}) must be positive.")
    if gs < 1:
        raise ValueError(f"`group_size` (={group_size!r}) must be positive.")
    if channels != dim * gs * gs:
        raise ValueError(
            f"`x` has {channels} channels; DeformablePSROIPooling needs `output_dim` * "
            f"`group_size`**2 = {dim} * {gs}**2 = {dim * gs * gs}."
        )
    scale = roi_lib.static_float("spatial_scale", spatial_scale)
    bins = window_lib.per_axis("spatial_bins", spatial_bins, 2, 1, what="spatial axis")
    std = roi_lib.static_float("trans_std", trans_std)
    part = None if part_size is None else window_lib.static_int("part_size", part_size)
    if part is not None and part < 1:
        raise ValueError(f"`part_size` (={part_size!r}) must be positive.")
    if offsets is None:
        part, std = 1, 0.0
    else:
        offsets = jnp.asarray(offsets)
        part = _check_offsets(offsets, num_rois, dim, part)
    attrs = Deformable(dim, gs, scale, (bins[0], bins[1]), std, part, data_format)
    return _deformable_psroi_pool(x, rois, offsets, attrs)
