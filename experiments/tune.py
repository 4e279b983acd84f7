r"""Private hyperparameter tuning whose cost is accounted: repeat and select.

  python -m experiments.tune --config configs/default.py \
      --search.learning_rate=0.01,0.02,0.05 --mean_trials=3 \
      --config.workdir=/tmp/tune
  python -m experiments.tune --config configs/default.py \
      --search=configs/default_search.py --distribution=geometric \
      --mean_trials=4 --config.workdir=/tmp/tune

Papernot and Steinke (2022): the number of trials ``K`` is drawn in secret
from a Poisson (``--distribution=poisson``, the default), geometric,
logarithmic or truncated negative binomial (``--shape``) distribution of
mean ``--mean_trials``. Each trial is a whole private run
(:func:`experiments.run.train.train`, its own workdir) at hyperparameters drawn
at random from the search space, trained on the private training set less a
private validation part (``--validation_fraction``, a neighbour-stable
split: each record held out by a keyed hash of itself); its selection score
is the number of correct validation predictions plus exact discrete
Gaussian noise (``--score_noise``, in examples), so the score is part of the
accounted mechanism. Only the best trial's model and noisy score are
released.

Trials add exact discrete noise, as any run does by default
(``--config.privacy.noise=float`` is the weaker floating-point opt-in, named
in the plan and the report). The total epsilon is dp_accounting's RDP
epsilon of ``RepeatAndSelectDpEvent(trial_event, mean, shape)`` at integer
orders, ``trial_event`` being one trial's ``num_steps`` Poisson-subsampled
Gaussian steps (at integer orders, a bound on the subsampled discrete
Gaussian's; :mod:`experiments.tuning.budget`) composed with its score. The
per-trial noise multiplier is the smallest whose total meets
``config.privacy.target_epsilon`` (or ``--trial_epsilon`` sets the per-trial
target, refused when the total would exceed ``target_epsilon`` or
``epsilon_budget``).

``K`` is never written to a released file nor printed: ``result.json``
holds the per-trial and total epsilon, delta and the distribution. The
secret, the trials and their scores live in ``<workdir>/secret/`` (0700),
secret material like a checkpoint. A restarted tuning reads its secret back
and continues with the same ``K``, the same points and the same trials.
"""

from __future__ import annotations

import json
import math
import os
import sys

from absl import app, flags

from experiments import tasks
from experiments.run import cli, errors, train
from experiments.run import workdir as workdir_lib
from experiments.tuning import budget, record, search, store, trials
from experiments.tuning.report import format_report
from zoprivacy.privacy import calibration
from zoprivacy.privacy.value import Target

_SEARCH: dict[str, str] = {}
ACCOUNTANT = (
  "dp_accounting RDP of RepeatAndSelectDpEvent at integer orders (each "
  "step: the sampled Gaussian's RDP, a bound on the subsampled discrete "
  "Gaussian's)"
)
NOISE = {
  "discrete": "exact discrete Gaussian",
  "discrete_vector": "exact vector discrete Gaussian",
  "continuous": "floating-point Gaussian (WEAKER: exposed to floating-point "
  "attacks, Mironov 2012)",
}


def _plan_and_noise(config, trial_task, count, score_noise, trial_epsilon):
  """The trials' plan at the per-trial noise multiplier, and the total."""

  base = trials.trial_base(config)
  plan = trials.trial_plan(base, trial_task)
  budget.step_rdp_event(plan)  # refuses a plan without an integer-order bound
  target = config.privacy.get("target_epsilon")
  cap = config.get("epsilon_budget")
  limit = min(x for x in (target, cap, math.inf) if x is not None)
  if not math.isfinite(limit):
    raise ValueError("Set target_epsilon (the total over all trials).")
  steps = config.num_steps
  if trial_epsilon is not None:
    sigma = calibration.calibrate(
      plan, Target(trial_epsilon, plan.delta, steps)
    ).noise_multiplier
  else:
    sigma = budget.calibrate_trial_noise(
      plan,
      num_steps=steps,
      score_noise=score_noise,
      count=count,
      target_epsilon=limit,
    )
  plan = plan.with_noise_multiplier(sigma)
  event = budget.trial_event(budget.step_rdp_event(plan), steps, score_noise)
  total = budget.total_epsilon(
    event, count, delta=plan.delta, neighboring=plan.neighboring
  )
  if total > limit:
    raise ValueError(
      f"A per-trial epsilon of {trial_epsilon:g} makes the tuning's total "
      f"{total:.4g} ({count.describe()}), over the budget {limit:g}; lower "
      "--trial_epsilon or the mean number of trials."
    )
  return plan, total


