"""A small NumPy reference of every jaxpool op, written for clarity rather than speed.

Inputs and outputs are NumPy arrays in NCX layout.  Each op loops over the output positions of
one spatial grid and handles all ``(n, c)`` planes at once; within a window the elements are
listed in row-major kernel order, so "first" always means first in that order.  Values are
computed in float64 (integers in int64) and cast back to the input dtype at the end.

Attributes are checked only as far as the shape rules need: :class:`Invalid` is raised for a
configuration whose dilated kernel exceeds the padded input.

Windows and adaptive bins are computed here, from the specification's formulas; nothing here
imports jaxpool, so that the tests never check the library against itself.
"""

from __future__ import annotations

import itertools
import math

import jax
import numpy as np


def assert_sums_equal(actual, expected):
    """Compares gradients that sum cotangents with PyTorch's CPU kernels, which add them in
    output order.

    Bit-exact on a CPU, where jaxpool adds in output order too; elsewhere to rounding, since a
    GPU's scatter-add (the adaptive max pool's backward) adds in no fixed order.
    """
    if jax.default_backend() == "cpu":
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


class Invalid(ValueError):
    """The attributes describe no valid pooling."""


def _per_axis(value, nd, default):
    if value is None:
        return (default,) * nd
    if np.ndim(value) == 0:
        return (int(value),) * nd
    return tuple(int(v) for v in value)


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
    pads_begin = _per_axis(pads_begin, nd, 0)
    pads_end = _per_axis(pads_end, nd, 0)
    dk = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=False)]
    if auto_pad == "valid":
        pads_begin = pads_end = (0,) * nd
    elif auto_pad in ("same_upper", "same_lower"):
        pb, pe = [], []
        for length, k, s in zip(in_spatial, dk, strides, strict=False):
            out = math.ceil(length / s)
            total = max(0, (out - 1) * s + k - length)
            small, big = total // 2, total - total // 2
            pb.append(small if auto_pad == "same_upper" else big)
            pe.append(big if auto_pad == "same_upper" else small)
        pads_begin, pads_end = tuple(pb), tuple(pe)
    out_spatial = []
    for length, k, s, pb, pe in zip(in_spatial, dk, strides, pads_begin, pads_end, strict=False):
        span = length + pb + pe - k
        if span < 0:
            raise Invalid(f"dilated kernel {k} exceeds the padded input {length + pb + pe}")
        if rounding_type == "floor":
            out = span // s + 1
        else:
            out = math.ceil(span / s) + 1
            if rounding_type == "ceil_torch" and (out - 1) * s >= length + pb:
                out -= 1
        out_spatial.append(out)
    return kernel, strides, dilations, pads_begin, pads_end, tuple(out_spatial)


def _window_positions(o, kernel, strides, dilations, pads_begin, in_spatial):
    """Spatial coordinates of the input elements of window ``o``, in row-major kernel order."""
    positions = []
    for k in itertools.product(*(range(n) for n in kernel)):
        p = tuple(
            oi * s + ki * d - pb
            for oi, ki, s, d, pb in zip(o, k, strides, dilations, pads_begin, strict=False)
        )
        if all(0 <= pi < length for pi, length in zip(p, in_spatial, strict=False)):
            positions.append(p)
    return positions


def _flat(positions, in_spatial):
    return np.array([np.ravel_multi_index(p, in_spatial) for p in positions], np.int64)


def _lowest(dtype):
    if np.issubdtype(dtype, np.integer):
        return np.iinfo(dtype).min
    return -np.inf


def _argmax_first(values):
    """Index along the last axis of the maximum: the first NaN, else the first maximum."""
    is_nan = np.isnan(values) if values.dtype.kind == "f" else np.zeros(values.shape, bool)
    return np.where(is_nan.any(-1), np.argmax(is_nan, -1), np.argmax(values, -1))


def _wide(x):
    return x.astype(np.int64) if np.issubdtype(x.dtype, np.integer) else x.astype(np.float64)


def _index(n_c_spatial, ncx_shape, axis):
    """Full NCX row-major offset of ``(n, c, flat spatial)`` modulo ``prod(shape[axis:])``."""
    n, c, p = n_c_spatial
    size = math.prod(ncx_shape[2:])
    full = (n * ncx_shape[1] + c) * size + p
    return full % math.prod(ncx_shape[axis:])


