r"""Hyperparameter selection on public data, at no privacy cost.

  python -m experiments.public_selection \
      --config configs/vader_minilm_dpzero_bitfit.py \
      --config.public=amazon+tweets \
      --grid learning_rate=3e-4,1e-3,3e-3 --per target_epsilon=1,2,4 \
      --out selection.json

Each point of the ``--grid`` (the product of its fields' values) is run on
the task's public proxy (``config.public_proxy``,
:mod:`experiments.tasks.public_proxy`): the private algorithm, with its
calibrated noise and Poisson sampling, trained on public examples and
scored on other public examples. The best point is selected separately for
each value of the ``--per`` fields (for example one step size per epsilon).
No private example is read, so the selection costs no privacy, and the
final private run's epsilon is its whole cost; the command for that run is
printed with each selection. ``--repeats`` runs each point several times
(fresh noise each time) and scores the mean.

Fields that no task builder reads (:data:`TRAINING_FIELDS`) are swept on
one task built once; sweeping any other field rebuilds the task per point.
Other ``--config.<field>=<value>`` overrides work as in
:mod:`experiments.run.cli`.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import sys
import time
from typing import Any

import ml_collections
from absl import app, flags
from ml_collections import config_flags

from experiments import tasks
from experiments.run import cli, train
from experiments.tuning.trials import with_fields

# Top-level config fields that no task builder reads: a sweep over these
# reuses one built task (tokenized text, precomputed features).
TRAINING_FIELDS = frozenset(
  {
    "learning_rate",
    "privacy",
    "num_steps",
    "estimator_kwargs",
    "optimizer",
    "optimizer_kwargs",
    "momentum",
    "schedule",
    "schedule_kwargs",
  }
)


def parse_axis(text: str) -> tuple[str, list[Any]]:
  """``'learning_rate=1e-3,3e-3'`` -> ``('learning_rate', [0.001, 0.003])``."""
  name, sep, values = text.partition("=")
  if not sep or not name or not values:
    raise ValueError(f"{text!r}: expected <field>=<value>[,<value>...]")
  parsed = []
  for v in values.split(","):
    try:
      parsed.append(ast.literal_eval(v))
    except (ValueError, SyntaxError):
      parsed.append(v)
  return name, parsed


def _points(axes: dict[str, list[Any]]) -> list[dict[str, Any]]:
  names = list(axes)
  return [dict(zip(names, vs)) for vs in itertools.product(*axes.values())]


def select(
  config: ml_collections.ConfigDict,
  grid: dict[str, list[Any]],
  per: dict[str, list[Any]] | None = None,
  *,
  repeats: int = 1,
  progress: bool = False,
) -> list[dict[str, Any]]:
  """Runs every ``grid`` point on the public proxy, for each ``per`` point;
  returns one selection per ``per`` point: ``{"per", "rows", "selected"}``.

  A row holds the point, its public validation accuracies (one per repeat),
  their mean (the score; a diverged run scores ``-inf``), epsilon and
  training seconds. ``selected`` is the first point with the best score.
  """
  per = per or {}
  swept = {name.split(".")[0] for name in [*grid, *per]}
  base = with_fields(config, {})
  with base.unlocked():
    base.public_proxy = True
    base.workdir = ""
  shared = None
  if swept <= TRAINING_FIELDS:
    shared = tasks.get_task(base)
  selections = []
  for per_point in _points(per):
    rows = []
    for point in _points(grid):
      run_config = with_fields(base, {**per_point, **point})
      accuracies, epsilon, seconds = [], None, 0.0
      for _ in range(repeats):
        result = train.train(run_config, progress=progress, task=shared)
        accuracies.append(float(result["test_accuracy"]))
        epsilon, seconds = result["epsilon"], seconds + result["train_seconds"]
      finite = all(math.isfinite(a) for a in accuracies)
      score = sum(accuracies) / len(accuracies) if finite else -math.inf
      rows.append(
        {
          **point,
          "public_val_accuracy": accuracies,
          "score": score,
          "epsilon": epsilon,
          "train_seconds": seconds,
        }
      )
      if progress:
        print(json.dumps({**per_point, **rows[-1]}), flush=True)
    best = max(rows, key=lambda r: r["score"])  # first of equal scores
    selections.append(
      {
        "per": per_point,
        "rows": rows,
        "selected": {k: best[k] for k in grid},
      }
    )
  return selections


def format_selection(selection: dict, config_path: str = "<config>") -> str:
  """A table of one selection and the command of its private run."""
  names = list(selection["selected"])
  head = " ".join(f"{k}={v}" for k, v in selection["per"].items())
  lines = [f"selection on public data {head}".rstrip()]
  for row in selection["rows"]:
    point = " ".join(f"{k}={row[k]}" for k in names)
    mark = (
      " <- selected"
      if all(row[k] == selection["selected"][k] for k in names)
      else ""
    )
    lines.append(
      f"  {point}: public val. accuracy {row['score']:.4f} "
      f"(eps {row['epsilon']:.3f}, {row['train_seconds']:.1f} s){mark}"
    )
  fields = {**selection["per"], **selection["selected"]}
  overrides = " ".join(f"--config.{k}={v}" for k, v in fields.items())
  lines.append(
    f"  private run: python -m experiments.run --config {config_path} "
    + overrides
  )
  return "\n".join(lines)


def main(argv) -> None:
  del argv
  if not flags.FLAGS.grid:
    raise SystemExit("--grid <field>=<v1>,<v2>,... is required.")
  config = cli.apply_late_overrides(cli.CONFIG.value)
  grid = dict(parse_axis(a) for a in flags.FLAGS.grid)
  per = dict(parse_axis(a) for a in flags.FLAGS.per)
  start = time.time()
  selections = select(
    config, grid, per, repeats=flags.FLAGS.repeats, progress=True
  )
  path = config_flags.get_config_filename(flags.FLAGS["config"])
  for s in selections:
    print(format_selection(s, path))
  print(f"total wall time {time.time() - start:.0f} s")
  if flags.FLAGS.out:
    with open(flags.FLAGS.out, "w") as f:
      json.dump({"config": path, "selections": selections}, f, indent=2)


if __name__ == "__main__":
  flags.DEFINE_multi_string("grid", [], "<field>=<v1>,<v2>,... (repeatable)")
  flags.DEFINE_multi_string(
    "per", [], "<field>=<v1>,... : select separately for each value"
  )
  flags.DEFINE_integer("repeats", 1, "runs per point (fresh noise each)")
  flags.DEFINE_string("out", "", "write the selections as JSON here")
  sys.argv = cli.split_argv(sys.argv)
  app.run(main)
