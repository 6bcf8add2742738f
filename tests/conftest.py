"""Test configuration: several CPU devices, strict NumPy promotion rules, and the fixtures.

``program`` runs a test once with every op on its portable program (what GPUs and TPUs run)
and once on its CPU program (where the op has one), on any backend, through the dispatch
table.  ``class_program`` does the same for every test of a class at once: pytest groups the
class's tests by program, so JAX's caches, which ``dispatch.force`` clears on entry and exit,
serve the whole group; the op modules' runtime, PyTorch and gradient checks, where the
programs differ, are such classes (``@pytest.mark.usefixtures("class_program")``).
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import pytest  # noqa: E402

from jaxpool._src import dispatch  # noqa: E402

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture(params=dispatch.PROGRAMS)
def program(request):
    """Every op runs its ``"portable"`` program, then its ``"cpu"`` program, in the test."""
    with dispatch.force(request.param):
        yield request.param


@pytest.fixture(scope="class", params=dispatch.PROGRAMS)
def class_program(request):
    """:func:`program` for every test of a class: the portable programs, then the CPU ones."""
    assert request.cls is not None, "class_program is for test classes; tests use program"
    with dispatch.force(request.param):
        yield request.param


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
