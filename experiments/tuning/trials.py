"""One tuning's trials: the validation split, the trial config, the plan
every trial must have, the noisy score and the released model."""

from __future__ import annotations

import copy
import dataclasses

import jax
import numpy as np

from experiments import checkpointing
from experiments import metrics as metrics_lib
from experiments.run_setup import resolve_plan
from zoprivacy.mechanisms import values as mechanisms_accounting
from zoprivacy.privacy import randomness
from zoprivacy.secret_noise.discrete_noise import discrete_gaussian_sample


def _take(tree, idx):
  return jax.tree.map(lambda a: np.asarray(a)[idx], tree)


def validation_split(task, size: int, seed: int):
  """``task`` with ``size`` seeded training examples moved to its evaluation
  set: the trials train on the rest and are scored on them. The seed is
  public (which examples are held out is not what DP protects)."""
  n = task.num_train
  if not 0 < size < n:
    raise ValueError(f"validation_size must lie in (0, {n}), got {size}.")
  order = np.random.default_rng(seed + 11).permutation(n)
  val, rest = np.sort(order[:size]), np.sort(order[size:])
  return dataclasses.replace(
    task,
    train_inputs=_take(task.train_inputs, rest),
    train_labels=np.asarray(task.train_labels)[rest],
    test_inputs=_take(task.train_inputs, val),
    test_labels=np.asarray(task.train_labels)[val],
  )


def with_fields(config, fields: dict):
  """A copy of ``config`` with dotted ``fields`` set."""
  out = copy.deepcopy(config)
  with out.unlocked():
    for name, value in fields.items():
      *parents, leaf = name.split(".")
      node = out
      for p in parents:
        node = node[p]
      if leaf not in node:
        raise ValueError(f"Unknown config field {name!r}.")
      if isinstance(node[leaf], float) and isinstance(value, int):
        value = float(value)
      node[leaf] = value
  return out


def trial_base(config):
  """The trials' common config: floating-point Gaussian noise at a set
  multiplier (dp_accounting's RDP accountant has an event for it; the
  subsampled discrete Gaussian has none), no workdir yet."""
  return with_fields(
    config,
    {
      "exact_noise": False,
      "target_epsilon": None,
      "noise_multiplier": 1.0,
      "workdir": "",
    },
  )


def trial_plan(trial_config, task):
  """The plan one trial runs under, read as the runner reads it."""
  trainable, _ = task.init(jax.random.key(trial_config.seed))
  _, _, plan, _ = resolve_plan(trial_config, trainable, task.num_train)
  return plan


def check_plan(plan) -> None:
  if not isinstance(plan.mechanism, mechanisms_accounting.Gaussian):
    raise ValueError(
      f"Tuning accounts a trial with dp_accounting's RDP accountant, which "
      f"has an event for Poisson-subsampled Gaussian noise only; this "
      f"estimator's plan is {plan.describe()}."
    )


def noisy_score(accuracy: float, size: int, secret: bytes, trial: int, sigma):
  """Correct validation predictions plus exact discrete Gaussian noise
  (sensitivity one), from the tuning secret's stream for ``trial``."""
  correct = int(round(accuracy * size))
  stream = randomness.KeyedStream(secret, "tuning score noise", trial)
  return correct + discrete_gaussian_sample(float(sigma), stream)


def final_params(trial_config, task, expected_sha256: str):
  """The trial's final parameters, restored from its last checkpoint and
  checked against the digest its run reported."""
  trainable, frozen = task.init(jax.random.key(trial_config.seed))
  _, opt_state, _, _ = resolve_plan(trial_config, trainable, task.num_train)
  template = {
    "params": trainable,
    "opt_state": opt_state,
    "step": np.array(0, np.int64),
    "secret": np.zeros(randomness.SECRET_BYTES, np.uint8),
  }
  ckpt = checkpointing.Checkpointer(f"{trial_config.workdir}/checkpoints")
  try:
    state, _ = ckpt.restore(ckpt.latest_step(), template)
  finally:
    ckpt.close()
  if checkpointing.tree_digest(state["params"]) != expected_sha256:
    raise checkpointing.CorruptCheckpointError(
      "The selected trial's checkpoint does not hold its final parameters."
    )
  return state["params"], frozen


def test_accuracy(task, params, frozen) -> float:
  apply = jax.jit(task.apply)
  return metrics_lib.evaluate(
    apply, params, frozen, task.test_inputs, task.test_labels
  )


def default_validation_size(config, num_train: int) -> int:
  size = config.get("validation_size")
  return int(size) if size else min(1000, max(1, num_train // 5))
