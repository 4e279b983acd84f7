"""The checks of a run config's numbers, before anything is read or built.

:func:`check_numbers` refuses, each in one paragraph: an absurd step count
or length (``num_steps``/``num_epochs``, ``eval_every``,
``checkpoint_every``), an optimizer that is a step wrapper
(``optax.MultiSteps``, ``apply_every``), a seed that is not an integer, a
missing privacy block, a delta outside (0, 1), a non-positive or
non-finite epsilon, noise multiplier, clip, budget, batch size, learning
rate or smoothing, and a physical batch set in the wrong place. It needs
no estimator and imports nothing heavy (a command line runs it before JAX
loads: :func:`experiments.run.preflight.check_before_jax`).
"""

from __future__ import annotations

import math

from experiments.run import run_length

# Optax names that are not an optimizer the runner can place after the
# estimator: MultiSteps wraps a whole chain and merges its calls (a step of
# the plan would no longer be one call; the library refuses it around an
# estimator too); apply_every takes no learning rate (the library accepts it
# after an estimator, where it only delays applying released updates).
STEP_WRAPPERS = ("MultiSteps", "apply_every")


def _positive(
  config,
  name: str,
  *,
  allow_none: bool = True,
  allow_zero: bool = False,
  label: str | None = None,
) -> None:
  value = config.get(name)
  if value is None and allow_none:
    return
  if (
    isinstance(value, bool)
    or not isinstance(value, (int, float))
    or not math.isfinite(value)
    or value < 0
    or (value == 0 and not allow_zero)
  ):
    bound = ">= 0" if allow_zero else "> 0"
    raise ValueError(
      f"{label or name} must be a finite number {bound}, got {value!r}."
    )


def _check_steps(config) -> None:
  run_length.check(config.get("num_steps"), config.get("num_epochs"))
  for name in ("eval_every", "checkpoint_every"):
    value = config.get(name) or 0
    if not isinstance(value, int) or value < 0:
      raise ValueError(f"{name} must be an integer >= 0, got {value!r}.")


def _check_step_wrapper(config) -> None:
  if config.get("optimizer") == "apply_every":
    raise ValueError(
      "optimizer='apply_every' is not an optimizer: it takes no learning "
      "rate and only sums k updates before applying them. Name the "
      "optimizer that follows the estimator (e.g. 'sgd', 'adam'); to "
      "average over more examples per step, use a larger "
      "expected_batch_size (its privacy is accounted)."
    )
  if config.get("optimizer") in STEP_WRAPPERS:
    raise ValueError(
      f"optimizer={config.optimizer!r} would run the estimator on only some "
      "calls, so a step of the privacy plan would not be one call. To "
      "average over more examples per step, use a larger "
      "expected_batch_size (its privacy is accounted)."
    )


def check_numbers(config) -> None:
  """The numeric fields every run has, and step wrappers (no estimator
  needed, no JAX)."""
  _check_steps(config)
  _check_step_wrapper(config)
  seed = config.get("seed", 0)
  if isinstance(seed, bool) or not isinstance(seed, int):
    raise ValueError(
      f"seed must be an integer (the public seed: initialization, "
      f"directions, the split), got {seed!r}."
    )
  block = config.get("privacy")
  if block is None:
    raise ValueError(
      "The config has no privacy block: start it from configs/default.py "
      "(config = default.get_config()), whose privacy block holds the clip, "
      "noise, target epsilon or noise multiplier, delta and sampling."
    )
  delta = block.get("delta")
  if delta is not None and (
    not isinstance(delta, (int, float)) or not 0.0 < delta < 1.0
  ):
    raise ValueError(f"privacy.delta must lie in (0, 1), got {delta!r}.")
  for name in ("target_epsilon", "noise_multiplier", "clip"):
    _positive(block, name, label=f"privacy.{name}")
  _positive(config, "epsilon_budget")
  batch = block.get("expected_batch_size")
  if block.get("sampling") != "full_batch" and not (
    isinstance(batch, (int, float)) and batch >= 1
  ):
    raise ValueError(
      f"privacy.expected_batch_size must be >= 1, got {batch!r}."
    )
  # 0 is a legitimate control (public selection compares it).
  _positive(config, "learning_rate", allow_zero=True)
  kwargs = dict(config.get("estimator_kwargs") or {})
  _check_physical_batch(config, kwargs)
  value = kwargs.get("smoothing")
  if value is not None and not isinstance(value, (list, tuple)):
    if not isinstance(value, (int, float)) or not value > 0:
      raise ValueError(
        f"estimator_kwargs.smoothing must be > 0, got {value!r} "
        f"({config.get('estimator')})."
      )


def _check_physical_batch(config, kwargs) -> None:
  """``physical_batch_size``: unset, or a whole number of rows >= 1, set
  in one place."""
  if "physical_batch_size" in kwargs:
    raise ValueError(
      "physical_batch_size is a run setting, not an estimator "
      "hyperparameter: set config.physical_batch_size (e.g. "
      "--config.physical_batch_size=8), not estimator_kwargs."
    )
  size = config.get("physical_batch_size")
  if size is not None and (
    isinstance(size, bool) or not isinstance(size, int) or size < 1
  ):
    raise ValueError(
      f"physical_batch_size must be a whole number of rows >= 1 (or unset, "
      f"the whole batch at once), got {size!r}."
    )
