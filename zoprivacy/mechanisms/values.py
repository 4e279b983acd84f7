"""Mechanisms as values: what a privacy plan knows about its noise.

Each class below is a frozen, hashable value naming one noise law and its
parameters, and stating its own accounting: :meth:`dp_event` (one release,
before subsampling) where dp_accounting has an event for it, or a
:meth:`pld` hook where it has none (the discrete Gaussian; the discrete
Laplace under Poisson sampling or with several queries, which dp_accounting's
``DiscreteLaplaceDpEvent`` does not cover). The runtime mechanisms that add
the noise are in :mod:`zoprivacy.mechanisms.noise` and
:mod:`zoprivacy.mechanisms.discrete`; the sampling schemes are in
:mod:`zoprivacy.privacy.sampling_scheme`.

Adding a mechanism: write a frozen dataclass with ``name``, the relations it
supports, ``dp_event`` or ``pld`` (the base class,
:class:`~zoprivacy.mechanisms.value_base.NoiseMechanism`, lists what a value
states), and register it (:func:`zoprivacy.mechanisms.registry.register`).
Its calibration is its own too: :meth:`NoiseMechanism.calibration_value`
names the mechanism whose events the noise search runs on (the Gaussian and
the Laplace search their own; the discrete ones their continuous
counterpart's), whose ``warm_start`` and ``first_point`` start it. Nothing
else in the package switches on mechanism names (``docs/extending.md``).
This module never imports JAX.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import dp_accounting

from zoprivacy.accounting import discrete_laplace_queries as dlq
from zoprivacy.accounting import discrete_pld, relations, search_start
from zoprivacy.accounting import epsilon as _eps
from zoprivacy.accounting.search_start import SearchTarget
from zoprivacy.mechanisms.value_base import (  # noqa: F401 (re-exported)
  MechanismError,
  NoiseMechanism,
  NoNoise,
)

Relation = relations.Relation
ADD_OR_REMOVE = relations.ADD_OR_REMOVE
REPLACE_ONE = relations.REPLACE_ONE
RELATION_NAMES = relations.NAMES
relation = relations.relation
relation_name = relations.name
FLOAT_DEFENCES = ("none", "secure_mode")
FLOAT_NOISE_WARNING = (
  "floating-point noise: exposed to floating-point attacks (Mironov 2012)"
)
SECURE_MODE_NOTE = (
  "floating-point noise hardened by Opacus' secure_mode defence (each "
  "Gaussian is the scaled sum of 4 independent draws, Holohan & Braghin "
  "2021); not exact: a floating-point precision test still identifies "
  "some releases (docs/exact_noise.md)"
)


@dataclasses.dataclass(frozen=True)
class _FloatMechanism(NoiseMechanism):
  """Floating-point noise: 'none' (plain, exposed to Mironov's attacks) or
  'secure_mode' (Opacus' defence, Holohan & Braghin 2021)."""

  float_defence: str = "none"

  def __post_init__(self):
    super().__post_init__()
    if self.float_defence not in self.defences:
      raise MechanismError(
        f"float_defence must be one of {self.defences} for {self.name!r}, "
        f"got {self.float_defence!r}."
      )

  defences: ClassVar[tuple[str, ...]] = FLOAT_DEFENCES

  def describe(self) -> list[str]:
    note = (
      SECURE_MODE_NOTE
      if self.float_defence == "secure_mode"
      else FLOAT_NOISE_WARNING
    )
    return super().describe() + [note]

  @classmethod
  def make_noise(cls, **privacy):
    """The floating-point mechanism, or by default (``noise='exact'``) the
    exact discrete one of the same law
    (:func:`zoprivacy.mechanisms.noise.make_mechanism`)."""
    # Imported here: the runtime mechanisms import JAX, which plans, the
    # registry and the accounting command line never load.
    from zoprivacy.mechanisms import noise  # pylint: disable=g-import-not-at-top

    return noise.make_mechanism(cls.name, **privacy)


@dataclasses.dataclass(frozen=True)
class Gaussian(_FloatMechanism):
  """Gaussian noise: ``GaussianDpEvent(noise_multiplier)``."""

  name: ClassVar[str] = "gaussian"

  def dp_event(self, sampling):
    del sampling
    return dp_accounting.GaussianDpEvent(self.noise_multiplier)

  def warm_start(self, target: SearchTarget) -> tuple[float, float]:
    """The RDP multiplier (an upper bound on epsilon, so feasible) and the
    RDP curve's slope (:func:`~zoprivacy.accounting.search_start.
    rdp_warm_start`)."""
    return search_start.rdp_warm_start(*target.search_args())

  def first_point(self, target: SearchTarget, feasible: float) -> float:
    """The central-limit estimate where it lies below ``feasible``
    (:func:`~zoprivacy.accounting.search_start.first_point`)."""
    return search_start.first_point(*target.search_args(), feasible)

  def exact_epsilon(self, sampling, rel, num_steps: int, delta: float):
    """Full batch: ``T`` Gaussians are one Gaussian, whose privacy profile is
    exact (Balle & Wang 2018, Thm. 8); a PLD would need ``O(mu / interval)``
    points, prohibitive for the large ``mu`` of full-batch runs."""
    if sampling.probability < 1.0:
      return None

    sens = 2.0 if rel == REPLACE_ONE else 1.0
    mu = sens * math.sqrt(num_steps) / self.noise_multiplier
    return _eps.gaussian_profile_epsilon(mu, delta)

  def accountant_name(self, sampling) -> str:
    return (
      "exact Gaussian accountant"
      if sampling.probability >= 1.0
      else "PLD accountant"
    )


@dataclasses.dataclass(frozen=True)
class Laplace(_FloatMechanism):
  """Laplace noise: ``LaplaceDpEvent(noise_multiplier)``, add/remove only."""

  name: ClassVar[str] = "laplace"
  relations: ClassVar[tuple[Relation, ...]] = (ADD_OR_REMOVE,)
  defences: ClassVar[tuple[str, ...]] = ("none",)

  def pure_epsilon(self, sampling_probability: float, num_steps: int):
    return _pure_laplace(self.noise_multiplier, sampling_probability, num_steps)

  def dp_event(self, sampling):
    del sampling
    return dp_accounting.LaplaceDpEvent(self.noise_multiplier)

  def warm_start(self, target: SearchTarget) -> tuple[float, float]:
    """DP-ZO Thm. 3.1's pure-DP multiplier (feasible), and slope -1."""
    return _eps.pure_laplace_noise_multiplier(
      target_epsilon=target.target_epsilon,
      sampling_probability=target.sampling_probability,
      num_steps=target.num_steps,
    ), -1.0


@dataclasses.dataclass(frozen=True)
class _DiscreteMechanism(NoiseMechanism):
  """Exact integer noise on a grid of ``grid_points`` steps per clip
  (:class:`zoprivacy.mechanisms.discrete.DiscreteMechanism`), accounted by
  the discrete PLDs of :mod:`zoprivacy.accounting.discrete_pld`."""

  noise_kind: ClassVar[str] = "discrete"
  grid_points: int = 1024

  def __post_init__(self):
    super().__post_init__()
    if not isinstance(self.grid_points, int) or self.grid_points < 1:
      raise MechanismError("Discrete mechanisms need an integer grid_points.")

  def calibration_value(self) -> NoiseMechanism:
    """The continuous mechanism of the same law, whose epsilon is within a
    fraction of a percent of this one's (the Gaussian here)."""
    return Gaussian(self.noise_multiplier, self.num_queries)

  def describe(self) -> list[str]:
    return super().describe() + [
      f"exact integer noise on a grid of {self.grid_points} steps per clip"
    ]


@dataclasses.dataclass(frozen=True)
class DiscreteGaussian(_DiscreteMechanism):
  """Discrete Gaussian: dp_accounting has no event for it, so :meth:`pld`.

  ``q`` queries on one batch are one discrete Gaussian of parameter
  ``s sqrt(q)`` (``s`` each query's) with sensitivity ``q m``
  (:class:`~zoprivacy.mechanisms.discrete.DiscreteMechanism`).
  """

  name: ClassVar[str] = "discrete_gaussian"

  @property
  def integer_noise_scale(self) -> float:
    """Each query's discrete Gaussian sigma, in grid units."""
    return (
      self.noise_multiplier * self.grid_points * math.sqrt(self.num_queries)
    )

  def pld(self, sampling_probability: float, rel: Relation, interval: float):

    q = self.num_queries
    sigma = self.integer_noise_scale
    if q > 1:  # nudged down: the accounted noise is never larger
      sigma = sigma * math.sqrt(q) * (1 - 1e-12)
    return discrete_pld.discrete_noise_pld(
      sigma=sigma,
      sensitivity=q * self.grid_points,
      sampling_probability=sampling_probability,
      num_steps=1,
      value_discretization_interval=interval,
      neighboring=rel,
    )


@dataclasses.dataclass(frozen=True)
class DiscreteLaplace(_DiscreteMechanism):
  """Discrete Laplace, add/remove only. Full batch and one query:
  dp_accounting's ``DiscreteLaplaceDpEvent`` (a pure-DP step); under Poisson
  sampling or with several queries (which the event does not cover): the
  :meth:`pld` hook."""

  name: ClassVar[str] = "discrete_laplace"
  relations: ClassVar[tuple[Relation, ...]] = (ADD_OR_REMOVE,)

  def calibration_value(self) -> NoiseMechanism:
    return Laplace(self.noise_multiplier, self.num_queries)

  def pure_epsilon(self, sampling_probability: float, num_steps: int):
    """Each step is ``q m / (q m b) = 1/b``-DP on its batch, as the
    continuous Laplace."""
    return _pure_laplace(self.noise_multiplier, sampling_probability, num_steps)

  @property
  def integer_noise_scale(self) -> float:
    """Each query's discrete Laplace scale, in grid units."""
    return self.noise_multiplier * self.grid_points * self.num_queries

  def _parameter(self) -> float:
    # dp_accounting's parameter is 1/scale, rounded up: never less noise.
    return math.nextafter(1.0 / self.integer_noise_scale, math.inf)

  def dp_event(self, sampling):
    if sampling.subsampled or self.num_queries > 1:
      return None
    return dp_accounting.dp_event.DiscreteLaplaceDpEvent(
      self._parameter(), self.grid_points
    )

  def pld(self, sampling_probability: float, rel: Relation, interval: float):

    if self.num_queries > 1:
      return dlq.discrete_laplace_queries_pld(
        scale=self.integer_noise_scale,
        sensitivity=self.grid_points,
        num_queries=self.num_queries,
        sampling_probability=sampling_probability,
        num_steps=1,
        value_discretization_interval=interval,
      )
    return discrete_pld.discrete_noise_pld(
      scale=self.integer_noise_scale,
      sensitivity=self.grid_points,
      sampling_probability=sampling_probability,
      num_steps=1,
      value_discretization_interval=interval,
      neighboring=rel,
    )


def _pure_laplace(noise_multiplier, sampling_probability, num_steps) -> float:
  """DP-ZO Thm. 3.1: ``T log(1 + p (e^{1/b} - 1))``."""
  return _eps.pure_epsilon_poisson_laplace(
    noise_multiplier=noise_multiplier,
    sampling_probability=sampling_probability,
    num_steps=num_steps,
  )
