"""One privacy plan, as data: what the accountant needs, and nothing else.

A :class:`PrivacyPlan` is a frozen, hashable, JSON-serializable description
of how one step spends privacy: the per-step mechanism and its noise
multiplier, the neighbouring relation, the batch sampling scheme and its
probability, whether the noise is continuous (floating point) or discrete
(exact), where the noise randomness comes from, and ``delta``. Calibration,
the ledger, the progress bar, ``result.json`` and the printed report all read
this one object; there is no second route.

Every estimator puts its plan into its optimizer state (the
``privacy_plan`` field of :class:`zoprivacy.estimators.EstimatorState`). The
plan is registered as a pytree node *without leaves*, so it survives
``optax.chain``, ``optax.masked``, ``optax.inject_hyperparams``,
``jax.tree.map``, ``jax.jit`` and pickling, and :func:`find_plan` reads it
back from any state however the estimator is wrapped.

Mechanisms and their accounting (see :mod:`zoprivacy.mechanisms`):

===================== ==================================================
``gaussian``          ``GaussianDpEvent(noise_multiplier)``, PLD
``laplace``           ``LaplaceDpEvent(noise_multiplier)``, PLD
``discrete_gaussian`` discrete Gaussian PLD, sigma ``noise_multiplier *
                      grid_points`` and integer sensitivity ``grid_points``
``discrete_laplace``  discrete Laplace PLD, likewise
``vector_discrete_``  exact vector noise: subsampled RDP upper bound
``gaussian``          (:mod:`zoprivacy.accounting.subsampled_rdp`)
``none``              non-private (epsilon is infinite)
===================== ==================================================

Every epsilon is dp_accounting's pessimistic PLD estimate, in float64, with
the maximum over the add and the remove direction.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax

MECHANISMS = (
  "gaussian",
  "laplace",
  "discrete_gaussian",
  "discrete_laplace",
  "vector_discrete_gaussian",
  "none",
)
NEIGHBORING = ("add_or_remove", "replace_one")
SAMPLING = ("poisson", "full_batch")
NOISE_SOURCES = ("os_entropy", "insecure_test_seed")
# How floating-point noise is hardened (continuous mechanisms only).
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
ACCOUNTANTS = ("pld", "subsampled_rdp")
VECTOR_EXACT_NOTE = (
  "exact vector discrete Gaussian noise on an integer lattice (i.i.d. per "
  "coordinate, Canonne, Kamath & Steinke 2020), accounted by the sampled "
  "Gaussian's integer-order RDP bound (Mironov, Talwar & Zhang 2019)"
)


class PlanError(ValueError):
  """A privacy plan is inconsistent, or cannot be found in a state."""


@dataclasses.dataclass(frozen=True)
class PrivacyPlan:
  """How one step of a run spends privacy.

  Attributes:
    mechanism: one of :data:`MECHANISMS`.
    noise_multiplier: noise std (Gaussian) or scale (Laplace) over one
      example's contribution bound, the convention of dp_accounting's events.
      For ``num_queries = q`` Gaussian queries, each query's noise is
      ``sqrt(q)`` times larger and the step is one Gaussian with this
      multiplier.
    clip: the per-example clip of one query, in the estimator's units.
    num_queries: released sums per step from the same batch.
    grid_points: discrete mechanisms only: a clipped value is quantized to
      ``round(value * grid_points / clip)``, so the integer sensitivity of one
      query is ``grid_points``.
    neighboring: 'add_or_remove' (default) or 'replace_one'.
    sampling: 'poisson' (probability ``expected_batch_size / dataset_size``)
      or 'full_batch'.
    expected_batch_size: ``p n``; the estimators divide by it.
    dataset_size: ``n``; may be filled in later with :meth:`replace`.
    noise_source: 'os_entropy' (secret) or 'insecure_test_seed' (not
      private: anyone with the seed can regenerate the noise).
    delta: the run's delta, set by whoever runs it.
    accountant: 'pld'.
    notes: human-readable remarks, printed in every report.
    float_defence: continuous mechanisms only: 'none' (plain floating-point
      noise, exposed to Mironov's attacks) or 'secure_mode' (Opacus'
      defence, Holohan & Braghin 2021); ``None`` for the other mechanisms.
  """

  mechanism: str
  noise_multiplier: float = 0.0
  clip: float = math.inf
  num_queries: int = 1
  grid_points: int | None = None
  neighboring: str = "add_or_remove"
  sampling: str = "poisson"
  expected_batch_size: float | None = None
  dataset_size: int | None = None
  noise_source: str = "os_entropy"
  delta: float | None = None
  accountant: str = "pld"
  notes: tuple[str, ...] = ()
  float_defence: str | None = None

  def __post_init__(self):
    _one_of("mechanism", self.mechanism, MECHANISMS)
    _one_of("neighboring", self.neighboring, NEIGHBORING)
    _one_of("sampling", self.sampling, SAMPLING)
    _one_of("noise_source", self.noise_source, NOISE_SOURCES)
    _one_of("accountant", self.accountant, ACCOUNTANTS)
    object.__setattr__(self, "notes", tuple(self.notes))
    if self.mechanism == "vector_discrete_gaussian":
      object.__setattr__(self, "accountant", "subsampled_rdp")
      if self.neighboring != "add_or_remove":
        raise PlanError("Exact vector noise is accounted under add/remove.")
    if self.mechanism in ("gaussian", "laplace"):
      if self.float_defence is None:
        object.__setattr__(self, "float_defence", "none")
      _one_of("float_defence", self.float_defence, FLOAT_DEFENCES)
    elif self.float_defence is not None:
      raise PlanError(f"{self.mechanism!r} takes no float_defence.")
    if self.mechanism != "none" and not self.noise_multiplier > 0:
      raise PlanError(f"noise_multiplier must be > 0 for {self.mechanism!r}.")
    if self.mechanism.startswith("discrete_"):
      if not isinstance(self.grid_points, int) or self.grid_points < 1:
        raise PlanError("Discrete mechanisms need an integer grid_points.")
      if (
        self.mechanism == "discrete_laplace"
        and self.neighboring != "add_or_remove"
      ):
        raise PlanError("The discrete Laplace PLD covers add/remove only.")
    if self.mechanism == "laplace" and self.neighboring != "add_or_remove":
      raise PlanError("Laplace noise is accounted under add/remove only.")

  # ----------------------------------------------------------- properties
  @property
  def is_noised(self) -> bool:
    return self.mechanism != "none"

  @property
  def is_private(self) -> bool:
    """Noised with secret randomness: the only plans with a real guarantee."""
    return self.is_noised and self.noise_source == "os_entropy"

  @property
  def noise_kind(self) -> str:
    if not self.is_noised:
      return "none"
    if self.mechanism == "vector_discrete_gaussian":
      return "discrete_vector"
    return (
      "discrete" if self.mechanism.startswith("discrete_") else "continuous"
    )

  @property
  def integer_noise_scale(self) -> float:
    """Discrete plans: each query's discrete Gaussian sigma
    (``noise_multiplier * grid_points * sqrt(num_queries)``) or discrete
    Laplace scale (``noise_multiplier * grid_points * num_queries``), in
    grid units (see :class:`zoprivacy.mechanisms.DiscreteMechanism`)."""
    scale = self.noise_multiplier * self.grid_points
    if self.mechanism == "discrete_gaussian":
      return scale * math.sqrt(self.num_queries)
    return scale * self.num_queries

  @property
  def sampling_probability(self) -> float:
    if self.sampling == "full_batch":
      return 1.0
    if self.dataset_size is None or self.expected_batch_size is None:
      raise PlanError(
        "The plan needs dataset_size and expected_batch_size "
        "for its Poisson sampling probability."
      )
    if self.expected_batch_size > self.dataset_size:
      raise PlanError(
        f"expected_batch_size ({self.expected_batch_size}) "
        f"exceeds dataset_size ({self.dataset_size})."
      )
    return self.expected_batch_size / self.dataset_size

  def replace(self, **changes) -> PrivacyPlan:
    return dataclasses.replace(self, **changes)

  def with_noise_multiplier(self, noise_multiplier: float) -> PrivacyPlan:
    return self.replace(noise_multiplier=float(noise_multiplier))

  # ----------------------------------------------------------- accounting
  def step_event(self):
    """The ``dp_accounting.DpEvent`` of one step, or ``None`` if dp_accounting
    has no event class for the mechanism (the discrete ones)."""
    import dp_accounting  # pylint: disable=g-import-not-at-top

    if self.mechanism == "none":
      return dp_accounting.NonPrivateDpEvent()
    if self.mechanism == "gaussian":
      event = dp_accounting.GaussianDpEvent(self.noise_multiplier)
    elif self.mechanism == "laplace":
      event = dp_accounting.LaplaceDpEvent(self.noise_multiplier)
    else:
      return None
    if self.sampling == "poisson":
      return dp_accounting.PoissonSampledDpEvent(
        self.sampling_probability, event
      )
    return event

  def pld(self, num_steps: int):
    """The privacy loss distribution of ``num_steps`` steps (float64)."""
    if self.accountant == "subsampled_rdp":
      raise PlanError(
        "Exact vector noise has no PLD; its epsilon is an RDP bound "
        "(plan.epsilon)."
      )
    from zoprivacy.accounting import plan_pld  # pylint: disable=g-import-not-at-top

    return plan_pld.pld(self, num_steps)

  def epsilon(self, num_steps: int, delta: float | None = None) -> float:
    """Epsilon after ``num_steps`` steps: PLD, pessimistic, add/remove max."""
    if not self.is_noised:
      return math.inf
    if num_steps == 0:
      return 0.0
    delta = self.delta if delta is None else delta
    if delta is None:
      raise PlanError("epsilon needs delta (set plan.delta or pass delta=).")
    if not 0.0 < float(delta) < 1.0:
      raise PlanError(f"delta must lie in (0, 1), got {delta!r}.")
    if self.accountant == "subsampled_rdp":
      from zoprivacy.accounting import subsampled_rdp  # pylint: disable=g-import-not-at-top

      return subsampled_rdp.plan_epsilon(self, num_steps, float(delta))
    if self.mechanism == "gaussian" and self.sampling == "full_batch":
      from zoprivacy.accounting import plan_pld  # pylint: disable=g-import-not-at-top

      return plan_pld.full_batch_gaussian_epsilon(self, num_steps, delta)
    return float(self.pld(num_steps).get_epsilon_for_delta(delta))

  def fingerprint(self) -> bytes:
    """SHA-256 of the plan's canonical JSON, ``delta`` left out.

    Every noise stream is keyed by it (with the secret and the step), so a
    run resumed under a changed plan (another multiplier, clip, grid, ...)
    draws noise independent of the first plan's. ``delta`` does not change
    the noise and is set by whoever runs the plan, so it is left out.
    """
    import hashlib  # pylint: disable=g-import-not-at-top
    import json  # pylint: disable=g-import-not-at-top

    data = self.to_dict()
    data.pop("delta")
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).digest()

  def fingerprint_words(self) -> tuple[int, int]:
    """The first 64 bits of :meth:`fingerprint` as two ``uint32`` words."""
    digest = self.fingerprint()
    return (
      int.from_bytes(digest[:4], "little"),
      int.from_bytes(digest[4:8], "little"),
    )

  # -------------------------------------------------------------- reports
  def describe(self) -> str:
    """One line naming everything the epsilon depends on."""
    if not self.is_noised:
      return "non-private (no noise): epsilon = inf"
    kind = self.mechanism.replace("_", " ")
    parts = [f"{kind} noise, multiplier {self.noise_multiplier:.4g}"]
    if self.mechanism == "vector_discrete_gaussian":
      parts.append(VECTOR_EXACT_NOTE)
    elif self.grid_points:
      parts.append(
        f"exact integer noise on a grid of {self.grid_points} steps per clip"
      )
    elif self.float_defence == "secure_mode":
      parts.append(SECURE_MODE_NOTE)
    elif self.mechanism in ("gaussian", "laplace"):
      parts.append(FLOAT_NOISE_WARNING)
    if self.num_queries > 1:
      parts.append(f"{self.num_queries} queries per step")
    rel = (
      "add/remove-one (max of both directions)"
      if self.neighboring == "add_or_remove"
      else "replace-one"
    )
    parts.append(rel)
    if self.sampling == "poisson" and self.dataset_size is None:
      parts.append("Poisson sampling (p unknown: no dataset_size)")
    elif self.sampling == "poisson":
      parts.append(f"Poisson sampling p={self.sampling_probability:.5g}")
    else:
      parts.append("full batch")
    if self.accountant == "subsampled_rdp":
      parts.append("RDP accountant")
    else:
      parts.append(
        "exact Gaussian accountant"
        if self.mechanism == "gaussian" and self.sampling == "full_batch"
        else "PLD accountant"
      )
    parts.append(
      "secret noise from OS entropy"
      if self.noise_source == "os_entropy"
      else "NOT PRIVATE: reproducible insecure test noise"
    )
    text = ", ".join(parts)
    if self.notes:
      text += "; " + "; ".join(self.notes)
    return text

  def to_dict(self) -> dict[str, Any]:
    out = dataclasses.asdict(self)
    out["notes"] = list(self.notes)
    if math.isinf(out["clip"]):
      out["clip"] = None
    return out

  @classmethod
  def from_dict(cls, data: dict[str, Any]) -> PrivacyPlan:
    data = dict(data)
    if data.get("clip") is None:
      data["clip"] = math.inf
    data["notes"] = tuple(data.get("notes", ()))
    return cls(**data)

  @classmethod
  def non_private(cls) -> PrivacyPlan:
    return cls(mechanism="none")


jax.tree_util.register_static(PrivacyPlan)


def _one_of(name: str, value, choices) -> None:
  if value not in choices:
    raise PlanError(f"{name} must be one of {choices}, got {value!r}.")


def find_plan(state) -> PrivacyPlan:
  """The privacy plan inside an optimizer state, however it is wrapped.

  Raises:
    PlanError: when the state holds no plan (no zoprivacy estimator in the
      chain) or several different ones.
  """
  found = [
    x
    for x in jax.tree.leaves(
      state, is_leaf=lambda x: isinstance(x, PrivacyPlan)
    )
    if isinstance(x, PrivacyPlan)
  ]
  unique = list(dict.fromkeys(found))
  if not unique:
    raise PlanError(
      "This optimizer state holds no privacy plan: no zoprivacy "
      "estimator is in the chain."
    )
  if len(unique) > 1:
    raise PlanError(
      f"This optimizer state holds {len(unique)} different "
      "privacy plans; compose them explicitly."
    )
  return unique[0]
