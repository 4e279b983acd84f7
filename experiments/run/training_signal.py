"""The run's training signal, and the checks that stop a run gone non-finite.

What a step releases is public: the estimator state's ``released`` holds
the ``q`` privatized scalars of a scalar estimator (the norm of the
privatized gradient for a vector one), which the privacy plan already
charges. Their statistics cost no privacy, so they are the run's training
signal: each metrics row carries the mean, the root mean square and the
largest magnitude of the values released since the previous row
(``released_mean``, ``released_rms``, ``released_max_abs``), and
``report.png`` plots the RMS. A loss that blows up shows there first.

Nonsense never comes out as a result: a non-finite released value stops
the run at the step that released it, non-finite parameters stop it at the
next evaluation, checkpoint or the end, each with one paragraph (the step,
what went non-finite, the likely cause and the fix) and a non-zero exit.

Cost: the jitted step also returns five numbers of its released values (a
few flops); the loop reads each step's numbers :data:`LAG` steps later, so
it never waits for the device. The parameter check is one jitted reduction,
run only where the loop already stops (evaluation, checkpoint, end).

A hidden-state run (an estimator declared ``takes_setting``, Noisy-ZOGD)
publishes no intermediate output: its guarantee is for the final iterate
alone. It logs no released values and checks only its final parameters
(stopping earlier would publish when the iterates went non-finite).
"""

from __future__ import annotations

import collections
import json
import os

import jax
import jax.numpy as jnp
import numpy as np

from experiments.run import multihost

# Steps between a step's dispatch and the read of its statistics.
LAG = 2
# The first steps' RMS is the scale of the released values; a value this
# many times larger means the run diverged (clipped, noised values stay
# within a few noise deviations of it; a diverging non-private run grows
# by many orders of magnitude within tens of steps).
BASELINE_STEPS = 5
GROWTH = 1e6
# Released values exactly 0 for this many steps in a row, after non-zero
# ones: the loss no longer responds to the parameters (they grew until the
# perturbation fell below floating-point precision). A noised value is
# exactly 0 rarely (about 7e-5 a step for the default's exact noise), so
# never this many times in a row.
ZERO_STEPS = 20
# Columns of a metrics row (None before any step of the window).
COLUMNS = ("released_mean", "released_rms", "released_max_abs")
FILE_NAME = "released_signal.json"
_KEEP = 4  # windows kept in the file (one per recent checkpoint)


class DivergedError(ValueError):
  """The run diverged: a released value not finite or exploding (or frozen
  at 0), or non-finite parameters."""


def _released(opt_state):
  """The ``released`` values of the estimator state in ``opt_state``."""
  found = jax.tree.leaves(
    opt_state,
    is_leaf=lambda x: hasattr(x, "released") and hasattr(x, "privacy_plan"),
  )
  found = [x.released for x in found if hasattr(x, "released")]
  return found[0] if len(found) == 1 else None


def with_signal(body, publishes: bool):
  """The step ``body`` returning also ``[count, sum, sum of squares, max
  |x|, non-finite count]`` of its released values (``None`` for a run that
  publishes none)."""

  def step(*args):
    params, opt_state = body(*args)
    released = _released(opt_state) if publishes else None
    if released is None:
      return params, opt_state, None
    x = jnp.ravel(released).astype(jnp.float32)
    finite = jnp.isfinite(x)
    safe = jnp.where(finite, x, 0.0)
    stats = jnp.stack(
      [
        jnp.sum(finite).astype(jnp.float32),
        jnp.sum(safe),
        jnp.sum(safe * safe),
        jnp.max(jnp.abs(safe)),
        jnp.sum(~finite).astype(jnp.float32),
      ]
    )
    return params, opt_state, stats

  return step


def _merge(acc, s) -> list[float]:
  """Window statistics ``acc`` with one step's ``s`` added."""
  return [acc[0] + s[0], acc[1] + s[1], acc[2] + s[2], max(acc[3], s[3])]


@jax.jit
def _all_finite(tree) -> jax.Array:
  leaves = [
    jnp.all(jnp.isfinite(x))
    for x in jax.tree.leaves(tree)
    if jnp.issubdtype(x.dtype, jnp.inexact)
  ]
  return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


def diverged(run, step: int, what: str) -> DivergedError:
  """The one-paragraph error for a run that went non-finite at ``step``."""
  settings = run.settings
  lr = settings.learning_rate
  source = settings.learning_rate_source
  if lr is None:
    cause = "the step size (the theorem's limit) is too large for this loss"
    fix = "set a smaller learning_rate"
  elif source == "set by the config":
    cause = f"learning_rate {lr:g} is too large for {settings.estimator}"
    fix = f"lower learning_rate (e.g. --config.learning_rate={lr / 10:g})"
  else:
    cause = (
      f"learning_rate {lr:g} ({source}) is too large for this model and data"
    )
    fix = f"set a smaller one (e.g. --config.learning_rate={lr / 10:g})"
  where = (
    " in a new workdir (or with --resume=force: the ledger keeps the "
    "privacy already spent)"
    if run.workdir
    else ""
  )
  return DivergedError(
    f"the run diverged at step {step}: {what}, so it stopped and reports "
    f"no result. Likely cause: {cause} (or a loss that "
    f"overflows). Fix: {fix}{where}."
  )


