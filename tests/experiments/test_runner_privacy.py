"""The runner's privacy: secret randomness, one plan, honest reports."""

import json
import os
import shutil

import config_overrides
import numpy as np
import pytest
from run_outputs import run_outputs

from configs import default
from experiments import tasks
from experiments.run import checkpointing, privacy_config, report, train
from zoprivacy import privacy
from zoprivacy.estimators import registry
from zoprivacy.first_order import per_example_check
from zoprivacy.privacy import PrivacyPlan


def _config(workdir=None, **overrides):
  c = default.get_config()
  c.num_steps = 60
  c.eval_every = 0
  c.checkpoint_every = 30
  c.workdir = str(workdir) if workdir else ""
  return config_overrides.apply(c, overrides)


def _checkpoint_secret(workdir, step):
  ckpt = checkpointing.Checkpointer(os.path.join(workdir, "checkpoints"))
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top

  raw = ckpt._manager.restore(
    step,
    args=ocp.args.Composite(  # pylint: disable=protected-access
      state=ocp.args.StandardRestore()
    ),
  )["state"]
  ckpt.close()
  return raw


def test_two_runs_of_one_config_draw_different_noise_and_batches(tmp_path):
  a = train.train(_config(tmp_path / "a"), progress=False)
  b = train.train(_config(tmp_path / "b"), progress=False)
  assert a["params_sha256"] != b["params_sha256"]
  assert a["epsilon"] == b["epsilon"]


def test_nothing_but_the_checkpoint_and_private_folder_holds_the_secrets(
  tmp_path,
):
  train.train(_config(tmp_path), progress=False)
  stored = _checkpoint_secret(str(tmp_path), 60)
  leaves = [np.asarray(v) for v in stored.values()]
  secret = [x for x in leaves if x.dtype == np.uint8 and x.shape == (32,)]
  rbg = [x for x in leaves if x.dtype == np.uint32 and x.shape == (4,)]
  assert len(secret) == 1 and len(rbg) == 1  # the test has teeth
  needles = []
  for arr in secret + rbg:
    raw = arr.tobytes()
    needles += [raw, raw.hex().encode(), raw.hex().upper().encode()]
    needles += [
      str(int(w)).encode() for w in arr.view(np.uint32) if int(w) > 10**6
    ]
    needles.append(json.dumps(arr.tolist()).encode())
  private = tmp_path / "private"  # the run's secret, owner-only
  assert (private / "run_secret").read_bytes() == secret[0].tobytes()
  assert (private.stat().st_mode & 0o777) == 0o700
  assert ((private / "run_secret").stat().st_mode & 0o777) == 0o600
  for root, _, files in os.walk(tmp_path):
    if {"checkpoints", "private"} & set(root.split(os.sep)):
      continue
    for name in files:
      data = open(os.path.join(root, name), "rb").read()
      for needle in needles:
        assert needle not in data, (name, needle[:16])


def test_resuming_a_copy_of_a_workdir_regenerates_the_same_noise(tmp_path):
  c = _config(tmp_path / "a")
  train.train(c, progress=False, stop_after=30)
  shutil.copytree(tmp_path / "a", tmp_path / "b")
  a = train.train(_config(tmp_path / "a"), progress=False)
  b = train.train(_config(tmp_path / "b"), progress=False)
  assert a["params_sha256"] == b["params_sha256"]


def test_a_checkpoint_without_its_secret_is_refused(tmp_path):
  c = _config(tmp_path)
  train.train(c, progress=False, stop_after=30)
  path = tmp_path / "checkpoints" / "30" / "manifest" / "metadata"
  manifest = json.loads(path.read_text())
  manifest["num_leaves"] -= 1  # as written by a state without the secret
  path.write_text(json.dumps(manifest))
  with pytest.raises(checkpointing.CorruptCheckpointError, match="secret"):
    train.train(_config(tmp_path), progress=False)


def test_insecure_test_noise_with_a_budget_needs_test_run():
  with pytest.raises(ValueError, match="not private"):
    train.train(
      _config(insecure_test_noise=True, epsilon_budget=5.0),
      progress=False,
    )
  r = train.train(
    _config(
      insecure_test_noise=True,
      epsilon_budget=5.0,
      test_run=True,
      num_steps=10,
    ),
    progress=False,
  )
  assert not r["private"] and "NOT PRIVATE" in report.format_report(r)


def test_replace_one_target_is_met_and_named(tmp_path):
  c = _config(num_steps=100)
  c.privacy.neighboring = "replace_one"
  r = train.train(c, progress=False)
  assert r["epsilon"] <= 2.0
  assert r["privacy_plan"]["neighboring"] == "replace_one"
  assert "replace-one" in report.format_report(r)
  # Exact noise covers replace-one (no floating-point fallback).
  assert r["privacy_plan"]["mechanism"] == "discrete_gaussian"
  assert "floating-point" not in r["privacy"]


