"""Training loop shared by every experiment: private batches in, metrics out.

One run, top to bottom (:func:`train`):

1. :func:`experiments.run.resolution.resolve` checks the config (everything
   that needs no data) and reads it, once, into the run's typed
   :class:`~experiments.run.settings.Settings`: nothing after it reads the
   config. :func:`experiments.run.resolved_run.setup` stores the run's
   secret and privacy ledger durably in the workdir, loads the data,
   resolves the estimator, its privacy plan
   (calibrated for ``target_epsilon`` unless ``noise_multiplier`` is set),
   the samplers and the placement once, and restores the latest checkpoint;
2. :class:`experiments.run.loop.Loop` runs the one jitted step
   (:mod:`experiments.run.step`), the ledger recording each block of steps
   before it runs, with hooks for evaluation, checkpoints and the
   trajectory log;
3. :func:`finish` reports the task's metrics with the ``(epsilon, delta)``
   of the ledger, next to the planned target.

An estimator declared ``takes_setting`` (Noisy-ZOGD) gets its setting from
:mod:`experiments.run.hidden_state_run`, which also checks it before any data is
loaded; :mod:`experiments.run.final_iterate` adds the final-iterate
(hidden-state) epsilon of the setting the ledger records to the report.

Randomness: ``config.seed`` is PUBLIC (model initialization, directions,
public batches). The noise and the Poisson batches come from a 256-bit
secret drawn from OS entropy and kept in ``workdir/private`` (mode 0600)
and in the checkpoints: both are secret material.
``config.insecure_test_noise=True`` derives them from the seed instead, for
tests; such a run is reported as NOT private.

A crash or a kill at any moment loses no privacy accounting: rerun the same
command; :mod:`experiments.run.run_ledger` states the replay rule.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import Any

import ml_collections

from experiments.run import (
  chance,
  checkpointing,
  config_defaults,
  final_iterate,
  resolution,
)
from experiments.run import metrics as metrics_lib
from experiments.run import progress as progress_bar
from experiments.run.loop import Loop
from experiments.run.resolved_run import Run, setup
from experiments.tasks.task import Task

# result.json's word on physical_batch_size.
PHYSICAL_NOTE = (
  "a memory setting, not a privacy one: each step's per-example work runs "
  "this many rows at a time (null: the whole batch at once), still one "
  "release per step; the plan, the noise and epsilon do not depend on it"
)
# A resumed run may end this far above its calibrated target (calibration
# tolerance) before the report warns.
TARGET_SLACK = 1e-3


def train(
  config: ml_collections.ConfigDict,
  *,
  progress: bool = True,
  stop_after: int | None = None,
  task: Task | None = None,
  check_run: Callable[[Run], None] | None = None,
  defaults_filled: Sequence[str] = (),
) -> dict[str, Any]:
  """Runs (or resumes) one experiment and returns its final metrics.

  ``config`` need not start from ``configs/default.py``: the fields it
  leaves out take the default's values
  (:func:`experiments.run.config_defaults.complete`), named on the first
  line printed and in the result's ``defaults_filled`` (with
  ``defaults_filled``: those the caller, the command line, already filled).

  ``stop_after``: stop (after checkpointing) once this many steps are done,
  as if interrupted; a later call with the same ``workdir`` resumes.
  ``task``: the task ``config`` builds, already built (a sweep over fields
  the task does not read builds it once); default: built here.
  ``check_run``: called with the resolved :class:`Run` before its first
  step (tuning checks a trial's plan there, on the run's own resolution).
  """
  config, filled = config_defaults.complete(config)
  if filled:
    print(config_defaults.note(config, filled))
  try:
    run = setup(*resolution.resolve(config), task=task)
  except AttributeError as e:  # a field the default cannot give (l2, ...)
    missing = config_defaults.missing_field(e)
    if missing is None:
      raise
    raise ValueError(missing) from e
  steps = run.settings.num_steps  # counted (num_epochs)
  if check_run is not None:
    check_run(run)
  loop = Loop(run, progress=progress)
  last = steps if stop_after is None else stop_after
  last = min(last, steps)
  _announce_resume(run, last)
  if run.restored_step == 0 and not loop.history:
    progress_bar.stage("evaluating step 0")
    loop.evaluate(0, 0.0)
  loop.run_steps(last)
  done = int(loop.state["step"])
  if done < steps:  # interrupted on purpose (stop_after)
    loop.trim(done)
    loop.checkpoint(done)
    return {
      "interrupted_at": done,
      "params_sha256": checkpointing.tree_digest(loop.state["params"]),
    }
  if not loop.history or loop.history[-1]["step"] != done:
    loop.evaluate(done, loop.train_seconds)
  loop.checkpoint(done)
  result = finish(run, loop, [*defaults_filled, *filled])
  if run.checkpointer is not None:
    run.checkpointer.close()
  return result


def _announce_resume(run: Run, last: int) -> None:
  """The resume line, and the replay note when steps the ledger already
  holds will be computed again (never for a run with nothing left)."""
  first = run.restored_step
  counted = 0 if run.ledger is None else run.ledger.on_disk_at_start
  if first == 0 and counted == 0:
    return
  print(
    f"resumed from step {first} (epsilon so far {run.epsilon():.4f}, "
    f"{counted} private steps in the ledger)"
  )
  replayed = None if run.ledger is None else run.ledger.replayed(first, last)
  if replayed is not None:
    a, b = replayed
    print(
      f"note: steps {a}..{b - 1} may already have been computed (the "
      "ledger holds them, beyond the restored checkpoint): they are "
      "recomputed with fresh noise and fresh batches and charged again."
    )


def _privacy_fields(run: Run, done: int) -> dict[str, Any]:
  plan, settings = run.plan, run.settings
  out = {
    "noise_multiplier": plan.noise_multiplier if plan.is_noised else None,
    "noise_multiplier_source": run.how,
    "target_epsilon": (
      settings.privacy.target_epsilon
      if run.how.startswith("calibrated")
      else None
    ),
    "epsilon": run.epsilon(),
    "delta": settings.privacy.delta if plan.is_noised else None,
    "private": plan.is_private,
    "privacy_plan": plan.to_dict(),
    "privacy": plan.describe(),
  }
  if run.ledger is not None:
    ledger = run.ledger.ledger
    out["ledger"] = ledger.summary()
    if len(ledger.plans) > 1:  # a resume under another plan
      out["ledger"]["segments"] = [
        {"num_steps": n, "noise_multiplier": p.noise_multiplier}
        for p, n in ledger.segments
      ]
  target = out["target_epsilon"]
  if target is not None and out["epsilon"] > target * (1 + TARGET_SLACK):
    out["warning"] = (
      f"epsilon {out['epsilon']:.4f} exceeds the planned target {target:g} "
      f"(the ledger counts {run.ledger.num_steps} steps, the plan "
      f"{settings.num_steps})."
    )
  pure = (
    plan.mechanism.pure_epsilon(plan.sampling_probability, done)
    if plan.is_noised
    else None
  )
  if pure is not None:  # DP-ZO Thm 3.1 for the subsampled Laplace
    out["pure_epsilon"] = pure
  return out


def _run_fields(run: Run, done: int, filled) -> dict[str, Any]:
  """The run's length in steps and epochs, its physical batch (a memory
  setting, not a privacy one) and the fields the default filled."""
  settings = run.settings
  out = {
    "num_steps": done,
    "num_epochs": settings.epochs(done),
    "num_epochs_source": (
      "set by the config (num_epochs)"
      if settings.num_epochs is not None
      else "counted from num_steps (expected batch / training set size)"
    ),
    "physical_batch_size": settings.physical_batch_size,
    "physical_batch_note": PHYSICAL_NOTE,
  }
  if filled:
    out["defaults_filled"] = list(filled)
  return out


def finish(run: Run, loop: Loop, filled=()) -> dict[str, Any]:
  """The result of a finished run; ``result.json`` and the plot written
  (``filled``: the config's fields that came from ``configs/default.py``)."""
  settings, history = run.settings, loop.history
  done = int(loop.state["step"])
  names = metrics_lib.metric_names(history[-1])
  result = {
    "estimator": settings.estimator,
    "dataset": settings.dataset,
    **{k: history[-1][k] for k in names},
    "headline_metric": names[0],
    "metric_names": names,
    **chance.assess(run.task, {k: history[-1][k] for k in names}),
    "public_proxy": settings.public_proxy,
    **_run_fields(run, done, filled),
    "learning_rate": settings.learning_rate,
    "learning_rate_source": run.learning_rate_source,
    **_privacy_fields(run, done),
    "sampling": run.sampler.scheme,
    "mesh": dict(run.placement.mesh.shape),
    "train_seconds": loop.seconds_offset + loop.train_seconds,
    "history": history,
    "params_sha256": checkpointing.tree_digest(loop.state["params"]),
  }
  if loop.private_evaluation:
    result["evaluation_privacy"] = metrics_lib.private_evaluation_note(
      names, len(run.task.test_labels)
    )
  if run.spec.takes_setting and settings.hidden_state.report:
    result["final_iterate"] = final_iterate.final_iterate(
      settings, run.ledger.ledger, done, history=history
    )
  if run.workdir and run.primary:
    result["plot"] = metrics_lib.plot_report(
      history,
      os.path.join(run.workdir, "report.png"),
      f"{settings.estimator} on {settings.dataset}",
    )
    loop.persist_ledger()
    with open(os.path.join(run.workdir, "result.json"), "w") as f:
      json.dump(
        {"config": settings.config_dict(), **result},
        f,
        indent=2,
        default=str,
      )
  return result
