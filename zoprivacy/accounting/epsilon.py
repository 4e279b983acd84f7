"""Epsilon of DP events: PLD (pessimistic, add/remove maximum) and pure eps
(RDP: :mod:`~zoprivacy.accounting.rdp`).

All composition is done by ``dp_accounting`` (PLD FFT composition of
Koskela et al. / Doroshenko et al. "connect the dots"; RDP of Mironov et al.).
All arithmetic here is float64 (Python floats and numpy float64).
"""

from __future__ import annotations

import functools
import math
import weakref
from typing import NamedTuple

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant as _pld_accountant

from zoprivacy.accounting import dp_accounting_adapter as _adapter
from zoprivacy.accounting import events as _ev
from zoprivacy.accounting import gaussian_pld, pld_size
from zoprivacy.accounting.dp_warnings import summarize_warnings
from zoprivacy.core import validation

PLD = _adapter.PLD
NeighborRel = dp_accounting.NeighboringRelation


# ------------------------------------------------------------------------ PLD


@summarize_warnings
def build_pld(
  event: dp_accounting.DpEvent,
  *,
  neighboring: _ev.NeighboringLike = "add_or_remove",
  value_discretization_interval: float = 1e-4,
) -> PLD:
  """Pessimistic ``PrivacyLossDistribution`` of ``event``, built by dp_accounting.

  Composed by ``dp_accounting.pld.PLDAccountant`` itself (DP-ZO App. A,
  Def. A.7 and Prop. A.8: subsampled mechanisms get separate add and remove
  PMFs); this function only checks the event first (clear errors, a memory
  guard) and returns the accountant's PLD, so callers (the ledger, the
  add/remove split) can cache and compose it. Hashable events are cached
  (shared with :func:`pld_epsilon`: a plan's epsilon after a calibration
  that evaluated the same event is read, not rebuilt).

  Raises:
    ValueError: for events ``dp_accounting``'s PLD cannot account (sampling
      without replacement, Laplace under replace-one, a composed event inside
      Poisson sampling, ...), with the reason.
  """
  rel = _ev.neighboring_relation(neighboring)
  interval = validation.discretization_interval(value_discretization_interval)
  return _cached_pld(event, rel, interval)


def _build_pld(event, count: int, rel, interval: float) -> PLD:
  """Checks ``event`` (clear errors, memory guard), then lets
  dp_accounting's ``PLDAccountant`` compose it; a (Poisson-sampled)
  Gaussian under add/remove is composed as the accountant composes it, its
  one-step PLD built with numpy (:mod:`~zoprivacy.accounting.gaussian_pld`:
  the accountant's PLD bit for bit, without its per-point Python loop)."""
  _check(event, count, rel, interval)
  pld = gaussian_pld.event_pld(event, rel, interval)
  return _adapter.accountant_pld(event, rel, interval) if pld is None else pld


def _check(event, count: int, rel, interval: float, p: float = 1.0) -> None:
  """Refuses, before any PLD is built, what dp_accounting's PLD cannot
  account or what would not fit in memory (:mod:`pld_size`)."""
  if isinstance(event, dp_accounting.SelfComposedDpEvent):
    return _check(event.event, event.count * count, rel, interval, p)
  if isinstance(event, dp_accounting.ComposedDpEvent):
    for e in event.events:
      _check(e, count, rel, interval, p)
    return None
  if isinstance(event, dp_accounting.PoissonSampledDpEvent) and p == 1.0:
    if not isinstance(
      event.event, (dp_accounting.GaussianDpEvent, dp_accounting.LaplaceDpEvent)
    ):
      raise ValueError(
        "dp_accounting's PLD accepts only a GaussianDpEvent or LaplaceDpEvent "
        f"inside PoissonSampledDpEvent, got {event.event!r}. For q Gaussian "
        "queries on one batch use one equivalent Gaussian (a plan with "
        "num_queries=q, conventions §5)."
      )
    p = validation.sampling_probability(event.sampling_probability)
    return _check(event.event, count, rel, interval, p)
  if isinstance(event, dp_accounting.SampledWithoutReplacementDpEvent):
    raise ValueError(
      "dp_accounting's PLD does not support SampledWithoutReplacementDpEvent "
      "(fixed-size batches); use rdp_epsilon(..., neighboring='replace_one')."
    )
  if isinstance(event, dp_accounting.LaplaceDpEvent):
    _require_add_remove_for_laplace(rel)
  if isinstance(
    event, (dp_accounting.GaussianDpEvent, dp_accounting.LaplaceDpEvent)
  ):
    sigma = validation.noise_multiplier(event.noise_multiplier)
    pld_size.check_pld_size(sigma, count, p, interval, rel)
    return None
  if isinstance(event, dp_accounting.NoOpDpEvent):
    return None
  if not _pld_accountant.PLDAccountant(rel, interval).supports(event):
    raise ValueError(f"Event not supported by the PLD accountant: {event!r}.")
  return None


