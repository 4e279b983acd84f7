"""The runs of the membership-inference experiment: targets and references.

For each setting (DPZero at every epsilon, MeZO, first-order SGD):

* one **target** model, seed 0, trained on the base set plus the member
  canaries; DPZero's noise multiplier is calibrated by the training loop
  for ``(epsilon, DELTA)`` on that training set (``target_epsilon``);
* ``num_references`` **reference** models trained by the same procedure
  on the base set alone (no canary), DPZero with the target's noise
  multiplier; they feed offline LiRA (:mod:`.attacks`). They share the
  target's PUBLIC seed (initialization and directions: public in this
  project's threat model, so the attacker knows them) and differ from it
  only in the secret noise and batches and in the missing canaries. (In
  ``--fast`` mode the insecure test secret comes from the seed, so the
  references repeat the target's noise draws.)

DPZero and MeZO go through the project's training loop
(:func:`experiments.run.train.train`) with the hyperparameters of
``configs/default.py`` and ``configs/mezo.py`` (the same for every
epsilon); the final parameters are read back from the run's checkpoint,
whose directory (which holds the run's secret) is deleted afterwards.
SGD uses :mod:`.first_order`.

All runs are EVALUATION runs of an attack experiment: the canaries and the
membership secret come from fixed seeds chosen by the experimenter, and the
experiment publishes per-canary scores. The estimator's noise and Poisson
batches still come from the run's own secret (OS entropy), or, in
``--fast`` mode only, from the insecure test seed (reproducible).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time

import numpy as np

from configs import default as default_config
from configs import mezo as mezo_config
from experiments import tasks
from experiments.reproductions.mia import attacks, canaries, first_order
from experiments.run import checkpointing, resolution, run_setup, train

DELTA = 1e-5
TARGET_SEED = 0
CANARY_SEED = 20240607  # the experimenter's: canaries and membership


@dataclasses.dataclass(frozen=True)
class Mode:
  """Sizes of one mode (``full`` or the ``fast`` smoke run)."""

  name: str
  num_canaries: int
  canary_kind: str
  num_steps: int
  num_references: int
  epsilons: tuple[float, ...]
  features: tuple[int, ...]
  num_bootstrap: int
  smoke: bool

  def tag(self) -> str:
    feats = "x".join(map(str, self.features))
    return (
      f"m{self.num_canaries}{self.canary_kind}|T{self.num_steps}|cnn{feats}"
    )


MODES = {
  "full": Mode(
    "full",
    500,
    "ood",
    4000,
    4,
    (0.5, 1.0, 2.0, 4.0, 10.0),
    (16, 32),
    1000,
    False,
  ),
  "fast": Mode("fast", 32, "ood", 20, 1, (1.0,), (4, 8), 50, True),
}

# First-order SGD: batch size of the zeroth-order runs, a step size chosen
# for a clearly (over)fit model (not tuned on any private data).
SGD_LEARNING_RATE = 0.1


@dataclasses.dataclass(frozen=True)
class Setting:
  """``method`` in ``dpzero``, ``mezo``, ``sgd``; ``epsilon`` for DPZero."""

  method: str
  epsilon: float | None = None

  @property
  def label(self) -> str:
    if self.method == "dpzero":
      return f"DPZero eps={self.epsilon:g}"
    return {"mezo": "MeZO (non-private)", "sgd": "SGD (non-private)"}[
      self.method
    ]

  @property
  def private(self) -> bool:
    return self.method == "dpzero"


def settings(mode: Mode) -> list[Setting]:
  """DPZero at every epsilon, MeZO (not in the smoke run), SGD."""
  baselines = [Setting("sgd")] if mode.smoke else [Setting("mezo")]
  if not mode.smoke:
    baselines.append(Setting("sgd"))
  return [Setting("dpzero", e) for e in mode.epsilons] + baselines


def zo_config(
  setting: Setting,
  mode: Mode,
  *,
  seed: int,
  include_members: bool,
  noise_multiplier: float | None = None,
):
  """The training-loop config of a DPZero or MeZO run on the canary task."""
  c = (
    default_config.get_config()
    if setting.method == "dpzero"
    else mezo_config.get_config()
  )
  c.dataset = canaries.TASK
  c.canaries = canaries.canary_config(
    num_canaries=mode.num_canaries,
    kind=mode.canary_kind,
    seed=CANARY_SEED,
    include_members=include_members,
  )
  c.model_kwargs.features = mode.features
  c.seed = seed
  c.num_steps = mode.num_steps
  c.privacy.delta = DELTA
  c.eval_every = 0
  c.checkpoint_every = 0
  c.privacy.target_epsilon = None
  if setting.private:
    if noise_multiplier is None:
      c.privacy.target_epsilon = setting.epsilon
    else:
      c.privacy.noise_multiplier = noise_multiplier
  c.insecure_test_noise = mode.smoke
  return c


def _restore_params(config, result: dict):
  """The final trainable parameters from the run's last checkpoint."""
  task = tasks.get_task(config)
  template_config = config.copy_and_resolve_references()
  if result["noise_multiplier"] is not None:
    template_config.privacy.noise_multiplier = result["noise_multiplier"]
    template_config.privacy.target_epsilon = None
  trainable, _, opt_state, _ = run_setup.state_template(
    *resolution.resolve(template_config), task
  )
  template = {
    "params": trainable,
    "opt_state": opt_state,
    "step": np.array(0, np.int64),
    "secret": np.zeros(32, np.uint8),
  }
  ckpt = checkpointing.Checkpointer(os.path.join(config.workdir, "checkpoints"))
  try:
    state, _ = ckpt.restore(ckpt.latest_step(), template)
  finally:
    ckpt.close()
  return state["params"]


