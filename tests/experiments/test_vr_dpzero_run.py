"""docs/extending.md's stateful estimator, by its recipe: VR-DPZero is
registered (the registry and the JAX-free manifest), planned and calibrated
as DPZero's one scalar per step, and trained through the runner by
``--config.estimator=vr_dpzero``: interrupted and resumed it is bit for bit
the uninterrupted run (its reference point and estimate are checkpointed
and restored), and every epsilon is the ledger's."""

import inspect
import json
import re
import shutil
import warnings

import jax
import pytest
from run_outputs import run_outputs

import zoprivacy
from configs import default
from experiments.run import checkpointing, cli, train
from zoprivacy import estimator_manifest
from zoprivacy.estimators import registry
from zoprivacy.estimators.base import EstimatorState
from zoprivacy.estimators.vr_dpzero import ReferenceState
from zoprivacy.privacy import PrivacyLedger, PrivacyPlan

STEPS, STOP = 8, 3


def test_the_docs_module_is_the_shipped_one():
  """Every line of docs/extending.md's stateful example is the module's."""
  with open("docs/extending.md") as f:
    page = f.read()
  section = page.split("## Example: an estimator with state of its own")[1]
  shown = re.search(r"```python\n(.*?)```", section, re.S).group(1)
  module = inspect.getmodule(
    ReferenceState
  )  # the package's name is the factory
  source = set(inspect.getsource(module).splitlines())
  lines = [line for line in shown.splitlines() if line.strip()]
  assert len(lines) > 40
  assert [line for line in lines if line not in source] == []


def test_registered_planned_and_calibrated_as_one_scalar_per_step():
  spec = registry.get("vr_dpzero")
  assert spec.private and spec.factory is zoprivacy.vr_dpzero
  declared = estimator_manifest.declarations()["vr_dpzero"]
  assert declared.private and declared.sampling == ("poisson",)
  assert dict(declared.defaults)["reference_weight"] == 0.9
  sampling = zoprivacy.Poisson(dataset_size=1437, expected_batch_size=64)
  target = zoprivacy.Target(epsilon=2.0, delta=1e-5, num_steps=500)
  privacy = zoprivacy.Privacy(clip=0.1, sampling=sampling, target=target)
  est = zoprivacy.vr_dpzero(privacy)  # calibrated on its own plan
  plan = est.privacy_plan
  assert plan == spec.plan_template(est.privacy, {})
  assert plan.num_queries == 1 and plan.clip == 0.1
  # The reference costs no release: the plan is DPZero's, sigma too.
  assert plan == zoprivacy.dpzero(est.privacy).privacy_plan
  assert est.privacy.noise_multiplier == (
    zoprivacy.dpzero(privacy).privacy.noise_multiplier
  )
  assert (
    plan.epsilon(500)
    <= 2.0
    < plan.with_noise_multiplier(0.99 * plan.noise_multiplier).epsilon(500)
  )


def _config(workdir, monkeypatch):
  """The default config switched by ``--config.estimator=vr_dpzero``
  through the command line's own checks and late overrides; a small MLP,
  reproducible (test) noise so that two runs can be compared."""
  monkeypatch.setitem(cli._LATE, "estimator_kwargs", {})  # pylint: disable=protected-access
  monkeypatch.setitem(cli._LATE, "fields", {})  # pylint: disable=protected-access
  config = default.get_config()
  config.estimator = "vr_dpzero"
  config.model, config.model_kwargs, config.num_steps = "mlp", {}, STEPS
  config.update(
    dict(eval_every=0, checkpoint_every=STEPS, workdir=str(workdir))
  )
  config.update(dict(insecure_test_noise=True, check_per_example=False))
  cli.check_declared(config)  # what the command line checks before JAX
  return cli.apply_late_overrides(config, argv_had_estimator=True)


def _forget_reference(monkeypatch):
  """Restores every checkpoint with the estimator's method state as
  ``init`` made it (what a checkpoint without the slot would resume from),
  after the checkpoint's own digest checks."""
  restore = checkpointing.Checkpointer.restore
  is_state = lambda x: isinstance(x, EstimatorState)

  def forgetting(self, step, template):
    state, ledger = restore(self, step, template)
    found = []

    def fresh(restored, initial):
      if is_state(restored):
        assert isinstance(initial.method, ReferenceState)
        found.append(restored)
        return restored._replace(method=initial.method)
      return restored

    state = jax.tree.map(fresh, state, template, is_leaf=is_state)
    assert len(found) == 1
    return state, ledger

  monkeypatch.setattr(checkpointing.Checkpointer, "restore", forgetting)


@pytest.mark.filterwarnings(
  "ignore::zoprivacy.privacy.InsecureTestNoiseWarning"
)
def test_trains_by_override_resumes_bit_for_bit_and_reports_the_ledger(
  tmp_path, monkeypatch
):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    full = train.train(_config(tmp_path / "full", monkeypatch), progress=False)
    config = _config(tmp_path / "resumed", monkeypatch)
    part = train.train(config, progress=False, stop_after=STOP)
    shutil.copytree(tmp_path / "resumed", tmp_path / "forgot")
    resumed = train.train(config, progress=False)
  assert full["estimator"] == "vr_dpzero" and part["interrupted_at"] == STOP
  assert run_outputs(tmp_path / "resumed") == run_outputs(tmp_path / "full")
  assert resumed["params_sha256"] == full["params_sha256"]

  with open(tmp_path / "resumed" / "result.json") as f:
    saved = json.load(f)
  plan = PrivacyPlan.from_dict(saved["privacy_plan"])
  ledger = PrivacyLedger.load(tmp_path / "resumed" / "privacy_ledger.json")
  assert plan.num_queries == 1 and ledger.num_steps == STEPS
  assert (
    plan.epsilon(STEPS)
    == ledger.epsilon()
    == saved["epsilon"]
    == resumed["epsilon"]
  )
  assert 0 < resumed["epsilon"] <= 2.0  # the default target, calibrated

  # The test has teeth: the same resume with the reference forgotten
  # (reset to init's) moves the parameters elsewhere.
  _forget_reference(monkeypatch)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    forgot = train.train(
      _config(tmp_path / "forgot", monkeypatch), progress=False
    )
  assert forgot["params_sha256"] != full["params_sha256"]
