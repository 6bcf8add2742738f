"""Attribute normalisation and output-shape rules for every pooling op.

This is the only module that validates pooling attributes and decides output shapes.  Each
public op turns its arguments into a frozen, hashable description (:class:`Window` for the
sliding-window ops, :class:`AdaptiveWindow` for the adaptive ones) and hands it, as a static
argument, to a jit-compiled core.  The batch ``N`` of a description's shape may be a symbolic
dimension of ``jax.export`` (a model exported for any batch size); every other dimension is a
Python int (:func:`input_shape`), since the windows, bins and their tables derive from them.

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
from typing import Any

import jax
import numpy as np

ROUNDING_TYPES = ("floor", "ceil", "ceil_torch")
AUTO_PADS = ("explicit", "valid", "same_upper", "same_lower")
DATA_FORMATS = ("NCX", "NXC")


# --------------------------------------------------------------------------------------------
# Small validators shared by every op.
# --------------------------------------------------------------------------------------------


def is_static(dim: Any) -> bool:
    """Whether the dimension ``dim`` is a known integer rather than a symbolic dimension of
    ``jax.export`` (whose shapes hold expressions such as ``n`` or ``2*n``)."""
    return isinstance(dim, (int, np.integer))


def static_int(name: str, value: Any) -> int:
    """Returns ``value`` as a Python int, or raises naming ``name``."""
    if jax.export.is_symbolic_dim(value):
        raise TypeError(
            f"`{name}` must be a static Python int, got the symbolic dimension {value!r}; "
            "it decides the output shape, which only the batch N of the input may leave open."
        )
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


def per_axis(
    name: str,
    value: Any,
    nd: int,
    minimum: int,
    *,
    keep: Sequence[Any] | None = None,
    scalar: bool = True,
    what: str = "spatial axis",
) -> tuple[int, ...]:
    """Normalises a static per-axis argument to ``nd`` Python ints, each at least ``minimum``.

    ``value`` is an int (the same on every axis, unless ``scalar`` is false) or a sequence of
    ``nd`` entries (NumPy arrays included); with ``keep``, an entry ``None`` takes the matching
    entry of ``keep``.  Traced values, strings, bools and floats are refused: these arguments
    decide shapes.  ``what`` names one entry's axis in the messages.
    """
    if isinstance(value, jax.core.Tracer):
        raise TypeError(
            f"`{name}` must be static Python ints, got a traced value {value!r}; it decides "
            "the output shape: mark it static (e.g. `static_argnames`) or pass a constant."
        )
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (str, bytes)) or not (scalar or isinstance(value, Sequence)):
        kind = "an int or a sequence of ints" if scalar else "a sequence of ints"
        raise TypeError(f"`{name}` must be {kind}, one per {what}, got {value!r}.")
    if isinstance(value, Sequence):
        if len(value) != nd:
            raise ValueError(
                f"`{name}` (={value!r}) must have one entry per {what} ({nd}), got {len(value)}."
            )
        entries = list(value)
    else:
        entries = [value] * nd
    values = []
    for i, entry in enumerate(entries):
        if entry is None and keep is not None:
            values.append(keep[i])
            continue
        v = static_int(name, entry)
        if v < minimum:
            least = "positive" if minimum == 1 else f"at least {minimum}"
            raise ValueError(f"`{name}` (={value!r}) must be {least} on every {what}.")
        values.append(v)
    return tuple(values)


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


def input_shape(name: str, shape: Sequence[Any], data_format: str) -> tuple[Any, ...]:
    """The shape of the pooling input ``name`` in ``data_format``'s layout, its dimensions as
    Python ints but the batch ``N``, which may stay a symbolic dimension of ``jax.export``.

    The channels and the spatial sizes decide the windows, the bins, their tables and the
    index arithmetic, all of which are static: a symbolic one is an error naming it.
    """
    rank = len(shape)
    c_axis = channel_axis(rank, data_format)
    spatial = spatial_axes(rank, data_format)
    dims = [shape[0]]
    for axis in range(1, rank):
        dim = shape[axis]
        if not is_static(dim):
            what = "channel axis" if axis == c_axis else f"spatial axis {spatial.index(axis)}"
            raise ValueError(
                f"`{name}` of shape {tuple(shape)} ({data_format}) has the symbolic dimension "
                f"{dim!r} on its {what} (axis {axis}): only the batch N may be symbolic; the "
                "channels and the spatial sizes decide the windows and must be static."
            )
        dims.append(int(dim))
    return tuple(dims)


def check_spatial(shape: tuple[Any, ...], in_spatial: tuple[int, ...]) -> None:
    """Refuses an input with an empty spatial axis."""
    if any(length < 1 for length in in_spatial):
        raise ValueError(f"`x` must have non-empty spatial axes, got shape {shape}.")


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


# A box of outputs: per spatial axis, a range ``(start, stop)`` of output positions.
Region = tuple[tuple[int, int], ...]


@dataclasses.dataclass(frozen=True)
class Window(_Geometry):
    """A sliding pooling window over the spatial axes of an input, after every rule applied.

    ``pads_begin``/``pads_end`` are the pads in force (after ``auto_pad``); windows of the last
    output position may reach past ``pads_end`` when ``rounding_type`` is ``ceil``.
    """

    data_format: str
    shape: tuple[int, ...]  # full input shape, in data_format's layout; N may be symbolic
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
        s, d, pb, length, out = (
            self.strides[i],
            self.dilations[i],
            self.pads_begin[i],
            self.in_spatial[i],
            self.out_spatial[i],
        )
        offset = k * d - pb
        lo = max(0, -(offset // s)) if offset < 0 else 0  # first o with o*s + offset >= 0
        lo = min(max(lo, 0), out)
        hi = min(out, max(0, -((offset - length) // s)))  # first o with o*s + offset >= length
        return lo, max(lo, hi)

    @property
    def pads_end_reached(self) -> tuple[int, ...]:
        """Per spatial axis, the end padding that holds every window: ``pads_end``, or more
        where rounding up added a window that reaches past it."""
        return tuple(
            max(pe, (o - 1) * s + (k - 1) * d + 1 - length - pb)
            for length, o, k, s, d, pb, pe in zip(
                self.in_spatial,
                self.out_spatial,
                self.kernel,
                self.strides,
                self.dilations,
                self.pads_begin,
                self.pads_end,
            )
        )


def _rounded_out(length: int, pb: int, pe: int, dk: int, s: int, rounding_type: str) -> int:
    span = length + pb + pe - dk
    if rounding_type == "floor":
        return span // s + 1
    out = -(-span // s) + 1
    if rounding_type == "ceil_torch" and (out - 1) * s >= length + pb:
        out -= 1
    return out


def window_counts(window: Window, rounding_type: str) -> tuple[int, ...]:
    """The number of windows along each spatial axis of ``window`` under ``rounding_type``, its
    input, kernel, strides, dilations and pads unchanged: what a format whose windows follow
    one rounding rule (ONNX's ``ceil_mode``) would compute for them."""
    return tuple(
        _rounded_out(length, pb, pe, (k - 1) * d + 1, s, rounding_type)
        for length, k, s, d, pb, pe in zip(
            window.in_spatial,
            window.kernel,
            window.strides,
            window.dilations,
            window.pads_begin,
            window.pads_end,
        )
    )


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
    shape = input_shape("x", x_shape, data_format)
    nd = len(shape) - 2
    kernel = per_axis("kernel", kernel, nd, 1)
    strides = kernel if strides is None else per_axis("strides", strides, nd, 1)
    dilations = (1,) * nd if dilations is None else per_axis("dilations", dilations, nd, 1)
    pads_begin = (0,) * nd if pads_begin is None else per_axis("pads_begin", pads_begin, nd, 0)
    pads_end = (0,) * nd if pads_end is None else per_axis("pads_end", pads_end, nd, 0)
    in_spatial = tuple(shape[a] for a in spatial_axes(len(shape), data_format))
    check_spatial(shape, in_spatial)
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
            _rounded_out(length, pads_begin[i], pads_end[i], k, strides[i], rounding_type)
        )
    return Window(
        data_format, shape, kernel, strides, dilations, pads_begin, pads_end, tuple(out_spatial)
    )


