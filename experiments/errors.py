"""User errors: reported as one paragraph, without a traceback."""

from __future__ import annotations

import textwrap

from experiments import checkpointing, workdir
from zoprivacy.accounting import PrivacyBudgetExceededError
from zoprivacy.data.loaders import MissingDataError
from zoprivacy.per_example_check import CrossExampleDependenceError
from zoprivacy.privacy import PlanError

USER_ERRORS = (
  ValueError,
  KeyError,
  TypeError,
  AttributeError,
  MissingDataError,
  PrivacyBudgetExceededError,
  checkpointing.CorruptCheckpointError,
  workdir.ConfigMismatchError,
  CrossExampleDependenceError,
  PlanError,
)


def one_paragraph(error: BaseException) -> str:
  """``error: <type>: <message>`` wrapped, and how to see the traceback."""
  message = (
    str(error).strip("'\"") if isinstance(error, KeyError) else str(error)
  )
  lines = message.splitlines() or [""]
  head = textwrap.fill(f"error ({type(error).__name__}): {lines[0]}", 79)
  rest = "\n".join(lines[1:])
  return "\n".join(
    filter(None, [head, rest, "(run with --debug for the traceback)"])
  )
