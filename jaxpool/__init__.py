"""jaxpool: the OpenVINO pooling operators in JAX, exact and differentiable."""

from jaxpool._src.max_pool import max_pool as max_pool

__version__ = "0.1.0"

__all__ = [
    "max_pool",
]
