"""A metric computed on records of the private pool is never a test metric:
``eval_split="validation"`` names it ``private_validation_*``, and the
report's first line and ``result.json`` say "not private, not accounted".
The tuner, which reports a released model's test accuracy, refuses it."""

import json

import ml_collections
import pytest
from fashion_files import write_fashion

from configs import default
from experiments import tune
from experiments.run import metrics, report, settings, train
from experiments.tuning import budget, search


def _config(tmp_path, **fields):
  c = default.get_config()
  c.dataset = "fashion_mnist_public"
  c.data_dir = str(tmp_path)
  c.model_kwargs = ml_collections.ConfigDict({"features": (2, 4)})
  c.estimator_kwargs.direction_prng = "rbg"  # compiles fast on CPU
  c.privacy.target_epsilon = None  # no calibration: a set multiplier
  c.privacy.noise_multiplier = 1.0
  c.privacy.expected_batch_size = 8
  c.num_steps = 2
  c.eval_every = 0
  c.checkpoint_every = 0
  c.workdir = str(tmp_path / "run")
  c.update(fields)
  return c


def test_validation_on_private_records_is_named_and_labelled(tmp_path):
  write_fashion(tmp_path, 120, 20)
  c = _config(tmp_path, eval_split="validation", validation_size=30)
  result = train.train(c, progress=False)
  assert result["headline_metric"] == "private_validation_accuracy"
  assert "test_accuracy" not in result
  assert all("test_accuracy" not in row for row in result["history"])
  note = result["evaluation_privacy"]
  assert note.startswith("not private, not accounted: the private validation")
  assert "30 records held out of the private training pool" in note
  stored = json.loads((tmp_path / "run" / "result.json").read_text())
  assert stored["evaluation_privacy"] == note
  text = report.format_report(result)
  first, *rest = text.splitlines()
  assert first.startswith("WARNING: not private, not accounted")
  assert "test accuracy" not in text
  assert any(
    line.startswith(
      "private validation accuracy (not private, not accounted): "
    )
    for line in rest
  )


def test_the_test_split_and_the_public_proxy_are_not_labelled():
  config = default.get_config()
  config.eval_split = "validation"
  typed = settings.Settings.from_config
  assert metrics.evaluates_private_records(typed(config))
  config.public_proxy = True  # evaluates on public data
  assert not metrics.evaluates_private_records(typed(config))
  assert not metrics.evaluates_private_records(typed(default.get_config()))
  base = {
    "estimator": "mezo",
    "dataset": "digits",
    "test_accuracy": 0.86,
    "metric_names": ["test_accuracy"],
    "num_steps": 10,
    "train_seconds": 1.0,
    "delta": None,
    "epsilon": float("inf"),
    "private": False,
  }
  assert report.format_report(base).startswith("estimator: mezo")
  labelled = {
    **base,
    "private_validation_accuracy": 0.5,
    "metric_names": ["private_validation_accuracy"],
    "evaluation_privacy": "not private, not accounted: the figure",
  }
  # a non-private run too: the first line names the private records
  assert report.format_report(labelled).startswith(
    "WARNING: not private, not accounted: the figure."
  )


def test_the_tuner_refuses_an_evaluation_on_private_records(tmp_path):
  c = _config(tmp_path, eval_split="validation")
  space = search.from_flags({"learning_rate": "0.01,0.02"})
  with pytest.raises(ValueError, match="eval_split at 'test'"):
    tune.tune(c, space, budget.trial_count("poisson", 3.0))
  assert not (tmp_path / "run").exists()
