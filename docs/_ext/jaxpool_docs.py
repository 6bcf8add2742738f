"""Build-time helpers of the jaxpool documentation (a Sphinx extension).

* Sources that live outside ``docs/`` are copied in before Sphinx reads anything, links
  rewritten for the site: ``notebooks/*.ipynb`` to ``docs/_notebooks/`` (executed by myst-nb),
  ``benchmarks/README.md`` and its plots to ``docs/_generated/``.  Links in ``docs/design.md``
  are rewritten as it is read (the file itself keeps its GitHub links).
* The Performance page's summary of the benchmark targets is written from the committed
  results (``benchmark_summary.py``) into ``docs/_generated/performance_summary.md``.
* The Deploying page's table of how each op exports to ONNX is written from
  ``jaxpool._src.interop.onnx_export.TABLE`` (the table the exporter's refusals quote) into
  ``docs/_generated/onnx_export_table.md``.
* The pictures of the Semantics page are drawn with matplotlib from what jaxpool computes,
  and the Detection page's from the level rules (checked against jaxpool), into
  ``docs/_generated/figures/``.
* API coverage: once the documents are read, every name in the ``__all__`` of the modules in
  ``jaxpool_api_modules`` must have an API entry (a documented function, class or module of
  that full name); each missing one is reported and the build fails.

The generated directories are git-ignored.
"""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import re
import types
from collections.abc import Iterable

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

DOCS = pathlib.Path(__file__).resolve().parent.parent
ROOT = DOCS.parent

# Files of the repository that are pages of the site: links to them become links to the page.
PAGES = {
    "README.md": "/index.md",
    "docs/design.md": "/design.md",
    "benchmarks/README.md": "/performance.md",
    "CHANGELOG.md": "/changelog.md",
    "notebooks/pooling_tour.ipynb": "/_notebooks/pooling_tour.ipynb",
}
# The benchmark plots that the Performance page shows (benchmarks/results/).
PLOTS = ("latest.png", "training_cpu.png", "detection_cpu.png", "gpu.png")
_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def rewrite_links(text: str, source: str, images: str | None = None) -> str:
    """Rewrites the relative Markdown links of repository file ``source`` for the site.

    A link to a file that is a page (``PAGES``) becomes a link to that page; any other
    repository file is named by its path, unlinked, since the site is built from a checkout
    and has no hosted repository to link to; ``#anchor`` links and URLs are kept.
    Images become ``images/<name>`` when ``images`` is given (the caller copies them there).
    """
    base = pathlib.PurePosixPath(source).parent

    def resolve(target: str) -> str:
        parts: list[str] = []
        for part in (base / target).parts:
            if part == "..":
                if parts:
                    parts.pop()
            elif part != ".":
                parts.append(part)
        return "/".join(parts)

    def replace(match: re.Match[str]) -> str:
        bang, label, target = match.groups()
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            return match.group(0)
        path, _, anchor = target.partition("#")
        anchor = f"#{anchor}" if anchor else ""
        if bang:
            name = pathlib.PurePosixPath(path).name
            return f"![{label}]({images}/{name})" if images else match.group(0)
        repo_path = resolve(path)
        if repo_path in PAGES:
            return f"[{label}]({PAGES[repo_path]}{anchor})"
        if label.strip("`") in (repo_path, pathlib.PurePosixPath(repo_path).name):
            return f"`{repo_path}`"
        return f"{label} (`{repo_path}`)"

    return _LINK.sub(replace, text)


def _write_if_changed(path: pathlib.Path, data: bytes) -> None:
    """Writes ``data`` unless the file holds it already (keeps Sphinx's incremental builds)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_bytes() != data:
        path.write_bytes(data)


def copy_sources(app: Sphinx, config: object) -> None:
    """Copies the notebooks and the benchmark page and plots into the source directory, and
    writes the summary of the benchmark targets."""
    import benchmark_summary

    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        _write_if_changed(DOCS / "_notebooks" / notebook.name, notebook.read_bytes())
    generated = DOCS / "_generated"
    bench = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    bench = rewrite_links(bench, "benchmarks/README.md", images="/_generated/images")
    _write_if_changed(generated / "benchmarks.md", bench.encode())
    for plot in PLOTS:
        _write_if_changed(
            generated / "images" / plot, (ROOT / "benchmarks" / "results" / plot).read_bytes()
        )
    summary = benchmark_summary.summary(ROOT)
    _write_if_changed(generated / "performance_summary.md", summary.encode())
    headline = benchmark_summary.headline(ROOT)
    _write_if_changed(generated / "performance_headline.md", headline.encode())
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    _write_if_changed(generated / "changelog.md", rewrite_links(changelog, "CHANGELOG.md").encode())


def export_table() -> str:
    """The Deploying page's table: one row per public op, :func:`jaxpool.onnx.export_table`."""
    import jaxpool.onnx

    try:
        table = jaxpool.onnx.export_table()
    except ImportError as error:
        raise ExtensionError(
            f"jaxpool_docs: cannot import the ONNX exporter for its table ({error}); install "
            "the docs extra: pip install -e '.[docs]'"
        ) from error
    lines = ["| jaxpool op | Exports as | ONNX | What decides it |", "|---|---|---|---|"]
    for op, exports, onnx, notes in table:
        cells = (f"`{op}`", exports, onnx or "-", notes)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def write_export_table(app: Sphinx, config: object) -> None:
    _write_if_changed(DOCS / "_generated" / "onnx_export_table.md", export_table().encode())


