"""Privacy loss distributions of the discrete Gaussian and discrete Laplace.

Accounting for the exact integer noise of
:mod:`zoprivacy.secret_noise.discrete_noise` (Canonne, Kamath, Steinke 2020): a
clipped sum quantized to integers with integer sensitivity ``m`` (one example
moves the integer sum by at most ``m``), plus discrete Gaussian or discrete
Laplace noise, with Poisson subsampling, composed over ``num_steps`` steps.

``dp_accounting`` (0.6) has no ``DpEvent`` for these mechanisms, so their
PLDs are built directly (:func:`discrete_noise_pld`): the discrete Gaussian's
is dp_accounting's ``from_discrete_gaussian_mechanism``, built with numpy
(:mod:`~zoprivacy.accounting.discrete_gaussian_pld`, the same PLD bit for
bit), the discrete Laplace's is ``from_discrete_laplace_mechanism``; both
are composed with ``self_compose``:

* always ``pessimistic_estimate=True`` (the epsilon is an upper bound up to
  the library's ``1e-15`` tail truncation in composition);
* always ``use_connect_dots=True``. The default "privacy buckets"
  discretization is badly pessimistic under subsampling: at p = 0.016,
  T = 75000, delta = 1e-5, m = 10, sigma = 309 it gives epsilon 4.25 where
  connect-the-dots gives 0.50038, the continuous Gaussian's value.

Neighbouring relation: add/remove-one builds separate remove and add PMFs
(the subsampled mechanism is asymmetric); :func:`discrete_epsilon` returns
the maximum of both directions. Replace-one (discrete Gaussian only):
dp_accounting's REPLACE pair for additive noise, ``q mu(x + m) + (1-q)
mu(x)`` against ``q mu(x - m) + (1-q) mu(x)`` (the one example's value moves
from ``-m`` to ``+m``), built by
:class:`~zoprivacy.accounting.dp_accounting_adapter.DiscreteGaussianReplaceLoss`,
which adds the inverse privacy loss dp_accounting's discrete Gaussian lacks
for that pair. The discrete Laplace has no replace-one PLD here
(``ValueError``).

Several queries (:class:`zoprivacy.mechanisms.noise.DiscreteMechanism`): ``q``
independent discrete Gaussians of parameter ``s`` under the worst shift
``m 1`` have a likelihood ratio that is a function of their sum ``S``; ``S``
has pmf ``P[S = x] = theta(x mod q) exp(-x^2 / (2 q s^2)) / Z^q`` where
``theta`` is a theta series over a coset of the ``A_{q-1}`` lattice. By
Poisson summation ``theta`` is constant up to a relative error of at most
about ``exp(-pi^2 s^2)`` (the dual lattice's minimum norm is ``(q-1)/q >=
1/2``), below ``1e-300`` for ``s >= 10``. So ``S`` is the discrete Gaussian
of parameter ``s sqrt(q)`` and the ``q`` releases are accounted as one
discrete Gaussian with sensitivity ``q m``, before subsampling (tested
against the direct convolution in ``tests/accounting``).

Truncation: ``dp_accounting`` models the discrete Gaussian truncated to
``[-ceil(11.6 sigma), ceil(11.6 sigma)]``, which is within total variation
1e-30 of the untruncated sampler; that adds at most about 1e-30 to delta.
All arithmetic is float64.
"""

from __future__ import annotations

import functools
import math

from dp_accounting.pld import privacy_loss_distribution as _pld_lib

from zoprivacy.accounting import discrete_gaussian_pld, relations
from zoprivacy.accounting import dp_accounting_adapter as _adapter
from zoprivacy.accounting.epsilon import (
  DirectionalEpsilon,
  epsilon_by_direction,
)
from zoprivacy.core import validation

PLD = _adapter.PLD
NeighboringLike = relations.NeighboringLike

# dp_accounting stores the discrete Gaussian pmf on about 23.2 * sigma
# integers (float64 arrays): cap sigma to keep that below a few GB.
_MAX_GAUSSIAN_SIGMA = 1e7


