"""First-order public-data baselines of PAZO: DPMD and DOPE-SGD.

============  =============================================  ===============
factory       update returned (optax convention, minimised)  privatized part
============  =============================================  ===============
``dpmd``      ``a_t g_pub + (1 - a_t) g_dpsgd``              DP-SGD sum
``dope_sgd``  ``g_pub + (sum clip(g_i - g_pub) + N) / B``    residual sum
============  =============================================  ===============

Public gradients come from :mod:`zoprivacy.estimators.public_data`; the
private part is a Gaussian mechanism on a Poisson-sampled batch
(``PoissonSampled(p, Gaussian(sigma))`` per step). GEP lives in
:mod:`zoprivacy.estimators.gep`.
"""

from __future__ import annotations

import jax.numpy as jnp

from zoprivacy.core import validation
from zoprivacy.estimators import base, public_data, registry
from zoprivacy.estimators.dp_sgd import estimator as dp_sgd_estimator
from zoprivacy.estimators.dp_sgd import (
  private_gradient,
  privatization,
  vector_privatization,
)

# --------------------------------------------------------------------- DPMD


def dpmd_public_weight(step, num_steps: int):
  """DPMD's public weight ``alpha_t = cos(pi t / (2T))``, held at 0 for t >= T."""
  t = jnp.minimum(jnp.asarray(step, jnp.float32), float(num_steps))
  return jnp.cos(jnp.pi * t / (2.0 * num_steps))


@registry.estimator(
  "dpmd",
  public_data="batch",
  learning_rate=0.1,
  privatize=vector_privatization,
)
def dpmd(
  privacy,
  *,
  num_steps: int,
  per_example_clipping: str = "explicit",
  direction_key=0,
  physical_batch_size: int | None = None,
) -> base.PrivateEstimator:
  """DPMD (Amid et al. 2022, public-data-assisted mirror descent), first order.

  The first-order form used as PAZO's baseline: ``g_t = alpha_t g_pub + (1 -
  alpha_t) g_priv`` with ``g_priv`` the DP-SGD gradient (per-example clip
  ``C``, noise ``N(0, sigma^2 C^2 I)``, divided by ``b``), ``g_pub`` the
  gradient of the mean loss on ``public_batch`` and ``alpha_t = cos(pi t /
  (2T))`` (:func:`dpmd_public_weight`), ``t`` the estimator's step count and
  ``T = num_steps``: all public at ``t = 0``, all private from ``t = T``.

  Privacy: exactly DP-SGD's (the public gradient is free). Cost (Table 6):
  ``b`` private forward+backward (vmapped), one public forward+backward.

  Per-example contract, secret noise keys and ``physical_batch_size``: see
  :mod:`zoprivacy.estimators.base`.
  """
  num_steps = validation.positive_int("num_steps", num_steps)
  private = dp_sgd_estimator(
    privacy,
    per_example_clipping=per_example_clipping,
    direction_key=direction_key,
    physical_batch_size=physical_batch_size,
  )

  def update_fn(updates, state, params=None, **extra_args):
    public_data.require_params(params)
    g_private, new_state = private.update(updates, state, params, **extra_args)
    args = base.parse_extra_args(extra_args, physical_batch_size)
    g_pub = public_data.public_batch_gradient(args, params)
    weight = dpmd_public_weight(state.step, num_steps)
    return public_data.combine(weight, g_pub, g_private), new_state

  return base.PrivateEstimator(private.init, update_fn, private.privacy_plan)


# ----------------------------------------------------------------- DOPE-SGD


@registry.estimator(
  "dope_sgd",
  public_data="batch",
  learning_rate=0.1,
  privatize=vector_privatization,
)
def dope_sgd(
  privacy, *, direction_key=0, physical_batch_size: int | None = None
) -> base.PrivateEstimator:
  """DOPE-SGD's gradient (Nasr et al. 2023): clip around the public gradient.

  ``g = g_pub + (sum_i clip_C(grad f(x; xi_i) - g_pub) + N(0, sigma^2 C^2
  I)) / b``: the clipping origin moves to the public gradient ``g_pub``
  (mean loss on ``public_batch``), which is added back. Adding ``b g_pub``
  to the clipped sum before the noise, as the paper describes, is the same
  release since ``b`` is the *expected* batch size; adding ``g_pub`` once per
  realized example instead would make the sensitivity ``C + ||g_pub||``.
  (Nasr et al.'s synthetic-data augmentation and averaging are not part of
  this gradient.)

  Privacy: sensitivity ``C`` of the residual sum (add/remove; ``2C``
  replace-one), noise std ``sigma C``, ``GaussianDpEvent(sigma)``
  Poisson-sampled at ``p = b/n``; by default (``noise='exact'``) exact
  vector noise on an integer lattice, as DP-SGD's. Cost (Table 6): ``b``
  private forward+backward (vmapped), one public forward+backward.

  Per-example contract, secret noise keys and ``physical_batch_size``: see
  :mod:`zoprivacy.estimators.base`.
  """
  privacy = privatization(privacy)

  def gradient(params, args, dir_key, noise_key):
    del dir_key
    g_pub = public_data.public_batch_gradient(args, params)
    return private_gradient(privacy, params, args, noise_key, origin=g_pub)

  return base.build_vector_estimator(
    gradient,
    direction_key=direction_key,
    privacy=privacy,
    physical_batch_size=physical_batch_size,
  )
