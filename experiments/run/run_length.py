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
neither, in one paragraph; :func:`resolved` is the config with the steps
counted (a resumed run counts them again on the same data: the same
steps). On the command line a length given by an override replaces the
config file's other one (``--config.num_epochs=3`` on a file that sets
``num_steps``); both on the command line are refused.
"""

from __future__ import annotations

import math

from zoprivacy.privacy import target as target_lib

# The accountant composes up to this many steps in a few seconds (a PLD of
# 10^6 Poisson-subsampled Gaussian steps: ~3 s on one core; 10^7: ~30 s).
MAX_STEPS = 1_000_000


def _steps_value(config):
  n = config.get("num_steps")
  if isinstance(n, float) and n.is_integer():
    n = int(n)
  return n


def _too_many(what: str) -> ValueError:
  return ValueError(
    f"{what} is more than the {MAX_STEPS:,} steps whose privacy the "
    "accountant composes in bounded time; run fewer steps (with a larger "
    "expected_batch_size) or split the experiment."
  )


def check(config) -> None:
  """One length, well formed: ``num_steps`` an integer in [1,
  :data:`MAX_STEPS`], or ``num_epochs`` a positive finite number (as the
  config is given, before :func:`resolved`)."""
  steps, epochs = _steps_value(config), config.get("num_epochs")
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


def batch_size(config, dataset_size: int) -> float:
  """The (expected) batch of a step: the privacy block's, the whole
  training set for the full batch."""
  block = config.privacy
  if block.get("sampling") == "full_batch":
    return dataset_size
  return block.expected_batch_size


def num_steps(config, dataset_size: int) -> int:
  """The steps of ``config``'s run on ``dataset_size`` training examples."""
  epochs = config.get("num_epochs")
  if epochs is None:
    return int(_steps_value(config))
  steps = target_lib.epoch_steps(
    epochs, dataset_size, batch_size(config, dataset_size)
  )
  if steps > MAX_STEPS:
    raise _too_many(
      f"num_epochs={epochs:g} over {dataset_size:,} examples ({steps:,} steps)"
    )
  return steps


def resolved(config, dataset_size: int):
  """``config`` with ``num_steps`` counted from ``num_epochs`` (a copy;
  ``config`` itself when it is given in steps)."""
  if config.get("num_epochs") is None:
    return config
  steps = num_steps(config, dataset_size)
  if config.get("num_steps") == steps:
    return config
  config = config.copy_and_resolve_references()
  with config.unlocked():
    config.num_steps = steps
  return config


def epochs(config, steps: int, dataset_size: int) -> float:
  """The epochs ``steps`` steps draw in expectation (``num_epochs`` itself
  when the config is given in epochs)."""
  if config.get("num_epochs") is not None:
    return float(config.num_epochs)
  return steps * batch_size(config, dataset_size) / dataset_size


def one_from_command_line(config, argv) -> None:
  """A length given on the command line ``argv`` (``--config.num_epochs=3``)
  replaces the config file's other one (its ``num_steps``); both given
  there are left to :func:`check` to refuse."""
  given = {a.split("=")[0].removeprefix("--config.") for a in argv}
  for name, other in (("num_epochs", "num_steps"), ("num_steps", "num_epochs")):
    if name in given and other not in given and config.get(name) is not None:
      if config.get(other) is not None:
        with config.unlocked():
          config[other] = None