# dp_accounting's PLD builders of the two noises (add/remove; the discrete
# Gaussian's replace-one pair is the adapter's).
GAUSSIAN = _pld_lib.from_discrete_gaussian_mechanism
LAPLACE = _pld_lib.from_discrete_laplace_mechanism


def _check_delta(delta) -> float:
  """``delta`` in ``[0, 1)``: ``0`` asks for the pure epsilon."""
  return (
    0.0 if delta == 0 and validation.is_real(delta) else validation.delta(delta)
  )


# ----------------------------------------------------------------------- PLDs


@functools.lru_cache(maxsize=8)
def _single_pld(
  builder,
  parameter: float,
  sensitivity: int,
  p: float,
  interval: float,
  rel: relations.Relation = relations.ADD_OR_REMOVE,
) -> PLD:
  """One subsampled step of ``builder``'s noise (:data:`GAUSSIAN` or
  :data:`LAPLACE`), cached so that a run's evaluations at successive step
  counts only compose it. The discrete Gaussian (either relation) is built
  with numpy by :mod:`~zoprivacy.accounting.discrete_gaussian_pld`:
  dp_accounting's PLD bit for bit, in milliseconds where dp_accounting
  loops over the noise's support in Python for seconds."""
  if builder is GAUSSIAN:
    return discrete_gaussian_pld.discrete_gaussian_pld(
      parameter,
      sensitivity=sensitivity,
      sampling_prob=p,
      value_discretization_interval=interval,
      replace=rel == relations.REPLACE_ONE,
    )
  return builder(
    parameter,
    sensitivity=sensitivity,
    pessimistic_estimate=True,
    value_discretization_interval=interval,
    sampling_prob=p,
    use_connect_dots=True,
  )


@functools.lru_cache(maxsize=16)  # a composed PLD can be several MB
def _composed_pld(
  builder,
  parameter: float,
  sensitivity: int,
  p: float,
  num_steps: int,
  interval: float,
  rel: relations.Relation = relations.ADD_OR_REMOVE,
) -> PLD:
  single = _single_pld(builder, parameter, sensitivity, p, interval, rel)
  return single if num_steps == 1 else single.self_compose(num_steps)


