"""A memory guard for privacy loss distributions.

dp_accounting builds a PLD as a dense array over the privacy-loss support; a
mechanism with too little noise needs billions of points and runs out of
memory. :func:`check_pld_size` estimates the support of one event before
anything is built and raises a :class:`PLDTooLargeError` (a ``ValueError``)
naming the limit instead.

A ledger composes the PLDs of segments of different plans, whose supports
add up; the memory of that whole composition is bounded by
:data:`MAX_COMPOSITION_BYTES` (2 GiB). Its model, per point of a PMF (the
larger of the remove and add PMFs; measured on dp_accounting 0.6 with
``tracemalloc``, then rounded up about 1.5 to 3 times): :data:`BUILT_BYTES`
while a one-step PMF is built point by point in a dictionary (150-190
measured), :data:`SELF_BYTES` while it is self-composed by FFT (20-40),
:data:`COMPOSE_BYTES` while two are composed (32-80), :data:`HELD_BYTES`
for each composed PMF held (both directions, float64). Each segment's
composed support comes from dp_accounting's own truncation bounds on its
one-step PMF (:func:`self_composed_points`), built at a coarse probe
discretization and scaled, or, where a generous estimate
(:func:`estimated_points`) is already within the bound, from that estimate
without building anything; an unsampled Gaussian is one Gaussian PLD whose
support is known in closed form (:func:`gaussian_points`).
"""

from __future__ import annotations

import math

import dp_accounting
from dp_accounting.pld import common as _pld_common

from zoprivacy.accounting import dp_accounting_adapter as _adapter

MAX_PLD_POINTS = 5e7  # one event (calibration's searches)
MAX_COMPOSITION_BYTES = 2 * 2**30  # a ledger's composition, all of it
BUILT_BYTES = 256
SELF_BYTES = 64
COMPOSE_BYTES = 96
HELD_BYTES = 16
TAIL_MASS = 1e-15  # dp_accounting's truncation in self-composition


class PLDTooLargeError(ValueError):
  """A PLD whose support would not fit in memory: too little noise."""


def check_pld_size(
  noise_multiplier: float, count: int, p: float, interval: float, rel
) -> None:
  """Refuses, in microseconds, a PLD that would not fit in memory.

  Estimate of the composed privacy-loss support, in grid points, with
  ``r = Delta / sigma``: 20 standard deviations of the ``T``-step sum plus,
  when subsampled, one step's range (``r^2/2 + 10 r``). Unsampled, one step's
  loss is Gaussian with std ``r``; under Poisson sampling at rate ``p`` its
  variance is at most ``min(p^2 (exp(r^2) - 1), r^2 + r^4/4)``.
  """
  sens = 2.0 if rel == dp_accounting.NeighboringRelation.REPLACE_ONE else 1.0
  r = sens / noise_multiplier
  if p >= 1.0:
    width = 20 * r * math.sqrt(count)
  else:
    var = min(p * p * math.expm1(min(r * r, 700.0)), r * r + r**4 / 4)
    width = r * r / 2 + 10 * r + 20 * math.sqrt(count * var)
  points = width / interval
  if not points <= MAX_PLD_POINTS:
    raise PLDTooLargeError(
      f"Accounting noise_multiplier={noise_multiplier:.4g} over {count} "
      f"steps at sampling probability {p:g} would need about {points:.3g} "
      f"PLD points, over the limit of {MAX_PLD_POINTS:.0e} (memory); such "
      "a mechanism adds too little noise to account with the PLD at "
      f"discretization {interval:g}."
    )


def loss_width(ratio: float) -> float:
  """A bound on one step's privacy-loss support, ``r = Delta / sigma``:
  dp_accounting truncates a Gaussian at ``9.75`` standard deviations
  (``19.5 r + r^2``) and a discrete Gaussian at ``11.6`` (``23.2 r +
  r^2``); a Laplace's loss stays in ``[-r, r]``; subsampling shrinks every
  loss (``|log(1 - p + p e^L)| <= |L|``)."""
  return 24.0 * ratio + ratio * ratio


def loss_variance(ratio: float, p: float) -> float:
  """A bound on the variance of one step's privacy loss: its second moment
  unsampled, ``r^2 + r^4 / 4``, or, under sampling at ``p``, ``(p / (1 -
  p))^2`` times the second moment of ``R/Q - 1`` under ``P``."""
  unsampled = ratio * ratio + ratio**4 / 4
  if p >= 1.0:
    return unsampled
  r2 = min(ratio * ratio, 200.0)
  moment = (1 - p) * math.expm1(r2) + p * (
    math.exp(3 * r2) - 2 * math.exp(r2) + 1
  )
  return min(unsampled, (p / (1 - p)) ** 2 * moment)


def estimated_points(ratio: float, count: int, p: float, interval: float):
  """``(one-step points, composed points)``: a generous estimate of a
  segment's PMFs (``count`` steps at ``r``, sampled at ``p``): one step's
  support plus, on each side, 10 standard deviations of the sum or
  dp_accounting's Chernoff truncation at its smallest order (``T var / (2
  W) + 36 W``, with ``W >= 2 sqrt(var)``)."""
  width = loss_width(ratio)
  if count <= 1:
    return width / interval, width / interval
  var = loss_variance(ratio, p)
  side = 10 * math.sqrt(count * var) + count * math.sqrt(var) / 4 + 36 * width
  return width / interval, min(count * width, width + 2 * side) / interval


def gaussian_points(mu: float, interval: float) -> float:
  """Points of dp_accounting's PLD of one Gaussian of ``mu = Delta /
  sigma`` (an unsampled Gaussian over ``T`` steps is one of ``r sqrt(T)``):
  its loss spans ``19.5 mu + mu^2``."""
  return (20.0 * mu + mu * mu) / interval + 2


def self_composed_points(one_step, count: int) -> int:
  """Points of the larger PMF of ``one_step`` (a PLD) self-composed
  ``count`` times, as dp_accounting will allocate them: its FFT length
  from its own truncation bounds (``common.compute_self_convolve_bounds``)
  on the actual PMFs."""
  largest = 0
  for pmf in _adapter.direction_pmfs(one_step)[:2]:
    probs = _adapter.dense_probs(pmf)
    if count <= 1:
      largest = max(largest, len(probs))
      continue
    lower, upper = _pld_common.compute_self_convolve_bounds(
      probs, count, TAIL_MASS
    )
    largest = max(largest, upper - lower + 1, len(probs))
  return largest