def _max_over(x, out_spatial, window_of, axis):
    """Max pooling given ``window_of(o)``, the list of input coordinates of window ``o``.

    The maximum is compared in a wide type and taken from ``x`` itself, so that it keeps its
    bits (the sign of a zero, the payload of a NaN)."""
    batch, channels, *in_spatial = x.shape
    planes = x.reshape(batch, channels, -1)
    wide = _wide(planes)
    y = np.full((batch, channels, *out_spatial), _lowest(x.dtype), x.dtype)
    where = np.zeros((batch, channels, *out_spatial), np.int64)
    for o in itertools.product(*(range(n) for n in out_spatial)):
        flat = _flat(window_of(o), in_spatial)
        if flat.size == 0:
            continue  # no input element: padding value, index of the plane's first element
        first = _argmax_first(wide[:, :, flat])
        y[(slice(None), slice(None), *o)] = np.take_along_axis(
            planes[:, :, flat], first[..., None], -1
        )[..., 0]
        where[(slice(None), slice(None), *o)] = flat[first]
    n = np.arange(batch).reshape(-1, 1, *([1] * len(out_spatial)))
    c = np.arange(channels).reshape(1, -1, *([1] * len(out_spatial)))
    indices = _index((n, c, where), x.shape, axis)
    return y, indices


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
    in_spatial = x.shape[2:]
    kernel, strides, dilations, pads_begin, _, out_spatial = sliding_geometry(
        in_spatial, kernel, strides, pads_begin, pads_end, dilations, rounding_type, auto_pad
    )
    axis %= x.ndim
    return _max_over(
        x,
        out_spatial,
        lambda o: _window_positions(o, kernel, strides, dilations, pads_begin, in_spatial),
        axis,
    )


def _round_like(values, dtype):
    if np.issubdtype(dtype, np.integer):
        return np.round(values).astype(dtype)  # half to even
    return values.astype(dtype)


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
    batch, channels, *in_spatial = x.shape
    kernel, strides, dilations, pads_begin, pads_end, out_spatial = sliding_geometry(
        in_spatial, kernel, strides, pads_begin, pads_end, None, rounding_type, auto_pad
    )
    padded = any(pads_begin) or any(pads_end)
    planes = _wide(x).astype(np.float64).reshape(batch, channels, -1)
    y = np.zeros((batch, channels, *out_spatial), np.float64)
    for o in itertools.product(*(range(n) for n in out_spatial)):
        flat = _flat(
            _window_positions(o, kernel, strides, dilations, pads_begin, in_spatial), in_spatial
        )
        if exclude_pad or not padded:
            divisor = flat.size
        else:
            divisor = math.prod(kernel)
        if divisor == 0:
            continue
        with np.errstate(invalid="ignore"):  # inf - inf is NaN, as in the op
            y[(slice(None), slice(None), *o)] = planes[:, :, flat].sum(-1) / divisor
    return _round_like(y, x.dtype)


