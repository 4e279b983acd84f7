"""The import graph of ``experiments`` follows its layering (README,
"Layout").

The runner (:mod:`experiments.run`) is the ground floor: it imports none of
the tasks, the tuning, the commands or the reproductions, except that its
task registry loads the built-in tasks on the first lookup by name (the
tasks register themselves with it; that one edge is named below). Above it
come the tasks, the tuning, the commands built on them, the reproductions
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
  ("runner", ("run",)),
  ("tasks", ("tasks",)),
  ("tuning", ("tuning",)),
  ("commands", ("tune", "clip_scale", "public_selection", "trajectory_log", "export")),
  ("reproductions", ("reproductions",)),
  ("reproduce", ("reproduce",)),
)  # fmt: skip
LAYER = {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}
# The registry's plug-in load of the built-in tasks (its one upward edge).
PLUGIN = ("experiments.run.task_registry", "experiments.tasks")
REASONS = ("JAX", "optional dependency", "plug-in")


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
    if (src, dst) != PLUGIN
  ]
  assert not upward, "\n".join(upward)


def test_the_runner_reaches_the_tasks_only_through_its_registry():
  graph = _graph()
  assert PLUGIN[1] in graph[PLUGIN[0]]
  text = MODULES[PLUGIN[0]].read_text()
  assert text.count("from experiments import tasks") == 1


def test_no_cycle_between_units_but_the_plugin_load():
  graph = {}
  for src, dsts in _graph().items():
    for dst in dsts:
      if _unit(src) != _unit(dst) and (src, dst) != PLUGIN:
        graph.setdefault(_unit(src), set()).add(_unit(dst))
  cycles = [u for u in sorted(LAYER) if _reaches(graph, u, u)]
  assert not cycles, cycles


def test_no_two_modules_import_each_other():
  circles = import_graph.circles(import_graph.whole_graph(MODULES, [PLUGIN]))
  assert not circles, circles


def test_every_import_inside_a_function_says_why():
  silent = import_graph.silent(MODULES, REASONS)
  assert not silent, "\n".join(silent)


def test_no_import_inside_a_function_hides_a_circle_but_the_plugin_load():
  hidden = import_graph.hidden_circles(MODULES, [PLUGIN])
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
