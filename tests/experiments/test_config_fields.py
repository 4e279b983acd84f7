"""Config files are checked like overrides: a field no part of the run reads
is refused, with the field it was meant to be, before JAX loads.

Also: fields that a task or an estimator declares are settable on the
command line though the config file lacks them (``--config.public=...``),
and an estimator that needs public data names the field and its choices.
"""

import glob
import importlib
import os
import subprocess
import sys
import textwrap

import pytest

from configs import default
from experiments.run import cli, config_fields, preflight
from zoprivacy import estimator_manifest

ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
WATCH_JAX = (
  "import atexit, runpy, sys; "
  "atexit.register(lambda: print('jax loaded:', 'jax' in sys.modules)); "
  "sys.argv[0] = 'run.py'; "
  "runpy.run_module('experiments.run', run_name='__main__', alter_sys=True)"
)


def _estimators():
  return {
    d.name: d.config_fields for d in estimator_manifest.declarations().values()
  }


def _check(config):
  declaration = estimator_manifest.get(config.estimator)
  config_fields.check(config, declaration.config_fields, _estimators())


def test_misspelled_fields_in_a_config_file_are_refused_before_jax(tmp_path):
  path = tmp_path / "typo.py"
  path.write_text(
    textwrap.dedent(
      """
      from configs import default


      def get_config():
        c = default.get_config()
        c.num_step = 100
        c.learning_rat = 0.05
        return c
      """
    )
  )
  r = subprocess.run(
    [sys.executable, "-c", WATCH_JAX, "--config", str(path)],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert r.returncode == 2, r.stderr[-2000:]
  message = " ".join(r.stderr.split())
  assert "'num_step' (did you mean 'num_steps'?)" in message
  assert "'learning_rat' (did you mean 'learning_rate'?)" in message
  assert "Traceback" not in r.stderr
  assert "jax loaded: False" in r.stdout


@pytest.mark.parametrize(
  "fields,needle",
  [
    ({"num_step": 100}, "did you mean 'num_steps'"),
    (
      {"eval_split": "validation"},
      "read by the tasks 'cifar10', 'fashion_mnist_public'",
    ),
    ({"l2": 0.5}, "and the estimator 'noisy_zogd'; this run has dataset"),
    ({"nosie": 1.0}, "unknown config field 'nosie'"),
  ],
)
def test_a_field_the_run_does_not_read_is_refused(fields, needle):
  c = default.get_config()
  c.update(fields)
  with pytest.raises(config_fields.UnknownFieldError) as e:
    _check(c)
  assert needle in str(e.value)


def test_a_misspelled_key_of_a_fixed_block_is_refused():
  c = default.get_config()
  c.mesh.dat = 2
  with pytest.raises(config_fields.UnknownFieldError, match="'mesh.data'"):
    _check(c)


def test_fields_the_task_or_the_estimator_declares_are_accepted():
  c = default.get_config()
  c.update({"public": "stratified4", "public_fraction": 0.04})
  _check(c)  # image tasks read the public split
  c = default.get_config()
  c.update({"dataset": "digits_logreg", "estimator": "noisy_zogd", "l2": 0.5})
  c.hidden_state = {"report": True}
  _check(c)


def test_an_unknown_dataset_names_the_close_one():
  c = default.get_config()
  c.dataset = "digit"
  with pytest.raises(ValueError, match="did you mean 'digits'"):
    _check(c)


def test_every_shipped_config_reads_every_field_it_sets():
  for path in sorted(glob.glob(os.path.join(ROOT, "configs", "*.py"))):
    module = importlib.import_module(f"configs.{os.path.basename(path)[:-3]}")
    if hasattr(module, "get_config"):
      config = module.get_config()
      if "estimator" in config:
        _check(config)
        preflight.check_spec(config, estimator_manifest.get(config.estimator))


@pytest.mark.parametrize(
  "estimator,needle",
  [
    ("pazo_m", "set config.public to one of 'imbalanced4', 'stratified4'"),
    ("gep", "e.g. --config.public=stratified4"),
  ],
)
def test_an_estimator_needing_public_data_names_the_field(estimator, needle):
  c = default.get_config()
  c.estimator = estimator
  with pytest.raises(ValueError, match=needle):
    preflight.check_spec(c, estimator_manifest.get(estimator))
  c.public = "stratified5"
  with pytest.raises(ValueError, match="not a public split of the task"):
    preflight.check_spec(c, estimator_manifest.get(estimator))
  c.public = "stratified4"
  preflight.check_spec(c, estimator_manifest.get(estimator))


def test_noisy_zogd_by_override_names_every_setting_it_needs():
  c = default.get_config()
  c.estimator = "noisy_zogd"
  with pytest.raises(ValueError) as e:
    preflight.check_spec(c, estimator_manifest.get("noisy_zogd"))
  for flag in (
    "dataset=digits_logreg",
    "l2=0.5",
    "privacy.sampling=full_batch",
  ):
    assert f"--config.{flag}" in str(e.value)


def test_overrides_of_declared_fields_are_added_typed_and_checked(
  monkeypatch,
):
  monkeypatch.setitem(cli._LATE, "fields", {})  # pylint: disable=protected-access
  kept = cli.split_argv(
    [
      "run.py",
      "--config=configs/default.py",
      "--config.public=stratified4",
      "--config.hidden_state.report=False",
      "--config.num_steps=3",
    ]
  )
  assert kept == [
    "run.py",
    "--config=configs/default.py",
    "--config.num_steps=3",
  ]
  c = default.get_config()
  cli._apply_fields(c)  # pylint: disable=protected-access
  assert c.public == "stratified4" and c.hidden_state.report is False
  c = default.get_config()
  c.public_size = 100
  monkeypatch.setitem(cli._LATE, "fields", {"public_size": "0.5"})  # pylint: disable=protected-access
  with pytest.raises(ValueError, match="does not match the type"):
    cli._apply_fields(c)  # pylint: disable=protected-access
