"""The plan's calibration raises the multiplier from its search's start to
the first raise whose own epsilon meets the target: found in a few
evaluations, the same raise as trying them in turn."""

import math

import numpy as np
import pytest

from zoprivacy.privacy import calibration


class _Plan:
  """A stand-in plan whose epsilon is a falling function of its noise."""

  def __init__(self, curve, noise_multiplier=1.0, calls=None):
    self.curve, self.noise_multiplier = curve, noise_multiplier
    self.calls = [] if calls is None else calls

  def replace(self, noise_multiplier, delta):
    del delta
    return _Plan(self.curve, noise_multiplier, self.calls)

  def epsilon(self, num_steps):
    del num_steps
    self.calls.append(self.noise_multiplier)
    return self.curve(self.noise_multiplier)


def _in_turn(curve, sigma, target, rtol, max_raises):
  for _ in range(max_raises):
    if curve(sigma) <= target:
      return sigma
    sigma *= 1.0 + rtol
  return None


@pytest.mark.parametrize("seed", range(20))
def test_the_raise_is_the_first_in_turn_in_a_few_evaluations(seed):
  rng = np.random.default_rng(seed)
  power = rng.uniform(0.5, 3.0)  # epsilon ~ sigma^-power, plus a kink
  scale, kink = rng.uniform(0.5, 20.0), rng.uniform(1.0, 1.5)
  curve = lambda s: scale * s**-power * (kink if s < 1.1 else 1.0)
  target = float(curve(1.0) / rng.uniform(1.0, 1.6))
  plan = _Plan(curve)
  found = calibration._first_raise_meeting(
    plan, 1.0, 1e-5, target, 100, 2e-3, 400
  )
  expected = _in_turn(curve, 1.0, target, 2e-3, 400)
  if expected is None:
    assert found is None
    return
  assert found.noise_multiplier == expected  # bit for bit
  assert curve(found.noise_multiplier) <= target
  raises = math.log(expected) / math.log1p(2e-3)
  assert len(plan.calls) <= 8 + 2 * math.log2(raises + 1), len(plan.calls)
