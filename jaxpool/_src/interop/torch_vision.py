"""torchvision.ops' region pooling, bound to jaxpool's ROI ops."""

from __future__ import annotations

from typing import Any


def roi_align(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("roi_align")


def roi_pool(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("roi_pool")


def ps_roi_align(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("ps_roi_align")


def ps_roi_pool(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("ps_roi_pool")


def multi_scale_roi_align(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("multi_scale_roi_align")


# PyTorch's name -> the function that binds it.
BINDERS = {
    "roi_align": roi_align,
    "roi_pool": roi_pool,
    "ps_roi_align": ps_roi_align,
    "ps_roi_pool": ps_roi_pool,
    "multi_scale_roi_align": multi_scale_roi_align,
}
