"""The code stays typed, linted and formatted: mypy over ``jaxpool/`` (configured in
``pyproject.toml``), ``ruff check`` and ``ruff format --check`` over the repository.

The tools keep their caches out of the checkout (a test writes nothing into it).
"""

from __future__ import annotations

import ast
import pathlib
import shutil
import subprocess
import sys

import pytest

# A whole-program check: not part of the default run (pyproject.toml's `addopts`).
pytestmark = pytest.mark.whole_program

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "mypy", "--cache-dir", "{tmp}"],
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        [sys.executable, "-m", "ruff", "format", "--no-cache", "--check", "."],
    ],
    ids=["mypy", "ruff-check", "ruff-format"],
)
def test_tool_is_clean(command, tmp_path):
    command = [part.replace("{tmp}", str(tmp_path)) for part in command]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("build_folder", [False, True])
def test_import_order_does_not_depend_on_a_build_folder(tmp_path, build_folder):
    """A ``build/`` folder beside the sources (what a setuptools build leaves) must not turn
    the ``build`` frontend into a first-party module for ruff's import sorting: the imports
    are sorted alike in a clean clone and in a checkout that has built a wheel."""
    shutil.copy2(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for folder in ("jaxpool", "tests"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("*.pyc"))
    if build_folder:
        (tmp_path / "build" / "lib").mkdir(parents=True)
        (tmp_path / "build" / "__init__.py").write_text("")
    command = [sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "I", "."]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_modules_and_functions_stay_small():
    """docs/design.md: no module of ``jaxpool/`` over 450 lines, no function body over 60
    lines of code (lines neither blank, comment nor docstring)."""
    large = []
    for path in sorted((ROOT / "jaxpool").rglob("*.py")):
        lines = path.read_text().splitlines()
        if len(lines) > 450:
            large.append(f"{path.relative_to(ROOT)}: {len(lines)} lines")
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            skip = set()
            if ast.get_docstring(node) is not None:
                skip = set(range(node.body[0].lineno, node.body[0].end_lineno + 1))
            code = [
                line
                for number, line in enumerate(lines[node.lineno - 1 : node.end_lineno], node.lineno)
                if number not in skip and line.strip() and not line.strip().startswith("#")
            ]
            if len(code) > 60:
                large.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {len(code)}")
    assert not large, large
