"""torch.nn.functional's fractional max pooling, bound to jaxpool.fractional_max_pool."""

from __future__ import annotations

from typing import Any


def fractional_max_pool2d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("fractional_max_pool2d")


def fractional_max_pool3d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("fractional_max_pool3d")


# PyTorch's name -> the function that binds it.
BINDERS = {
    "fractional_max_pool2d": fractional_max_pool2d,
    "fractional_max_pool3d": fractional_max_pool3d,
}
