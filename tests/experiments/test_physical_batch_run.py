"""``config.physical_batch_size`` through the runner: a logical batch run
in physical chunks is the same run (one release and one ledger entry per
step), the padded batch holds whole chunks, and a bad value is refused in
one paragraph before anything is built."""

import numpy as np
import pytest

from configs import default
from experiments.run import config_fields, placement, preflight, settings, train
from experiments.run import workdir as workdir_lib
from zoprivacy import estimator_manifest
from zoprivacy.core import sharding
from zoprivacy.data import sampling


def _config(**overrides):
  c = default.get_config()
  c.model, c.model_kwargs = "mlp", {}
  c.num_steps, c.eval_every, c.checkpoint_every = 2, 0, 0
  c.insecure_test_noise = True  # reproducible: the two runs compare
  c.update(overrides)
  return c


def test_a_chunked_run_is_the_same_run(tmp_path):
  """DPZero with exact noise at expected batch 64 (padded to 96 rows) in
  chunks of 16: the same parameters after 2 steps as the whole batch at
  once, the same epsilon, one ledger entry per step."""
  whole = train.train(_config(), progress=False)
  chunked = train.train(
    _config(physical_batch_size=16, workdir=str(tmp_path)), progress=False
  )
  assert chunked["params_sha256"] == whole["params_sha256"]
  assert chunked["epsilon"] == whole["epsilon"]
  ledger = (tmp_path / "privacy_ledger.json").read_text()
  assert ledger.count('"step"') == 2 or '"num_steps": 2' in ledger


def test_the_padded_batch_holds_whole_chunks():
  place = placement.Placement(sharding.make_mesh(None), 24)
  batch = sampling.IndexBatch(np.arange(50, dtype=np.int32), np.ones(50, bool))
  padded = place.index_batch(batch)
  assert len(padded.mask) == 72 and padded.mask.sum() == 50
  # a physical batch larger than the batch: one chunk, no extra rows
  wide = placement.Placement(sharding.make_mesh(None), 256)
  assert len(wide.index_batch(batch).mask) == 50


def test_a_chunk_not_split_evenly_over_the_devices_is_refused(monkeypatch):
  monkeypatch.setattr(sharding, "batch_multiple", lambda mesh: 8)
  with pytest.raises(ValueError, match="multiple of the 8 devices"):
    placement.Placement.of(_typed(physical_batch_size=12))
  placement.Placement.of(_typed(physical_batch_size=16))


def _typed(**fields):
  return settings.Settings.from_config(_config(**fields))


@pytest.mark.parametrize(
  "value, needle",
  [
    (0, "whole number of rows >= 1"),
    (2.5, "whole number of rows >= 1"),
    (True, "whole number of rows >= 1"),
  ],
)
def test_a_bad_physical_batch_size_is_refused(value, needle):
  c = _config()
  c.physical_batch_size = None  # the placeholder's type is int
  with c.ignore_type():
    c.physical_batch_size = value
  with pytest.raises(ValueError, match=needle):
    preflight.check_numbers(c)


def test_a_misspelled_or_misplaced_physical_batch_size_is_refused():
  c = _config()
  c.physical_batch_sise = 8
  declaration = estimator_manifest.get(c.estimator)
  with pytest.raises(config_fields.UnknownFieldError) as e:
    config_fields.check(c, declaration.config_fields)
  assert "did you mean 'physical_batch_size'" in str(e.value)
  c = _config()
  c.estimator_kwargs.physical_batch_size = 8
  with pytest.raises(ValueError, match="config.physical_batch_size"):
    preflight.check_numbers(c)


def test_the_physical_batch_is_not_part_of_the_run_fingerprint():
  """Resuming a run with another chunk size is the same run."""
  a = _config().to_dict()
  b = _config(physical_batch_size=8).to_dict()
  assert workdir_lib.fingerprint(a)[0] == workdir_lib.fingerprint(b)[0]
