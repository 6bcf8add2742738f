"""jaxpool: the OpenVINO pooling operators in JAX, exact and differentiable."""

from jaxpool import openvino as openvino
from jaxpool._src.adaptive_avg_pool import adaptive_avg_pool as adaptive_avg_pool
from jaxpool._src.adaptive_max_pool import adaptive_max_pool as adaptive_max_pool
from jaxpool._src.avg_pool import avg_pool as avg_pool
from jaxpool._src.max_pool import max_pool as max_pool
from jaxpool._src.unpool import max_unpool as max_unpool

__version__ = "0.1.0"

__all__ = [
    "adaptive_avg_pool",
    "adaptive_max_pool",
    "avg_pool",
    "max_pool",
    "max_unpool",
    "openvino",
]
