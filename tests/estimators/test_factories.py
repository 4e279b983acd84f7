"""Estimator factories are plain explicit functions: every argument is in
the signature, and the registry reads its flags and defaults from it."""

import ast
import inspect
import pathlib

import zoprivacy
from zoprivacy.estimators import ESTIMATORS, registry

ROOT = pathlib.Path(zoprivacy.__file__).parent


def _called_names(path: pathlib.Path):
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
      yield node.func.id


def test_no_locals_forwarding_or_signature_rewriting():
  for path in sorted(ROOT.rglob("*.py")):
    assert "locals" not in set(_called_names(path)), path
    assert "__signature__" not in path.read_text(), path


def test_every_factory_is_keyword_only_and_wrapped_only_by_the_entry():
  """The one wrapper is the registry's privacy entry: it keeps the
  factory's signature, name and docstring, and wraps a plain function;
  a private factory takes its privacy value first, the rest by keyword."""
  for name in registry.names():
    factory = registry.get(name).factory
    plain = factory.__wrapped__
    assert not hasattr(plain, "__wrapped__"), name
    assert inspect.signature(factory) == inspect.signature(plain), name
    assert (factory.__name__, factory.__doc__) == (
      plain.__name__,
      plain.__doc__,
    ), name
    params = inspect.signature(factory).parameters.values()
    kinds = {p.kind for p in params}
    if name == "noisy_zogd" or registry.get(name).private:
      # the setting, or the privacy value: the one positional argument
      kinds -= {inspect.Parameter.POSITIONAL_OR_KEYWORD}
    assert kinds == {inspect.Parameter.KEYWORD_ONLY}, name


def test_flags_and_defaults_come_from_the_signature():
  for name in registry.names():
    spec = registry.get(name)
    params = inspect.signature(spec.factory).parameters
    assert spec.private == (
      "privacy" in params or "noise_multiplier" in params
    ), name
    assert spec.needs_num_steps == ("num_steps" in params), name
    assert spec.needs_learning_rate == ("learning_rate" in params), name
    assert spec.takes_setting == ("setting" in params), name
    for key, value in spec.defaults:
      if key in params:
        assert params[key].default == value, (name, key)
      else:  # only a setting's hyperparameters are declared apart
        assert spec.takes_setting and key in dict(spec.setting_defaults)
  assert dict(registry.get("dpzero").defaults)["smoothing"] == 1e-3
  assert "privacy" not in dict(registry.get("dpzero").defaults)
  assert not registry.get("mezo").private


def test_registered_noisy_zogd_is_the_exported_chain():
  assert ESTIMATORS["noisy_zogd"] is zoprivacy.noisy_zogd_chain
  for name, factory in ESTIMATORS.items():
    if name != "noisy_zogd":
      assert getattr(zoprivacy, name) is factory, name


def test_private_factories_take_the_privacy_value_and_no_privacy_keyword():
  legacy = {"clip", "noise_multiplier", "expected_batch_size", "dataset_size"}
  for name in registry.names():
    spec = registry.get(name)
    if spec.private and not spec.takes_setting:
      params = set(inspect.signature(spec.factory).parameters)
      assert "privacy" in params and not legacy & params, name
