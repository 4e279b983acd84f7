"""The noise of a privacy value: one typed choice.

:class:`Exact` (the default: exact discrete noise on a grid),
:class:`SecureMode` (floating-point Gaussian with Opacus' defence),
:class:`Float` (plain floating-point noise, exposed to floating-point
attacks, Mironov 2012: every report says so), or :class:`TestNoise`
(reproducible noise and batches for tests: NOT private). JAX-free.
"""

from __future__ import annotations

import dataclasses

from zoprivacy.core import validation


@dataclasses.dataclass(frozen=True)
class Exact:
  """Exact discrete noise (the default): each clipped value is quantized to
  a grid of ``grid_points`` steps per clip and exact discrete Gaussian or
  Laplace noise is added to the integer sum (vector estimators: an integer
  lattice)."""

  grid_points: int = 1024
  kind = "exact"

  def __post_init__(self):
    validation.positive_int("grid_points", self.grid_points)


@dataclasses.dataclass(frozen=True)
class SecureMode:
  """Floating-point Gaussian noise, each draw the scaled sum of 4 Gaussians
  (Opacus' ``secure_mode``, Holohan & Braghin 2021)."""

  kind = "secure_mode"
  grid_points = 1024


@dataclasses.dataclass(frozen=True)
class Float:
  """Plain floating-point noise: an explicit opt-in, exposed to
  floating-point attacks (Mironov 2012); the plan and every report say so."""

  kind = "float"
  grid_points = 1024


@dataclasses.dataclass(frozen=True)
class TestNoise:
  """REPRODUCIBLE noise and batches from ``seed``, drawn as ``of`` draws
  them: NOT private (anyone with the seed regenerates them); the plan and
  every report say so. For tests and debugging only."""

  __test__ = False  # not a pytest test class

  seed: int
  of: Exact | SecureMode | Float = Exact()

  def __post_init__(self):
    if isinstance(self.seed, bool) or not isinstance(self.seed, int):
      raise TypeError(f"TestNoise's seed must be an int, got {self.seed!r}.")
    if not isinstance(self.of, Exact | SecureMode | Float):
      raise TypeError(
        "TestNoise(of=...) is the noise drawn reproducibly: Exact(), "
        f"SecureMode() or Float(), got {self.of!r}."
      )

  @property
  def kind(self) -> str:
    return self.of.kind

  @property
  def grid_points(self) -> int:
    return self.of.grid_points


NOISES = (Exact, SecureMode, Float, TestNoise)


def describe(noise) -> str:
  """The noise choice in words (every report's privacy line)."""
  words = {
    "exact": f"exact discrete noise (grid {noise.grid_points})",
    "secure_mode": "floating-point noise with Opacus' secure_mode",
    "float": "floating-point noise (exposed to floating-point attacks)",
  }[noise.kind]
  if isinstance(noise, TestNoise):
    return f"NOT PRIVATE: reproducible test noise (seed {noise.seed}), {words}"
  return words
