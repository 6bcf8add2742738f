"""The notebooks are stored without outputs, run from top to bottom, and draw their figures."""

from __future__ import annotations

import pathlib
import sys

import nbformat
import pytest
from nbclient import NotebookClient

# A whole-program check: not part of the default run (pyproject.toml's `addopts`).
pytestmark = pytest.mark.whole_program

NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"


@pytest.fixture
def python3_kernel(tmp_path, monkeypatch):
    """A `python3` kernel spec that runs this interpreter, found before any other."""
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")  # the paths Jupyter will use, no warning
    from ipykernel.kernelspec import install

    install(kernel_name="python3", prefix=str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter" / "share" / "jupyter"))
    monkeypatch.delenv("MPLBACKEND", raising=False)
    return sys.executable


@pytest.mark.parametrize("name", ["pooling_tour.ipynb"])
def test_notebook_runs_and_draws(name, tmp_path, python3_kernel):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert code_cells
    assert all(not c.outputs and c.execution_count is None for c in code_cells), (
        "store the notebook without outputs"
    )
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = [o for c in code_cells for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    # Every cell that makes a figure shows it.
    for cell in code_cells:
        if "plt.subplots(" in "".join(cell.source):
            assert any("image/png" in o.get("data", {}) for o in cell.outputs), cell.source
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "same values: True" in text and "same indices: True" in text
