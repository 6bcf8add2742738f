"""PSROIPooling-1: position-sensitive average (or bilinear) pooling of regions."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import roi as roi_lib
from jaxpool._src import window as window_lib

MODES = ("average", "bilinear")


@functools.partial(
    jax.jit,
    static_argnames=(
        "output_dim",
        "group_size",
        "spatial_scale",
        "mode",
        "spatial_bins",
        "data_format",
    ),
)
def _psroi_pool(
    x: jax.Array,
    rois: jax.Array,
    output_dim: int,
    group_size: int,
    spatial_scale: float,
    mode: str,
    spatial_bins: tuple[int, int],
    data_format: str,
) -> jax.Array:
    n = x.shape[0]
    shape = (group_size, group_size)
    empty = roi_lib.nothing_read(n, rois.shape[0], output_dim, shape, x.dtype, data_format)
    if empty is not None:
        return empty
    xt = roi_lib.channels_last(x, data_format)
    _, height, width, _ = xt.shape
    gs = group_size
    dtype = roi_lib.compute_dtype(x.dtype, rois.dtype)
    boxes = rois.astype(dtype)
    batch_index = jnp.trunc(jax.lax.stop_gradient(boxes[:, 0]))
    batch, inside = roi_lib.batch_or_zero(batch_index, n)
    inside = inside & roi_lib.listed(batch_index)
    if mode == "average":
        # Channel (c_out * gs + i) * gs + j serves bin (i, j) of output channel c_out.
        xg = xt.reshape(n, height, width, output_dim, gs, gs).transpose(0, 4, 5, 1, 2, 3)
        lows, highs, bounds = [], [], []
        for first, last, length in ((2, 4, height), (1, 3, width)):
            start = roi_lib.round_half_away(boxes[:, first]) * spatial_scale
            end = roi_lib.round_half_away(boxes[:, last] + 1) * spatial_scale
            # The runtime's floor on the box size, which also turns inverted boxes upright.
            bin_size = roi_lib.divide(jnp.maximum(end - start, 0.1), gs)
            i = np.arange(gs, dtype=dtype)
            lo = jnp.floor(roi_lib.product(i, bin_size[:, None]) + start[:, None])
            hi = jnp.ceil(roi_lib.product(i + 1, bin_size[:, None]) + start[:, None])
            lows.append(jax.lax.stop_gradient(jnp.clip(lo, 0, length)).astype(np.int32))
            highs.append(jax.lax.stop_gradient(jnp.clip(hi, 0, length)).astype(np.int32))
            bounds.append(roi_lib.bin_bound(length, gs))
        lengths = (height, width)
        i = np.arange(gs, dtype=np.int32)

        def chunk_sum(offset_h: Any, offset_w: Any) -> jax.Array:
            """Each bin's sum over one chunk of ``bin_bound`` elements per axis."""
            index, valid = [], []
            for a, offset in enumerate((offset_h, offset_w)):
                step = np.arange(bounds[a], dtype=np.int32)[None, None, :]
                k = lows[a][:, :, None] + offset * bounds[a] + step  # (R, gs, bound)
                valid.append(k < highs[a][:, :, None])
                index.append(jnp.minimum(k, lengths[a] - 1))
            values = roi_lib.read(
                xg,
                batch[:, None, None, None, None],
                i[:, None, None, None],
                i[:, None],
                index[0][:, :, :, None, None],
                index[1][:, None, None],
            )  # (R, gs, bound_h, gs, bound_w, output_dim)
            mask = (
                valid[0][:, :, :, None, None]
                & valid[1][:, None, None]
                & inside[:, None, None, None, None]
            )
            return jnp.where(mask[..., None], values.astype(dtype), 0).sum((2, 4))

        # One chunk holds every bin of a box no larger than the map plus one element; the
        # bins of larger boxes take the further chunks, read only when some bin needs them.
        # The loop's trip count is static so that it stays differentiable in both modes.
        total = chunk_sum(0, 0)
        chunks = [-(-lengths[a] // bounds[a]) for a in range(2)]
        if chunks[0] * chunks[1] > 1:
            longer = [jnp.any(highs[a] - lows[a] > bounds[a]) for a in range(2)]

            def further(total: jax.Array) -> jax.Array:
                def body(t: jax.Array, acc: jax.Array) -> jax.Array:
                    return acc + chunk_sum((t + 1) // chunks[1], (t + 1) % chunks[1])

                return jax.lax.fori_loop(0, chunks[0] * chunks[1] - 1, body, total)

            total = jax.lax.cond(longer[0] | longer[1], further, lambda total: total, total)
        count = [jnp.maximum(highs[a] - lows[a], 0) for a in range(2)]
        area = (count[0][:, :, None] * count[1][:, None, :]).astype(dtype)
        pooled = total / jnp.where(area > 0, area, 1)[..., None]
    else:
        bins_y, bins_x = spatial_bins
        # Channel (b_y * bins_x + b_x) * output_dim + c_out serves spatial bin (b_y, b_x).
        xg = xt.reshape(n, height, width, bins_y, bins_x, output_dim).transpose(0, 3, 4, 1, 2, 5)
        corners = []
        for first, last, length, bins in ((2, 4, height, bins_y), (1, 3, width, bins_x)):
            start = boxes[:, first] * spatial_scale
            end = boxes[:, last] * spatial_scale
            bin_size = roi_lib.divide(end - start, bins)[:, None]
            b = np.arange(bins, dtype=dtype)
            bin_start = start[:, None] + roi_lib.product(b, bin_size)  # (R, bins)
            bin_end = start[:, None] + roi_lib.product(b + 1, bin_size)
            if gs > 1:
                step = roi_lib.divide((bin_end - bin_start) * (length - 1), gs - 1)
                i = np.arange(gs, dtype=dtype)
                point = (
                    roi_lib.product(i[None, None, :], step[:, :, None])
                    + roi_lib.product(bin_start, length - 1)[:, :, None]
                )
            else:
                point = (0.5 * (bin_start + bin_end) * (length - 1))[:, :, None]
            ok = (point >= 0) & (point <= length - 1)
            idx, weight = roi_lib.axis_corners(point, length)  # (R, bins, gs, 2)
            corners.append((idx, weight * ok[..., None].astype(dtype)))
        (y_index, y_weight), (x_index, x_weight) = corners
        y_weight = y_weight * inside[:, None, None, None].astype(dtype)
        values = roi_lib.bilinear_samples(
            xg,
            (
                batch[:, None, None, None, None],
                np.arange(bins_y)[:, None, None, None],
                np.arange(bins_x)[:, None],
            ),
            y_index[:, :, :, None, None],
            y_weight[:, :, :, None, None],
            x_index[:, None, None],
            x_weight[:, None, None],
        )  # (R, bins_y, gs, bins_x, gs, output_dim)
        pooled = values.sum((1, 3)) / np.asarray(bins_y * bins_x, dtype)
    return roi_lib.from_channels_last(pooled.astype(x.dtype), data_format)


def psroi_pool(
    x: jax.typing.ArrayLike,
    rois: jax.typing.ArrayLike,
    output_dim: int,
    group_size: int,
    *,
    spatial_scale: float = 1.0,
    mode: str = "average",
    spatial_bins: Any = 1,
    data_format: str = "NCX",
) -> jax.Array:
    """Position-sensitive region of interest pooling as OpenVINO PSROIPooling-1.

    Box ``r`` is ``rois[r] = (batch_index, x_1, y_1, x_2, y_2)``; the batch index is truncated
    to an integer, and one outside ``[0, N)`` gives zeros for that box; as in the runtime, a
    batch index of -1 ends the list of boxes (it and every later box give zeros).  The output has
    ``output_dim`` channels and ``group_size x group_size`` bins.

    ``mode="average"`` (``C = output_dim * group_size**2``): the box spans ``y_1' = round(y_1) *
    spatial_scale`` to ``round(y_2 + 1) * spatial_scale`` (rounding halves away from zero), and
    its size is at least 0.1 (the runtime's rule, which also makes an inverted box a thin one
    at ``y_1'``); with ``b_h`` a bin's height, bin ``(i, j)`` of output channel ``c`` averages
    input channel ``(c * group_size + i) * group_size + j`` over the elements ``[floor(y_1' + i
    * b_h), ceil(y_1' + (i + 1) * b_h))`` (and likewise for columns), clipped to the map; a bin
    with no element gives 0.  Every element of a bin counts, also for boxes larger than the
    map: a bin is read in chunks of ``ceil((H + 1) / group_size) + 1`` rows (and likewise
    columns), one chunk for every bin of a box no larger than the map plus one element, and the
    further chunks only where some bin needs them.

    ``mode="bilinear"`` (``C = output_dim * bins_y * bins_x``): the corners times
    ``spatial_scale`` are normalised to ``[0, 1]``; the box splits into ``bins_y x bins_x``
    spatial bins, and output bin ``(i, j)`` of channel ``c`` is the mean over the spatial bins
    ``(u, v)`` of one bilinear sample of input channel ``(u * bins_x + v) * output_dim + c`` at
    row ``i * b_h * (H - 1) / (group_size - 1) + y_u * (H - 1)`` (``y_u`` the spatial bin's top
    edge, ``b_h`` its height; its centre when ``group_size == 1``), and likewise for columns.  A
    sample outside ``[0, H - 1] x [0, W - 1]`` adds 0.

    Derivatives: in ``x``, the exact adjoint of the averages and samples; in ``rois``, through
    the bilinear weights (``"bilinear"`` only; ``"average"`` is piecewise constant in the
    boxes).  16-bit inputs sum in float32.

    Sharding: channel-sharded ``x`` pools without collectives in ``"average"`` mode when each
    shard holds whole output channels (``output_dim`` divisible by the number of shards); in
    ``"bilinear"`` mode an output channel sums input channels ``output_dim`` apart, which lie
    in different shards, so XLA gathers them.

    Args:
      x: features ``[N, C, H, W]`` (``NCX``) or ``[N, H, W, C]`` (``NXC``), a floating dtype.
      rois: ``[R, 5]``, floating: ``(batch_index, x_1, y_1, x_2, y_2)``.
      output_dim: output channels.
      group_size: bins per axis of the output.
      spatial_scale: the factor from image pixels to feature-map pixels.
      mode: ``"average"`` or ``"bilinear"``.
      spatial_bins: ``bins_y`` and ``bins_x`` (``"bilinear"`` only), an int or a pair.
      data_format: ``"NCX"`` or ``"NXC"``.

    Returns:
      ``[R, output_dim, group_size, group_size]`` (``NCX``) or ``[R, group_size, group_size,
      output_dim]`` (``NXC``), with the dtype of ``x``.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(64.0).reshape(1, 4, 4, 4)
      >>> rois = jnp.array([[0.0, 0.0, 0.0, 3.0, 3.0]])
      >>> jaxpool.psroi_pool(x, rois, 1, 2)[0, 0].tolist()
      [[2.5, 20.5], [42.5, 60.5]]
    """
    x = jnp.asarray(x)
    rois = jnp.asarray(rois)
    _, channels, _, _ = roi_lib.check_features(x, data_format)
    roi_lib.check_rois(rois, 5, "(batch_index, x_1, y_1, x_2, y_2)")
    dim = window_lib.static_int("output_dim", output_dim)
    gs = window_lib.static_int("group_size", group_size)
    if dim < 1:
        raise ValueError(f"`output_dim` (={output_dim!r}) must be positive.")
    if gs < 1:
        raise ValueError(f"`group_size` (={group_size!r}) must be positive.")
    scale = roi_lib.static_float("spatial_scale", spatial_scale)
    window_lib.choice("mode", mode, MODES)
    bins = window_lib.per_axis("spatial_bins", spatial_bins, 2, 1, what="spatial axis")
    if mode == "average":
        bins = (1, 1)
        if channels != dim * gs * gs:
            raise ValueError(
                f"`x` has {channels} channels; mode 'average' needs `output_dim` * "
                f"`group_size`**2 = {dim} * {gs}**2 = {dim * gs * gs}."
            )
    elif channels != dim * bins[0] * bins[1]:
        raise ValueError(
            f"`x` has {channels} channels; mode 'bilinear' needs `output_dim` * bins_y * bins_x "
            f"= {dim} * {bins[0]} * {bins[1]} = {dim * bins[0] * bins[1]} (`spatial_bins`="
            f"{spatial_bins!r})."
        )
    return _psroi_pool(x, rois, dim, gs, scale, mode, bins, data_format)
