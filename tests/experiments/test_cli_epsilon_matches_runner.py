"""The accounting command line computes what a run reports.

``python -m zoprivacy.privacy epsilon -s 2 -p 0.044506 -T 300`` headed with
the continuous Gaussian's PLD epsilon, 1.696, while a DP-SGD run at the
same settings reports 1.8651: DP-SGD's default exact noise lives on an
integer lattice, accounted by the sampled Gaussian's RDP bound (with the
device sampler's deviation in delta). The command takes that mechanism
and the sampling rate as a run computes it, from a dataset size and a
batch size.
"""

import re

import pytest

import zoprivacy
from configs import default
from experiments.run import train
from zoprivacy.privacy import __main__ as cli


def _headline(capsys, *args) -> float:
  """The command's first epsilon line (the plan's own figure)."""
  assert cli.main(["epsilon", *args]) == 0
  text = capsys.readouterr().out
  return float(re.search(r"^epsilon\s+([0-9.e+-]+)", text, re.M).group(1))


@pytest.mark.parametrize(
  "estimator, mechanism, runner",
  [
    ("dp_sgd", "vector_discrete_gaussian", 1.8651),
    ("dpzero", "discrete_gaussian", 1.6960),
  ],
)
def test_command_line_gives_the_plan_epsilon_of_a_run(
  capsys, estimator, mechanism, runner
):
  """The figures of the report (300 steps at multiplier 2, batch 64 of
  1438): the library's plan of each estimator agrees with the command's
  headline for its mechanism (printed to 6 digits); the continuous
  Gaussian at ``-p`` does not for DP-SGD."""
  plan = getattr(zoprivacy, estimator)(
    noise_multiplier=2.0, expected_batch_size=64, dataset_size=1438
  ).privacy_plan
  expected = plan.epsilon(300, 1e-5)
  assert expected == pytest.approx(runner, abs=5e-5)
  common = ["-s", "2", "-n", "1438", "-b", "64", "-T", "300"]
  assert plan.mechanism.name == mechanism
  headline = _headline(capsys, *common, "--mechanism", mechanism)
  assert headline == pytest.approx(expected, rel=1e-5)
  gaussian = _headline(capsys, "-s", "2", "-p", "0.044506", "-T", "300")
  assert gaussian == pytest.approx(1.69603, abs=1e-5)


def test_command_line_matches_a_real_run(capsys, tmp_path):
  """A two-step run of the default config (DPZero's exact discrete
  Gaussian on digits) at multiplier 2, and the command at the run's own
  batch and dataset sizes."""
  config = default.get_config()
  config.update(
    num_steps=2,
    eval_every=0,
    checkpoint_every=0,
  )
  config.privacy.update(target_epsilon=None, noise_multiplier=2.0)
  result = train.train(config, progress=False)
  plan = result["privacy_plan"]
  args = [
    "-s",
    "2",
    "-n",
    str(plan["dataset_size"]),
    "-b",
    str(plan["expected_batch_size"]),
    "-T",
    "2",
  ]
  assert _headline(
    capsys, *args, "--mechanism", "discrete_gaussian"
  ) == pytest.approx(result["epsilon"], rel=1e-5)
