"""A private estimator's privatization: its mechanism and its plan.

From one :class:`~zoprivacy.privacy.value.Privacy` value: the runtime
mechanism that adds the noise (:mod:`zoprivacy.mechanisms.noise`) and the
one privacy plan the accountant reads. :func:`privatize` is that of a sum of
per-example scalars clipped at the value's clip (DPZero, DP-ZO, PAZO);
an estimator with another mechanism (the vector ones, GEP) builds its
mechanism and passes it to :func:`make_plan`, which reads the sampling,
the noise source and the delta from the same value.
"""

from __future__ import annotations

from typing import NamedTuple

from zoprivacy.core import validation
from zoprivacy.mechanisms import noise as mechanisms
from zoprivacy.mechanisms import registry
from zoprivacy.mechanisms import values as mechanism_values
from zoprivacy.privacy import plan as plan_lib


class Privatization(NamedTuple):
  """A private estimator's mechanism (it adds the noise), its plan and, for
  tests only, the seed that makes its noise reproducible (NOT private)."""

  mechanism: mechanisms.Mechanism
  plan: plan_lib.PrivacyPlan
  insecure_test_noise_seed: int | None = None

  @property
  def expected_batch_size(self) -> float:
    return self.plan.expected_batch_size


def require_one_gaussian(privacy, releases: str) -> None:
  """Refuses a value whose mechanism is not the Gaussian, or that asks for
  more than one query: ``releases`` says what the estimator releases."""
  gaussian = registry.get(privacy.mechanism) is mechanism_values.Gaussian
  if not gaussian or privacy.num_queries != 1:
    raise ValueError(
      f"{releases} one Gaussian per step: its privacy value's mechanism is "
      f"'gaussian' and num_queries 1, got {privacy.mechanism!r} and "
      f"{privacy.num_queries}."
    )


class UncalibratedError(ValueError):
  """A privacy value without a noise multiplier reached an estimator."""


def noise_multiplier(privacy) -> float:
  """The value's multiplier; one paragraph when it has none."""
  if privacy.noise_multiplier is None:
    raise UncalibratedError(
      "This privacy value has no noise_multiplier. Give it a target to "
      "calibrate for, zoprivacy.Privacy(..., target=zoprivacy.Target("
      "epsilon=2.0, delta=1e-5, num_steps=T)), and the estimator calibrates "
      "it on its own plan (or calibrate it yourself: privacy.calibrate("
      "estimator=zoprivacy.dpzero)); or set noise_multiplier= and read the "
      "epsilon spent with zoprivacy.epsilon(state, delta)."
    )
  return privacy.noise_multiplier


def privatize(
  privacy, *, clip: float = 1.0, num_queries: int | None = None
) -> Privatization:
  """The mechanism and plan of a sum of per-example scalars clipped at the
  value's clip (``clip``, the estimator's default, when the value has
  none), with ``num_queries`` queries (the value's when ``None``)."""
  validation.one_of("mechanism", privacy.mechanism, registry.selectable())
  mech, notes = registry.get(privacy.mechanism).make_noise(
    clip=privacy.clip if privacy.clip is not None else clip,
    noise_multiplier=noise_multiplier(privacy),
    num_queries=privacy.num_queries if num_queries is None else num_queries,
    neighboring=privacy.neighboring,
    noise=privacy.noise.kind,
    grid_points=privacy.noise.grid_points,
  )
  return of_mechanism(mech, privacy, notes)


def of_mechanism(mechanism, privacy, notes=()) -> Privatization:
  """``mechanism`` and its plan under ``privacy``'s sampling and noise."""
  return Privatization(
    mechanism, make_plan(mechanism, privacy, notes), privacy.test_seed
  )


def make_plan(mechanism, privacy, notes=()) -> plan_lib.PrivacyPlan:
  """The plan of one step of ``mechanism`` under ``privacy``'s sampling,
  noise source and target delta."""
  sampling = privacy.batch_selection.scheme()
  target = privacy.target
  return plan_lib.PrivacyPlan.build(
    mechanism=mechanism.name,
    noise_multiplier=float(mechanism.noise_multiplier),
    clip=float(mechanism.clip),
    num_queries=int(mechanism.num_queries),
    grid_points=getattr(mechanism, "grid_points", None),
    sum_grid=getattr(mechanism, "sum_grid", None),
    neighboring=mechanism.neighboring,
    sampling=sampling,
    noise_source=(
      "os_entropy" if privacy.test_seed is None else "insecure_test_seed"
    ),
    notes=tuple(notes),
    float_defence=getattr(mechanism, "float_defence", None),
    delta=None if target is None else target.delta,
    sampling_assumed=privacy.assume_sampling,
  )
