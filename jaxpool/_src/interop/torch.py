"""The PyTorch front end's one table: PyTorch's and torchvision's names -> their binders."""

from __future__ import annotations

from jaxpool._src.interop import torch_fractional, torch_nn, torch_vision

BINDERS = {**torch_nn.BINDERS, **torch_fractional.BINDERS, **torch_vision.BINDERS}


def register_torchax() -> None:
    raise NotImplementedError("register_torchax")
