"""The privacy arguments of an estimator factory, as one typed value.

Every private factory (``dpzero``, ``dp_zo``, ``pazo_m``, ``dp_sgd``, ...)
takes the same privacy keyword arguments: the clip, the noise multiplier,
the expected batch size and dataset size of Poisson sampling, the
neighboring relation, the mechanism and the kind of noise. A factory
gathers the ones it was called with into one :class:`PrivacyArgs` (its
own defaults included), once, by keyword, and passes that value to the
builders below it, which read its fields instead of forwarding a dozen
keywords each.

The public factories keep their keyword signatures: ``PrivacyArgs`` is what
they build from them, not a new way to call them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from zoprivacy.estimators import privatization as privatization_lib


@dataclasses.dataclass(frozen=True)
class PrivacyArgs:
  """The privacy hyperparameters of one private estimator.

  Fields are the keyword arguments of
  :func:`zoprivacy.estimators.privatization.privacy_spec` (validated there,
  when the mechanism and plan are built): ``clip`` ``C``,
  ``noise_multiplier`` ``sigma``, ``expected_batch_size`` ``B = p n``,
  ``dataset_size`` ``n``, ``num_queries`` ``q``, ``neighboring``,
  ``mechanism`` (a registered mechanism name), ``noise`` ('exact',
  'secure_mode' or 'float'), the deprecated ``exact_noise`` flag,
  ``grid_points`` and ``insecure_test_noise_seed`` (tests only: NOT private).
  """

  clip: float
  noise_multiplier: float
  expected_batch_size: float
  dataset_size: int | None = None
  num_queries: int = 1
  neighboring: str = "add_or_remove"
  mechanism: str = "gaussian"
  noise: str = "exact"
  exact_noise: bool | None = None
  grid_points: int = 1024
  insecure_test_noise_seed: int | None = None

  @classmethod
  def of_arguments(cls, arguments: Mapping[str, Any]) -> PrivacyArgs:
    """The privacy arguments among a factory's ``arguments`` (the bound
    arguments of a call, defaults applied, as
    :meth:`~zoprivacy.estimators.registry.EstimatorSpec.plan_template` binds
    them); a field the factory does not take keeps this class's default."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in arguments.items() if k in names})

  def replace(self, **changes) -> PrivacyArgs:
    return dataclasses.replace(self, **changes)

  def privatization(self) -> privatization_lib.Privatization:
    """The validated mechanism and plan of a sum of per-example scalars
    clipped at ``clip`` (:func:`~zoprivacy.estimators.privatization.privacy_spec`)."""
    return privatization_lib.privacy_spec(**dataclasses.asdict(self))


def scalar_privatization(
  arguments: Mapping[str, Any],
) -> privatization_lib.Privatization:
  """The privatization of a factory whose privacy arguments are all named
  as :class:`PrivacyArgs` names them (``dpzero``, ``dp_zo``, PAZO-M/P):
  what its registration declares as ``privatize``."""
  return PrivacyArgs.of_arguments(arguments).privatization()
