"""Hidden-state (final-iterate) privacy of Noisy-ZOGD.

Chien, Chen & Li, "Privacy Amplification in Differentially Private
Zeroth-Order Optimization with Hidden States". One
:class:`NoisyZOGDSetting`, built from the run's :class:`zoprivacy.Privacy`
value by :func:`setting_of_privacy`, drives both the mechanism
(:func:`zoprivacy.noisy_zogd_chain`) and the accountants:

* :func:`hidden_state_bound`: Thm 3.2 / Thm A.3, optimized numerically;
* :func:`corollary33`: the closed form for strongly convex losses;
* :func:`composition_rdp`, :func:`output_perturbation_rdp`: the baselines;
* :func:`final_iterate_report`: the three side by side;
* :func:`composition_plan`: the per-step privacy plan the estimator
  carries (Thm 3.1, for the ledger), which records the setting;
  :func:`setting_of_plan` reads it back.

See ``docs/hidden_state.md`` for when the final-iterate guarantee applies.
"""

from zoprivacy.hidden_state.baselines import (
  composition_rdp,
  output_perturbation_rdp,
)
from zoprivacy.hidden_state.closed_form import (
  Corollary33,
  corollary33,
  minimum_directions,
  saturation_window,
)
from zoprivacy.hidden_state.from_privacy import (
  noise_multiplier_of_std,
  setting_of_privacy,
)
from zoprivacy.hidden_state.privacy import (
  composition_plan,
  final_iterate,
  setting_of_plan,
)
from zoprivacy.hidden_state.rdp import CONVERSIONS, RdpCurve
from zoprivacy.hidden_state.report import (
  FinalIterateReport,
  final_iterate_report,
)
from zoprivacy.hidden_state.setting import (
  LossAssumptions,
  NoisyZOGDSetting,
  step_size_limit,
)
from zoprivacy.hidden_state.theorem32 import (
  HiddenStateBound,
  hidden_state_bound,
)
