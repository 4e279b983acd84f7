"""What zoprivacy needs from dp_accounting beyond its public API, in one place.

dp_accounting's public API gives a PLD's epsilon (the larger of its add and
remove directions) but neither direction alone, composes events in its
``PLDAccountant`` without handing out the composed PLD, and builds no PLD
for the discrete Gaussian under replace-one. What fills those gaps reads
members dp_accounting keeps private; they are read here and nowhere else in
the package:

* :func:`accountant_pld`: the ``PLDAccountant``'s composed PLD (``_pld``),
  refusing a non-private event (``_contains_non_dp_event``);
* :func:`direction_pmfs` and :func:`pld_from_remove_pmfs`: a PLD's remove
  and add PMFs (``_pmf_remove``, ``_pmf_add``, ``_symmetric``), and a PLD
  assembled from two; :func:`dense_probs`: a PMF's dense array (``_probs``);
* :class:`DiscreteGaussianReplaceLoss` and :func:`monotone_loss_pld`: the
  discrete Gaussian's privacy loss with the REPLACE pair it lacks (its
  ``_inverse_privacy_loss_replace`` hook, ``_truncation_bound``, ``_sigma``)
  and dp_accounting's PLD of a monotone privacy loss
  (``_create_pld_pmf_from_monotone_privacy_loss``);
  :func:`discrete_gaussian_parameters` reads the first two for the numpy
  build of :mod:`~zoprivacy.accounting.discrete_gaussian_pld`;
* :func:`truncated_negative_binomial_gamma`: the RDP accountant's map from
  a truncated negative binomial's mean to its ``gamma``.

They are the same in every version ``setup.cfg`` allows (:data:`SUPPORTED`);
:func:`check_supported` runs on import and names what is missing, and why,
if another version moved one (``tests/accounting/
test_dp_accounting_adapter.py`` pins the supported range).
"""

from __future__ import annotations

import math
from importlib import metadata

from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.pld import privacy_loss_mechanism as loss_lib
from dp_accounting.rdp import rdp_privacy_accountant

# pylint: disable=protected-access

SUPPORTED = ">=0.5,<0.7"  # setup.cfg's dp-accounting requirement
PLD = pld_lib.PrivacyLossDistribution
AdjacencyType = loss_lib.AdjacencyType


def accountant_pld(event, rel, interval: float) -> PLD:
  """dp_accounting's ``PLDAccountant`` (relation ``rel``, discretization
  ``interval``) composes ``event``; its PLD, pessimistic.

  Raises:
    ValueError: for an event the accountant does not support, or a
      non-private one (its epsilon is infinite, there is no PLD).
  """
  accountant = pld_privacy_accountant.PLDAccountant(rel, interval)
  accountant.compose(event)
  if accountant._contains_non_dp_event:
    raise ValueError(f"Event not supported by the PLD accountant: {event!r}.")
  return accountant._pld


def direction_pmfs(pld: PLD):
  """``(remove, add, symmetric)``: the PMFs of the remove and the add
  direction (the same object when ``symmetric``)."""
  return pld._pmf_remove, pld._pmf_add, pld._symmetric


def dense_probs(pmf):
  """The probabilities of ``pmf`` as dp_accounting's dense PMF holds them
  (a sparse one converted)."""
  return pmf.to_dense_pmf()._probs


def pld_from_remove_pmfs(remove: PLD, add: PLD) -> PLD:
  """The PLD whose remove direction is ``remove``'s remove PMF and whose
  add direction is ``add``'s (each built as a remove pair)."""
  return PLD(remove._pmf_remove, add._pmf_remove)


