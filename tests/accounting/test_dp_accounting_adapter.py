"""The adapter is the only reader of dp_accounting's private members, for
the versions setup.cfg allows; each of its functions agrees with what
dp_accounting's public API gives."""

import ast
import configparser
import math
import pathlib
import re
import types
from importlib import metadata

import dp_accounting
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.pld import privacy_loss_mechanism as plm

from zoprivacy.accounting import dp_accounting_adapter as adapter

REPO = pathlib.Path(__file__).resolve().parents[2]
PRIVATE = {
  "_pld",
  "_contains_non_dp_event",
  "_pmf_remove",
  "_pmf_add",
  "_symmetric",
  "_truncation_bound",
  "_sigma",
  "_inverse_privacy_loss_replace",
  "_create_pld_pmf_from_monotone_privacy_loss",
  "_gamma_truncated_negative_binomial",
}


def _requirement() -> str:
  cfg = configparser.ConfigParser()
  cfg.read(REPO / "setup.cfg")
  (line,) = [
    r for r in cfg["options"]["install_requires"].split("\n") if "dp-acc" in r
  ]
  return line.strip().removeprefix("dp-accounting")


def _version(text: str) -> tuple[int, ...]:
  return tuple(int(x) for x in re.findall(r"\d+", text)[:2])


def test_supported_range_is_setup_cfgs_and_holds_the_installed_version():
  assert adapter.SUPPORTED == _requirement()
  low, high = re.fullmatch(r">=([\d.]+),<([\d.]+)", adapter.SUPPORTED).groups()
  installed = _version(metadata.version("dp-accounting"))
  assert _version(low) <= installed < _version(high)
  # CI's second virtualenv pins the oldest supported version.
  oldest = (REPO / ".ci" / "oldest-constraints.txt").read_text()
  pattern = rf"^dp-accounting=={re.escape(low)}(\.0)*$"
  assert re.search(pattern, oldest, re.M), oldest


def test_every_private_member_is_present_here():
  assert not adapter._missing()  # pylint: disable=protected-access
  adapter.check_supported()


def test_a_missing_member_is_named_with_the_supported_versions(monkeypatch):
  monkeypatch.setattr(adapter, "rdp_privacy_accountant", types.ModuleType("x"))
  with pytest.raises(RuntimeError) as err:
    adapter.check_supported()
  message = str(err.value)
  assert "rdp._gamma_truncated_negative_binomial" in message
  assert metadata.version("dp-accounting") in message
  assert f"dp-accounting{adapter.SUPPORTED}" in message


def test_no_other_module_reads_a_private_member_of_dp_accounting():
  offenders = []
  for root in ("zoprivacy", "experiments", "benchmarks"):
    for path in sorted((REPO / root).rglob("*.py")):
      if path.name == "dp_accounting_adapter.py":
        continue
      tree = ast.parse(path.read_text())
      for node in ast.walk(tree):  # a read is an attribute: obj._pmf_add
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE:
          offenders.append(
            f"{path.relative_to(REPO)}:{node.lineno} {node.attr}"
          )
  assert not offenders, offenders


def test_the_accountants_pld_is_the_accountants_epsilon():
  event = dp_accounting.SelfComposedDpEvent(
    dp_accounting.PoissonSampledDpEvent(
      0.05, dp_accounting.GaussianDpEvent(1.5)
    ),
    50,
  )
  rel = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
  pld = adapter.accountant_pld(event, rel, 1e-3)
  public = dp_accounting.pld.PLDAccountant(rel, 1e-3)
  public.compose(event)
  assert pld.get_epsilon_for_delta(1e-5) == public.get_epsilon(1e-5)
  with pytest.raises(ValueError, match="not supported"):
    adapter.accountant_pld(dp_accounting.NonPrivateDpEvent(), rel, 1e-3)


def test_the_two_directions_make_the_public_epsilon():
  pld = pld_lib.from_gaussian_mechanism(
    1.0, sampling_prob=0.3, value_discretization_interval=1e-3
  )
  remove, add, symmetric = adapter.direction_pmfs(pld)
  assert not symmetric and remove is not add
  both = max(
    remove.get_epsilon_for_delta(1e-4), add.get_epsilon_for_delta(1e-4)
  )
  assert both == pld.get_epsilon_for_delta(1e-4)
  full = pld_lib.from_gaussian_mechanism(
    1.0, value_discretization_interval=1e-3
  )
  assert adapter.direction_pmfs(full)[2]
  # Reassembled from the two directions, each built as a remove pair.
  swapped = adapter.pld_from_remove_pmfs(pld, pld)
  assert swapped.get_epsilon_for_delta(1e-4) == remove.get_epsilon_for_delta(
    1e-4
  )


def test_the_replace_pair_of_the_discrete_gaussian_without_sampling():
  """Unsampled, the REPLACE pair is a shift by 2m: the discrete Gaussian of
  sensitivity 2m under add/remove has the same privacy loss."""
  replace = adapter.monotone_loss_pld(
    adapter.DiscreteGaussianReplaceLoss(
      20.0,
      sensitivity=3,
      sampling_prob=1.0,
      adjacency_type=adapter.AdjacencyType.REPLACE,
    ),
    1e-4,
  )
  shifted = pld_lib.from_discrete_gaussian_mechanism(
    20.0,
    sensitivity=6,
    value_discretization_interval=1e-4,
    use_connect_dots=True,
  )
  assert replace.get_epsilon_for_delta(1e-6) == pytest.approx(
    shifted.get_epsilon_for_delta(1e-6), rel=1e-3
  )
  loss = adapter.DiscreteGaussianReplaceLoss(
    20.0,
    sensitivity=3,
    sampling_prob=0.1,
    adjacency_type=adapter.AdjacencyType.REPLACE,
  )
  for x in (-40, -3, 0, 5, 33):  # the inverse inverts the loss
    assert loss.inverse_privacy_loss(loss.privacy_loss(x)) >= x - 1


def test_the_geometric_tuning_count_has_gamma_one_over_its_mean():
  """Shape 1 is the geometric law on {1, 2, ...}: mean 1 / gamma."""
  gamma = adapter.truncated_negative_binomial_gamma(1.0, 8.0)
  assert gamma == pytest.approx(1 / 8, rel=1e-6)
  assert math.isfinite(adapter.truncated_negative_binomial_gamma(0.5, 3.0))


def test_the_loss_subclass_is_dp_accountings():
  assert issubclass(
    adapter.DiscreteGaussianReplaceLoss, plm.DiscreteGaussianPrivacyLoss
  )
