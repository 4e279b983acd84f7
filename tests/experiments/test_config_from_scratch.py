"""A config written from scratch gets configs/default.py's values for what
it leaves out, the same on the command line and in Python, says which, and
runs; what the default cannot give (or an earlier release's field) is
refused in one paragraph."""

import json

import ml_collections
import pytest

from configs import default
from experiments.run import cli, config_defaults, config_fields, train, workdir


def _minimal(**fields):
  c = ml_collections.ConfigDict()
  c.dataset, c.model, c.estimator = "digits", "cnn", "dpzero"
  c.privacy = ml_collections.ConfigDict(
    {"target_epsilon": 2.0, "delta": 1e-5, "expected_batch_size": 64}
  )
  c.update(fields)
  return c


def test_a_minimal_config_gets_every_default_and_names_them():
  mine = _minimal(num_steps=20)
  mine.lock()
  out, filled = config_defaults.complete(mine)
  whole = default.get_config()
  assert sorted(out.keys()) == sorted(whole.keys())
  assert sorted(out.privacy.keys()) == sorted(whole.privacy.keys())
  for key in ("model_kwargs", "estimator_kwargs", "mesh", "privacy"):
    assert out[key].to_dict() == whole[key].to_dict(), key
  assert "privacy.clip" in filled and "mesh" in filled
  assert "num_steps" not in filled and "privacy.delta" not in filled
  assert "clip" not in mine.privacy  # the caller's config is not changed
  # A config from configs/default.py is already complete: nothing added.
  same, none = config_defaults.complete(whole)
  assert same is whole and none == []
  # Left-out fields are typed as the default's: an override still parses.
  out.learning_rate, out.physical_batch_size = 0.1, 8


def test_another_choice_gets_its_own_values_not_the_defaults():
  mine = _minimal(estimator="dp_sgd", model="mlp", num_epochs=2)
  mine.privacy = {"noise_multiplier": 1.0, "delta": 1e-5}
  out, _ = config_defaults.complete(mine)
  assert out.estimator_kwargs.to_dict() == {}  # dp_sgd's registered ones
  assert out.privacy.clip is None  # dp_sgd's own default clip
  assert out.model_kwargs.to_dict() == {}  # the MLP's own sizes
  assert out.privacy.target_epsilon is None  # a set multiplier is the noise
  assert out.num_steps is None and out.num_epochs == 2.0
  assert isinstance(out.num_epochs, float)  # --config.num_epochs=0.5 parses


def test_the_command_line_completes_the_file_as_python_does(tmp_path):
  path = tmp_path / "mine.py"
  path.write_text(
    "import ml_collections\n\n\ndef get_config():\n"
    "  c = ml_collections.ConfigDict()\n"
    "  c.dataset, c.estimator, c.num_steps = 'digits', 'dpzero', 5\n"
    "  c.privacy = ml_collections.ConfigDict({'target_epsilon': 1.0})\n"
    "  return c\n"
  )
  parser = cli._CompletingParser("config", lock_config=False)
  loaded = parser.parse(str(path))
  filled = list(cli.FILLED)
  python, python_filled = config_defaults.complete(
    _minimal(num_steps=5, model=None)
  )
  assert loaded.is_locked and "privacy.delta" in filled
  assert set(loaded.keys()) == set(python.keys())
  assert set(filled) == set(python_filled) | {
    "model",
    "privacy.delta",
    "privacy.expected_batch_size",
  }
  note = config_defaults.note(loaded, filled)
  assert note.startswith(f"note: the config leaves {len(filled)} fields")
  assert "privacy.delta=1e-05" in note


def test_earlier_top_level_privacy_fields_are_refused_with_their_new_place():
  old = ml_collections.ConfigDict(
    {
      "dataset": "digits",
      "estimator": "dpzero",
      "num_steps": 5,
      "target_epsilon": 2.0,
      "delta": 1e-5,
      "expected_batch_size": 64,
    }
  )
  with pytest.raises(config_fields.UnknownFieldError) as e:
    train.train(old, progress=False)
  message = str(e.value)
  for name in ("target_epsilon", "delta", "expected_batch_size"):
    assert f"'{name}' (now privacy.{name}" in message


def test_a_field_the_default_cannot_give_is_named_with_a_config_to_start_from():
  c = _minimal(dataset="digits_logreg", model="linear", num_steps=2)
  with pytest.raises(ValueError) as e:
    train.train(c, progress=False)
  message = str(e.value)
  assert "the config has no field 'l2'" in message
  assert "--config.l2=<value>" in message
  assert "configs/hidden_state_digits_logreg.py sets it" in message


def test_a_minimal_config_in_epochs_runs_stops_and_resumes_the_same_steps(
  tmp_path,
):
  """0.2 epochs of digits' 1,431 training images at 64: 5 steps, whether
  the run goes through or stops after 2 and resumes."""
  c = _minimal(num_epochs=0.2, model="mlp", eval_every=0, checkpoint_every=0)
  c.workdir = str(tmp_path)
  stopped = train.train(c, progress=False, stop_after=2)
  assert stopped["interrupted_at"] == 2
  result = train.train(c, progress=False)
  assert result["num_steps"] == 5 and result["num_epochs"] == 0.2
  assert result["ledger"]["num_steps"] == 5
  assert result["epsilon"] <= 2.0
  assert "privacy.clip" in result["defaults_filled"]
  written = json.loads((tmp_path / "result.json").read_text())
  assert written["num_steps"] == 5 and written["physical_batch_size"] is None


def test_a_workdir_of_an_earlier_release_without_num_epochs_resumes(tmp_path):
  config = default.get_config().to_dict()
  earlier = {k: v for k, v in config.items() if k != "num_epochs"}
  workdir.claim(str(tmp_path), earlier)
  workdir.claim(str(tmp_path), config)  # the same run: no mismatch
  config["num_steps"] = 10
  with pytest.raises(workdir.ConfigMismatchError, match="num_steps: 4000"):
    workdir.claim(str(tmp_path), config)