def rewrite_design_links(app: Sphinx, docname: str, source: list[str]) -> None:
    """``docs/design.md`` links to repository files; on the site, to pages where there are."""
    if docname == "design":
        source[0] = rewrite_links(source[0], "docs/design.md")


def draw_figures(app: Sphinx, config: object) -> None:
    """Draws the pictures of the Semantics and Detection pages; a module's pictures are kept
    when they are newer than the module and jaxpool."""
    import pyramid_figures
    import semantics_figures

    out = DOCS / "_generated" / "figures"
    package = [p.stat().st_mtime for p in (ROOT / "jaxpool").rglob("*.py")]
    for module in (semantics_figures, pyramid_figures):
        newest = max(pathlib.Path(module.__file__).stat().st_mtime, *package)
        names = module.NAMES
        if all((out / n).exists() and (out / n).stat().st_mtime > newest for n in names):
            continue
        out.mkdir(parents=True, exist_ok=True)
        module.draw_all(out)


def clean_linen_signature(app, what, name, obj, options, signature, return_annotation):
    """Drops the ``parent`` and ``name`` fields that every Flax Linen module has."""
    if what == "class" and signature and "parent=" in signature:
        signature = re.sub(r",\s*parent=<[^>]*>", "", signature)
        signature = re.sub(r",\s*name=None", "", signature)
        return signature, return_annotation
    return None


# -- API coverage -------------------------------------------------------------------------


def public_names(module: types.ModuleType) -> list[str]:
    """The module's ``__all__``; without one, the public names defined in the module."""
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and getattr(value, "__module__", None) == module.__name__
    )


def missing_entries(module_names: Iterable[str], documented: set[str]) -> list[str]:
    """The public names (``module.name``) of the existing modules with no API entry.

    A name bound to a module needs that module's entry (``.. module::`` or ``automodule``),
    whatever it is called there.  A module that does not exist is skipped; one that exists
    but cannot be imported is an error.
    """
    missing = []
    for module_name in module_names:
        try:
            spec = importlib.util.find_spec(module_name)
        except ModuleNotFoundError:  # the parent package does not exist
            spec = None
        if spec is None:
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise ExtensionError(
                f"jaxpool_docs: cannot import {module_name} to check its API entries "
                f"({error}); install the docs extra: pip install -e '.[docs]'"
            ) from error
        if module_name not in documented:
            missing.append(module_name)
        for name in public_names(module):
            value = getattr(module, name, None)
            full = f"{module_name}.{name}"
            if isinstance(value, types.ModuleType):
                full = value.__name__
            if full not in documented:
                missing.append(f"{module_name}.{name}")
    return sorted(set(missing))


def documented_objects(app: Sphinx) -> set[str]:
    """The full names of every Python object and module with an entry in the built docs."""
    domain = app.env.get_domain("py")
    names = {name for name, *_ in domain.get_objects()}
    return names


def check_api_coverage(app: Sphinx, env: object) -> None:
    """Fails the build when a public name has no API entry."""
    missing = missing_entries(app.config.jaxpool_api_modules, documented_objects(app))
    for name in missing:
        logger.warning(
            "public name %s has no API entry: add it to a page of docs/api/",
            name,
            type="jaxpool",
            subtype="api_coverage",
        )
    if missing:
        raise ExtensionError(
            f"jaxpool_docs: {len(missing)} public name(s) have no API entry: " + ", ".join(missing)
        )


def setup(app: Sphinx) -> dict[str, object]:
    app.add_config_value("jaxpool_api_modules", [], "env")
    app.connect("config-inited", copy_sources)
    app.connect("config-inited", write_export_table)
    app.connect("config-inited", draw_figures)
    app.connect("source-read", rewrite_design_links)
    app.connect("autodoc-process-signature", clean_linen_signature)
    app.connect("env-check-consistency", check_api_coverage)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
