"""Replay of a trajectory log: the parameters rebuilt from (seed, scalars).

Each step's ``g_t = (1/q) sum_j s_j u_j`` (DP-ZO Alg. 1 line 17) is rebuilt
from the log's public direction key, the step number and the released
scalars through the training step's own function
(:func:`~zoprivacy.estimators.two_point.released_update`), then fed to the
optimizer that followed the estimator. The log format is
:mod:`zoprivacy.training.trajectory_format`; the logger, and the overview,
:mod:`zoprivacy.training.trajectory` (which re-exports :func:`replay`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from zoprivacy.estimators import two_point
from zoprivacy.training.trajectory_format import (
  TrajectoryLog,
  TrajectoryLogError,
  params_signature,
)
from zoprivacy.zo import rounding


def replay_step_fn(log: TrajectoryLog, optimizer):
  """The jitted step ``(params, opt_state, t, s_t) -> (params, opt_state)``.

  ``g_t = released_update(query, params, split(fold_in(key, t), q), s_t)``:
  the training step's own step-5 computation (DP-ZO Alg. 1 line 17), then
  ``optimizer`` as it followed the estimator; 16-bit float leaves stored as
  the log's ``update_rounding`` says (stochastically, with the step's
  rounding key :func:`zoprivacy.zo.rounding.step_key`, as training).
  """
  mode = log.update_rounding
  query = two_point.make_query(
    directions=log.header["directions"],
    direction_prng=log.header["direction_prng"],
    smoothing=1.0,  # unused: the scalars are already the derivatives
    clip_target="finite_difference",
    privacy=None,
    num_queries=log.num_queries,
  )
  direction_key = log.direction_key()

  @jax.jit
  def step(params, opt_state, t, scalars):
    step_key = jax.random.fold_in(direction_key, t)
    query_keys = jax.random.split(step_key, query.num_queries)
    grad = two_point.released_update(query, params, query_keys, scalars)
    updates, opt_state = optimizer.update(grad, opt_state, params)
    key = rounding.step_key(step_key)
    return rounding.apply_updates(params, updates, key, mode), opt_state

  return step


def replay(
  initial_params,
  log: TrajectoryLog,
  optimizer: optax.GradientTransformation,
  *,
  opt_state=None,
):
  """The parameters after replaying every step of ``log`` with ``optimizer``.

  ``initial_params`` are the parameters at ``log.header['first_step']``
  (public for a run initialized from a public seed); ``optimizer`` is the
  part of the chain after the estimator, and ``opt_state`` its state there
  (``optimizer.init(initial_params)`` by default, right for a log that
  starts at step 0). Returns ``(params, opt_state)``.
  """
  tree, leaves = params_signature(initial_params)
  if [tree, leaves] != [log.header["params_tree"], log.header["params_leaves"]]:
    raise TrajectoryLogError(
      "initial_params do not match the log's parameter tree "
      f"({log.header['params_tree']}, {log.header['params_leaves']})."
    )
  step = replay_step_fn(log, optimizer)
  params = initial_params
  if opt_state is None:
    opt_state = optimizer.init(initial_params)
  first = int(log.header["first_step"])
  scalars = jnp.asarray(log.scalars)
  for i in range(log.scalars.shape[0]):
    params, opt_state = step(
      params, opt_state, jnp.asarray(first + i, jnp.int32), scalars[i]
    )
  return params, opt_state
