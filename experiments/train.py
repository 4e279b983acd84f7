"""Training loop shared by every experiment: private batches in, metrics out.

One run, top to bottom:

1. load the data and build the model (:mod:`experiments.tasks`);
2. build the estimator from its registry declaration
   (:mod:`zoprivacy.estimators.registry`) and read its privacy plan from the
   initialized optimizer state; calibrate the plan's noise multiplier for
   ``target_epsilon`` unless ``noise_multiplier`` is set (a set multiplier
   wins, and the report says so);
3. check at start-up that the planned steps fit ``epsilon_budget``, and that
   the loss is per-example (on synthetic inputs, never on private data);
4. resume from the latest checkpoint in ``workdir`` if there is one; the
   checkpoint holds the secret keys, so it is secret material;
5. for each step: record it in the ledger (which refuses a step over budget
   *before* it runs), draw a secret Poisson batch (padded, masked) and, for
   exact noise, the step's integer noise; apply one jitted step; evaluate
   and checkpoint every so often;
6. report the task's metrics (accuracy, or F1 and exact match) with the
   ``(epsilon, delta)`` of the plan and ledger.

An estimator declared ``takes_setting`` (Noisy-ZOGD) gets its setting from
:mod:`experiments.hidden_state_run`, which also checks it before any data is
loaded and adds the final-iterate (hidden-state) epsilon to the report;
its plan, ledger and calibration follow the same path as every estimator's.

Randomness: ``config.seed`` is PUBLIC (model initialization, directions,
public batches). The noise and the Poisson batches come from a 256-bit
secret drawn from OS entropy, which is written only into checkpoints.
``config.insecure_test_noise=True`` derives them from the seed instead, for
tests; such a run is reported as NOT private.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import tqdm

from experiments import (
  checkpointing,
  hidden_state_run,
  layerwise_run,
  multihost,
  tasks,
  trajectory_log,
)
from experiments import metrics as metrics_lib
from experiments import workdir as workdir_lib
from experiments.batches import make_sampler, public_batch_indices
from experiments.placement import Placement
from experiments.run_setup import (
  check_loss_is_per_example,
  resolve_plan,
  run_secret,
)
from zoprivacy import accounting
from zoprivacy.data import sampling
from zoprivacy.estimators import registry
from zoprivacy.privacy import ExactNoiseSource, bind_noise_secret, randomness


def train(
  config: ml_collections.ConfigDict,
  *,
  progress: bool = True,
  stop_after: int | None = None,
  task: tasks.Task | None = None,
) -> dict[str, Any]:
  """Runs (or resumes) one experiment and returns its final metrics.

  ``stop_after``: stop (after checkpointing) once this many steps are done,
  as if interrupted; a later call with the same ``workdir`` resumes.
  ``task``: the task ``config`` builds, already built (a sweep over fields
  the task does not read builds it once); default: built here.
  """
  multihost.initialize(config)  # config.distributed: before any JAX work
  primary = multihost.is_primary()  # the one process that writes files
  spec = registry.get(config.estimator)  # typos fail first
  if spec.takes_setting:  # the setting's conditions, before any data
    hidden_state_run.preflight(config)
  if config.get("workdir"):
    workdir_lib.claim(
      config.workdir,
      config.to_dict(),
      config.get("resume", ""),
      write=primary,
    )
  secret = multihost.share_secret(run_secret(config))
  if task is None:
    task = tasks.get_task(config)  # 1
  n = task.num_train
  num_public = 0 if task.public_labels is None else len(task.public_labels)
  trainable, frozen = task.init(jax.random.key(config.seed))
  placement = Placement.from_config(config)
  trainable, frozen = placement.params(trainable), placement.params(frozen)
  tx, opt_state, plan, how = resolve_plan(config, trainable, n)  # 2
  layerwise = None
  if config.get("layerwise"):  # the in-scan step: inference-level memory
    sigma = plan.noise_multiplier if plan.is_noised else None
    layerwise = layerwise_run.make(config, sigma, n, task)
    opt_state = layerwise.init(trainable)
  opt_state = bind_noise_secret(opt_state, secret)  # same noise on every host
  opt_state = placement.params(opt_state)  # restores land on the mesh too
  sampler = make_sampler(config, n, secret, task.sampling_schemes)
  ledger = None
  if plan.is_noised:  # 3
    ledger = accounting.PrivacyLedger(
      delta=config.delta, epsilon_budget=config.get("epsilon_budget")
    )
    fits = ledger.steps_within_budget(plan, config.num_steps)
    if fits < config.num_steps:
      raise accounting.PrivacyBudgetExceededError(
        f"The run plans {config.num_steps} steps but only {fits} fit "
        f"epsilon_budget {config.epsilon_budget:g} at delta "
        f"{config.delta:g} [{plan.describe()}].",
        projected_epsilon=plan.epsilon(config.num_steps),
        epsilon_budget=config.epsilon_budget,
        steps_remaining=fits,
      )
  if config.get("check_per_example", True):
    check_loss_is_per_example(
      task, trainable, frozen, sampler.capacity, config.seed
    )
  state = {
    "params": trainable,
    "opt_state": opt_state,
    "step": np.array(0, np.int64),
    "secret": randomness.secret_to_array(secret),
  }

  workdir = config.get("workdir") or None
  ckpt = None
  if workdir:  # 4
    ckpt = checkpointing.Checkpointer(os.path.join(workdir, "checkpoints"))
    latest = ckpt.latest_step()
    if latest is not None:
      state, ledger_dict = ckpt.restore(latest, state)
      secret = bytes(np.asarray(state["secret"], np.uint8))
      sampler = make_sampler(config, n, secret, task.sampling_schemes)
      if ledger is not None:
        ledger = accounting.PrivacyLedger.from_dict(ledger_dict)
  # Several hosts: each keeps only its range of the training set.
  host_shard = placement.host_shard(n, sampler)
  train_data = (task.train_inputs, task.train_labels)
  if host_shard is not None:
    train_data = host_shard.rows(train_data)
  # config.trajectory_log: the public (seed, scalars) log of the run.
  trajectory = trajectory_log.for_run(config, trainable, int(state["step"]))
  noise_source = None
  if plan.noise_kind == "discrete":
    noise_source = ExactNoiseSource(
      plan, randomness.derive(secret, "exact noise", num_bytes=32)
    )

  def layerwise_step(params, frozen, opt_state, batch, public, noise):
    del public  # the layer-wise estimators take no public data
    params, opt_state = layerwise.step(
      params, opt_state, batch, frozen=frozen, discrete_noise=noise
    )
    return placement.constrain(params), opt_state

  def generic_step(params, frozen, opt_state, batch, public, discrete_noise):
    loss = lambda p, b: task.batched_loss(p, frozen, b)
    zeros = jax.tree.map(jnp.zeros_like, params)
    extra = {} if public is None else {spec.public_arg: public}
    if discrete_noise is not None:
      extra["discrete_noise"] = discrete_noise
    updates, opt_state = tx.update(
      zeros, opt_state, params, batched_loss=loss, batch=batch, **extra
    )
    return placement.constrain(optax.apply_updates(params, updates)), opt_state

  if layerwise is None:
    step = jax.jit(generic_step)
  else:  # the parameters are donated: updated in place
    step = jax.jit(layerwise_step, donate_argnums=0)

  apply = jax.jit(task.apply)

  def predict(params, frozen, inputs):
    return multihost.fetch(apply(params, frozen, placement.replicated(inputs)))

  metric_names = tuple(task.metric_names)  # the first is the headline
  metrics = metrics_lib.MetricsWriter(
    workdir if primary else None, metric_names
  )
  history = metrics.resume(int(state["step"]))

  def spent(num_steps=None):
    return float("inf") if ledger is None else ledger.epsilon(num_steps)

  def log_eval(t, seconds):
    row = {
      "step": t,
      **metrics_lib.evaluate_task(task, predict, state["params"], frozen),
      "epsilon": spent(),
      "seconds": seconds,
    }
    history.append(row)
    persist_ledger()
    metrics.write(row)
    return row

  def persist_ledger():
    # The ledger reaches disk (atomically) before any file derived from
    # the steps it records: privacy is never spent but unrecorded.
    if workdir and primary and ledger is not None:
      ledger.save(os.path.join(workdir, "privacy_ledger.json"))

  def save(t):
    if ckpt is not None:
      persist_ledger()
      ckpt.save(t, state, ledger.to_dict() if ledger is not None else None)
      if primary:
        trajectory.save()

  first = int(state["step"])
  if first == 0 and not history:
    log_eval(0, 0.0)
  last = (
    config.num_steps
    if stop_after is None
    else min(stop_after, config.num_steps)
  )
  bar = None  # created after the first (compiling) step: honest ETA
  train_seconds, start = 0.0, None
  for t in range(first, last):  # 5
    if ledger is not None:
      ledger.record(plan)
    batch = placement.gather_batch(
      train_data, sampler.batch_indices(t), host_shard
    )
    pub_idx = public_batch_indices(config, num_public, t)
    public = placement.replicated(
      None
      if pub_idx is None
      else sampling.gather((task.public_inputs, task.public_labels), pub_idx)
    )
    noise = placement.replicated(
      None if noise_source is None else noise_source.draw(t)
    )
    params, opt_state = step(
      state["params"], frozen, state["opt_state"], batch, public, noise
    )
    if placement.serialize_steps:
      jax.block_until_ready(params)
    state = dict(
      state,
      params=params,
      opt_state=opt_state,
      step=np.array(t + 1, np.int64),
    )
    trajectory.record(opt_state)
    done = t + 1
    if start is None:  # the first step compiles: not timed
      jax.block_until_ready(params)
      start = time.time()
      bar = tqdm.tqdm(
        initial=done,
        total=config.num_steps,
        disable=not progress,
        desc=config.estimator,
        mininterval=1.0,
      )
    else:
      bar.update(1)
    if (
      config.eval_every
      and done % config.eval_every == 0
      and done < config.num_steps
    ):
      row = log_eval(done, time.time() - start)
      bar.set_postfix(
        **{m.removeprefix("test_"): f"{row[m]:.3f}" for m in metric_names},
        eps=f"{row['epsilon']:.3f}",
      )
    if (
      ckpt is not None
      and config.checkpoint_every
      and done % config.checkpoint_every == 0
    ):
      save(done)
  if start is not None:
    train_seconds = time.time() - start
    bar.close()

  done = int(state["step"])
  if done < config.num_steps:  # interrupted on purpose (stop_after)
    save(done)
    return {
      "interrupted_at": done,
      "params_sha256": checkpointing.tree_digest(state["params"]),
    }
  if not history or history[-1]["step"] != done:  # 6
    log_eval(done, train_seconds)
  save(done)
  result = {
    "estimator": config.estimator,
    "dataset": config.dataset,
    **{m: history[-1][m] for m in metric_names},
    "metric_names": list(metric_names),
    "public_proxy": bool(config.get("public_proxy")),
    "num_steps": done,
    "noise_multiplier": plan.noise_multiplier if plan.is_noised else None,
    "noise_multiplier_source": how,
    "epsilon": spent(),
    "delta": config.delta if plan.is_noised else None,
    "private": plan.is_private,
    "privacy_plan": plan.to_dict(),
    "privacy": plan.describe(),
    "sampling": sampler.scheme,
    "mesh": dict(placement.mesh.shape),
    "train_seconds": train_seconds,
    "history": history,
    "params_sha256": checkpointing.tree_digest(state["params"]),
  }
  if ledger is not None:
    result["ledger"] = ledger.summary()
  if plan.mechanism.endswith("laplace"):
    # DP-ZO Thm 3.1: the pure epsilon of the subsampled Laplace mechanism.
    result["pure_epsilon"] = accounting.pure_epsilon_poisson_laplace(
      noise_multiplier=plan.noise_multiplier,
      sampling_probability=plan.sampling_probability,
      num_steps=done,
    )
  if workdir and primary:
    result["plot"] = metrics_lib.plot_report(
      history,
      os.path.join(workdir, "report.png"),
      f"{config.estimator} on {config.dataset}",
      metric_names,
    )
  if spec.takes_setting and hidden_state_run.wants_report(config):
    result["final_iterate"] = hidden_state_run.final_iterate(
      config,
      hidden_state_run.run_setting(config, n, plan.noise_multiplier),
      done,
    )
  if workdir and primary:
    persist_ledger()
    with open(os.path.join(workdir, "result.json"), "w") as f:
      json.dump(
        {"config": config.to_dict(), **result}, f, indent=2, default=str
      )
  if ckpt is not None:
    ckpt.close()
  return result
