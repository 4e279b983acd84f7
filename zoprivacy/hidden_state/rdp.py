"""RDP curves and their two conversions to ``(epsilon, delta)``.

Every final-iterate accountant returns an RDP curve ``alpha -> eps(alpha)``
on a grid of orders. Two conversions are reported side by side:

* ``standard``: ``eps = min_alpha eps(alpha) + log(1/delta) / (alpha - 1)``
  (Mironov 2017, Prop. 3), the conversion the paper uses (Cor. 3.3, Fig. 1);
* ``improved``: ``eps(alpha) + log(1 - 1/alpha) - log(delta alpha) /
  (alpha - 1)`` (Canonne, Kamath & Steinke 2020, Prop. 12), the one
  ``dp_accounting``'s RDP accountant uses; the reported value comes from
  ``dp_accounting.rdp.rdp_privacy_accountant.compute_epsilon`` itself.

A curve may carry ``fn``, the exact RDP at any order; the conversions then
refine the best grid order continuously (a smaller epsilon, still valid).

Per-step RDP of the Gaussian pieces comes from ``dp_accounting``'s RDP
accountant. Its ``noise_multiplier`` is the noise std over the L2
sensitivity *of the chosen relation* (``alpha / (2 s^2)`` whatever the
relation), so every multiplier passed here is already "std over
sensitivity", with the replace-one sensitivity where that is the relation.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import dp_accounting
import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant
from scipy import optimize

from zoprivacy.core import validation

CONVERSIONS = ("standard", "improved")
NeighborRel = dp_accounting.NeighboringRelation

# 1 + (alpha - 1) on a log grid: small epsilons need large orders.
DEFAULT_ORDERS = 1.0 + np.geomspace(1e-2, 1e5, 321)
# Subsampled Gaussians: dp_accounting is fast and stable at integer orders.
SUBSAMPLED_ORDERS = np.array(
  [1.25, 1.5, 1.75]
  + list(range(2, 64))
  + [64, 80, 96, 128, 160, 192, 256, 320, 384, 512, 768, 1024],
  np.float64,
)


check_delta = validation.delta


def standard_epsilons(orders, rdp, delta) -> np.ndarray:
  """Mironov's conversion, vectorized: ``rdp [..., A]``, ``delta [...]``.

  Returns ``min_alpha rdp + log(1/delta)/(alpha - 1)`` (inf where
  ``delta <= 0``).
  """
  orders = np.asarray(orders, np.float64)
  delta = np.asarray(delta, np.float64)
  with np.errstate(divide="ignore", invalid="ignore"):
    log_inv = np.where(
      delta > 0, -np.log(np.where(delta > 0, delta, 1.0)), np.inf
    )
    eps = np.asarray(rdp) + log_inv[..., None] / (orders - 1.0)
  return np.min(eps, axis=-1)


def improved_epsilons(orders, rdp, delta) -> np.ndarray:
  """The conversion of ``dp_accounting``'s ``compute_epsilon``, vectorized.

  Same formula and special cases (KL bound gives 0, orders at most 1.01 are
  not used); used to search many candidate curves at once. Tests check it
  against ``compute_epsilon``.
  """
  a = np.asarray(orders, np.float64)
  r = np.asarray(rdp, np.float64)
  delta = np.asarray(delta, np.float64)[..., None]
  with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
    good = delta > 0
    log_d = np.log(np.where(good, delta, 1.0))
    eps = r + np.log1p(-1.0 / a) - (log_d + np.log(a)) / (a - 1.0)
    eps = np.where(a > 1.01, eps, np.inf)
    eps = np.where(delta**2 + np.expm1(-r) > 0, 0.0, eps)
    eps = np.where(r < 0, 0.0, eps)
    eps = np.where(good, eps, np.inf)
  return np.maximum(np.min(eps, axis=-1), 0.0)


def _convert_at(conversion: str, order: float, rdp: float, delta: float):
  if conversion == "standard":
    return rdp + math.log(1.0 / delta) / (order - 1.0)
  return float(rdp_privacy_accountant.compute_epsilon([order], [rdp], delta)[0])


@dataclasses.dataclass(frozen=True)
class RdpCurve:
  """An RDP curve ``eps(alpha)`` on ``orders`` (optionally exact via ``fn``)."""

  orders: np.ndarray
  rdp: np.ndarray
  fn: Callable[[float], float] | None = None

  def epsilon(self, delta: float, conversion: str = "improved") -> float:
    """``epsilon`` at ``delta`` by ``conversion`` (module docstring)."""
    delta = check_delta(delta)
    if conversion not in CONVERSIONS:
      raise ValueError(
        f"conversion must be one of {CONVERSIONS}, got {conversion!r}."
      )
    if conversion == "standard":
      values = [
        rdp + math.log(1 / delta) / (a - 1)
        for a, rdp in zip(self.orders, self.rdp)
      ]
      best = int(np.argmin(values))
      eps = float(values[best])
    else:
      eps, order = rdp_privacy_accountant.compute_epsilon(
        list(self.orders), list(self.rdp), delta
      )
      eps = float(eps)
      best = int(np.argmin(np.abs(self.orders - order)))
    if self.fn is None or not math.isfinite(eps) or eps == 0.0:
      return eps
    lo = math.log(self.orders[max(best - 1, 0)] - 1.0)
    hi = math.log(self.orders[min(best + 1, len(self.orders) - 1)] - 1.0)
    if hi <= lo:
      return eps
    res = optimize.minimize_scalar(
      lambda x: _convert_at(
        conversion, 1.0 + math.exp(x), self.fn(1.0 + math.exp(x)), delta
      ),
      bounds=(lo, hi),
      method="bounded",
      options={"xatol": 1e-6},
    )
    return float(min(eps, res.fun))

  def epsilons(self, delta: float) -> dict[str, float]:
    """Both conversions, side by side."""
    return {c: self.epsilon(delta, c) for c in CONVERSIONS}

  def __add__(self, other: RdpCurve) -> RdpCurve:
    if not np.array_equal(self.orders, other.orders):
      raise ValueError("RDP curves on different orders.")
    fn = None
    if self.fn is not None and other.fn is not None:
      f, g = self.fn, other.fn

      def fn(a):
        return f(a) + g(a)

    return RdpCurve(self.orders, self.rdp + other.rdp, fn)

  def scaled(self, factor: float) -> RdpCurve:
    fn = None if self.fn is None else (lambda a, f=self.fn: factor * f(a))
    return RdpCurve(self.orders, factor * self.rdp, fn)


def linear_curve(slope: float, orders=DEFAULT_ORDERS) -> RdpCurve:
  """``eps(alpha) = slope * alpha``: a Gaussian-type RDP curve."""
  orders = np.asarray(orders, np.float64)
  return RdpCurve(orders, slope * orders, lambda a: slope * a)


def orders_for(setting) -> np.ndarray:
  """Default orders: a fine log grid, or integers where subsampling is used."""
  if setting.batch_size is not None and setting.batch_size < (
    setting.dataset_size
  ):
    return SUBSAMPLED_ORDERS
  return DEFAULT_ORDERS


def _accountant_rdp(event, relation, orders) -> np.ndarray:
  accountant = dp_accounting.rdp.RdpAccountant(list(orders), relation)
  accountant.compose(event)
  return accountant.rdp


def subsampled_gaussian_rdp(
  sampling_probability: float, noise_multiplier, orders=DEFAULT_ORDERS
) -> RdpCurve:
  """``S_alpha(q, s)`` of the paper's Def. A.2, from ``dp_accounting``.

  ``dp_accounting`` computes ``D_alpha((1-q) N(0,s^2) + q N(1,s^2) ||
  N(0,s^2))`` (Mironov, Talwar & Zhang 2019), which is at least the
  paper's ``D_alpha(N(0,s^2) || (1-q) N(0,s^2) + q N(1,s^2))``, so using it
  keeps App. A.9's bound valid (tests compare the two by quadrature). At
  ``q = 1`` both are ``alpha / (2 s^2)``.
  """
  orders = np.asarray(orders, np.float64)
  if not noise_multiplier > 0:
    return RdpCurve(orders, np.full(orders.shape, np.inf), lambda a: math.inf)
  if sampling_probability >= 1.0:
    return linear_curve(1.0 / (2.0 * noise_multiplier**2), orders)
  event = dp_accounting.PoissonSampledDpEvent(
    float(sampling_probability),
    dp_accounting.GaussianDpEvent(float(noise_multiplier)),
  )
  # No ``fn``: away from integer orders dp_accounting is slow; grid only.
  return RdpCurve(
    orders, _accountant_rdp(event, NeighborRel.ADD_OR_REMOVE_ONE, orders)
  )


def without_replacement_gaussian_rdp(
  dataset_size: int,
  batch_size: int,
  noise_multiplier: float,
  orders=DEFAULT_ORDERS,
) -> RdpCurve:
  """One step of batches of ``b`` of ``n`` drawn without replacement.

  Wang, Balle & Kasiviswanathan 2019, Thm. 27, replace-one, through
  ``dp_accounting``; ``noise_multiplier`` is std over the replace-one
  sensitivity. ``b = n`` is the un-subsampled Gaussian.
  """
  orders = np.asarray(orders, np.float64)
  if batch_size >= dataset_size:
    return linear_curve(1.0 / (2.0 * noise_multiplier**2), orders)
  event = dp_accounting.SampledWithoutReplacementDpEvent(
    int(dataset_size),
    int(batch_size),
    dp_accounting.GaussianDpEvent(float(noise_multiplier)),
  )
  return RdpCurve(
    orders, _accountant_rdp(event, NeighborRel.REPLACE_ONE, orders)
  )
