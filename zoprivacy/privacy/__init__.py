"""Privacy plumbing: secret randomness, exact noise, the privacy plan.

* :mod:`~zoprivacy.privacy.randomness`: public direction keys vs secret
  noise and sampling keys (OS entropy), and the insecure test option;
* :mod:`~zoprivacy.privacy.plan`: :class:`PrivacyPlan`, the one description
  of a run's privacy that calibration, the ledger and every report read;
* :mod:`~zoprivacy.privacy.discrete_noise`: exact discrete Gaussian and
  Laplace samplers;
* :mod:`~zoprivacy.privacy.exact_noise`: :class:`ExactNoiseSource`, the
  host-side draw passed into a jitted step.
"""

from zoprivacy.privacy.exact_noise import ExactNoiseSource
from zoprivacy.privacy.plan import PlanError, PrivacyPlan, find_plan
from zoprivacy.privacy.randomness import InsecureTestNoiseWarning

__all__ = [
  "ExactNoiseSource",
  "InsecureTestNoiseWarning",
  "PlanError",
  "PrivacyPlan",
  "find_plan",
]
