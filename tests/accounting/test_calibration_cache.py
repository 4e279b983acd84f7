"""The optional calibration cache: off by default, exact when on, and never
able to make a calibrated plan miss its target."""

import glob
import json
import os

import pytest

from zoprivacy import Target
from zoprivacy.privacy import PrivacyPlan, calibration

ENV = calibration.CACHE_VAR
TARGET = Target(epsilon=2.0, delta=1e-5, num_steps=40)


def _counting_search(value=1.25):
  calls = []

  def search():
    calls.append(1)
    return value

  return search, calls


def _plan():
  return PrivacyPlan.build(
    mechanism="gaussian",
    noise_multiplier=1.0,
    clip=1.0,
    expected_batch_size=50,
    dataset_size=1000,
  )


def test_off_by_default_reads_and_writes_nothing(monkeypatch, tmp_path):
  monkeypatch.delenv(ENV, raising=False)
  monkeypatch.chdir(tmp_path)
  search, calls = _counting_search()
  for _ in range(2):
    assert calibration._cached_start({"a": 1}, search) == 1.25
  assert len(calls) == 2
  assert os.listdir(tmp_path) == []


def test_on_stores_once_per_inputs(monkeypatch, tmp_path):
  monkeypatch.setenv(ENV, str(tmp_path))
  search, calls = _counting_search()
  for _ in range(3):
    assert calibration._cached_start({"a": 1}, search) == 1.25
  assert len(calls) == 1
  calibration._cached_start({"a": 2}, search)
  calibration._cached_start({"a": 1, "b": 1}, search)
  assert len(calls) == 3
  assert len(glob.glob(str(tmp_path / "*.json"))) == 3
  assert not glob.glob(str(tmp_path / "*.tmp"))


@pytest.mark.parametrize(
  "content",
  ["{not json", '{"key": "other", "noise_multiplier": 9.0}', "[1, 2]"],
)
def test_corrupt_or_foreign_entries_are_recomputed(
  monkeypatch, tmp_path, content
):
  monkeypatch.setenv(ENV, str(tmp_path))
  search, calls = _counting_search()
  calibration._cached_start({"a": 1}, search)
  (path,) = glob.glob(str(tmp_path / "*.json"))
  with open(path, "w") as f:
    f.write(content)
  assert calibration._cached_start({"a": 1}, search) == 1.25
  assert len(calls) == 2


@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), float("inf")])
def test_invalid_stored_values_are_recomputed(monkeypatch, tmp_path, value):
  monkeypatch.setenv(ENV, str(tmp_path))
  search, calls = _counting_search()
  calibration._cached_start({"a": 1}, search)
  (path,) = glob.glob(str(tmp_path / "*.json"))
  with open(path) as f:
    record = json.load(f)
  record["noise_multiplier"] = value
  with open(path, "w") as f:
    json.dump(record, f)
  assert calibration._cached_start({"a": 1}, search) == 1.25
  assert len(calls) == 2


def test_cached_calibration_equals_the_uncached_one(monkeypatch, tmp_path):
  monkeypatch.delenv(ENV, raising=False)
  fresh = calibration.calibrate(_plan(), TARGET)
  monkeypatch.setenv(ENV, str(tmp_path))
  first = calibration.calibrate(_plan(), TARGET)  # computes and stores
  second = calibration.calibrate(_plan(), TARGET)  # reads
  assert len(glob.glob(str(tmp_path / "*.json"))) == 1
  assert fresh.noise_multiplier == first.noise_multiplier
  assert second.noise_multiplier == first.noise_multiplier


def _calibrate_then_store(tmp_path, factor):
  """Calibrates once (storing the search's start), then overwrites the
  stored multiplier with ``factor`` times the calibrated one."""
  honest = calibration.calibrate(_plan(), TARGET)
  (path,) = glob.glob(str(tmp_path / "*.json"))
  with open(path) as f:
    record = json.load(f)
  record["noise_multiplier"] = factor * honest.noise_multiplier
  with open(path, "w") as f:
    json.dump(record, f)
  return honest


def test_a_tampered_entry_cannot_make_a_plan_miss_its_target(
  monkeypatch, tmp_path
):
  """An attacker (or a stale file) writes a smaller multiplier into the
  cache: calibration still checks the plan's own epsilon and raises it."""
  monkeypatch.setenv(ENV, str(tmp_path))
  honest = _calibrate_then_store(tmp_path, 0.99)
  tampered = calibration.calibrate(_plan(), TARGET)
  assert tampered.epsilon(40) <= 2.0
  assert tampered.noise_multiplier >= 0.999 * honest.noise_multiplier


def test_the_stored_start_is_used(monkeypatch, tmp_path):
  """A larger stored multiplier already meets the target, so it is returned
  as is: the entry is read (at a utility cost only)."""
  monkeypatch.setenv(ENV, str(tmp_path))
  honest = _calibrate_then_store(tmp_path, 1.5)
  assert calibration.calibrate(
    _plan(), TARGET
  ).noise_multiplier == pytest.approx(1.5 * honest.noise_multiplier, rel=1e-12)