class Signal:
  """The released values' statistics between metrics rows, and the checks."""

  def __init__(self, run, first_step: int):
    self.run = run
    self.publishes = not run.spec.takes_setting
    self.pending = collections.deque()
    self.window = np.zeros(5)
    self.start = np.zeros(5)  # the first BASELINE_STEPS steps
    self.taken = 0
    self.zeros = 0  # steps in a row whose released values are all 0
    self.moved = False  # a released value was non-zero
    self.path = (
      os.path.join(run.workdir, FILE_NAME)
      if run.workdir and self.publishes
      else None
    )
    if first_step and self.path and os.path.exists(self.path):
      with open(self.path) as f:
        saved = json.load(f)
      if str(first_step) in saved:  # the window the checkpoint was taken in
        self.window = np.asarray(saved[str(first_step)], np.float64)
      self.start = np.asarray(saved.get("start", self.start), np.float64)
      self.taken = BASELINE_STEPS if "start" in saved else 0

  def record(self, step: int, stats) -> None:
    """After the step that made ``step`` steps: its statistics, read
    :data:`LAG` steps later."""
    if stats is None:
      return
    self.pending.append((step, stats))
    while len(self.pending) > LAG:
      self._take(*self.pending.popleft())

  def flush(self) -> None:
    while self.pending:
      self._take(*self.pending.popleft())

  def _take(self, step: int, stats) -> None:
    s = multihost.fetch(stats).astype(np.float64)
    if s[4] > 0:
      raise diverged(
        self.run,
        step,
        f"{int(s[4])} of the {int(s[0] + s[4])} values it released "
        f"{'is' if s[4] == 1 else 'are'} not finite",
      )
    self.window[:4] = _merge(self.window, s)
    self._check_zeros(step, s)
    if self.taken < BASELINE_STEPS:
      self.start[:4] = _merge(self.start, s)
      self.taken += 1
      return
    scale = np.sqrt(self.start[2] / max(self.start[0], 1.0))
    if scale > 0 and s[3] > GROWTH * scale:
      raise diverged(
        self.run,
        step,
        f"it released {s[3]:.3g}, {s[3] / scale:.1e} times the RMS of the "
        f"first {BASELINE_STEPS} steps' released values ({scale:.3g})",
      )

  def _check_zeros(self, step: int, s) -> None:
    self.zeros = self.zeros + 1 if s[3] == 0 else 0
    self.moved = self.moved or s[3] > 0
    if self.moved and self.zeros >= ZERO_STEPS:
      raise diverged(
        self.run,
        step,
        f"its released values have been exactly 0 for {ZERO_STEPS} steps, "
        "after non-zero ones: the loss no longer responds to the "
        "parameters (they grew until the perturbation fell below "
        "floating-point precision)",
      )

  def row(self) -> dict:
    """The row's columns (the window since the last row), then a new
    window; nothing for a run that publishes no released values."""
    if not self.publishes:
      return {}
    self.flush()
    n, total, squares, top = self.window[:4]
    self.window = np.zeros(5)
    if not n:
      return dict.fromkeys(COLUMNS)
    values = (total / n, float(np.sqrt(squares / n)), top)
    return {k: float(v) for k, v in zip(COLUMNS, values)}

  def check_params(self, params, step: int) -> None:
    """Non-finite parameters stop the run (a hidden-state run: only its
    final ones)."""
    if not self.publishes and step < self.run.settings.num_steps:
      return
    if not bool(multihost.fetch(_all_finite(params))):
      raise diverged(self.run, step, "its parameters are not finite")

  def save(self, step: int) -> None:
    """The current window, for a run resumed at ``step`` (before the
    checkpoint of ``step`` is written)."""
    if not self.path or not self.run.primary:
      return
    self.flush()
    saved = {}
    if os.path.exists(self.path):
      with open(self.path) as f:
        saved = json.load(f)
    saved.pop("start", None)
    saved[str(step)] = self.window.tolist()
    keep = {k: saved[k] for k in sorted(saved, key=int)[-_KEEP:]}
    if self.taken >= BASELINE_STEPS:
      keep["start"] = self.start.tolist()
    tmp = self.path + ".tmp"
    with open(tmp, "w") as f:
      json.dump(keep, f)
    os.replace(tmp, self.path)