# --------------------------------------------------------------------------------------------
# Adaptive pooling (AdaptiveMaxPool-8, AdaptiveAvgPool-8); the bins themselves are in `bins`.
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AdaptiveWindow(_Geometry):
    """Adaptive pooling of ``shape`` (in ``data_format``'s layout) to ``out_spatial``."""

    data_format: str
    shape: tuple[int, ...]
    out_spatial: tuple[int, ...]

    @property
    def nd(self) -> int:
        return len(self.out_spatial)

    @property
    def is_global(self) -> bool:
        """Global pooling: every output is one bin over its whole ``(n, c)`` plane."""
        return all(o == 1 for o in self.out_spatial)


def make_adaptive_window(
    x_shape: Sequence[int], output_size: Any, data_format: str
) -> AdaptiveWindow:
    """Validates ``output_size`` (an int, or one int or ``None`` per spatial axis)."""
    data_format = choice("data_format", data_format, DATA_FORMATS)
    shape = input_shape("x", x_shape, data_format)
    in_spatial = tuple(shape[a] for a in spatial_axes(len(shape), data_format))
    check_spatial(shape, in_spatial)
    out = per_axis("output_size", output_size, len(in_spatial), 1, keep=in_spatial)
    return AdaptiveWindow(data_format, shape, out)


def sliding_window(
    x: jax.Array,
    kernel: Any,
    strides: Any,
    pads_begin: Any,
    pads_end: Any,
    dilations: Any,
    *,
    rounding_type: str,
    auto_pad: str,
    data_format: str,
) -> Window:
    """Checks the input ``x`` of a sliding-window op and describes its windows."""
    check_input("x", x.shape, x.dtype)
    return make_window(
        x.shape,
        kernel,
        strides,
        pads_begin,
        pads_end,
        dilations,
        rounding_type=rounding_type,
        auto_pad=auto_pad,
        data_format=data_format,
    )
