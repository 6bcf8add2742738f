"""torch.nn.functional's pooling functions, bound to jaxpool's ops."""

from __future__ import annotations

from typing import Any


def max_pool1d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("max_pool1d")


def max_pool2d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("max_pool2d")


def max_pool3d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("max_pool3d")


def avg_pool1d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("avg_pool1d")


def avg_pool2d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("avg_pool2d")


def avg_pool3d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("avg_pool3d")


def lp_pool1d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("lp_pool1d")


def lp_pool2d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("lp_pool2d")


def lp_pool3d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("lp_pool3d")


def adaptive_max_pool1d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("adaptive_max_pool1d")


def adaptive_max_pool2d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("adaptive_max_pool2d")


def adaptive_max_pool3d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("adaptive_max_pool3d")


def adaptive_avg_pool1d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("adaptive_avg_pool1d")


def adaptive_avg_pool2d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("adaptive_avg_pool2d")


def adaptive_avg_pool3d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("adaptive_avg_pool3d")


def max_unpool1d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("max_unpool1d")


def max_unpool2d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("max_unpool2d")


def max_unpool3d(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("max_unpool3d")


# PyTorch's name -> the function that binds it.
BINDERS = {
    "max_pool1d": max_pool1d,
    "max_pool2d": max_pool2d,
    "max_pool3d": max_pool3d,
    "avg_pool1d": avg_pool1d,
    "avg_pool2d": avg_pool2d,
    "avg_pool3d": avg_pool3d,
    "lp_pool1d": lp_pool1d,
    "lp_pool2d": lp_pool2d,
    "lp_pool3d": lp_pool3d,
    "adaptive_max_pool1d": adaptive_max_pool1d,
    "adaptive_max_pool2d": adaptive_max_pool2d,
    "adaptive_max_pool3d": adaptive_max_pool3d,
    "adaptive_avg_pool1d": adaptive_avg_pool1d,
    "adaptive_avg_pool2d": adaptive_avg_pool2d,
    "adaptive_avg_pool3d": adaptive_avg_pool3d,
    "max_unpool1d": max_unpool1d,
    "max_unpool2d": max_unpool2d,
    "max_unpool3d": max_unpool3d,
}
