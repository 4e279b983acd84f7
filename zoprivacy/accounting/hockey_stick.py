"""dp_accounting's hockey-stick divergence of an additive-noise privacy loss,
with its per-point Python loop replaced by numpy.

dp_accounting's connect-the-dots PLD of a Gaussian or discrete Gaussian
step calls ``AdditiveNoisePrivacyLoss.get_delta_for_epsilon`` on an array
of privacy losses (thousands to a million of them), which calls
``inverse_privacy_loss`` once per element in Python. :func:`deltas` is that
method with the inverse taken from a vectorised function; everything else
(the closed forms below ``log(1-q)`` and above ``-log(1-q)``, ``mu_upper_cdf
- exp(eps + mu_lower_log_cdf)``, the clip) is its code, on the same arrays.

:func:`log_a_times_exp_b_plus_c` and :func:`subsampled_inverse` repeat
dp_accounting's scalar formulas (``common.log_a_times_exp_b_plus_c`` and the
subsampling wrapper of ``inverse_privacy_loss``) operation for operation on
numpy arrays. numpy evaluates ``log``, ``log1p`` and ``exp`` of a Python
float with the same loop as of an array, so the results are the same to the
bit (``tests/accounting/test_gaussian_pld.py`` and
``test_discrete_gaussian_pld.py`` check the PLDs bit for bit).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from zoprivacy.accounting import dp_accounting_adapter as _adapter

Adjacency = _adapter.AdjacencyType


def deltas(loss, epsilons, inverse: Callable[[np.ndarray], np.ndarray]):
  """``loss.get_delta_for_epsilon(epsilons)`` (an array of epsilons) with
  ``inverse(eps)`` for its ``[loss.inverse_privacy_loss(e) for e in eps]``."""
  q = loss.sampling_prob
  epsilons = np.asarray(epsilons)
  out = np.zeros_like(epsilons, dtype=float)
  if q == 1.0 or loss.adjacency_type == Adjacency.REPLACE:
    kept = np.full_like(epsilons, True, dtype=bool)
  elif loss.adjacency_type == Adjacency.ADD:
    kept = epsilons < -math.log1p(-q)
  else:
    kept = epsilons > math.log1p(-q)
    other = np.logical_not(kept)
    out[other] = -np.expm1(epsilons[other])
  eps = epsilons[kept]
  x_cutoffs = inverse(eps)
  out[kept] = loss.mu_upper_cdf(x_cutoffs) - np.exp(
    eps + loss.mu_lower_log_cdf(x_cutoffs)
  )
  return np.clip(out, 0, 1)


def log_a_times_exp_b_plus_c(a: float, b: np.ndarray, c: float) -> np.ndarray:
  """dp_accounting's ``common.log_a_times_exp_b_plus_c(a, b, c)`` for
  scalars ``a > 0``, ``c != 0`` and an array ``b``: ``log(a e^b + c)`` by
  its operations (``b + log a`` then its ``_log_add`` or ``_log_sub`` with
  ``log |c|``; ``log(a + c)`` where ``b == 0``). Where dp_accounting raises
  (``a e^b + c <= 0``) the result is NaN."""
  with np.errstate(all="ignore"):
    d = b + np.log(a)
    log_c = np.log(abs(c))
    if c < 0:
      out = d + np.log1p(-np.exp(log_c - d))
      out = np.where(log_c >= d, np.nan, out)
    else:
      hi, lo = np.maximum(d, log_c), np.minimum(d, log_c)
      out = hi + np.log1p(np.exp(lo - hi))
    return np.where(b == 0, np.log(a + c), out)


def isclose(a: np.ndarray, b: float) -> np.ndarray:
  """``math.isclose(a_i, b)`` (relative tolerance ``1e-9``) elementwise."""
  return np.abs(a - b) <= 1e-9 * np.maximum(np.abs(a), abs(b))


def subsampled_inverse(loss, eps: np.ndarray, plain: Callable):
  """``loss.inverse_privacy_loss(e)`` for add and remove, elementwise, from
  ``plain(l)``: the inverse without subsampling of the remove pair (the add
  pair's is ``m + plain(l)``). Returns ``(x, edge)``: ``edge`` marks where
  dp_accounting special-cases ``e`` close to ``log(1-q)`` (remove) or
  ``-log(1-q)`` (add), and NaN marks where it raises."""
  q, m = loss.sampling_prob, loss.sensitivity
  add = loss.adjacency_type == Adjacency.ADD
  sign = -1.0 if add else 1.0
  shift = m if add else 0
  if q == 1.0:
    return shift + plain(eps), np.zeros(eps.shape, bool)
  edge_value = -math.log(1 - q) if add else math.log(1 - q)
  edge = isclose(eps, edge_value)
  beyond = eps > edge_value if add else eps <= edge_value
  plain_loss = sign * log_a_times_exp_b_plus_c(1 / q, sign * eps, 1 - 1 / q)
  plain_loss = np.where(edge, -sign * np.inf, plain_loss)
  plain_loss = np.where(beyond & ~edge, np.nan, plain_loss)
  with np.errstate(invalid="ignore"):
    return shift + plain(plain_loss), edge