def _run_trials(config, space, count, trial_task, plan, score_noise, secrets):
  """Runs (or resumes) the ``K`` trials; ``secrets``: the tuning's secret
  and its state, which gets the scores."""
  workdir, (secret, state) = config.workdir, secrets
  num_trials = budget.draw_trial_count(secret, count)
  size = len(trial_task.test_labels)
  for i in range(num_trials):
    if str(i) in state["trials"]:
      continue
    point = space.point(secret, i)
    trial_config = trials.with_fields(
      trials.trial_base(config),
      {
        **point,
        "privacy.noise_multiplier": plan.noise_multiplier,
        "workdir": store.trial_workdir(workdir, i),
      },
    )

    def same_plan(run, point=point):
      if not budget.same_event(run.plan, plan):
        raise ValueError(f"The point {point} changes the trial's privacy plan.")

    result = train.train(
      trial_config, progress=False, task=trial_task, check_run=same_plan
    )
    state["trials"][str(i)] = {
      "point": point,
      "score": trials.noisy_score(
        result["test_accuracy"], size, secret, i, score_noise
      ),
      "params_sha256": result["params_sha256"],
    }
    store.save_state(workdir, state)
  return state


def _release(config, task, trial_task, plan, state):
  """The best trial's point, noisy score, model and test accuracy (the
  selection recorded first)."""
  done = state["trials"]
  if not done:  # K = 0 is a possible draw: nothing to release
    return None
  best = max(sorted(done, key=int), key=lambda i: done[i]["score"])
  entry = done[best]
  record.record_release(
    config.workdir,
    state,
    {
      "trial": int(best),
      "score": entry["score"],
      "params_sha256": entry["params_sha256"],
    },
  )
  trial_config = trials.with_fields(
    trials.trial_base(config),
    {
      **entry["point"],
      "privacy.noise_multiplier": plan.noise_multiplier,
      "workdir": store.trial_workdir(config.workdir, int(best)),
    },
  )
  params, frozen = trials.final_params(
    trial_config, trial_task, entry["params_sha256"]
  )
  from flax import serialization  # pylint: disable=g-import-not-at-top

  with open(os.path.join(config.workdir, "model.msgpack"), "wb") as f:
    f.write(serialization.to_bytes(params))
  size = len(trial_task.test_labels)
  return {
    "hyperparameters": entry["point"],
    "noisy_validation_correct": entry["score"],
    "noisy_validation_accuracy": entry["score"] / size,
    "test_accuracy": trials.test_accuracy(task, params, frozen),
    "model": "model.msgpack",
  }


def tune(
  config,
  space: search.SearchSpace,
  count: budget.TrialCount,
  *,
  score_noise: float = 5.0,
  trial_epsilon: float | None = None,
  validation_fraction: float = 0.2,
  task=None,
) -> dict:
  """Runs (or resumes) a repeat-and-select tuning; returns what it releases.

  Everything is checked before any trial runs: the space has two points or
  more, the mean is at least one trial, the total meets the budget.
  """
  space.check()
  _refuse_private_evaluation(config)
  _refuse_epochs(config)
  if not config.get("workdir"):
    raise ValueError("A tuning needs config.workdir (its secret lives there).")
  workdir_lib.check_own(config.workdir, "tuning")  # before secret/ is made
  if not score_noise > 0:
    raise ValueError(f"score_noise must be > 0, got {score_noise!r}.")
  if task is None:
    task = tasks.get_task(config)
  trial_task = trials.validation_split(task, validation_fraction, config.seed)
  size = len(trial_task.test_labels)
  plan, _ = _plan_and_noise(
    config, trial_task, count, score_noise, trial_epsilon
  )
  state = store.load_state(config.workdir)
  _claim_workdir(
    config,
    (space, count, state),
    (score_noise, trial_epsilon, validation_fraction),
  )
  insecure = config.get("insecure_test_noise") and config.get("test_run")
  secret = store.load_or_create_secret(
    config.workdir, config.seed if insecure else None
  )
  state = _run_trials(
    config, space, count, trial_task, plan, score_noise, (secret, state)
  )
  steps = record.recorded_steps(config.workdir, plan, config.num_steps)
  result = {
    **_method(space, count),
    **_per_trial(config, plan, steps),
    "score_noise": score_noise,
    "validation_fraction": validation_fraction,
    "validation_size": size,
    **record.total(
      plan, steps, score_noise, count, config.privacy.get("target_epsilon")
    ),
    "accountant": ACCOUNTANT,
    "private": plan.is_private and not insecure,
    "released": _release(config, task, trial_task, plan, state),
  }
  with open(os.path.join(config.workdir, "result.json"), "w") as f:
    json.dump(result, f, indent=2, default=str)
  return result


