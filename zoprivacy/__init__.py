"""zoprivacy: differentially private zeroth-order optimization in JAX.

Every privacy hyperparameter is one value; estimators are optax
transformations built from it that go first in a chain::

    privacy = zoprivacy.Privacy(
        clip=1.0,
        sampling=zoprivacy.Poisson(dataset_size=1437, expected_batch_size=64),
        target=zoprivacy.Target(epsilon=2.0, delta=1e-5, num_steps=T),
    )
    tx = optax.chain(zoprivacy.dpzero(privacy, smoothing=1e-3),
                     optax.sgd(0.02))
    step = zoprivacy.make_step(tx, loss_fn)  # loss_fn(params, batch) -> [B]
    state = zoprivacy.init(tx, params)      # the composition checked
    sampler = privacy.sampler()             # the batches the plan accounts
    for t in range(T):
      batch = zoprivacy.padded_batch((X, Y), sampler.batch_indices(t))
      params, state = step(params, state, batch)
    epsilon = zoprivacy.epsilon(state)      # the releases made so far
"""

import importlib
import importlib.util
import inspect
from typing import TYPE_CHECKING

# Public API, imported lazily (PEP 562) so that ``import zoprivacy.accounting``
# (and its command line) does not pay for JAX. ``name -> module``.
_SUBMODULES = (
  "accounting",
  "clipping",
  "directions",
  "hidden_state",
  "mechanisms",
  "privacy",
  "projection",
  "queries",
)
# The modules of the grouped subpackages, read from the top as before
# (``zoprivacy.per_example_check``): ``name -> module``.
_MODULES = {
  **{
    name: f"zoprivacy.core.{name}"
    for name in (
      "linalg",
      "masked_sums",
      "nnx_support",
      "sharding",
      "validation",
    )
  },
  **{
    name: f"zoprivacy.zo.{name}"
    for name in (
      "blockwise_dot",
      "counter_directions",
      "counter_hash",
      "directions",
      "projection",
      "queries",
    )
  },
  **{
    name: f"zoprivacy.first_order.{name}"
    for name in (
      "ghost_clipping",
      "layer_capture",
      "per_example_check",
      "per_example_report",
    )
  },
  **{
    name: f"zoprivacy.training.{name}"
    for name in ("layerwise", "trajectory", "training_step")
  },
  "clipping": "zoprivacy.mechanisms.clipping",
  "discrete_mechanism": "zoprivacy.mechanisms.discrete",
  "mechanisms_accounting": "zoprivacy.mechanisms.values",
  "mechanisms_vector": "zoprivacy.mechanisms.vector_values",
  "vector_discrete_mechanism": "zoprivacy.secret_noise.vector_discrete_mechanism",
}
_EXPORTS = {
  "ESTIMATORS": "zoprivacy.estimators",
  "EstimatorState": "zoprivacy.estimators",
  "PrivateEstimator": "zoprivacy.estimators",
  "dope_sgd": "zoprivacy.estimators",
  "dp_sgd": "zoprivacy.estimators",
  "dp_zo": "zoprivacy.estimators",
  "dpgd_zeroth": "zoprivacy.estimators",
  "dpmd": "zoprivacy.estimators",
  "dpzero": "zoprivacy.estimators",
  "gep": "zoprivacy.estimators",
  "mezo": "zoprivacy.estimators",
  "noisy_zogd": "zoprivacy.estimators",
  "noisy_zogd_chain": "zoprivacy.estimators",
  "pazo_m": "zoprivacy.estimators",
  "pazo_p": "zoprivacy.estimators",
  "pazo_s": "zoprivacy.estimators",
  "registry": "zoprivacy.estimators",
  "vr_dpzero": "zoprivacy.estimators",
  "private": "zoprivacy.estimators.calibrated",
  **{
    name: "zoprivacy.privacy.value"
    for name in (
      "Exact",
      "Float",
      "FullBatch",
      "Poisson",
      "Privacy",
      "SecureMode",
      "Target",
      "TestNoise",
      "WithoutReplacement",
    )
  },
  "Batch": "zoprivacy.data.sampling",
  "ExactNoiseSource": "zoprivacy.secret_noise",
  "PrivacyPlan": "zoprivacy.privacy",
  "epsilon": "zoprivacy.privacy",
  "find_plan": "zoprivacy.privacy",
  "PoissonSampler": "zoprivacy.data.sampling",
  "padded_batch": "zoprivacy.data.sampling",
  "refresh_noise_keys": "zoprivacy.privacy",
  "init": "zoprivacy.training.training_step",
  "make_step": "zoprivacy.training.training_step",
}

