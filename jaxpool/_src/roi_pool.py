"""ROIPooling-2: the maximum over integer bins, or one bilinear sample per bin."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import bilinear, exporting, integer_bins
from jaxpool._src import roi as roi_lib
from jaxpool._src import roi_frame as frame
from jaxpool._src import roi_numerics as numerics
from jaxpool._src import window as window_lib

METHODS = ("max", "bilinear")
# torchvision's roi_pool: the maximum as ``"max"`` takes it, but with the bin edges computed in
# the features' dtype and the maximum a strictly larger scan from ``-FLT_MAX`` (NaN never
# wins).  A method of the program, not of :func:`roi_pool`: :mod:`jaxpool.torch` binds
# torchvision's ``roi_pool`` to it.
TORCHVISION_MAX = "torchvision_max"


@dataclasses.dataclass(frozen=True)
class Pooling:
    """The static attributes of a ROIPooling, checked (a hashable ``jit`` argument).

    ``return_argmax``: the program returns the position of each maximum beside the values.
    """

    output_size: tuple[int, int]
    spatial_scale: float
    method: str
    data_format: str
    return_argmax: bool = False

    @classmethod
    def of(
        cls,
        output_size: Any,
        spatial_scale: Any,
        method: Any,
        data_format: str,
        methods: tuple[str, ...],
        return_argmax: Any = False,
    ) -> Pooling:
        """The attributes as given to :func:`roi_pool_any_method`, checked."""
        size = roi_lib.output_hw(output_size)
        scale = roi_lib.static_float("spatial_scale", spatial_scale)
        window_lib.choice("method", method, methods)
        if not isinstance(return_argmax, (bool, np.bool_)):
            raise TypeError(f"`return_argmax` must be a bool, got {return_argmax!r}.")
        if return_argmax and method == "bilinear":
            raise ValueError(
                "`return_argmax` (=True) needs a maximum over integer bins: `method` 'max' or "
                f"{TORCHVISION_MAX!r}, got `method`={method!r}."
            )
        return cls(size, scale, method, data_format, bool(return_argmax))


def _bin_edges(
    starts: tuple[jax.Array, jax.Array],
    ends: tuple[jax.Array, jax.Array],
    length: tuple[int, int],
    output_size: tuple[int, int],
    dtype: Any,
) -> tuple[list[jax.Array], list[jax.Array]]:
    """The integer bins ``[low, high)`` of each box along each axis, ``(R, out)``, clipped to
    the map, their edges ``floor(i * s)`` and ``ceil((i + 1) * s)`` computed in ``dtype``."""
    lows, highs = [], []
    for a in range(2):
        out, size = output_size[a], length[a]
        span = jnp.maximum(ends[a] - starts[a] + 1, 1).astype(dtype)
        bin_size = numerics.divide(span, out)[:, None]
        i = np.arange(out, dtype=dtype)
        lo = jnp.floor(numerics.product(i, bin_size)).astype(np.int32) + starts[a][:, None]
        hi = jnp.ceil(numerics.product(i + 1, bin_size)).astype(np.int32) + starts[a][:, None]
        lows.append(jnp.clip(lo, 0, size))
        highs.append(jnp.clip(hi, 0, size))
    return lows, highs


def _max_bins(
    xt: jax.Array, boxes: jax.Array, batch: jax.Array, inside: jax.Array, attrs: Pooling
) -> tuple[jax.Array, jax.Array | None]:
    """The maximum over the integer bins of each box, 0 for an empty bin, and its position ``h
    * W + w`` (-1 where the bin gives no element): each ``(R, oh, ow, C)``.

    The corners times ``spatial_scale`` are rounded to elements: box ``r`` starts at element
    ``y_1`` and spans ``y_2 - y_1 + 1`` elements (at least 1) along the rows (and likewise
    the columns); bin ``i`` of ``out`` covers ``[floor(i * s), ceil((i + 1) * s))`` of it
    (``s`` the box size over ``out``), clipped to the map.  The edges are computed in float32
    (the OpenVINO runtime's), or for :data:`TORCHVISION_MAX` in the features' dtype (float32
    for 16-bit ones), and the maximum is then torchvision's: a scan from ``-FLT_MAX`` that
    takes a strictly larger element, so that a NaN, ``-inf`` or ``-FLT_MAX`` never becomes the
    maximum, and a bin of nothing else gives ``-FLT_MAX`` with no derivative and no position.
    The bins are read by :func:`jaxpool._src.integer_bins.pool_bins`.
    """
    _, height, width, _ = xt.shape
    x1, y1, x2, y2 = (
        numerics.round_half_away(boxes[:, i] * attrs.spatial_scale).astype(np.int32)
        for i in range(1, 5)
    )
    torchvision = attrs.method == TORCHVISION_MAX
    edge_dtype = np.promote_types(xt.dtype, np.float32) if torchvision else np.float32
    lows, highs = _bin_edges((y1, x1), (y2, x2), (height, width), attrs.output_size, edge_dtype)
    above = None
    if torchvision:
        # torchvision's -FLT_MAX in the features' dtype: -inf in a 16-bit float.
        with np.errstate(over="ignore"):
            above = jnp.asarray(np.float32(-np.finfo(np.float32).max).astype(xt.dtype))
    lead = (batch[:, None, None],)
    return integer_bins.pool_bins(xt, lead, lows, highs, inside, reduce="max", above=above)


def _bilinear_bins(
    xt: jax.Array, boxes: jax.Array, batch: jax.Array, inside: jax.Array, attrs: Pooling
) -> tuple[jax.Array, jax.Array | None]:
    """One bilinear sample per bin (:func:`jaxpool._src.bilinear.sample_points`, the last at
    the box's end), ``(R, oh, ow, C)``, and no positions."""
    _, height, width, _ = xt.shape
    out_h, out_w = attrs.output_size
    y_index, y_weight = bilinear.sample_points(
        boxes[:, 2], boxes[:, 4], out_h, height, last_at_end=True
    )
    x_index, x_weight = bilinear.sample_points(
        boxes[:, 1], boxes[:, 3], out_w, width, last_at_end=True
    )
    y_weight = y_weight * inside[:, None, None].astype(y_weight.dtype)
    pooled = bilinear.bilinear_samples(
        xt,
        (batch[:, None, None],),
        y_index[:, :, None],
        y_weight[:, :, None],
        x_index[:, None],
        x_weight[:, None],
    )
    return pooled, None


_PROGRAMS = {"max": _max_bins, TORCHVISION_MAX: _max_bins, "bilinear": _bilinear_bins}


@functools.partial(jax.jit, static_argnames=("attrs",))
@frame.nan_boxes
def _roi_pool(x: jax.Array, rois: jax.Array, attrs: Pooling) -> Any:
    n, channels, _, _ = window_lib.to_ncx_shape(x.shape, attrs.data_format)
    empty = frame.nothing_read(
        n, rois.shape[0], channels, attrs.output_size, x.dtype, attrs.data_format
    )
    if empty is not None:
        return (empty, jnp.full(empty.shape, -1, np.int32)) if attrs.return_argmax else empty
    boxes = rois.astype(numerics.compute_dtype(x.dtype, rois.dtype))
    batch, inside = frame.batch_or_zero(jnp.trunc(boxes[:, 0]), n)
    xt = frame.channels_last(x, attrs.data_format)
    pooled, at = _PROGRAMS[attrs.method](xt, boxes, batch, inside, attrs)
    pooled = frame.from_channels_last(pooled.astype(x.dtype), attrs.data_format)
    if not attrs.return_argmax:
        return pooled
    assert at is not None  # Pooling.of allows the positions with a maximum only
    return pooled, frame.from_channels_last(at, attrs.data_format)


@exporting.exportable
def roi_pool(
    x: jax.typing.ArrayLike,
    rois: jax.typing.ArrayLike,
    output_size: Any,
    *,
    spatial_scale: float = 1.0,
    method: str = "max",
    data_format: str = "NCX",
) -> jax.Array:
    """Region of interest pooling as OpenVINO ROIPooling-2.

    Box ``r`` is ``rois[r] = (batch_index, x_1, y_1, x_2, y_2)``; the batch index is truncated
    to an integer, and one outside ``[0, N)`` gives zeros for that box.

    ``method="max"``: the corners are scaled by ``spatial_scale`` and rounded to the nearest
    element (halves away from zero); the box spans ``h = max(y_2 - y_1 + 1, 1)`` rows (and
    likewise columns), and bin ``i`` of ``out_h`` covers rows ``y_1 + [floor(i * h / out_h),
    ceil((i + 1) * h / out_h))``, clipped to the map.  A bin's output is the maximum over its
    elements, or 0 where the bin holds none (the runtime's rule, and torchvision's).  Every
    element of a bin counts, also for boxes larger than the map: a bin is read in chunks of
    ``ceil((H + 1) / out_h) + 1`` rows (and the same for columns), one chunk for every bin of a
    box no larger than the map plus one element, and the further chunks only where some bin
    needs them.

    ``method="bilinear"``: the corners are normalised to ``[0, 1]`` (``spatial_scale`` is not
    used) and bin ``i`` is one bilinear sample at ``y_1 * (H - 1) + i * (y_2 - y_1) * (H - 1) /
    (out_h - 1)`` (the last at ``y_2 * (H - 1)``; the box's centre when ``out_h == 1``); a sample
    outside ``[0, H - 1] x [0, W - 1]`` gives 0.

    Derivatives: in ``x``, through the maximal element (the first in row-major order of its
    bin) or the bilinear weights; in ``rois``, through the bilinear weights (``"bilinear"``
    only; ``"max"`` is piecewise constant in the boxes).  16-bit inputs interpolate in float32.

    Args:
      x: features ``[N, C, H, W]`` (``NCX``) or ``[N, H, W, C]`` (``NXC``), a floating dtype.
      rois: ``[R, 5]``, floating: ``(batch_index, x_1, y_1, x_2, y_2)``.
      output_size: ``out_h`` and ``out_w``, an int or a pair.
      spatial_scale: the factor from image pixels to feature-map pixels (``"max"`` only).
      method: ``"max"`` or ``"bilinear"``.
      data_format: ``"NCX"`` or ``"NXC"``.

    Returns:
      ``[R, C, out_h, out_w]`` (``NCX``) or ``[R, out_h, out_w, C]`` (``NXC``), with the dtype of
      ``x``.

    Example:
      >>> import jax.numpy as jnp, jaxpool
      >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
      >>> jaxpool.roi_pool(x, jnp.array([[0.0, 0.0, 0.0, 3.0, 3.0]]), 2)[0, 0].tolist()
      [[5.0, 7.0], [13.0, 15.0]]
      >>> rois = jnp.array([[0.0, 0.0, 0.0, 1.0, 1.0]])
      >>> jaxpool.roi_pool(x, rois, 2, method="bilinear")[0, 0].tolist()
      [[0.0, 3.0], [12.0, 15.0]]
    """
    return roi_pool_any_method(
        x, rois, output_size, spatial_scale=spatial_scale, method=method, data_format=data_format
    )


@exporting.exportable
def roi_pool_any_method(
    x: jax.typing.ArrayLike,
    rois: jax.typing.ArrayLike,
    output_size: Any,
    *,
    spatial_scale: float = 1.0,
    method: str = "max",
    data_format: str = "NCX",
    methods: tuple[str, ...] = (*METHODS, TORCHVISION_MAX),
    return_argmax: bool = False,
) -> Any:
    """:func:`roi_pool` with ``method`` one of ``methods``: by default also
    :data:`TORCHVISION_MAX`.

    With ``return_argmax`` (a maximum's ``method`` only) it returns ``(y, argmax)``: ``argmax``
    (int32, ``y``'s shape and layout) holds the position ``h * W + w`` in its image's plane of
    the element each output took (the first maximum in row-major order of its bin), and -1
    where it took none: an empty bin, a batch index outside ``[0, N)``, a box holding a NaN,
    and for :data:`TORCHVISION_MAX` a bin with no element above ``-FLT_MAX``.  torchvision's
    ``roi_pool`` returns the same beside its values.  Its derivative is none (``float0``).
    """
    x = jnp.asarray(x)
    rois = jnp.asarray(rois)
    roi_lib.check_features(x, data_format)
    roi_lib.check_rois(rois, 5, "(batch_index, x_1, y_1, x_2, y_2)")
    attrs = Pooling.of(output_size, spatial_scale, method, data_format, methods, return_argmax)
    return _roi_pool(x, rois, attrs)
