"""The run's secret and its write-ahead privacy ledger, durable in the workdir.

Before the first private step of a run with a ``workdir``:

* ``workdir/private/run_secret`` holds the run's 256-bit secret (file 0600,
  folder 0700, whatever the umask), written with fsync and an atomic rename;
* ``workdir/privacy_ledger.json`` holds the ledger (empty at first), written
  the same way.

Every step is recorded in the ledger file *before* its release is computed:
the loop reserves a block of at most :data:`BLOCK` steps (never past the next
evaluation, checkpoint or the run's last step), writes the ledger, then runs
them. The ledger keeps the reserved step ranges ``[start, stop)`` in order.
A crash therefore never leaves a computed release unrecorded; it may leave
up to ``BLOCK - 1`` reserved steps that never ran (counted anyway). A
graceful stop (Ctrl-C, ``train(stop_after=...)``) ends the last range at
the steps actually computed, durably, before its checkpoint: its ledger
charges exactly the steps that ran.

A restart reads the stored secret (it never draws a fresh secret over an
existing ledger) and resumes from the latest checkpoint, or from step 0 when
there is none.

**Replay rule: every computed release is charged, replays included, and no
computed release shares randomness with another unless its inputs are
provably identical.** The steps between the checkpoint and the end of the
ledger's ranges are computed again and recorded again: the ledger counts
step executions and never under-counts. Each computation of step ``t``
draws its noise *and* its batch from the secret of its attempt
(:func:`zoprivacy.privacy.randomness.attempt_secret`), the attempt being the
number of earlier ranges that hold ``t``: a replay (after a kill, or a
``--resume=force`` that changed the learning rate) is a fresh, independent
subsampled step, charged as one, never the old noise over a new sum. Steps
that no range holds (never computed: after a graceful stop, or the first
run) are attempt 0, the run secret itself, so a run stopped gracefully and
rerun is bit-identical to an uninterrupted one.

A checkpoint whose embedded ledger counts more steps than the ledger file
(the file would under-count) is refused with both numbers. Trimming keeps
this check sound: a checkpoint embeds the ledger after the trim, and an
earlier checkpoint's ledger never holds the trimmed steps (they were
reserved after it).
"""

from __future__ import annotations

import fcntl
import os
import tempfile

from zoprivacy.privacy.ledger import PrivacyBudgetExceededError, PrivacyLedger

PRIVATE_DIR = "private"
SECRET_FILE = "run_secret"
LEDGER_FILE = "privacy_ledger.json"
BLOCK = 32  # steps reserved per durable ledger write
SECRET_BYTES = 32


class LedgerStateError(ValueError):
  """The workdir's secret, ledger and checkpoint do not fit together."""


def _fsync_dir(directory: str) -> None:
  fd = os.open(directory, os.O_RDONLY)
  try:
    os.fsync(fd)
  finally:
    os.close(fd)


def private_dir(path: str) -> str:
  """Creates ``path`` (if needed) with mode 0700, whatever the umask."""
  os.makedirs(path, mode=0o700, exist_ok=True)
  os.chmod(path, 0o700)
  return path


def write_private(path: str, data: bytes) -> None:
  """Writes ``data`` durably and atomically, readable by the owner only."""
  directory = os.path.dirname(os.path.abspath(path))
  fd, tmp = tempfile.mkstemp(prefix=".tmp.", dir=directory)
  try:
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "wb") as f:
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise
  _fsync_dir(directory)


def stored_secret(workdir: str, draw) -> bytes:
  """The workdir's secret; on the first run, ``draw()`` stored durably.

  Refuses to draw a fresh secret when a ledger exists without one."""
  path = os.path.join(workdir, PRIVATE_DIR, SECRET_FILE)
  if os.path.exists(path):
    with open(path, "rb") as f:
      secret = f.read()
    if len(secret) != SECRET_BYTES:
      raise LedgerStateError(
        f"{path} holds {len(secret)} bytes, not a {SECRET_BYTES}-byte "
        "secret; refusing to replace it (the ledger beside it was spent "
        "with it). Use a new workdir."
      )
    return secret
  if os.path.exists(os.path.join(workdir, LEDGER_FILE)):
    raise LedgerStateError(
      f"{workdir} holds a privacy ledger but no run secret ({path}); a "
      "fresh secret would release new noise over steps already spent. "
      "Use a new workdir."
    )
  secret = draw()
  private_dir(os.path.join(workdir, PRIVATE_DIR))
  write_private(path, secret)
  return secret


