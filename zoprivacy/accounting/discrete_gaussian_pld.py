"""The subsampled discrete Gaussian's PLD, built with numpy.

dp_accounting builds the connect-the-dots PLD of the discrete Gaussian
(``from_discrete_gaussian_mechanism(..., use_connect_dots=True)``, and the
replace-one pair through its PLD of a monotone privacy loss) one integer at a
time: the privacy loss at each of the ``~23 sigma`` integers of the truncated
noise, then the inverse loss at each rounded value, in Python. For the
default run (``sigma ~ 5,800`` grid units) that is over a million calls and
about 3 s per PLD. :func:`discrete_gaussian_pld` builds the same PLD in
milliseconds, from the same dp_accounting loss object:

1. Losses. dp_accounting's formulas (``_privacy_loss_remove``: ``m (-m/2 -
   x) / sigma^2``, then ``log(q e^l + 1 - q)`` by its ``log_a_times_exp_b_
   plus_c``; the add pair ``-remove(-x)``; replace-one their sum) evaluated
   with numpy on the range dp_accounting loops over
   (``connect_dots_bounds``).
2. Support. dp_accounting keeps, walking ``x`` downwards, each floor and
   ceiling of ``loss / interval`` larger than all kept before: the same
   record-high filter here, vectorised. numpy's ``log``/``exp`` may differ
   from the scalar ones in the last bit, so any scaled loss within
   :data:`NEAR_INTEGER` (relative) of an integer is recomputed by
   dp_accounting's own scalar ``privacy_loss``: the support is
   dp_accounting's, point for point.
3. Divergences. dp_accounting's ``get_delta_for_epsilon`` at the support:
   its closed forms below ``log(1-q)`` (remove) and above ``-log(1-q)``
   (add), and ``mu_upper_cdf(c) - exp(eps + mu_lower_log_cdf(c))`` at the
   threshold ``c`` its inverse privacy loss gives, by the same numpy calls
   on the same arrays. The inverse's closed form is evaluated in numpy; it
   is kept only where it is well-conditioned, at least a tolerance away
   from an integer (its floor) and equal to the threshold found by binary
   search over step 1's losses; every other threshold (a handful) is
   dp_accounting's own scalar ``inverse_privacy_loss``.
4. dp_accounting's ``create_pmf_pessimistic_connect_dots`` and
   ``PrivacyLossDistribution`` on the result.

Pessimistic margin: none is added, because none is lost. Every number in
the PMF is computed by dp_accounting's own operations on the same inputs;
numpy only decides which points and thresholds to use, and each of those
decisions is either taken with a margin of :data:`NEAR_INTEGER` (relative)
around every rounding boundary, about a million times the numpy-versus-
scalar difference of a few ulps, or handed to dp_accounting's scalar code.
The PMF is dp_accounting's bit for bit, so its epsilon is too (never below,
never above). A margin on the PMF itself would not give "never below":
dp_accounting's composition truncates tails at fixed masses, so a PMF made
more pessimistic by one ulp can compose to an epsilon 1e-7 *lower*.

``tests/accounting/test_discrete_gaussian_pld.py`` compares the PMFs and the
composed epsilons with dp_accounting's own over random settings.
"""

from __future__ import annotations

import math

import numpy as np
from dp_accounting.pld import pld_pmf

from zoprivacy.accounting import dp_accounting_adapter as _adapter
from zoprivacy.accounting import hockey_stick

Adjacency = _adapter.AdjacencyType
# A scaled loss, or an inverse loss before its floor, this close to an
# integer (relative) is recomputed by dp_accounting's scalar code: numpy's
# log and exp agree with the scalar ones to a few ulps (1e-15 relative).
NEAR_INTEGER = 1e-9


