"""The one privacy value: every privacy hyperparameter of a run, written once.

::

    privacy = zoprivacy.Privacy(
        clip=1.0,
        sampling=zoprivacy.Poisson(dataset_size=n, expected_batch_size=64),
        target=zoprivacy.Target(epsilon=2.0, delta=1e-5, num_steps=4000),
    )
    tx = optax.chain(zoprivacy.dpzero(privacy, smoothing=1e-3), optax.sgd(0.02))
    sampler = privacy.sampler()          # the batches the plan accounts

A :class:`Privacy` is frozen and keyword-only. The estimator, its plan, its
sampler and every epsilon come from it (jax_privacy 2.x's config value):
an estimator factory takes it first and calibrates it when it holds a
:class:`Target` and no multiplier (:meth:`Privacy.calibrate`, the one
calibration); :meth:`Privacy.sampler` draws exactly the batches the plan
accounts, each tagged with its selection, and a private step refuses a
batch drawn otherwise (:mod:`zoprivacy.privacy.batch_selection`).

The noise is one typed choice: :class:`Exact` (the default: exact discrete
noise on a grid), :class:`SecureMode` (floating-point Gaussian with Opacus'
defence), :class:`Float` (plain floating-point noise, exposed to
floating-point attacks, Mironov 2012: every report says so), or
:class:`TestNoise` (reproducible noise and batches for tests: NOT private).

This module imports no JAX: a config is turned into its value and checked
before JAX loads. The plan (:meth:`Privacy.plan`) builds the runtime
mechanism, which does.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from typing import Any

from zoprivacy.core import validation
from zoprivacy.privacy import batch_selection, noise_kind
from zoprivacy.privacy.noise_kind import (  # the value's noise choices
  NOISES,
  Exact,
  Float,
  SecureMode,
  TestNoise,
)
from zoprivacy.privacy.target import Target

# ---------------------------------------------------------------- sampling


def Poisson(
  *,
  dataset_size: int,
  expected_batch_size: float | None = None,
  sampling_probability: float | None = None,
) -> batch_selection.BatchSelection:
  """Poisson sampling: each of ``dataset_size`` examples joins each batch
  independently, at ``expected_batch_size / dataset_size`` (or
  ``sampling_probability``: give one of the two)."""
  n = validation.positive_int("dataset_size", dataset_size)
  if (expected_batch_size is None) == (sampling_probability is None):
    raise TypeError(
      "Poisson sampling takes one of expected_batch_size or "
      "sampling_probability (with dataset_size)."
    )
  if sampling_probability is not None:
    p = validation.sampling_probability(sampling_probability)
    expected_batch_size = p * n
    if math.isclose(expected_batch_size, round(expected_batch_size)):
      expected_batch_size = round(expected_batch_size)
  size, _ = validation.batch_size_and_dataset(expected_batch_size, n)
  return batch_selection.BatchSelection("poisson", n, size)


def WithoutReplacement(
  *, dataset_size: int, batch_size: int
) -> batch_selection.BatchSelection:
  """Fixed-size batches: ``batch_size`` distinct examples drawn afresh each
  step (accounted replace-one: ``neighboring='replace_one'``)."""
  n = validation.positive_int("dataset_size", dataset_size)
  b = validation.positive_int("batch_size", batch_size)
  validation.batch_size_and_dataset(b, n)
  return batch_selection.BatchSelection("without_replacement", n, b)


def FullBatch(dataset_size: int) -> batch_selection.BatchSelection:
  """Every example in every step."""
  n = validation.positive_int("dataset_size", dataset_size)
  return batch_selection.BatchSelection("full_batch", n, n)


# ------------------------------------------------------------------- value


class PrivacyValueError(ValueError):
  """A privacy value that no estimator could run."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Privacy:
  """Every privacy hyperparameter of a run (module docstring).

  Attributes:
    clip: the per-example clip, in the estimator's own units (each factory
      says what it clips); ``None``: the estimator's documented default
      (1.0 for most; DP-ZO's 2e-3 on the raw loss difference).
    noise: :class:`Exact` (default), :class:`SecureMode`, :class:`Float`
      or :class:`TestNoise`.
    noise_multiplier: ``sigma``, the noise std over one example's bound;
      ``None`` with a ``target``: calibrated (:meth:`calibrate`).
    target: the :class:`Target` to calibrate for; kept after calibration,
      and every estimator built from the value checks its plan meets it.
    sampling: the batch selection (:func:`Poisson`,
      :func:`WithoutReplacement`, :func:`FullBatch`), whose sampler
      (:meth:`sampler`) draws the batches.
    neighboring: 'add_or_remove' (default) or 'replace_one' (required by
      sampling without replacement).
    num_queries: releases per step on one batch (``q`` directions), one
      mechanism with ``noise_multiplier`` (each query's noise ``sqrt(q)``
      larger).
    mechanism: 'gaussian' (default) or 'laplace' (DP-ZO's); a registered
      mechanism (:mod:`zoprivacy.mechanisms.registry`), checked when an
      estimator is built.
    assume_sampling: accept batches that do not carry their selection
      (arrays from your own loader): the sampling is then ASSUMED, not
      checked, and the plan says so. Off by default: a step refuses them.
  """

  clip: float | None = None
  noise: Exact | SecureMode | Float | TestNoise = Exact()
  noise_multiplier: float | None = None
  target: Target | None = None
  sampling: batch_selection.BatchSelection | None = None
  neighboring: str = "add_or_remove"
  num_queries: int = 1
  mechanism: str = "gaussian"
  assume_sampling: bool = False
  # The plan this value was calibrated on (set by ``calibrate``): an
  # estimator whose plan is this one needs no second check of its target.
  calibrated_plan: Any = dataclasses.field(
    default=None, init=False, compare=False, repr=False
  )

  def __post_init__(self):
    if self.clip is not None:
      _set(self, "clip", _static_positive("clip", self.clip))
    if self.noise_multiplier is not None:
      _set(
        self,
        "noise_multiplier",
        _static_positive("noise_multiplier", self.noise_multiplier),
      )
    _check_types(self)
    validation.one_of(
      "neighboring", self.neighboring, validation.NEIGHBORING_RELATIONS
    )
    _set(
      self,
      "num_queries",
      validation.positive_int("num_queries", self.num_queries),
    )
    if not isinstance(self.mechanism, str):  # its name: checked when built
      raise TypeError(f"mechanism must be a name, got {self.mechanism!r}.")
    _check_sampling(self.sampling, self.neighboring)
    _set(self, "target", _target_on(self.target, self.sampling))

  # --------------------------------------------------------------- reading
  @property
  def calibrated(self) -> bool:
    """Whether it has a noise multiplier (set, or calibrated)."""
    return self.noise_multiplier is not None

  @property
  def expected_batch_size(self) -> float | None:
    return None if self.sampling is None else self.sampling.expected_batch_size

  @property
  def dataset_size(self) -> int | None:
    return None if self.sampling is None else self.sampling.dataset_size

  @property
  def test_seed(self) -> int | None:
    """The insecure test seed of :class:`TestNoise` (``None``: private)."""
    return self.noise.seed if isinstance(self.noise, TestNoise) else None

  @property
  def batch_selection(self) -> batch_selection.BatchSelection:
    """The selection whose batches the plan accounts."""
    if self.sampling is None:
      raise PrivacyValueError(
        "This privacy value has no sampling: give sampling=zoprivacy."
        "Poisson(dataset_size=n, expected_batch_size=B) (or "
        "WithoutReplacement / FullBatch)."
      )
    return self.sampling

  def replace(self, **changes) -> Privacy:
    """A copy with ``changes`` (it holds no calibration record)."""
    return dataclasses.replace(self, **changes)

  # ----------------------------------------------------------------- using
  def sampler(self, secret: bytes | None = None):
    """The sampler of exactly the batches the plan accounts; its batches
    carry their selection. It draws from ``secret`` (32 bytes; ``None``:
    fresh OS entropy), or, under :class:`TestNoise`, from its seed (NOT
    private)."""
    if secret is None:
      secret = _secret_of(self.test_seed)
    return self.batch_selection.sampler(secret=secret)

  def plan(self, estimator=None, **hyperparameters):
    """The :class:`~zoprivacy.privacy.PrivacyPlan` of one step: of
    ``estimator(self, **hyperparameters)`` (a zoprivacy factory; nothing is
    built), or, without one, of a sum of per-example scalars clipped at
    ``clip`` (DPZero, DP-ZO, PAZO-M/P). ``delta`` is the target's."""
    if estimator is None:
      # Imported on use: the runtime mechanisms load JAX, which this
      # value's module does not.
      from zoprivacy.privacy import privatization  # pylint: disable=g-import-not-at-top

      return privatization.privatize(self).plan
    plan_of = getattr(estimator, "plan_of", None)
    if plan_of is None:
      raise TypeError(
        f"{getattr(estimator, '__name__', estimator)!r} is not a zoprivacy "
        "estimator factory (one registered with zoprivacy.estimators."
        "registry), so its plan cannot be read without building it."
      )
    return plan_of(self, **hyperparameters)

  def calibrate(
    self, target: Target | None = None, *, estimator=None, **hyperparameters
  ) -> Privacy:
    """A new value with the smallest noise multiplier (to 0.2%) whose plan
    (:meth:`plan`, of ``estimator`` when given) spends at most the target's
    epsilon at its delta over its steps; the target is kept. An estimator
    given an uncalibrated value calibrates it here, on its own plan."""
    # Imported on use: calibration loads dp_accounting (and the plan JAX).
    from zoprivacy.privacy import calibration  # pylint: disable=g-import-not-at-top

    return calibration.calibrate(
      self, target, estimator=estimator, **hyperparameters
    )

  def describe(self) -> str:
    """One line: what this value asks for (the plan says what is spent)."""
    parts = [
      f"clip {'default' if self.clip is None else f'{self.clip:g}'}",
      noise_kind.describe(self.noise),
      "noise multiplier "
      + (
        "uncalibrated"
        if self.noise_multiplier is None
        else f"{self.noise_multiplier:.4g}"
      ),
    ]
    if self.target is not None:
      parts.append(self.target.describe())
    parts.append(
      "no sampling" if self.sampling is None else self.sampling.describe()
    )
    if self.assume_sampling:
      parts.append("sampling ASSUMED, not checked")
    parts.append(self.neighboring.replace("_", "-"))
    if self.num_queries > 1:
      parts.append(f"{self.num_queries} queries per step")
    return ", ".join(parts)