_LOCKS: dict[str, int] = {}  # workdir -> open lock file, for the process


def lock_workdir(workdir: str) -> None:
  """Takes the workdir's lock for the life of this process: a second
  process that opens the same workdir while this one runs is refused (two
  runs would interleave their ledger and checkpoints)."""
  key = os.path.realpath(workdir)
  if key in _LOCKS:
    return
  folder = private_dir(os.path.join(workdir, PRIVATE_DIR))
  fd = os.open(os.path.join(folder, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except BlockingIOError:
    os.close(fd)
    raise LedgerStateError(
      f"Another process is running in {workdir}; wait for it to end (or "
      "stop it) before resuming, or use another workdir."
    ) from None
  _LOCKS[key] = fd


class WriteAheadLedger:
  """A :class:`PrivacyLedger` written to ``path`` before each block of steps.

  ``path=None``: kept in memory only (no workdir, or a process that does
  not write files)."""

  def __init__(self, ledger: PrivacyLedger, path: str | None):
    self.ledger = ledger
    self.path = path
    self.on_disk_at_start = ledger.num_steps

  @classmethod
  def open(cls, workdir, *, delta, epsilon_budget, write) -> WriteAheadLedger:
    """The workdir's ledger (loaded), or an empty one written durably."""
    path = os.path.join(workdir, LEDGER_FILE) if workdir else None
    if path and os.path.exists(path):
      ledger = PrivacyLedger.load(path)
      ledger.epsilon_budget = epsilon_budget
      return cls(ledger, path if write else None)
    out = cls(
      PrivacyLedger(delta=delta, epsilon_budget=epsilon_budget),
      path if write else None,
    )
    out.save()
    return out

  @property
  def num_steps(self) -> int:
    return self.ledger.num_steps

  def save(self) -> None:
    if self.path:
      self.ledger.save(self.path)

  def reserve(self, plan, first: int, num_steps: int) -> int:
    """Records up to ``num_steps`` steps from step ``first`` (fewer if the
    budget allows fewer, none: :class:`PrivacyBudgetExceededError`),
    durably; returns how many."""
    try:
      self.ledger.record(plan, num_steps, first_step=first)
    except PrivacyBudgetExceededError as e:
      if not e.steps_remaining:
        raise
      num_steps = int(e.steps_remaining)
      self.ledger.record(plan, num_steps, first_step=first)
    self.save()
    return num_steps

  def attempt(self, step: int, stop: int) -> tuple[int, int]:
    """``(attempt, stop')``: the attempt of the next computation of
    ``step`` (how many recorded ranges hold it), and the end, at most
    ``stop``, of the steps from ``step`` that share it."""
    boundary = self.ledger.next_boundary(step)
    return self.ledger.times_recorded(step), int(min(stop, boundary))

  def replayed(self, first: int, last: int) -> tuple[int, int] | None:
    """The steps ``[a, b)`` of ``[first, last)`` that some range already
    holds (computed before, perhaps), or None."""
    held = max((stop for _, stop in self.ledger.ranges), default=0)
    end = min(held, last)
    return (first, end) if first < end else None

  def trim(self, stop: int) -> None:
    """A graceful stop at ``stop``: the reservation past it is dropped,
    durably (those steps never ran)."""
    ranges = self.ledger.ranges
    if ranges and ranges[-1][0] <= stop < ranges[-1][1]:
      self.ledger.trim(stop)
      self.save()

  def check_checkpoint(self, checkpoint_ledger: dict | None, step: int):
    """Refuses a checkpoint whose ledger counts more than the file does."""
    counted = (
      0
      if checkpoint_ledger is None
      else PrivacyLedger.from_dict(checkpoint_ledger).num_steps
    )
    if counted > self.num_steps:
      raise LedgerStateError(
        f"The checkpoint at step {step} records {counted} private steps but "
        f"the workdir's ledger only {self.num_steps}: the ledger would "
        "under-count the privacy spent. Refusing to resume; use a new "
        "workdir."
      )
