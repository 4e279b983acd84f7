"""User errors: reported as one paragraph, without a traceback.

Importing this module imports nothing heavy (no JAX), so a command line can
report an error in its config before the numerical libraries load;
:data:`USER_ERRORS` (the error types that are the user's to fix) is built
on first use.
"""

from __future__ import annotations

import errno
import functools
import textwrap

from experiments.run import config_defaults


class RunInterrupted(RuntimeError):
  """Ctrl-C during the steps: the ledger is durable, the run resumable."""

  def __init__(self, step: int):
    super().__init__(
      f"interrupted at step {step}; rerun the same command to resume."
    )
    self.step = step


@functools.cache
def user_errors() -> tuple[type[BaseException], ...]:
  """The error types reported as one paragraph (imports the runner)."""
  # Imported on first use: keeps JAX (checkpointing) out of the command
  # line's start-up.
  from experiments.run import checkpointing, run_ledger, workdir  # pylint: disable=g-import-not-at-top
  from zoprivacy.data.loaders import MissingDataError  # pylint: disable=g-import-not-at-top
  from zoprivacy.first_order.per_example_check import (  # pylint: disable=g-import-not-at-top
    CrossExampleDependenceError,
  )
  from zoprivacy.privacy import PlanError  # pylint: disable=g-import-not-at-top
  from zoprivacy.privacy.ledger import PrivacyBudgetExceededError  # pylint: disable=g-import-not-at-top

  return (
    ValueError,
    KeyError,
    TypeError,
    AttributeError,
    OSError,
    MissingDataError,
    PrivacyBudgetExceededError,
    checkpointing.CorruptCheckpointError,
    workdir.ConfigMismatchError,
    run_ledger.LedgerStateError,
    CrossExampleDependenceError,
    PlanError,
    RunInterrupted,
  )


def __getattr__(name: str):
  if name == "USER_ERRORS":
    return user_errors()
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _os_message(error: OSError) -> str:
  where = f" ({error.filename})" if error.filename else ""
  if error.errno == errno.ENOSPC:
    return (
      f"disk full{where}: free some space and rerun the same command to "
      "resume (the privacy ledger already counts every step that ran)."
    )
  if isinstance(error, PermissionError):
    return f"permission denied{where}: choose a workdir you can write to."
  if isinstance(error, (NotADirectoryError, FileExistsError)):
    return (
      f"{error.strerror or error}{where}: the workdir (or a folder on its "
      "path) is a file; choose another workdir."
    )
  if isinstance(error, FileNotFoundError):
    return f"no such file or folder{where}."
  return str(error)


def one_paragraph(error: BaseException) -> str:
  """``error: <type>: <message>`` wrapped, and how to see the traceback."""
  if isinstance(error, RunInterrupted):
    return str(error)
  missing = config_defaults.missing_field(error)
  if missing is not None:
    message = missing
  elif isinstance(error, OSError) and type(error).__module__ == "builtins":
    message = _os_message(error)
  elif isinstance(error, KeyError):
    message = str(error).strip("'\"")
  else:
    message = str(error)
  lines = message.splitlines() or [""]
  head = textwrap.fill(f"error ({type(error).__name__}): {lines[0]}", 79)
  rest = "\n".join(lines[1:])
  return "\n".join(
    filter(None, [head, rest, "(run with --debug for the traceback)"])
  )
