"""Epsilon of DP events: PLD (pessimistic, add/remove maximum), RDP, pure eps.

All composition is done by ``dp_accounting`` (PLD FFT composition of
Koskela et al. / Doroshenko et al. "connect the dots"; RDP of Mironov et al.).
All arithmetic here is float64 (Python floats and numpy float64).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import dp_accounting
from dp_accounting.pld import privacy_loss_distribution as _pld_lib

from zoprivacy import validation
from zoprivacy.accounting import events as _ev
from zoprivacy.accounting import pld_size
from zoprivacy.accounting.dp_warnings import summarize_warnings

PLD = _pld_lib.PrivacyLossDistribution
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

  Mirrors ``dp_accounting.pld.PLDAccountant`` event by event (DP-ZO App. A,
  Def. A.7 and Prop. A.8): subsampled mechanisms get separate add and remove
  PMFs (``from_gaussian_mechanism`` / ``from_laplace_mechanism`` with
  ``sampling_prob``), compositions use ``PLD.compose`` / ``self_compose``, and
  T un-subsampled Gaussians are the single Gaussian with std ``sigma/sqrt(T)``
  exactly as the library's accountant does. Returned as an object so callers
  (the ledger, the add/remove split) can cache and compose it.

  Raises:
    ValueError: for events ``dp_accounting``'s PLD cannot account (sampling
      without replacement, Laplace under replace-one, a composed event inside
      Poisson sampling, ...), with the reason.
  """
  rel = _ev.neighboring_relation(neighboring)
  interval = validation.discretization_interval(value_discretization_interval)
  return _build_pld(event, 1, rel, interval)


def _build_pld(event, count: int, rel, interval: float) -> PLD:
  if isinstance(event, dp_accounting.NoOpDpEvent):
    return _pld_lib.identity(interval)
  if isinstance(event, dp_accounting.SelfComposedDpEvent):
    return _build_pld(event.event, event.count * count, rel, interval)
  if isinstance(event, dp_accounting.ComposedDpEvent):
    out = _pld_lib.identity(interval)
    for e in event.events:
      out = out.compose(_build_pld(e, count, rel, interval))
    return out
  if isinstance(event, dp_accounting.GaussianDpEvent):
    validation.noise_multiplier(event.noise_multiplier)
    pld_size.check_pld_size(
      event.noise_multiplier / math.sqrt(count), 1, 1.0, interval, rel
    )
    return _pld_lib.from_gaussian_mechanism(
      standard_deviation=event.noise_multiplier / math.sqrt(count),
      value_discretization_interval=interval,
      neighboring_relation=rel,
    )
  if isinstance(event, dp_accounting.LaplaceDpEvent):
    _require_add_remove_for_laplace(rel)
    validation.noise_multiplier(event.noise_multiplier)
    pld_size.check_pld_size(event.noise_multiplier, count, 1.0, interval, rel)
    return _pld_lib.from_laplace_mechanism(
      event.noise_multiplier, value_discretization_interval=interval
    ).self_compose(count)
  if isinstance(event, dp_accounting.PoissonSampledDpEvent):
    p = validation.sampling_probability(event.sampling_probability)
    inner = event.event
    if isinstance(inner, dp_accounting.GaussianDpEvent):
      validation.noise_multiplier(inner.noise_multiplier)
      pld_size.check_pld_size(inner.noise_multiplier, count, p, interval, rel)
      return _subsampled_step(
        "gaussian", inner.noise_multiplier, p, interval, rel
      ).self_compose(count)
    if isinstance(inner, dp_accounting.LaplaceDpEvent):
      _require_add_remove_for_laplace(rel)
      validation.noise_multiplier(inner.noise_multiplier)
      pld_size.check_pld_size(inner.noise_multiplier, count, p, interval, rel)
      return _subsampled_step(
        "laplace", inner.noise_multiplier, p, interval, rel
      ).self_compose(count)
    raise ValueError(
      "dp_accounting's PLD accepts only a GaussianDpEvent or LaplaceDpEvent "
      f"inside PoissonSampledDpEvent, got {inner!r}. For q Gaussian queries "
      "on one batch use poisson_gaussian_queries_event (one equivalent "
      "Gaussian, conventions §5)."
    )
  if isinstance(event, dp_accounting.SampledWithoutReplacementDpEvent):
    raise ValueError(
      "dp_accounting's PLD does not support SampledWithoutReplacementDpEvent "
      "(fixed-size batches); use rdp_epsilon(..., neighboring='replace_one')."
    )
  raise ValueError(f"Event not supported by the PLD accountant: {event!r}.")


