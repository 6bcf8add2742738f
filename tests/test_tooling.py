"""The code stays typed, linted and formatted: mypy over ``jaxpool/`` (configured in
``pyproject.toml``), ``ruff check`` and ``ruff format --check`` over the repository."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "mypy"],
        [sys.executable, "-m", "ruff", "check", "."],
        [sys.executable, "-m", "ruff", "format", "--check", "."],
    ],
    ids=["mypy", "ruff-check", "ruff-format"],
)
def test_tool_is_clean(command):
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