def test_noise_multiplier_override_wins_over_the_target():
  r = train.train(_config(noise_multiplier=3.0, num_steps=10), progress=False)
  assert r["noise_multiplier"] == 3.0
  assert "set by noise_multiplier" in report.format_report(r)


def _registry_config(name, workdir):
  c = _config(
    workdir,
    num_steps=12,
    checkpoint_every=6,
    dataset="digits_public",
    public="stratified4",
    public_batch_size=16,
    insecure_test_noise=True,
    check_per_example=False,
  )
  c.estimator = name
  # The registered defaults that are privacy settings (Noisy-ZOGD's
  # setting registers its clip) are the privacy block's, not kwargs.
  c.estimator_kwargs = {
    k: v
    for k, v in registry.get(name).defaults
    if k not in privacy_config.MOVED_KWARGS
  }
  c.privacy.clip = None  # the estimator's own default
  # An estimator that runs only under some settings (a task whose loss
  # declares what its analysis assumes, its own sampling) declares them.
  config_overrides.apply(c, dict(registry.get(name).run_settings))
  if registry.get(name).public_data is None:
    c.public = ""  # a task without a public split refuses one
  if name in ("pazo_p", "pazo_s"):
    c.estimator_kwargs["num_public_batches"] = 2
  if name == "gep":
    c.estimator_kwargs["num_bases"] = 2
  # A set multiplier (no calibration) keeps this test fast; calibration is
  # covered by the replace-one and main-command tests.
  c.privacy.target_epsilon = None
  # Full-batch steps have no amplification by sampling: more noise for an
  # epsilon in the same range.
  c.privacy.noise_multiplier = (
    (3.0 if c.privacy.sampling == "poisson" else 10.0)
    if registry.get(name).private
    else None
  )
  return c


# The first-order baselines, MeZO and two of the PAZO variants resume in CI's
# slow step; one estimator of each other kind resumes in the default suite
# (VR-DPZero in test_vr_dpzero_run.py, through the command line's override;
# DPGD-0th's exact vector release as DP-SGD's).
SLOW_TO_RESUME = (
  "dope_sgd",
  "dpgd_zeroth",
  "dpmd",
  "gep",
  "mezo",
  "pazo_p",
  "pazo_s",
  "vr_dpzero",
)


@pytest.mark.parametrize(
  "name",
  [
    pytest.param(n, marks=pytest.mark.slow if n in SLOW_TO_RESUME else ())
    for n in sorted(registry.names())
  ],
)
def test_every_estimator_resumes_exactly_and_reports_one_epsilon(
  name, tmp_path
):
  """Interrupted at a random step and resumed == uninterrupted (bit for bit);
  plan epsilon == ledger epsilon == result.json epsilon == printed."""
  stop = int(
    np.random.default_rng(sorted(registry.names()).index(name)).integers(1, 12)
  )
  full = train.train(_registry_config(name, tmp_path / "full"), progress=False)
  part = train.train(
    _registry_config(name, tmp_path / "resumed"),
    progress=False,
    stop_after=stop,
  )
  assert part["interrupted_at"] == stop
  r = train.train(_registry_config(name, tmp_path / "resumed"), progress=False)
  assert r["num_steps"] == 12
  assert r["params_sha256"] == full["params_sha256"], f"stopped at {stop}"
  # Parameters, ledger file and metrics rows, bit for bit.
  assert run_outputs(tmp_path / "resumed") == run_outputs(tmp_path / "full")
  with open(tmp_path / "resumed" / "result.json") as f:
    saved = json.load(f)
  if not registry.get(name).private:
    assert saved["epsilon"] in ("inf", float("inf"))
    return

  plan = PrivacyPlan.from_dict(saved["privacy_plan"])
  ledger = privacy.PrivacyLedger.load(
    tmp_path / "resumed" / "privacy_ledger.json"
  )
  assert (
    plan.epsilon(12) == ledger.epsilon() == saved["epsilon"] == r["epsilon"]
  )
  assert f"{r['epsilon']:.4f}" in report.format_report(r)
  assert 0 < r["epsilon"] < 10


def test_runner_refuses_a_loss_that_mixes_examples(monkeypatch):
  """Checked once at start-up, on synthetic inputs, before any private step."""

  digits = tasks.TASKS["digits"]

  def batch_normalized_digits(config):
    task = digits(config)
    inner = task.batched_loss
    task.batched_loss = lambda p, f, b: (lambda l: l / (l.mean() + 1.0))(
      inner(p, f, b)
    )
    return task

  monkeypatch.setitem(tasks.TASKS, "bn_digits", batch_normalized_digits)
  with pytest.raises(per_example_check.CrossExampleDependenceError):
    train.train(_config(dataset="bn_digits"), progress=False)
