"""``zoprivacy.Target(num_epochs=E)``: the steps are counted from the
privacy value's sampling (``ceil(E * n / B)``, exactly), calibration and
every estimator read them, and a length given twice (or epochs with no
sampling to count on) is refused in one paragraph."""

import pytest

import zoprivacy
from zoprivacy.privacy import calibration
from zoprivacy.privacy import target as target_lib

DIGITS = zoprivacy.Poisson(dataset_size=1431, expected_batch_size=64)


@pytest.mark.parametrize(
  "epochs, n, b, steps",
  [
    (3, 1431, 64, 68),  # 67.08 -> 68
    (1, 640, 64, 10),  # exact: no step added
    (0.1, 640, 64, 1),  # 0.1 as written, not the double above it
    (0.3, 1000, 100, 3),
    (2.5, 100, 100, 3),
    (1e-6, 100, 100, 1),  # at least one step
  ],
)
def test_epoch_steps(epochs, n, b, steps):
  assert target_lib.epoch_steps(epochs, n, b) == steps


def test_a_value_counts_the_steps_of_its_epochs_on_its_sampling():
  target = zoprivacy.Target(epsilon=2.0, delta=1e-5, num_epochs=3)
  assert target.num_steps is None
  privacy = zoprivacy.Privacy(clip=1.0, sampling=DIGITS, target=target)
  assert privacy.target.num_steps == 68 and privacy.target.num_epochs == 3
  assert "over 68 steps (3 epochs)" in privacy.describe()
  # Another sampling counts again; the full batch is one step an epoch.
  other = privacy.replace(sampling=zoprivacy.FullBatch(500))
  assert other.target.num_steps == 3


def test_calibration_is_the_calibration_for_the_counted_steps():
  by_epochs = zoprivacy.Privacy(
    sampling=DIGITS, target=zoprivacy.Target(2.0, 1e-5, num_epochs=3)
  )
  by_steps = zoprivacy.Privacy(
    sampling=DIGITS, target=zoprivacy.Target(2.0, 1e-5, num_steps=68)
  )
  a = zoprivacy.dpzero(by_epochs).privacy_plan
  b = zoprivacy.dpzero(by_steps).privacy_plan
  assert a.noise_multiplier == b.noise_multiplier
  assert a.epsilon(68, 1e-5) <= 2.0 < a.epsilon(80, 1e-5)
  # A target given to calibrate() is counted on the value's sampling too.
  late = zoprivacy.Privacy(sampling=DIGITS).calibrate(
    zoprivacy.Target(2.0, 1e-5, num_epochs=3), estimator=zoprivacy.dpzero
  )
  assert late.target.num_steps == 68
  assert late.noise_multiplier == a.noise_multiplier


@pytest.mark.parametrize(
  "kwargs, needle",
  [
    (dict(num_steps=10, num_epochs=2), "num_steps or num_epochs, not both"),
    ({}, "num_steps=T"),
    (dict(num_epochs=0), "num_epochs must be a positive"),
    (dict(num_epochs=float("inf")), "num_epochs must be a positive"),
  ],
)
def test_a_bad_length_is_refused(kwargs, needle):
  with pytest.raises((TypeError, ValueError), match=needle):
    zoprivacy.Target(epsilon=2.0, delta=1e-5, **kwargs)


def test_epochs_without_a_sampling_are_refused():
  with pytest.raises(zoprivacy.privacy.value.PrivacyValueError) as e:
    zoprivacy.Privacy(target=zoprivacy.Target(2.0, 1e-5, num_epochs=1))
  assert "counts its steps from the value's sampling" in str(e.value)


def test_a_plan_cannot_count_epochs():
  """A plan holds a sampling probability, not the dataset size and batch
  an epoch is counted on: calibrating a plan for epochs is refused."""
  plan = zoprivacy.Privacy(noise_multiplier=1.0, sampling=DIGITS).plan()
  with pytest.raises(ValueError, match="which a plan does not hold"):
    calibration.calibrate(plan, zoprivacy.Target(2.0, 1e-5, num_epochs=3))
