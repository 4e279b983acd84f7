"""The import graph of ``experiments`` follows its layering (README,
"Layout"), with no exception.

The XLA options are the ground floor; the tasks come next (each registers
itself in :mod:`experiments.tasks.registry`, which imports nothing of
experiments), then the runner, which imports the registry and the tasks
package, then the tuning, the commands built on them, the reproductions
and the command that runs them. No two units import each other, directly or
through others; no two modules either. An import inside a function says why
in a comment (JAX kept out of a start-up path, an optional dependency), and
none hides a circle. Read from the source with ``ast``.
"""

import ast
import pathlib

import import_graph
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2] / "experiments"

# Lowest first. A unit is a subpackage or a top-level module of experiments.
LAYERS = (
  ("xla options", ("xla_options",)),
  ("tasks", ("tasks",)),
  ("runner", ("run",)),
  ("tuning", ("tuning",)),
  ("commands", ("tune", "clip_scale", "public_selection", "trajectory_log", "export")),
  ("reproductions", ("reproductions",)),
  ("reproduce", ("reproduce",)),
)  # fmt: skip
LAYER = {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}
REASONS = ("JAX", "optional dependency")
REGISTRY = "experiments.tasks.registry"


MODULES = import_graph.modules(ROOT)
_reaches = import_graph.reaches


def _unit(module: str):
  parts = module.split(".")
  return parts[1] if len(parts) > 1 and parts[0] == "experiments" else None


def _targets(node) -> list[str]:
  return import_graph.targets(node, MODULES)


def _graph():
  return import_graph.whole_graph(MODULES)


def test_every_unit_is_assigned_a_layer():
  units = import_graph.units(ROOT)
  assert units == set(LAYER), units ^ set(LAYER)


def test_no_module_imports_from_a_higher_layer():
  upward = [
    f"{MODULES[src]}: {_unit(src)} imports {dst}"
    for src, dsts in _graph().items()
    for dst in dsts
    if _unit(src) and _unit(dst) and LAYER[_unit(dst)] > LAYER[_unit(src)]
  ]
  assert not upward, "\n".join(upward)


def test_the_task_registry_sits_below_the_tasks_and_the_runner():
  """It imports nothing of experiments; every task module registers into
  it, and the runner reads tasks through it and the tasks package."""
  graph = _graph()
  assert not {d for d in graph[REGISTRY] if d.startswith("experiments")}
  assert REGISTRY in graph["experiments.tasks.images"]
  assert "experiments.tasks" in graph["experiments.run.resolved_run"]
  assert REGISTRY in graph["experiments.run.config_fields"]


def test_no_cycle_between_units():
  graph = {}
  for src, dsts in _graph().items():
    for dst in dsts:
      if _unit(src) != _unit(dst):
        graph.setdefault(_unit(src), set()).add(_unit(dst))
  cycles = [u for u in sorted(LAYER) if _reaches(graph, u, u)]
  assert not cycles, cycles


def test_no_two_modules_import_each_other():
  circles = import_graph.circles(import_graph.whole_graph(MODULES))
  assert not circles, circles


def test_every_import_inside_a_function_says_why():
  silent = import_graph.silent(MODULES, REASONS)
  assert not silent, "\n".join(silent)


def test_no_import_inside_a_function_hides_a_circle():
  hidden = import_graph.hidden_circles(MODULES)
  assert not hidden, "\n".join(hidden)


@pytest.mark.parametrize(
  "graph,circle",
  [({"a": {"b"}, "b": {"a"}}, True), ({"a": {"b"}, "b": set()}, False)],
)
def test_the_circle_check_sees_a_circle(graph, circle):
  assert _reaches(graph, "a", "a") == circle


def test_the_layer_check_sees_an_upward_import():
  node = ast.parse("from experiments.tuning import search\n").body[0]
  (target,) = _targets(node)
  assert LAYER[_unit(target)] > LAYER["run"]
