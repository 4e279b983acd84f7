"""The command line does what the docs say, and user errors are one paragraph."""

import json
import subprocess
import sys

import config_overrides
import pytest

from configs import default
from experiments.run import cli, estimator_switch, preflight, train, workdir
from zoprivacy import estimator_manifest
from zoprivacy.estimators import registry


def _run(*args, check=False):
  return subprocess.run(
    [
      sys.executable,
      "-m",
      "experiments.run",
      "--config",
      "configs/default.py",
      "--config.num_steps=5",
      "--config.eval_every=0",
      *args,
    ],
    capture_output=True,
    text=True,
    check=check,
    timeout=300,
  )


def test_overrides_none_noise_multiplier_estimator_switch_and_optimizer():
  out = _run(
    "--config.privacy.target_epsilon=None",
    "--config.privacy.noise_multiplier=2.5",
    "--config.optimizer=adamw",
    "--config.schedule=cosine_decay_schedule",
    check=True,
  ).stdout
  assert "multiplier 2.5" in out and "set by noise_multiplier" in out
  out = _run("--config.estimator=mezo", check=True).stdout
  assert "estimator: mezo" in out and "privacy.clip" not in out
  # Every mezo hyperparameter is reset to its signature default: none is
  # carried over from dpzero's config (a carried one would be named).
  assert "carried over from the config" not in out


@pytest.mark.parametrize(
  "args,needle",
  [
    (("--config.estimator=dpzer0",), "did you mean 'dpzero'"),
    pytest.param(
      ("--config.optimizer=adamm",), "Unknown optimizer", marks=pytest.mark.slow
    ),
    (
      ("--config.estimator_kwargs.clipp=1",),
      "does not take 'clipp' (did you mean",
    ),
    (("--config.nosie=1",), "unknown config field"),
    (
      ("--config.privacy.clp=0.5",),
      "config.privacy.clp (did you mean config.privacy.clip?)",
    ),
    (
      ("--config.epsilon_budget=0.5", "--config.num_steps=4000"),
      "privacy.target_epsilon to at most",
    ),
    pytest.param(
      (
        "--config.privacy.noise_multiplier=1",
        "--config.epsilon_budget=0.5",
        "--config.num_steps=4000",
      ),
      "steps but only",
      marks=pytest.mark.slow,
    ),
  ],
)
def test_user_errors_are_one_paragraph_without_traceback(args, needle):
  r = _run(*args)
  assert r.returncode == 2
  assert needle.lower() in r.stderr.lower()
  assert "Traceback" not in r.stderr
  assert "--debug" in r.stderr


def test_a_changed_config_is_refused_on_resume_and_the_ledger_is_untouched(
  tmp_path,
):
  c = default.get_config()
  c.num_steps, c.eval_every, c.checkpoint_every = 40, 0, 20
  c.workdir = str(tmp_path)
  train.train(c, progress=False, stop_after=20)
  ckpt_ledger = (
    tmp_path / "checkpoints" / "20" / "manifest" / "metadata"
  ).read_text()
  c.learning_rate = 0.5
  with pytest.raises(
    workdir.ConfigMismatchError, match="learning_rate: 0.02 -> 0.5"
  ):
    train.train(c, progress=False)
  assert (
    tmp_path / "checkpoints" / "20" / "manifest" / "metadata"
  ).read_text() == ckpt_ledger
  recorded = json.loads((tmp_path / "config.json").read_text())
  assert recorded["config"]["learning_rate"] == 0.02
  c.resume = "force"
  assert train.train(c, progress=False)["num_steps"] == 40
  # A finished run writes only what workdir.check_own takes back as its own.
  names = {p.name for p in tmp_path.iterdir()}
  assert "result.json" in names and names <= workdir.ENTRIES["run"], names
  workdir.check_own(str(tmp_path))
  # result.json says whether the score is within noise of chance
  # (experiments.run.chance: the majority class of digits' test labels).
  written = json.loads((tmp_path / "result.json").read_text())
  assert written["chance"]["tested"] and written["chance"]["test_size"] > 300
  assert written["at_chance"] == (written["chance"]["p_value"] > 0.01)


def _error(check, *args):
  try:
    check(*args)
  except (KeyError, ValueError) as e:
    return f"{type(e).__name__}: {e}"
  return None


@pytest.mark.parametrize(
  "fields,kwargs,switched",
  [
    ({"estimator": "dpzer0"}, {}, True),
    ({"target_epsilon": None}, {}, False),
    ({}, {"clipp": 1}, False),
    ({"optimizer": "adamm"}, {}, False),
    ({"sampling": "shuffle"}, {}, False),
    ({"estimator": "mezo"}, {"clipp": 1, "clip": 1.0}, True),
    ({"estimator": "dp_sgd", "optimizer": "adamm"}, {}, True),
    ({"estimator": "pazo_s", "sampling": "shuffle"}, {}, True),
    ({"estimator": "dp_zo", "target_epsilon": None}, {"smoothing": 1}, True),
    ({}, {"zz": 1, "aa": 2}, False),
    ({"estimator": "noisy_zogd", "sampling": "shuffle"}, {}, True),
    ({"estimator": "gep", "public": "stratified4"}, {}, True),
    ({"estimator": "pazo_m"}, {}, True),
  ],
)
def test_the_manifest_checks_give_the_live_checks_message(
  fields, kwargs, switched, monkeypatch
):
  """What the command line refuses before JAX loads (from the manifest), the
  run's checks (from the registry) refuse with the same message."""
  monkeypatch.setitem(cli._LATE, "estimator_kwargs", kwargs)  # pylint: disable=protected-access
  monkeypatch.setitem(cli._LATE, "switched", switched)  # pylint: disable=protected-access
  config = default.get_config()
  with config.unlocked():
    config_overrides.apply(config, fields)
    config.estimator_kwargs.update(kwargs)
  if fields.get("optimizer") and estimator_manifest.optax_names() is None:
    pytest.skip("the manifest lists another optax version's names")
  fast = _error(cli.check_declared, config)
  assert fast is not None  # each case is refused before JAX loads

  def live_checks(c):  # what cli.apply_late_overrides, then the run, do
    if switched:
      estimator_switch.switch_estimator_kwargs(
        c, registry.get(c.estimator), kwargs
      )
    preflight.validate(c)

  assert fast == _error(live_checks, config)


@pytest.mark.parametrize("name,switch", [("dpzero", False), ("mezo", True)])
def test_naming_the_files_own_estimator_is_no_switch(name, switch, monkeypatch):
  """``--config.estimator=<the config file's own>`` keeps the file's
  ``estimator_kwargs``; only another estimator resets them."""
  late = {"none": [], "estimator_kwargs": {}, "fields": {}}
  monkeypatch.setattr(cli, "_LATE", dict(late, estimator=None, switched=False))
  kept = cli.split_argv(["run.py", f"--config.estimator={name}"])
  assert kept == ["run.py"]
  config = default.get_config()
  with config.unlocked(), config.estimator_kwargs.unlocked():
    config.privacy.clip = 0.123  # the file's own value
  config = cli.apply_late_overrides(config)
  assert config.estimator == name
  assert cli._LATE["switched"] is switch  # pylint: disable=protected-access
  kept_clip = config.privacy.clip == 0.123
  assert kept_clip is not switch
