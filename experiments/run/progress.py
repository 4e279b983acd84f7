"""The run's one progress bar, from the command's start to its last step.

On a terminal, the command line opens the bar as soon as the config is read
(:func:`start`, within a second of the command: before JAX and the data
load), and every stage of the preparation names itself on it
(:func:`stage`: "loading JAX", "loading the data", "calibrating the noise",
"compiling the step", ...); the training loop then takes the same bar over
to count the steps (:func:`training_bar`). Elsewhere (a pipe, a log file, a
test, a library call) nothing is shown before the first step, and the loop
opens its own bar as before. The bar is closed, and its line cleared,
before any message the run prints (:func:`close`).
"""

from __future__ import annotations

import sys

_STATE = {"bar": None, "name": ""}


def start(name: str, total: int) -> None:
  """Opens the bar (``name``, ``total`` steps) when stderr is a terminal."""
  close()
  if not sys.stderr.isatty():
    return
  import tqdm  # pylint: disable=g-import-not-at-top

  _STATE["name"] = name
  _STATE["bar"] = tqdm.tqdm(
    total=total,
    desc=f"{name}: preparing",
    mininterval=1.0,
    bar_format="{desc}: {elapsed}",
  )


def stage(text: str) -> None:
  """Names what the run is preparing now (nothing without a bar)."""
  bar = _STATE["bar"]
  if bar is not None:
    bar.set_description_str(f"{_STATE['name']}: {text}")


def training_bar(initial: int, total: int, name: str, enabled: bool):
  """The bar that counts the steps from ``initial``: the command's, if it
  opened one, else a new one (``enabled``: shown at all)."""
  import tqdm  # pylint: disable=g-import-not-at-top

  bar = _STATE["bar"]
  if bar is None or not enabled:
    return tqdm.tqdm(
      initial=initial,
      total=total,
      disable=not enabled,
      desc=name,
      mininterval=1.0,
    )
  _STATE["bar"] = None
  bar.bar_format = None  # tqdm's default: bar, count, rate
  bar.set_description_str(name, refresh=False)
  bar.reset(total=total)
  bar.update(initial)
  return bar


def close() -> None:
  """Closes the bar before a message, clearing its line."""
  bar, _STATE["bar"] = _STATE["bar"], None
  if bar is not None:
    bar.leave = False
    bar.close()
