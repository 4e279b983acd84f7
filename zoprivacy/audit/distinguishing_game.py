"""The distinguishing game of one estimator step, with a worst-case canary.

Two neighbouring datasets under add/remove (DP-ZO App. A): world 0 is a
fixed-shape padded batch ``D`` whose canary slot is masked out, world 1 is
``D`` plus the canary (the same batch, slot unmasked). The loss is chosen by
the auditor so that every example of ``D`` has a zero finite difference (and
gradient) while the canary's is ``1e6`` times the sum of the direction's
coordinates, far past any clip: its clipped scalar sits at ``+-C``, the
largest change one example may make (the sensitivity of DPZero Alg. 2
line 3 and DP-ZO Alg. 1 lines 13/15; for DP-SGD and DPGD-0th the clipped
per-example vector has norm ``C``).

One step is run ``num_trials`` times per world, vmapped over independent
noise keys (each trial replaces the state's noise key; the public direction
key stays fixed, as it is public). The game plays whatever path the
estimator's plan declares: for an exact-noise estimator the trial's key
feeds the host's exact sampler through the update's own host callback
(the default path, integer noise), for a float one the float sampler
(secure_mode or the plain ``noise='float'`` opt-in). The released quantity is projected on the
canary's direction ``c``, which the auditor knows exactly: ``c`` is the
difference between the two worlds' releases under one and the same noise
key (the noise is additive, so it cancels). For the scalar estimators the
release is the privatized two-point scalar ``s`` (``EstimatorState.released``),
for the vector estimators the privatized gradient. The score
``<release, c> / <c, c>`` is the test statistic of
:func:`zoprivacy.audit.clopper_pearson.threshold_audit`, whose epsilon lower
bound (95% confidence by default) is compared with the accountant's epsilon
of one step, ``plan.epsilon(num_steps=1, delta=delta)``.

The game does not subsample (the canary is in every world-1 batch), so the
plan must have sampling probability 1 (``expected_batch_size ==
dataset_size``): an accountant epsilon that counts subsampling
amplification would not describe the game, and is refused.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np

from zoprivacy.audit import clopper_pearson
from zoprivacy.estimators import composition
from zoprivacy.mechanisms import values as mechanisms_accounting


def _replace_one(neighboring) -> bool:
  rel = mechanisms_accounting.relation(neighboring)
  return rel == mechanisms_accounting.REPLACE_ONE


CANARY_LOSS_SCALE = 1e6
STATISTICS = ("released", "gradient")
CHUNK_SIZE = 32768  # trials per compiled, vmapped call (memory bound)


def canary_loss(params, example):
  """``example * 1e6 * sum(params)``: zero for ``example = 0``, and for the
  canary (``example = 1``) a finite difference ``1e6 * sum(u)`` and a
  gradient of norm ``1e6 sqrt(d)``, both clipped to the bound."""
  flat = jax.flatten_util.ravel_pytree(params)[0]
  return example * CANARY_LOSS_SCALE * jnp.sum(flat)


class CanaryGame(NamedTuple):
  """The fixed inputs of the game.

  Attributes:
    params: the point where the step is taken.
    batch: ``[num_examples]`` examples of :func:`canary_loss`: zeros, and
      1.0 in the canary slot.
    canary_index: the canary's slot.
    per_example_loss: the auditor's loss.
    neighboring: 'add_or_remove' (world 0 masks the canary) or
      'replace_one' (world 0 replaces it by its opposite, ``-1.0``: the
      clipped contribution moves from ``-C`` to ``+C``, the replace-one
      sensitivity ``2C``).
  """

  params: Any
  batch: jax.Array
  canary_index: int
  per_example_loss: Any = canary_loss
  neighboring: str = "add_or_remove"

  @property
  def num_examples(self) -> int:
    return int(self.batch.shape[0])

  def mask(self, include_canary) -> jax.Array:
    """World 0 (canary masked, add/remove) or world 1 (canary present)."""
    mask = jnp.ones([self.num_examples], bool)
    if _replace_one(self.neighboring):
      return mask
    return mask.at[self.canary_index].set(jnp.asarray(include_canary, bool))

  def inputs(self, include_canary) -> jax.Array:
    """The batch of world 0 or 1 (replace-one: the canary's opposite in
    world 0)."""
    if not _replace_one(self.neighboring):
      return self.batch
    value = jnp.where(jnp.asarray(include_canary, bool), 1.0, -1.0)
    return self.batch.at[self.canary_index].set(value)


def worst_case_canary_game(
  *, num_examples: int = 8, num_params: int = 4
) -> CanaryGame:
  """A game with ``num_examples - 1`` zero-contribution examples and one
  canary (the last slot), at ``params = zeros([num_params])``."""
  if num_examples < 1 or num_params < 1:
    raise ValueError("Need num_examples >= 1 and num_params >= 1.")
  batch = jnp.zeros([num_examples], jnp.float32).at[-1].set(1.0)
  params = {"w": jnp.zeros([num_params], jnp.float32)}
  return CanaryGame(params, batch, num_examples - 1)


def _release_fn(
  estimator, game: CanaryGame, statistic: str, extra_args=None, step=0
):
  """``(noise_key, include_canary) -> flat release`` of one step."""
  if statistic not in STATISTICS:
    raise ValueError(
      f"statistic must be one of {STATISTICS}, got {statistic!r}"
    )
  state = composition.check(estimator.init(game.params))  # checked whole
  zeros = jax.tree.map(jnp.zeros_like, game.params)

  def release(noise_key, include_canary):
    grad, new_state = estimator.update(
      zeros,
      state._replace(noise_key=noise_key, step=jnp.asarray(step, jnp.int32)),
      game.params,
      per_example_loss=game.per_example_loss,
      batch=game.inputs(include_canary),
      mask=game.mask(include_canary),
      **(extra_args or {}),
    )
    if statistic == "released":
      return jnp.reshape(new_state.released, [-1]).astype(jnp.float32)
    return jax.flatten_util.ravel_pytree(grad)[0].astype(jnp.float32)

  return release


def canary_direction(
  estimator,
  game: CanaryGame,
  *,
  statistic: str = "released",
  seed: int = 0,
  extra_args=None,
  step: int = 0,
) -> np.ndarray:
  """``c = release(world 1, k) - release(world 0, k)`` for one noise key
  ``k``: the canary's exact, noise-free effect on the release."""
  release = jax.jit(_release_fn(estimator, game, statistic, extra_args, step))
  key = jax.random.key(seed)
  diff = np.asarray(release(key, True), np.float64) - np.asarray(
    release(key, False), np.float64
  )
  return _moved(diff)


