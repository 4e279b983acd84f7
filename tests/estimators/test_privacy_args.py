"""The privacy arguments as one typed value (:mod:`zoprivacy.estimators.privacy_args`)."""

import dataclasses
import functools
import inspect

import pytest

from zoprivacy.estimators import privatization, registry
from zoprivacy.estimators.privacy_args import PrivacyArgs


def test_fields_are_the_keyword_arguments_of_privacy_spec():
  """One source of truth: the value holds exactly ``privacy_spec``'s
  keyword arguments, with its defaults."""
  spec = inspect.signature(privatization.privacy_spec).parameters
  fields = {f.name: f for f in dataclasses.fields(PrivacyArgs)}
  assert list(fields) == list(spec)
  for name, p in spec.items():
    default = fields[name].default
    if p.default is inspect.Parameter.empty:
      assert default is dataclasses.MISSING, name
    else:
      assert default == p.default, name


def test_the_value_is_frozen_with_privacy_specs_defaults():
  args = PrivacyArgs(clip=2.0, noise_multiplier=1.5, expected_batch_size=8.0)
  assert args.mechanism == "gaussian" and args.noise == "exact"
  assert args.num_queries == 1 and args.insecure_test_noise_seed is None
  with pytest.raises(dataclasses.FrozenInstanceError):
    args.clip = 3.0
  assert args.replace(clip=3.0).clip == 3.0 and args.clip == 2.0


def test_privatization_is_privacy_specs():
  kwargs = dict(
    clip=1.0,
    noise_multiplier=1.2,
    expected_batch_size=16.0,
    dataset_size=1000,
    num_queries=2,
    neighboring="replace_one",
    noise="float",
    insecure_test_noise_seed=0,
  )
  got = PrivacyArgs(**kwargs).privatization()
  want = privatization.privacy_spec(**kwargs)
  assert got.plan == want.plan
  assert got.insecure_test_noise_seed == 0


def test_missing_required_privacy_argument_is_refused():
  with pytest.raises(TypeError, match="noise_multiplier"):
    PrivacyArgs(clip=1.0, expected_batch_size=8.0)


@pytest.mark.parametrize("name", ["dpzero", "dp_zo", "pazo_m", "dp_sgd"])
def test_factories_keep_their_keyword_signatures(name):
  """The public factories still take every privacy argument by keyword."""
  takes = inspect.signature(registry.get(name).factory).parameters
  for arg in ("clip", "noise_multiplier", "expected_batch_size", "noise"):
    assert takes[arg].kind is inspect.Parameter.KEYWORD_ONLY


# Arguments every private registration is built with below (plus its own).
_BASE = dict(noise_multiplier=1.3, expected_batch_size=8, dataset_size=200)
_OWN = {
  "dpmd": dict(num_steps=10),
  "pazo_s": dict(learning_rate=0.1),
  "gep": dict(num_bases=2),
}
_VARIANTS = [
  {},
  dict(noise="float"),
  dict(noise="secure_mode", neighboring="replace_one"),
  dict(insecure_test_noise_seed=3, clip=0.5),
]
_DECLARED = [
  n
  for n in registry.names()
  if registry.get(n).private and not registry.get(n).takes_setting
]


def _applicable(spec, variant):
  takes = spec.parameters
  return {k: v for k, v in variant.items() if k in takes}


@pytest.mark.parametrize("name", _DECLARED)
def test_plan_template_is_the_plan_the_factory_builds(name):
  """Calibration reads the plan from the registered privatization instead
  of building a probe estimator: for every private estimator and a spread
  of privacy arguments it is the plan the factory itself builds."""
  spec = registry.get(name)
  assert spec.privatize is not None, f"{name} declares no privatize"
  for variant in _VARIANTS:
    kwargs = dict(_BASE, **_OWN.get(name, {}), **_applicable(spec, variant))
    if name == "pazo_s":
      kwargs.update(num_public_batches=3, extra_candidate=False)
    want = spec.factory(**kwargs).privacy_plan
    assert spec.plan_template(kwargs) == want, (name, variant)
  if "per_example_clipping" in spec.parameters:
    kwargs = dict(_BASE, **_OWN.get(name, {}), per_example_clipping="ghost")
    assert spec.plan_template(kwargs) == spec.factory(**kwargs).privacy_plan


def test_plan_template_builds_nothing_for_a_registered_factory(monkeypatch):
  spec = registry.get("dpzero")
  built = []
  monkeypatch.setattr(
    registry,
    "_REGISTRY",
    dict(
      registry._REGISTRY,
      dpzero=dataclasses.replace(spec, factory=_counting(spec.factory, built)),
    ),
  )
  plan = registry.get("dpzero").plan_template(_BASE)
  assert built == [] and plan.noise_multiplier == 1.3 and plan.is_noised


def _counting(factory, built):
  @functools.wraps(factory)
  def counted(**kwargs):
    built.append(kwargs)
    return factory(**kwargs)

  return counted
