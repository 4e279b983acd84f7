"""Host-side exact noise for the discrete mechanisms.

The noise of a step does not depend on the data, so it is drawn on the host
*before* the step and passed into the jitted update as the extra argument
``discrete_noise=`` (an ``int32[q]`` array). This keeps the jitted step free
of host callbacks, lets the draw overlap with the previous step's device
work, and works unchanged on a mesh: the noise is a replicated input, added
once after the cross-device sum, identically everywhere.

The draws are exact (Canonne, Kamath, Steinke 2020; see
:mod:`zoprivacy.privacy.discrete_noise`) and keyed: step ``t`` reads a
SHAKE-256 stream keyed by ``(secret, "discrete_noise", t)``, so a step re-run
after a crash gets the same noise and nothing is released twice with fresh
noise. The secret comes from OS entropy unless an insecure test seed was
asked for.
"""

from __future__ import annotations

import numpy as np

from zoprivacy.privacy import plan as plan_lib
from zoprivacy.privacy import randomness

PURPOSE = "discrete_noise"


class ExactNoiseSource:
  """Draws the integer noise of each step of a discrete plan.

  Args:
    plan: a plan whose ``noise_kind`` is 'discrete'.
    secret: 32 secret bytes (e.g. restored from a checkpoint). ``None``
      draws a fresh one from OS entropy, or derives the reproducible test
      secret when the plan's noise source is 'insecure_test_seed' and
      ``insecure_test_noise_seed`` is given.
  """

  def __init__(
    self,
    plan: plan_lib.PrivacyPlan,
    secret: bytes | None = None,
    *,
    insecure_test_noise_seed: int | None = None,
  ):
    if plan.noise_kind != "discrete":
      raise ValueError(
        f"ExactNoiseSource needs a discrete plan, got {plan.mechanism!r}."
      )
    if insecure_test_noise_seed is not None and plan.is_private:
      raise ValueError(
        "This plan promises secret noise from OS entropy; a reproducible "
        "test seed would void it. Build the estimator with the same "
        "insecure_test_noise_seed so that its plan says NOT PRIVATE."
      )
    if secret is None:
      if insecure_test_noise_seed is not None:
        secret = randomness.insecure_test_secret(insecure_test_noise_seed)
      else:
        secret = randomness.new_secret()
    self.secret = randomness.check_secret(secret)
    self.plan = plan

  @property
  def integer_scale(self) -> float:
    """Discrete Gaussian sigma / discrete Laplace scale, in grid units."""
    return self.plan.noise_multiplier * self.plan.grid_points

  def draw(self, step: int) -> np.ndarray:
    """The ``int32[num_queries]`` noise of step ``step``."""
    from zoprivacy.privacy import discrete_noise  # pylint: disable=g-import-not-at-top

    stream = randomness.KeyedStream(self.secret, PURPOSE, int(step))
    size = self.plan.num_queries
    if self.plan.mechanism == "discrete_gaussian":
      values = discrete_noise.discrete_gaussian_noise(
        self.integer_scale, size, stream
      )
    else:
      values = discrete_noise.discrete_laplace_noise(
        self.integer_scale, size, stream
      )
    values = np.asarray(values, np.int64)
    if np.any(np.abs(values) > 2**30):
      raise OverflowError("Integer noise exceeds the int32 range.")
    return values.astype(np.int32)
