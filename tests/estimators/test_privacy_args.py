"""The privacy arguments as one typed value (:mod:`zoprivacy.estimators.privacy_args`)."""

import dataclasses
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
