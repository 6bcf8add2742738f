"""jaxpool: pooling operators for JAX (OpenVINO's and ONNX's pools and the ROI family), exact
and differentiable."""

from jaxpool import openvino as openvino
from jaxpool._src.adaptive_avg_pool import adaptive_avg_pool as adaptive_avg_pool
from jaxpool._src.adaptive_max_pool import adaptive_max_pool as adaptive_max_pool
from jaxpool._src.avg_pool import avg_pool as avg_pool
from jaxpool._src.deformable_psroi_pool import deformable_psroi_pool as deformable_psroi_pool
from jaxpool._src.fractional_max_pool import fractional_max_pool as fractional_max_pool
from jaxpool._src.lp_pool import lp_pool as lp_pool
from jaxpool._src.max_pool import max_pool as max_pool
from jaxpool._src.min_pool import min_pool as min_pool
from jaxpool._src.multilevel_roi_align import multilevel_roi_align as multilevel_roi_align
from jaxpool._src.psroi_align import psroi_align as psroi_align
from jaxpool._src.psroi_pool import psroi_pool as psroi_pool
from jaxpool._src.roi_align import roi_align as roi_align
from jaxpool._src.roi_align_rotated import roi_align_rotated as roi_align_rotated
from jaxpool._src.roi_pool import roi_pool as roi_pool
from jaxpool._src.unpool import max_unpool as max_unpool

__version__ = "0.1.0"

__all__ = [
    "adaptive_avg_pool",
    "adaptive_max_pool",
    "avg_pool",
    "deformable_psroi_pool",
    "fractional_max_pool",
    "lp_pool",
    "max_pool",
    "max_unpool",
    "min_pool",
    "multilevel_roi_align",
    "openvino",
    "psroi_align",
    "psroi_pool",
    "roi_align",
    "roi_align_rotated",
    "roi_pool",
]
