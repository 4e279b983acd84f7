"""zoprivacy: differentially private zeroth-order optimization in JAX.

Estimators are optax transformations that go first in a chain:

    est = zoprivacy.dpzero(clip=1.0, noise_multiplier=2.0, smoothing=1e-3,
                           expected_batch_size=64, dataset_size=1437)
    tx = optax.chain(est, optax.sgd(1e-3))
    state = tx.init(params)
    updates, state = tx.update(zeros, state, params,
                               per_example_loss=loss_fn, batch=batch, mask=mask)
    plan = zoprivacy.find_plan(state)       # the one privacy plan
    epsilon = plan.epsilon(num_steps=T, delta=1e-5)
"""

from zoprivacy import (
  clipping,
  directions,
  hidden_state,
  mechanisms,
  privacy,
  projection,
  queries,
)
from zoprivacy.estimators import (
  ESTIMATORS,
  EstimatorState,
  PrivateEstimator,
  dope_sgd,
  dp_sgd,
  dp_zo,
  dpgd_zeroth,
  dpmd,
  dpzero,
  gep,
  mezo,
  noisy_zogd,
  noisy_zogd_chain,
  pazo_m,
  pazo_p,
  pazo_s,
  registry,
)
from zoprivacy.privacy import ExactNoiseSource, PrivacyPlan, find_plan

# Hyperparameters that fix the privacy plan: static, never injected. Pass
# them in ``optax.inject_hyperparams(..., static_args=...)``.
PRIVACY_HYPERPARAMETERS = (
  "clip",
  "noise_multiplier",
  "expected_batch_size",
  "dataset_size",
  "num_queries",
  "num_public_batches",
  "grid_points",
  "embedding_clip",
  "residual_clip",
  "embedding_noise_multiplier",
  "residual_noise_multiplier",
  "insecure_test_noise_seed",
  "exact_noise",
)


def static_args(factory) -> tuple[str, ...]:
  """The ``static_args`` to give ``optax.inject_hyperparams(factory, ...)``:
  the privacy hyperparameters (and the direction key) that ``factory`` takes.

      tx = optax.inject_hyperparams(
          zoprivacy.dpzero, static_args=zoprivacy.static_args(zoprivacy.dpzero)
      )(clip=1.0, noise_multiplier=2.0, smoothing=1e-3, ...)
  """
  import inspect  # pylint: disable=g-import-not-at-top

  names = inspect.signature(factory).parameters
  return tuple(
    a for a in PRIVACY_HYPERPARAMETERS + ("direction_key",) if a in names
  )


__version__ = "0.2.0"