def _moved(diff: np.ndarray) -> np.ndarray:
  """``diff``, refused where the canary does not move the release."""
  if not np.all(np.isfinite(diff)) or not np.any(diff != 0):
    raise ValueError(
      "The canary does not move the release: the game cannot distinguish "
      "the worlds (is the statistic the private release?)."
    )
  return diff


def _scorer(estimator, game, statistic, extra_args, step, direction=None):
  """``(keys, include) -> (scores, c)`` of one chunk of trials, jitted once
  (both worlds of a game share it: ``include`` is an argument). Unless
  ``direction`` is given, two more lanes play :func:`canary_direction`'s
  key (seed 0) in world 1 and in world 0: their difference is the canary's
  direction ``c``, found in the same program (one compilation, not two)."""
  release = _release_fn(estimator, game, statistic, extra_args, step)
  if direction is not None:
    unit = jnp.asarray(direction / np.dot(direction, direction), jnp.float32)
  probe = jax.random.key(0)[None]

  @jax.jit
  def chunk_scores(keys, include):
    if direction is not None:
      return jax.vmap(release)(keys, include) @ unit, None
    keys = jnp.concatenate([probe, probe, keys])
    include = jnp.concatenate([jnp.asarray([True, False]), include])
    flat = jax.vmap(release)(keys, include)
    c = flat[0] - flat[1]
    return flat[2:] @ (c / jnp.dot(c, c)), c

  return chunk_scores


