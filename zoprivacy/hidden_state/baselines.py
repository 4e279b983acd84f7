"""The two baselines of the final-iterate guarantee: composition and output
perturbation (Chien, Chen & Li, Thm 3.1 and the setup of Fig. 1).

Both use the analysis' neighbouring relation (replace-one) and batch scheme
(full batch for Thm 3.1; App. A.9's batches drawn without replacement),
so that they compare like for like with Thm 3.2.

**Composition** (Thm 3.1, App. A.4) publishes every iterate. Given the
public ``w_t`` and directions, step ``t`` releases the ``K`` coefficients
``(1/K) g_k`` along ``u_k`` (L2 sensitivity ``2 Delta / (b sqrt(K))``
under replace-one), each with noise variance ``beta sigma^2 / K + (1 -
beta) sigma^2 / d``: the directional noise plus the isotropic noise's
component along ``u_k`` (the component orthogonal to the directions
carries no signal). Per step

  eps_t(alpha) = alpha (2 Delta / b)^2 / (2 sigma^2 (beta + (K/d)(1 - beta))).

At ``directional_fraction = 1`` this is App. A.4 eq. (10) summed over
``K`` directions (Thm 3.1's case ``beta_t = 0`` in eq. (3)'s letters); at
``directional_fraction = 0`` it is eq. (12), ``d / K`` times larger (Thm
3.1's case ``beta_t = 1``). App. A.4 writes the add/remove sensitivity
``Delta``; replace-one doubles it, as in Thm 3.2.

**Output perturbation** ignores all but the last step: the final iterate is
the projection of a point of radius at most ``R'`` plus isotropic noise of
variance ``eta^2 (1 - beta) sigma^2 / d``, so

  eps(alpha) = alpha (2 R')^2 d / (2 eta^2 (1 - beta) sigma^2).

The Fig. 1 setup states it with ``R' = R`` and ``beta = 0``. The point
that is noised is ``psi(w_{T-1})``, whose norm is only bounded by ``R' = R +
eta Delta / sqrt(K)``; ``strict=True`` uses that radius.
"""

from __future__ import annotations

import math

import numpy as np

from zoprivacy.hidden_state import rdp as rdp_lib
from zoprivacy.hidden_state import setting as setting_lib


def composition_step_multiplier(
  setting: setting_lib.NoisyZOGDSetting, beta: float
) -> float:
  """Noise std over the replace-one sensitivity of one published step."""
  along, _ = setting.noise_variances(beta)
  sensitivity = (
    2.0 * setting.clip / (setting.divisor * math.sqrt(setting.num_directions))
  )
  return math.sqrt(along) / sensitivity


def composition_rdp(
  setting: setting_lib.NoisyZOGDSetting, num_steps: int, orders=None
) -> rdp_lib.RdpCurve:
  """Thm 3.1: RDP of publishing all ``num_steps`` iterates.

  Full batch: the sum of the per-step Gaussian curves above. Mini-batch
  (``setting.batch_size < n``): each step is the Gaussian subsampled
  without replacement (WBK'19 Thm. 27), composed. ``orders``: default
  :func:`zoprivacy.hidden_state.rdp.orders_for`.
  """
  if not isinstance(num_steps, int) or num_steps < 1:
    raise ValueError(f"num_steps must be an integer >= 1, got {num_steps!r}.")
  if orders is None:
    orders = rdp_lib.orders_for(setting)
  counts: dict[float, int] = {}
  for beta in setting.fractions(num_steps):
    counts[beta] = counts.get(beta, 0) + 1
  curve = None
  for beta, count in counts.items():
    mult = composition_step_multiplier(setting, beta)
    if setting.full_batch:
      step = rdp_lib.linear_curve(1.0 / (2.0 * mult * mult), orders)
    else:
      step = rdp_lib.without_replacement_gaussian_rdp(
        setting.dataset_size, setting.batch_size, mult, orders
      )
    curve = step.scaled(count) if curve is None else curve + step.scaled(count)
  return curve


def output_perturbation_rdp(
  setting: setting_lib.NoisyZOGDSetting,
  *,
  strict: bool = False,
  orders=rdp_lib.DEFAULT_ORDERS,
) -> rdp_lib.RdpCurve:
  """RDP of the last step's isotropic noise alone (Fig. 1 setup).

  Args:
    setting: the run; its last step's ``directional_fraction`` is used.
    strict: pre-noise radius ``R + eta Delta / sqrt(K)`` instead of the
      paper's ``R`` (module docstring).
    orders: RDP orders.
  """
  schedule = setting.directional_fraction
  beta = schedule[-1] if isinstance(schedule, tuple) else schedule
  radius = setting.radius
  if strict:
    radius += (
      setting.step_size * setting.clip / math.sqrt(setting.num_directions)
    )
  variance = (
    setting.step_size**2
    * (1.0 - beta)
    * setting.noise_std**2
    / (setting.dimension)
  )
  if variance <= 0:
    orders = np.asarray(orders, np.float64)
    return rdp_lib.RdpCurve(
      orders, np.full(orders.shape, np.inf), lambda a: math.inf
    )
  return rdp_lib.linear_curve((2.0 * radius) ** 2 / (2.0 * variance), orders)
