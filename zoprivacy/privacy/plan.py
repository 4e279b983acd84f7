"""One privacy plan, as data: what the accountant needs, and nothing else.

A :class:`PrivacyPlan` is a frozen, hashable, JSON-serializable description
of how one step spends privacy: the per-step mechanism as a value (its noise
law and parameters, :mod:`zoprivacy.mechanisms.values`), the clip, the
neighbouring relation (a ``dp_accounting.NeighboringRelation``), the batch
sampling as a value (:mod:`zoprivacy.privacy.sampling_scheme`), where the
noise randomness comes from, and ``delta``. Calibration, the ledger, the
progress bar, ``result.json`` and the printed report all read this one
object; there is no second route.

Every estimator puts its plan into its optimizer state (the
``privacy_plan`` field of :class:`zoprivacy.estimators.EstimatorState`). The
plan is registered as a pytree node *without leaves*, so it survives
``optax.chain``, ``optax.masked``, ``optax.inject_hyperparams``,
``jax.tree.map``, ``jax.jit`` and pickling, and
:func:`zoprivacy.privacy.state.find_plan` reads it back from any state
(refusing the few wrappers that drop releases). This module does not
import JAX (the accounting command line stays JAX-free): the registration
(:func:`register_pytree`) happens when JAX is already loaded as a plan is
made, when :mod:`zoprivacy.estimators.base` (every estimator state) is
imported, and when a state is read.

Accounting: the mechanism's ``dp_event`` wrapped by the sampling is composed
by dp_accounting's ``PLDAccountant``; a mechanism without an event gives one
step's PLD (its ``pld`` hook), composed by dp_accounting's ``self_compose``.
Every epsilon is the pessimistic PLD estimate, in float64, with the maximum
over the add and the remove direction (the full-batch Gaussian: its exact
privacy profile).

Serialized plans carry ``schema`` (:data:`SCHEMA`); the unversioned flat
form of earlier releases (``"mechanism": "gaussian", "noise_multiplier":
...``) still loads, any other schema is refused with a clear message.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from typing import Any

import dp_accounting

from zoprivacy.accounting import epsilon as _eps
from zoprivacy.accounting import relations
from zoprivacy.mechanisms import registry
from zoprivacy.mechanisms import values as mech_lib
from zoprivacy.privacy import sampling_scheme

SCHEMA = 2
NOISE_SOURCES = ("os_entropy", "insecure_test_seed")
VALUE_DISCRETIZATION_INTERVAL = 1e-4
FLOAT_NOISE_WARNING = mech_lib.FLOAT_NOISE_WARNING
SECURE_MODE_NOTE = mech_lib.SECURE_MODE_NOTE
_PLAN_KEYS = (
  "clip",
  "neighboring",
  "noise_source",
  "delta",
  "notes",
  "analysis",
  "sampling_assumed",
)


class PlanError(ValueError):
  """A privacy plan is inconsistent, or cannot be found in a state."""


@dataclasses.dataclass(frozen=True)
class PrivacyPlan:
  """How one step of a run spends privacy.

  Attributes:
    mechanism: the mechanism value (``mechanisms_accounting.Gaussian(...)``,
      ...): noise law, ``noise_multiplier`` (noise std or scale over one
      example's contribution bound, dp_accounting's convention; ``q``
      queries on one batch are one release with it), ``num_queries``, and
      ``grid_points`` for the discrete ones.
    clip: the per-example clip of one query, in the estimator's units.
    neighboring: a ``dp_accounting.NeighboringRelation`` (add/remove-one by
      default; a name is accepted and converted).
    sampling: a sampling value (Poisson by default) holding
      ``expected_batch_size`` (``p n``; the estimators divide by it) and
      ``dataset_size`` (may be filled in later with :meth:`replace`).
    noise_source: 'os_entropy' (secret) or 'insecure_test_seed' (not
      private: anyone with the seed can regenerate the noise).
    delta: the run's delta, set by whoever runs it.
    notes: human-readable remarks, printed in every report.
    analysis: the parameters of a further analysis of the same release that
      the composition accountant does not read (Noisy-ZOGD's final-iterate
      setting, :func:`zoprivacy.hidden_state.privacy.setting_of_plan`), as
      sorted ``(name, value)`` pairs (a mapping is accepted); part of the
      plan, so ledger segments that differ in it stay apart. Empty: none.
    sampling_assumed: the batches are accepted without the selection they
      were drawn under (``zoprivacy.Privacy(assume_sampling=True)``): the
      sampling is ASSUMED, not checked, and every report says so. It
      changes no release, so the noise keys (:meth:`fingerprint`) leave it
      out.

  :meth:`build` makes a plan from flat keyword arguments (a mechanism name).
  """

  mechanism: mech_lib.NoiseMechanism
  clip: float = math.inf
  neighboring: mech_lib.Relation = mech_lib.ADD_OR_REMOVE
  sampling: Any = sampling_scheme.PoissonSampling()
  noise_source: str = "os_entropy"
  delta: float | None = None
  notes: tuple[str, ...] = ()
  analysis: tuple[tuple[str, Any], ...] = ()
  sampling_assumed: bool = False

  def __post_init__(self):
    if "jax" in sys.modules:  # a plan made where JAX runs can meet a pytree
      register_pytree()
    if not isinstance(self.mechanism, mech_lib.NoiseMechanism):
      raise PlanError(
        f"mechanism must be a mechanism value, got {self.mechanism!r}; "
        "PrivacyPlan.build(mechanism=<name>, ...) takes a name."
      )
    try:
      object.__setattr__(
        self, "neighboring", relations.relation(self.neighboring)
      )
      self.mechanism.check_relation(self.neighboring)
    except ValueError as err:
      raise PlanError(str(err)) from None
    if self.noise_source not in NOISE_SOURCES:
      raise PlanError(
        f"noise_source must be one of {NOISE_SOURCES}, got "
        f"{self.noise_source!r}."
      )
    object.__setattr__(self, "notes", tuple(self.notes))
    object.__setattr__(self, "analysis", _frozen_pairs(self.analysis))

  @classmethod
  def build(cls, mechanism="none", **flat) -> PrivacyPlan:
    """A plan from flat keyword arguments: ``mechanism`` a registered name
    (or value), ``noise_multiplier``, ``num_queries``, ``grid_points`` and
    ``float_defence`` for the mechanism, ``sampling`` a name with
    ``expected_batch_size`` and ``dataset_size``, and the plan's fields."""
    if flat.pop("accountant", "pld") != "pld":
      raise PlanError("The only accountant is 'pld'.")
    samp = {
      k: flat.pop(k, None) for k in ("expected_batch_size", "dataset_size")
    }
    sampling = flat.pop("sampling", "poisson")
    mech = {k: flat.pop(k) for k in list(flat) if k not in _PLAN_KEYS}
    try:
      if not isinstance(mechanism, mech_lib.NoiseMechanism):
        mech["noise_multiplier"] = float(mech.get("noise_multiplier") or 0.0)
        mechanism = registry.build(mechanism, **mech)
      elif mech:
        raise PlanError(f"Give {sorted(mech)} in the mechanism value.")
      if isinstance(sampling, str):
        sampling = sampling_scheme.build(sampling, **samp)
    except (ValueError, TypeError) as err:
      raise PlanError(str(err)) from None
    if flat.get("clip", math.inf) is None:
      flat["clip"] = math.inf
    return cls(mechanism=mechanism, sampling=sampling, **flat)

  # ----------------------------------------------------------- properties
  @property
  def is_noised(self) -> bool:
    return self.mechanism.is_noised

  @property
  def is_private(self) -> bool:
    """Noised with secret randomness: the only plans with a real guarantee."""
    return self.is_noised and self.noise_source == "os_entropy"

  @property
  def noise_kind(self) -> str:
    """'none', 'continuous' (floating point) or 'discrete' (exact)."""
    return self.mechanism.noise_kind

  @property
  def noise_multiplier(self) -> float:
    return self.mechanism.noise_multiplier

  @property
  def num_queries(self) -> int:
    return self.mechanism.num_queries

  @property
  def grid_points(self) -> int | None:
    return getattr(self.mechanism, "grid_points", None)

  @property
  def float_defence(self) -> str | None:
    return getattr(self.mechanism, "float_defence", None)

  @property
  def integer_noise_scale(self) -> float:
    """Discrete plans: each query's noise parameter in grid units (see
    :class:`zoprivacy.mechanisms.noise.DiscreteMechanism`)."""
    return self.mechanism.integer_noise_scale

  @property
  def expected_batch_size(self) -> float | None:
    return self.sampling.expected_batch_size

  @property
  def dataset_size(self) -> int | None:
    return self.sampling.dataset_size

  @property
  def sampling_probability(self) -> float:
    try:
      return self.sampling.probability
    except ValueError as err:
      raise PlanError(str(err)) from None

  def replace(self, **changes) -> PrivacyPlan:
    """A copy with ``changes``: the plan's fields, or the flat keyword
    arguments of :meth:`build` (``noise_multiplier=``, ``dataset_size=``...)."""
    if set(changes) <= set(_PLAN_KEYS) | {"mechanism", "sampling"}:
      return dataclasses.replace(self, **changes)
    flat = {**dataclasses.asdict(self.mechanism), **self._flat(), **changes}
    return PrivacyPlan.build(**flat)

  def _flat(self) -> dict[str, Any]:
    """:meth:`build`'s keyword arguments for this plan."""
    return dict(
      mechanism=self.mechanism.name,
      sampling=self.sampling.name,
      expected_batch_size=self.expected_batch_size,
      dataset_size=self.dataset_size,
      **{k: getattr(self, k) for k in _PLAN_KEYS},
    )

  def with_noise_multiplier(self, noise_multiplier: float) -> PrivacyPlan:
    return self.replace(noise_multiplier=float(noise_multiplier))

  # ----------------------------------------------------------- accounting
  def step_event(self):
    """The ``dp_accounting.DpEvent`` of one step (the mechanism's event
    wrapped by the sampling), or ``None`` if dp_accounting has no event for
    the mechanism here (then :meth:`pld` uses the mechanism's PLD hook)."""
    event = self.mechanism.dp_event(self.sampling)
    if event is None or not self.is_noised:
      return event
    try:
      return self.sampling.wrap(event)
    except ValueError as err:
      raise PlanError(str(err)) from None

  def step_event_at(self, noise_multiplier: float):
    """:meth:`step_event` at another noise multiplier: the plan's event
    factory, on which calibration searches
    (:func:`~zoprivacy.privacy.calibrate`)."""
    mechanism = self.mechanism.with_noise_multiplier(noise_multiplier)
    return dataclasses.replace(self, mechanism=mechanism).step_event()

  def pld(self, num_steps: int):
    """The privacy loss distribution of ``num_steps`` steps (float64)."""
    return _pld(self, int(num_steps))

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
    exact = self.mechanism.exact_epsilon(
      self.sampling, self.neighboring, int(num_steps), float(delta)
    )
    if exact is not None:
      return exact
    return _eps.pld_epsilon_for_delta(self.pld(num_steps), float(delta))

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
    data.pop("sampling_assumed", None)
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
      return self.mechanism.describe()[0]
    parts = self.mechanism.describe()
    if self.num_queries > 1:
      parts.append(f"{self.num_queries} queries per step")
    parts.append(
      "add/remove-one (max of both directions)"
      if self.neighboring == mech_lib.ADD_OR_REMOVE
      else "replace-one"
    )
    parts.append(self.sampling.describe())
    if self.sampling_assumed:
      parts.append(
        "the sampling ASSUMED, not checked (batches accepted without their "
        "selection: assume_sampling=True)"
      )
    parts.append(self.mechanism.accountant_name(self.sampling))
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
    """Flat JSON: ``schema``, the mechanism's name and fields, the
    sampling's name and fields, and the plan's own fields."""
    out = {"schema": SCHEMA, **dataclasses.asdict(self.mechanism)}
    out.update(self._flat(), mechanism=self.mechanism.name)
    out.update(
      clip=None if math.isinf(self.clip) else self.clip,
      neighboring=relations.name(self.neighboring),
      notes=list(self.notes),
    )
    out.pop("analysis")  # absent when empty: other plans' JSON is unchanged
    if self.analysis:
      out["analysis"] = {k: _jsonable(v) for k, v in self.analysis}
    if not self.sampling_assumed:  # absent when checked: as before
      out.pop("sampling_assumed")
    return out

  @classmethod
  def from_dict(cls, data: dict[str, Any]) -> PrivacyPlan:
    """Reads :meth:`to_dict`'s JSON, or the unversioned form of earlier
    releases (the same keys, plus ``accountant``); refuses other schemas."""
    data = dict(data)
    schema = data.pop("schema", None)
    if schema not in (None, SCHEMA):
      raise PlanError(
        f"Cannot read a privacy plan with schema {schema!r}: this version "
        f"reads schema {SCHEMA} and the unversioned form before it. Load it "
        "with the zoprivacy version that wrote it, or re-run."
      )
    return cls.build(**data)

  @classmethod
  def non_private(cls) -> PrivacyPlan:
    return cls(mechanism=mech_lib.NoNoise())


