"""torchvision.ops' arguments as jaxpool's: feature maps checked under torchvision's names,
``boxes`` as torchvision takes them (a ``[K, 5]`` array of ``(batch_index, x_1, y_1, x_2,
y_2)`` rows, or a list of ``[L_i, 4]`` arrays, one per image) as rows and batch indices, and
``sampling_ratio <= 0`` (adaptive) as the core ops' 0."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpool._src import arguments
from jaxpool._src import roi as roi_lib
from jaxpool._src import window as window_lib

_BOXES = "a [K, 5] array of (batch_index, x_1, y_1, x_2, y_2) rows or a list of [L, 4] arrays"


def feature_map(input: Any, name: str = "input") -> jax.Array:
    """A feature map ``[N, C, H, W]`` of a floating dtype, checked under torchvision's name."""
    arguments.check_numeric(name, input)
    x = jnp.asarray(input)
    roi_lib.check_features(x, "NCX", name)
    return x


def _floating(boxes: jax.Array, name: str) -> None:
    if not jax.dtypes.issubdtype(boxes.dtype, np.floating):
        raise TypeError(f"`{name}` must have a floating dtype, got {boxes.dtype}.")


def read_boxes(boxes: Any, n: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``boxes`` as ``(rois [K, 4], batch_indices [K] int32, rows [K, 5])``.

    A list's batch indices are the positions of its arrays (static); a ``[K, 5]`` array's are
    its first column truncated to an integer, as the kernels read it.  An index outside ``[0,
    N)`` stays outside (the core ops give zeros there).
    """
    if isinstance(boxes, (list, tuple)):
        if not boxes:
            raise ValueError(f"`boxes` must be {_BOXES}, got an empty {type(boxes).__name__}.")
        arrays = []
        for i, given in enumerate(boxes):
            arguments.check_numeric(f"boxes[{i}]", given)
            b = jnp.asarray(given)
            if b.ndim != 2 or b.shape[1] != 4:
                raise ValueError(
                    f"`boxes[{i}]` (shape {tuple(b.shape)}) must have shape [L, 4]: one row "
                    f"(x_1, y_1, x_2, y_2) per box of image {i}."
                )
            _floating(b, f"boxes[{i}]")
            arrays.append(b)
        dtype = jnp.result_type(*arrays)
        rois = jnp.concatenate([b.astype(dtype) for b in arrays])
        # Built from each array's length as a shape, so that a length may be symbolic.
        positions = jnp.concatenate(
            [jnp.full((b.shape[0],), i, np.int32) for i, b in enumerate(arrays)]
        )
        rows = jnp.concatenate([positions.astype(dtype)[:, None], rois], axis=1)
        return rois, positions, rows
    if isinstance(boxes, (str, bytes)) or not hasattr(boxes, "shape"):
        raise TypeError(f"`boxes` must be {_BOXES}, got {type(boxes).__name__}.")
    arguments.check_numeric("boxes", boxes)
    rows = jnp.asarray(boxes)
    if rows.ndim != 2 or rows.shape[1] != 5:
        raise ValueError(f"`boxes` (shape {tuple(rows.shape)}) must be {_BOXES}.")
    _floating(rows, "boxes")
    index = jnp.trunc(jax.lax.stop_gradient(rows[:, 0]))
    # Clipped before the cast, so that an index far outside the batch stays outside it.
    batch = jnp.clip(index, -1, n).astype(np.int32)
    return rows[:, 1:], batch, rows


def core_sampling_ratio(sampling_ratio: Any) -> int:
    """torchvision's ``sampling_ratio``: 0 or less is adaptive, the core ops' 0."""
    return max(window_lib.static_int("sampling_ratio", sampling_ratio), 0)
