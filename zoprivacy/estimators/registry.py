"""The estimator registry: each estimator declares what it needs.

A runner (``experiments.run.train``) never switches on estimator names: it reads
the :class:`EstimatorSpec` declared next to the factory. Adding an estimator
means writing its module and one :func:`register` call in it; see
``docs/extending.md``.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from zoprivacy import estimator_manifest
from zoprivacy.estimators import privacy_call
from zoprivacy.privacy import find_plan

PUBLIC_DATA = (None, "batch", "batches")


# Arguments a runner passes itself (from the config, the calibration or the
# data), so they are no hyperparameter defaults of the estimator.
RUNNER_ARGUMENTS = frozenset(
  (
    "privacy",
    "direction_key",
    "num_steps",
    "learning_rate",
    "setting",
    # Noisy-ZOGD's chain: the plan's multiplier (deprecated) and the test
    # seed.
    "noise_multiplier",
    "insecure_test_noise_seed",
    "physical_batch_size",  # config.physical_batch_size
  )
)


@dataclasses.dataclass(frozen=True)
class EstimatorSpec:
  """What a runner must know to build and feed an estimator.

  Only what the factory's signature cannot say is declared; the rest is
  read from ``inspect.signature(factory)``.

  Attributes:
    name: registry name (``config.estimator``).
    factory: the estimator factory (keyword-only hyperparameters).
    public_data: ``None``, 'batch' (extra arg ``public_batch=``) or
      'batches' (``public_batches=``, ``num_public_batches`` stacked).
    sampling: the batch schemes its privacy plan accounts for (a runner
      refuses any other for a private estimator).
    setting_defaults: for a factory that takes ``setting=``, the setting's
      hyperparameters a runner builds it from when a config names none
      (they are fields of the setting, not arguments of the factory).
    run_settings: config values (a task whose loss declares what the
      analysis assumes, a sampling scheme, ...) under which the estimator
      runs; tools that build a config for every estimator apply them.
    learning_rate: the step size a runner gives the optimizer after this
      estimator when the config sets none (``None``: the estimator needs
      none of its own, e.g. Noisy-ZOGD takes its theorem's limit).
    config_fields: run-config fields beyond the default schema that a
      runner reads for this estimator (any other field is refused).
    privatize: ``privatize(privacy, arguments)``: the factory's
      privatization (mechanism and plan) from its privacy value and its
      other bound arguments, the one its body builds (equal plans for every
      estimator of this package: tests/estimators/test_privacy_value.py):
      the plan a calibration starts from, without building the estimator
      (:meth:`plan_template`).
  """

  name: str
  factory: Callable[..., Any]
  public_data: str | None = None
  sampling: tuple[str, ...] = ("poisson",)
  setting_defaults: tuple[tuple[str, Any], ...] = ()
  run_settings: tuple[tuple[str, Any], ...] = ()
  learning_rate: float | None = None
  config_fields: tuple[str, ...] = ()
  privatize: Callable[[Any, Mapping[str, Any]], Any] | None = None

  def __post_init__(self):
    if self.public_data not in PUBLIC_DATA:
      raise ValueError(f"public_data must be one of {PUBLIC_DATA}.")
    if self.setting_defaults and not self.takes_setting:
      raise ValueError("setting_defaults needs a factory that takes setting=.")

  @property
  def parameters(self) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(self.factory).parameters)

  @property
  def private(self) -> bool:
    """It takes a privacy value (Noisy-ZOGD: a ``noise_multiplier``), and
    so has a noised privacy plan."""
    return "privacy" in self.parameters or "noise_multiplier" in self.parameters

  @property
  def needs_num_steps(self) -> bool:
    """It takes ``num_steps`` (a schedule over the run)."""
    return "num_steps" in self.parameters

  @property
  def needs_learning_rate(self) -> bool:
    """It takes ``learning_rate``."""
    return "learning_rate" in self.parameters

  @property
  def takes_setting(self) -> bool:
    """It takes ``setting=`` (a
    :class:`zoprivacy.hidden_state.NoisyZOGDSetting` built from the
    ``setting_defaults`` and the config) instead of
    ``expected_batch_size`` / ``dataset_size``, and returns the whole update
    (step size and projection included: a runner adds no optimizer); a
    runner checks the setting before loading data and reports the
    final-iterate epsilon next to the composition one."""
    return "setting" in self.parameters

  @property
  def defaults(self) -> tuple[tuple[str, Any], ...]:
    """What a runner fills in when a config names this estimator without
    them (overridden by the config's own values): the signature's defaults
    of the hyperparameters (not of :data:`RUNNER_ARGUMENTS`), then the
    ``setting_defaults``."""
    own = tuple(
      (name, p.default)
      for name, p in self.parameters.items()
      if p.default is not p.empty and name not in RUNNER_ARGUMENTS
    )
    return own + self.setting_defaults

  @property
  def required(self) -> tuple[str, ...]:
    """Hyperparameters without a default that a runner does not pass
    itself: a config must give them (``estimator_kwargs``)."""
    return tuple(
      name
      for name, p in self.parameters.items()
      if p.default is p.empty and name not in RUNNER_ARGUMENTS
    )

  def plan_template(self, privacy, kwargs: Mapping[str, Any]):
    """The privacy plan ``factory(privacy, **kwargs)`` holds, from the
    declared ``privatize`` of the value and the call's bound arguments
    (defaults applied): nothing is built. A factory that declares none (one
    registered outside this package) is built once to read it."""
    if self.privatize is None:
      probe = self.factory(privacy, **kwargs)
      plan = getattr(probe, "privacy_plan", None)
      return plan if plan is not None else find_plan(probe.init(None))
    bound = inspect.signature(self.factory).bind(privacy, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    return self.privatize(arguments.pop("privacy"), arguments).plan

  @property
  def public_arg(self) -> str | None:
    return {
      None: None,
      "batch": "public_batch",
      "batches": "public_batches",
    }[self.public_data]


_REGISTRY: dict[str, EstimatorSpec] = {}


def register(spec: EstimatorSpec) -> EstimatorSpec:
  """Adds ``spec``; a second estimator under the same name is an error."""
  if (
    spec.name in _REGISTRY and _REGISTRY[spec.name].factory is not spec.factory
  ):
    raise ValueError(f"An estimator named {spec.name!r} is already registered.")
  _REGISTRY[spec.name] = spec
  return spec


def estimator(name: str, aliases=None, **fields) -> Callable:
  """Decorator: registers the factory under ``name`` with ``fields``.

  ``@registry.estimator("pazo_m", public_data="batch")`` above a factory is
  ``register(EstimatorSpec("pazo_m", factory, public_data="batch"))`` for
  the factory behind the one privacy entry
  (:func:`~zoprivacy.estimators.privacy_call.wrap`: the same signature; it
  calibrates a value that holds only a target, checks its sampling, and
  keeps earlier releases' keyword form, whose names ``aliases`` maps onto
  the value's fields), which is registered and returned.
  """

  def decorate(factory: Callable) -> Callable:
    wrapped = entry(name, aliases, **fields)(factory)
    register(EstimatorSpec(name, wrapped, **fields))
    return wrapped

  return decorate


def entry(name: str, aliases=None, **fields) -> Callable:
  """:func:`estimator` without the registration: the one privacy entry for
  a factory no runner selects by name (the layer-wise step)."""

  def decorate(factory: Callable) -> Callable:
    spec = EstimatorSpec(name, factory, **fields)
    return privacy_call.wrap(factory, spec, aliases)

  return decorate


def plan_template(factory: Callable, privacy, kwargs: Mapping[str, Any]):
  """The privacy plan ``factory(privacy, **kwargs)`` holds
  (:meth:`EstimatorSpec.plan_template` of its registration; an
  unregistered factory is built once to read it)."""
  spec = next(
    (s for s in _REGISTRY.values() if s.factory is factory),
    EstimatorSpec(getattr(factory, "__name__", "factory"), factory),
  )
  return spec.plan_template(privacy, kwargs)


def get(name: str) -> EstimatorSpec:
  """The spec registered as ``name``; a typo lists the valid choices."""
  try:
    return _REGISTRY[name]
  except KeyError:
    raise estimator_manifest.unknown_estimator(name, _REGISTRY) from None


def names() -> tuple[str, ...]:
  return tuple(_REGISTRY)


def factories() -> dict[str, Callable[..., Any]]:
  return {name: spec.factory for name, spec in _REGISTRY.items()}