def adaptive_bins(length, out):
    """Bin ``i`` covers ``[floor(i * L / O), ceil((i + 1) * L / O))``."""
    return [(i * length // out, -(-(i + 1) * length // out)) for i in range(out)]


def _output_size(in_spatial, output_size):
    if np.ndim(output_size) == 0:
        output_size = (output_size,) * len(in_spatial)
    return tuple(
        length if o is None else int(o) for length, o in zip(in_spatial, output_size, strict=True)
    )


def _bin_positions(o, bins):
    ranges = [range(*bins[i][oi]) for i, oi in enumerate(o)]
    return list(itertools.product(*ranges))


def adaptive_max_pool(x, output_size):
    """AdaptiveMaxPool-8 on NCX ``x``: ``(y, indices)`` with spatial (``axis=2``) indices."""
    x = np.asarray(x)
    in_spatial = x.shape[2:]
    out_spatial = _output_size(in_spatial, output_size)
    bins = [adaptive_bins(length, o) for length, o in zip(in_spatial, out_spatial, strict=False)]
    return _max_over(x, out_spatial, lambda o: _bin_positions(o, bins), 2)


def adaptive_avg_pool(x, output_size):
    """AdaptiveAvgPool-8 on NCX ``x``: the mean of each bin."""
    x = np.asarray(x)
    batch, channels, *in_spatial = x.shape
    out_spatial = _output_size(in_spatial, output_size)
    bins = [adaptive_bins(length, o) for length, o in zip(in_spatial, out_spatial, strict=False)]
    planes = _wide(x).astype(np.float64).reshape(batch, channels, -1)
    y = np.zeros((batch, channels, *out_spatial), np.float64)
    for o in itertools.product(*(range(n) for n in out_spatial)):
        flat = _flat(_bin_positions(o, bins), in_spatial)
        with np.errstate(invalid="ignore"):
            y[(slice(None), slice(None), *o)] = planes[:, :, flat].mean(-1)
    return _round_like(y, x.dtype)


def max_unpool(y, indices, output_shape, *, axis=0):
    """Scatter-add of NCX ``y`` to the positions ``indices`` (taken with ``axis``) of a zero
    tensor of NCX ``output_shape``."""
    y = np.asarray(y)
    indices = np.asarray(indices).astype(np.int64)
    axis %= len(output_shape)
    batch, channels = output_shape[:2]
    size = math.prod(output_shape[2:])
    n = np.arange(y.shape[0]).reshape(-1, *([1] * (y.ndim - 1)))
    c = np.arange(y.shape[1]).reshape(1, -1, *([1] * (y.ndim - 2)))
    if axis == 0:
        full = indices
    elif axis == 1:
        full = n * channels * size + indices
    else:
        full = (n * channels + c) * size + indices
    out = np.zeros(math.prod(output_shape), np.float64 if y.dtype.kind == "f" else np.int64)
    with np.errstate(invalid="ignore"):
        np.add.at(out, np.broadcast_to(full, y.shape).ravel(), _wide(y).ravel())
    return out.reshape(output_shape).astype(y.dtype)


def _ps_roi_bilinear(plane, y, x):
    """torchvision's ``bilinear_interpolate`` on one ``[H, W]`` plane (float64)."""
    height, width = plane.shape
    if y < -1.0 or y > height or x < -1.0 or x > width:
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    y_low, x_low = int(y), int(x)
    if y_low >= height - 1:
        y_high = y_low = height - 1
        y = float(y_low)
    else:
        y_high = y_low + 1
    if x_low >= width - 1:
        x_high = x_low = width - 1
        x = float(x_low)
    else:
        x_high = x_low + 1
    ly, lx = y - y_low, x - x_low
    hy, hx = 1.0 - ly, 1.0 - lx
    return (
        hy * hx * plane[y_low, x_low]
        + hy * lx * plane[y_low, x_high]
        + ly * hx * plane[y_high, x_low]
        + ly * lx * plane[y_high, x_high]
    )


def ps_roi_align(
    x,
    rois,
    batch_indices,
    output_size,
    *,
    spatial_scale=1.0,
    sampling_ratio=0,
    aligned_mode="half_pixel_for_nn",
):
    """torchvision's ``ps_roi_align`` (its CPU kernel) for NCX ``x`` and ``(x_1, y_1, x_2, y_2)``
    boxes with their batch indices apart.

    ``aligned_mode="half_pixel_for_nn"`` is torchvision's rule (``x * spatial_scale - 0.5``, no
    bound on the box's size); ``"asymmetric"`` (``x * spatial_scale``, width and height at least
    1) and ``"half_pixel"`` (``(x + 0.5) * spatial_scale - 0.5``) are ROIAlign's other two.
    Where the kernel's behaviour is undefined or NaN, the library's rule: a batch index outside
    ``[0, N)`` gives zeros, and a bin with no samples (a count ``ceil(bin size) <= 0``) gives 0
    where the kernel divides 0 by 0.
    """
    out_h, out_w = output_size
    n, channels, _, _ = x.shape
    dim = channels // (out_h * out_w)
    wide = np.asarray(x, np.float64)
    out = np.zeros((len(rois), dim, out_h, out_w), np.float64)
    offset_src = 0.5 if aligned_mode == "half_pixel" else 0.0
    offset_dst = 0.0 if aligned_mode == "asymmetric" else -0.5
    for r, box in enumerate(np.asarray(rois, np.float64)):
        b = int(batch_indices[r])
        if not 0 <= b < n:
            continue
        start_w, start_h, end_w, end_h = (
            (v + offset_src) * spatial_scale + offset_dst for v in box
        )
        roi_width, roi_height = end_w - start_w, end_h - start_h
        if aligned_mode == "asymmetric":
            roi_width, roi_height = max(roi_width, 1.0), max(roi_height, 1.0)
        bin_h, bin_w = roi_height / out_h, roi_width / out_w
        grid_h = sampling_ratio if sampling_ratio > 0 else math.ceil(roi_height / out_h)
        grid_w = sampling_ratio if sampling_ratio > 0 else math.ceil(roi_width / out_w)
        if grid_h <= 0 or grid_w <= 0:
            continue
        c_in = 0
        for c, i, j in itertools.product(range(dim), range(out_h), range(out_w)):
            h_start = i * bin_h + start_h
            w_start = j * bin_w + start_w
            total = 0.0
            for iy, ix in itertools.product(range(grid_h), range(grid_w)):
                y = h_start + (iy + 0.5) * bin_h / grid_h
                x_ = w_start + (ix + 0.5) * bin_w / grid_w
                total += _ps_roi_bilinear(wide[b, c_in], y, x_)
            out[r, c, i, j] = total / (grid_h * grid_w)
            c_in += 1
    return out.astype(x.dtype)
