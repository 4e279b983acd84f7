"""One tuning's trials: the validation split, the trial config, the plan
every trial must have, the noisy score and the released model."""

from __future__ import annotations

import copy
import dataclasses

import jax
import numpy as np

from experiments.run import checkpointing, privacy_config, resolution
from experiments.run import metrics as metrics_lib
from experiments.run.run_setup import state_template
from zoprivacy.data import stable_split
from zoprivacy.privacy import randomness
from zoprivacy.secret_noise.discrete_noise import discrete_gaussian_sample


def _take(tree, idx):
  return jax.tree.map(lambda a: np.asarray(a)[idx], tree)


def validation_split(task, fraction: float, seed: int):
  """``task`` with a private validation part moved to its evaluation set:
  the trials train on the rest and are scored on it.

  Neighbour-stable (:mod:`zoprivacy.data.stable_split`): a training record
  is held out when its keyed hash (public ``seed``) falls below
  ``fraction``, a coin of its own, so adding or removing one record changes
  one part by that record and moves no other. Each trial's accounting
  (its steps on the training part composed with its score on the
  validation part) then covers any neighbour. Both parts are private. Their
  sizes are binomial, treated as public like the dataset size: the trials'
  sampling probability is ``expected_batch_size / n_train``, and the noisy
  accuracy divides the noisy count by ``n_val``.
  """
  if not 0.0 < fraction < 1.0:
    raise ValueError(
      f"validation_fraction must lie in (0, 1), got {fraction!r}."
    )
  u = stable_split.record_uniforms(
    task.train_inputs, seed=seed, purpose="tuning validation"
  )
  held = u < fraction
  val, rest = np.flatnonzero(held), np.flatnonzero(~held)
  if len(val) == 0 or len(rest) == 0:
    raise ValueError(
      f"A validation fraction of {fraction:g} of {len(u)} training "
      f"examples leaves {len(val)} for validation and {len(rest)} for "
      "training; both must be non-empty."
    )
  return dataclasses.replace(
    task,
    train_inputs=_take(task.train_inputs, rest),
    train_labels=np.asarray(task.train_labels)[rest],
    test_inputs=_take(task.train_inputs, val),
    test_labels=np.asarray(task.train_labels)[val],
  )


def with_fields(config, fields: dict):
  """A copy of ``config`` with dotted ``fields`` set (locked stays locked;
  an int given for a float field becomes a float; an unknown field is a
  ``ValueError``)."""
  out = copy.deepcopy(config)
  with out.unlocked():
    for name, value in fields.items():
      *parents, leaf = name.split(".")
      node = out
      for p in parents:
        node = node[p]
      if leaf not in node:
        moved = privacy_config.moved_hint(name)
        raise ValueError(f"Unknown config field {moved or repr(name)}.")
      if isinstance(node[leaf], float) and isinstance(value, int):
        value = float(value)
      node[leaf] = value
  return out


def trial_base(config):
  """The trials' common config: the user's noise (exact discrete noise by
  default; ``privacy.noise='float'`` is the weaker floating-point opt-in,
  named in every plan and report) at a set multiplier, no workdir yet."""
  return with_fields(
    config,
    {
      "privacy.target_epsilon": None,
      "privacy.noise_multiplier": 1.0,
      "workdir": "",
    },
  )


def trial_plan(trial_config, task):
  """The plan one trial runs under, read as the runner reads it."""
  return state_template(*resolution.resolve(trial_config), task)[3]


def noisy_score(accuracy: float, size: int, secret: bytes, trial: int, sigma):
  """The number of correct validation predictions plus exact discrete
  Gaussian noise of parameter ``sigma`` (Canonne, Kamath and Steinke 2020),
  from the tuning secret's stream for ``trial``. Sensitivity one: adding or
  removing a validation record changes the count by at most one and leaves
  the model alone; a training record changes the model, whose steps are
  accounted. ``accuracy`` is ``correct / size`` in float64, so the count is
  recovered exactly."""
  correct = int(round(accuracy * size))
  stream = randomness.KeyedStream(secret, "tuning score noise", trial)
  return correct + discrete_gaussian_sample(float(sigma), stream)


def final_params(trial_config, task, expected_sha256: str):
  """The trial's final parameters, restored from its last checkpoint and
  checked against the digest its run reported."""
  trainable, frozen, opt_state, _ = state_template(
    *resolution.resolve(trial_config), task
  )
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
