"""A memory guard for privacy loss distributions.

dp_accounting builds a PLD as a dense array over the privacy-loss support; a
mechanism with too little noise needs billions of points and runs out of
memory. :func:`check_pld_size` estimates the support before anything is
built and raises a :class:`PLDTooLargeError` (a ``ValueError``) naming the
limit instead.
"""

from __future__ import annotations

import math

import dp_accounting

MAX_PLD_POINTS = 5e7  # ~400 MB of float64 per PMF


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