def _method(space, count) -> dict:
  """The result's method, trial-count distribution and search space."""
  return {
    "method": "repeat and select (Papernot and Steinke 2022)",
    "trial_count_distribution": {
      "distribution": count.distribution,
      "mean": count.mean,
      "shape": count.shape if math.isfinite(count.shape) else "inf",
    },
    "trial_count": "secret (never released)",
    "search": space.describe(),
  }


def _refuse_epochs(config) -> None:
  """A trial's length is its steps (its training set is the task's less
  the validation part, so epochs would count other steps)."""
  if config.get("num_epochs") is not None:
    raise ValueError(
      f"A tuning's trials run num_steps steps each (on the training set "
      f"less its validation part), not num_epochs={config.num_epochs:g}: "
      "set --config.num_steps (and --config.num_epochs=None)."
    )


def _refuse_private_evaluation(config) -> None:
  """The released model's test accuracy must be one: no ``eval_split``."""
  if (config.get("eval_split") or "test") != "test":
    raise ValueError(
      "experiments.tune scores its trials on a private validation part of "
      "its own (--validation_fraction) with counted noise, and reports the "
      "released model's test accuracy; config.eval_split="
      f"{config.eval_split!r} would make that 'test accuracy' one computed "
      "on private records, counted nowhere. Leave eval_split at 'test'."
    )


def _claim_workdir(config, tuning, options) -> None:
  """Claims the workdir for this tuning (config, search, trial count and
  ``(score_noise, trial_epsilon, validation_fraction)``) and binds its
  secret state to it: a rerun of the same tuning resumes, another is
  refused, ``--resume=force`` or not (:mod:`experiments.tuning.record`)."""
  space, count, state = tuning
  score_noise, trial_epsilon, validation_fraction = options
  record.claim(
    config.workdir,
    {
      **config.to_dict(),
      "tuning": {
        "search": space.describe(),
        "trial_count": [count.distribution, count.mean, str(count.shape)],
        "score_noise": score_noise,
        "trial_epsilon": trial_epsilon,
        "validation_fraction": validation_fraction,
      },
    },
    state,
  )


def _per_trial(config, plan, steps: int) -> dict:
  """The result's per-trial privacy: one trial's plan and its epsilon at
  the most steps a trial's ledger records (``steps``)."""
  out = {
    "per_trial_noise": NOISE[plan.noise_kind],
    "per_trial_noise_multiplier": plan.noise_multiplier,
    "per_trial_epsilon": plan.epsilon(steps),
    "per_trial_privacy": plan.describe(),
    "per_trial_plan": plan.to_dict(),
    "per_trial_num_steps": steps,
  }
  if steps > config.num_steps:
    out["replayed_steps"] = (
      f"a trial's ledger records {steps} steps, not {config.num_steps}: "
      "steps computed again after a kill are charged, to every trial"
    )
  return out


def split_search(argv: list[str]) -> list[str]:
  """Takes ``--search.<field>=<spec>`` out of ``argv`` (absl cannot)."""
  kept = []
  for arg in argv:
    if arg.startswith("--search."):
      name, _, value = arg[len("--search.") :].partition("=")
      _SEARCH[name] = value
    else:
      kept.append(arg)
  return kept


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  from absl import logging  # pylint: disable=g-import-not-at-top

  logging.set_verbosity(logging.WARNING)  # no per-trial log lines

  f = flags.FLAGS
  try:
    config = cli.apply_late_overrides(cli.CONFIG.value, False)
    space = (
      search.from_file(f.search) if f.search else search.from_flags(_SEARCH)
    )
    if f.search and _SEARCH:
      space = search.SearchSpace(space.axes + search.from_flags(_SEARCH).axes)
    count = budget.trial_count(f.distribution, f.mean_trials, f.shape)
    result = tune(
      config,
      space,
      count,
      score_noise=f.score_noise,
      trial_epsilon=f.trial_epsilon,
      validation_fraction=f.validation_fraction,
    )
  except (ValueError, *errors.USER_ERRORS) as e:
    if cli.DEBUG.value:
      raise
    print(errors.one_paragraph(e), file=sys.stderr)
    sys.exit(2)
  print(format_report(result))


if __name__ == "__main__":
  flags.DEFINE_string("search", "", "a file whose get_search() is the space")
  flags.DEFINE_float("mean_trials", 3.0, "mean number of trials (>= 1)")
  flags.DEFINE_enum(
    "distribution", "poisson", sorted(budget.DISTRIBUTIONS), "trial count"
  )
  flags.DEFINE_float("shape", None, "negative_binomial's shape in (0, inf)")
  flags.DEFINE_float("score_noise", 5.0, "score noise std, in examples")
  flags.DEFINE_float("trial_epsilon", None, "set the per-trial epsilon")
  flags.DEFINE_float(
    "validation_fraction", 0.2, "share of the training set held out"
  )
  sys.argv = cli.split_argv(split_search(sys.argv))
  app.run(main)