_FIELDS = tuple(f.name for f in dataclasses.fields(Privacy) if f.init)
_INIT = Privacy.__init__


def _init(self, *args, **kwargs):
  if args:
    raise TypeError(
      "Privacy takes keyword arguments only (Privacy(clip=1.0, "
      "noise_multiplier=..., sampling=...)): a positional number could be "
      "taken for the wrong one."
    )
  for name in kwargs:
    if name not in _FIELDS:
      close = difflib.get_close_matches(name, _FIELDS, n=1, cutoff=0.6)
      hint = f" (did you mean {close[0]!r}?)" if close else ""
      raise TypeError(
        f"Privacy has no field {name!r}{hint}; its fields are "
        f"{', '.join(_FIELDS)}."
      )
  _INIT(self, **kwargs)


Privacy.__init__ = _init


def _set(value, name, x):
  object.__setattr__(value, name, x)


def _static_positive(name: str, x) -> float:
  """A privacy number: a static Python or NumPy number, positive, finite
  (a JAX array, e.g. injected by optax.inject_hyperparams, is refused)."""
  if not validation.is_real(x):
    raise TypeError(
      f"Privacy's {name} must be a Python number, got {type(x).__name__}: "
      "it fixes the privacy plan the accountant reads, so it cannot be a "
      "traced or injected value."
    )
  return validation.positive(name, x)


