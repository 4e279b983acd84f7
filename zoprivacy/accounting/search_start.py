"""Where the noise calibration's search starts
(:mod:`zoprivacy.privacy.calibration`, which alone runs the search): the
starting points a mechanism value states (its ``warm_start`` and
``first_point``, :mod:`zoprivacy.mechanisms.values`), for the
:class:`SearchTarget` the calibration asks them about.

Two starting points. The RDP warm start (:func:`rdp_warm_start`) is
feasible: RDP bounds epsilon from above, so its multiplier meets the
target, a few percent above the PLD root. The central-limit estimate
(:func:`first_point`) is closer but only an approximation; the fine PLD
search evaluates it first where it lies below the warm start.

Many Poisson-subsampled Gaussian steps compose to nearly a Gaussian
differential privacy (GDP) mechanism: ``T`` steps at sampling probability
``p`` and multiplier ``sigma`` approach ``mu``-GDP with
``mu = p sqrt(T (exp(1 / sigma^2) - 1))`` (the central limit theorem of
Bu, Dong, Long and Su 2020, "Deep learning with Gaussian differential
privacy"; exactly ``mu = sqrt(T) / sigma`` without sampling), and
``mu``-GDP is ``(eps, delta(eps))``-DP with
``delta(eps) = Phi(-eps / mu + mu / 2) - exp(eps) Phi(-eps / mu - mu / 2)``
(Dong, Roth and Su 2022, Cor. 2.13).

It is an approximation, not a bound: it decides where the search starts,
never what it returns. In DP-ZO Table 16's regime (``p = 0.016``,
``T = 75,000``) it lies 0.1-0.3% below the fine PLD multiplier, so the
search starts :data:`RAISE` above it and usually ends after two fine PLD
evaluations instead of three.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

from scipy import optimize

from zoprivacy.accounting import events as _ev
from zoprivacy.accounting import rdp, relations

# The range of multipliers the calibration searches, in log space, and its
# largest step.
MIN_NOISE_MULTIPLIER = 1e-2
MAX_NOISE_MULTIPLIER = 1e6
X_MIN = math.log(MIN_NOISE_MULTIPLIER)
X_MAX = math.log(MAX_NOISE_MULTIPLIER)
MAX_STEP = math.log(4.0)
_ADD_OR_REMOVE = _ev.NeighboringRelation.ADD_OR_REMOVE_ONE
_REPLACE_ONE = _ev.NeighboringRelation.REPLACE_ONE

# The start is the estimate times 1 + RAISE: the estimate tends to sit a
# little below the PLD root (it misses the subsampled PLD's skew).
RAISE = 2.5e-3


class SearchTarget(NamedTuple):
  """What a search meets: ``target_epsilon`` at ``delta`` after
  ``num_steps`` steps at ``sampling_probability`` under ``neighboring``
  (the argument of a mechanism value's ``warm_start`` and ``first_point``)."""

  target_epsilon: float
  delta: float
  sampling_probability: float
  num_steps: int
  neighboring: relations.Relation

  def search_args(self) -> tuple:
    """``(target, delta, p, steps, relation name)``, the arguments of this
    module's functions."""
    return (*self[:4], relations.name(self.neighboring))


def _phi(x: float) -> float:
  """The standard normal CDF."""
  return 0.5 * math.erfc(-x / math.sqrt(2.0))


def gdp_delta(epsilon: float, mu: float) -> float:
  """``delta(eps)`` of ``mu``-GDP (Dong, Roth and Su 2022, Cor. 2.13).
  The second term is formed in log space: ``exp(eps)`` alone overflows
  for large ``eps``, their product is at most 1."""
  lower = _phi(-epsilon / mu - mu / 2)
  second = math.exp(epsilon + math.log(lower)) if lower > 0 else 0.0
  return _phi(-epsilon / mu + mu / 2) - second


def gdp_mu(epsilon: float, delta: float) -> float | None:
  """The ``mu`` whose GDP curve passes through ``(epsilon, delta)``, or
  ``None`` outside ``mu`` in ``[1e-4, 60]``."""

  def gap(log_mu):
    d = gdp_delta(epsilon, math.exp(log_mu))
    return math.log(max(d, 1e-300)) - math.log(delta)

  lo, hi = math.log(1e-4), math.log(60.0)
  if not gap(lo) < 0 < gap(hi):
    return None
  return math.exp(optimize.brentq(gap, lo, hi, xtol=1e-6))


def gdp_noise_multiplier(
  epsilon: float, delta: float, sampling_probability: float, num_steps: int
) -> float | None:
  """The multiplier of ``num_steps`` Poisson-subsampled Gaussian steps
  (add/remove) that the central limit calls ``(epsilon, delta)``-DP, or
  ``None`` where the approximation has no answer."""
  mu = gdp_mu(epsilon, delta)
  if mu is None:
    return None
  p, steps = float(sampling_probability), int(num_steps)
  if p >= 1.0:
    return math.sqrt(steps) / mu
  return 1.0 / math.sqrt(math.log1p(mu * mu / (p * p * steps)))


def first_point(
  epsilon: float,
  delta: float,
  sampling_probability: float,
  num_steps: int,
  neighboring: str,
  feasible: float,
) -> float:
  """Where the fine Gaussian search starts: under add/remove, the estimate
  raised by :data:`RAISE` where it lies below the ``feasible`` multiplier
  (the RDP warm start, whose epsilon is an upper bound) and above a
  quarter of it; else ``feasible``."""
  if _ev.neighboring_relation(neighboring) != _ADD_OR_REMOVE:
    return feasible
  sigma = gdp_noise_multiplier(epsilon, delta, sampling_probability, num_steps)
  if sigma is None:
    return feasible
  start = sigma * (1.0 + RAISE)
  return start if feasible / 4 <= start < feasible else feasible


# Rényi orders of the warm start: a spread of dp_accounting's defaults up to
# 64 (an integer order alpha costs alpha terms, and the defaults' 128-1024
# are most of their time). About 1/7 of the time of the 156 defaults per
# evaluation; a bound over fewer orders is a little looser, which moves the
# start, never the answer. Where the optimum sits at the largest of them
# (small epsilon, small sampling probability), the warm start is redone at
# the defaults. Reports use the defaults.
WARM_START_ORDERS = (
  1.1, 1.2, 1.3, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0,
  12, 14, 16, 20, 24, 28, 32, 40, 48, 64,
)  # fmt: skip


@functools.lru_cache(maxsize=256)
def rdp_warm_start(
  target: float, delta: float, p: float, steps: int, neighboring: str
) -> tuple[float, float]:
  """Multiplier meeting ``target`` under RDP (log-space Brent, loose tol),
  and the RDP curve's slope ``d log eps / d log sigma`` there.

  Under replace-one with Poisson sampling dp_accounting's RDP has no
  analysis; the add/remove multiplier is doubled instead (a replaced record
  moves the sum by at most 2C, i.e. like add/remove at half the noise). Only
  a starting point: the answer is decided by the fine PLD search, whose
  first secant step takes the slope (the PLD and RDP epsilons of one
  mechanism fall with the multiplier at nearly the same log-log rate; a
  wrong slope costs evaluations, never correctness).
  """
  rdp_neighboring = neighboring
  factor = 1.0
  if _ev.neighboring_relation(neighboring) == _REPLACE_ONE and p < 1.0:
    rdp_neighboring, factor = _ADD_OR_REMOVE, 2.0
  args = (target, delta, p, steps, rdp_neighboring)
  sigma, slope, order = _rdp_root(*args, WARM_START_ORDERS)
  if order is None or order >= max(WARM_START_ORDERS):
    sigma, slope, _ = _rdp_root(*args, None)
  return sigma * factor, slope


def _rdp_root(target, delta, p, steps, neighboring, orders):
  """``(sigma, slope, optimal order)`` where the RDP epsilon at ``orders``
  meets ``target``; the order is ``None`` where no multiplier in range
  does."""
  order_at = {}

  def gap(log_sigma):
    event = _ev.poisson_gaussian_event(
      noise_multiplier=math.exp(log_sigma),
      sampling_probability=p,
      num_steps=steps,
    )
    e, order_at[log_sigma] = rdp.rdp_epsilon_and_order(
      event, delta=delta, neighboring=neighboring, orders=orders
    )
    return math.log(max(e, 1e-300)) - math.log(target)

  lo = hi = 0.0
  g_lo = g_hi = gap(0.0)
  while g_hi > 0 and hi < X_MAX:
    lo, g_lo = hi, g_hi
    hi = min(hi + MAX_STEP, X_MAX)
    g_hi = gap(hi)
  while g_lo <= 0 and lo > X_MIN:
    hi, g_hi = lo, g_lo
    lo = max(lo - MAX_STEP, X_MIN)
    g_lo = gap(lo)
  if g_hi > 0:
    return MAX_NOISE_MULTIPLIER, -1.0, None
  if g_lo <= 0:
    return MIN_NOISE_MULTIPLIER, -1.0, None
  root = optimize.brentq(gap, lo, hi, xtol=2e-3)
  h = 0.02
  slope = (gap(root + h) - gap(root - h)) / (2 * h)
  return math.exp(root), (slope if slope < 0 else -1.0), order_at[root]
