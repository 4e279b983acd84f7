"""Sphinx configuration: the guides (Markdown) and the API reference.

Build: ``python -m sphinx -W -b html docs docs/_build/html`` (warnings are
errors; ``.ci/run`` runs it).
"""

import os
import shutil
import sys

sys.path.insert(0, os.path.abspath(".."))
os.environ.setdefault("JAX_PLATFORMS", "cpu")

project = "zoprivacy"
author = "zoprivacy authors"
extensions = [
  "myst_parser",
  "sphinx.ext.autodoc",
  "sphinx.ext.autosummary",
  "sphinx.ext.napoleon",
  "sphinx.ext.mathjax",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "results/*.md", "README.md"]
myst_heading_anchors = 3
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {
  "members": True,
  "undoc-members": False,
  "ignore-module-all": True,
}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
html_theme = "alabaster"
suppress_warnings = ["myst.header"]
autosummary_generate = True
# Generated afresh on every build: pages of modules removed or moved since an
# earlier build would otherwise stay, and fail to import (a -W build fails).
shutil.rmtree(os.path.join(os.path.dirname(__file__), "_autosummary"), True)
autosummary_imported_members = False
napoleon_use_ivar = True
