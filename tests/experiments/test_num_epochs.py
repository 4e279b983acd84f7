"""``config.num_epochs``: the run's length in epochs, counted in steps once
the training set's size is known, the same count as the library's
``Target(num_epochs=...)``; one length per config; the report gives both."""

import pytest

from configs import default
from experiments.run import (
  cli,
  preflight,
  privacy_config,
  report,
  settings,
)


def _config(**fields):
  c = default.get_config()
  c.update(fields)
  return c


def test_epochs_are_counted_on_the_training_set_and_the_batch():
  c = _config(num_steps=None, num_epochs=3.0)
  typed = settings.Settings.from_config(c)
  bound = typed.for_dataset(1431)
  assert bound.num_steps == 68  # ceil(3 * 1431 / 64)
  assert typed.num_steps is None  # a copy
  assert bound.config_dict()["num_steps"] == 68  # result.json's echo
  assert bound.epochs(68) == 3.0
  # The library's count for the run's privacy value is the same.
  target = bound.privacy.value.target
  assert target.num_steps == 68 and target.num_epochs == 3.0
  assert privacy_config.value(c, 1431).target == target
  # The full batch is one step an epoch.
  c.privacy.sampling = "full_batch"
  assert settings.Settings.from_config(c).for_dataset(1431).num_steps == 3
  # A run given in steps is its own length; its epochs are expected ones.
  steps = settings.Settings.from_config(_config())
  assert steps.for_dataset(1431).num_steps == 4000
  assert steps.for_dataset(1431).epochs(4000) == pytest.approx(178.9, 1e-3)


@pytest.mark.parametrize(
  "fields, needle",
  [
    (dict(num_epochs=2.0), "sets both num_steps=4000 and num_epochs=2.0"),
    (dict(num_steps=None), "num_steps must be an integer >= 1, got None"),
    (dict(num_steps=None, num_epochs=0.0), "num_epochs must be a finite"),
    (
      dict(num_steps=None, num_epochs=float("nan")),
      "num_epochs must be a finite",
    ),
  ],
)
def test_one_well_formed_length_or_one_paragraph(fields, needle):
  with pytest.raises(ValueError, match=needle):
    preflight.check_numbers(_config(**fields))


def test_too_many_epochs_are_refused_once_counted():
  c = _config(num_steps=None, num_epochs=1e5)
  preflight.check_numbers(c)  # not known before the data
  with pytest.raises(ValueError, match=r"\(2,235,938 steps\) is more than"):
    settings.Settings.from_config(c).for_dataset(1431)


def test_a_length_on_the_command_line_replaces_the_files_other_one():
  c = _config(num_epochs=3.0)  # as --config.num_epochs=3 leaves it
  cli.one_length(c, ["run", "--config.num_epochs=3"])
  assert c.num_steps is None and c.num_epochs == 3.0
  c = _config(num_steps=None, num_epochs=3.0)  # a file in epochs
  c.num_steps = 50
  cli.one_length(c, ["run", "--config.num_steps=50"])
  assert c.num_steps == 50 and c.num_epochs is None
  c = _config(num_epochs=3.0)  # both on the command line: refused
  both = ["run", "--config.num_epochs=3", "--config.num_steps=4000"]
  cli.one_length(c, both)
  with pytest.raises(ValueError, match="sets both"):
    preflight.check_numbers(c)


def test_the_budget_message_and_the_report_speak_in_epochs():
  c = _config(num_steps=None, num_epochs=3.0, epsilon_budget=1.0)
  with pytest.raises(ValueError, match="steps of 3 planned epochs"):
    preflight.check_budget_against_target(c, True)
  result = {
    "num_steps": 68,
    "num_epochs": 3.0,
    "num_epochs_source": "set by the config (num_epochs)",
    "train_seconds": 2.0,
    "physical_batch_size": 8,
  }
  assert report._steps_line(result) == "steps: 68 (3 epochs; 2.0 s)"
  physical = report._physical_line(result)
  assert physical.startswith("physical batch: 8 rows at a time (a memory")
  assert report._physical_line(dict(result, physical_batch_size=None)) is None
  counted = report._steps_line(
    {
      "num_steps": 100,
      "num_epochs": 4.47,
      "num_epochs_source": "counted from num_steps",
      "train_seconds": 1.0,
    }
  )
  assert counted == "steps: 100 (~4.47 epochs; 1.0 s)"
