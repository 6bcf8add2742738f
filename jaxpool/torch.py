"""PyTorch's and torchvision's pooling, drop-in, in JAX.

The functions of ``torch.nn.functional`` and ``torchvision.ops`` that pool, with PyTorch's
names, signatures, defaults and semantics, over JAX arrays in PyTorch's layouts (NCX, batched
or unbatched as PyTorch accepts them).  Each is a short binder over jaxpool's ops: see
``docs/porting/pytorch.md`` for where PyTorch's rules differ from the native functions'.
:func:`register_torchax` makes torchax run them for the matching ``aten`` and ``torchvision``
operators.
"""

from jaxpool._src.interop.torch import register_torchax as register_torchax
from jaxpool._src.interop.torch_fractional import fractional_max_pool2d as fractional_max_pool2d
from jaxpool._src.interop.torch_fractional import fractional_max_pool3d as fractional_max_pool3d
from jaxpool._src.interop.torch_nn import adaptive_avg_pool1d as adaptive_avg_pool1d
from jaxpool._src.interop.torch_nn import adaptive_avg_pool2d as adaptive_avg_pool2d
from jaxpool._src.interop.torch_nn import adaptive_avg_pool3d as adaptive_avg_pool3d
from jaxpool._src.interop.torch_nn import adaptive_max_pool1d as adaptive_max_pool1d
from jaxpool._src.interop.torch_nn import adaptive_max_pool2d as adaptive_max_pool2d
from jaxpool._src.interop.torch_nn import adaptive_max_pool3d as adaptive_max_pool3d
from jaxpool._src.interop.torch_nn import avg_pool1d as avg_pool1d
from jaxpool._src.interop.torch_nn import avg_pool2d as avg_pool2d
from jaxpool._src.interop.torch_nn import avg_pool3d as avg_pool3d
from jaxpool._src.interop.torch_nn import lp_pool1d as lp_pool1d
from jaxpool._src.interop.torch_nn import lp_pool2d as lp_pool2d
from jaxpool._src.interop.torch_nn import lp_pool3d as lp_pool3d
from jaxpool._src.interop.torch_nn import max_pool1d as max_pool1d
from jaxpool._src.interop.torch_nn import max_pool2d as max_pool2d
from jaxpool._src.interop.torch_nn import max_pool3d as max_pool3d
from jaxpool._src.interop.torch_nn import max_unpool1d as max_unpool1d
from jaxpool._src.interop.torch_nn import max_unpool2d as max_unpool2d
from jaxpool._src.interop.torch_nn import max_unpool3d as max_unpool3d
from jaxpool._src.interop.torch_vision import multi_scale_roi_align as multi_scale_roi_align
from jaxpool._src.interop.torch_vision import ps_roi_align as ps_roi_align
from jaxpool._src.interop.torch_vision import ps_roi_pool as ps_roi_pool
from jaxpool._src.interop.torch_vision import roi_align as roi_align
from jaxpool._src.interop.torch_vision import roi_pool as roi_pool

__all__ = [
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    "fractional_max_pool2d",
    "fractional_max_pool3d",
    "roi_align",
    "roi_pool",
    "ps_roi_align",
    "ps_roi_pool",
    "multi_scale_roi_align",
    "register_torchax",
]
