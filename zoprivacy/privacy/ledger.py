"""The privacy ledger: a thin record of the steps a run actually executed.

:class:`PrivacyLedger` keeps ``(PrivacyPlan, num_steps)`` segments, in the
order executed, and the step ranges ``[start, stop)`` they were recorded for
(:attr:`PrivacyLedger.ranges`): a step recorded twice (a replay after a
crash) lies in two ranges, and :meth:`PrivacyLedger.times_recorded` says how
many times a step may already have been computed, which a runner uses to
draw fresh randomness for every computation of a step. Epsilon is always computed from those plans by the one
route every report uses (:meth:`PrivacyPlan.pld`: dp_accounting's
pessimistic PLD, add/remove maximum, float64); segments with different plans
are composed with ``PrivacyLossDistribution.compose`` within a memory bound,
or by a route :mod:`~zoprivacy.privacy.ledger_composition` names. A budget, if set, is
checked *before* a step is recorded, and the ledger round-trips through JSON
next to a checkpoint.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Any

from zoprivacy.accounting import subsampled_rdp
from zoprivacy.privacy import ledger_composition
from zoprivacy.privacy import plan as plan_lib

_FORMAT = "zoprivacy.accounting.PrivacyLedger"
_VERSION = 3
# Version 2 had no step ranges. It was written by a runner that drew the
# randomness of step t from (secret, t) alone (attempt 0, every time), so
# reading its N steps as the one range [0, N) is sound: a step t < N gets
# attempt >= 1 (fresh randomness, never drawn by that code), and every step
# it computed lies below N (each was recorded before it ran).
_READABLE = (2, _VERSION)


class CorruptLedgerError(ValueError):
  """A ledger file exists but is truncated, damaged or not a ledger."""


class PrivacyBudgetExceededError(RuntimeError):
  """Raised, before anything runs or is recorded, for a step over budget."""

  def __init__(
    self,
    message: str,
    *,
    projected_epsilon: float,
    epsilon_budget: float,
    steps_remaining: int | None = None,
  ):
    super().__init__(message)
    self.projected_epsilon = projected_epsilon
    self.epsilon_budget = epsilon_budget
    self.steps_remaining = steps_remaining


class PrivacyLedger:
  """Executed DP steps, their epsilon at ``delta``, and an optional budget."""

  def __init__(self, *, delta: float, epsilon_budget: float | None = None):
    if not 0.0 < float(delta) < 1.0:
      raise ValueError(f"delta must lie in (0, 1), got {delta!r}.")
    if epsilon_budget is not None and not float(epsilon_budget) > 0:
      raise ValueError(f"epsilon_budget must be > 0, got {epsilon_budget!r}.")
    self.delta = float(delta)
    self.epsilon_budget = (
      None if epsilon_budget is None else float(epsilon_budget)
    )
    self._segments: list[tuple[plan_lib.PrivacyPlan, int]] = []
    self._ranges: list[tuple[int, int]] = []  # contiguous ones merged
    self._allowance: dict[plan_lib.PrivacyPlan, tuple[int, int]] = {}

  # -------------------------------------------------------------- reading
  @property
  def segments(self) -> tuple[tuple[plan_lib.PrivacyPlan, int], ...]:
    return tuple(self._segments)

  @property
  def num_steps(self) -> int:
    return sum(n for _, n in self._segments)

  @property
  def ranges(self) -> tuple[tuple[int, int], ...]:
    """The recorded step ranges ``[start, stop)``, in the order recorded
    (a range continuing the previous one is merged into it)."""
    return tuple(self._ranges)

  def times_recorded(self, step: int) -> int:
    """How many recorded ranges hold ``step``: how many times it may
    already have been computed (the attempt of its next computation)."""
    return sum(start <= step < stop for start, stop in self._ranges)

  def next_boundary(self, step: int) -> float:
    """The first range boundary after ``step`` (``inf`` if none): up to
    it, :meth:`times_recorded` does not change."""
    ends = [e for r in self._ranges for e in r if e > step]
    return min(ends, default=math.inf)

  @property
  def plans(self) -> tuple[plan_lib.PrivacyPlan, ...]:
    return tuple(dict.fromkeys(p for p, _ in self._segments))

  def _epsilon_of(self, segments) -> float:
    return self._composition_of(segments).epsilon

  def _composition_of(self, segments) -> ledger_composition.Composition:
    segments = [(p, n) for p, n in segments if n > 0]
    if not segments:
      return ledger_composition.Composition(0.0, "")
    if any(not p.is_noised for p, _ in segments):
      return ledger_composition.Composition(math.inf, "")
    if len(segments) == 1:
      plan, n = segments[0]
      return ledger_composition.Composition(plan.epsilon(n, self.delta), "")
    rdp = [(p.mechanism.rdp_event(p.sampling), n) for p, n in segments]
    if any(event is not None for event, _ in rdp):
      return ledger_composition.Composition(_rdp_epsilon(rdp, self.delta), "")
    # PLDs within a memory bound, or a looser route it names
    return ledger_composition.compose(segments, self.delta)

  def composition(self) -> ledger_composition.Composition:
    """The epsilon of every recorded step and how it was composed (a
    route other than each plan's own accountant is named)."""
    return self._composition_of(self._segments)

  def _prefix(self, num_steps: int):
    out, left = [], int(num_steps)
    for plan, n in self._segments:
      take = min(n, left)
      out.append((plan, take))
      left -= take
    return out

  def epsilon(self, num_steps: int | None = None) -> float:
    """Epsilon at ``delta`` after the first ``num_steps`` recorded steps."""
    if num_steps is None:
      return self._epsilon_of(self._segments)
    if not 0 <= num_steps <= self.num_steps:
      raise ValueError(f"num_steps must be in [0, {self.num_steps}].")
    return self._epsilon_of(self._prefix(num_steps))

  def projected_epsilon(
    self, plan: plan_lib.PrivacyPlan, num_steps: int = 1
  ) -> float:
    """Epsilon if ``num_steps`` more steps of ``plan`` were recorded."""
    return self._epsilon_of(self._appended(plan, num_steps))

  def _appended(self, plan, num_steps):
    segs = list(self._segments)
    if segs and segs[-1][0] == plan:
      segs[-1] = (plan, segs[-1][1] + num_steps)
    else:
      segs.append((plan, num_steps))
    return segs

  # ---------------------------------------------------------------- budget
  def steps_within_budget(
    self, plan: plan_lib.PrivacyPlan, max_steps: int
  ) -> int:
    """Most further steps of ``plan`` (at most ``max_steps``) within budget.

    Epsilon is monotone in the number of steps, so a binary search over
    ``plan.epsilon`` finds it with ``O(log max_steps)`` accountings.
    """
    if self.epsilon_budget is None:
      return max_steps
    fits = lambda m: self.projected_epsilon(plan, m) <= self.epsilon_budget
    if fits(max_steps):
      return max_steps
    lo, hi = 0, max_steps  # fits(lo) holds, fits(hi) does not
    while hi - lo > 1:
      mid = (lo + hi) // 2
      lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo

  def check_can_spend(
    self, plan: plan_lib.PrivacyPlan, num_steps: int = 1
  ) -> None:
    """Raises :class:`PrivacyBudgetExceededError` if the steps do not fit."""
    if self.epsilon_budget is None:
      return
    total = self.num_steps + num_steps
    if self._single_plan(plan):
      # One plan throughout: search the allowance once (and again, over a
      # doubled horizon, only when a run outgrows it), not at every step.
      allowed, horizon = self._allowance.get(plan, (0, 0))
      if total > allowed and allowed == horizon:
        horizon = max(1024, 2 * total)
        allowed = (
          self.steps_within_budget(plan.replace(), horizon)
          if not self._segments
          else self.num_steps
          + self.steps_within_budget(plan, horizon - self.num_steps)
        )
        self._allowance[plan] = (allowed, horizon)
      if total <= allowed:
        return
    projected = self.projected_epsilon(plan, num_steps)
    if projected <= self.epsilon_budget:
      return
    remaining = self.steps_within_budget(plan, num_steps)
    raise PrivacyBudgetExceededError(
      f"{num_steps} more step(s) would spend epsilon {projected:.4f} > "
      f"budget {self.epsilon_budget:g} at delta {self.delta:g}; "
      f"{remaining} step(s) still fit. [{plan.describe()}]",
      projected_epsilon=projected,
      epsilon_budget=self.epsilon_budget,
      steps_remaining=remaining,
    )

  def _single_plan(self, plan) -> bool:
    return all(p == plan for p, _ in self._segments)

  def record(
    self,
    plan: plan_lib.PrivacyPlan,
    num_steps: int = 1,
    *,
    first_step: int | None = None,
  ) -> None:
    """Records ``num_steps`` executed steps of ``plan`` (budget first), the
    steps ``first_step ..`` (default: right after the last recorded range)."""
    if int(num_steps) != num_steps or num_steps < 1:
      raise ValueError(f"num_steps must be an integer >= 1, got {num_steps!r}.")
    if first_step is None:
      first_step = self._ranges[-1][1] if self._ranges else 0
    if int(first_step) != first_step or first_step < 0:
      raise ValueError(f"first_step must be >= 0, got {first_step!r}.")
    self.check_can_spend(plan, int(num_steps))
    self._segments = self._appended(plan, int(num_steps))
    self._add_range(int(first_step), int(first_step) + int(num_steps))

  def _add_range(self, start: int, stop: int) -> None:
    if self._ranges and self._ranges[-1][1] == start:
      self._ranges[-1] = (self._ranges[-1][0], stop)
    else:
      self._ranges.append((start, stop))

  def trim(self, stop: int) -> None:
    """Ends the last recorded range at ``stop``: its steps from ``stop`` on
    were recorded but never computed (a graceful stop). Only those steps
    are removed; anything else is refused."""
    if not self._ranges:
      raise ValueError("Nothing recorded: nothing to trim.")
    start, end = self._ranges[-1]
    plan, n = self._segments[-1]
    cut = end - int(stop)
    if not (start <= stop <= end and cut <= n):
      raise ValueError(
        f"Cannot trim the last range [{start}, {end}) to stop {stop}."
      )
    if cut == 0:
      return
    self._ranges[-1] = (start, int(stop))
    if start == stop:
      self._ranges.pop()
    self._segments[-1] = (plan, n - cut)
    if n == cut:
      self._segments.pop()

  # ------------------------------------------------------------- reporting
  def report(self) -> str:
    composed = self.composition()
    lines = [
      f"privacy ledger: {self.num_steps} steps, (epsilon, delta) = "
      f"({composed.epsilon:.4f}, {self.delta:g})"
    ]
    if composed.why:
      lines.append(f"  composed by {composed.method}: {composed.why}")
    for plan, n in self._segments:
      lines.append(f"  {n} steps: {plan.describe()}")
    if self.epsilon_budget is not None:
      lines.append(f"  budget: epsilon {self.epsilon_budget:g}")
    return "\n".join(lines)

  def summary(self) -> dict[str, Any]:
    composed = self.composition()
    out = {}
    if composed.why:
      out = {"composition": composed.method, "composition_why": composed.why}
    return {
      **out,
      "num_steps": self.num_steps,
      "epsilon": composed.epsilon,
      "delta": self.delta,
      "epsilon_budget": self.epsilon_budget,
      "plans": [p.describe() for p in self.plans],
    }

  def to_dict(self) -> dict[str, Any]:
    return {
      "format": _FORMAT,
      "version": _VERSION,
      "delta": self.delta,
      "epsilon_budget": self.epsilon_budget,
      "segments": [
        {"plan": p.to_dict(), "num_steps": n} for p, n in self._segments
      ],
      "ranges": [list(r) for r in self._ranges],
    }

  @classmethod
  def from_dict(cls, data: dict[str, Any]) -> PrivacyLedger:
    if data.get("format") != _FORMAT or data.get("version") not in _READABLE:
      raise ValueError(
        "Not a zoprivacy privacy ledger of version "
        f"{' or '.join(map(str, _READABLE))}: {data.get('format')!r} "
        f"v{data.get('version')!r}."
      )
    ledger = cls(delta=data["delta"], epsilon_budget=data["epsilon_budget"])
    for seg in data["segments"]:
      ledger._segments = ledger._appended(  # pylint: disable=protected-access
        plan_lib.PrivacyPlan.from_dict(seg["plan"]),
        int(seg["num_steps"]),
      )
    total = ledger.num_steps
    old = data["version"] == 2  # one range [0, N): see _READABLE
    ranges = ([[0, total]] if total else []) if old else data["ranges"]
    for start, stop in ranges:
      if not 0 <= int(start) < int(stop):
        raise ValueError(f"Bad step range [{start}, {stop}).")
      ledger._add_range(int(start), int(stop))  # pylint: disable=protected-access
    if sum(b - a for a, b in ledger.ranges) != total:
      raise ValueError(
        f"The step ranges {ledger.ranges} do not hold the {total} steps."
      )
    return ledger

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), indent=2, sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> PrivacyLedger:
    return cls.from_dict(json.loads(text))

  def save(self, path) -> None:
    """Writes the JSON atomically: temp file, fsync, rename, fsync dir.

    A crash or a full disk mid-write leaves the previous file intact (the
    error propagates; the temporary file is removed).
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(
      prefix=os.path.basename(path) + ".", suffix=".tmp", dir=directory
    )
    try:
      with os.fdopen(fd, "w") as f:
        f.write(self.to_json())
        f.flush()
        os.fsync(f.fileno())
      os.replace(tmp, path)
    except BaseException:
      if os.path.exists(tmp):
        os.unlink(tmp)
      raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
      os.fsync(dir_fd)
    finally:
      os.close(dir_fd)

  @classmethod
  def load(cls, path) -> PrivacyLedger:
    """Reads a ledger; a truncated or damaged file raises CorruptLedgerError
    (it is never silently replaced by an empty ledger)."""
    with open(path) as f:
      text = f.read()
    try:
      return cls.from_json(text)
    except (ValueError, KeyError, TypeError) as e:
      raise CorruptLedgerError(
        f"Privacy ledger {path} is truncated or damaged "
        f"({type(e).__name__}: {e}); refusing to reset it."
      ) from e


def _rdp_epsilon(segments, delta: float) -> float:
  """Segments of RDP-accounted plans (exact vector noise) composed in RDP."""
  if any(event is None for event, _ in segments):
    raise ValueError(
      "A ledger cannot compose an RDP-accounted plan with a PLD-accounted "
      "one; keep one noise kind per run."
    )
  return subsampled_rdp.composed_epsilon(segments, delta)