@functools.lru_cache(maxsize=8)
def _subsampled_step(kind: str, noise: float, p: float, interval, rel) -> PLD:
  """One Poisson-subsampled Gaussian or Laplace step (dp_accounting's
  ``from_gaussian_mechanism`` / ``from_laplace_mechanism`` with
  ``sampling_prob``; separate add and remove PMFs). Cached: a run evaluates
  its epsilon at many step counts of the same step, and only the
  composition differs. PLD objects are never mutated (``self_compose``
  returns a new one)."""
  if kind == "gaussian":
    return _pld_lib.from_gaussian_mechanism(
      standard_deviation=noise,
      value_discretization_interval=interval,
      sampling_prob=p,
      neighboring_relation=rel,
    )
  return _pld_lib.from_laplace_mechanism(
    noise, value_discretization_interval=interval, sampling_prob=p
  )


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
  return float(_cached_pld(event, rel, interval).get_epsilon_for_delta(delta))


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
  remove 0.50038, add 0.50016). Reads the two PMFs that dp_accounting's
  ``PrivacyLossDistribution`` keeps internally (``_pmf_remove``,
  ``_pmf_add``; dp-accounting 0.5-0.6). ``pld_epsilon`` is their maximum.
  """
  delta = validation.delta(delta)
  interval = validation.discretization_interval(value_discretization_interval)
  return epsilon_by_direction(
    _cached_pld(event, NeighborRel.ADD_OR_REMOVE_ONE, interval), delta
  )


def epsilon_by_direction(pld: PLD, delta: float) -> DirectionalEpsilon:
  """Remove-direction and add-direction epsilons of a PLD at ``delta``.

  Reads the two PMFs dp_accounting's ``PrivacyLossDistribution`` keeps
  (``_pmf_remove``, ``_pmf_add``; dp-accounting 0.5-0.6).
  """
  try:
    pmf_remove, pmf_add = pld._pmf_remove, pld._pmf_add  # pylint: disable=protected-access
  except AttributeError as exc:  # pragma: no cover - depends on library version
    raise RuntimeError(
      "This dp_accounting version does not expose per-direction PMFs."
    ) from exc
  return DirectionalEpsilon(
    remove=float(pmf_remove.get_epsilon_for_delta(delta)),
    add=float(pmf_add.get_epsilon_for_delta(delta)),
  )


# ------------------------------------------------------------------------ RDP


def _rdp_event(event, rel):
  """Rewrites Gaussian noise multipliers for dp_accounting's RDP convention.

  dp_accounting's RDP accountant takes ``noise_multiplier`` as std over the
  sensitivity *of the chosen relation* (``alpha / (2 sigma^2)`` regardless of
  relation, and Wang-Balle-Kasiviswanathan Thm. 27 with a replace-one base
  mechanism). Our ``noise_multiplier`` is std over ``C`` and the replace-one
  sensitivity is ``2C`` (DPZero proof of Thm. 1), so under replace-one every
  Gaussian multiplier is halved. Under add/remove the event is unchanged.
  """
  if rel != NeighborRel.REPLACE_ONE:
    return event
  if isinstance(event, dp_accounting.GaussianDpEvent):
    return dp_accounting.GaussianDpEvent(event.noise_multiplier / 2.0)
  if isinstance(event, dp_accounting.SelfComposedDpEvent):
    return dp_accounting.SelfComposedDpEvent(
      _rdp_event(event.event, rel), event.count
    )
  if isinstance(event, dp_accounting.ComposedDpEvent):
    return dp_accounting.ComposedDpEvent(
      [_rdp_event(e, rel) for e in event.events]
    )
  if isinstance(event, dp_accounting.SampledWithoutReplacementDpEvent):
    return dp_accounting.SampledWithoutReplacementDpEvent(
      event.source_dataset_size,
      event.sample_size,
      _rdp_event(event.event, rel),
    )
  if isinstance(event, dp_accounting.PoissonSampledDpEvent):
    raise ValueError(
      "dp_accounting's RDP accountant supports Poisson sampling only under "
      "add_or_remove; under replace_one use pld_epsilon."
    )
  if isinstance(event, dp_accounting.LaplaceDpEvent):
    raise ValueError(
      "Laplace events are accounted under add_or_remove only (dp_accounting "
      "has no replace-one Laplace PLD)."
    )
  return event


@summarize_warnings
def rdp_epsilon(
  event: dp_accounting.DpEvent,
  *,
  delta: float,
  neighboring: _ev.NeighboringLike = "add_or_remove",
) -> float:
  """Epsilon at ``delta`` from dp_accounting's RDP accountant (default orders).

  Subsampled Gaussian RDP (Mironov, Talwar, Zhang 2019) for Poisson sampling
  under add/remove; Wang-Balle-Kasiviswanathan 2019 Thm. 27 for sampling
  without replacement under replace-one. Replace-one Gaussian multipliers are
  halved first (see ``_rdp_event``). RDP is an upper bound, looser than PLD.

  Raises:
    ValueError: if dp_accounting's RDP accountant cannot account ``event``
      under ``neighboring`` (e.g. Poisson-subsampled Laplace).
  """
  delta = validation.delta(delta)
  rel = _ev.neighboring_relation(neighboring)
  rdp_event = _rdp_event(event, rel)
  accountant = dp_accounting.rdp.RdpAccountant(neighboring_relation=rel)
  if not accountant.supports(rdp_event):
    raise ValueError(
      f"dp_accounting's RDP accountant cannot account {event!r} under "
      f"{_ev.neighboring_name(rel)} (e.g. Poisson-subsampled Laplace is not "
      "supported; use pld_epsilon / pure_epsilon_poisson_laplace)."
    )
  accountant.compose(rdp_event)
  return float(accountant.get_epsilon(delta))


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