def _require_add_remove_for_laplace(rel) -> None:
  if rel != NeighborRel.ADD_OR_REMOVE_ONE:
    raise ValueError(
      "dp_accounting has no replace-one PLD for the Laplace mechanism; "
      "Laplace events are accounted under add_or_remove only."
    )


@functools.lru_cache(maxsize=32)  # PLDs can be tens of MB each
def _lru_pld(event, rel, interval) -> PLD:
  return _build_pld(event, 1, rel, interval)


def _cached_pld(event, rel, interval) -> PLD:
  """PLDs are cached per (event, relation, interval); PLD objects are not mutated."""
  try:
    hash(event)
  except TypeError:  # ComposedDpEvent holds a list
    return _build_pld(event, 1, rel, interval)
  return _lru_pld(event, rel, interval)


@summarize_warnings
def pld_epsilon(
  event: dp_accounting.DpEvent,
  *,
  delta: float,
  neighboring: _ev.NeighboringLike = "add_or_remove",
  value_discretization_interval: float = 1e-4,
) -> float:
  """Epsilon at ``delta`` from dp_accounting's pessimistic PLD.

  DP-ZO App. A: ``delta(eps) = max(H_{e^eps}`` add, ``H_{e^eps}`` remove``)``
  (eq. (4) per step, Remark A.9 for why neither direction dominates). The PLD
  keeps the add and remove PMFs separately and
  ``get_epsilon_for_delta`` returns their maximum; the rounding is
  pessimistic (an upper bound up to the ``1e-15`` tail truncation), so this is
  never below the true epsilon of the discretised mechanism.
  """
  delta = validation.delta(delta)
  rel = _ev.neighboring_relation(neighboring)
  interval = validation.discretization_interval(value_discretization_interval)
  return pld_epsilon_for_delta(_cached_pld(event, rel, interval), delta)


# Epsilons already read off a PMF, per delta: a calibration's last point is
# also the plan's epsilon and the report's, on the same cached PLD. Weak
# keys: an entry goes with its PMF.
_PMF_EPSILONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _pmf_epsilon(pmf, delta: float) -> float:
  known = _PMF_EPSILONS.setdefault(pmf, {})
  if delta not in known:
    known[delta] = float(pmf.get_epsilon_for_delta(delta))
  return known[delta]


def pld_epsilon_for_delta(pld: PLD, delta: float) -> float:
  """``pld.get_epsilon_for_delta(delta)`` (the larger of its remove and add
  PMFs' epsilons, the remove one alone for a symmetric PLD), each PMF's
  read once per ``delta``."""
  pmf_remove, pmf_add, symmetric = _adapter.direction_pmfs(pld)
  remove = _pmf_epsilon(pmf_remove, delta)
  return remove if symmetric else max(remove, _pmf_epsilon(pmf_add, delta))


class DirectionalEpsilon(NamedTuple):
  """Epsilon for the remove and the add direction separately, and their max."""

  remove: float
  add: float

  @property
  def maximum(self) -> float:
    return max(self.remove, self.add)


@summarize_warnings
def pld_epsilon_by_direction(
  event: dp_accounting.DpEvent,
  *,
  delta: float,
  value_discretization_interval: float = 1e-4,
) -> DirectionalEpsilon:
  """Add-only and remove-only epsilons of ``event`` under add/remove-one.

  DP-ZO App. A eq. (4): the two hockey-stick divergences whose maximum is the
  add/remove guarantee (conventions §4: sigma=30.9, p=16/1000, T=75000 gives
  remove 0.50038, add 0.50016), read from the PLD's two PMFs
  (:func:`epsilon_by_direction`). ``pld_epsilon`` is their maximum.
  """
  delta = validation.delta(delta)
  interval = validation.discretization_interval(value_discretization_interval)
  return epsilon_by_direction(
    _cached_pld(event, NeighborRel.ADD_OR_REMOVE_ONE, interval), delta
  )


def epsilon_by_direction(pld: PLD, delta: float) -> DirectionalEpsilon:
  """Remove-direction and add-direction epsilons of a PLD at ``delta``.

  Reads the two PMFs dp_accounting's ``PrivacyLossDistribution`` keeps
  (:func:`~zoprivacy.accounting.dp_accounting_adapter.direction_pmfs`).
  """
  pmf_remove, pmf_add, _ = _adapter.direction_pmfs(pld)
  return DirectionalEpsilon(
    remove=_pmf_epsilon(pmf_remove, delta),
    add=_pmf_epsilon(pmf_add, delta),
  )


