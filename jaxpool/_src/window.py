"""Attribute normalisation and output-shape rules for every pooling op.

This is the only module that validates pooling attributes and decides output shapes.  Each
public op turns its arguments into a frozen, hashable description (:class:`Window` for the
sliding-window ops, :class:`AdaptiveWindow` for the adaptive ones) and hands it, as a static
argument, to a jit-compiled core.

Output size of a sliding window along one spatial axis, with ``dk = (kernel - 1) * dilation + 1``
(the dilated kernel) and ``L`` the input size::

    floor:       out = floor((L + pads_begin + pads_end - dk) / stride) + 1
    ceil:        out = ceil((L + pads_begin + pads_end - dk) / stride) + 1
    ceil_torch:  out as for ceil, minus one if the last window would start in the end padding,
                 i.e. if (out - 1) * stride >= L + pads_begin

``auto_pad="valid"`` uses zero pads; ``"same_upper"``/``"same_lower"`` use the pads that give
``ceil(L / stride)`` outputs, ``max(0, (ceil(L / stride) - 1) * stride + dk - L)`` in total, split
floor/ceil (upper) or ceil/floor (lower) between begin and end.  The rounding rule then applies
with those pads, as in the OpenVINO runtime (the specification's ``H_out = H`` holds only for
stride 1).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

ROUNDING_TYPES = ("floor", "ceil", "ceil_torch")
AUTO_PADS = ("explicit", "valid", "same_upper", "same_lower")
DATA_FORMATS = ("NCX", "NXC")


# --------------------------------------------------------------------------------------------
# Small validators shared by every op.
# --------------------------------------------------------------------------------------------


def static_int(name: str, value: Any) -> int:
    """Returns ``value`` as a Python int, or raises naming ``name``."""
    if isinstance(value, jax.core.Tracer):
        raise TypeError(
            f"`{name}` must be a static Python int, got a traced value {value!r}; "
            "mark it static (e.g. `static_argnames`) or pass a constant."
        )
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be an int, got the bool {value!r}.")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(
            f"`{name}` must be an int, got {value!r} of type {type(value).__name__}."
        ) from None


def per_axis(name: str, value: Any, nd: int, minimum: int) -> tuple[int, ...]:
    """Normalises an int or a sequence of ``nd`` ints, each at least ``minimum``."""
    if isinstance(value, jax.core.Tracer):
        raise TypeError(
            f"`{name}` must be static Python ints, got a traced value {value!r}; "
            "mark it static (e.g. `static_argnames`) or pass a constant."
        )
    if isinstance(value, (str, bytes)):
        raise TypeError(f"`{name}` must be an int or a sequence of ints, got the string {value!r}.")
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, Sequence):
        if len(value) != nd:
            raise ValueError(
                f"`{name}` (={value!r}) must have one entry per spatial axis ({nd}), "
                f"got {len(value)}."
            )
        values = tuple(static_int(name, v) for v in value)
    else:
        values = (static_int(name, value),) * nd
    for v in values:
        if v < minimum:
            what = "positive" if minimum == 1 else f"at least {minimum}"
            raise ValueError(f"`{name}` (={value!r}) must be {what} on every spatial axis.")
    return values


def choice(name: str, value: Any, allowed: Sequence[str]) -> str:
    """Checks that ``value`` is one of the ``allowed`` strings (case-sensitive)."""
    if not isinstance(value, str):
        raise TypeError(f"`{name}` must be a string, one of {list(allowed)}, got {value!r}.")
    if value not in allowed:
        raise ValueError(f"`{name}` (={value!r}) must be one of {list(allowed)}.")
    return value


def check_input(name: str, shape: Sequence[int], dtype: Any) -> None:
    """Checks the rank (3, 4 or 5) and the dtype of a pooling input."""
    if len(shape) not in (3, 4, 5):
        raise ValueError(
            f"`{name}` must have rank 3, 4 or 5 (batch, channels and 1 to 3 spatial axes), "
            f"got shape {tuple(shape)}."
        )
    dtype = np.dtype(dtype)
    if jax.dtypes.issubdtype(dtype, np.floating):  # bfloat16 included
        return
    if np.issubdtype(dtype, np.integer):
        return
    raise TypeError(f"`{name}` must have a floating or integer dtype, got {dtype}.")


def spatial_axes(rank: int, data_format: str) -> tuple[int, ...]:
    """Positions of the spatial axes of a rank-``rank`` array in ``data_format``."""
    if data_format == "NCX":
        return tuple(range(2, rank))
    return tuple(range(1, rank - 1))


def channel_axis(rank: int, data_format: str) -> int:
    return 1 if data_format == "NCX" else rank - 1


def to_ncx_shape(shape: Sequence[int], data_format: str) -> tuple[int, ...]:
    """The shape of the logical NCX view of an array of ``shape`` in ``data_format``."""
    shape = tuple(shape)
    if data_format == "NCX":
        return shape
    return (shape[0], shape[-1], *shape[1:-1])


# --------------------------------------------------------------------------------------------
# Sliding windows (MaxPool, AvgPool).
# --------------------------------------------------------------------------------------------


class _Geometry:
    """Shapes shared by every pooling description: ``data_format``, the input ``shape`` in that
    layout and ``out_spatial``, the output's spatial size."""

    data_format: str
    shape: tuple[int, ...]
    out_spatial: tuple[int, ...]

    @property
    def spatial_axes(self) -> tuple[int, ...]:
        return spatial_axes(len(self.shape), self.data_format)

    @property
    def in_spatial(self) -> tuple[int, ...]:
        return tuple(self.shape[a] for a in self.spatial_axes)

    @property
    def ncx_shape(self) -> tuple[int, ...]:
        return to_ncx_shape(self.shape, self.data_format)

    @property
    def out_shape(self) -> tuple[int, ...]:
        shape = list(self.shape)
        for a, o in zip(self.spatial_axes, self.out_spatial):
            shape[a] = o
        return tuple(shape)