def _scores(chunk_scores, include_canary, num_trials, seed, chunk_size):
  """``chunk_scores`` over ``num_trials`` keys from ``seed``, in the fewest
  chunks of at most ``chunk_size`` trials, all of one size (the last padded
  by at most one trial per chunk: one compiled shape, little waste)."""
  if num_trials < 1:
    raise ValueError(f"num_trials must be >= 1, got {num_trials}.")
  keys = jax.random.split(jax.random.key(seed), num_trials)
  include = np.broadcast_to(np.asarray(include_canary, bool), [num_trials])
  num_chunks = -(-num_trials // max(int(chunk_size), 1))
  size = -(-num_trials // num_chunks)
  out = []
  for start in range(0, num_trials, size):
    part = keys[start : start + size]
    part_include = include[start : start + size]
    n = part.shape[0]
    if n < size:  # pad to one compiled shape
      part = jnp.concatenate([part, keys[: size - n]])
      part_include = np.concatenate([part_include, include[: size - n]])
    scores, c = chunk_scores(part, part_include)
    if c is not None and not out:  # before any score is used
      _moved(np.asarray(c, np.float64))
    out.append(np.asarray(scores, np.float64)[:n])
  return np.concatenate(out)


def game_scores(
  estimator,
  game: CanaryGame,
  *,
  include_canary: bool,
  num_trials: int,
  seed: int,
  statistic: str = "released",
  direction: np.ndarray | None = None,
  chunk_size: int = CHUNK_SIZE,
  extra_args=None,
  step: int = 0,
) -> np.ndarray:
  """``[num_trials]`` scores ``<release, c> / <c, c>`` of one world, each
  from an independent noise key derived from ``seed`` (jit + vmap, in
  chunks of at most ``chunk_size`` trials). ``include_canary``: one bool
  for the whole world, or one per trial (the canary's Poisson coin, see
  :func:`run_game`)."""
  chunk_scores = _scorer(
    estimator, game, statistic, extra_args, step, direction
  )
  return _scores(chunk_scores, include_canary, num_trials, seed, chunk_size)


class GameResult(NamedTuple):
  """The outcome of :func:`run_game`.

  Attributes:
    audit: the threshold test and its epsilon lower bound.
    accountant_epsilon: ``plan.epsilon(num_steps=1, delta=delta)``.
    num_trials: trials per world (half select the threshold, half are
      evaluated).
    plan_description: ``plan.describe()``.
    scores: ``(world 0, world 1)`` score arrays, for plots.
  """

  audit: clopper_pearson.ThresholdAudit
  accountant_epsilon: float
  num_trials: int
  plan_description: str
  scores: tuple[np.ndarray, np.ndarray]

  @property
  def epsilon_lower_bound(self) -> float:
    return self.audit.epsilon_lower_bound

  @property
  def ratio(self) -> float:
    """Audit lower bound over accountant epsilon (above 1: a violation)."""
    if self.accountant_epsilon == 0:
      return math.inf
    return self.epsilon_lower_bound / self.accountant_epsilon


def one_step_accountant_epsilon(
  plan, *, delta: float, subsampled: bool = False
) -> float:
  """The plan's epsilon for one step; under subsampling (p < 1) only if the
  game samples the canary (``subsampled``)."""
  p = plan.sampling_probability
  if p != 1.0 and not subsampled:
    raise ValueError(
      f"The game runs without subsampling, but the plan accounts Poisson "
      f"sampling at p={p:.4g}: build the estimator with expected_batch_size "
      "== dataset_size."
    )
  return float(plan.epsilon(num_steps=1, delta=delta))


def world_seeds(seed: int) -> tuple[int, int]:
  """The key streams of world 0 and world 1 in :func:`run_game` of
  ``seed`` (independent of each other)."""
  return tuple(int(s) for s in np.random.SeedSequence(seed).generate_state(2))


def run_game(
  estimator,
  *,
  game: CanaryGame | None = None,
  num_trials: int = 20000,
  delta: float = 1e-5,
  confidence: float = 0.95,
  seed: int = 0,
  statistic: str = "released",
  plan=None,
  canary_in_batch=None,
  extra_args=None,
  step: int = 0,
) -> GameResult:
  """Plays the game in both worlds; the audit bound and the accountant's.

  Args:
    estimator: a private estimator (``optax`` transformation whose update
      takes ``per_example_loss=``, ``batch=``, ``mask=``).
    game: the canary game (default :func:`worst_case_canary_game`).
    num_trials: trials per world; the threshold is chosen on one half and
      evaluated on the other (see
      :func:`~zoprivacy.audit.clopper_pearson.threshold_audit`).
    delta: the delta of both epsilons.
    confidence: of the lower bound.
    seed: the auditor's seed (world 0 and world 1 draw from different,
      independent key streams).
    statistic: 'released' (the scalar estimators' privatized scalars) or
      'gradient' (the privatized gradient, for the vector estimators).
    plan: the claimed privacy plan (default ``estimator.privacy_plan``).
    canary_in_batch: for a plan with Poisson sampling (``p < 1``), whether
      world 1's batch holds the canary in each trial: ``[num_trials]``
      bools drawn by the sampler under audit (an honest Poisson sampler
      includes it with probability ``p``; the accountant's epsilon is then
      the plan's amplified one). ``None``: always (full batch, ``p = 1``).
    extra_args: further update arguments, the same in both worlds (the
      public batches of the public-data methods).
    step: the estimator's step counter in the game (DPMD is all public at
      step 0; audit it at ``num_steps``, where it is all private).
  """
  game = worst_case_canary_game() if game is None else game
  plan = estimator.privacy_plan if plan is None else plan
  # Play the neighbouring relation the plan claims.
  game = game._replace(neighboring=plan.neighboring)
  accountant = one_step_accountant_epsilon(
    plan, delta=delta, subsampled=canary_in_batch is not None
  )
  in_world_1 = True if canary_in_batch is None else canary_in_batch
  chunk_scores = _scorer(estimator, game, statistic, extra_args, step)
  scores = tuple(
    _scores(
      chunk_scores,
      in_world_1 if world else False,
      num_trials,
      world_seed,
      CHUNK_SIZE,
    )
    for world, world_seed in enumerate(world_seeds(seed))
  )
  audit = clopper_pearson.threshold_audit(
    scores[0],
    scores[1],
    delta=delta,
    confidence=confidence,
    split_seed=seed,
  )
  return GameResult(audit, accountant, num_trials, plan.describe(), scores)
