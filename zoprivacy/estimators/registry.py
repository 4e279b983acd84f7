"""The estimator registry: each estimator declares what it needs.

A runner (``experiments.train``) never switches on estimator names: it reads
the :class:`EstimatorSpec` declared next to the factory. Adding an estimator
means writing its module and one :func:`register` call in it; see
``docs/extending.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from zoprivacy import estimator_manifest

PUBLIC_DATA = (None, "batch", "batches")


@dataclasses.dataclass(frozen=True)
class EstimatorSpec:
  """What a runner must know to build and feed an estimator.

  Attributes:
    name: registry name (``config.estimator``).
    factory: the estimator factory (keyword-only hyperparameters).
    private: whether it takes ``noise_multiplier``, ``expected_batch_size``
      and ``dataset_size`` (and so has a noised privacy plan).
    public_data: ``None``, 'batch' (extra arg ``public_batch=``) or
      'batches' (``public_batches=``, ``num_public_batches`` stacked).
    needs_num_steps: the factory takes ``num_steps`` (a schedule over the run).
    needs_learning_rate: the factory takes ``learning_rate``.
    exact_noise: the factory takes ``noise`` (the scalar ones also
      ``grid_points``): a runner passes ``noise='exact'``, or ``'float'``
      when its config opts out.
    defaults: hyperparameters a runner fills in when a config names this
      estimator without them (overridden by the config's own values).
    sampling: the batch schemes its privacy plan accounts for (a runner
      refuses any other for a private estimator).
    takes_setting: the factory takes ``setting=`` (a
      :class:`zoprivacy.hidden_state.NoisyZOGDSetting` built from the
      ``defaults`` and the config) instead of ``expected_batch_size`` /
      ``dataset_size``, and returns the whole update (step size and
      projection included: a runner adds no optimizer); a runner checks the
      setting before loading data and reports the final-iterate epsilon
      next to the composition one.
    run_settings: config values (a task whose loss declares what the
      analysis assumes, a sampling scheme, ...) under which the estimator
      runs; tools that build a config for every estimator apply them.
  """

  name: str
  factory: Callable[..., Any]
  private: bool = True
  public_data: str | None = None
  needs_num_steps: bool = False
  needs_learning_rate: bool = False
  exact_noise: bool = False
  defaults: tuple[tuple[str, Any], ...] = ()
  sampling: tuple[str, ...] = ("poisson",)
  takes_setting: bool = False
  run_settings: tuple[tuple[str, Any], ...] = ()

  def __post_init__(self):
    if self.public_data not in PUBLIC_DATA:
      raise ValueError(f"public_data must be one of {PUBLIC_DATA}.")

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


def estimator(name: str, **fields) -> Callable:
  """Decorator: registers the factory under ``name`` with ``fields``.

  ``@registry.estimator("dpzero", exact_noise=True)`` above a factory is
  ``register(EstimatorSpec("dpzero", factory, exact_noise=True))``; the
  factory is returned unchanged.
  """

  def decorate(factory: Callable) -> Callable:
    register(EstimatorSpec(name, factory, **fields))
    return factory

  return decorate


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
