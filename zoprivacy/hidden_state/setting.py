"""The one object that the Noisy-ZOGD mechanism and its accountants share.

Chien, Chen & Li, "Privacy Amplification in Differentially Private
Zeroth-Order Optimization with Hidden States" (below: the paper), eq. (3):

  w_{t+1} = Pi_{B_R}[ w_t - (eta/K) sum_k g_t(w_t; u_k)
                      + (eta/sqrt(K)) sum_k G_k u_k + (eta/sqrt(d)) G' ],

``G_k ~ N(0, beta sigma^2)`` along each of the ``K`` orthonormal directions
and ``G' ~ N(0, (1 - beta) sigma^2 I_d)``. ``beta`` is the **directional
share** of ``sigma^2``, named ``directional_fraction`` here. This is the
convention of the proof and the bound of Thm 3.2 (``sigma_{1,t}^2 = eta^2/K
beta_t sigma^2`` directional, ``sigma_{2,t}^2 = eta^2/d (1 - beta_t)
sigma^2`` isotropic). Eq. (3) itself, and Thm 3.1, use the opposite letter:
their ``beta_t = 0`` is ``directional_fraction = 1`` (see
``docs/conventions.md``).

:class:`NoisyZOGDSetting` holds every quantity the estimator and the
accountants read, and validates it at construction, before any data is
seen. :class:`LossAssumptions` is what the user declares about the loss;
the hidden-state accountant refuses to run without it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from zoprivacy.core import validation


@dataclasses.dataclass(frozen=True)
class LossAssumptions:
  """Declared properties of every per-example loss ``l(.; x)`` on the ball.

  Thm 3.2 assumes each ``l(.; x)`` is ``M``-smooth and ``Delta``-Lipschitz
  (so that clipping at ``Delta`` never binds, App. A.6); Cor. 3.3 also
  assumes ``m``-strong convexity. The declaration must hold on the ball of
  radius ``R + xi``, where the losses are queried.

  Attributes:
    smoothness: ``M``.
    lipschitz: a Lipschitz constant ``L``; must not exceed the clip ``Delta``.
    strong_convexity: ``m`` (0: not strongly convex).
    convex: whether every ``l(.; x)`` is convex (implied by ``m > 0``).
  """

  smoothness: float
  lipschitz: float
  strong_convexity: float = 0.0
  convex: bool = False

  def __post_init__(self):
    validation.positive("smoothness", self.smoothness)
    validation.positive("lipschitz", self.lipschitz)
    m = float(self.strong_convexity)
    if not 0.0 <= m <= self.smoothness:
      raise ValueError(
        f"strong_convexity must lie in [0, smoothness = "
        f"{self.smoothness}], got {self.strong_convexity}."
      )
    if m > 0 and not self.convex:
      object.__setattr__(self, "convex", True)

  @property
  def kind(self) -> str:
    if self.strong_convexity > 0:
      return "strongly_convex"
    return "convex" if self.convex else "smooth"

  @property
  def condition_ratio(self) -> float:
    """``m / M``."""
    return self.strong_convexity / self.smoothness


def step_size_limit(assumptions: LossAssumptions, num_directions: int) -> float:
  """Largest ``eta`` for which Thm 3.2 gives ``c <= 1``.

  Convex: ``eta <= 2K/M`` (then ``c = 1``); strongly convex: ``eta <= K/M``
  (then ``c = 1 - eta m / K``); smooth only: no limit (``c = 1 + eta M/K``).
  """
  if assumptions.kind == "strongly_convex":
    return num_directions / assumptions.smoothness
  if assumptions.kind == "convex":
    return 2.0 * num_directions / assumptions.smoothness
  return math.inf


@dataclasses.dataclass(frozen=True)
class NoisyZOGDSetting:
  """Hyperparameters of one Noisy-ZOGD run (paper eq. (3), App. A.9 eq. (63)).

  Attributes:
    dimension: ``d``, the number of trained parameters.
    dataset_size: ``n``.
    num_directions: ``K`` orthonormal directions per step; Thm 3.2 needs
      ``d >= 2K``.
    step_size: ``eta``.
    noise_std: ``sigma`` of eq. (3): the total noise std, in units of the
      averaged zeroth-order gradient.
    clip: ``Delta``, the per-example clip of the finite difference.
    radius: ``R``; every iterate is projected onto the L2 ball ``B_R``.
    smoothing: ``xi``, the two-point perturbation scale (``c2 = eta M xi``).
    directional_fraction: ``beta`` in [0, 1], the directional share of
      ``sigma^2`` (Thm 3.2's convention), or a per-step schedule
      ``(beta_0, ..., beta_{T-1})``.
    batch_size: ``b`` for the mini-batch form (App. A.9, batches of ``b``
      drawn without replacement, independently each step); ``None``: full
      batch.
    assumptions: the declared :class:`LossAssumptions`, or ``None``.
  """

  dimension: int
  dataset_size: int
  num_directions: int
  step_size: float
  noise_std: float
  clip: float
  radius: float
  smoothing: float = 0.0
  directional_fraction: float | tuple[float, ...] = 0.5
  batch_size: int | None = None
  assumptions: LossAssumptions | None = None

  def __post_init__(self):
    d = validation.positive_int("dimension", self.dimension)
    n = validation.positive_int("dataset_size", self.dataset_size)
    k = validation.positive_int("num_directions", self.num_directions)
    if 2 * k > d:
      raise ValueError(
        f"num_directions K = {k} exceeds d/2 = {d / 2:g}: Thm 3.2 and "
        "Lemma 3.8 require d >= 2K."
      )
    validation.positive("step_size", self.step_size)
    validation.positive("noise_std", self.noise_std)
    validation.positive("clip", self.clip)
    if not float(self.radius) > 0 or not math.isfinite(self.radius):
      raise ValueError(
        f"radius R must be a positive finite number, got "
        f"{self.radius!r}: the projection needs a ball."
      )
    if not float(self.smoothing) >= 0:
      raise ValueError(f"smoothing must be >= 0, got {self.smoothing!r}.")
    fraction = self.directional_fraction
    if isinstance(fraction, (list, tuple)):
      fraction = tuple(
        validation.unit_interval("directional_fraction", f) for f in fraction
      )
      if not fraction:
        raise ValueError("An empty directional_fraction schedule.")
    else:
      fraction = validation.unit_interval("directional_fraction", fraction)
    object.__setattr__(self, "directional_fraction", fraction)
    if self.batch_size is not None:
      b = validation.positive_int("batch_size", self.batch_size)
      if b > n:
        raise ValueError(f"batch_size ({b}) exceeds dataset_size ({n}).")
    if self.assumptions is not None:
      self.check_assumptions()

  # ------------------------------------------------------------ derived
  @property
  def full_batch(self) -> bool:
    """No ``batch_size``: Thm 3.2. Any ``batch_size`` (even ``n``): Thm A.3."""
    return self.batch_size is None

  @property
  def divisor(self) -> int:
    """The batch size the clipped sum is divided by (``n`` or ``b``)."""
    return self.dataset_size if self.batch_size is None else self.batch_size

  def fraction_at(self, step: int) -> float:
    """``beta_t`` of step ``t`` (a schedule must cover the step)."""
    fraction = self.directional_fraction
    if isinstance(fraction, tuple):
      if not 0 <= step < len(fraction):
        raise ValueError(
          f"The directional_fraction schedule has "
          f"{len(fraction)} steps; step {step} is outside it."
        )
      return fraction[step]
    return fraction

  def fractions(self, num_steps: int) -> tuple[float, ...]:
    """``(beta_0, ..., beta_{T-1})``."""
    if isinstance(self.directional_fraction, tuple):
      if len(self.directional_fraction) < num_steps:
        raise ValueError(
          f"The directional_fraction schedule covers "
          f"{len(self.directional_fraction)} steps, fewer than {num_steps}."
        )
      return self.directional_fraction[:num_steps]
    return (self.directional_fraction,) * num_steps

  def noise_variances(self, beta: float | None = None) -> tuple[float, float]:
    """Noise variance of the estimate along a direction and across them.

    Along each ``u_k``: ``beta sigma^2 / K + (1 - beta) sigma^2 / d``; along
    any unit vector orthogonal to every ``u_k``: ``(1 - beta) sigma^2 / d``
    (eq. (3) divided by ``eta``; ``beta`` defaults to step 0's).
    """
    beta = self.fraction_at(0) if beta is None else beta
    s2 = self.noise_std**2
    iso = (1.0 - beta) * s2 / self.dimension
    return beta * s2 / self.num_directions + iso, iso

  def replace(self, **changes) -> NoisyZOGDSetting:
    return dataclasses.replace(self, **changes)

  def with_schedule(self, schedule: Sequence[float]) -> NoisyZOGDSetting:
    return self.replace(directional_fraction=tuple(float(b) for b in schedule))

  # ----------------------------------------------------- Thm 3.2 constants
  def require_assumptions(self) -> LossAssumptions:
    if self.assumptions is None:
      raise ValueError(
        "The hidden-state (final-iterate) epsilon needs declared loss "
        "assumptions: pass assumptions=LossAssumptions(smoothness=M, "
        "lipschitz=L, strong_convexity=m, convex=...). Thm 3.2 holds only "
        "for M-smooth, Delta-Lipschitz losses; without them use the "
        "composition epsilon."
      )
    return self.assumptions

  def check_assumptions(self) -> None:
    """Raises ``ValueError`` where the declared loss breaks Thm 3.2."""
    a = self.require_assumptions()
    if a.lipschitz > self.clip * (1 + 1e-12):
      raise ValueError(
        f"The declared Lipschitz constant {a.lipschitz} exceeds the clip "
        f"Delta = {self.clip}: Thm 3.2 assumes Delta-Lipschitz losses (the "
        "clip never binds). Raise the clip to at least the Lipschitz "
        "constant."
      )
    limit = step_size_limit(a, self.num_directions)
    if self.step_size > limit * (1 + 1e-12):
      rule = "K/M" if a.kind == "strongly_convex" else "2K/M"
      raise ValueError(
        f"step_size eta = {self.step_size} is above the limit {rule} = "
        f"{limit:g} of Thm 3.2 for a {a.kind.replace('_', ' ')} loss "
        f"(M = {a.smoothness}, K = {self.num_directions})."
      )

  @property
  def contraction(self) -> float:
    """``c``, the Lipschitz constant of the first-order map (Thm 3.2)."""
    a = self.require_assumptions()
    ratio = self.step_size / self.num_directions
    if a.kind == "strongly_convex":
      return 1.0 - ratio * a.strong_convexity
    if a.kind == "convex":
      return 1.0
    return 1.0 + ratio * a.smoothness

  @property
  def lipschitz_offset(self) -> float:
    """``c2 = eta M xi`` (Lemma 3.7)."""
    smoothness = self.require_assumptions().smoothness
    return self.step_size * smoothness * self.smoothing

  def lipschitz_factor(self, concentration: float) -> float:
    """``c1 = sqrt(1 - (1 - c^2) K/d + eps (1 + c^2) K/d)`` (Lemma 3.8)."""
    c2 = self.contraction**2
    ratio = self.num_directions / self.dimension
    return math.sqrt(
      1.0 - (1.0 - c2) * ratio + concentration * (1.0 + c2) * ratio
    )

  def failure_probability(self, concentration: float, window):
    """``1 - P(G) <= 2 (T - tau) exp(-3 eps^2 dK / (12(d-K) + 8 eps (d-2K)))``.

    ``window`` is ``T - tau`` (a number or an array); Lemma 3.8 with a union
    bound over the steps of the window (Thm 3.2). Capped at 1.
    """
    d, k, e = self.dimension, self.num_directions, concentration
    exponent = 3.0 * e * e * d * k / (12.0 * (d - k) + 8.0 * e * (d - 2 * k))
    out = np.minimum(
      1.0, 2.0 * np.asarray(window, np.float64) * math.exp(-exponent)
    )
    return float(out) if out.ndim == 0 else out

  def initial_shift(self, tau):
    """``min(2R, 2 eta Delta tau / sqrt(K))``, Lemma 3.9's bound at tau."""
    out = np.minimum(
      2.0 * self.radius,
      2.0
      * self.step_size
      * self.clip
      * np.asarray(tau, np.float64)
      / math.sqrt(self.num_directions),
    )
    return float(out) if out.ndim == 0 else out
