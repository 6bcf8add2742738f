"""A small NumPy reference of every jaxpool op, written for clarity rather than speed.

Inputs and outputs are NCX NumPy arrays.  Each op loops over the output positions and handles
all ``(n, c)`` planes at once; a window lists its elements in row-major kernel order, so
"first" means first in that order.  Values are computed in float64 (integers in int64) and
cast back to the input dtype.  Windows and bins come from the specifications' formulas:
nothing here imports jaxpool, so that the tests never check the library against itself.
"""

from __future__ import annotations

import itertools
import math

import jax
import numpy as np


def assert_sums_equal(actual, expected):
    """Gradients that sum cotangents, against PyTorch's CPU kernels, which add in output order:
    bit-exact on a CPU, where jaxpool adds in that order too; elsewhere to rounding, since a
    GPU's scatter-add (the adaptive max pool's backward) adds in no fixed order."""
    if jax.default_backend() == "cpu":
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


class Invalid(ValueError):
    """The attributes describe no valid pooling (a dilated kernel exceeds the padded input)."""


def _per_axis(value, nd, default):
    if value is None:
        return (default,) * nd
    return (int(value),) * nd if np.ndim(value) == 0 else tuple(int(v) for v in value)


def sliding_geometry(
    in_spatial,
    kernel,
    strides=None,
    pads_begin=None,
    pads_end=None,
    dilations=None,
    rounding_type="floor",
    auto_pad="explicit",
):
    """``(kernel, strides, dilations, pads_begin, pads_end, out_spatial)`` after every rule."""
    nd = len(in_spatial)
    kernel = _per_axis(kernel, nd, None)
    strides = kernel if strides is None else _per_axis(strides, nd, None)
    dilations = _per_axis(dilations, nd, 1)
    pads_begin, pads_end = _per_axis(pads_begin, nd, 0), _per_axis(pads_end, nd, 0)
    dk = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if auto_pad == "valid":
        pads_begin = pads_end = (0,) * nd
    elif auto_pad in ("same_upper", "same_lower"):
        totals = [
            max(0, (math.ceil(n / s) - 1) * s + k - n) for n, k, s in zip(in_spatial, dk, strides)
        ]
        small, big = tuple(t // 2 for t in totals), tuple(t - t // 2 for t in totals)
        pads_begin, pads_end = (small, big) if auto_pad == "same_upper" else (big, small)
    out_spatial = []
    for length, k, s, pb, pe in zip(in_spatial, dk, strides, pads_begin, pads_end):
        span = length + pb + pe - k
        if span < 0:
            raise Invalid(f"dilated kernel {k} exceeds the padded input {length + pb + pe}")
        out = span // s + 1 if rounding_type == "floor" else math.ceil(span / s) + 1
        if rounding_type == "ceil_torch" and (out - 1) * s >= length + pb:
            out -= 1
        out_spatial.append(out)
    return kernel, strides, dilations, pads_begin, pads_end, tuple(out_spatial)


def _sliding(x, *attrs):
    """``(kernel, pads_begin, pads_end, out_spatial, window_of)`` of a window over NCX ``x``
    (:func:`sliding_geometry`'s ``attrs``), ``window_of(o)`` the spatial coordinates of the
    input elements of window ``o``."""
    in_spatial = x.shape[2:]
    kernel, strides, dilations, pads_begin, pads_end, out = sliding_geometry(in_spatial, *attrs)

    def positions(o):
        taps = (
            tuple(
                oi * s + ki * d - pb
                for oi, ki, s, d, pb in zip(o, k, strides, dilations, pads_begin)
            )
            for k in itertools.product(*map(range, kernel))
        )
        return [p for p in taps if all(0 <= pi < n for pi, n in zip(p, in_spatial))]

    return kernel, pads_begin, pads_end, out, positions


def _each(out_spatial, window_of, in_spatial):
    """``(index of output o in every plane, flat input positions of window o)``."""
    for o in itertools.product(*map(range, out_spatial)):
        flat = [np.ravel_multi_index(p, in_spatial) for p in window_of(o)]
        yield (slice(None), slice(None), *o), np.array(flat, np.int64)


def _wide(x):  # float64 or int64
    return x.astype(np.int64) if np.issubdtype(x.dtype, np.integer) else x.astype(np.float64)


def _max_over(x, out_spatial, window_of, axis):
    """Max pooling: ``(y, indices)`` counted from ``axis``.  The maximum (the first NaN, else
    the first maximum) is compared in a wide type and taken from ``x`` itself, so that it
    keeps its bits (the sign of a zero, the payload of a NaN)."""
    batch, channels, *in_spatial = x.shape
    planes = x.reshape(batch, channels, -1)
    wide = _wide(planes)
    lowest = np.iinfo(x.dtype).min if np.issubdtype(x.dtype, np.integer) else -np.inf
    y = np.full((batch, channels, *out_spatial), lowest, x.dtype)
    where = np.zeros(y.shape, np.int64)
    for at, flat in _each(out_spatial, window_of, in_spatial):
        if flat.size == 0:
            continue  # no input element: the padding value, at the plane's first element
        values = wide[:, :, flat]
        is_nan = np.isnan(values) if values.dtype.kind == "f" else np.zeros(values.shape, bool)
        first = np.where(is_nan.any(-1), np.argmax(is_nan, -1), np.argmax(values, -1))
        y[at] = np.take_along_axis(planes[:, :, flat], first[..., None], -1)[..., 0]
        where[at] = flat[first]
    plane = np.arange(batch * channels).reshape(batch, channels, *[1] * len(out_spatial))
    return y, (plane * math.prod(in_spatial) + where) % math.prod(x.shape[axis:])


def _avg_over(x, out_spatial, window_of, divisor_of):
    """Average pooling: each window's sum over ``divisor_of(its number of input elements)``
    (0: the output is 0), integers rounded half to even."""
    batch, channels, *in_spatial = x.shape
    planes = _wide(x).astype(np.float64).reshape(batch, channels, -1)
    y = np.zeros((batch, channels, *out_spatial), np.float64)
    for at, flat in _each(out_spatial, window_of, in_spatial):
        if divisor := divisor_of(flat.size):
            with np.errstate(invalid="ignore"):  # inf - inf is NaN, as in the op
                y[at] = planes[:, :, flat].sum(-1) / divisor
    return (np.round(y) if np.issubdtype(x.dtype, np.integer) else y).astype(x.dtype)


def max_pool(
    x,
    kernel,
    strides=None,
    pads_begin=None,
    pads_end=None,
    *,
    dilations=None,
    rounding_type="floor",
    auto_pad="explicit",
    axis=0,
):
    """MaxPool on NCX ``x``: ``(y, indices)`` with int64 indices counted from ``axis``."""
    x = np.asarray(x)
    window = kernel, strides, pads_begin, pads_end, dilations, rounding_type, auto_pad
    *_, out_spatial, window_of = _sliding(x, *window)
    return _max_over(x, out_spatial, window_of, axis % x.ndim)


def avg_pool(
    x,
    kernel,
    strides=None,
    pads_begin=None,
    pads_end=None,
    *,
    exclude_pad=False,
    rounding_type="floor",
    auto_pad="explicit",
):
    """AvgPool on NCX ``x`` with the OpenVINO divisor.

    ``exclude_pad=True``: the number of input elements of the window (an empty window gives 0).
    ``exclude_pad=False``: the whole kernel if any pad in force is non-zero (also the part of a
    ceil-mode window beyond ``pads_end``), otherwise the number of input elements.
    """
    x = np.asarray(x)
    window = kernel, strides, pads_begin, pads_end, None, rounding_type, auto_pad
    kernel, pads_begin, pads_end, out_spatial, window_of = _sliding(x, *window)
    whole = not exclude_pad and (any(pads_begin) or any(pads_end))
    return _avg_over(x, out_spatial, window_of, lambda n: math.prod(kernel) if whole else n)


def adaptive_bins(length, out):
    """Bin ``i`` covers ``[floor(i * L / O), ceil((i + 1) * L / O))``."""
    return [(i * length // out, -(-(i + 1) * length // out)) for i in range(out)]


def _adaptive(x, output_size):
    """``(out_spatial, window_of)`` of an adaptive pooling of NCX ``x``."""
    in_spatial = x.shape[2:]
    if np.ndim(output_size) == 0:
        output_size = (output_size,) * len(in_spatial)
    sizes = zip(in_spatial, output_size, strict=True)
    out_spatial = tuple(n if o is None else int(o) for n, o in sizes)
    bins = [adaptive_bins(n, o) for n, o in zip(in_spatial, out_spatial)]
    return out_spatial, lambda o: list(
        itertools.product(*(range(*bins[i][oi]) for i, oi in enumerate(o)))
    )


def adaptive_max_pool(x, output_size):
    """AdaptiveMaxPool-8 on NCX ``x``: ``(y, indices)`` with spatial (``axis=2``) indices."""
    x = np.asarray(x)
    return _max_over(x, *_adaptive(x, output_size), 2)


def adaptive_avg_pool(x, output_size):
    """AdaptiveAvgPool-8 on NCX ``x``: the mean of each bin."""
    x = np.asarray(x)
    return _avg_over(x, *_adaptive(x, output_size), lambda n: n)


def max_unpool(y, indices, output_shape, *, axis=0):
    """Scatter-add of NCX ``y`` at ``indices`` (taken with ``axis``) into ``output_shape``."""
    y = np.asarray(y)
    axis %= len(output_shape)
    channels, size = output_shape[1], math.prod(output_shape[2:])
    n = np.arange(y.shape[0]).reshape(-1, *[1] * (y.ndim - 1))
    c = np.arange(y.shape[1]).reshape(1, -1, *[1] * (y.ndim - 2)) if axis > 1 else 0
    full = np.asarray(indices).astype(np.int64) + (0 if axis == 0 else (n * channels + c) * size)
    out = np.zeros(math.prod(output_shape), np.float64 if y.dtype.kind == "f" else np.int64)
    with np.errstate(invalid="ignore"):
        np.add.at(out, np.broadcast_to(full, y.shape).ravel(), _wide(y).ravel())
    return out.reshape(output_shape).astype(y.dtype)


def _pair(output_size):
    return (int(output_size),) * 2 if np.ndim(output_size) == 0 else tuple(map(int, output_size))


def _bilinear(planes, y, x):
    """Samples ``[..., *S]`` of float64 ``planes [..., H, W]`` at points ``(y, x)`` of shape ``S``:
    torchvision's ``bilinear_interpolate``, which OpenVINO's ROIAlign and its feature-pyramid
    extractor share: a point below -1 or past ``H`` (``W``) reads 0, one in ``[-1, 0]`` is
    moved to 0, one at or past the last element reads that element.
    """
    height, width = planes.shape[-2:]
    y, x = np.asarray(y, np.float64), np.asarray(x, np.float64)
    outside = (y < -1.0) | (y > height) | (x < -1.0) | (x > width)
    y, x = np.clip(y, 0.0, height), np.clip(x, 0.0, width)
    y_low = np.minimum(np.floor(y).astype(np.int64), height - 1)
    x_low = np.minimum(np.floor(x).astype(np.int64), width - 1)
    y_high, x_high = np.minimum(y_low + 1, height - 1), np.minimum(x_low + 1, width - 1)
    ly = np.where(y_low == height - 1, 0.0, y - y_low)
    lx = np.where(x_low == width - 1, 0.0, x - x_low)
    hy, hx = 1.0 - ly, 1.0 - lx
    values = (
        hy * hx * planes[..., y_low, x_low]
        + hy * lx * planes[..., y_low, x_high]
        + ly * hx * planes[..., y_high, x_low]
        + ly * lx * planes[..., y_high, x_high]
    )
    return np.where(outside, 0.0, values)


def _bins_and_counts(corners, output_size, sampling_ratio, at_least_one):
    """ROIAlign's bin sizes ``(bin_h, bin_w)`` of a box and its samples per axis (0 or negative
    for a box of zero or negative size, whatever its size with ``sampling_ratio=0``)."""
    x1, y1, x2, y2 = corners
    width, height = x2 - x1, y2 - y1
    if at_least_one:
        width, height = max(width, 1.0), max(height, 1.0)
    bins = height / output_size[0], width / output_size[1]
    return bins, tuple(sampling_ratio if sampling_ratio > 0 else math.ceil(b) for b in bins)


def _align_samples(
    planes, box, spatial_scale, output_size, sampling_ratio, aligned_mode, at_least_one
):
    """ROIAlign's samples of every bin of one ``(x_1, y_1, x_2, y_2)`` box on ``planes``:
    ``[..., out_h, out_w, s_y * s_x]``, or ``None`` where a count ``s`` is not positive."""
    (out_h, out_w), source = output_size, 0.5 if aligned_mode == "half_pixel" else 0.0
    target = 0.0 if aligned_mode == "asymmetric" else -0.5
    corners = [(float(v) + source) * spatial_scale + target for v in box]
    (bin_h, bin_w), (grid_h, grid_w) = _bins_and_counts(
        corners, output_size, sampling_ratio, at_least_one
    )
    if grid_h <= 0 or grid_w <= 0:
        return None
    ys = corners[1] + np.arange(out_h)[:, None] * bin_h + (np.arange(grid_h) + 0.5) * bin_h / grid_h
    xs = corners[0] + np.arange(out_w)[:, None] * bin_w + (np.arange(grid_w) + 0.5) * bin_w / grid_w
    samples = _bilinear(planes, *np.broadcast_arrays(ys[:, None, :, None], xs[None, :, None, :]))
    return samples.reshape(*samples.shape[:-2], grid_h * grid_w)


def ps_roi_align(
    x,
    rois,
    batch_indices,
    output_size,
    *,
    spatial_scale=1.0,
    sampling_ratio=0,
    aligned_mode="half_pixel_for_nn",
    empty_bin="zero",
):
    """torchvision's ``ps_roi_align`` (its CPU kernel) for NCX ``x`` and ``(x_1, y_1, x_2, y_2)``
    boxes with their batch indices apart.

    ``aligned_mode="half_pixel_for_nn"`` is torchvision's rule (no bound on the box's size);
    ``"asymmetric"`` (width and height at least 1) and ``"half_pixel"`` are ROIAlign's other
    two.  ``empty_bin="nan"`` is torchvision's rule for a box whose count of samples (at
    ``"half_pixel_for_nn"``) is 0 on an axis: NaN, its 0 / 0.  Where the kernel's behaviour is
    undefined or NaN, the library's rule: a batch index outside ``[0, N)`` gives zeros, and a
    bin with no samples (a count ``<= 0``) gives 0.
    """
    out_h, out_w = output_size
    n, channels, _, _ = x.shape
    dim = channels // (out_h * out_w)
    grid = sampling_ratio, aligned_mode, aligned_mode == "asymmetric"
    wide = np.asarray(x, np.float64)
    out = np.zeros((len(rois), dim, out_h, out_w), np.float64)
    for r, box in enumerate(np.asarray(rois, np.float64)):
        b = int(batch_indices[r])
        if not 0 <= b < n:
            continue
        if empty_bin == "nan":
            corners = [float(v) * spatial_scale - 0.5 for v in box]
            if 0 in _bins_and_counts(corners, output_size, sampling_ratio, False)[1]:
                out[r] = np.nan
                continue
        samples = _align_samples(wide[b], box, spatial_scale, output_size, *grid)
        if samples is not None:
            # Bin (i, j) of output channel c from input channel (c * out_h + i) * out_w + j.
            every = samples.mean(-1).reshape(dim, out_h, out_w, out_h, out_w)
            i, j = np.arange(out_h)[:, None], np.arange(out_w)[None, :]
            out[r] = every[:, i, j, i, j]
    return out.astype(x.dtype)


def _roi_align_boxes(rois, batch_indices, output_size, channels, map_of, mode, grid):
    """ROIAlign of box ``r`` on the ``(float64 NCX map, spatial scale)`` ``map_of(r)``, or zeros."""
    out = np.zeros((len(rois), channels, *output_size), np.float64)
    for r, box in enumerate(np.asarray(rois, np.float64)):
        chosen, b = map_of(r), int(batch_indices[r])
        if chosen is None or not 0 <= b < chosen[0].shape[0]:
            continue
        samples = _align_samples(chosen[0][b], box, chosen[1], output_size, *grid)
        if samples is not None:
            # The runtime's max starts from 0: a bin of negative samples gives 0.
            out[r] = samples.mean(-1) if mode == "avg" else np.maximum(samples.max(-1), 0.0)
    return out


def roi_align(
    x,
    rois,
    batch_indices,
    output_size,
    *,
    spatial_scale=1.0,
    sampling_ratio=0,
    mode="avg",
    aligned_mode="asymmetric",
):
    """OpenVINO ROIAlign-9 for NCX ``x``, ``(x_1, y_1, x_2, y_2)`` boxes and their batch indices.

    Width and height at least 1 in ``"asymmetric"`` only; ``sampling_ratio=0`` samples
    ``ceil(bin size)`` points per axis, with no cap for boxes larger than the map.  ``"max"``
    takes the samples' maximum starting from 0.  The library's rules where the runtime gives
    NaN or reads out of bounds: a bin with no samples gives 0, a batch index outside ``[0, N)``
    zeros.
    """
    wide, size = np.asarray(x, np.float64), _pair(output_size)
    grid = sampling_ratio, aligned_mode, aligned_mode == "asymmetric"
    out = _roi_align_boxes(
        rois, batch_indices, size, x.shape[1], lambda r: (wide, spatial_scale), mode, grid
    )
    return out.astype(x.dtype)


LEVEL_RULES = ("torchvision", "detectron2", "openvino")


def pyramid_levels(
    rois,
    spatial_scales,
    level_rule="torchvision",
    canonical_size=224,
    canonical_level=4,
    dtype=np.float64,
):
    """The pyramid level of each ``(x_1, y_1, x_2, y_2)`` box: an index into ``spatial_scales``
    (finest first), or -1 where the box gives zeros.

    The area (no +1, in image pixels) is computed in ``dtype``: float32 evaluates the formulas
    as the libraries and the runtime do on float32 boxes.  ``"torchvision"`` is its
    ``LevelMapper``, ``"detectron2"`` its ``assign_boxes_to_levels``, both clamped to the
    scales' levels: a box of area 0 goes to the finest level (``log2(0) = -inf``), one of
    negative area has a NaN level in both libraries, which matches no level: zeros.  Maps that
    skip levels (scales ``(1/8, 1/32)``, torchvision's ``MultiScaleRoIAlign`` only): index ``i``
    is the ``i``-th map, as the module's loop over its maps pairs them, and an index past the
    last map gives zeros.  ``"openvino"`` is ExperimentalDetectronROIFeatureExtractor-6 as the
    CPU runtime computes it: levels counted from the first map whatever its scale, and a box of
    area ``<= 0`` gives zeros.
    """
    rois = np.asarray(rois, dtype).reshape(-1, 4)
    area = (rois[:, 2] - rois[:, 0]) * (rois[:, 3] - rois[:, 1])
    k0, s0 = dtype(canonical_level), dtype(canonical_size)
    with np.errstate(divide="ignore", invalid="ignore"):
        size = np.sqrt(area)
        if level_rule == "openvino":
            k = np.floor(np.log2(size / dtype(224) + dtype(1e-6)) + dtype(2))
            low, high = 0, len(spatial_scales) - 1
        else:
            if level_rule == "torchvision":
                k = np.floor(k0 + np.log2(size / s0) + dtype(1e-6))
            else:
                k = np.floor(k0 + np.log2(size / s0 + dtype(1e-8)))
            low = -round(math.log2(spatial_scales[0]))
            high = -round(math.log2(spatial_scales[-1]))
        gives_zeros = ~(area > 0) if level_rule == "openvino" else ~(area >= 0)
        level = np.clip(np.where(gives_zeros, low, k), low, high).astype(np.int64) - low
    return np.where(gives_zeros | (level >= len(spatial_scales)), -1, level)


def multilevel_roi_align(
    features,
    rois,
    batch_indices,
    output_size,
    *,
    spatial_scales,
    sampling_ratio=0,
    mode="avg",
    aligned_mode=None,
    level_rule="torchvision",
    canonical_size=224,
    canonical_level=4,
):
    """ROIAlign over a feature pyramid (NCX maps, finest first): each box pooled as
    :func:`roi_align` pools it on the level that :func:`pyramid_levels` assigns.

    With ``level_rule="openvino"`` the box's width and height are at least 1 on its level in
    every ``aligned_mode`` (the runtime's extractor clamps also when aligned); elsewhere only
    in ``"asymmetric"``, as ROIAlign does.  ``aligned_mode=None`` is the library's own:
    ``MultiScaleRoIAlign`` calls ``roi_align`` with ``aligned=False``, detectron2's
    ``ROIPooler`` defaults to ``ROIAlignV2`` (``aligned=True``), the extractor's ``aligned``
    defaults to false.
    """
    if aligned_mode is None:
        aligned_mode = "half_pixel_for_nn" if level_rule == "detectron2" else "asymmetric"
    levels = pyramid_levels(rois, spatial_scales, level_rule, canonical_size, canonical_level)
    wide = [np.asarray(f, np.float64) for f in features]
    grid = sampling_ratio, aligned_mode, aligned_mode == "asymmetric" or level_rule == "openvino"

    def map_of(r):
        return None if levels[r] < 0 else (wide[levels[r]], spatial_scales[levels[r]])

    channels = features[0].shape[1]
    out = _roi_align_boxes(rois, batch_indices, _pair(output_size), channels, map_of, mode, grid)
    return out.astype(features[0].dtype)


def _round_half_away(v):
    """C's ``round`` (and ``std::round``): halves away from zero."""
    whole = math.trunc(v)
    return int(whole + math.copysign(1.0, v)) if abs(v - whole) >= 0.5 else int(whole)


def deformable_psroi_pool(
    x,
    rois,
    offsets=None,
    *,
    output_dim,
    group_size=1,
    spatial_scale=1.0,
    spatial_bins=1,
    trans_std=1.0,
):
    """OpenVINO DeformablePSROIPooling-1 (its CPU plugin's loop, in float64) for NCX ``x``,
    ``(batch_index, x_1, y_1, x_2, y_2)`` rows and offsets ``[R, 2 * K, P, P]`` (or ``None``).

    The rows are read up to the first batch index -1 (the runtime's end of the list); a row
    whose batch index lies otherwise outside ``[0, N)`` gives zeros, where the runtime reads
    outside its input.  ``spatial_bins`` is an int or ``(bins_y, bins_x)``.
    """
    n, _, height, width = x.shape
    gs, (bins_y, bins_x) = group_size, _pair(spatial_bins)
    wide = np.asarray(x, np.float64)
    out = np.zeros((len(rois), output_dim, gs, gs), np.float64)
    classes, part = (1, 1) if offsets is None else (offsets.shape[1] // 2, offsets.shape[2])
    for r, row in enumerate(np.asarray(rois, np.float64)):
        b = math.trunc(row[0])
        if b == -1:
            break
        if not 0 <= b < n:
            continue
        # std::round as the plugin computes it: floor(|v| + 0.5) with v's sign.
        x1, y1, x2, y2 = (math.copysign(math.floor(abs(v) + 0.5), v) for v in row[1:])
        start_x, start_y = x1 * spatial_scale - 0.5, y1 * spatial_scale - 0.5
        roi_w = max((x2 + 1) * spatial_scale - 0.5 - start_x, 0.1)
        roi_h = max((y2 + 1) * spatial_scale - 0.5 - start_y, 0.1)
        bin_w, bin_h = roi_w / gs, roi_h / gs
        for c, i, j in itertools.product(range(output_dim), range(gs), range(gs)):
            dx = dy = 0.0
            if offsets is not None:
                k, p, q = c // (output_dim // classes), i * part // gs, j * part // gs
                dx, dy = (float(offsets[r, 2 * k + e, p, q]) * trans_std for e in (0, 1))
            left = j * bin_w + start_x + dx * roi_w
            top = i * bin_h + start_y + dy * roi_h
            plane = wide[b, (c * gs + i) * gs + j]
            total, count = 0.0, 0
            for u, v in itertools.product(range(bins_y), range(bins_x)):
                px, py = left + v * (bin_w / bins_x), top + u * (bin_h / bins_y)
                if not (-0.5 <= px <= width - 0.5 and -0.5 <= py <= height - 0.5):
                    continue
                px, py = min(max(px, 0.0), width - 1.0), min(max(py, 0.0), height - 1.0)
                xl, yl = math.floor(px), math.floor(py)
                xh, yh = math.ceil(px), math.ceil(py)
                fx, fy = px - xl, py - yl
                total += (
                    (1 - fx) * (1 - fy) * plane[yl, xl]
                    + (1 - fx) * fy * plane[yh, xl]
                    + fx * (1 - fy) * plane[yl, xh]
                    + fx * fy * plane[yh, xh]
                )
                count += 1
            out[r, c, i, j] = total / count if count else 0.0
    return out.astype(x.dtype)


def _onnx_corners(plane_shape, y, x):
    """ONNX Runtime's four corners of a RoiAlign sample at ``(y, x)``: ``[(row, column,
    weight)]`` in its order, or ``None`` for a sample outside the map (its terms are
    ``0 * x[0, 0]``)."""
    height, width = plane_shape
    if y < -1 or y > height or x < -1 or x > width:
        return None
    y, x = max(y, type(y)(0)), max(x, type(x)(0))
    y_low, x_low = min(int(y), height - 1), min(int(x), width - 1)
    y_high, x_high = min(y_low + 1, height - 1), min(x_low + 1, width - 1)
    # A sample at or past the last row (column) is moved onto it.
    y = type(y)(y_low) if y_low == height - 1 else y
    x = type(x)(x_low) if x_low == width - 1 else x
    ly, lx = y - y_low, x - x_low
    hy, hx = 1 - ly, 1 - lx
    rows, columns = ((y_low, hy), (y_high, ly)), ((x_low, hx), (x_high, lx))
    return [(row, column, wy * wx) for row, wy in rows for column, wx in columns]


def roi_align_onnx_max(
    x, rois, batch_indices, output_size, *, spatial_scale=1.0, sampling_ratio=0, half_pixel=True
):
    """ONNX Runtime's RoiAlign ``mode="max"`` (its CPU kernel) for NCX ``x``, in ``x``'s dtype
    and that kernel's order of operations.

    ``half_pixel`` is ONNX's ``coordinate_transformation_mode="half_pixel"``, else
    ``"output_half_pixel"`` (width and height at least 1).  A sample's value is the largest of its
    four terms ``w_k * x[corner_k]``, a bin's the largest of its samples' values, each maximum
    starting from its first term or sample and taking a later one only where strictly larger (C++'s
    ``std::max``).  A sample outside the map gives ``0 * x[0, 0]``; a bin with no samples gives 0.
    A batch index outside ``[0, N)`` gives zeros (the runtime refuses it).

    Returns ``(y, winners)``: ``y [R, C, out_h, out_w]`` and, for every output, the ``(n, row,
    column, weight)`` of the term it took (weight 0 for an outside sample or an empty bin), the
    derivative of ``y`` in ``x``.
    """
    dtype = np.dtype(x.dtype).type
    out_h, out_w = _pair(output_size)
    n, channels, height, width = x.shape
    y = np.zeros((len(rois), channels, out_h, out_w), x.dtype)
    winners = np.zeros((len(rois), channels, out_h, out_w, 4), np.float64)
    offset = dtype(0.5 if half_pixel else 0.0)
    for r, box in enumerate(np.asarray(rois, x.dtype)):
        b = int(batch_indices[r])
        if not 0 <= b < n:
            continue
        x1, y1, x2, y2 = (dtype(v) * dtype(spatial_scale) - offset for v in box)
        roi_w, roi_h = x2 - x1, y2 - y1
        if not half_pixel:
            roi_w, roi_h = max(roi_w, dtype(1)), max(roi_h, dtype(1))
        bin_h, bin_w = roi_h / dtype(out_h), roi_w / dtype(out_w)
        grid_h = sampling_ratio or int(np.ceil(roi_h / dtype(out_h)))
        grid_w = sampling_ratio or int(np.ceil(roi_w / dtype(out_w)))
        plane = x[b]
        for i, j in itertools.product(range(out_h), range(out_w)):
            best = winner = None
            for k, m in itertools.product(range(grid_h), range(grid_w)):
                sy = y1 + dtype(i) * bin_h + dtype(k + 0.5) * bin_h / dtype(grid_h)
                sx = x1 + dtype(j) * bin_w + dtype(m + 0.5) * bin_w / dtype(grid_w)
                corners = _onnx_corners((height, width), sy, sx) or [(0, 0, dtype(0))] * 4
                value = choice = None
                for row, column, weight in corners:
                    term = weight * plane[:, row, column]
                    taken = np.ones(channels, bool) if value is None else term > value
                    value = term if value is None else np.where(taken, term, value)
                    here = np.array([b, row, column, weight], np.float64)
                    choice = np.where(taken[:, None], here, choice)
                taken = np.ones(channels, bool) if best is None else value > best
                best = value if best is None else np.where(taken, value, best)
                winner = np.where(taken[:, None], choice, winner)
            if best is not None:
                y[r, :, i, j] = best
                winners[r, :, i, j] = winner
    return y, winners


# ------------------------------------------------------------------------------------------
# torchvision's region ops, after its CPU kernels (``roi_pool_kernel.cpp``,
# ``ps_roi_pool_kernel.cpp``) and ``MultiScaleRoIAlign``.  Boxes are ``[K, 5]`` rows
# ``(batch_index, x_1, y_1, x_2, y_2)``; a batch index is truncated to an int, and one outside
# ``[0, N)`` (where the kernels read out of bounds) gives zeros and no gradient.
# ------------------------------------------------------------------------------------------


def _boxes(rois, n):
    """``(r, batch index, box)`` of each finite ``[K, 5]`` box with a batch index in ``[0, N)``."""
    for r, box in enumerate(np.asarray(rois, np.float64)):
        if not np.isnan(box).any() and 0 <= int(box[0]) < n:
            yield r, int(box[0]), box


def _integer_bins(box, spatial_scale, output_size, span_extra, tops, dtype=np.float64):
    """The bins of one box over whole elements, ``{(i, j): (h0, h1, w0, w1)}``, each edge
    clipped to ``[0, top]``: corners rounded halves away from zero, bin sizes in ``dtype``."""
    x1, y1, x2, y2 = (_round_half_away(float(v) * spatial_scale) for v in box[1:5])

    def edges(i, out, start, end, top):
        size = dtype(max(end - start + span_extra, 1)) / dtype(out)
        low = min(max(int(np.floor(dtype(i) * size)) + start, 0), top)
        return low, min(max(int(np.ceil(dtype(i + 1) * size)) + start, 0), top)

    (out_h, out_w), (top_h, top_w) = output_size, tops
    return {
        (i, j): (*edges(i, out_h, y1, y2, top_h), *edges(j, out_w, x1, x2, top_w))
        for i, j in itertools.product(range(out_h), range(out_w))
    }


def torchvision_roi_pool(x, rois, output_size, spatial_scale=1.0):
    """torchvision's ``roi_pool``: ``(y, argmax)``, ``argmax`` the flat position ``h * W + w``
    of each output's element in its plane, -1 where the bin is empty (its output is 0).

    Bin edges are computed in ``x``'s dtype (float32 for 16-bit ``x``; the kernel's ``T``); the
    maximum starts from ``-FLT_MAX`` and takes a strictly larger element, so the first maximum in
    row-major order wins and a NaN never does (a bin of nothing larger than ``-FLT_MAX`` gives
    ``-FLT_MAX`` and argmax -1).  Where the kernel's behaviour is undefined, the library's rule: a
    box with a NaN coordinate (which the kernel converts to an integer) gives NaN and argmax -1, a
    batch index outside ``[0, N)`` zeros.
    """
    out_h, out_w = _pair(output_size)
    n, channels, height, width = x.shape
    edges = np.promote_types(x.dtype, np.float32).type
    wide = np.asarray(x, np.float64)
    rois = np.asarray(rois, np.float64)
    out = np.zeros((len(rois), channels, out_h, out_w), np.float64)
    argmax = np.full(out.shape, -1, np.int64)
    out[np.isnan(rois).any(1)] = np.nan
    for r, b, box in _boxes(rois, n):
        bins = _integer_bins(box, spatial_scale, (out_h, out_w), 1, (height, width), edges)
        for (i, j), (h0, h1, w0, w1) in bins.items():
            if h1 <= h0 or w1 <= w0:
                continue
            for c in range(channels):
                best, at = -float(np.finfo(np.float32).max), -1
                for h, w in itertools.product(range(h0, h1), range(w0, w1)):
                    if wide[b, c, h, w] > best:
                        best, at = wide[b, c, h, w], h * width + w
                out[r, c, i, j], argmax[r, c, i, j] = best, at
    return out.astype(x.dtype), argmax


def torchvision_roi_pool_backward(ct, rois, argmax, x_shape):
    """torchvision's ``roi_pool`` backward: each output's cotangent added at its ``argmax``."""
    n, channels, height, width = x_shape
    grad = np.zeros((n, channels, height * width), np.float64)
    ct = np.asarray(ct, np.float64)
    for r, b, _ in _boxes(rois, n):
        for c, i, j in itertools.product(range(channels), *map(range, ct.shape[2:])):
            if argmax[r, c, i, j] >= 0:
                grad[b, c, argmax[r, c, i, j]] += ct[r, c, i, j]
    return grad.reshape(x_shape)


def _ps_bins(rois, x_shape, output_size, spatial_scale, last):
    """``((r, c, i, j), (b, input channel, rows, columns))`` of every non-empty bin of
    ``ps_roi_pool``, each edge clipped to ``[0, H - last]``."""
    out_h, out_w = _pair(output_size)
    n, channels, height, width = x_shape
    for r, b, box in _boxes(rois, n):
        bins = _integer_bins(box, spatial_scale, (out_h, out_w), 0, (height - last, width - last))
        for (i, j), (h0, h1, w0, w1) in bins.items():
            if h1 > h0 and w1 > w0:
                for c in range(channels // (out_h * out_w)):
                    plane = (c * out_h + i) * out_w + j
                    yield (r, c, i, j), (b, plane, slice(h0, h1), slice(w0, w1))


def torchvision_ps_roi_pool(x, rois, output_size, spatial_scale=1.0):
    """torchvision's ``ps_roi_pool`` forward: each bin's mean, its edges clipped to ``[0, H -
    1]`` (so the last row and column are never read); an empty bin gives 0."""
    out_h, out_w = _pair(output_size)
    wide = np.asarray(x, np.float64)
    out = np.zeros((len(rois), x.shape[1] // (out_h * out_w), out_h, out_w), np.float64)
    for at, window in _ps_bins(rois, x.shape, output_size, spatial_scale, 1):
        out[at] = wide[window].mean()
    return out.astype(x.dtype)


def torchvision_ps_roi_pool_backward(ct, rois, x_shape, output_size, spatial_scale=1.0, *, last=0):
    """The gradient in ``x`` of ``sum(torchvision_ps_roi_pool(x, ...) * ct)``: each output's
    cotangent spread evenly over its bin.

    ``last=0`` is torchvision's backward kernels, whose bins are clipped to ``[0, H]`` (not to
    ``[0, H - 1]`` as in the forward); ``last=1`` is the exact adjoint of the forward.
    """
    grad = np.zeros(x_shape, np.float64)
    ct = np.asarray(ct, np.float64)
    for at, window in _ps_bins(rois, x_shape, output_size, spatial_scale, last):
        grad[window] += ct[at] / grad[window].size
    return grad


def multi_scale_scales(feature_shapes, image_shapes):
    """``MultiScaleRoIAlign``'s spatial scales: per feature map, ``2 ** round(log2(H_l /
    H_image))`` (float32, halves to even, as ``torch.round``), ``H_image`` the largest image
    height."""
    top = max(h for h, _ in image_shapes)
    return [
        2.0 ** float(np.round(np.log2(np.float32(float(shape[-2]) / float(top)))))
        for shape in feature_shapes
    ]


def multi_scale_roi_align(
    features,
    boxes,
    image_shapes,
    output_size,
    sampling_ratio,
    canonical_scale=224,
    canonical_level=4,
):
    """``torchvision.ops.MultiScaleRoIAlign``'s forward on the maps it selects (finest first),
    per-image ``[L_i, 4]`` boxes and the images' ``(height, width)``: ``roi_align`` with
    ``aligned=False`` (a ``sampling_ratio`` of 0 or less is adaptive), each box on the level of
    the ``"torchvision"`` rule of :func:`pyramid_levels`; one map pools every box."""
    scales = multi_scale_scales([f.shape for f in features], image_shapes)
    rois = np.concatenate([np.asarray(b).reshape(-1, 4) for b in boxes])
    batch = np.repeat(np.arange(len(boxes)), [len(b) for b in boxes])
    grid = dict(sampling_ratio=max(int(sampling_ratio), 0), aligned_mode="asymmetric")
    if len(features) == 1:
        return roi_align(features[0], rois, batch, output_size, spatial_scale=scales[0], **grid)
    levels = dict(canonical_size=canonical_scale, canonical_level=canonical_level)
    return multilevel_roi_align(
        features, rois, batch, output_size, spatial_scales=scales, **grid, **levels
    )
