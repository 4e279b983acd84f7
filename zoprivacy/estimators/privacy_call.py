"""How every private factory receives its privacy value: the one entry.

A private factory is written ``factory(privacy, *, <its own
hyperparameters>)``. :func:`wrap` (applied by
:func:`zoprivacy.estimators.registry.estimator`) stands before every one
and, once for all of them:

* refuses a value whose sampling the estimator's accounting does not
  cover, and anything that is not a :class:`~zoprivacy.Privacy`;
* calibrates a value that holds a :class:`~zoprivacy.Target` and no noise
  multiplier, on the estimator's own plan
  (:meth:`~zoprivacy.Privacy.calibrate`), and checks that a value holding
  both meets its target with the estimator's plan;
* answers ``target_epsilon=`` / ``delta=`` with one paragraph;
* keeps the keyword form of earlier releases (``dpzero(clip=...,
  noise_multiplier=..., expected_batch_size=..., dataset_size=...)``)
  working: the value is built from those keywords, with a
  ``DeprecationWarning``, and assumes its sampling (that road never tied
  the batches to the plan), unless the batches carry their selection.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable

from zoprivacy.core import validation
from zoprivacy.privacy import value as value_lib
from zoprivacy.privacy.batch_selection import BatchSelection

# The privacy keywords of earlier releases' factories.
LEGACY_KEYWORDS = (
  "clip",
  "noise_multiplier",
  "expected_batch_size",
  "dataset_size",
  "num_queries",
  "neighboring",
  "mechanism",
  "noise",
  "grid_points",
  "insecure_test_noise_seed",
  "exact_noise",
)
# What a user may try to give a factory instead of a target in the value.
ACCOUNTING_ARGUMENTS = ("target_epsilon", "epsilon", "target_delta", "delta")
_NOISES = {
  "exact": value_lib.Exact,
  "secure_mode": value_lib.SecureMode,
  "float": value_lib.Float,
}


def takes_privacy(factory: Callable) -> bool:
  """Whether ``factory``'s first parameter is the privacy value."""
  params = list(inspect.signature(factory).parameters)
  return bool(params) and params[0] == "privacy"


def wrap(factory: Callable, spec, aliases=None) -> Callable:
  """``factory`` (same signature, by ``functools.wraps``) behind the one
  entry (module docstring); ``spec``: its registration; ``aliases``: its
  earlier keywords' names for the value's fields (GEP's
  ``embedding_clip``). Its ``plan_of(privacy, **hyperparameters)`` reads
  its plan without building it; the estimator it builds holds the
  (calibrated) value as ``estimator.privacy``."""
  private = takes_privacy(factory)
  aliases = dict(aliases or {})

  @functools.wraps(factory)
  def build(*args, **kwargs):
    refuse_accounting_arguments(factory, kwargs)
    if not private:
      return factory(*args, **kwargs)
    privacy, kwargs = _privacy_of_call(factory, args, kwargs, aliases)
    privacy = resolve(privacy, build, spec, kwargs)
    estimator = factory(privacy, **kwargs)
    if hasattr(estimator, "__dict__"):  # a PrivateEstimator, not a NamedTuple
      estimator.privacy = privacy  # the value it was built from, calibrated
    return estimator

  if private:
    build.plan_of = lambda privacy, **hp: spec.plan_template(privacy, hp)
  return build


def _privacy_of_call(factory, args, kwargs, aliases):
  """``(privacy, the other keywords)`` of a call: the value given, or the
  one built from earlier releases' keywords (deprecated)."""
  if len(args) > 1:
    raise TypeError(
      f"{factory.__name__}(privacy, *, ...) takes the privacy value "
      "positionally and its other arguments by keyword."
    )
  kwargs = dict(kwargs)
  given = args[0] if args else kwargs.pop("privacy", None)
  legacy = {
    aliases.get(k, k): kwargs.pop(k)
    for k in list(kwargs)
    if k in LEGACY_KEYWORDS or k in aliases
  }
  if given is not None:
    if legacy:
      raise TypeError(
        f"{factory.__name__}() got a privacy value and the privacy keywords "
        f"{sorted(legacy)}: give them once, as fields of the value "
        "(privacy.replace(...))."
      )
    return given, kwargs
  if not legacy:
    raise TypeError(
      f"{factory.__name__}() needs its privacy value first: "
      f"{factory.__name__}(zoprivacy.Privacy(clip=1.0, sampling="
      "zoprivacy.Poisson(dataset_size=n, expected_batch_size=B), target="
      "zoprivacy.Target(epsilon=2.0, delta=1e-5, num_steps=T)), ...)."
    )
  warnings.warn(
    f"{factory.__name__}(clip=..., noise_multiplier=..., "
    "expected_batch_size=..., ...) is deprecated: build the estimator from "
    f"one privacy value, {factory.__name__}(zoprivacy.Privacy(clip=..., "
    "noise_multiplier=..., sampling=zoprivacy.Poisson(dataset_size=n, "
    "expected_batch_size=B)), <its other arguments>), and draw the batches "
    "with privacy.sampler(). A value built from these keywords assumes its "
    "sampling: batches are checked only when they carry their selection.",
    DeprecationWarning,
    stacklevel=4,
  )
  return of_keywords(**legacy), kwargs


