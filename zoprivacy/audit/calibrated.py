"""Registered estimators, calibrated for one full-batch step, ready to audit.

An estimator is named as in the registry, optionally with its noise
mechanism after a slash (``dp_zo/laplace``) and its noise kind after an at
sign (``dpzero@float``, ``dp_sgd@float``: the floating-point opt-in; without
it, the default: exact for the scalar estimators and for the vector ones,
secure_mode snapped to a lattice for Noisy-ZOGD). It is built from its
registered defaults with ``clip = 1``, ``expected_batch_size ==
dataset_size`` (sampling probability 1: the distinguishing game does not
subsample) and the noise multiplier that
:func:`zoprivacy.privacy.calibrate` finds for the target epsilon of
one step, so its plan's epsilon is at most the target.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

import zoprivacy.estimators  # noqa: F401  (registers every estimator)
from zoprivacy.estimators import base, registry
from zoprivacy.estimators.noisy_zogd import noisy_zogd
from zoprivacy.hidden_state import privacy as hidden_privacy
from zoprivacy.hidden_state import setting as hidden_setting
from zoprivacy.privacy import calibration, value

# Estimators whose EstimatorState.released holds the privatized scalars (the
# others release a privatized gradient and log its norm there).
SCALAR_RELEASE = frozenset(
  {"dpzero", "dp_zo", "pazo_m", "pazo_p", "pazo_s", "vr_dpzero"}
)
# Public examples of the canary loss (``example * 1e6 * sum(params)``): value
# 1/2 gives every public gradient the fixed direction of the all-ones vector
# (so PAZO-P's and GEP's public subspaces are well defined) at half the
# canary's, so DOPE-SGD's residual ``g_canary - g_pub`` is not zero. Public
# data is free: it moves the release the same way in both worlds.
NUM_PUBLIC = 4
PUBLIC_VALUE = 0.5
# The estimators whose privacy value may name another mechanism (Laplace).
MECHANISM_CHOICE = frozenset({"dp_zo"})
# Arguments some factories require that do not change one step's privacy.
REQUIRED_DEFAULTS = {"learning_rate": 0.1, "num_steps": 1000, "num_bases": 1}


class AuditTarget(NamedTuple):
  """A calibrated estimator and how to read its release."""

  label: str
  estimator: base.PrivateEstimator
  statistic: str  # 'released' or 'gradient'
  noise_multiplier: float
  extra_args: dict = {}  # public_batch(es) for the public-data methods
  step: int = 0  # where the game sets the estimator's step counter


def auditable_names() -> tuple[str, ...]:
  """Every registered private estimator."""
  return tuple(
    name for name in registry.names() if _auditable(registry.get(name)) is None
  )


def _auditable(spec) -> str | None:
  if not spec.private:
    return "it is not private"
  return None


def build(
  label: str,
  *,
  noise_multiplier: float,
  batch_size: int,
  clip: float = 1.0,
  **overrides,
) -> base.PrivateEstimator:
  """The estimator ``label`` ('name', 'name/mechanism', either with
  '@noise'), full batch."""
  label, _, noise = label.partition("@")
  name, _, mechanism = label.partition("/")
  if noise:
    overrides = {**overrides, "noise": noise}
  spec = registry.get(name)
  reason = _auditable(spec)
  if reason is not None:
    raise ValueError(f"Cannot audit {name!r}: {reason}.")
  if spec.takes_setting:
    return _noisy_zogd(noise_multiplier, batch_size, clip, **overrides)
  kinds = {"exact": value.Exact(), "float": value.Float()}
  kinds["secure_mode"] = value.SecureMode()
  kind = overrides.pop("noise", None) or "exact"
  dataset_size = int(overrides.pop("dataset_size", batch_size))
  if kind not in kinds:
    raise ValueError(f"Unknown noise kind {kind!r}; one of {tuple(kinds)}.")
  # The game hands the estimator its own neighbouring batches (the full
  # batch of each world): their sampling is assumed, not drawn.
  privacy = value.Privacy(
    clip=clip,
    noise=kinds[kind],
    noise_multiplier=noise_multiplier,
    sampling=value.Poisson(
      dataset_size=dataset_size, expected_batch_size=float(batch_size)
    ),
    mechanism=mechanism or "gaussian",
    assume_sampling=True,
  )
  kwargs = dict(spec.defaults)
  for key, default in REQUIRED_DEFAULTS.items():
    kwargs.setdefault(key, default)
  kwargs.update(overrides)
  taken = base.forward_kwargs(spec.factory, kwargs)
  if mechanism and name not in MECHANISM_CHOICE:
    raise ValueError(f"{name!r} takes no mechanism (asked for {mechanism!r}).")
  return spec.factory(privacy, **taken)


def _noisy_zogd(noise_multiplier, batch_size, clip, dimension=4):
  """Noisy-ZOGD (one direction, full batch of ``batch_size``) on the game's
  ``dimension`` parameters, its plan at ``noise_multiplier``. Its plan is
  replace-one, so the game replaces the canary by its opposite."""
  setting = hidden_setting.NoisyZOGDSetting(
    dimension=dimension,
    dataset_size=batch_size,
    num_directions=1,
    step_size=0.1,
    noise_std=1.0,
    clip=clip,
    radius=10.0,
    smoothing=1e-3,
  )
  # The estimator alone (its registered factory chains the step size and
  # the projection after it, which are post-processing).
  return noisy_zogd(
    hidden_privacy.with_plan_multiplier(setting, noise_multiplier)
  )


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
  plan = calibration.calibrate(
    probe.privacy_plan, value.Target(target_epsilon, delta, num_steps=1)
  )
  sigma = plan.noise_multiplier
  estimator = build(
    label, noise_multiplier=sigma, batch_size=batch_size, **overrides
  )
  if estimator.privacy_plan.epsilon(1, delta=delta) > target_epsilon:
    raise AssertionError("Calibration did not meet the target epsilon.")
  name = label.partition("@")[0].partition("/")[0]
  statistic = "released" if name in SCALAR_RELEASE else "gradient"
  spec = registry.get(name)
  # DPMD's weight on the private gradient is 0 at step 0 and 1 from
  # num_steps on: audit its all-private step.
  step = REQUIRED_DEFAULTS["num_steps"] if spec.needs_num_steps else 0
  return AuditTarget(
    label, estimator, statistic, sigma, public_args(spec), step
  )


def public_args(spec) -> dict:
  """The public extra arguments ``spec``'s update takes: batches of
  :data:`NUM_PUBLIC` canary-loss examples of value :data:`PUBLIC_VALUE`."""
  if spec.public_data == "batch":
    return {"public_batch": jnp.full([NUM_PUBLIC], PUBLIC_VALUE)}
  if spec.public_data == "batches":
    k = dict(spec.defaults).get("num_public_batches", 4)
    return {"public_batches": jnp.full([k, NUM_PUBLIC], PUBLIC_VALUE)}
  return {}