class DiscreteGaussianReplaceLoss(loss_lib.DiscreteGaussianPrivacyLoss):
  """dp_accounting's discrete Gaussian privacy loss, plus the REPLACE pair.

  With ``c = exp(-m^2 / (2 sigma^2))`` and ``u = exp(-m x / sigma^2)`` the
  REPLACE loss is ``log((q c u + 1 - q) / (q c / u + 1 - q))``, decreasing
  in ``x``; its inverse solves ``q c u^2 + (1-q)(1-e^l) u - e^l q c = 0``.
  """

  def privacy_loss_tail(self):
    if self.adjacency_type != AdjacencyType.REPLACE:
      return super().privacy_loss_tail()
    bound, m = self._truncation_bound, self.sensitivity
    lower, upper = (
      (-bound, bound) if self.sampling_prob < 1 else (m - bound, bound - m)
    )
    return loss_lib.TailPrivacyLossDistribution(
      lower, upper, {math.inf: self.mu_upper_cdf(lower - 1)}
    )

  def _inverse_privacy_loss_replace(self, privacy_loss: float) -> float:
    bound, m, sigma2 = self._truncation_bound, self.sensitivity, self._sigma**2
    if privacy_loss == -math.inf:
      return bound
    if privacy_loss == math.inf:
      return -bound - 1
    q = self.sampling_prob
    c = math.exp(-(m * m) / (2 * sigma2))
    e = math.exp(min(privacy_loss, 700.0))
    b = (1 - q) * (1 - e)
    u = (-b + math.sqrt(b * b + 4 * q * q * c * c * e)) / (2 * q * c)
    x = -sigma2 / m * math.log(u)
    return math.floor(min(max(x, -bound - 1), bound))


def discrete_gaussian_parameters(loss) -> tuple[float, int]:
  """``(sigma, truncation bound)`` of a dp_accounting
  ``DiscreteGaussianPrivacyLoss``: its noise is supported on
  ``[-bound, bound]``."""
  return loss._sigma, loss._truncation_bound


def monotone_loss_pmf(loss, interval: float):
  """dp_accounting's PMF of a monotone privacy ``loss``, pessimistic,
  connect-the-dots."""
  return pld_lib._create_pld_pmf_from_monotone_privacy_loss(
    loss,
    pessimistic_estimate=True,
    value_discretization_interval=interval,
    use_connect_dots=True,
  )


def monotone_loss_pld(loss, interval: float) -> PLD:
  """The symmetric PLD of a monotone privacy ``loss`` (one PMF),
  pessimistic, connect-the-dots."""
  return PLD(monotone_loss_pmf(loss, interval))


def truncated_negative_binomial_gamma(shape: float, mean: float) -> float:
  """The ``gamma`` of the truncated negative binomial of ``shape`` with
  ``mean``, as dp_accounting's RDP accountant maps them (Papernot and
  Steinke's hyperparameter tuning)."""
  return rdp_privacy_accountant._gamma_truncated_negative_binomial(shape, mean)


def _missing() -> list[str]:
  """The private members above that this dp_accounting lacks."""
  accountant = pld_privacy_accountant.PLDAccountant()
  loss = DiscreteGaussianReplaceLoss(1.0, sensitivity=1)
  wanted = [
    (accountant, "PLDAccountant", ("_pld", "_contains_non_dp_event")),
    (
      pld_lib.identity(),
      "PrivacyLossDistribution",
      ("_pmf_remove", "_pmf_add", "_symmetric"),
    ),
    (loss, "DiscreteGaussianPrivacyLoss", ("_truncation_bound", "_sigma")),
    # The hook the REPLACE pair's inverse overrides (the base class calls it).
    (
      loss_lib.AdditiveNoisePrivacyLoss,
      "AdditiveNoisePrivacyLoss",
      ("_inverse_privacy_loss_replace",),
    ),
    (pld_lib, "pld", ("_create_pld_pmf_from_monotone_privacy_loss",)),
    (rdp_privacy_accountant, "rdp", ("_gamma_truncated_negative_binomial",)),
  ]
  missing = [
    f"{owner}.{name}"
    for obj, owner, names in wanted
    for name in names
    if not hasattr(obj, name)
  ]
  return missing


def check_supported() -> None:
  """Raises ``RuntimeError`` naming the private members this dp_accounting
  lacks, the installed version and the supported ones."""
  missing = _missing()
  if missing:
    raise RuntimeError(
      f"dp-accounting {metadata.version('dp-accounting')} lacks "
      f"{', '.join(missing)}: zoprivacy's accounting reads these members "
      "(zoprivacy/accounting/dp_accounting_adapter.py), which its public "
      f"API does not offer. Install a supported version (dp-accounting"
      f"{SUPPORTED})."
    )


check_supported()
