"""The run's one step: ``(params, frozen, opt_state, batch, public, noise)
-> (params, opt_state)``, jitted once, parameters and state donated.

:func:`generic_step_fn` is that contract for any estimator in an optax chain
(Noisy-ZOGD's ``takes_setting`` update included: its tx is the whole
update); :func:`experiments.run.layerwise_run.step_fn` is the same contract for
the layer-wise step; :func:`step_body` picks the run's, :func:`make_step`
jits it (and :mod:`experiments.run.step_program` compiles the same program
on abstract parameters, for the memory tables). :func:`step_inputs` draws step ``t``'s secret batch,
public batch and exact noise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import optax

from experiments import xla_options
from experiments.run import layerwise_run, training_signal
from experiments.run.batches import public_batch_indices
from zoprivacy.core import low_precision
from zoprivacy.data import sampling
from zoprivacy.training import trajectory
from zoprivacy.zo import rounding

if TYPE_CHECKING:
  from experiments.run.settings import Settings


def generic_step_fn(spec, task, tx, placement):
  """The step of an optax chain around a zoprivacy estimator. 16-bit float
  parameters are updated in float32 and stored stochastically rounded with
  the step's public rounding key (:mod:`zoprivacy.zo.rounding`), as the
  layer-wise step stores them."""
  public_arg = spec.public_arg

  def step(params, frozen, opt_state, batch, public, discrete_noise):
    loss = lambda p, b: task.batched_loss(p, frozen, b)
    zeros = jax.tree.map(jnp.zeros_like, params)
    extra = {} if public is None else {public_arg: public}
    if discrete_noise is not None:
      extra["discrete_noise"] = discrete_noise
    rounding_key = _rounding_key(opt_state, params)
    updates, opt_state = tx.update(
      zeros, opt_state, params, batched_loss=loss, batch=batch, **extra
    )
    if rounding_key is None:
      params = optax.apply_updates(params, updates)
    else:
      params = rounding.apply_updates(params, updates, rounding_key)
    return placement.constrain(params), opt_state

  return step


def _rounding_key(opt_state, params):
  """The public rounding key of the step ``opt_state`` is about to take
  (from its estimator's direction key and step), or None when ``params``
  has no 16-bit float leaf."""
  if not low_precision.has_narrow(params):
    return None
  state = trajectory.find_estimator_state(opt_state)
  return rounding.step_key(jax.random.fold_in(state.direction_key, state.step))


def step_body(settings: Settings, spec, resolved, task, placement):
  """``(init, body)``: the optimizer state's ``init`` and the step body of
  the run (the layer-wise step with ``config.layerwise``, else the optax
  chain of ``resolved``, :func:`experiments.run.run_setup.resolve`)."""
  if settings.layerwise:  # the in-scan step: inference-level memory
    zo = layerwise_run.make(settings, resolved, task)
    return zo.init, layerwise_run.step_fn(zo, placement)
  return resolved.tx.init, generic_step_fn(spec, task, resolved.tx, placement)


def jit_step(body, settings: Settings, spec):
  """``body`` jitted as the run's one step (see :func:`make_step`)."""
  keeps_state = settings.trajectory_log
  body = training_signal.with_signal(body, not spec.takes_setting)
  return xla_options.jit(body, donate_argnums=(0,) if keeps_state else (0, 2))


def make_step(run):
  """The one jitted step of ``run``; the parameters and the optimizer state
  are donated (updated in place: the caller must not reuse them). With
  ``trajectory_log``, the log keeps each step's estimator state until it is
  written, so the optimizer state is not donated. It returns ``(params,
  opt_state, stats)``: ``stats`` are the statistics of the step's released
  values (:mod:`experiments.run.training_signal`; ``None`` for a run that
  publishes none)."""
  return jit_step(run.step_body, run.settings, run.spec)


def step_inputs(run, t: int, draws=None):
  """``(batch, public, noise)`` of step ``t``, placed on the mesh; the
  secret batch and noise from ``draws``' ``sampler`` and ``noise_source``
  (those of the step's attempt, :mod:`experiments.run.attempts`; default: the
  run's own, attempt 0)."""
  task, placement = run.task, run.placement
  draws = run if draws is None else draws
  batch = placement.gather_batch(
    run.train_data, draws.sampler.batch_indices(t), run.host_shard
  )
  num_public = 0 if task.public_labels is None else len(task.public_labels)
  pub_idx = public_batch_indices(run.settings, num_public, t, spec=run.spec)
  public = placement.replicated(
    None
    if pub_idx is None
    else sampling.gather((task.public_inputs, task.public_labels), pub_idx)
  )
  noise = placement.replicated(
    None if draws.noise_source is None else draws.noise_source.draw(t)
  )
  return batch, public, noise
