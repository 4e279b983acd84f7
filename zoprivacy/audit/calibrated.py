"""Registered estimators, calibrated for one full-batch step, ready to audit.

An estimator is named as in the registry, optionally with its noise
mechanism after a slash (``dp_zo/laplace``). It is built from its
registered defaults with ``clip = 1``, ``expected_batch_size ==
dataset_size`` (sampling probability 1: the distinguishing game does not
subsample) and the noise multiplier that
:func:`zoprivacy.accounting.calibrate_plan` finds for the target epsilon of
one step, so its plan's epsilon is at most the target.
"""

from __future__ import annotations

from typing import NamedTuple

import zoprivacy.estimators  # noqa: F401  (registers every estimator)
from zoprivacy import accounting
from zoprivacy.estimators import base, registry

# Estimators whose EstimatorState.released holds the privatized scalars (the
# others release a privatized gradient and log its norm there).
SCALAR_RELEASE = frozenset({"dpzero", "dp_zo"})


class AuditTarget(NamedTuple):
  """A calibrated estimator and how to read its release."""

  label: str
  estimator: base.PrivateEstimator
  statistic: str  # 'released' or 'gradient'
  noise_multiplier: float


def auditable_names() -> tuple[str, ...]:
  """Registered private estimators that need no public data or setting."""
  return tuple(
    name for name in registry.names() if _auditable(registry.get(name)) is None
  )


def _auditable(spec) -> str | None:
  if not spec.private:
    return "it is not private"
  if spec.public_data is not None:
    return "it needs public data"
  if spec.takes_setting:
    return "it takes a hidden-state setting"
  return None


def build(
  label: str,
  *,
  noise_multiplier: float,
  batch_size: int,
  clip: float = 1.0,
  **overrides,
) -> base.PrivateEstimator:
  """The estimator ``label`` ('name' or 'name/mechanism'), full batch."""
  name, _, mechanism = label.partition("/")
  spec = registry.get(name)
  reason = _auditable(spec)
  if reason is not None:
    raise ValueError(f"Cannot audit {name!r}: {reason}.")
  kwargs = dict(spec.defaults)
  kwargs.update(
    clip=clip,
    noise_multiplier=noise_multiplier,
    expected_batch_size=float(batch_size),
    dataset_size=int(batch_size),
  )
  if mechanism:
    kwargs["mechanism"] = mechanism
  kwargs.update(overrides)
  taken = base.forward_kwargs(spec.factory, kwargs)
  if mechanism and "mechanism" not in taken:
    raise ValueError(f"{name!r} takes no mechanism (asked for {mechanism!r}).")
  return spec.factory(**taken)


def calibrated(
  label: str,
  *,
  target_epsilon: float,
  delta: float,
  batch_size: int = 8,
  **overrides,
) -> AuditTarget:
  """``label`` with the noise multiplier calibrated for one step."""
  probe = build(label, noise_multiplier=1.0, batch_size=batch_size, **overrides)
  plan = accounting.calibrate_plan(
    probe.privacy_plan,
    target_epsilon=target_epsilon,
    num_steps=1,
    delta=delta,
  )
  sigma = plan.noise_multiplier
  estimator = build(
    label, noise_multiplier=sigma, batch_size=batch_size, **overrides
  )
  if estimator.privacy_plan.epsilon(1, delta=delta) > target_epsilon:
    raise AssertionError("Calibration did not meet the target epsilon.")
  name = label.partition("/")[0]
  statistic = "released" if name in SCALAR_RELEASE else "gradient"
  return AuditTarget(label, estimator, statistic, sigma)
