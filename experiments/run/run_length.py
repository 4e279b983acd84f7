"""A run's length: ``num_steps``, or ``num_epochs`` counted once the data loads.

A config sets one of the two. ``num_epochs = E`` runs the steps that draw,
in expectation, ``E`` passes over the private training set:
``ceil(E * n / B)`` (:func:`zoprivacy.privacy.target.epoch_steps`, the
library's count for ``zoprivacy.Target(num_epochs=E)``), ``n`` being the
training set's size, known only once the data is loaded, and ``B`` the
expected batch size (``n`` for the full batch). The run then calibrates
its noise for those steps (the privacy value's target is in epochs, counted
on the same sampling), and the report and ``result.json`` give both.

:func:`check` (no data, no JAX) refuses a config that sets both, or
neither, in one paragraph; :func:`num_steps` counts the steps of a run's
settings (:meth:`experiments.run.settings.Settings.for_dataset`; a resumed
run counts them again on the same data: the same steps). On the command
line a length given by an override replaces the config file's other one
(``--config.num_epochs=3`` on a file that sets ``num_steps``:
:func:`experiments.run.cli.one_length`); both on the command line are
refused.
"""

from __future__ import annotations

import math

from zoprivacy.privacy import target as target_lib

# The accountant composes up to this many steps in a few seconds (a PLD of
# 10^6 Poisson-subsampled Gaussian steps: ~3 s on one core; 10^7: ~30 s).
MAX_STEPS = 1_000_000


def _steps_value(steps):
  if isinstance(steps, float) and steps.is_integer():
    steps = int(steps)
  return steps


def _too_many(what: str) -> ValueError:
  return ValueError(
    f"{what} is more than the {MAX_STEPS:,} steps whose privacy the "
    "accountant composes in bounded time; run fewer steps (with a larger "
    "expected_batch_size) or split the experiment."
  )


def check(num_steps, num_epochs) -> None:
  """One length, well formed: ``num_steps`` an integer in [1,
  :data:`MAX_STEPS`], or ``num_epochs`` a positive finite number (as the
  config gives them, before :func:`num_steps` counts them)."""
  steps, epochs = _steps_value(num_steps), num_epochs
  if epochs is not None and steps is not None:
    raise ValueError(
      f"the config sets both num_steps={steps!r} and num_epochs="
      f"{epochs!r}: a run's length is set once. Keep one and unset the "
      "other (config.num_steps = None in the file, or --config.num_steps="
      "None; a --config.num_epochs override alone replaces the file's "
      "num_steps)."
    )
  if epochs is not None:
    if (
      isinstance(epochs, bool)
      or not isinstance(epochs, int | float)
      or not math.isfinite(epochs)
      or epochs <= 0
    ):
      raise ValueError(
        f"num_epochs must be a finite number > 0, got {epochs!r}."
      )
    return
  if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
    raise ValueError(
      f"num_steps must be an integer >= 1, got {steps!r} (or set "
      "num_epochs instead)."
    )
  if steps > MAX_STEPS:
    raise _too_many(f"num_steps={steps:,}")


def num_steps(steps, epochs, batch_size: float, dataset_size: int) -> int:
  """The steps of a run of ``steps`` or ``epochs`` (the other ``None``) on
  ``dataset_size`` training examples drawn ``batch_size`` (expected) at a
  time."""
  if epochs is None:
    return int(_steps_value(steps))
  steps = target_lib.epoch_steps(epochs, dataset_size, batch_size)
  if steps > MAX_STEPS:
    raise _too_many(
      f"num_epochs={epochs:g} over {dataset_size:,} examples ({steps:,} steps)"
    )
  return steps


def epochs(num_epochs, steps: int, batch_size: float, dataset_size: int):
  """The epochs ``steps`` steps draw in expectation (``num_epochs`` itself
  when the run is given in epochs)."""
  if num_epochs is not None:
    return float(num_epochs)
  return steps * batch_size / dataset_size