def discrete_gaussian_pld(
  sigma: float,
  *,
  sensitivity: int,
  sampling_prob: float,
  value_discretization_interval: float,
  replace: bool = False,
) -> _adapter.PLD:
  """dp_accounting's pessimistic connect-the-dots PLD of one subsampled
  discrete Gaussian step, built with numpy: the same PMFs bit for bit (the
  module docstring). Add/remove: separate remove and add PMFs (one when
  ``sampling_prob == 1``); ``replace``: the adapter's REPLACE pair
  (``DiscreteGaussianReplaceLoss``), one PMF."""

  def pmf(adjacency):
    loss = _adapter.DiscreteGaussianReplaceLoss(
      sigma,
      sensitivity=sensitivity,
      sampling_prob=sampling_prob,
      adjacency_type=adjacency,
    )
    return connect_dots_pmf(loss, value_discretization_interval)

  if replace:
    return _adapter.PLD(pmf(Adjacency.REPLACE))
  if sampling_prob == 1.0:
    return _adapter.PLD(pmf(Adjacency.REMOVE))
  return _adapter.PLD(pmf(Adjacency.REMOVE), pmf(Adjacency.ADD))


def connect_dots_pmf(loss, interval: float):
  """The connect-the-dots PMF of one discrete Gaussian ``loss`` (a
  dp_accounting ``DiscreteGaussianPrivacyLoss``), as dp_accounting's
  ``_create_pld_pmf_from_monotone_privacy_loss`` with
  ``use_connect_dots``, built with numpy."""
  bounds = loss.connect_dots_bounds()
  xs = np.arange(bounds.upper_x, bounds.lower_x - 1, -1)  # dp_accounting's
  losses = privacy_losses(loss, xs)  # non-decreasing along xs
  rounded = _support(loss, xs, losses, interval)
  epsilons = rounded * interval
  deltas = _deltas(loss, xs, losses, epsilons)
  return pld_pmf.create_pmf_pessimistic_connect_dots(interval, rounded, deltas)


# ---------------------------------------------------------------- losses


def _remove_losses(loss, x: np.ndarray) -> np.ndarray:
  """dp_accounting's ``_privacy_loss_remove`` at the integers ``x`` (all
  in ``[-T - m, T]``)."""
  m = loss.sensitivity
  sigma, bound = _adapter.discrete_gaussian_parameters(loss)
  xf = x.astype(np.float64)
  with np.errstate(over="ignore", invalid="ignore"):
    plain = m * (-0.5 * m - xf) / (sigma**2)
    plain = np.where(x > bound - m, -np.inf, plain)
    plain = np.where(x < -bound, np.inf, plain)
    q = loss.sampling_prob
    if q == 1.0:
      return plain
    return hockey_stick.log_a_times_exp_b_plus_c(q, plain, 1 - q)


def privacy_losses(loss, xs: np.ndarray) -> np.ndarray:
  """``loss.privacy_loss(x)`` at every integer of ``xs``, vectorised (to
  the last bit or two: numpy's ``log``/``exp``)."""
  kind = loss.adjacency_type
  if kind == Adjacency.REMOVE:
    return _remove_losses(loss, xs)
  add = -_remove_losses(loss, -xs)
  if kind == Adjacency.ADD:
    return add
  return _remove_losses(loss, xs) + add  # REPLACE: remove + add


def _support(loss, xs, losses, interval: float) -> np.ndarray:
  """dp_accounting's rounded epsilons: walking ``xs`` in order, each floor
  and ceiling of ``loss / interval`` larger than every one kept before."""
  scaled = losses / interval
  if not np.all(np.isfinite(scaled)):
    raise ValueError("A finite privacy loss was expected on the range.")
  near = np.abs(scaled - np.rint(scaled)) <= NEAR_INTEGER * np.maximum(
    1.0, np.abs(scaled)
  )
  for i in np.flatnonzero(near):  # dp_accounting's own scalar value
    scaled[i] = loss.privacy_loss(int(xs[i])) / interval
  pairs = np.stack([np.floor(scaled), np.ceil(scaled)], axis=1).ravel()
  before = np.concatenate([[-np.inf], np.maximum.accumulate(pairs)[:-1]])
  return pairs[pairs > before].astype(np.int64)


def _plain_inverse(loss, plain_loss: np.ndarray) -> np.ndarray:
  """``_inverse_privacy_loss_without_subsampling_remove`` before its floor
  (``-m/2 - l sigma^2 / m``), elementwise."""
  m = loss.sensitivity
  sigma, _ = _adapter.discrete_gaussian_parameters(loss)
  return -0.5 * m - plain_loss * (sigma**2) / m


