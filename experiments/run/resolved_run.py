"""Resolve once, then run: a config becomes one frozen :class:`Run`.

:func:`setup` does, in order, everything a run needs before its first step:

1. every check that needs no data (:func:`experiments.run.preflight.validate`),
   which also resolves the estimator's registry declaration: the one lookup
   of the run, passed to everything after it;
2. claims the workdir, stores the run's secret and an empty (or the
   existing) privacy ledger durably (:mod:`experiments.run.run_ledger`);
3. loads the data; counts a run given in epochs in steps
   (:mod:`experiments.run.run_length`); refuses a batch larger than the
   training set;
4. builds the optimizer and its plan (calibrated for ``target_epsilon``
   unless ``noise_multiplier`` is set) and checks the budget, before the
   model is built;
5. builds the model, the optimizer state (:func:`~experiments.run.run_setup.
   init_optimizer_state`, the one place it is created), the samplers, checks
   that the loss is per-example, and restores the latest checkpoint (whose
   secret and ledger must agree with the workdir's).

The :class:`Run` it returns holds the step body under the one contract
``(params, frozen, opt_state, batch, public, noise) -> (params,
opt_state)``, whichever estimator (optax chain, layer-wise step, Noisy-ZOGD)
it came from. :func:`experiments.run.step.make_step` jits it.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax
import numpy as np

from experiments import tasks
from experiments.run import (
  attempts,
  checkpointing,
  multihost,
  preflight,
  progress,
  run_ledger,
  run_length,
)
from experiments.run import workdir as workdir_lib
from experiments.run.optimizers import with_learning_rate
from experiments.run.placement import Placement
from experiments.run.run_setup import (
  check_loss_is_per_example,
  held_plan,
  init_optimizer_state,
  resolve,
  run_secret,
)
from experiments.run.step import step_body
from zoprivacy.privacy import randomness
from zoprivacy.privacy.ledger import PrivacyBudgetExceededError, PrivacyLedger


@dataclasses.dataclass(frozen=True)
class Run:
  """Everything resolved about one run; nothing here is looked up again."""

  config: Any = dataclasses.field(repr=False)
  spec: Any
  plan: Any
  how: str  # where the noise multiplier came from
  workdir: str | None
  primary: bool  # the one process that writes files
  task: Any = dataclasses.field(repr=False)
  tx: Any = dataclasses.field(repr=False)
  sampler: Any = dataclasses.field(repr=False)
  placement: Any = dataclasses.field(repr=False)
  ledger: run_ledger.WriteAheadLedger | None = dataclasses.field(repr=False)
  checkpointer: Any = dataclasses.field(repr=False)
  step_body: Any = dataclasses.field(repr=False)
  frozen: Any = dataclasses.field(repr=False)
  initial_state: dict = dataclasses.field(repr=False)
  train_data: Any = dataclasses.field(repr=False)
  host_shard: Any = dataclasses.field(repr=False)
  noise_source: Any = dataclasses.field(repr=False)
  secret: bytes = dataclasses.field(repr=False)  # the run's: secret material
  # Where config.learning_rate came from (the config, or the estimator's
  # registered default).
  learning_rate_source: str = "set by the config"

  @property
  def restored_step(self) -> int:
    return int(self.initial_state["step"])

  def epsilon(self) -> float:
    """Epsilon of every step recorded so far (inf for a non-private run)."""
    return float("inf") if self.ledger is None else self.ledger.ledger.epsilon()


def _secret_and_ledger(config, spec, primary):
  """Steps 2: the workdir claimed, its secret and ledger durable."""
  workdir = config.get("workdir") or None
  if workdir:
    _check_workdir(workdir)
    if primary:  # one process per workdir at a time
      run_ledger.lock_workdir(workdir)
    workdir_lib.claim(
      workdir, config.to_dict(), config.get("resume", ""), write=primary
    )
  draw = lambda: run_secret(config)
  if workdir and primary:
    secret = run_ledger.stored_secret(workdir, draw)
  else:
    secret = draw()
  secret = multihost.share_secret(secret)
  ledger = None
  if spec.private:
    ledger = run_ledger.WriteAheadLedger.open(
      workdir,
      delta=config.privacy.delta,
      epsilon_budget=config.get("epsilon_budget"),
      write=primary,
    )
    # Every process derives the attempts of its steps from the ledger:
    # process 0's (the one that writes it), whatever the others can read.
    shared = multihost.share_text(ledger.ledger.to_json())
    if shared != ledger.ledger.to_json():
      ledger.ledger = PrivacyLedger.from_json(shared)
      ledger.on_disk_at_start = ledger.num_steps
  return workdir, secret, ledger


def _check_workdir(workdir: str) -> None:
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise ValueError(
      f"workdir {workdir!r} is a file, not a folder; choose another workdir."
    )
  workdir_lib.check_own(workdir)  # before the lock writes private/


def _check_budget(config, plan, ledger) -> None:
  """Step 4: the steps still to run fit ``epsilon_budget`` with those the
  ledger already counts (a lower bound on a resume, whose replays the loop
  charges and checks step block by step block)."""
  if ledger is None or not plan.is_noised:
    return
  left = max(0, config.num_steps - ledger.num_steps)
  fits = ledger.ledger.steps_within_budget(plan, left)
  if fits < left:
    raise PrivacyBudgetExceededError(
      f"The run plans {config.num_steps} steps but only "
      f"{ledger.num_steps + fits} fit epsilon_budget "
      f"{config.epsilon_budget:g} at delta {config.privacy.delta:g} "
      f"[{plan.describe()}].",
      projected_epsilon=ledger.ledger.projected_epsilon(plan, left),
      epsilon_budget=config.epsilon_budget,
      steps_remaining=fits,
    )


def _optimizer(config, spec, task, placement, n, secret):
  """Step 4-5: ``(tx, plan, how, trainable, frozen, opt_state, body)``."""
  resolved = resolve(config, n, spec=spec)
  tx, plan = resolved.tx, resolved.plan
  trainable, frozen = task.init(jax.random.key(config.seed))
  trainable, frozen = placement.params(trainable), placement.params(frozen)
  init, body = step_body(config, spec, resolved, task, placement)
  opt_state = init_optimizer_state(init, trainable, secret)
  if not config.get("layerwise"):
    plan = held_plan(opt_state, config)  # the plan the state holds
  elif plan.is_noised:
    plan = plan.replace(delta=config.privacy.delta)
  return (
    tx,
    plan,
    resolved.how,
    trainable,
    frozen,
    placement.params(opt_state),
    body,
  )


def _restore(config, workdir, state, ledger, secret):
  """Step 5: the latest checkpoint, checked against the workdir's secret and
  ledger; ``(state, checkpointer)``."""
  if not workdir:
    return state, None
  ckpt = checkpointing.Checkpointer(os.path.join(workdir, "checkpoints"))
  latest = ckpt.latest_step()
  if latest is None:
    return state, ckpt
  state, ckpt_ledger = ckpt.restore(latest, state)
  if bytes(np.asarray(state["secret"], np.uint8)) != secret:
    raise run_ledger.LedgerStateError(
      f"The checkpoint at step {latest} holds another secret than "
      f"{workdir}/{run_ledger.PRIVATE_DIR}; refusing to mix two runs."
    )
  if ledger is not None:
    ledger.check_checkpoint(ckpt_ledger, latest)
  return state, ckpt


def setup(config, *, task=None) -> Run:
  """Validates ``config`` and resolves everything a run needs (see above).

  ``task``: the task ``config`` builds, already built (default: built)."""
  multihost.initialize(config)  # config.distributed: before any JAX work
  primary = multihost.is_primary()
  spec = preflight.validate(config)  # 1: no data read yet
  config, lr_source = with_learning_rate(config, spec)
  workdir, secret, ledger = _secret_and_ledger(config, spec, primary)  # 2
  progress.stage("loading the data")
  task = task or tasks.get_task(config)  # 3
  n = task.num_train
  config = run_length.resolved(config, n)  # num_epochs in steps, on n
  preflight.check_dataset_size(config, n)
  placement = Placement.from_config(config)
  tx, plan, how, trainable, frozen, opt_state, body = _optimizer(
    config, spec, task, placement, n, secret
  )
  _check_budget(config, plan, ledger)
  sampler = attempts.sampler_for(config, task, spec, secret, plan)
  if config.get("check_per_example", True):
    progress.stage("checking that the loss is per-example")
    check_loss_is_per_example(
      task, trainable, frozen, sampler.capacity, config.seed
    )
  state = {
    "params": trainable,
    "opt_state": opt_state,
    "step": np.array(0, np.int64),
    "secret": randomness.secret_to_array(secret),
  }
  state, ckpt = _restore(config, workdir, state, ledger, secret)
  host_shard = placement.host_shard(n, sampler)
  train_data = (task.train_inputs, task.train_labels)
  if host_shard is not None:  # several hosts: each keeps its rows
    train_data = host_shard.rows(train_data)
  noise = attempts.noise_source_for(plan, secret)
  return Run(
    config=config,
    spec=spec,
    plan=plan,
    how=how,
    workdir=workdir,
    primary=primary,
    task=task,
    tx=tx,
    sampler=sampler,
    placement=placement,
    ledger=ledger,
    checkpointer=ckpt,
    step_body=body,
    frozen=frozen,
    initial_state=state,
    train_data=train_data,
    host_shard=host_shard,
    noise_source=noise,
    secret=secret,
    learning_rate_source=lr_source,
  )
