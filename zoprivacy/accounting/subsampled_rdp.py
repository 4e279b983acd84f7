"""Epsilon of the Poisson-subsampled multivariate discrete Gaussian (RDP).

dp_accounting has no event for the exact vector mechanism
(:mod:`zoprivacy.secret_noise.vector_discrete_mechanism`): i.i.d. discrete Gaussian
noise of integer sigma ``s`` on an integer vector whose L2 sensitivity is
at most ``M``, with ``s >= sigma M`` (``sigma = noise_multiplier``). Its
epsilon is bounded in four steps, at integer orders ``alpha`` only:

1. Base pair: ``Q = N_Z(0, s^2 I)``, ``R = N_Z(k, s^2 I)`` for an integer
   shift ``||k||_2 <= M``. For every order ``l >= 1``, ``D_l(R||Q) =
   D_l(Q||R) <= l ||k||^2 / (2 s^2) <= l / (2 sigma^2)`` (Canonne, Kamath &
   Steinke 2020, Prop. 5, one coordinate; Renyi divergence adds over the
   independent coordinates).
2. Add direction (Poisson subsampling at ``p``, ``P = (1-p) Q + p R``): for
   integer ``alpha`` the binomial expansion is exact and every term is
   nonnegative, so ``E_Q[(P/Q)^alpha] = sum_l C(alpha,l) (1-p)^(alpha-l) p^l
   e^{(l-1) D_l(R||Q)} <= sum_l C(alpha,l) (1-p)^(alpha-l) p^l e^{l(l-1) /
   (2 sigma^2)}``: the sampled Gaussian's expression at integer orders
   (Mironov, Talwar & Zhang 2019, Sec. 3.3), which dp_accounting's
   ``RdpAccountant`` evaluates for ``PoissonSampled(p, Gaussian(sigma))``.
3. Remove direction, ``E_P[(Q/P)^alpha] <= E_Q[(P/Q)^alpha]``: the
   involution ``x -> k - x`` swaps ``Q`` and ``R`` (the discrete Gaussian is
   symmetric), so pairing ``x`` with ``k - x`` (as Mironov, Talwar & Zhang
   pair ``z`` with ``1 - z`` for the continuous Gaussian) reduces the claim
   to a pointwise inequality in ``t = R(x)/Q(x) > 0`` that involves neither
   the noise nor the dimension. With ``g(s) = s^a - s^(1-a)`` it reads
   ``f(t) = g(1 + p(t-1)) + t g(1 + p(1/t - 1)) >= 0``. Proof, for real
   ``a >= 1`` and ``p`` in ``[0, 1]``: ``f(1/t) = f(t)/t``, so take ``t >=
   1``. Put ``y = p(t-1)/t``, ``s = 1/(1-y)``; ``p <= 1`` is ``t >= s``. As a
   function of ``t`` (``y`` fixed), ``H(t) = g(1 + ty) - t c`` with ``c =
   s^(a-1) - s^(-a)`` has ``H(s) = 0`` (the case ``p = 1``), and ``H'`` is
   increasing because ``g`` is convex on ``[1, inf)`` (``g'' = a(a-1)(s^(a-2)
   - s^(-a-1)) >= 0``). ``s^(a+1) H'(s) = K(s) = (a-1) s^(2a) - a s^(2a-1) +
   a s - (a-1)`` has ``K(1) = K'(1) = 0`` and ``K''(s) = 2a(a-1)(2a-1)
   s^(2a-3) (s-1) >= 0``, so ``H'(s) >= 0``, hence ``H >= 0`` on ``[s,
   inf)``. The test file also checks ``f >= 0`` on a grid
   (``tests/privacy/test_vector_exact_noise.py``).
4. ``T`` steps compose additively in RDP; dp_accounting converts to
   ``(epsilon, delta)``.
5. The sampler. The device sampler's draws are within ``eta`` of the exact
   ones in total variation per step (a coupling that agrees except on an
   event of probability ``eta``), so for any set ``S`` of outcomes of the
   ``T`` steps, ``P[M'(D) in S] <= P[M(D) in S] + T eta <= e^eps P[M(D') in
   S] + delta_M + T eta <= e^eps P[M'(D') in S] + delta_M + (1 + e^eps) T
   eta``: the run is ``(eps, delta_M + (1 + e^eps) T eta)``-DP.
   :func:`composed_epsilon` takes ``eps_1``, the RDP epsilon at ``delta /
   2``, sets ``delta_M = delta - (1 + e^eps_1) T eta`` (refusing, with an
   infinite epsilon, if that is below ``delta / 2``) and returns the RDP
   epsilon at ``delta_M``, which is at most ``eps_1``.

So the exact vector mechanism is accounted exactly as the continuous
sampled Gaussian's RDP at integer orders: a little above its PLD epsilon
(docs/exact_noise.md gives the ratio of calibrated multipliers).
Replace-one neighbours are not covered (the mechanism refuses them).
"""

from __future__ import annotations

import math

import dp_accounting

# The device sampler's draws are within 2^-112 of exact in total variation
# (zoprivacy.secret_noise.device_discrete_gaussian); a step makes at most
# 16 of them, so it is within 2^-108 of the exact mechanism (step 5).
SAMPLER_DEVIATION = 2.0**-108
ORDERS = tuple(range(2, 129)) + (160, 192, 256, 384, 512, 768, 1024)


def step_event(noise_multiplier: float, sampling_probability: float):
  """The dp_accounting event whose integer-order RDP bounds one step."""
  p = float(sampling_probability)
  if not 0.0 < p <= 1.0:
    raise ValueError(f"sampling probability must be in (0, 1], got {p}.")
  event = dp_accounting.GaussianDpEvent(float(noise_multiplier))
  return event if p >= 1.0 else dp_accounting.PoissonSampledDpEvent(p, event)


def composed_epsilon(
  segments, delta: float, *, deviation_per_step: float = SAMPLER_DEVIATION
) -> float:
  """Epsilon of ``(event, num_steps)`` segments composed in RDP at the
  integer orders of :data:`ORDERS` (additive composition, step 4), with
  the sampler's deviation per step added to delta (step 5)."""
  acc = dp_accounting.rdp.RdpAccountant(orders=list(ORDERS))
  steps = 0
  for event, num_steps in segments:
    if int(num_steps) > 0:
      acc.compose(event, int(num_steps))
      steps += int(num_steps)
  if steps == 0:
    return 0.0
  delta = float(delta)
  if deviation_per_step <= 0.0:
    return float(acc.get_epsilon(delta))
  eps_half = float(acc.get_epsilon(delta / 2))
  slack = steps * deviation_per_step * (1.0 + math.exp(min(eps_half, 700.0)))
  if not slack <= delta / 2:
    return math.inf
  return float(acc.get_epsilon(delta - slack))


def epsilon(
  *,
  noise_multiplier: float,
  sampling_probability: float,
  num_steps: int,
  delta: float,
) -> float:
  """Epsilon after ``num_steps`` Poisson-subsampled steps at ``delta``."""
  event = step_event(noise_multiplier, sampling_probability)
  return composed_epsilon([(event, num_steps)], delta)
