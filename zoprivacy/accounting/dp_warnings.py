"""dp_accounting's numerical warnings, captured and summarized once per call.

dp_accounting logs through absl (the ``absl`` Python logger), one line per
excluded Renyi order or degenerate divergence, so a calibration that tries
dozens of noise multipliers can print hundreds of lines. None of them makes
an epsilon smaller than the truth: an RDP order whose moment does not
converge is *excluded* (the bound is taken over the other orders), and a
negative divergence is clamped. :func:`summarized` captures those records
for the duration of the outermost accounting call and emits one
:class:`DpAccountingWarning` naming how many there were and the first one.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import warnings


class DpAccountingWarning(UserWarning):
  """Summary of the numerical warnings dp_accounting logged during a call."""


class _Capture(logging.Filter):
  def __init__(self):
    super().__init__()
    self.messages: list[str] = []

  def filter(self, record: logging.LogRecord) -> bool:
    if "dp_accounting" in (record.pathname or ""):
      self.messages.append(record.getMessage())
      return False  # swallowed here, summarized at exit
    return True


_state = threading.local()


@contextlib.contextmanager
def summarized(what: str = "privacy accounting"):
  """Captures dp_accounting's log warnings; warns once at exit if any."""
  if getattr(_state, "capture", None) is not None:  # nested: outer reports
    yield
    return
  capture = _Capture()
  logger = logging.getLogger("absl")
  logger.addFilter(capture)
  _state.capture = capture
  try:
    yield
  finally:
    logger.removeFilter(capture)
    _state.capture = None
    if capture.messages:
      kinds = {m.split(" ", 1)[0] for m in capture.messages}
      warnings.warn(
        f"dp_accounting logged {len(capture.messages)} numerical warning(s) "
        f"({len(kinds)} kind(s)) during {what}; none lowers the reported "
        f"epsilon (non-converging Renyi orders are excluded from the bound). "
        f"First: {capture.messages[0]}",
        DpAccountingWarning,
        stacklevel=3,
      )


def summarize_warnings(fn):
  """Decorator: run ``fn`` under :func:`summarized`."""

  @functools.wraps(fn)
  def wrapper(*args, **kwargs):
    with summarized(fn.__name__):
      return fn(*args, **kwargs)

  return wrapper