__all__ = sorted(
  (*_SUBMODULES, *_EXPORTS, "PRIVACY_HYPERPARAMETERS", "static_args")
)


def _is_submodule(name: str) -> bool:
  return not name.startswith("_") and (
    importlib.util.find_spec(f"zoprivacy.{name}") is not None
  )


def __getattr__(name: str):
  """The exports above, and any submodule (``zoprivacy.per_example_check``,
  ``zoprivacy.nnx_support``, ``zoprivacy.zo``, ...), imported on first
  access."""
  if name in _MODULES:
    value = importlib.import_module(_MODULES[name])
  elif name in _SUBMODULES or (name not in _EXPORTS and _is_submodule(name)):
    value = importlib.import_module(f"zoprivacy.{name}")
  elif name in _EXPORTS:
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
  else:
    raise AttributeError(f"module 'zoprivacy' has no attribute {name!r}")
  globals()[name] = value  # cache: later lookups skip __getattr__
  return value


def __dir__():
  return __all__


if TYPE_CHECKING:  # static analysers and IDEs see the eager imports
  from zoprivacy import (  # noqa: F401
    accounting,
    hidden_state,
    mechanisms,
    privacy,
  )
  from zoprivacy.data.sampling import (  # noqa: F401
    Batch,
    PoissonSampler,
    padded_batch,
  )
  from zoprivacy.estimators import (  # noqa: F401
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
    vr_dpzero,
  )
  from zoprivacy.estimators.calibrated import private  # noqa: F401
  from zoprivacy.mechanisms import clipping  # noqa: F401
  from zoprivacy.privacy import (  # noqa: F401
    PrivacyPlan,
    epsilon,
    find_plan,
  )
  from zoprivacy.privacy.value import (  # noqa: F401
    Exact,
    Float,
    FullBatch,
    Poisson,
    Privacy,
    SecureMode,
    Target,
    TestNoise,
    WithoutReplacement,
  )
  from zoprivacy.secret_noise import ExactNoiseSource  # noqa: F401
  from zoprivacy.training.training_step import init, make_step  # noqa: F401
  from zoprivacy.zo import directions, projection, queries  # noqa: F401

# Arguments that fix the privacy plan: static, never injected. Pass them in
# ``optax.inject_hyperparams(..., static_args=...)`` (the privacy value is
# static anyway: optax injects numbers only).
PRIVACY_HYPERPARAMETERS = (
  "privacy",
  "num_public_batches",
  "residual_clip",
  "embedding_noise_multiplier",
  "residual_noise_multiplier",
)


def static_args(factory) -> tuple[str, ...]:
  """The ``static_args`` to give ``optax.inject_hyperparams(factory, ...)``:
  the privacy arguments (and the direction key and the physical batch,
  which fixes shapes) that ``factory`` takes::

      tx = optax.inject_hyperparams(
          zoprivacy.dpzero, static_args=zoprivacy.static_args(zoprivacy.dpzero)
      )(privacy, smoothing=1e-3)
  """
  names = inspect.signature(factory).parameters
  return tuple(
    a
    for a in PRIVACY_HYPERPARAMETERS + ("direction_key", "physical_batch_size")
    if a in names
  )


__version__ = "0.3.0"
