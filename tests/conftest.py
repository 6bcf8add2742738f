"""Test configuration: several CPU devices and strict NumPy promotion rules."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture(params=["eager", "jit"])
def jit_mode(request):
    """Calls a function eagerly or under ``jax.jit`` (attributes bound by closure)."""

    def apply(fn, *args):
        if request.param == "jit":
            return jax.jit(fn)(*args)
        return fn(*args)

    return apply


@pytest.fixture
def x64():
    """Runs a test with 64-bit types enabled."""
    with jax.enable_x64(True):
        yield
