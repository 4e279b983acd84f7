"""What every estimator shares: its state, its extra arguments, its privacy.

Estimators are ``optax.GradientTransformationExtraArgs``. Their ``update``
ignores the incoming ``updates`` and returns a gradient estimate shaped like
``params``, so they go first in an ``optax.chain`` and any optimizer can
follow. The loss and the batch arrive as keyword extra arguments, the way
optax's line searches receive ``value_fn``:

    updates, state = tx.update(zeros, state, params,
                               per_example_loss=loss_fn, batch=batch, mask=mask)

``mask`` (optional, ``[B]`` bool) marks real examples in a fixed-shape padded
batch; padded slots contribute nothing. Unknown extra arguments are ignored.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import dp_accounting
import jax
import jax.numpy as jnp
import optax

from zoprivacy import mechanisms
from zoprivacy import queries


class EstimatorState(NamedTuple):
  """State of every estimator.

  Attributes:
    key: PRNG key, split every step into direction and noise keys; it never
      depends on data.
    step: number of updates taken.
    released: the scalars (or their norm, for vector estimators) released at
      the last step, after privatization: public, so they may be logged.
      For the scalar estimators this with the key is the "seed + scalar
      trajectory" of DP-ZO Sec. 5.
  """
  key: jax.Array
  step: jax.Array
  released: jax.Array


def init_state(key, num_released: int = 1) -> EstimatorState:
  if isinstance(key, int):
    key = jax.random.key(key)
  return EstimatorState(key=key, step=jnp.zeros([], jnp.int32),
                        released=jnp.zeros([num_released], jnp.float32))


def split_step_keys(state: EstimatorState):
  """``(next_key, direction_key, noise_key)``: data-independent by design."""
  next_key, direction_key, noise_key = jax.random.split(state.key, 3)
  return next_key, direction_key, noise_key


class LossArgs(NamedTuple):
  loss: Any          # batched loss (params, batch) -> [B]
  batch: Any
  mask: jax.Array | None
  per_example_loss: Any
  batched_loss: Any
  extra: dict        # every keyword extra argument, e.g. public batches


def parse_extra_args(extra_args: dict) -> LossArgs:
  """Reads ``per_example_loss`` / ``batched_loss``, ``batch`` and ``mask``."""
  per_example_loss = extra_args.get("per_example_loss")
  batched_loss = extra_args.get("batched_loss")
  if "batch" not in extra_args:
    raise ValueError("The estimator's update needs the keyword extra arg batch=.")
  loss = queries.as_batched_loss(per_example_loss, batched_loss)
  return LossArgs(loss, extra_args["batch"], extra_args.get("mask"),
                  per_example_loss, batched_loss, dict(extra_args))


@dataclasses.dataclass(frozen=True)
class PrivacySpec:
  """How one step of an estimator spends privacy.

  ``mechanism`` states the sensitivity, the noise and the per-release
  ``dp_accounting`` event (see :mod:`zoprivacy.mechanisms`). One step is that
  event under Poisson sampling with probability ``expected_batch_size / n``
  (``p = 1``: full batch). The estimate is divided by the *expected* batch
  size, as DP-ZO Alg. 1 line 13 and DPZero Alg. 2 line 3 do.
  """
  mechanism: mechanisms.Mechanism
  expected_batch_size: float
  dataset_size: int | None = None

  @property
  def neighboring(self) -> str:
    return self.mechanism.neighboring

  def sampling_probability(self, dataset_size: int | None = None) -> float:
    n = dataset_size if dataset_size is not None else self.dataset_size
    if n is None:
      raise ValueError(
          "The dataset size is needed for the sampling probability: pass "
          "dataset_size= to the estimator or to this call.")
    if self.expected_batch_size > n:
      raise ValueError(
          f"expected_batch_size ({self.expected_batch_size}) exceeds the "
          f"dataset size ({n}).")
    return self.expected_batch_size / n

  def step_event(self, dataset_size: int | None = None) -> dp_accounting.DpEvent:
    """The ``dp_accounting`` event of one step (Poisson-subsampled release)."""
    p = self.sampling_probability(dataset_size)
    return dp_accounting.PoissonSampledDpEvent(p, self.mechanism.dp_event())

  def dp_event(self, num_steps: int,
               dataset_size: int | None = None) -> dp_accounting.DpEvent:
    """The event of ``num_steps`` steps."""
    return dp_accounting.SelfComposedDpEvent(self.step_event(dataset_size),
                                             int(num_steps))

  def epsilon(self, num_steps: int, delta: float,
              dataset_size: int | None = None) -> float:
    """Epsilon after ``num_steps`` steps: PLD, pessimistic, add/remove max."""
    from zoprivacy import accounting  # pylint: disable=g-import-not-at-top
    return accounting.pld_epsilon(self.dp_event(num_steps, dataset_size),
                                  delta=delta, neighboring=self.neighboring)


def privacy_spec(*, clip, noise_multiplier, expected_batch_size,
                 dataset_size=None, num_queries: int = 1,
                 neighboring: str = "add_or_remove",
                 mechanism: str = "gaussian") -> PrivacySpec:
  """Validates the privacy hyperparameters and builds the step's spec.

  Shared by every estimator that privatizes a sum of per-example
  contributions clipped at ``clip`` with Gaussian or Laplace noise under
  Poisson sampling. Runs at construction, before any data is seen.
  """
  from zoprivacy import validation  # pylint: disable=g-import-not-at-top
  clip = validation.positive("clip", clip)
  noise_multiplier = validation.positive("noise_multiplier", noise_multiplier)
  num_queries = validation.positive_int("num_queries", num_queries)
  validation.one_of("neighboring", neighboring, mechanisms.NEIGHBORING_RELATIONS)
  expected_batch_size, dataset_size = validation.batch_size_and_dataset(
      expected_batch_size, dataset_size)
  validation.one_of("mechanism", mechanism, ("gaussian", "laplace"))
  return PrivacySpec(
      mechanisms.make_mechanism(mechanism, clip=clip,
                                noise_multiplier=noise_multiplier,
                                num_queries=num_queries, neighboring=neighboring),
      expected_batch_size, dataset_size)


class PrivateEstimator(optax.GradientTransformationExtraArgs):
  """An ``optax.GradientTransformationExtraArgs`` that knows its privacy.

  ``privacy`` is a :class:`PrivacySpec` (``None`` for non-private baselines).
  It stays on the estimator object, so keep a reference to it when chaining:

      est = zoprivacy.dpzero(...)
      tx = optax.chain(est, optax.sgd(1e-3))
      eps = est.privacy.epsilon(num_steps=T, delta=1e-5)
  """

  def __new__(cls, init, update, privacy: PrivacySpec | None = None):
    self = super().__new__(cls, init, update)
    self.privacy = privacy
    return self


def build_estimator(compute, *, key, privacy: PrivacySpec | None,
                    num_released: int = 1) -> PrivateEstimator:
  """Wraps a step computation into an optax transformation.

  ``compute(params, loss_args, direction_key, noise_key) -> (grad, released)``
  holds the method; this wrapper owns what every estimator shares: the state,
  the data-independent key schedule and the extra-argument parsing.
  """

  def init_fn(params):
    del params
    return init_state(key, num_released)

  def update_fn(updates, state, params=None, **extra_args):
    del updates
    if params is None:
      raise ValueError("Estimators need params in update().")
    args = parse_extra_args(extra_args)
    next_key, direction_key, noise_key = split_step_keys(state)
    grad, released = compute(params, args, direction_key, noise_key)
    released = jnp.asarray(released, jnp.float32).reshape([num_released])
    return grad, EstimatorState(key=next_key, step=state.step + 1,
                                released=released)

  return PrivateEstimator(init_fn, update_fn, privacy)
