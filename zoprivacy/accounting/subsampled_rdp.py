"""Epsilon of the Poisson-subsampled multivariate discrete Gaussian (RDP).

dp_accounting has no event for the exact vector mechanism
(:mod:`zoprivacy.vector_discrete_mechanism`): i.i.d. discrete Gaussian
noise of integer sigma ``s`` on an integer vector whose L2 sensitivity is
at most ``M``, with ``s >= noise_multiplier * M``. Its epsilon is bounded
in three proven steps, each an upper bound:

1. Base mechanism: for integer shifts ``k`` with ``||k||_2 <= M``, the Renyi
   divergence of order ``alpha`` between the product discrete Gaussians
   is at most ``alpha ||k||^2 / (2 s^2) <= alpha / (2 sigma^2)`` with
   ``sigma = noise_multiplier`` (Canonne, Kamath & Steinke 2020, Prop. 5
   per coordinate, summed over coordinates: Renyi divergence is additive
   over independent coordinates), in both directions.
2. Poisson subsampling at probability ``p``, add/remove neighbours: the
   general upper bound of Zhu & Wang 2019 (Poisson Subsampled Renyi
   Differential Privacy, ICML, Thm. 6), for integer ``alpha >= 2``::

     eps'(alpha) <= log( (1-p)^(alpha-1) (alpha p - p + 1)
                   + C(alpha,2) p^2 (1-p)^(alpha-2) e^{eps(2)}
                   + 3 sum_{l=3}^{alpha} C(alpha,l) (1-p)^(alpha-l) p^l
                       e^{(l-1) eps(l)} ) / (alpha - 1),

   which holds for any mechanism with RDP ``eps(.)``; ``p = 1`` (full
   batch) is the base mechanism itself.
3. ``T`` steps compose additively in RDP; the conversion to ``(epsilon,
   delta)`` is dp_accounting's (``rdp_privacy_accountant.compute_epsilon``).

The bound is not tight: at the same multiplier it reports a larger epsilon
than the continuous Gaussian's PLD, so a calibrated run needs a larger
multiplier (docs/exact_noise.md gives the ratio). Replace-one neighbours
are not covered (the mechanism refuses them).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant
from scipy import special

ORDERS = tuple(range(2, 129)) + (160, 192, 256, 384, 512, 768, 1024)


def base_rdp(orders, noise_multiplier: float) -> np.ndarray:
  """``alpha / (2 sigma^2)``: the discrete Gaussian's RDP bound (step 1)."""
  return np.asarray(orders, np.float64) / (2.0 * noise_multiplier**2)


@functools.lru_cache(maxsize=256)
def subsampled_rdp(noise_multiplier: float, sampling_probability: float):
  """Zhu & Wang's Thm. 6 bound at each of :data:`ORDERS` (step 2)."""
  p = float(sampling_probability)
  if not 0.0 < p <= 1.0:
    raise ValueError(f"sampling probability must be in (0, 1], got {p}.")
  if p == 1.0:
    return base_rdp(ORDERS, noise_multiplier)
  out = []
  log_p, log_q = math.log(p), math.log1p(-p)
  for alpha in ORDERS:
    ls = np.arange(2, alpha + 1, dtype=np.float64)
    log_binom = (
      special.gammaln(alpha + 1)
      - special.gammaln(ls + 1)
      - special.gammaln(alpha - ls + 1)
    )
    cgf = (ls - 1) * base_rdp(ls, noise_multiplier)  # (l - 1) eps(l)
    terms = log_binom + (alpha - ls) * log_q + ls * log_p + cgf
    terms[1:] += math.log(3.0)  # l >= 3
    first = (alpha - 1) * log_q + math.log(alpha * p - p + 1)
    log_total = special.logsumexp(np.concatenate([[first], terms]))
    out.append(max(log_total, 0.0) / (alpha - 1))
  return np.asarray(out)


def epsilon(
  *,
  noise_multiplier: float,
  sampling_probability: float,
  num_steps: int,
  delta: float,
) -> float:
  """Epsilon after ``num_steps`` subsampled steps at ``delta`` (step 3)."""
  if num_steps == 0:
    return 0.0
  rdp = subsampled_rdp(float(noise_multiplier), float(sampling_probability))
  eps, _ = rdp_privacy_accountant.compute_epsilon(
    ORDERS, rdp * int(num_steps), float(delta)
  )
  return float(eps)


def plan_epsilon(plan, num_steps: int, delta: float) -> float:
  """:func:`epsilon` of a plan whose mechanism is 'vector_discrete_gaussian'."""
  if plan.neighboring != "add_or_remove":
    raise ValueError(
      "The subsampled discrete Gaussian RDP bound covers add/remove only."
    )
  return epsilon(
    noise_multiplier=plan.noise_multiplier,
    sampling_probability=plan.sampling_probability,
    num_steps=num_steps,
    delta=delta,
  )