@dataclasses.dataclass(frozen=True)
class Window(_Geometry):
    """A sliding pooling window over the spatial axes of an input, after every rule applied.

    ``pads_begin``/``pads_end`` are the pads in force (after ``auto_pad``); windows of the last
    output position may reach past ``pads_end`` when ``rounding_type`` is ``ceil``.
    """

    data_format: str
    shape: tuple[int, ...]  # full input shape, in data_format's layout
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    out_spatial: tuple[int, ...]

    @property
    def nd(self) -> int:
        return len(self.kernel)

    def input_range(self, i: int, k: int) -> tuple[int, int]:
        """Output positions ``[lo, hi)`` along axis ``i`` whose ``k``-th tap lies in the input.

        Tap ``k`` of output ``o`` reads input position ``o * stride + k * dilation - pads_begin``.
        """
        s, d, pb, length, out = (self.strides[i], self.dilations[i], self.pads_begin[i],
                                 self.in_spatial[i], self.out_spatial[i])
        offset = k * d - pb
        lo = max(0, -(offset // s)) if offset < 0 else 0  # first o with o*s + offset >= 0
        lo = min(max(lo, 0), out)
        hi = min(out, max(0, -((offset - length) // s)))  # first o with o*s + offset >= length
        return lo, max(lo, hi)


def _rounded_out(length: int, pb: int, pe: int, dk: int, s: int, rounding_type: str) -> int:
    span = length + pb + pe - dk
    if rounding_type == "floor":
        return span // s + 1
    out = -(-span // s) + 1
    if rounding_type == "ceil_torch" and (out - 1) * s >= length + pb:
        out -= 1
    return out


def make_window(
    x_shape: Sequence[int],
    kernel: Any,
    strides: Any = None,
    pads_begin: Any = None,
    pads_end: Any = None,
    dilations: Any = None,
    *,
    rounding_type: str = "floor",
    auto_pad: str = "explicit",
    data_format: str = "NCX",
) -> Window:
    """Validates sliding-window attributes and applies the output-shape rules."""
    data_format = choice("data_format", data_format, DATA_FORMATS)
    rounding_type = choice("rounding_type", rounding_type, ROUNDING_TYPES)
    auto_pad = choice("auto_pad", auto_pad, AUTO_PADS)
    shape = tuple(int(d) for d in x_shape)
    nd = len(shape) - 2
    kernel = per_axis("kernel", kernel, nd, 1)
    strides = kernel if strides is None else per_axis("strides", strides, nd, 1)
    dilations = (1,) * nd if dilations is None else per_axis("dilations", dilations, nd, 1)
    pads_begin = (0,) * nd if pads_begin is None else per_axis("pads_begin", pads_begin, nd, 0)
    pads_end = (0,) * nd if pads_end is None else per_axis("pads_end", pads_end, nd, 0)
    in_spatial = tuple(shape[a] for a in spatial_axes(len(shape), data_format))
    for length in in_spatial:
        if length < 1:
            raise ValueError(f"`x` must have non-empty spatial axes, got shape {shape}.")
    dk = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilations))

    if auto_pad == "valid":
        pads_begin = pads_end = (0,) * nd
    elif auto_pad in ("same_upper", "same_lower"):
        pb, pe = [], []
        for length, k, s in zip(in_spatial, dk, strides):
            total = max(0, (-(-length // s) - 1) * s + k - length)
            small, big = total // 2, total - total // 2
            pb.append(small if auto_pad == "same_upper" else big)
            pe.append(big if auto_pad == "same_upper" else small)
        pads_begin, pads_end = tuple(pb), tuple(pe)

    out_spatial = []
    for i, (length, k) in enumerate(zip(in_spatial, dk)):
        padded = length + pads_begin[i] + pads_end[i]
        if k > padded:
            raise ValueError(
                f"`kernel` (={kernel}) with `dilations` (={dilations}) spans {k} on spatial "
                f"axis {i}, more than the padded input ({length} + pads {pads_begin[i]} + "
                f"{pads_end[i]} = {padded}) of `x` of shape {shape}."
            )
        out_spatial.append(
            _rounded_out(length, pads_begin[i], pads_end[i], k, strides[i], rounding_type))
    return Window(data_format, shape, kernel, strides, dilations, pads_begin, pads_end,
                  tuple(out_spatial))


# --------------------------------------------------------------------------------------------
# Adaptive bins (AdaptiveMaxPool-8, AdaptiveAvgPool-8).
# --------------------------------------------------------------------------------------------


def adaptive_bins(length: int, out: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Bin ``i`` of ``out`` over ``length`` covers ``[floor(i*L/O), ceil((i+1)*L/O))``."""
    starts = tuple((i * length) // out for i in range(out))
    ends = tuple(-(-((i + 1) * length) // out) for i in range(out))
    return starts, ends


class BinRun(NamedTuple):
    """Outputs ``[out_start, out_stop)`` whose bins all hold ``width`` elements, bin ``o``
    starting at ``in_start + (o - out_start) * stride``: a regular strided window."""

    out_start: int
    out_stop: int
    in_start: int
    stride: int
    width: int


def adaptive_runs(length: int, out: int) -> tuple[BinRun, ...]:
    """The bins of ``out`` over ``length`` split, in order, into maximal :class:`BinRun` s
    (a positive stride; a run of one bin has stride 1).

    ``floor(i * L / O)`` advances by ``floor(L / O)`` or one more, so when ``O`` divides ``L``
    there is one run, and a few otherwise (50 -> 16: two runs of 8 bins of 4, stride 3).
    """
    starts, ends = adaptive_bins(length, out)
    runs = []
    o = 0
    while o < out:
        width = ends[o] - starts[o]
        stride = starts[o + 1] - starts[o] if o + 1 < out else 1
        stop = o + 1
        if stride > 0:
            while (stop < out and ends[stop] - starts[stop] == width
                   and starts[stop] - starts[stop - 1] == stride):
                stop += 1
        runs.append(BinRun(o, stop, starts[o], stride if stop > o + 1 else 1, width))
        o = stop
    return tuple(runs)


@dataclasses.dataclass(frozen=True)
class AdaptiveWindow(_Geometry):
    """Adaptive pooling of ``shape`` (in ``data_format``'s layout) to ``out_spatial``."""

    data_format: str
    shape: tuple[int, ...]
    out_spatial: tuple[int, ...]

    @property
    def nd(self) -> int:
        return len(self.out_spatial)

    def bins(self, i: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``(starts, ends)`` of the bins along spatial axis ``i``."""
        return adaptive_bins(self.in_spatial[i], self.out_spatial[i])

    def max_bin(self, i: int) -> int:
        """The widest bin along spatial axis ``i``."""
        starts, ends = self.bins(i)
        return max(e - s for s, e in zip(starts, ends))

    def runs(self, i: int) -> tuple[BinRun, ...]:
        """The bins along spatial axis ``i`` as regular strided runs."""
        return adaptive_runs(self.in_spatial[i], self.out_spatial[i])


def make_adaptive_window(
    x_shape: Sequence[int], output_size: Any, data_format: str
) -> AdaptiveWindow:
    """Validates ``output_size`` (an int, or one int or ``None`` per spatial axis)."""
    data_format = choice("data_format", data_format, DATA_FORMATS)
    shape = tuple(int(d) for d in x_shape)
    nd = len(shape) - 2
    in_spatial = tuple(shape[a] for a in spatial_axes(len(shape), data_format))
    for length in in_spatial:
        if length < 1:
            raise ValueError(f"`x` must have non-empty spatial axes, got shape {shape}.")
    if isinstance(output_size, jax.core.Tracer):
        raise TypeError(
            f"`output_size` must be static Python ints, got a traced value {output_size!r}; "
            "it decides the output shape."
        )
    if isinstance(output_size, np.ndarray):
        output_size = output_size.tolist()
    if isinstance(output_size, (str, bytes)):
        raise TypeError(f"`output_size` must be an int or a sequence, got {output_size!r}.")
    if isinstance(output_size, Sequence):
        if len(output_size) != nd:
            raise ValueError(
                f"`output_size` (={output_size!r}) must have one entry per spatial axis ({nd}), "
                f"got {len(output_size)}."
            )
        entries = list(output_size)
    else:
        entries = [output_size] * nd
    out = []
    for length, o in zip(in_spatial, entries):
        if o is None:
            out.append(length)
            continue
        o = static_int("output_size", o)
        if o < 1:
            raise ValueError(f"`output_size` (={output_size!r}) entries must be at least 1.")
        out.append(o)
    return AdaptiveWindow(data_format, shape, tuple(out))
