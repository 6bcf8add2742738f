"""Sphinx configuration of the jaxpool documentation.

Build it with ``sphinx-build -W -b html docs docs/_build/html`` (``pip install -e ".[docs]"``
first).  The build needs no network: intersphinx links to JAX, Flax and NumPy are made only
when ``JAXPOOL_DOCS_INTERSPHINX=1`` is set (their inventories are downloaded then), and the
pages load nothing from a CDN.  ``_ext/jaxpool_docs.py`` copies the notebooks and the
benchmark results into the source tree, draws the pictures of the Semantics and Detection
pages and fails the build when a public name has no API entry.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys

DOCS = pathlib.Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(ROOT))  # the checkout, also when jaxpool is not installed

import jaxpool  # noqa: E402

project = "jaxpool"
author = "The jaxpool authors"
copyright = "2026, The jaxpool authors"  # noqa: A001
release = jaxpool.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "myst_nb",
    "jaxpool_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "_generated/*.md"]
# docs/_generated/*.md are included by other pages, not pages of their own.

# Pages of modules that may not exist in every checkout: left out when their module is absent.
_OPTIONAL_API_PAGES = {
    "api/optional/eqx.rst": "jaxpool.nn.eqx",
    "api/optional/onnx.rst": "jaxpool.onnx",
}
for _page, _module in _OPTIONAL_API_PAGES.items():
    if importlib.util.find_spec(_module) is None:
        exclude_patterns.append(_page)

# -- API reference ------------------------------------------------------------------------
autosummary_generate = True
autosummary_ignore_module_all = False
autodoc_typehints = "none"  # the docstrings give the types; the signatures stay readable
autodoc_member_order = "bysource"
autodoc_default_options = {"show-inheritance": False}
add_module_names = True
maximum_signature_line_length = 88  # longer signatures get one parameter per line
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# -- Links to JAX, Flax and NumPy -------------------------------------------------------
# Off by default: the inventories live on the internet, and the build must pass offline
# with -W.  JAXPOOL_DOCS_INTERSPHINX=1 turns them on (a machine with internet access).
intersphinx_mapping = {}
if os.environ.get("JAXPOOL_DOCS_INTERSPHINX") == "1":
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "jax": ("https://docs.jax.dev/en/latest", None),
        "flax": ("https://flax.readthedocs.io/en/latest", None),
        "numpy": ("https://numpy.org/doc/stable", None),
    }

# -- MyST and notebooks ------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = "auto"  # notebooks are stored without outputs: run them at build time
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_in_temp = True
nb_output_stderr = "remove"  # e.g. JAX's platform notes; errors still fail the build
nb_execution_excludepatterns: list[str] = []

# -- HTML ---------------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = f"jaxpool {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_theme_options = {
    "use_download_button": True,
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
html_last_updated_fmt = None
html_copy_source = False
html_show_sourcelink = False

# -- jaxpool_docs --------------------------------------------------------------------------
# The modules whose `__all__` must each have an API entry; a module that does not exist (yet)
# is skipped.  A module without `__all__` contributes the public names defined in it.
jaxpool_api_modules = [
    "jaxpool",
    "jaxpool.nn",
    "jaxpool.nn.linen",
    "jaxpool.openvino",
    "jaxpool.onnx",
    "jaxpool.nn.eqx",
    "jaxpool.torch",
]
