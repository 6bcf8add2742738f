"""The package is ready to publish: the wheel and sdist pass `twine check`, carry the license,
`py.typed`, the README and one version, and the wheel installs and runs on its own.

The wheel is built without build isolation (setuptools and wheel from this environment), so
no network is needed, from a copy of the sources in a temporary directory: a build writes its
``build/`` and ``*.egg-info`` next to the sources, and none may land in the checkout (which
conftest.py checks after every session).  The
wheel goes into a fresh virtual environment that sees this environment's packages through a
``.pth`` file (jax is not downloaded again) but not the checkout.
"""

from __future__ import annotations

import email.parser
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile

import pytest
from packaging.version import Version

ROOT = pathlib.Path(__file__).resolve().parent.parent

# `build` and `twine` are in the test extra: a missing one fails, never skips.
import build  # noqa: E402, F401
import twine  # noqa: E402, F401

# A whole-program check: not part of the default run (pyproject.toml's `addopts`).
pytestmark = pytest.mark.whole_program

SOURCES = ("pyproject.toml", "README.md", "LICENSE", "jaxpool")


def _run(*args: str, cwd: pathlib.Path = ROOT, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _dist(tmp_path_factory) -> pathlib.Path:
    """``python -m build --no-isolation`` of a copy of the sources: the folder of an sdist and
    a wheel."""
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    command = "-m build --no-isolation --sdist --wheel --outdir".split()
    _run(sys.executable, *command, str(out), str(src), cwd=src)
    return out


def _version() -> str:
    init = (ROOT / "jaxpool" / "__init__.py").read_text()
    return re.search(r'^__version__ = "([^"]+)"$', init, re.M).group(1)


def test_one_version_string():
    text = (ROOT / "pyproject.toml").read_text()
    project = text.split("[project]", 1)[1].split("\n[", 1)[0]  # the [project] table
    assert not re.search(r"^version\s*=", project, re.M)
    assert re.search(r'^dynamic = \[[^]]*"version"', project, re.M)
    assert re.search(r'^version = \{ ?attr = "jaxpool.__version__" ?\}', text, re.M)
    import jaxpool

    assert jaxpool.__version__ == _version()


def _twine_check(dist):
    files = sorted(str(p) for p in dist.iterdir())
    assert len(files) == 2, files
    out = _run(sys.executable, "-m", "twine", "check", "--strict", *files)
    assert out.count("PASSED") == 2, out


def _wheel_contents_and_metadata(dist):
    (wheel,) = dist.glob("*.whl")
    assert wheel.name == f"jaxpool-{_version()}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        info = f"jaxpool-{_version()}.dist-info"
        metadata = email.parser.Parser().parsestr(zf.read(f"{info}/METADATA").decode())
    assert "jaxpool/py.typed" in names and "jaxpool/nn/linen.py" in names
    assert f"{info}/licenses/LICENSE" in names
    assert not [n for n in names if n.startswith(("tests/", "docs/", "benchmarks/"))]
    assert metadata["Version"] == _version()
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert "## Semantics" in metadata.get_payload()  # the README is the long description
    assert "Typing :: Typed" in metadata.get_all("Classifier")
    # Nothing is hosted yet: no project URL would lead anywhere.
    assert metadata.get_all("Project-URL") is None


def _sdist_contents(dist):
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    assert {"LICENSE", "README.md", "pyproject.toml", "jaxpool/py.typed"} <= names


def _environment_paths() -> list[str]:
    """This interpreter's import path outside the checkout: its site-packages and stdlib."""
    paths = (pathlib.Path(entry or ".").resolve() for entry in sys.path)
    return [str(p) for p in paths if p.is_dir() and not p.is_relative_to(ROOT)]


def _wheel_installs_and_runs(dist, tmp_path):
    """Installed in a fresh venv, the wheel's jaxpool (not the checkout's) imports and pools.

    The venv reads this environment's packages from a ``.pth`` file in its own site-packages.
    (``system_site_packages=True`` would show it the base interpreter's packages instead,
    which lack jax when the tests run in a virtual environment.)  Entries of a ``.pth`` file
    come after the venv's own site-packages, and the ``.pth`` files in them are not read, so
    the editable install of the checkout stays invisible.
    """
    (wheel,) = dist.glob("*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    # pip of this environment installs into the venv; no dependency is downloaded.
    install = "install --no-deps --no-index --ignore-installed".split()
    _run(sys.executable, "-m", "pip", "--python", str(python), *install, str(wheel), env=env)
    purelib = _run(str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")
    pth = pathlib.Path(purelib.strip()) / "_running_environment.pth"
    pth.write_text("\n".join(_environment_paths()) + "\n")
    code = (
        "import pathlib, sys, jax.numpy as jnp, jaxpool\n"
        "print(pathlib.Path(jaxpool.__file__).resolve())\n"
        "print(jaxpool.__version__)\n"
        "y, i = jaxpool.max_pool(jnp.arange(16.0).reshape(1, 1, 4, 4), 2, return_indices=True)\n"
        "print(y[0, 0].tolist(), i[0, 0].tolist())\n"
    )
    out = _run(str(python), "-I", "-c", code, cwd=tmp_path, env=env).splitlines()
    assert pathlib.Path(out[0]).is_relative_to(env_dir.resolve()), out[0]
    assert out[1] == _version()
    assert out[2] == "[[5.0, 7.0], [13.0, 15.0]] [[5, 7], [13, 15]]"


def test_oldest_releases_are_the_declared_lower_bounds():
    """CI installs ``.ci/oldest.txt`` into a second environment and runs the op tests there:
    each pin must be the lower bound that ``pyproject.toml`` declares (everywhere it names the
    package), and every core requirement must be pinned."""
    pins = {}
    for line in (ROOT / ".ci" / "oldest.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.strip().lower()] = Version(version)
    bounds: dict[str, set[Version]] = {}  # every `name>=version` requirement, by name
    text = (ROOT / "pyproject.toml").read_text()
    for name, version in re.findall(r'"([A-Za-z0-9_.-]+)>=([0-9][^",;]*)"', text):
        bounds.setdefault(name.lower(), set()).add(Version(version))
    assert {"jax", "jaxlib", "numpy"} <= pins.keys()
    for name, version in pins.items():
        assert bounds.get(name) == {version}, (name, version, bounds.get(name))


def test_ci_runs_the_readme_command_in_new_environments():
    """``.ci/run`` takes the README's test command from the README and runs it in a virtual
    environment it makes in a temporary folder (and removes), then the torchax extra as pip
    resolves it and the op tests on the oldest releases, each in another."""
    script = (ROOT / ".ci" / "run").read_text()
    assert "awk '/^Run the tests:/" in script and 'eval "$cmd"' in script
    assert "work=$(mktemp -d" in script and "trap 'rm -rf \"$work\"' EXIT" in script
    assert script.count("\nnew_env ") == 3 and '-m venv "$work/$1"' in script
    assert 'pip install -q -e ".[torchax]"' in script and "tests/test_torchax.py" in script
    assert "-c .ci/oldest.txt" in script
    readme = (ROOT / "README.md").read_text()
    assert (
        'Run the tests:\n\n```bash\npip install -e ".[test]" && python -m pytest -n 2\n' in readme
    )


# One build, and every check of it in one test: a module fixture would run once per xdist
# worker.
def test_built_distributions(tmp_path_factory, tmp_path):
    dist = _dist(tmp_path_factory)
    _twine_check(dist)
    _wheel_contents_and_metadata(dist)
    _sdist_contents(dist)
    _wheel_installs_and_runs(dist, tmp_path)
