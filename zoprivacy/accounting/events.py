"""DP events of the mechanisms used by DPZero, DP-ZO and PAZO, and input checks.

Conventions (``docs/conventions.md`` §3, 5, 8; same as
``zoprivacy.mechanisms.noise``):

* ``noise_multiplier`` is always the noise standard deviation (Gaussian) or
  the Laplace scale ``b`` divided by ``C``, the bound on one example's
  contribution (the clip). ``C`` is the sensitivity under add/remove-one.
* Under replace-one the sensitivity is ``2C``. ``dp_accounting``'s PLD applies
  that factor 2 itself (its REPLACE adjacency shifts the two outputs by ``-C``
  and ``+C``); its RDP accountant does *not* (it uses ``alpha / (2 sigma^2)``
  whatever the relation), so :func:`zoprivacy.accounting.rdp_epsilon` halves
  Gaussian noise multipliers under replace-one before calling it.
* ``num_queries`` Gaussian queries on one batch, each with noise std
  ``sqrt(num_queries) * noise_multiplier * C``, are exactly one Gaussian
  mechanism with ``noise_multiplier`` (Dong, Roth, Su, Gaussian DP, Cor. 3.3;
  conventions §5). ``dp_accounting``'s PLD rejects a ``ComposedDpEvent`` inside
  ``PoissonSampledDpEvent``, so the equivalent single Gaussian is accounted.
* ``sampling_probability == 1`` is full-batch training: the event is the
  un-subsampled mechanism (identical privacy loss, and the form that
  ``dp_accounting``'s RDP accountant accepts under replace-one too).
"""

from __future__ import annotations

import dp_accounting

from zoprivacy.accounting import relations
from zoprivacy.core import validation

NeighboringRelation = relations.Relation
NeighboringLike = relations.NeighboringLike
# The relation table is :mod:`~zoprivacy.accounting.relations`; these two
# names read it (``neighboring_relation`` is exported by the package).
neighboring_relation = relations.relation
neighboring_name = relations.name


# --------------------------------------------------------------------- events


def _poisson_composed(inner, sampling_probability, num_steps):
  """``inner`` Poisson-subsampled at ``p`` (none at ``p = 1``), ``T`` times."""
  p = validation.sampling_probability(sampling_probability)
  steps = validation.num_steps(num_steps)
  if p < 1.0:
    inner = dp_accounting.PoissonSampledDpEvent(p, inner)
  return dp_accounting.SelfComposedDpEvent(inner, steps)


def poisson_gaussian_event(
  *, noise_multiplier: float, sampling_probability: float, num_steps: int
) -> dp_accounting.DpEvent:
  """``num_steps`` Poisson-subsampled Gaussian releases.

  DP-ZO Alg. 1 lines 3 and 13 (each example in the batch with probability
  ``p``, ``N(0, C^2 sigma^2)`` on the clipped sum), DPZero's released code and
  PAZO. Per step the dominating pairs are DP-ZO App. A eq. (4) (Prop. A.8):
  ``(N(0,s^2), (1-p)N(0,s^2) + pN(1,s^2))`` for add and
  ``((1-p)N(1,s^2) + pN(0,s^2), N(1,s^2))`` for remove.
  With ``sampling_probability == 1`` (full batch, DPZero Alg. 2) the event is
  ``GaussianDpEvent`` composed ``num_steps`` times.
  """
  return _poisson_composed(
    dp_accounting.GaussianDpEvent(
      validation.noise_multiplier(noise_multiplier)
    ),
    sampling_probability,
    num_steps,
  )


def poisson_laplace_event(
  *, noise_multiplier: float, sampling_probability: float, num_steps: int
) -> dp_accounting.DpEvent:
  """``num_steps`` Poisson-subsampled Laplace releases (DP-ZO Alg. 1 line 15).

  ``noise_multiplier`` is ``b / C``: the Laplace scale over the L1
  sensitivity, so one un-subsampled release is ``1/b``-pure-DP (DP-ZO
  Prop. 2.3). ``LaplaceDpEvent(noise_multiplier)``, Poisson-subsampled
  (add/remove only: ``dp_accounting`` has no replace-one Laplace PLD).
  """
  return _poisson_composed(
    dp_accounting.LaplaceDpEvent(validation.noise_multiplier(noise_multiplier)),
    sampling_probability,
    num_steps,
  )