def of_keywords(
  *,
  clip=None,
  noise_multiplier=None,
  expected_batch_size=None,
  dataset_size=None,
  noise="exact",
  grid_points=1024,
  insecure_test_noise_seed=None,
  exact_noise=None,
  **fields,
) -> value_lib.Privacy:
  """The value earlier releases' privacy keywords describe (it assumes its
  sampling). ``exact_noise`` is refused with the name of its replacement."""
  if exact_noise is not None:
    raise TypeError(
      "exact_noise= is gone: exact discrete noise is the default "
      "(zoprivacy.Exact()); floating-point noise is the explicit opt-in "
      "noise=zoprivacy.Float() (exposed to floating-point attacks), or "
      "noise=zoprivacy.SecureMode() (Opacus' defence)."
    )
  if noise not in _NOISES:
    raise ValueError(f"noise must be one of {tuple(_NOISES)}, got {noise!r}.")
  kind = _NOISES[noise](grid_points) if noise == "exact" else _NOISES[noise]()
  if insecure_test_noise_seed is not None:
    kind = value_lib.TestNoise(int(insecure_test_noise_seed), kind)
  sampling = None
  if expected_batch_size is not None:
    size, n = validation.batch_size_and_dataset(
      _number("expected_batch_size", expected_batch_size), dataset_size
    )
    sampling = BatchSelection("poisson", n, size)
  fields.update(clip=clip, noise=kind, noise_multiplier=noise_multiplier)
  return value_lib.Privacy(sampling=sampling, assume_sampling=True, **fields)


def _number(name, x):
  if not validation.is_real(x):
    raise TypeError(
      f"{name} is a privacy hyperparameter and must be a static Python "
      "number: it fixes the privacy plan the accountant reads."
    )
  return x


def resolve(privacy, factory, spec, hyperparameters) -> value_lib.Privacy:
  """The value ``factory`` is built from: checked against its
  registration, calibrated on its own plan when it holds only a target,
  and, holding both, checked to meet the target with that plan."""
  if not isinstance(privacy, value_lib.Privacy):
    raise TypeError(
      f"{spec.name}'s first argument is its privacy value, "
      f"zoprivacy.Privacy(...), got {type(privacy).__name__}."
    )
  if (
    privacy.sampling is not None and privacy.sampling.name not in spec.sampling
  ):
    schemes = " or ".join(repr(s) for s in spec.sampling)
    raise value_lib.PrivacyValueError(
      f"{spec.name}'s privacy is accounted under {schemes} sampling, not "
      f"{privacy.sampling.name!r}: the epsilon it reports would not hold "
      "for these batches."
    )
  if privacy.noise_multiplier is None:
    if privacy.target is None:
      return privacy  # the factory's privatization says what is missing
    return privacy.calibrate(estimator=factory, **hyperparameters)
  if privacy.target is not None:
    _check_target(privacy, spec, hyperparameters)
  return privacy


def _check_target(privacy, spec, hyperparameters) -> None:
  plan = spec.plan_template(privacy, hyperparameters)
  if privacy.calibrated_plan is not None and plan == privacy.calibrated_plan:
    return
  t = privacy.target
  spent = plan.epsilon(t.num_steps, t.delta)
  if spent > t.epsilon:
    raise value_lib.PrivacyValueError(
      f"{spec.name} with noise multiplier {privacy.noise_multiplier:.4g} "
      f"spends epsilon {spent:.4g} over {t.num_steps} steps, above the "
      f"value's target {t.epsilon:g}: the value was calibrated for another "
      "estimator's plan (or set by hand). Give the estimator the value "
      "without its multiplier (privacy.replace(noise_multiplier=None)) and "
      "it calibrates on its own plan."
    )


def refuse_accounting_arguments(factory: Callable, kwargs) -> None:
  """``target_epsilon=`` (or ``delta=``, ...) given to a factory: one
  paragraph naming the value's target, instead of Python's bare
  "unexpected keyword argument"."""
  takes = inspect.signature(factory).parameters
  given = [a for a in ACCOUNTING_ARGUMENTS if a in kwargs and a not in takes]
  if not given:
    return
  name, what = factory.__name__, " or ".join(given)
  if "setting" in takes:
    raise TypeError(
      f"{name}() takes no {what}: its noise comes from its setting=..., "
      "built from a privacy value: zoprivacy.hidden_state.setting_of_privacy("
      "zoprivacy.Privacy(noise=zoprivacy.SecureMode(), neighboring="
      "'replace_one', sampling=zoprivacy.FullBatch(n), target=zoprivacy."
      "Target(epsilon=..., delta=..., num_steps=T)), dimension=d, "
      "num_directions=K, step_size=eta, radius=R, ...) calibrates it."
    )
  if "privacy" not in takes and "noise_multiplier" not in takes:
    raise TypeError(
      f"{name}() takes no {what}: it is a non-private baseline (no noise, "
      "no epsilon). Use a private estimator (zoprivacy.dpzero, ...) built "
      "from a zoprivacy.Privacy value with a target."
    )
  raise TypeError(
    f"{name}() takes no {what}: an estimator is built from its privacy "
    "value, and the noise multiplier that meets a target epsilon depends on "
    "the whole run (its steps and sampling rate). Put the target in the "
    f"value and the estimator calibrates it: zoprivacy.{name}(zoprivacy."
    "Privacy(sampling=zoprivacy.Poisson(dataset_size=n, "
    "expected_batch_size=B), target=zoprivacy.Target(epsilon=2.0, "
    "delta=1e-5, num_steps=T)), <its other arguments>) (docs/library.md). "
    "Or set noise_multiplier= in the value and read the epsilon spent with "
    "zoprivacy.epsilon(state, delta)."
  )
