"""Input checks: the one vocabulary for hyperparameters and accounting inputs.

Every check runs before any private data is touched (when an estimator is
constructed, a plan is built or an epsilon is asked for), so a typo fails
loudly instead of silently weakening (or voiding) a privacy guarantee. The
accounting checks are strict: Python numbers only, never ``bool``.
"""

from __future__ import annotations

import math
import numbers
from typing import Literal


def _finite_number(name: str, value) -> float:
  try:
    value = float(value)
  except (TypeError, ValueError):
    raise ValueError(f"{name} must be a number, got {value!r}.") from None
  if math.isnan(value):
    raise ValueError(f"{name} must not be NaN.")
  return value


def positive(name: str, value, *, allow_inf: bool = False) -> float:
  value = _finite_number(name, value)
  if not value > 0 or (math.isinf(value) and not allow_inf):
    raise ValueError(f"{name} must be a positive finite number, got {value}.")
  return value


def positive_int(name: str, value) -> int:
  if isinstance(value, bool) or int(value) != value or value < 1:
    raise ValueError(f"{name} must be an integer >= 1, got {value!r}.")
  return int(value)


def probability(name: str, value) -> float:
  value = _finite_number(name, value)
  if not 0.0 < value < 1.0:
    raise ValueError(f"{name} must lie strictly between 0 and 1, got {value}.")
  return value


def unit_interval(name: str, value) -> float:
  value = _finite_number(name, value)
  if not 0.0 <= value <= 1.0:
    raise ValueError(f"{name} must lie in [0, 1], got {value}.")
  return value


def one_of(name: str, value, choices) -> str:
  if value not in choices:
    raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}.")
  return value


def batch_size_and_dataset(expected_batch_size, dataset_size):
  """Checks ``expected_batch_size`` (and, if given, ``dataset_size``).

  Returns ``(expected_batch_size, dataset_size)`` with ``dataset_size``
  possibly ``None``. The expected batch size may be fractional (it is
  ``p * n`` under Poisson sampling) but cannot exceed the dataset.
  """
  expected_batch_size = positive("expected_batch_size", expected_batch_size)
  if dataset_size is not None:
    dataset_size = positive_int("dataset_size", dataset_size)
    if expected_batch_size > dataset_size:
      raise ValueError(
        f"expected_batch_size ({expected_batch_size}) is larger than the "
        f"dataset ({dataset_size} examples)."
      )
  return expected_batch_size, dataset_size


def static_positive(name: str, value) -> float:
  """A privacy hyperparameter: a static, positive, finite Python number.

  Privacy hyperparameters fix the privacy plan, so they cannot be JAX arrays
  (for example injected by ``optax.inject_hyperparams``; list them in its
  ``static_args``, see ``zoprivacy.PRIVACY_HYPERPARAMETERS``).
  """
  import jax  # pylint: disable=g-import-not-at-top

  if isinstance(value, jax.Array):
    raise TypeError(
      f"{name} is a privacy hyperparameter and must be a static Python "
      "number, not a JAX array: it fixes the privacy plan the accountant "
      "reads. With optax.inject_hyperparams, pass it in static_args "
      "(zoprivacy.PRIVACY_HYPERPARAMETERS lists them)."
    )
  return positive(name, value)


def positive_or_traced(name: str, value):
  """A non-privacy hyperparameter: positive, or a JAX array left unchecked
  (``optax.inject_hyperparams`` may inject it; it is checked when static)."""
  import jax  # pylint: disable=g-import-not-at-top

  if isinstance(value, jax.Array):
    return value
  return positive(name, value)


# ------------------------------------------------- accounting inputs (strict)

# The relations' names; :mod:`zoprivacy.accounting.relations` maps them to
# dp_accounting's ``NeighboringRelation`` (the one table).
NEIGHBORING_RELATIONS = ("add_or_remove", "replace_one")
Neighboring = Literal["add_or_remove", "replace_one"]


def is_real(x) -> bool:
  """A real Python/NumPy number that is not a ``bool``."""
  return isinstance(x, numbers.Real) and not isinstance(x, bool)


def noise_multiplier(value, name="noise_multiplier") -> float:
  if not is_real(value) or not math.isfinite(value):
    raise ValueError(f"{name} must be a finite number, got {value!r}.")
  if value <= 0:
    raise ValueError(f"{name} must be > 0, got {value!r}.")
  return float(value)


def sampling_probability(value, name="sampling_probability") -> float:
  if not is_real(value) or not math.isfinite(value) or not 0.0 < value <= 1.0:
    raise ValueError(f"{name} must be in (0, 1], got {value!r}.")
  return float(value)


def num_steps(value, name="num_steps", minimum=1) -> int:
  if not isinstance(value, numbers.Integral) or isinstance(value, bool):
    raise ValueError(f"{name} must be an integer, got {value!r}.")
  if value < minimum:
    raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
  return int(value)


def delta(value) -> float:
  if not is_real(value) or not math.isfinite(value) or not 0.0 < value < 1.0:
    raise ValueError(f"delta must be in (0, 1), got {value!r}.")
  return float(value)


def discretization_interval(value) -> float:
  """A PLD value discretization interval, in ``(0, 0.1]``."""
  if not is_real(value) or not math.isfinite(value) or not 0.0 < value <= 0.1:
    raise ValueError(
      f"value_discretization_interval must be in (0, 0.1], got {value!r}."
    )
  return float(value)


def epsilon(value, name="epsilon") -> float:
  if not is_real(value) or not math.isfinite(value) or value <= 0:
    raise ValueError(f"{name} must be a finite number > 0, got {value!r}.")
  return float(value)
