"""Privacy accounting for zoprivacy.

Conventions (``docs/conventions.md``, ``docs/accounting.md``):

* ``noise_multiplier`` = noise std (Gaussian) or Laplace scale over ``C``,
  one example's contribution bound; add/remove-one is the default relation,
  replace-one (sensitivity ``2C``) must be asked for.
* PLD epsilons are dp_accounting's *pessimistic* estimate and the maximum of
  the add and remove directions (DP-ZO App. A, Remark A.9).
* All composition is done by dp_accounting (PLD and RDP accountants).
"""

from zoprivacy.accounting.calibration import (
  CalibrationResult,
  calibrate_noise_multiplier,
)
from zoprivacy.accounting.epsilon import (
  DirectionalEpsilon,
  build_pld,
  dpzero_advanced_composition_noise_multiplier,
  dpzero_advanced_composition_sigma,
  pld_epsilon,
  pld_epsilon_by_direction,
  pure_epsilon_poisson_laplace,
  pure_laplace_noise_multiplier,
  rdp_epsilon,
)
from zoprivacy.accounting.events import (
  full_batch_gaussian_event,
  neighboring_relation,
  poisson_gaussian_event,
  poisson_gaussian_queries_composed_event,
  poisson_gaussian_queries_event,
  poisson_laplace_event,
  sampled_without_replacement_gaussian_event,
)
from zoprivacy.accounting.ledger import (
  PrivacyBudgetExceededError,
  PrivacyLedger,
)
from zoprivacy.accounting.plan_calibration import calibrate_plan
from zoprivacy.accounting.report import EpsilonReport, epsilon_report

__all__ = [
  "CalibrationResult",
  "DirectionalEpsilon",
  "EpsilonReport",
  "PrivacyBudgetExceededError",
  "PrivacyLedger",
  "build_pld",
  "calibrate_noise_multiplier",
  "calibrate_plan",
  "dpzero_advanced_composition_noise_multiplier",
  "dpzero_advanced_composition_sigma",
  "epsilon_report",
  "full_batch_gaussian_event",
  "neighboring_relation",
  "pld_epsilon",
  "pld_epsilon_by_direction",
  "poisson_gaussian_event",
  "poisson_gaussian_queries_composed_event",
  "poisson_gaussian_queries_event",
  "poisson_laplace_event",
  "pure_epsilon_poisson_laplace",
  "pure_laplace_noise_multiplier",
  "rdp_epsilon",
  "sampled_without_replacement_gaussian_event",
]