def discrete_noise_pld(
  *,
  sigma: float | None = None,
  scale: float | None = None,
  sensitivity: int,
  sampling_probability: float,
  num_steps: int,
  value_discretization_interval: float = 1e-4,
  neighboring: NeighboringLike = "add_or_remove",
) -> PLD:
  """Composed PLD of ``num_steps`` Poisson-subsampled discrete noise steps.

  One step releases ``sum_i k_i + Y`` where the integers ``k_i`` of the
  sampled examples satisfy ``|k_i| <= sensitivity`` and ``Y`` is, with
  ``sigma``, the discrete Gaussian of Canonne, Kamath, Steinke (2020)
  (``P[Y = y]`` proportional to ``exp(-y^2 / (2 sigma^2))``, as drawn by
  ``discrete_gaussian_noise``) or, with ``scale``, their discrete Laplace
  (``P[Y = y]`` proportional to ``exp(-|y| / scale)``, as drawn by
  ``discrete_laplace_noise``). dp_accounting parametrizes the Laplace by
  ``parameter = 1 / scale``; that float is rounded up, so the accounted
  noise is never larger than the sampled one. dp_accounting's
  ``from_discrete_gaussian_mechanism`` (built with numpy, bit for bit) /
  ``from_discrete_laplace_mechanism`` (pessimistic, connect-the-dots) and
  ``self_compose``. Cached (LRU, 16
  entries) on the arguments. Unsubsampled, one Laplace step is
  ``sensitivity / scale``-DP (pure).

  Args:
    sigma: the discrete Gaussian's parameter in integer units (for a
      continuous noise multiplier ``z`` on a grid with sensitivity ``m``,
      ``sigma = z * m``); finite, ``0 < sigma <= 1e7``.
    scale: the discrete Laplace scale in integer units (``b * m`` for a
      continuous noise multiplier ``b``), finite and ``> 0``. Give exactly
      one of ``sigma`` and ``scale``.
    sensitivity: integer sensitivity ``m >= 1`` of the integer sum.
    sampling_probability: Poisson sampling probability in ``(0, 1]``.
    num_steps: number of composed steps, ``>= 1``.
    value_discretization_interval: PLD grid of privacy-loss values.
    neighboring: ``'add_or_remove'`` (or the matching
      ``dp_accounting.NeighboringRelation``), or ``'replace_one'`` for the
      discrete Gaussian (dp_accounting's REPLACE pair, one PMF).

  Returns:
    A ``dp_accounting`` ``PrivacyLossDistribution`` with separate remove and
    add PMFs (read it with :func:`discrete_epsilon`).

  Raises:
    ValueError: for invalid arguments or ``neighboring='replace_one'``.
  """
  if (sigma is None) == (scale is None):
    raise ValueError(
      "Give exactly one of sigma (discrete Gaussian) and scale (discrete "
      f"Laplace), got sigma={sigma!r}, scale={scale!r}."
    )
  rel = relations.relation(neighboring)
  if sigma is None and rel != relations.ADD_OR_REMOVE:
    raise ValueError(
      "The discrete Laplace PLD is add_or_remove only: dp_accounting has "
      "no replace_one PLD for it."
    )
  m = validation.num_steps(sensitivity, "sensitivity")
  if sigma is not None:
    builder, parameter = GAUSSIAN, _gaussian_parameter(sigma, m)
  else:
    scale = validation.epsilon(scale, "scale")
    builder, parameter = LAPLACE, math.nextafter(1.0 / scale, math.inf)
    if not math.isfinite(parameter):
      raise ValueError(f"scale={scale!r} is too small.")
  return _composed_pld(
    builder,
    parameter,
    m,
    validation.sampling_probability(sampling_probability),
    validation.num_steps(num_steps, "num_steps"),
    validation.discretization_interval(value_discretization_interval),
    rel,
  )


def _gaussian_parameter(sigma, sensitivity: int) -> float:
  sigma = validation.epsilon(sigma, "sigma")
  if sigma > _MAX_GAUSSIAN_SIGMA:
    raise ValueError(
      f"sigma must be <= {_MAX_GAUSSIAN_SIGMA:g} (dp_accounting tabulates "
      f"the pmf on ~23 sigma integers), got {sigma!r}; use a coarser grid."
    )
  if 2 * math.ceil(11.6 * sigma) < sensitivity:
    raise ValueError(
      f"sigma={sigma!r} is too small for sensitivity {sensitivity}: the "
      "mechanism would be essentially non-private."
    )
  return sigma


# ------------------------------------------------------------------ epsilon


def discrete_epsilon_by_direction(pld: PLD, delta: float) -> DirectionalEpsilon:
  """Remove-direction and add-direction epsilons of ``pld`` at ``delta``.

  Reads the two PMFs dp_accounting's ``PrivacyLossDistribution`` keeps
  (:func:`~zoprivacy.accounting.epsilon.epsilon_by_direction`).

  Raises:
    ValueError: for ``delta`` outside ``[0, 1)`` or a non-PLD ``pld``.
  """
  delta = _check_delta(delta)
  if not isinstance(pld, PLD):
    raise ValueError(f"pld must be a PrivacyLossDistribution, got {pld!r}.")
  return epsilon_by_direction(pld, delta)


def discrete_epsilon(pld: PLD, delta: float) -> float:
  """Add/remove epsilon at ``delta``: the maximum over both directions.

  ``pld`` comes from :func:`discrete_noise_pld`. Under Poisson subsampling the remove and
  add PLDs differ and neither dominates in general, so the guarantee for
  add/remove-one neighbours is the larger of the two epsilons (computed
  here explicitly from both PMFs). Pessimistic: an upper bound.

  Raises:
    ValueError: for ``delta`` outside ``[0, 1)`` or a non-PLD ``pld``.
  """
  return discrete_epsilon_by_direction(pld, delta).maximum
