"""Resolve once, then run: a run's typed settings become one frozen :class:`Run`.

:func:`experiments.run.resolution.resolve` turns the config into the typed
:class:`~experiments.run.settings.Settings` once, after every check that
needs no data (:func:`experiments.run.preflight.validate`, which also
resolves the estimator's registry declaration: the one lookup of the run,
passed to everything after it). Nothing below reads the config.
:func:`setup` then does, in order, everything a run needs before its first
step:

1. (the resolution, above);
2. claims the workdir (its fingerprint: the config as written,
   :meth:`~experiments.run.settings.Settings.config_dict`), stores the run's
   secret and an empty (or the existing) privacy ledger durably
   (:mod:`experiments.run.run_ledger`);
3. loads the data; binds the settings to the training set's size
   (:meth:`~experiments.run.settings.Settings.for_dataset`: a run given in
   epochs is counted in steps, the privacy value's sampling bound); refuses
   a batch larger than the training set;
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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import numpy as np
import optax

from experiments import tasks
from experiments.run import (
  attempts,
  checkpointing,
  multihost,
  progress,
  run_ledger,
)
from experiments.run import workdir as workdir_lib
from experiments.run.placement import Placement
from experiments.run.run_setup import (
  check_loss_is_per_example,
  held_plan,
  init_optimizer_state,
  resolve,
  run_secret,
)
from experiments.run.settings import Settings
from experiments.run.step import step_body
from zoprivacy.privacy import randomness
from zoprivacy.privacy.batch_selection import (
  FullBatchSampler,
  PoissonSampler,
  ShuffleSampler,
  WithoutReplacementSampler,
)
from zoprivacy.privacy.ledger import PrivacyBudgetExceededError, PrivacyLedger
from zoprivacy.privacy.plan import PrivacyPlan
from zoprivacy.secret_noise.exact_noise import ExactNoiseSource

if TYPE_CHECKING:
  from experiments.tasks.task import Task
  from zoprivacy.estimators.registry import EstimatorSpec

Sampler = PoissonSampler | WithoutReplacementSampler | FullBatchSampler
# The step under the one contract: (params, frozen, opt_state, batch,
# public, noise) -> (params, opt_state).
StepBody = Callable[..., tuple]


@dataclasses.dataclass(frozen=True)
class Run:
  """Everything resolved about one run; nothing here is looked up again."""

  settings: Settings = dataclasses.field(repr=False)  # bound to the data
  spec: EstimatorSpec
  plan: PrivacyPlan
  how: str  # where the noise multiplier came from
  workdir: str | None
  primary: bool  # the one process that writes files
  task: Task = dataclasses.field(repr=False)
  tx: optax.GradientTransformation = dataclasses.field(repr=False)
  sampler: Sampler | ShuffleSampler = dataclasses.field(repr=False)
  placement: Placement = dataclasses.field(repr=False)
  ledger: run_ledger.WriteAheadLedger | None = dataclasses.field(repr=False)
  checkpointer: checkpointing.Checkpointer | None = dataclasses.field(
    repr=False
  )
  step_body: StepBody = dataclasses.field(repr=False)
  # The task's frozen parameters: a pytree of arrays, any structure.
  frozen: Any = dataclasses.field(repr=False)
  initial_state: dict = dataclasses.field(repr=False)
  # (inputs, labels) of the training set (this host's rows): pytrees of
  # arrays whose structure is the task's.
  train_data: tuple[Any, Any] = dataclasses.field(repr=False)
  host_shard: multihost.HostShard | None = dataclasses.field(repr=False)
  noise_source: ExactNoiseSource | None = dataclasses.field(repr=False)
  secret: bytes = dataclasses.field(repr=False)  # the run's: secret material

  @property
  def learning_rate_source(self) -> str:
    """Where the learning rate came from (the config, or the estimator's
    registered default)."""
    return self.settings.learning_rate_source

  @property
  def restored_step(self) -> int:
    return int(self.initial_state["step"])

  def epsilon(self) -> float:
    """Epsilon of every step recorded so far (inf for a non-private run)."""
    return float("inf") if self.ledger is None else self.ledger.ledger.epsilon()


def _secret_and_ledger(settings: Settings, spec, primary):
  """Steps 2: the workdir claimed, its secret and ledger durable."""
  workdir = settings.workdir or None
  if workdir:
    _check_workdir(workdir)
    if primary:  # one process per workdir at a time
      run_ledger.lock_workdir(workdir)
    workdir_lib.claim(
      workdir, settings.config_dict(), settings.resume, write=primary
    )
  draw = lambda: run_secret(settings)
  if workdir and primary:
    secret = run_ledger.stored_secret(workdir, draw)
  else:
    secret = draw()
  secret = multihost.share_secret(secret)
  ledger = None
  if spec.private:
    ledger = run_ledger.WriteAheadLedger.open(
      workdir,
      delta=settings.privacy.delta,
      epsilon_budget=settings.privacy.epsilon_budget,
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


def _check_dataset_size(settings: Settings, num_train: int) -> None:
  """A batch larger than the training set (checked as soon as it is known)."""
  p = settings.privacy
  if p.sampling != "full_batch" and p.expected_batch_size > num_train:
    raise ValueError(
      f"privacy.expected_batch_size={p.expected_batch_size} is larger "
      f"than the {num_train} training examples of {settings.dataset!r}."
    )


def _check_budget(settings: Settings, plan, ledger) -> None:
  """Step 4: the steps still to run fit ``epsilon_budget`` with those the
  ledger already counts (a lower bound on a resume, whose replays the loop
  charges and checks step block by step block)."""
  if ledger is None or not plan.is_noised:
    return
  steps, budget = settings.num_steps, settings.privacy.epsilon_budget
  left = max(0, steps - ledger.num_steps)
  fits = ledger.ledger.steps_within_budget(plan, left)
  if fits < left:
    raise PrivacyBudgetExceededError(
      f"The run plans {steps} steps but only "
      f"{ledger.num_steps + fits} fit epsilon_budget "
      f"{budget:g} at delta {settings.privacy.delta:g} "
      f"[{plan.describe()}].",
      projected_epsilon=ledger.ledger.projected_epsilon(plan, left),
      epsilon_budget=budget,
      steps_remaining=fits,
    )


def _optimizer(settings: Settings, spec, task, placement, secret):
  """Step 4-5: ``(tx, plan, how, trainable, frozen, opt_state, body)``."""
  resolved = resolve(settings, spec=spec)
  tx, plan = resolved.tx, resolved.plan
  trainable, frozen = task.init(jax.random.key(settings.seed))
  trainable, frozen = placement.params(trainable), placement.params(frozen)
  init, body = step_body(settings, spec, resolved, task, placement)
  opt_state = init_optimizer_state(init, trainable, secret)
  if not settings.layerwise:
    plan = held_plan(opt_state, settings)  # the plan the state holds
  elif plan.is_noised:
    plan = plan.replace(delta=settings.privacy.delta)
  return (
    tx,
    plan,
    resolved.how,
    trainable,
    frozen,
    placement.params(opt_state),
    body,
  )


def _restore(workdir, state, ledger, secret):
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


def setup(settings: Settings, spec: EstimatorSpec, *, task=None) -> Run:
  """Resolves everything the run of ``settings`` and ``spec`` needs (see
  above; both from :func:`experiments.run.resolution.resolve`).

  ``task``: the task the settings build, already built (default: built
  from :meth:`~experiments.run.settings.Settings.task_config`)."""
  primary = multihost.is_primary()
  workdir, secret, ledger = _secret_and_ledger(settings, spec, primary)  # 2
  progress.stage("loading the data")
  task = task or tasks.get_task(settings.task_config())  # 3
  n = task.num_train
  settings = settings.for_dataset(n)  # num_epochs in steps, sampling on n
  _check_dataset_size(settings, n)
  placement = Placement.of(settings)
  tx, plan, how, trainable, frozen, opt_state, body = _optimizer(
    settings, spec, task, placement, secret
  )
  _check_budget(settings, plan, ledger)
  sampler = attempts.sampler_for(settings, task, spec, secret, plan)
  if settings.check_per_example:
    progress.stage("checking that the loss is per-example")
    check_loss_is_per_example(
      task, trainable, frozen, sampler.capacity, settings.seed
    )
  state = {
    "params": trainable,
    "opt_state": opt_state,
    "step": np.array(0, np.int64),
    "secret": randomness.secret_to_array(secret),
  }
  state, ckpt = _restore(workdir, state, ledger, secret)
  host_shard = placement.host_shard(n, sampler)
  train_data = (task.train_inputs, task.train_labels)
  if host_shard is not None:  # several hosts: each keeps its rows
    train_data = host_shard.rows(train_data)
  noise = attempts.noise_source_for(plan, secret)
  return Run(
    settings=settings,
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
  )
