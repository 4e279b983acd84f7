"""No import circle anywhere in the tree.

The library, the experiments, the configs and the benchmarks are read as
one import graph (imports inside functions included, and no arrow allowed),
so that a circle through two packages (``experiments`` -> ``zoprivacy`` ->
``experiments``) is seen as well as one inside a package. The tests are
left out: they import their helpers by bare name (pytest puts their folders
on the path), and no module of the tree imports a test. Read from the
source with ``ast``.
"""

import pathlib

import import_graph

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("zoprivacy", "experiments", "configs", "benchmarks")
NOT_CODE = ("tests", "docs", "notebooks")


def _modules():
  known = {}
  for package in PACKAGES:
    known.update(import_graph.modules(ROOT / package))
  return known


def test_no_import_circle_in_the_tree():
  known = _modules()
  graph = import_graph.whole_graph(known)
  # The graph crosses packages: the command line reads the library.
  assert "zoprivacy.estimator_manifest" in graph["experiments.run.cli"]
  circles = import_graph.circles(graph)
  assert not circles, circles


def test_every_folder_of_code_is_read():
  folders = {
    p.parent.name
    for p in ROOT.glob("*/*.py")
    if not p.parent.name.startswith(".")
  }
  assert folders - set(NOT_CODE) == set(PACKAGES)