def run_one(
  setting: Setting,
  mode: Mode,
  *,
  seed: int,
  include_members: bool,
  workdir: str,
  noise_multiplier: float | None = None,
) -> dict:
  """Trains one model and returns its accuracy, privacy and canary stats."""
  start = time.time()
  _, canary_set, _ = canaries.experiment_data(
    mode.num_canaries, mode.canary_kind, CANARY_SEED
  )
  if setting.method == "sgd":
    config = zo_config(
      Setting("mezo"), mode, seed=seed, include_members=include_members
    )
    task = tasks.get_task(config)
    params, accuracy = first_order.train_sgd(
      task,
      seed=seed,
      num_steps=mode.num_steps,
      batch_size=int(config.privacy.expected_batch_size),
      learning_rate=SGD_LEARNING_RATE,
    )
    record = {"accuracy": accuracy, "epsilon": float("inf")}
    record["noise_multiplier"] = None
  else:
    config = zo_config(
      setting,
      mode,
      seed=seed,
      include_members=include_members,
      noise_multiplier=noise_multiplier,
    )
    config.workdir = workdir
    result = train.train(config, progress=False)
    params = _restore_params(config, result)
    task = tasks.get_task(config)
    shutil.rmtree(workdir)  # its checkpoints hold the run's secret
    record = {
      "accuracy": result["test_accuracy"],
      "epsilon": result["epsilon"],
      "noise_multiplier": result["noise_multiplier"],
      "privacy": result["privacy"],
    }
  stats = attacks.canary_statistics(
    lambda p, x: task.apply(p, {}, x),
    params,
    canary_set.inputs,
    canary_set.labels,
  )
  record.update(
    num_train=task.num_train,
    seconds=time.time() - start,
    stats=stats.to_dict(),
  )
  return record


class Runner:
  """Runs (or reads back) every model of the experiment; caches results
  in ``runs.json`` so an interrupted command resumes."""

  def __init__(self, out: str, mode: Mode):
    self.out = out
    self.mode = mode
    self.path = os.path.join(out, "runs.json")
    self.cache = {}
    if os.path.exists(self.path):
      with open(self.path) as f:
        self.cache = json.load(f)

  def __call__(self, setting: Setting, role: int | None, sigma=None) -> dict:
    """``role``: None for the target, ``k`` for reference model ``k``."""
    name = "target" if role is None else f"ref{role}"
    key = f"{setting.label}|{name}|{self.mode.tag()}"
    if key in self.cache:
      return self.cache[key]
    safe = "".join(ch if ch.isalnum() else "_" for ch in key)
    r = run_one(
      setting,
      self.mode,
      seed=TARGET_SEED,
      include_members=role is None,
      workdir=os.path.join(self.out, "work", safe),
      noise_multiplier=sigma,
    )
    self.cache[key] = r
    with open(self.path, "w") as f:
      json.dump(self.cache, f)
    print(
      f"  {setting.label} {name}: accuracy {r['accuracy']:.4f}, "
      f"{r['seconds']:.0f} s",
      flush=True,
    )
    return r


def run_setting(runner: Runner, setting: Setting) -> dict:
  """``target`` record and the ``references`` records of one setting."""
  target = runner(setting, None)
  sigma = target["noise_multiplier"]
  refs = [runner(setting, k, sigma) for k in range(runner.mode.num_references)]
  return {"target": target, "references": refs}
