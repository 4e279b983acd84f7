"""The state every estimator carries, and its per-step key schedule.

:class:`EstimatorState` is the one state of every estimator: the public
direction key, the secret noise key, the step, the last release, the
privacy plan and, for an estimator that keeps state of its own (a
reference point, a running estimate), that state in one typed slot,
``method``. :func:`zoprivacy.estimators.base.build_estimator` creates it
with the estimator's own ``method_init`` hook and threads it through every
update, so a stateful estimator is its step computation and its
registration, nothing else (``docs/extending.md``); checkpoints, resume,
sharding and the composition check treat the slot like every other leaf.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from zoprivacy.estimators import composition as composition_lib
from zoprivacy.privacy import noise_sessions, randomness
from zoprivacy.privacy import plan as plan_lib
from zoprivacy.secret_noise import vector_noise_prefetch
from zoprivacy.secret_noise.session_lookup import keyed_state

plan_lib.register_pytree()  # every estimator state holds a plan


class EstimatorState(NamedTuple):
  """State of every estimator.

  Attributes:
    direction_key: PUBLIC key of the directions; step ``t`` uses
      ``fold_in(direction_key, t)``. It may be published: with the released
      scalars it replays the trajectory (DP-ZO Sec. 5, "seed + scalar").
    noise_key: by default a :class:`~zoprivacy.privacy.noise_sessions.
      SessionKey`, the public handle of a secret key held in this process
      only (OS entropy, never derived from the direction key or a config
      value); or an explicit 128-bit ``rbg`` key, bound to a run secret or
      to an insecure test seed, which makes a checkpoint of this state
      secret material. Step ``t`` uses ``fold_in(key, t)``.
    step: number of updates taken.
    released: the privatized values released at the last step (for the
      scalar estimators, the ``q`` scalars ``s_j``; for the vector ones, the
      norm of the privatized gradient): public post-processing.
    privacy_plan: the :class:`~zoprivacy.privacy.PrivacyPlan` of one step,
      a pytree node without leaves (see :func:`zoprivacy.privacy.find_plan`).
    composition: whether the whole optimizer state was checked before the
      first release (:func:`zoprivacy.init`), a node without leaves; a
      private estimator releases only from a checked state or inside
      :func:`zoprivacy.make_step` (:mod:`zoprivacy.estimators.composition`).
    method: the estimator's own state, a pytree of arrays (``None``, no
      leaf, for a stateless estimator): what its ``method_init(params)``
      hook returns, then what its step computation returns each step
      (:func:`~zoprivacy.estimators.base.build_estimator`). Checkpointed,
      restored and sharded with the rest of the state. It may hold only
      what the plan already pays for: parameters, public randomness and
      post-processing of the released values (VR-DPZero's reference point
      and running estimate). A value computed from private data that did
      not go through the mechanism must never enter it: the next updates
      would release it unaccounted.
  """

  direction_key: jax.Array
  noise_key: jax.Array
  step: jax.Array
  released: jax.Array
  privacy_plan: plan_lib.PrivacyPlan
  composition: composition_lib.Composition = composition_lib.UNCHECKED
  method: Any = None


def init_state(
  direction_key,
  plan: plan_lib.PrivacyPlan,
  num_released: int = 1,
  insecure_test_noise_seed: int | None = None,
  method: Any = None,
) -> EstimatorState:
  """A fresh state: public direction key, a session noise key (or the
  insecure test key), step 0, and the estimator's own state ``method``."""
  if not isinstance(direction_key, jax.Array):
    direction_key = jax.random.key(int(direction_key))
  if insecure_test_noise_seed is None:
    noise_key = noise_sessions.new_session_key(plan)
  else:
    noise_key = randomness.jax_noise_key(
      randomness.insecure_test_secret(insecure_test_noise_seed)
    )
  return EstimatorState(
    direction_key=direction_key,
    noise_key=noise_key,
    step=jnp.zeros([], jnp.int32),
    released=jnp.zeros([max(num_released, 1)], jnp.float32),
    privacy_plan=plan,
    method=method,
  )


def next_state(state: EstimatorState, **changes) -> EstimatorState:
  """The state after this step: ``step + 1``, a session key's plan stamp
  carried on (:func:`~zoprivacy.privacy.noise_sessions.successor`), and
  ``changes``."""
  key = state.noise_key
  if isinstance(key, noise_sessions.SessionKey):
    plan = state.privacy_plan
    changes["noise_key"] = noise_sessions.successor(key, plan, state.step)
  return state._replace(step=state.step + 1, **changes)


def step_keys(state: EstimatorState, inputs=()):
  """``(direction_key, noise_key)`` of the current step, by ``fold_in``.
  A state with a session key has it looked up first (:func:`keyed_state`,
  with the step's other ``inputs``: that serves the step).

  The noise key of step ``t`` is bound to the plan: ``noise_key`` folded
  with the plan's fingerprint, then with ``t``; a run resumed under a
  changed plan draws independent noise. Under exact vector noise the noise
  "key" is a :class:`~zoprivacy.secret_noise.vector_noise_prefetch.NoiseStep`
  (the plan-bound key and the step), which the sampler prefetches from.
  """
  state = keyed_state(state, inputs)
  noise_key = state.noise_key
  if state.privacy_plan.is_noised:
    for word in state.privacy_plan.fingerprint_words():
      noise_key = jax.random.fold_in(noise_key, word)
  direction_key = jax.random.fold_in(state.direction_key, state.step)
  if state.privacy_plan.noise_kind == "discrete_vector":
    # Exact vector noise is drawn ahead of the step, off its timing path:
    # the host needs a step-independent key and the step to prefetch.
    return direction_key, vector_noise_prefetch.NoiseStep(noise_key, state.step)
  return direction_key, jax.random.fold_in(noise_key, state.step)
