"""A private estimator's privatization: its mechanism and its plan.

Shared by every estimator that privatizes a sum of per-example
contributions clipped at ``clip`` under Poisson sampling: the privacy
hyperparameters are validated and turned into the mechanism that adds the
noise (:mod:`zoprivacy.mechanisms.noise`) and the one privacy plan the
accountant reads. :mod:`zoprivacy.estimators.base` re-exports these names.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

from zoprivacy.core import validation
from zoprivacy.mechanisms import noise as mechanisms
from zoprivacy.mechanisms import registry
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


def privacy_spec(
  *,
  clip,
  noise_multiplier,
  expected_batch_size,
  dataset_size=None,
  num_queries: int = 1,
  neighboring: str = "add_or_remove",
  mechanism: str = "gaussian",
  noise: str = "exact",
  exact_noise: bool | None = None,
  grid_points: int = 1024,
  insecure_test_noise_seed: int | None = None,
) -> Privatization:
  """Validates the privacy hyperparameters; builds the mechanism and plan.

  Shared by every estimator that privatizes a sum of per-example
  contributions clipped at ``clip`` under Poisson sampling; each factory
  passes its own keyword arguments to it by name. Runs at
  construction, before any data is seen. Privacy hyperparameters must be
  static Python numbers: they fix the plan that the accountant reads.
  ``noise`` is 'exact', 'secure_mode' or 'float' (module docstring);
  ``exact_noise`` is its deprecated boolean predecessor (``True`` is
  'exact', ``False`` is 'float').
  """
  noise = noise_kind(noise, exact_noise)
  clip = validation.static_positive("clip", clip)
  noise_multiplier = validation.static_positive(
    "noise_multiplier", noise_multiplier
  )
  num_queries = validation.positive_int("num_queries", num_queries)
  validation.one_of(
    "neighboring", neighboring, mechanisms.NEIGHBORING_RELATIONS
  )
  expected_batch_size, dataset_size = validation.batch_size_and_dataset(
    validation.static_positive("expected_batch_size", expected_batch_size),
    dataset_size,
  )
  validation.one_of("mechanism", mechanism, registry.selectable())
  mech, notes = registry.get(mechanism).make_noise(
    clip=clip,
    noise_multiplier=noise_multiplier,
    num_queries=num_queries,
    neighboring=neighboring,
    noise=noise,
    grid_points=grid_points,
  )
  return Privatization(
    mech,
    make_plan(
      mech,
      expected_batch_size=expected_batch_size,
      dataset_size=dataset_size,
      notes=notes,
      insecure_test_noise_seed=insecure_test_noise_seed,
    ),
    insecure_test_noise_seed,
  )


NOISE_KINDS = ("exact", "secure_mode", "float")


def noise_kind(noise: str, exact_noise: bool | None = None) -> str:
  """Checks ``noise``; maps the deprecated ``exact_noise`` flag onto it."""
  if exact_noise is not None:
    warnings.warn(
      "exact_noise= is deprecated: exact noise is the default; pass "
      "noise='float' to opt in to floating-point noise.",
      DeprecationWarning,
      stacklevel=4,
    )
    noise = "exact" if exact_noise else "float"
  validation.one_of("noise", noise, NOISE_KINDS)
  return noise


def make_plan(
  mechanism,
  *,
  expected_batch_size,
  dataset_size,
  notes=(),
  insecure_test_noise_seed=None,
) -> plan_lib.PrivacyPlan:
  """The plan of one step of ``mechanism`` under Poisson sampling."""
  return plan_lib.PrivacyPlan.build(
    mechanism=mechanism.name,
    noise_multiplier=float(mechanism.noise_multiplier),
    clip=float(mechanism.clip),
    num_queries=int(mechanism.num_queries),
    grid_points=getattr(mechanism, "grid_points", None),
    sum_grid=getattr(mechanism, "sum_grid", None),
    neighboring=mechanism.neighboring,
    sampling="poisson",
    expected_batch_size=float(expected_batch_size),
    dataset_size=dataset_size,
    noise_source=(
      "os_entropy" if insecure_test_noise_seed is None else "insecure_test_seed"
    ),
    notes=tuple(notes),
    float_defence=getattr(mechanism, "float_defence", None),
  )