def _check_types(value: Privacy) -> None:
  if not isinstance(value.noise, NOISES):
    raise TypeError(
      f"noise must be zoprivacy.Exact() (the default), SecureMode(), "
      f"Float() or TestNoise(seed), got {value.noise!r}."
    )
  if value.target is not None and not isinstance(value.target, Target):
    raise TypeError(
      "target must be zoprivacy.Target(epsilon=..., delta=..., "
      f"num_steps=... or num_epochs=...), got {value.target!r}."
    )
  if not isinstance(value.assume_sampling, bool):
    raise TypeError(
      f"assume_sampling must be a bool, got {value.assume_sampling!r}."
    )


def _target_on(target: Target | None, sampling) -> Target | None:
  """``target`` with its steps counted on ``sampling`` when it is given in
  epochs (:meth:`Target.on`); refused without a sampling to count on."""
  if target is None or target.num_epochs is None:
    return target
  if sampling is None:
    raise PrivacyValueError(
      f"Target(num_epochs={target.num_epochs:g}) counts its steps from the "
      "value's sampling (ceil(epochs * dataset_size / expected_batch_size)"
      "): give sampling=zoprivacy.Poisson(dataset_size=n, "
      "expected_batch_size=B), or num_steps instead of num_epochs."
    )
  return target.on(sampling)


def _check_sampling(sampling, neighboring: str) -> None:
  if sampling is None:
    return
  if not isinstance(sampling, batch_selection.BatchSelection):
    raise TypeError(
      "sampling must be zoprivacy.Poisson(dataset_size=n, "
      "expected_batch_size=B), WithoutReplacement(dataset_size=n, "
      f"batch_size=b) or FullBatch(n), got {sampling!r}."
    )
  if not sampling.private:
    raise PrivacyValueError(
      "Shuffled fixed-size batches have no privacy accounting (one epoch's "
      "batches depend on one another), so a private value cannot use them. "
      "Use zoprivacy.Poisson(...) (the default of every estimator), or "
      "WithoutReplacement(...) with neighboring='replace_one', whose "
      "batches are drawn afresh each step; shuffling is for the non-private "
      "baseline (zoprivacy.mezo) only."
    )
  if sampling.name == "without_replacement" and not _replace_one(neighboring):
    raise PrivacyValueError(
      "Sampling without replacement (fixed-size batches) is analysed under "
      "replace-one neighbouring only: a fixed batch size would reveal "
      "whether an example was added or removed. Give "
      "neighboring='replace_one' (its epsilon is larger), or use "
      "zoprivacy.Poisson(...) sampling."
    )


def _replace_one(neighboring: str) -> bool:
  # Imported on use (fixed-size batches only): the one conversion of a
  # relation's name loads dp_accounting, kept out of the config checks
  # that run before JAX loads.
  from zoprivacy.accounting import relations  # pylint: disable=g-import-not-at-top

  return relations.relation(neighboring) is relations.REPLACE_ONE


def _secret_of(test_seed: int | None) -> bytes:
  # Imported on use: randomness loads JAX, which this module does not.
  from zoprivacy.privacy import randomness  # pylint: disable=g-import-not-at-top

  if test_seed is None:
    return randomness.new_secret()
  return randomness.insecure_test_secret(test_seed)