def _replace_inverse(loss, eps: np.ndarray):
  """The adapter's replace-one inverse before its floor, elementwise, and
  where its ``-b + sqrt(b^2 + t)`` cancels (ill-conditioned)."""
  q, m = loss.sampling_prob, loss.sensitivity
  sigma, _ = _adapter.discrete_gaussian_parameters(loss)
  c = math.exp(-(m * m) / (2 * sigma**2))
  e = np.exp(np.minimum(eps, 700.0))
  b = (1 - q) * (1 - e)
  t = 4 * q * q * c * c * e
  u = (-b + np.sqrt(b * b + t)) / (2 * q * c)
  log_u = np.log(u)
  return -(sigma**2) / m * log_u, (b > 0) & (t < 1e-4 * b * b), np.abs(log_u)


def _inverse_values(loss, eps: np.ndarray):
  """dp_accounting's inverse privacy loss before its floor, elementwise,
  without the add pair's shift by ``m``; an absolute bound on its rounding
  error; and where it is ill-conditioned or special-cased (risky):
  ``(value, tolerance, risky)``."""
  m = loss.sensitivity
  sigma, _ = _adapter.discrete_gaussian_parameters(loss)
  with np.errstate(all="ignore"):
    if loss.adjacency_type == Adjacency.REPLACE:
      value, risky, size = _replace_inverse(loss, eps)
    else:
      shifted, edge = hockey_stick.subsampled_inverse(
        loss, eps, lambda l: _plain_inverse(loss, l)
      )
      value = shifted - (m if loss.adjacency_type == Adjacency.ADD else 0)
      # Within 1e-5 of log(1-q) (remove) or -log(1-q) (add) the subsampled
      # inverse cancels (its error grows as 1 / distance); dp_accounting
      # special-cases the edge itself.
      near_edge = np.abs(eps - _edge(loss)) < 1e-5
      risky = edge | near_edge | (eps == 0.0)
      size = np.abs(value) * m / sigma**2 + np.abs(eps) + 1.0
  tolerance = NEAR_INTEGER * (np.abs(value) + sigma**2 / m * (1.0 + size))
  return value, tolerance, risky


def _edge(loss) -> float:
  """Where the subsampled inverse cancels: ``log(1-q)`` for the remove
  pair, ``-log(1-q)`` for the add pair (none unsampled: infinity)."""
  q = loss.sampling_prob
  if q == 1.0:
    return math.inf
  edge = math.log(1 - q)
  return -edge if loss.adjacency_type == Adjacency.ADD else edge


def _cutoffs(loss, xs, losses, eps: np.ndarray) -> np.ndarray:
  """``loss.inverse_privacy_loss(e)`` for every ``e`` of ``eps``, as
  dp_accounting computes it: its closed form in numpy where that is
  well-conditioned, away from an integer (its floor) and equal to the
  threshold found by binary search over ``losses`` (the largest ``x``
  whose loss is at least ``e``); its own scalar code elsewhere."""
  _, bound = _adapter.discrete_gaussian_parameters(loss)
  m = loss.sensitivity
  value, tolerance, risky = _inverse_values(loss, eps)
  shift = m if loss.adjacency_type == Adjacency.ADD else 0
  upper = bound if loss.adjacency_type == Adjacency.REPLACE else bound - m
  with np.errstate(invalid="ignore"):
    floor = np.clip(np.floor(value), -bound - 1, upper)
    near = np.abs(value - np.rint(value)) <= tolerance
  index = np.searchsorted(losses, eps, side="left")  # losses rise as x falls
  search = np.where(
    index < xs.size, xs[np.minimum(index, xs.size - 1)], xs[-1] - 1
  )
  finite = np.isfinite(value) & np.isfinite(tolerance)
  cut = np.where(finite, floor, 0).astype(np.int64) + shift
  unsure = risky | near | ~finite | (cut != search)
  for i in np.flatnonzero(unsure):  # dp_accounting's own scalar code
    cut[i] = loss.inverse_privacy_loss(float(eps[i]))
  return cut


def _deltas(loss, xs, losses, epsilons: np.ndarray) -> np.ndarray:
  """dp_accounting's ``get_delta_for_epsilon`` at ``epsilons``
  (:func:`~zoprivacy.accounting.hockey_stick.deltas`), its inverse privacy
  loss from :func:`_cutoffs`."""
  return hockey_stick.deltas(
    loss, epsilons, lambda eps: _cutoffs(loss, xs, losses, eps)
  )
