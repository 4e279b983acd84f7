"""A run killed at any point of its checkpoint hook resumes with the same
command, its trajectory log included.

The kill is simulated in process: the checkpoint's save raises an exception
no handler of the runner catches, either right after the checkpoint has
committed or just before it does (after the trajectory log was saved).
Before the fix the log was saved after the commit, and the first case left
``trajectory.bin`` behind the checkpoint: every later start was refused.
"""

import pytest

from configs import default
from experiments import trajectory_log as replay_command
from experiments.run import checkpointing, train
from zoprivacy.training import trajectory


class _Killed(BaseException):
  """Stands for SIGKILL: nothing after it runs."""


def _config(workdir):
  c = default.get_config()
  c.update(num_steps=6, eval_every=0, checkpoint_every=2, workdir=str(workdir))
  c.update(check_per_example=False, trajectory_log=True)
  return c


@pytest.mark.parametrize("when", ["after the commit", "before the commit"])
def test_a_kill_around_a_checkpoint_leaves_a_resumable_workdir(
  tmp_path, monkeypatch, when
):
  save = checkpointing.Checkpointer.save

  def killed_at_4(self, step, state, ledger):
    if step == 4 and when == "before the commit":
      raise _Killed
    save(self, step, state, ledger)
    if step == 4:
      raise _Killed

  monkeypatch.setattr(checkpointing.Checkpointer, "save", killed_at_4)
  with pytest.raises(_Killed):
    train.train(_config(tmp_path), progress=False)
  monkeypatch.setattr(checkpointing.Checkpointer, "save", save)
  result = train.train(_config(tmp_path), progress=False)  # the same command
  log = trajectory.TrajectoryLog.load(str(tmp_path / "trajectory.bin"))
  assert log.scalars.shape[0] == 6
  replayed = replay_command.replay_run(_config(tmp_path), log)
  assert replayed["params_sha256"] == result["params_sha256"]
