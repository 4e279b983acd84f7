"""A workdir is the run's own: an existing folder is taken only if it is
empty or holds a previous run (of this config, or of another that
``--resume=force`` may take over); anything else is refused in one
paragraph, before anything is written."""

import os
import subprocess
import sys

import pytest

from configs import default
from experiments import tune
from experiments.run import train, workdir
from experiments.tuning import budget, search

ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


def _listing(path):
  return sorted(
    os.path.relpath(os.path.join(d, n), path)
    for d, dirs, files in os.walk(path)
    for n in dirs + files
  )


def test_missing_empty_and_a_run_killed_before_its_config_are_taken(tmp_path):
  workdir.check_own(str(tmp_path / "new"))
  workdir.check_own(str(tmp_path))
  (tmp_path / "private").mkdir()  # the lock comes before config.json
  (tmp_path / "config.json.tmp").write_text("{")
  (tmp_path / "privacy_ledger.json.k3j9x.tmp").write_text("")  # a kill
  workdir.check_own(str(tmp_path))


@pytest.mark.parametrize(
  "files",
  [
    {"notes.txt": "mine"},
    {"bin": None, "etc": None, "home": None, "usr": None, "var": None, "x": ""},
    # A Hugging Face model folder: its config.json is not a run's record.
    {"config.json": '{"model_type": "opt"}', "model.safetensors": ""},
    {"config.json": "not json"},
  ],
)
def test_another_programs_folder_is_refused_and_left_as_it_was(tmp_path, files):
  for name, text in files.items():
    if text is None:
      (tmp_path / name).mkdir()
    else:
      (tmp_path / name).write_text(text)
  before = _listing(tmp_path)
  for kind in ("run", "tuning"):
    with pytest.raises(workdir.WorkdirNotOwnedError) as e:
      workdir.check_own(str(tmp_path), kind)
    message = str(e.value)
    assert "\n" not in message and "new or empty folder" in message
    assert str(tmp_path) in message
  if "notes.txt" in files:
    assert "(notes.txt)" in message
  if "x" in files:
    assert "and 1 more" in message
  assert _listing(tmp_path) == before


def test_a_run_and_a_tuning_cannot_take_each_others_workdir(tmp_path):
  run_dir, tuning_dir = tmp_path / "run", tmp_path / "tune"
  workdir.claim(str(run_dir), {"estimator": "dpzero", "seed": 0})
  workdir.claim(
    str(tuning_dir), {"estimator": "dpzero", "tuning": {"score_noise": 5.0}}
  )
  workdir.check_own(str(run_dir), "run")  # the fingerprint decides next
  workdir.check_own(str(tuning_dir), "tuning")
  with pytest.raises(workdir.WorkdirNotOwnedError, match="holds a tuning"):
    workdir.check_own(str(tuning_dir), "run")
  with pytest.raises(workdir.WorkdirNotOwnedError, match="holds a run, not"):
    workdir.check_own(str(run_dir), "tuning")
  # claim replaces config.json whole (no half-written record after a kill)
  assert sorted(os.listdir(run_dir)) == ["config.json"]


def test_the_library_refuses_before_the_lock_or_the_secret(tmp_path):
  (tmp_path / "data.csv").write_text("1,2\n")
  c = default.get_config()
  c.num_steps, c.workdir = 2, str(tmp_path)
  with pytest.raises(workdir.WorkdirNotOwnedError, match=r"\(data.csv\)"):
    train.train(c, progress=False)
  assert _listing(tmp_path) == ["data.csv"]


def test_the_command_line_refuses_root_before_jax_loads():
  before = sorted(os.listdir("/"))
  out = subprocess.run(
    [
      sys.executable,
      "-c",
      "import atexit, runpy, sys; "
      "atexit.register(lambda: print('jax loaded:', 'jax' in sys.modules)); "
      "runpy.run_module('experiments.run', run_name='__main__')",
      "--config",
      "configs/default.py",
      "--config.workdir=/",
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert out.returncode == 2, out.stderr[-2000:]
  assert "Traceback" not in out.stderr
  assert out.stderr.startswith("error (WorkdirNotOwnedError): workdir '/'")
  assert "jax loaded: False" in out.stdout
  assert sorted(os.listdir("/")) == before


def test_the_tuner_refuses_a_runs_workdir_before_its_secret_folder(tmp_path):
  workdir.claim(str(tmp_path), {"estimator": "dpzero", "seed": 0})
  c = default.get_config()
  c.workdir = str(tmp_path)
  with pytest.raises(workdir.WorkdirNotOwnedError, match="holds a run, not"):
    tune.tune(
      c,
      search.from_flags({"learning_rate": "0.01,0.02"}),
      budget.trial_count("poisson", 2.0),
    )
  assert _listing(tmp_path) == ["config.json"]