def _frozen(value):
  return (
    tuple(map(_frozen, value)) if isinstance(value, list | tuple) else value
  )


def _frozen_pairs(pairs) -> tuple[tuple[str, Any], ...]:
  """``analysis`` as sorted, hashable ``(name, value)`` pairs."""
  items = pairs.items() if isinstance(pairs, dict) else pairs
  return tuple(sorted((str(k), _frozen(v)) for k, v in items))


def _jsonable(value):
  return list(map(_jsonable, value)) if isinstance(value, tuple) else value


@functools.cache
def register_pytree() -> None:
  """Registers :class:`PrivacyPlan` as a static pytree node (no leaves),
  once; imports JAX."""
  import jax  # pylint: disable=g-import-not-at-top

  jax.tree_util.register_static(PrivacyPlan)


@functools.lru_cache(maxsize=16)  # a composed PLD can be several MB
def _pld(plan: PrivacyPlan, num_steps: int):
  """``num_steps`` composed steps of ``plan`` (pessimistic, float64): the
  self-composed step event composed by dp_accounting's ``PLDAccountant``,
  or, without an event, the mechanism's one-step PLD (its ``pld`` hook,
  cached) composed by dp_accounting's ``self_compose``."""
  if num_steps < 1:
    raise ValueError(f"num_steps must be >= 1, got {num_steps}.")
  event = plan.step_event()
  interval = VALUE_DISCRETIZATION_INTERVAL
  if event is not None:
    return _eps.build_pld(
      dp_accounting.SelfComposedDpEvent(event, num_steps),
      neighboring=plan.neighboring,
      value_discretization_interval=interval,
    )
  try:
    p = plan.sampling.pld_probability()
  except ValueError as err:
    raise PlanError(str(err)) from None
  step = plan.mechanism.pld(p, plan.neighboring, interval)
  return step if num_steps == 1 else step.self_compose(num_steps)
