"""The one privacy value: construction checks, the plan every factory builds
from it, calibration on the estimator's own plan, and the keyword form of
earlier releases kept by one shim."""

import dataclasses
import functools
import inspect
import warnings

import pytest

import zoprivacy
from zoprivacy.estimators import registry
from zoprivacy.privacy import value as value_lib

SAMPLING = zoprivacy.Poisson(dataset_size=200, expected_batch_size=8)
BASE = zoprivacy.Privacy(noise_multiplier=1.3, sampling=SAMPLING)
_OWN = {
  "dpmd": dict(num_steps=10),
  "pazo_s": dict(
    learning_rate=0.1, num_public_batches=3, extra_candidate=False
  ),
  "gep": dict(num_bases=2),
}
_VARIANTS = [
  {},
  dict(noise=zoprivacy.Float()),
  dict(noise=zoprivacy.SecureMode(), neighboring="replace_one"),
  dict(noise=zoprivacy.TestNoise(3), clip=0.5),
]
_DECLARED = [
  n
  for n in registry.names()
  if registry.get(n).private and not registry.get(n).takes_setting
]


@pytest.mark.parametrize("name", _DECLARED)
def test_every_private_factory_takes_the_value_first(name):
  params = list(
    inspect.signature(registry.get(name).factory).parameters.values()
  )
  assert params[0].name == "privacy"
  for p in params[1:]:
    assert p.kind is inspect.Parameter.KEYWORD_ONLY
    assert p.name not in ("clip", "noise_multiplier", "expected_batch_size")


@pytest.mark.parametrize("name", _DECLARED)
def test_plan_template_is_the_plan_the_factory_builds(name):
  """Calibration reads the plan from the registered privatization instead
  of building a probe estimator: for every private estimator and a spread
  of privacy values it is the plan the factory itself builds."""
  spec = registry.get(name)
  assert spec.privatize is not None, f"{name} declares no privatize"
  own = _OWN.get(name, {})
  for variant in _VARIANTS:
    privacy = BASE.replace(**variant)
    want = spec.factory(privacy, **own).privacy_plan
    assert spec.plan_template(privacy, own) == want, (name, variant)
  if "per_example_clipping" in spec.parameters:
    own = dict(own, per_example_clipping="ghost")
    want = spec.factory(BASE, **own).privacy_plan
    assert spec.plan_template(BASE, own) == want


def test_plan_template_builds_nothing_for_a_registered_factory(monkeypatch):
  spec = registry.get("dpzero")
  built = []
  counted = _counting(spec.factory, built)
  monkeypatch.setattr(
    registry,
    "_REGISTRY",
    dict(registry._REGISTRY, dpzero=dataclasses.replace(spec, factory=counted)),
  )
  plan = registry.get("dpzero").plan_template(BASE, {})
  assert built == [] and plan.noise_multiplier == 1.3 and plan.is_noised


def _counting(factory, built):
  @functools.wraps(factory)
  def counted(*args, **kwargs):
    built.append(kwargs)
    return factory(*args, **kwargs)

  return counted


def test_each_estimator_calibrates_on_its_own_plan():
  """One target, two estimators: DP-SGD's exact vector noise is accounted
  otherwise than DPZero's scalar noise, so each gets its own multiplier,
  and each plan meets the target."""
  target = zoprivacy.Target(epsilon=1.0, delta=1e-5, num_steps=50)
  privacy = zoprivacy.Privacy(sampling=SAMPLING, target=target)
  plans = [
    f(privacy).privacy_plan for f in (zoprivacy.dpzero, zoprivacy.dp_sgd)
  ]
  assert plans[0].noise_multiplier != plans[1].noise_multiplier
  for plan in plans:
    assert plan.delta == 1e-5 and 0.99 < plan.epsilon(50) <= 1.0
  calibrated = privacy.calibrate(estimator=zoprivacy.dpzero)
  assert calibrated.noise_multiplier == plans[0].noise_multiplier
  assert calibrated.target == target
  with pytest.raises(value_lib.PrivacyValueError, match="another estimator"):
    zoprivacy.dp_sgd(calibrated)  # dpzero's multiplier misses dp_sgd's target


@pytest.mark.parametrize(
  "kwargs,match",
  [
    (dict(clp=1.0), "did you mean 'clip'"),
    (dict(noise="float"), "zoprivacy.Exact"),
    (dict(noise_multiplier=-1.0), "positive"),
    (dict(sampling=(64, 1000)), "zoprivacy.Poisson"),
    (dict(target=(2.0, 1e-5, 10)), "zoprivacy.Target"),
  ],
)
def test_a_bad_value_is_refused_in_one_paragraph(kwargs, match):
  with pytest.raises((TypeError, ValueError), match=match):
    zoprivacy.Privacy(**kwargs)
  with pytest.raises(TypeError, match="keyword arguments only"):
    zoprivacy.Privacy(1.0)


def test_fixed_size_batches_are_accounted_replace_one_or_refused():
  shuffled = value_lib.batch_selection.BatchSelection("shuffle", 100, 10)
  with pytest.raises(value_lib.PrivacyValueError, match="Shuffled"):
    zoprivacy.Privacy(sampling=shuffled)
  fixed = zoprivacy.WithoutReplacement(dataset_size=100, batch_size=10)
  with pytest.raises(value_lib.PrivacyValueError, match="replace_one"):
    zoprivacy.Privacy(sampling=fixed)
  with pytest.raises(value_lib.PrivacyValueError, match="accounted under"):
    zoprivacy.dpzero(
      zoprivacy.Privacy(
        noise_multiplier=1.0, sampling=fixed, neighboring="replace_one"
      )
    )


def test_the_keyword_form_is_one_shim_that_warns_and_assumes_its_sampling():
  with pytest.warns(DeprecationWarning, match="one privacy value"):
    old = zoprivacy.dpzero(
      clip=1.0, noise_multiplier=1.3, expected_batch_size=8, dataset_size=200
    )
  assumed = zoprivacy.dpzero(BASE.replace(assume_sampling=True)).privacy_plan
  assert old.privacy_plan == assumed and assumed.sampling_assumed
  # The assumption changes no release: the noise is keyed as before.
  new = zoprivacy.dpzero(BASE).privacy_plan
  assert assumed.fingerprint() == new.fingerprint() and assumed != new
  assert "sampling_assumed" not in new.to_dict()
  assert type(new).from_dict(assumed.to_dict()) == assumed
  with pytest.raises(TypeError, match="noise=zoprivacy.Float"):
    with warnings.catch_warnings():
      warnings.simplefilter("ignore", DeprecationWarning)
      zoprivacy.dpzero(
        noise_multiplier=1.0, expected_batch_size=8, exact_noise=False
      )
  with pytest.raises(TypeError, match="once"):
    zoprivacy.dpzero(BASE, clip=2.0)
  with pytest.raises(TypeError, match="Target"):
    zoprivacy.dpzero(BASE, target_epsilon=2.0)


def test_an_uncalibrated_value_without_a_target_is_refused():
  with pytest.raises(ValueError, match="no noise_multiplier"):
    zoprivacy.dpzero(zoprivacy.Privacy(sampling=SAMPLING))
