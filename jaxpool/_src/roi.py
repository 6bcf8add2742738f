"""The arguments of the ROI pooling family, checked: feature maps, boxes, batch indices and the
static attributes every region op takes.

Each check raises a ``ValueError`` or ``TypeError`` at trace time that names the argument and
echoes its value.  The dimensions that decide a program's shapes (channels, rows, columns, a
box's width) must be static; under ``jax.export``'s symbolic shapes the error names the one
that is not.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import window as window_lib

ALIGNED_MODES = ("asymmetric", "half_pixel_for_nn", "half_pixel")


def check_features(x: jax.Array, data_format: str, name: str = "x") -> tuple[int, int, int, int]:
    """Checks a feature map (the argument ``name``) of rank 4 and a floating dtype; returns its
    ``(N, C, H, W)``."""
    window_lib.choice("data_format", data_format, window_lib.DATA_FORMATS)
    if x.ndim != 4:
        layout = "[N, C, H, W]" if data_format == "NCX" else "[N, H, W, C]"
        raise ValueError(f"`{name}` must have rank 4 ({layout}), got shape {tuple(x.shape)}.")
    if not jax.dtypes.issubdtype(x.dtype, np.floating):
        raise TypeError(f"`{name}` must have a floating dtype, got {x.dtype}.")
    n, c, h, w = window_lib.to_ncx_shape(x.shape, data_format)
    static_dims(name, x.shape, {"C": c, "H": h, "W": w}, "the number of images N")
    if h < 1 or w < 1:
        raise ValueError(f"`{name}` must have non-empty spatial axes, got shape {tuple(x.shape)}.")
    return n, c, h, w


def static_dims(name: str, shape: tuple[Any, ...], dims: dict[str, Any], free: str) -> None:
    """Refuses a symbolic dimension among ``dims`` (name -> dimension) of the argument ``name``
    (of ``shape``): they decide the program's shapes, and under ``jax.export``'s symbolic
    shapes only ``free`` may be symbolic."""
    for axis, d in dims.items():
        if not isinstance(d, int):
            raise ValueError(
                f"`{name}` (shape {tuple(shape)}) has a symbolic {axis} (={d}); {axis} must be "
                f"static, and of `{name}`'s dimensions only {free} may be symbolic."
            )


def check_rois(rois: jax.Array, columns: int, layout: str) -> int:
    """Checks boxes of shape ``[R, columns]`` and a floating dtype; returns ``R``."""
    if rois.ndim == 2:
        static_dims("rois", rois.shape, {"row width": rois.shape[1]}, "the number of boxes R")
    if rois.ndim != 2 or rois.shape[1] != columns:
        raise ValueError(
            f"`rois` (shape {tuple(rois.shape)}) must have shape [R, {columns}]: one row "
            f"{layout} per region."
        )
    if not jax.dtypes.issubdtype(rois.dtype, np.floating):
        raise TypeError(f"`rois` must have a floating dtype, got {rois.dtype}.")
    return rois.shape[0]


def check_batch_indices(batch_indices: jax.Array, num_rois: int) -> None:
    """Checks integer batch indices of shape ``[R]``."""
    if batch_indices.shape != (num_rois,):
        raise ValueError(
            f"`batch_indices` (shape {tuple(batch_indices.shape)}) must have shape "
            f"({num_rois},): one batch index per row of `rois`."
        )
    if not jnp.issubdtype(batch_indices.dtype, np.integer):
        raise TypeError(f"`batch_indices` must have an integer dtype, got {batch_indices.dtype}.")


def output_hw(output_size: Any) -> tuple[int, int]:
    """``output_size`` (an int or ``(out_h, out_w)``) as two positive ints."""
    out_h, out_w = window_lib.per_axis("output_size", output_size, 2, 1, what="output axis")
    return out_h, out_w


def static_float(name: str, value: Any) -> float:
    """A static Python float, refusing traced values and non-numbers."""
    if isinstance(value, jax.core.Tracer):
        raise TypeError(f"`{name}` must be a static Python float, got a traced value {value!r}.")
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise TypeError(f"`{name}` must be a float, got {value!r}.")
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must be a float, got {value!r}.") from None
    if not math.isfinite(result):
        raise ValueError(f"`{name}` (={value!r}) must be finite.")
    return result


def sampling_ratio(value: Any) -> int:
    """``sampling_ratio`` as a static int: 0 (adaptive) or positive."""
    ratio = window_lib.static_int("sampling_ratio", value)
    if ratio < 0:
        raise ValueError(
            f"`sampling_ratio` (={value!r}) must be 0 or positive: 0 samples adaptively here "
            "(ceil of the bin size on each axis); torchvision's -1 for adaptive sampling is "
            "taken by the region ops of jaxpool.torch."
        )
    return ratio


def align_inputs(
    x: jax.typing.ArrayLike,
    rois: jax.typing.ArrayLike,
    batch_indices: jax.typing.ArrayLike,
    data_format: str,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The features, ``(x_1, y_1, x_2, y_2)`` boxes and batch indices of an axis-aligned
    ROIAlign as arrays, checked."""
    x, rois, batch_indices = jnp.asarray(x), jnp.asarray(rois), jnp.asarray(batch_indices)
    check_features(x, data_format)
    check_batch_indices(batch_indices, check_rois(rois, 4, "(x_1, y_1, x_2, y_2)"))
    return x, rois, batch_indices
