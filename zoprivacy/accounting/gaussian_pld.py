"""The (subsampled) Gaussian's PLD as dp_accounting's accountant builds it,
with its per-point loop in numpy.

dp_accounting's ``PLDAccountant`` composes a ``GaussianDpEvent`` or a
Poisson-sampled one with ``from_gaussian_mechanism`` (connect-the-dots),
whose hockey-stick divergences come from one Python call of
``inverse_privacy_loss`` per point of the loss grid: about a million calls,
seconds, where the noise is small (a calibration for few steps searches
multipliers below 1). :func:`event_pld` builds the same PLD for those events
the same way, the divergences by
:func:`~zoprivacy.accounting.hockey_stick.deltas` (dp_accounting's
operations on numpy arrays: the PMFs are equal bit for bit, so the epsilons
are too; ``tests/accounting/test_gaussian_pld.py``), then composes as the
accountant does (``self_compose``, then onto the identity). Other events, and the replace-one pair (whose inverse has its own
formula), are left to the accountant.
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.pld import privacy_loss_mechanism as loss_lib

from zoprivacy.accounting import dp_accounting_adapter as _adapter
from zoprivacy.accounting import hockey_stick

Adjacency = _adapter.AdjacencyType
_ADD_OR_REMOVE = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE


class VectorGaussianLoss(loss_lib.GaussianPrivacyLoss):
  """dp_accounting's Gaussian privacy loss (add and remove pairs) whose
  ``get_delta_for_epsilon`` on an array inverts the loss with numpy."""

  def __init__(self, standard_deviation: float, **kwargs):
    super().__init__(standard_deviation, **kwargs)
    self.variance = standard_deviation**2

  def _plain_inverse(self, plain_loss: np.ndarray) -> np.ndarray:
    """``_inverse_privacy_loss_without_subsampling_remove``, elementwise."""
    m = self.sensitivity
    return -0.5 * m - plain_loss * self.variance / m

  def _inverse(self, eps: np.ndarray) -> np.ndarray:
    x, _ = hockey_stick.subsampled_inverse(self, eps, self._plain_inverse)
    for i in np.flatnonzero(np.isnan(x)):  # dp_accounting raises there
      x[i] = self.inverse_privacy_loss(float(eps[i]))
    return x

  def get_delta_for_epsilon(self, epsilon):
    if np.ndim(epsilon) == 0 or self.adjacency_type == Adjacency.REPLACE:
      return super().get_delta_for_epsilon(epsilon)
    return hockey_stick.deltas(self, epsilon, self._inverse)


def gaussian_mechanism_pld(
  standard_deviation: float, sampling_prob: float, interval: float
) -> _adapter.PLD:
  """dp_accounting's ``from_gaussian_mechanism(standard_deviation,
  sampling_prob=..., value_discretization_interval=interval)`` under
  add/remove (its other arguments at their defaults)."""

  def pmf(adjacency):
    loss = VectorGaussianLoss(
      standard_deviation, sampling_prob=sampling_prob, adjacency_type=adjacency
    )
    return _adapter.monotone_loss_pmf(loss, interval)

  if sampling_prob == 1.0:
    return _adapter.PLD(pmf(Adjacency.REMOVE))
  return _adapter.PLD(pmf(Adjacency.REMOVE), pmf(Adjacency.ADD))


def event_pld(event, rel, interval: float) -> _adapter.PLD | None:
  """The accountant's PLD of ``event`` when it is a (self-composed)
  Gaussian or Poisson-sampled Gaussian under add/remove, built by
  :func:`gaussian_mechanism_pld`; ``None`` for any other event."""
  count = 1
  while isinstance(event, dp_accounting.SelfComposedDpEvent):
    event, count = event.event, event.count * count
  if rel != _ADD_OR_REMOVE:
    return None
  if isinstance(event, dp_accounting.PoissonSampledDpEvent):
    p, inner = event.sampling_probability, event.event
    if not isinstance(inner, dp_accounting.GaussianDpEvent):
      return None
    if p == 0 or inner.noise_multiplier == 0:
      return None
    step = gaussian_mechanism_pld(inner.noise_multiplier, p, interval)
    composed = step.self_compose(count)
  elif isinstance(event, dp_accounting.GaussianDpEvent):
    if event.noise_multiplier == 0:
      return None
    std = event.noise_multiplier / math.sqrt(count)
    composed = gaussian_mechanism_pld(std, 1.0, interval)
  else:
    return None
  identity = pld_lib.identity(value_discretization_interval=interval)
  return identity.compose(composed)
