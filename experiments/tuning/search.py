r"""The search space of a tuning: values to choose from, or distributions.

Two ways to declare it, as ml_collections users expect:

* on the command line, ``--search.<field>=<spec>`` (dotted fields such as
  ``privacy.clip`` work), repeatable;
* in a Python file, ``--search=configs/<name>_search.py``, whose
  ``get_search()`` returns ``{field: spec}``.

A spec is a list of values (``0.01,0.02,0.05`` on the command line: one is
chosen uniformly at random), ``uniform(a,b)``, ``loguniform(a,b)`` or
``randint(a,b)`` (inclusive). A trial's point is drawn from the tuning's
secret, so a resumed tuning draws the same points.
"""

from __future__ import annotations

import ast
import importlib.util
import math
import re
from typing import Any, NamedTuple

import numpy as np

from zoprivacy.privacy import randomness

# Fields that change what a trial spends or which data it reads: every
# trial must have the one accounted event, so they are never searched.
FORBIDDEN = frozenset(
  {
    "num_steps",
    # The privacy block but its clip (the noise scales with it).
    *(
      f"privacy.{name}"
      for name in (
        "target_epsilon",
        "noise_multiplier",
        "delta",
        "sampling",
        "expected_batch_size",
        "noise",
        "grid_points",
        "neighboring",
        "num_queries",
        "mechanism",
      )
    ),
    "epsilon_budget",
    "estimator",
    "dataset",
    "insecure_test_noise",
    "test_run",
    "workdir",
    "public_proxy",
    "validation_size",
  }
)

_DIST = re.compile(r"^(uniform|loguniform|randint)\((.*)\)$")


class Axis(NamedTuple):
  """One searched field: ``kind`` is 'choice', 'uniform', 'loguniform' or
  'randint'; ``values`` the choices or the two bounds."""

  field: str
  kind: str
  values: tuple

  @property
  def size(self) -> float:
    """Number of distinct values (inf for a continuous range)."""
    if self.kind == "choice":
      return len(set(map(repr, self.values)))
    if self.kind == "randint":
      return self.values[1] - self.values[0] + 1
    return math.inf if self.values[1] > self.values[0] else 1

  def sample(self, rng: np.random.Generator):
    if self.kind == "choice":
      return self.values[int(rng.integers(len(self.values)))]
    lo, hi = self.values
    if self.kind == "uniform":
      return float(rng.uniform(lo, hi))
    if self.kind == "loguniform":
      return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
    return int(rng.integers(lo, hi + 1))


def _literal(text: str):
  try:
    return ast.literal_eval(text.strip())
  except (ValueError, SyntaxError):
    return text.strip()


def axis(field: str, spec: Any) -> Axis:
  """An :class:`Axis` from a list of values or a distribution string."""
  if field.split(".")[0] in FORBIDDEN or field in FORBIDDEN:
    raise ValueError(
      f"{field!r} cannot be searched: it changes what a trial spends or "
      "reads, and every trial must have the one accounted privacy event."
    )
  if isinstance(spec, str):
    match = _DIST.match(spec.replace(" ", ""))
    if match:
      bounds = tuple(_literal(b) for b in match.group(2).split(","))
      if len(bounds) != 2 or not all(
        isinstance(b, (int, float)) for b in bounds
      ):
        raise ValueError(f"{field}: {spec!r} needs two numeric bounds.")
      lo, hi = bounds
      if hi < lo or (match.group(1) == "loguniform" and lo <= 0):
        raise ValueError(f"{field}: {spec!r} is an empty or invalid range.")
      return Axis(field, match.group(1), (lo, hi))
    spec = [_literal(v) for v in spec.split(",")]
  if not isinstance(spec, (list, tuple)) or not spec:
    raise ValueError(f"{field}: expected a list of values or a range.")
  return Axis(field, "choice", tuple(spec))


class SearchSpace(NamedTuple):
  axes: tuple[Axis, ...]

  @property
  def size(self) -> float:
    return math.prod(a.size for a in self.axes)

  def check(self) -> None:
    """Refuses an empty space or one with a single point."""
    if not self.axes:
      raise ValueError("The search space is empty: give --search.<field>=...")
    if self.size < 2:
      raise ValueError(
        "The search space has a single point: there is nothing to select, "
        "and a tuning would spend the repeat-and-select overhead for "
        "nothing; run experiments.run instead."
      )

  def point(self, secret: bytes, trial: int) -> dict[str, Any]:
    """Trial ``trial``'s point, drawn from the tuning's secret."""
    rng = randomness.numpy_generator(secret, "tuning point", trial)
    return {a.field: a.sample(rng) for a in self.axes}

  def describe(self) -> dict[str, Any]:
    return {
      a.field: {"kind": a.kind, "values": list(a.values)} for a in self.axes
    }


def from_flags(items: dict[str, str]) -> SearchSpace:
  return SearchSpace(tuple(axis(k, v) for k, v in items.items()))


def from_file(path: str) -> SearchSpace:
  """``get_search()`` of the Python file at ``path``."""
  spec = importlib.util.spec_from_file_location("_tuning_search", path)
  if spec is None or spec.loader is None:
    raise ValueError(f"Cannot load a search space from {path!r}.")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  if not hasattr(module, "get_search"):
    raise ValueError(f"{path} defines no get_search().")
  return SearchSpace(
    tuple(axis(k, v) for k, v in dict(module.get_search()).items())
  )
