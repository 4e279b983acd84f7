"""The mechanism values by name: what configs, the command line and
serialized plans select.

A mechanism value (:mod:`zoprivacy.mechanisms.values`) states its noise and
its accounting; registering it under its ``name`` is the one line that makes
it selectable: ``PrivacyPlan.build(mechanism=<name>)``, a plan read back
from JSON, ``python -m zoprivacy.privacy --mechanism <name>`` and, for a
value that builds its runtime noise (``make_noise``), an estimator's
``mechanism=<name>`` (:func:`zoprivacy.estimators.privatization.
privacy_spec`). This module never imports JAX.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from zoprivacy.mechanisms import values, vector_values
from zoprivacy.mechanisms.value_base import MechanismError, NoiseMechanism

MECHANISMS: dict[str, type[NoiseMechanism]] = {}


def register(cls: type[NoiseMechanism]) -> type[NoiseMechanism]:
  """Registers a mechanism value class under its ``name`` (a decorator)."""
  if MECHANISMS.get(cls.name, cls) is not cls:
    raise MechanismError(f"A mechanism named {cls.name!r} is registered.")
  MECHANISMS[cls.name] = cls
  return cls


for _cls in (
  values.NoNoise,
  values.Gaussian,
  values.Laplace,
  values.DiscreteGaussian,
  values.DiscreteLaplace,
  vector_values.VectorDiscreteGaussian,
  vector_values.RoundedSumDiscreteGaussian,
):
  register(_cls)


def get(name: str) -> type[NoiseMechanism]:
  """The value class registered as ``name``."""
  if name not in MECHANISMS:
    raise MechanismError(
      f"mechanism must be one of {tuple(MECHANISMS)}, got {name!r}."
    )
  return MECHANISMS[name]


def selectable() -> tuple[str, ...]:
  """The names an estimator's ``mechanism=`` takes: the registered values
  that build the noise they state (their own
  :meth:`~zoprivacy.mechanisms.value_base.NoiseMechanism.make_noise`)."""
  base = NoiseMechanism.make_noise.__func__
  return tuple(
    name
    for name, cls in MECHANISMS.items()
    if cls.make_noise.__func__ is not base
  )


def build(name: str, **params) -> NoiseMechanism:
  """The mechanism value called ``name``; parameters it does not take
  (``grid_points`` for a continuous one, ...) must be ``None``."""
  cls = get(name)
  fields = {f.name for f in dataclasses.fields(cls)}
  extra = {k: v for k, v in params.items() if k not in fields}
  if any(v not in (None, 0, 0.0, 1) for v in extra.values()):
    raise MechanismError(f"{name!r} takes no {sorted(extra)}.")
  return cls(
    **{k: v for k, v in params.items() if k in fields and v is not None}
  )


def from_dict(data: dict[str, Any]) -> NoiseMechanism:
  """Reads :meth:`NoiseMechanism.to_dict`."""
  data = dict(data)
  return get(data.pop("name"))(**data)
