"""The documentation builds with warnings as errors, and its code examples run.

The build executes the notebooks (myst-nb) and checks that every public name has an API
entry (docs/_ext/jaxpool_docs.py); on 2 cores it takes about half a minute.
"""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import jax
import pytest

import jaxpool

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PORTING = [f"porting/{name}" for name in ("pytorch", "flax", "openvino", "onnx", "equinox")]
PAGES_WITH_CODE = ["index", "getting_started", "detection", *PORTING, "deploying"]
# Every page of the site: the ones with code, the others, and the executed notebook.
PAGES = PAGES_WITH_CODE + ["semantics", "api/index", "performance", "design", "changelog"]
PAGES += ["_notebooks/pooling_tour"]

# The docs toolchain is in the test extra: a missing one fails the import, never skips.
import myst_nb  # noqa: E402, F401
import sphinx  # noqa: E402, F401
import sphinx_book_theme  # noqa: E402, F401

# A whole-program check: not part of the default run (pyproject.toml's `addopts`).
pytestmark = pytest.mark.whole_program


def _ext(name):
    """A module of ``docs/_ext``, the Sphinx extensions' folder."""
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(DOCS / "_ext"))


def _built_site(tmp_path_factory) -> pathlib.Path:
    """Runs the README's build command, ``sphinx-build -W -b html docs <out>``, once, on a copy
    of the checkout: the build writes the sources it generates (``docs/_generated``, the API
    stubs, the notebooks) next to the pages, and a test writes nothing into the checkout."""
    src = tmp_path_factory.mktemp("checkout") / "jaxpool"
    skip = shutil.ignore_patterns(
        ".git", "__pycache__", "*.egg-info", "_build", "_generated", "_notebooks", "_autosummary"
    )
    shutil.copytree(ROOT, src, ignore=skip)
    out = tmp_path_factory.mktemp("docs") / "html"
    env = dict(os.environ)
    env.pop("JAXPOOL_DOCS_INTERSPHINX", None)  # offline: no inventories to download
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    env.pop("MPLBACKEND", None)
    result = subprocess.run(
        [sys.executable, *"-m sphinx -W --keep-going -q -b html".split(), src / "docs", out],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, f"sphinx-build failed:\n{result.stdout}\n{result.stderr}"
    return out


def _site_has_every_page(built_site):
    for page in PAGES:
        assert (built_site / f"{page}.html").is_file(), page


def _every_public_op_is_documented(built_site):
    """Every public op has an API page and a row in the Deploying page's export table (written
    from the exporter's table), and the API pages document the export."""
    api = built_site / "api" / "_autosummary"
    html = (built_site / "deploying.html").read_text()
    table = html[html.index("<table") :]
    for name in set(jaxpool.__all__) - {"openvino"}:
        assert (api / f"jaxpool.{name}.html").is_file(), name
        assert f'<span class="pre">{name}</span></code></p></td>' in table, name
    for name in ("export", "register_export"):
        assert (api / f"jaxpool.onnx.{name}.html").is_file()
    html = (api / "jaxpool.max_pool.html").read_text()
    assert "rounding_type" in html and "Returns" in html  # napoleon rendered the docstring


def _pictures_are_in_the_site(built_site):
    notebook = (built_site / "_notebooks" / "pooling_tour.html").read_text()
    source = json.loads((ROOT / "notebooks" / "pooling_tour.ipynb").read_text())
    figures = sum(
        "plt.subplots(" in "".join(c["source"]) for c in source["cells"] if c["cell_type"] == "code"
    )
    # Executed and drawn: a picture for every figure the notebook makes.
    assert len(re.findall(r"<img [^>]*src=\"[^\"]+\.png\"", notebook)) == figures
    for page, names in [
        ("semantics", ["rounding.png", "auto_pad.png", "adaptive.png"]),
        ("detection", ["fpn_levels.png"]),
        ("performance", ["latest.png", "training_cpu.png", "gpu.png"]),
    ]:
        html = (built_site / f"{page}.html").read_text()
        for name in names:
            assert re.search(rf"<img [^>]*src=\"([^\"]*{re.escape(name)})\"", html), name
    assert (built_site / "_images" / "latest.png").is_file()
    performance = (built_site / "performance.html").read_text()
    assert "Latest CPU results" in performance and "Latest GPU results" in performance
    assert performance.index("Targets at a glance") < performance.index("Full benchmark log")


def _no_remote_scripts(built_site):
    """The pages render offline: no script or stylesheet from a CDN (MathJax included)."""
    for page in ["index.html", "semantics.html", "performance.html"]:
        html = (built_site / page).read_text()
        assert not re.search(r"<script[^>]+src=\"https?://", html), page
        assert not re.search(r"<link[^>]+stylesheet[^>]+href=\"https?://", html), page


@pytest.mark.parametrize("page", PAGES_WITH_CODE)
def test_code_examples_run(page):
    """Every ```python block of a page runs, top to bottom, in one namespace."""
    text = (DOCS / f"{page}.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    assert blocks, page
    namespace: dict[str, object] = {"__name__": f"docs_{page}"}
    with jax.numpy_dtype_promotion("standard"):  # as users run it (Flax's avg_pool needs it)
        for block in blocks:
            exec(compile(block, f"{page}.md", "exec"), namespace)  # noqa: S102


def test_api_coverage_check_names_what_is_missing():
    """The check of docs/_ext/jaxpool_docs.py reports an undocumented public name."""
    missing = _ext("jaxpool_docs").missing_entries
    modules = ["jaxpool", "jaxpool.openvino", "jaxpool.does_not_exist"]
    # Every entry: the package, its public names (the openvino submodule among them) and the
    # submodule's own names.
    names = [*jaxpool.__all__, "openvino.layer", "openvino.Layer"]
    everything = {"jaxpool", *(f"jaxpool.{n}" for n in names)}
    assert missing(modules, everything) == []
    assert missing(modules, everything - {"jaxpool.max_pool"}) == ["jaxpool.max_pool"]
    # A submodule in `__all__` needs the submodule's own entry.
    assert missing(modules, everything - {"jaxpool.openvino"}) == ["jaxpool.openvino"]


def test_links_are_rewritten_for_the_site():
    jaxpool_docs = _ext("jaxpool_docs")
    text = (
        "[a](../README.md) [b](../benchmarks/README.md#latest-cpu-results) "
        "[c](#x) [d](https://e.org) [f](../jaxpool/_src/max_pool.py) ![p](results/gpu.png) "
        "[`max_pool.py`](../jaxpool/_src/max_pool.py)"
    )
    assert jaxpool_docs.rewrite_links(text, "docs/design.md", images="/img") == (
        "[a](/index.md) [b](/performance.md#latest-cpu-results) [c](#x) [d](https://e.org) "
        "f (`jaxpool/_src/max_pool.py`) ![p](/img/gpu.png) `jaxpool/_src/max_pool.py`"
    )


def test_performance_summary_counts_every_target():
    """The Performance page's tables (docs/_ext/benchmark_summary.py) take every target of the
    committed results, each in one row, and count the misses the results record."""
    benchmark_summary = _ext("benchmark_summary")
    for results in benchmark_summary.RESULTS:
        if not results.required and not (ROOT / results.path).exists():
            assert results.command, results.path  # the page says how to write it
            continue
        data = json.loads((ROOT / results.path).read_text())
        targets = [t for g in data["groups"] for t in g["targets"] if t["value"] is not None]
        table, met, total = benchmark_summary.summary_table(results, data)
        assert total == len(targets), results.path
        assert met == sum(t["verdict"] == "PASS" for t in targets), results.path
        rows = table.splitlines()[2:]
        assert len(rows) == len({r.split(" | ")[0] for r in rows}), results.path
        missed = [r for r in rows if "**missed**" in r]
        assert all(r.strip("| ").split(" | ")[3] for r in missed), "a miss without a why"
        assert (met < total) == bool(missed), results.path
        # Every reason written down belongs to a row of its file.
        keys = {row.key for row in results.rows}
        assert {k for f, k in benchmark_summary.WHY if f == results.key} <= keys
    # A target that no row of the page names is an error, not a row left out.
    target = dict(label="jaxpool / something new", value=1.0, limit=1.0, unit="x", verdict="PASS")
    data = {"meta": {}, "groups": [{"op": "max_pool", "mode": "fwd", "targets": [target]}]}
    with pytest.raises(ValueError, match="something new"):
        benchmark_summary.summary_table(benchmark_summary.RESULTS[0], data)


def _no_link_leads_to_an_unpublished_place(built_site):
    """There is no hosted repository or documentation yet: neither the sources nor the built
    site send a reader to one."""
    dead = re.compile(r"jaxpool\.readthedocs\.io|github\.com/jaxpool")
    sources = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "CHANGELOG.md"]
    for folder, patterns in (
        (DOCS, ("*.md", "*.py", "*.css")),
        (ROOT / "jaxpool", ("*.py",)),
        (ROOT / "examples", ("*.py",)),
        (ROOT / "notebooks", ("*.ipynb",)),
    ):
        for pattern in patterns:
            sources += [p for p in folder.rglob(pattern) if "_build" not in p.parts]
    pages = list(built_site.rglob("*.html"))
    hits = [str(p) for p in sources + pages if dead.search(p.read_text(errors="replace"))]
    assert not hits


def test_hosted_docs_build_as_the_readme_says():
    """``.readthedocs.yaml`` installs the docs extra and builds ``docs/`` with warnings as
    errors, the README's docs command, so that the site can be hosted as it builds here."""
    config = (ROOT / ".readthedocs.yaml").read_text()
    readme = (ROOT / "README.md").read_text()
    assert 'pip install -e ".[docs]" && sphinx-build -W -b html docs docs/_build/html' in readme
    assert re.search(r"extra_requirements:\s*\n\s*- docs\b", config)
    assert "configuration: docs/conf.py" in config
    assert "fail_on_warning: true" in config


def test_detection_picture_draws_the_level_rules():
    """The Detection page's picture (docs/_ext/pyramid_figures.py) changes maps where the page
    says each rule does, and at the maps ``jaxpool.multilevel_roi_align`` chooses."""
    pyramid_figures = _ext("pyramid_figures")
    usual, coarser = pyramid_figures.PYRAMIDS
    for rule in pyramid_figures.RULES:
        assert [round(t) for t in pyramid_figures.thresholds(rule, usual)] == [112, 224, 448]
        on_coarser = [round(t) for t in pyramid_figures.thresholds(rule, coarser)]
        assert on_coarser == ([112, 224, 448] if rule == "openvino" else [224, 448, 896])
    pyramid_figures.check_against_jaxpool()


# One build, and every check of it in one test: a module fixture would run once per xdist
# worker.
def test_built_site(tmp_path_factory):
    built_site = _built_site(tmp_path_factory)
    _site_has_every_page(built_site)
    _every_public_op_is_documented(built_site)
    _pictures_are_in_the_site(built_site)
    _no_remote_scripts(built_site)
    _no_link_leads_to_an_unpublished_place(built_site)
