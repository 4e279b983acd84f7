"""Faults never lose a run: crashes and full disks mid-write, damaged files.

A write that dies midway (an exception in the writer, ENOSPC) must leave the
previous ledger / checkpoint intact and readable; a truncated or damaged file
must raise a clear error, never be silently reset or re-seeded.
"""

import errno
import os

import jax
import jax.numpy as jnp
import pytest

from configs import default
from experiments.run import checkpointing, train
from experiments.run import metrics as metrics_lib
from zoprivacy.privacy import PrivacyPlan
from zoprivacy.privacy.ledger import CorruptLedgerError, PrivacyLedger

DELTA = 1e-5


def _ledger(num_steps):
  ledger = PrivacyLedger(delta=DELTA)
  ledger.record(
    PrivacyPlan.build(
      mechanism="gaussian",
      noise_multiplier=2.0,
      clip=1.0,
      expected_batch_size=100,
      dataset_size=10_000,
    ),
    num_steps,
  )
  return ledger


def _disk_full(*args, **kwargs):
  raise OSError(errno.ENOSPC, "No space left on device")


def test_ledger_save_is_atomic_under_a_full_disk(tmp_path, monkeypatch):
  path = tmp_path / "privacy_ledger.json"
  _ledger(3).save(path)
  before = path.read_text()
  monkeypatch.setattr(os, "fsync", _disk_full)
  with pytest.raises(OSError) as info:
    _ledger(4).save(path)
  assert info.value.errno == errno.ENOSPC
  monkeypatch.undo()
  assert path.read_text() == before
  assert PrivacyLedger.load(path).num_steps == 3
  assert sorted(os.listdir(tmp_path)) == ["privacy_ledger.json"]


def test_ledger_save_killed_mid_write_keeps_the_previous_file(
  tmp_path, monkeypatch
):
  path = tmp_path / "privacy_ledger.json"
  _ledger(3).save(path)
  before = path.read_text()

  def crash(self):
    raise KeyboardInterrupt  # A BaseException, like a signal mid-write.

  monkeypatch.setattr(PrivacyLedger, "to_json", crash)
  with pytest.raises(KeyboardInterrupt):
    _ledger(4).save(path)
  monkeypatch.undo()
  assert path.read_text() == before
  assert sorted(os.listdir(tmp_path)) == ["privacy_ledger.json"]
  _ledger(5).save(path)
  assert PrivacyLedger.load(path).num_steps == 5


@pytest.mark.parametrize("cut", [0, 1, 40, -2])
def test_a_truncated_ledger_raises_instead_of_resetting(tmp_path, cut):
  path = tmp_path / "privacy_ledger.json"
  _ledger(3).save(path)
  text = path.read_text()
  path.write_text(text[:cut])
  with pytest.raises(CorruptLedgerError, match="truncated or damaged"):
    PrivacyLedger.load(path)


def _state(x):
  return {"w": jnp.full((4,), x, jnp.float32), "key": jax.random.key(0)}


def test_checkpoint_write_failing_midway_keeps_the_previous_one(
  tmp_path, monkeypatch
):
  """The disk fills up after the arrays are written, at the final rename of
  orbax's temporary directory: the error surfaces (ENOSPC), the half-written
  step is never taken for a checkpoint, the previous one restores intact and
  a later save succeeds."""
  ckpt = checkpointing.Checkpointer(str(tmp_path / "ckpt"))
  ckpt.save(1, _state(1.0), _ledger(1).to_dict())
  renames = []

  def full_disk_rename(src, dst, *args, **kwargs):
    renames.append(dst)
    _disk_full()

  monkeypatch.setattr(os, "rename", full_disk_rename)
  with pytest.raises(OSError) as info:
    ckpt.save(2, _state(2.0), _ledger(2).to_dict())
  monkeypatch.undo()
  assert info.value.errno == errno.ENOSPC
  assert renames  # the failure really happened mid-write
  ckpt.close()
  ckpt = checkpointing.Checkpointer(str(tmp_path / "ckpt"))
  assert ckpt.latest_step() == 1
  state, ledger = ckpt.restore(1, _state(0.0))
  assert float(state["w"][0]) == 1.0
  assert PrivacyLedger.from_dict(ledger).num_steps == 1
  ckpt.save(2, _state(2.0), _ledger(2).to_dict())
  assert ckpt.latest_step() == 2
  state, ledger = ckpt.restore(2, _state(0.0))
  assert float(state["w"][0]) == 2.0
  ckpt.close()


def test_a_truncated_checkpoint_raises_corrupt_checkpoint_error(tmp_path):
  ckpt = checkpointing.Checkpointer(str(tmp_path / "ckpt"))
  ckpt.save(1, _state(1.0), _ledger(1).to_dict())
  ckpt.close()
  step_dir = tmp_path / "ckpt" / "1"
  files = [
    os.path.join(d, f)
    for d, _, fs in os.walk(step_dir)
    for f in fs
    if os.path.getsize(os.path.join(d, f)) > 0
  ]
  for f in files:  # Truncate every non-empty file (a torn copy).
    with open(f, "r+b") as fh:
      fh.truncate(os.path.getsize(f) // 2)
  ckpt = checkpointing.Checkpointer(str(tmp_path / "ckpt"))
  with pytest.raises(checkpointing.CorruptCheckpointError):
    ckpt.restore(1, _state(0.0))
  ckpt.close()


def test_the_ledger_is_persisted_before_every_file_derived_from_a_step(
  tmp_path, monkeypatch
):
  """Each metrics row, checkpoint and result.json is preceded by a durable
  ledger write that already records the steps it reports."""

  events = []
  real_save = PrivacyLedger.save
  real_ckpt_save = checkpointing.Checkpointer.save
  real_write = metrics_lib.MetricsWriter.write

  def ledger_save(self, path):
    real_save(self, path)
    events.append(("ledger", self.num_steps))

  def ckpt_save(self, step, state, ledger):
    events.append(("checkpoint", step))
    real_ckpt_save(self, step, state, ledger)

  def metrics_write(self, row):
    events.append(("metrics", row["step"]))
    real_write(self, row)

  monkeypatch.setattr(PrivacyLedger, "save", ledger_save)
  monkeypatch.setattr(checkpointing.Checkpointer, "save", ckpt_save)
  monkeypatch.setattr(metrics_lib.MetricsWriter, "write", metrics_write)
  c = default.get_config()
  c.dataset = "digits"
  c.estimator = "dpzero"
  c.num_steps = 20
  c.eval_every = 5
  c.checkpoint_every = 10
  c.workdir = str(tmp_path)
  train.train(c, progress=False)
  derived = [i for i, (kind, _) in enumerate(events) if kind != "ledger"]
  assert len(derived) >= 4
  for i in derived:
    kind, step = events[i]
    assert events[i - 1][0] == "ledger", events
    assert events[i - 1][1] >= step, (kind, step, events[i - 1])
  assert events[-1] == ("ledger", 20)
  on_disk = PrivacyLedger.load(tmp_path / "privacy_ledger.json")
  assert on_disk.num_steps == 20