# -------------------------------------------------------------- closed forms


def pure_epsilon_poisson_laplace(
  *, noise_multiplier: float, sampling_probability: float, num_steps: int
) -> float:
  """Pure epsilon of T Poisson-subsampled Laplace steps by basic composition.

  DP-ZO Thm. 3.1 / App. A "Pure eps-DP by Laplace mechanism": one step is
  ``1/b``-DP on the batch (Prop. 2.3), ``log(1 + p (e^{1/b} - 1))``-DP after
  Poisson subsampling (Prop. A.2), and T steps compose to
  ``eps = T * log(1 + p * (exp(1/b) - 1))`` (Prop. A.1), delta = 0.
  """
  b = validation.noise_multiplier(noise_multiplier)
  p = validation.sampling_probability(sampling_probability)
  steps = validation.num_steps(num_steps)
  return float(steps * math.log1p(p * math.expm1(1.0 / b)))


def pure_laplace_noise_multiplier(
  *, target_epsilon: float, sampling_probability: float, num_steps: int
) -> float:
  """Inverse of :func:`pure_epsilon_poisson_laplace` (DP-ZO Thm. 3.1) in ``b``.

  ``b = 1 / log(1 + (exp(eps/T) - 1) / p)``.
  """
  eps = validation.epsilon(target_epsilon, "target_epsilon")
  p = validation.sampling_probability(sampling_probability)
  steps = validation.num_steps(num_steps)
  return float(1.0 / math.log1p(math.expm1(eps / steps) / p))


def dpzero_advanced_composition_sigma(
  *,
  epsilon: float,
  delta: float,
  num_steps: int,
  clip: float,
  dataset_size: int,
) -> float:
  """DPZero Alg. 2 line 3: ``sigma = 4 C sqrt(2 T log(e + eps/delta)) / (n eps)``.

  Lemma 2.2 (advanced composition, Kairouz et al.) with the replace-one
  sensitivity ``2C/n`` of the mean of n clipped finite differences (proof of
  Thm. 1). ``sigma`` is the std of the scalar noise added to that *mean*;
  full batch (p = 1), replace-one. A reference formula, not an accountant.
  """
  eps = validation.epsilon(epsilon)
  d = validation.delta(delta)
  steps = validation.num_steps(num_steps)
  c = validation.noise_multiplier(clip, name="clip")
  n = validation.num_steps(dataset_size, name="dataset_size")
  return float(
    4.0 * c * math.sqrt(2.0 * steps * math.log(math.e + eps / d)) / (n * eps)
  )


def dpzero_advanced_composition_noise_multiplier(
  *, epsilon: float, delta: float, num_steps: int
) -> float:
  """DPZero Alg. 2's sigma as a noise multiplier: ``4 sqrt(2T log(e+eps/delta))/eps``.

  Noise std on the *sum* (``n * sigma``) over the per-example bound ``C``, the
  convention of this package, so it can be fed to :func:`pld_epsilon` with
  ``neighboring='replace_one'`` (which charges the ``2C`` sensitivity).
  """
  return dpzero_advanced_composition_sigma(
    epsilon=epsilon,
    delta=delta,
    num_steps=num_steps,
    clip=1.0,
    dataset_size=1,
  )


def gaussian_profile_epsilon(mu: float, delta: float) -> float:
  """Exact epsilon at ``delta`` of the Gaussian mechanism with ``mu =
  sensitivity / std`` (no discretization): Balle & Wang 2018, Thm. 8,
  ``delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu)``, solved
  for ``eps`` in float64. ``T`` un-subsampled Gaussian steps of multiplier
  ``sigma`` are one with ``mu = Delta sqrt(T) / sigma``."""
  from scipy import optimize, stats  # pylint: disable=g-import-not-at-top

  def excess(eps):
    a = stats.norm.cdf(mu / 2 - eps / mu)
    b = math.exp(eps + stats.norm.logcdf(-mu / 2 - eps / mu))
    return a - b - delta

  if excess(0.0) <= 0:
    return 0.0
  hi = mu * mu / 2 + mu * math.sqrt(2 * math.log(1 / delta)) + 1.0
  while excess(hi) > 0:
    hi *= 2
  return float(optimize.brentq(excess, 0.0, hi, xtol=1e-12, rtol=1e-12))
