"""Test configuration: several CPU devices, strict NumPy promotion rules, and the fixtures.

``program`` runs a test once with every op on its portable program (what GPUs and TPUs run)
and once on its CPU program (where the op has one), on any backend, through the dispatch
table.  ``class_program`` does the same for every test of a class at once: pytest groups the
class's tests by program, so JAX's caches, which ``dispatch.force`` clears on entry and exit,
serve the whole group; the op modules' runtime, PyTorch and gradient checks, where the
programs differ, are such classes (``@pytest.mark.usefixtures("class_program")``).
"""

import os
import pathlib
import tempfile

# Eight CPU devices for the sharding tests, and LLVM's optimization level 0 for XLA's CPU code:
# compiling is most of a test's time, and without fast math (XLA's default) the floating point
# is the same at every level.  `.ci/run` runs the serving and whole-program tiers (exported
# programs, sharding, the benchmarks' checks) at XLA's default level, the one users compile at.
os.environ.setdefault(
    "XLA_FLAGS", "--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0"
)
# Hypothesis keeps its files (a cache of constants, even without an example database) in
# `.hypothesis/` of the working directory unless told otherwise: not in the checkout.
os.environ.setdefault(
    "HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "jaxpool-hypothesis")
)

# OpenVINO's model converter, imported by `openvino.save_model`, sends telemetry from a forked
# process unless it runs in CI; a fork in a process running JAX warns (an error here), and a
# test sends nothing anywhere.
os.environ["CI"] = "true"

import jax  # noqa: E402
import pytest  # noqa: E402

from jaxpool._src import dispatch  # noqa: E402

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


def pytest_addoption(parser):
    parser.addoption(
        "--cases-per-test",
        type=int,
        default=0,
        metavar="N",
        help="run the first N cases of each test (of each program's, where it has one): every "
        "rule still runs, on fewer of its cases (0, the default: every case)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """``--cases-per-test N``: the first N parametrized cases of each test function and
    program, in the order of collection (the same on every xdist worker)."""
    keep = config.getoption("cases_per_test")
    if not keep:
        return
    seen: dict[tuple[str, object], int] = {}
    selected, deselected = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        key = (item.nodeid.split("[")[0], params.get("program", params.get("class_program")))
        seen[key] = seen.get(key, 0) + 1
        (selected if seen[key] <= keep else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected


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


# --------------------------------------------------------------------------------------------
# No test writes into the checkout: the files under it (bytecode aside) are the same set after
# the session as before, or the session fails.  A file left behind (a `build/` folder, a cache)
# makes a tested checkout and a clean clone disagree.  The controller of an xdist run checks,
# after every worker has finished.
# --------------------------------------------------------------------------------------------

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _checkout_files() -> set[str]:
    found = set()
    for folder, names, files in os.walk(ROOT):
        names[:] = [n for n in names if n not in (".git", "__pycache__")]
        found.update(os.path.relpath(os.path.join(folder, f), ROOT) for f in files)
    return found


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):
        session.config.stash[_BEFORE] = _checkout_files()


def pytest_sessionfinish(session):
    before = session.config.stash.get(_BEFORE, None)
    if before is None:
        return
    added = sorted(_checkout_files() - before)
    if added:
        session.config.stash[_ADDED] = added
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, config):
    added = config.stash.get(_ADDED, None)
    if added:
        terminalreporter.section("files the tests wrote into the checkout", red=True)
        for path in added[:50]:
            terminalreporter.write_line(path)


_BEFORE = pytest.StashKey[set]()
_ADDED = pytest.StashKey[list]()
