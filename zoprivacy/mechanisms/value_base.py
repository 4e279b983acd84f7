"""What every mechanism value states: the base of
:mod:`zoprivacy.mechanisms.values` (the built-in values) and of
:mod:`zoprivacy.mechanisms.vector_values`.

A mechanism value is a frozen, hashable dataclass naming one noise law and
its parameters. It states its own accounting (:meth:`NoiseMechanism.
dp_event`, or a :meth:`~NoiseMechanism.pld` hook), its own calibration
(:meth:`~NoiseMechanism.calibration_value`, :meth:`~NoiseMechanism.
warm_start`, :meth:`~NoiseMechanism.first_point`) and, for a value an
estimator selects by name, the runtime noise it adds
(:meth:`~NoiseMechanism.make_noise`). This module never imports JAX.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import dp_accounting

from zoprivacy.accounting import relations
from zoprivacy.accounting.search_start import SearchTarget

Relation = relations.Relation
ADD_OR_REMOVE = relations.ADD_OR_REMOVE
REPLACE_ONE = relations.REPLACE_ONE
_LABELS = {ADD_OR_REMOVE: "add/remove", REPLACE_ONE: "replace-one"}


class MechanismError(ValueError):
  """A mechanism value is inconsistent or unsupported."""


@dataclasses.dataclass(frozen=True)
class NoiseMechanism:
  """Base of the mechanism values: one release of a sum of clipped values.

  ``noise_multiplier`` is the noise std (Gaussian) or scale (Laplace) over
  one example's contribution bound, dp_accounting's convention; ``num_queries``
  sums released from one batch are one release (``docs/conventions.md`` §5).
  """

  name: ClassVar[str]
  noise_kind: ClassVar[str] = "continuous"
  relations: ClassVar[tuple[Relation, ...]] = (ADD_OR_REMOVE, REPLACE_ONE)
  noise_multiplier: float
  num_queries: int = 1

  def __post_init__(self):
    if not self.noise_multiplier > 0:
      raise MechanismError(f"noise_multiplier must be > 0 for {self.name!r}.")
    if isinstance(self.num_queries, bool) or int(self.num_queries) < 1:
      raise MechanismError(f"num_queries must be >= 1, got {self.num_queries}")

  @property
  def is_noised(self) -> bool:
    return True

  def check_relation(self, rel: Relation) -> None:
    if rel not in self.relations:
      raise MechanismError(
        f"The {self.name} mechanism is accounted under "
        f"{' or '.join(_LABELS[r] for r in self.relations)} only "
        f"(dp_accounting has no {_LABELS[rel]} PLD for it)."
      )

  def with_noise_multiplier(self, noise_multiplier: float) -> NoiseMechanism:
    return dataclasses.replace(self, noise_multiplier=noise_multiplier)

  # ----------------------------------------------------------- calibration
  def calibration_value(self) -> NoiseMechanism:
    """The mechanism whose PLD epsilon the noise search runs on (with its
    :meth:`warm_start` and :meth:`first_point`); the plan's calibration
    then raises the multiplier until this mechanism's own epsilon meets
    the target. Here the mechanism itself."""
    return self

  def warm_start(self, target: SearchTarget) -> tuple[float, float]:
    """A multiplier meeting ``target`` (feasible) and ``d log eps / d log
    sigma`` there: where the noise search may fall back to, and its first
    secant step's slope."""
    del target
    raise MechanismError(
      f"The {self.name} mechanism states no calibration start; its "
      "calibration_value() names the mechanism the search runs on."
    )

  def first_point(self, target: SearchTarget, feasible: float) -> float:
    """Where the fine search starts, given the ``feasible`` warm start."""
    del target
    return feasible

  @classmethod
  def make_noise(cls, **privacy):
    """``(runtime mechanism, notes)``: the code that adds this noise, built
    from an estimator's privacy arguments (``clip``, ``noise_multiplier``,
    ``num_queries``, ``neighboring``, ``noise``, ``grid_points``), for a
    value an estimator selects by name
    (:func:`zoprivacy.mechanisms.registry.selectable`). This base class
    states accounting only."""
    del privacy
    raise MechanismError(
      f"The {cls.name} mechanism states accounting only; an estimator "
      "selects a mechanism that builds its noise (make_noise)."
    )

  # ------------------------------------------------------------ accounting
  def dp_event(self, sampling):
    """dp_accounting's event of one release, before ``sampling``, or
    ``None`` when dp_accounting has none for this setting (then :meth:`pld`)."""
    del sampling
    return None

  def pld(self, sampling_probability: float, rel: Relation, interval: float):
    """One subsampled step's PLD, for mechanisms without a ``dp_event``."""
    del sampling_probability, rel, interval
    raise MechanismError(f"The {self.name} mechanism states no event or PLD.")

  def rdp_event(self, sampling):
    """The event whose RDP bounds one step (mechanisms accounted in RDP,
    not by a PLD; :meth:`exact_epsilon` uses it), else ``None``."""
    del sampling
    return None

  def exact_epsilon(self, sampling, rel, num_steps: int, delta: float):
    """A closed-form (or RDP-bound) epsilon where the mechanism has one,
    else ``None``."""
    del sampling, rel, num_steps, delta
    return None

  def accountant_name(self, sampling) -> str:
    del sampling
    return "PLD accountant"

  def pure_epsilon(self, sampling_probability: float, num_steps: int):
    """The pure (delta = 0) epsilon where the mechanism has one, else
    ``None``."""
    del sampling_probability, num_steps
    return None

  def describe(self) -> list[str]:
    kind = self.name.replace("_", " ")
    return [f"{kind} noise, multiplier {self.noise_multiplier:.4g}"]

  def to_dict(self) -> dict[str, Any]:
    return {"name": self.name, **dataclasses.asdict(self)}


@dataclasses.dataclass(frozen=True)
class NoNoise(NoiseMechanism):
  """The non-private identity release (MeZO): epsilon is infinite."""

  name: ClassVar[str] = "none"
  noise_kind: ClassVar[str] = "none"
  noise_multiplier: float = 0.0

  def __post_init__(self):
    if self.noise_multiplier != 0.0:
      raise MechanismError("The non-private plan has no noise_multiplier.")

  @property
  def is_noised(self) -> bool:
    return False

  def dp_event(self, sampling):
    del sampling
    return dp_accounting.NonPrivateDpEvent()

  def describe(self) -> list[str]:
    return ["non-private (no noise): epsilon = inf"]
