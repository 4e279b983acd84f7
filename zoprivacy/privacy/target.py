"""The guarantee a run must meet, over steps or over epochs.

``Target(epsilon, delta, num_steps=T)`` asks for ``(epsilon, delta)``
after ``T`` calls of the estimator's update. ``Target(epsilon, delta,
num_epochs=E)`` counts in epochs instead (as Opacus and jax_privacy users
do): the steps are those that draw, in expectation, ``E`` passes over the
private training set, ``T = ceil(E * n / B)`` (:func:`epoch_steps`), ``n``
and ``B`` being the dataset size and the expected batch size of the
sampling the target is calibrated with. A :class:`zoprivacy.Privacy` value
resolves them from its own ``sampling`` (:meth:`Target.on`): the target it
holds then gives both, and every calibration and check reads its
``num_steps``.

This module imports no JAX (a config is checked before JAX loads).
"""

from __future__ import annotations

import dataclasses
import fractions
import math

from zoprivacy.core import validation


def _exact(x) -> fractions.Fraction:
  """``x`` as written (``0.1`` is one tenth, not the nearest double)."""
  return fractions.Fraction(str(x))


def epoch_steps(num_epochs: float, dataset_size: int, batch_size) -> int:
  """The steps of ``num_epochs`` passes over ``dataset_size`` examples at
  (expected) batch size ``batch_size``: ``ceil(epochs * n / B)``, computed
  exactly (3 epochs of 1,431 examples at 64: 68 steps), at least 1."""
  epochs = validation.positive("num_epochs", num_epochs)
  n = validation.positive_int("dataset_size", dataset_size)
  b = validation.positive("batch_size", batch_size)
  return max(1, math.ceil(_exact(epochs) * n / _exact(b)))


def batch_of(selection) -> float:
  """The (expected) batch size a step of ``selection`` draws: the
  dataset's for the full batch."""
  if selection.name == "full_batch":
    return selection.dataset_size
  return selection.expected_batch_size


@dataclasses.dataclass(frozen=True)
class Target:
  """The guarantee a run must meet: ``(epsilon, delta)`` after
  ``num_steps`` steps (calls of the estimator's update), or after
  ``num_epochs`` epochs of the privacy value's sampling (module
  docstring). Give one of the two."""

  epsilon: float
  delta: float
  num_steps: int | None = None
  num_epochs: float | None = None
  # The (dataset size, batch size) ``num_steps`` was resolved on from
  # ``num_epochs`` (set by :meth:`on`; never given by hand).
  resolved_on: tuple | None = dataclasses.field(default=None, repr=False)

  def __post_init__(self):
    object.__setattr__(self, "epsilon", validation.epsilon(self.epsilon))
    object.__setattr__(self, "delta", validation.delta(self.delta))
    if self.num_epochs is None:
      if self.num_steps is None:
        raise TypeError(
          "Target needs the run's length: num_steps=T (calls of the "
          "estimator's update) or num_epochs=E (passes over the training "
          "set, counted from the privacy value's sampling)."
        )
      steps = validation.num_steps(self.num_steps)
      object.__setattr__(self, "num_steps", steps)
      return
    epochs = validation.positive("num_epochs", self.num_epochs)
    object.__setattr__(self, "num_epochs", epochs)
    if self.resolved_on is None and self.num_steps is not None:
      raise TypeError(
        f"Target takes num_steps or num_epochs, not both (got num_steps="
        f"{self.num_steps!r}, num_epochs={self.num_epochs!r}): one run "
        "length, counted once. The steps of num_epochs are counted from "
        "the privacy value's sampling."
      )
    if self.resolved_on is not None:
      n, b = self.resolved_on
      if self.num_steps != epoch_steps(epochs, n, b):
        raise ValueError(
          f"num_steps={self.num_steps!r} is not {epochs:g} epochs of "
          f"{n} examples at batch {b:g}; give num_epochs alone."
        )

  @property
  def resolved(self) -> bool:
    """Whether the steps are known (given, or counted from epochs)."""
    return self.num_steps is not None

  def on(self, selection) -> Target:
    """This target with its steps counted on ``selection`` (a
    :class:`~zoprivacy.privacy.batch_selection.BatchSelection`): itself
    when it is counted in steps."""
    if self.num_epochs is None:
      return self
    key = (selection.dataset_size, batch_of(selection))
    if key == self.resolved_on:
      return self
    return dataclasses.replace(
      self,
      num_steps=epoch_steps(self.num_epochs, *key),
      resolved_on=key,
    )

  def describe(self) -> str:
    """``target epsilon 2 at delta 1e-05 over 68 steps (3 epochs)``."""
    steps = "? steps" if self.num_steps is None else f"{self.num_steps} steps"
    epochs = "" if self.num_epochs is None else f" ({self.num_epochs:g} epochs)"
    return (
      f"target epsilon {self.epsilon:g} at delta {self.delta:g} over "
      f"{steps}{epochs}"
    )
