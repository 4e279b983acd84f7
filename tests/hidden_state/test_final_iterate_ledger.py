"""The final-iterate epsilon comes from the ledger's record of what ran.

Each ledger segment's plan records the whole Noisy-ZOGD setting; a run
whose segments differ in any parameter of Thm 3.2, or whose steps were
computed twice, reports the ledger's composition epsilon and says why,
never a final-iterate figure."""

import os
import shutil

import pytest
from test_runner_hidden_state import small_config as runner_config

from experiments.run import report, train
from zoprivacy.hidden_state import privacy as privacy_lib
from zoprivacy.privacy.ledger import PrivacyLedger


def small_config(workdir, **changes):
  """The runner tests' small config, in ``workdir``, checkpointed every
  other step."""
  return runner_config(workdir=str(workdir), checkpoint_every=2, **changes)


def _ledger(workdir) -> PrivacyLedger:
  return PrivacyLedger.load(os.path.join(workdir, "privacy_ledger.json"))


def _check_the_record(workdir) -> None:
  """The ledger's plan records every parameter of the theorem, and the
  setting rebuilt from it is the one that ran."""
  (plan,) = _ledger(workdir).plans
  record = dict(plan.analysis)
  for name in (
    "dimension",
    "dataset_size",
    "num_directions",
    "step_size",
    "clip",
    "radius",
    "smoothing",
    "directional_fraction",
    "batch_size",
    "loss_smoothness",
    "loss_lipschitz",
    "loss_strong_convexity",
  ):
    assert name in record, name
  setting = privacy_lib.setting_of_plan(plan)
  assert setting.noise_std == pytest.approx(0.05, rel=1e-12)
  assert setting.step_size == 20.0  # K / M = 20 / (0.5 + l2)
  rebuilt = privacy_lib.composition_plan(setting)
  assert rebuilt.analysis == plan.analysis
  assert rebuilt.noise_multiplier == pytest.approx(plan.noise_multiplier)


def _first_run_then_lose_the_last_checkpoint(workdir):
  first = train.train(small_config(workdir), progress=False)
  assert first["final_iterate"]["num_steps"] == 4
  assert "refused" not in first["final_iterate"]
  _check_the_record(workdir)
  shutil.rmtree(os.path.join(workdir, "checkpoints", "4"))
  return first


@pytest.mark.parametrize(
  "change, difference",
  [
    ({"estimator_kwargs.noise_std": 0.5}, "noise_std 0.05 -> 0.5"),
    ({"learning_rate": 10.0}, "step_size 20 -> 10"),
  ],
)
def test_a_forced_resume_under_another_setting_reports_composition(
  tmp_path, change, difference
):
  """The reproduction: finished, last checkpoint lost, forced resume from
  step 2 under another noise (or another step size alone, which leaves the
  noise multiplier as it was)."""
  _first_run_then_lose_the_last_checkpoint(tmp_path)
  config = small_config(tmp_path, resume="force", **change)
  result = train.train(config, progress=False)
  ledger = _ledger(tmp_path)
  assert ledger.num_steps == 6 and len(ledger.plans) == 2
  # The headline is the composition of what ran, from the ledger alone.
  assert result["epsilon"] == pytest.approx(ledger.epsilon(), rel=1e-12)
  for plan in ledger.plans:
    assert result["epsilon"] >= plan.epsilon(4) * (1 - 1e-9)
  refused = result["final_iterate"]["refused"]
  assert difference in refused and "2 settings" in refused
  text = report.format_report(result)
  assert "hidden state (Thm 3.2)" not in text
  assert "final-iterate epsilon: not reported" in text
  assert "every iterate counted as published" not in text.splitlines()[0]
  if "noise_std" in difference:
    assert "composes the ledger's 2 plans" in text


def test_a_replayed_chain_reports_composition(tmp_path):
  """The same command after the last checkpoint was lost: steps 2..3 run a
  second time, while the first run already published its own final
  iterate; no final-iterate figure covers both."""
  _first_run_then_lose_the_last_checkpoint(tmp_path)
  result = train.train(small_config(tmp_path), progress=False)
  assert _ledger(tmp_path).num_steps == 6
  assert result["epsilon"] == pytest.approx(_ledger(tmp_path).epsilon())
  assert (
    "steps 2..3 were computed more than once"
    in (result["final_iterate"]["refused"])
  )


def test_an_evaluation_published_before_a_resume_is_counted(tmp_path):
  """``eval_every`` is not part of the workdir's fingerprint: a first
  attempt that evaluated step 2 published an intermediate iterate's
  accuracy, whatever the resumed command says."""
  train.train(
    small_config(tmp_path, eval_every=2), stop_after=2, progress=False
  )
  result = train.train(small_config(tmp_path), progress=False)
  assert (
    "steps 2..2, evaluated before a resume"
    in (result["final_iterate"]["refused"])
  )
