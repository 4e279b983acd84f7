"""The runner's hooks for estimators declared ``takes_setting`` (Noisy-ZOGD).

The estimator's registry declaration
(:class:`zoprivacy.estimators.registry.EstimatorSpec`) says its factory
takes a :class:`~zoprivacy.hidden_state.NoisyZOGDSetting`; this module
builds it from the run's privacy value (its typed settings'
:attr:`~experiments.run.settings.RunPrivacy.value`) by
:func:`zoprivacy.hidden_state.setting_of_privacy`, so the clip, the batch
size, the dataset size and the noise come from one place. Everything else
(the privacy plan in the state, the ledger, result.json) follows the
runner's ordinary path.

* :func:`preflight` checks the hyperparameters against Thm 3.2 from the
  settings alone, before any data is loaded: ``d >= 2K``, ``R > 0``, the
  directional fraction in [0, 1], the step size limit, the declared loss
  assumptions (the clip must cover the Lipschitz constant) and the privacy
  value (secure-mode Gaussian noise, replace-one neighbours, full batch or
  batches without replacement).
* :func:`factory_kwargs` gives the factory its setting once the settings
  are bound to the dataset size (calibrated for ``privacy.target_epsilon`` by the library's
  calibration).
* :func:`published_outputs` lists what the run publishes from intermediate
  iterates; :func:`experiments.run.final_iterate.final_iterate` refuses the
  final-iterate epsilon when the list is not empty, and computes it from
  the ledger's record of the setting otherwise (``docs/hidden_state.md``).

Config fields: ``privacy`` (``clip``, the ``Delta`` of the setting, default
2.0; ``noise``, 'secure_mode'; ``neighboring``, 'replace_one';
``sampling``, 'full_batch' or 'without_replacement' with
``expected_batch_size`` as the batch size; ``delta``; the noise, as
``noise_multiplier`` or ``target_epsilon``), ``estimator_kwargs``
(``num_directions``, ``smoothing``, ``directional_fraction``; defaults
from the registry; ``noise_std``, eq. (3)'s sigma, the paper's unit of the
noise: an alias of ``privacy.noise_multiplier``, converted by
:func:`privacy_value`; any other key goes to the factory),
``learning_rate`` (the step size ``eta``; ``None``: the theorem's limit,
``K/M`` for a strongly convex loss), ``radius``, ``l2`` and
``hidden_state`` (``report``, ``checkpoints_private``).
"""

from __future__ import annotations

from typing import Any

from experiments.run import privacy_config, progress
from experiments.run.settings import Settings, thaw
from experiments.tasks import logreg
from zoprivacy.hidden_state import from_privacy
from zoprivacy.hidden_state import setting as setting_lib
from zoprivacy.privacy import value as value_lib

SETTING_FIELDS = ("num_directions", "smoothing", "directional_fraction")
# eq. (3)'s sigma: an alias of privacy.noise_multiplier (privacy_value).
NOISE_STD = "noise_std"


def _kwargs(settings: Settings, spec) -> dict[str, Any]:
  """The registered defaults and the ``estimator_kwargs``."""
  kw = dict(spec.defaults)
  kw.update(thaw(settings.estimator_kwargs))
  return kw


def _assumptions(settings: Settings, spec) -> setting_lib.LossAssumptions:
  if settings.dataset not in ("digits_logreg", "fashion_mnist_logreg"):
    raise ValueError(
      f"Noisy-ZOGD's final-iterate epsilon needs declared loss assumptions; "
      f"the task {settings.dataset!r} declares none. Use digits_logreg or "
      "fashion_mnist_logreg, or set hidden_state.report=False."
    )
  return logreg.assumptions(
    settings.field("l2"),
    settings.field("radius"),
    _kwargs(settings, spec)["smoothing"],
  )


def _dataset(settings: Settings) -> str:
  return settings.dataset.removesuffix("_logreg")


def hyperparameters(settings: Settings, *, spec) -> dict[str, Any]:
  """:func:`zoprivacy.hidden_state.setting_of_privacy`'s arguments but the
  privacy value: ``d``, ``K``, ``eta``, ``R``, ``xi``, ``beta`` and the
  declared loss."""
  kw = _kwargs(settings, spec)
  fraction = kw.get("directional_fraction", 0.5)
  if isinstance(fraction, list):
    fraction = tuple(fraction)
  report = settings.hidden_state.report
  assumptions = _assumptions(settings, spec) if report else None
  k = kw["num_directions"]
  eta = settings.learning_rate
  if eta is None:
    if assumptions is None:
      raise ValueError("Set learning_rate (the step size eta).")
    eta = setting_lib.step_size_limit(assumptions, k)
  return dict(
    dimension=logreg.dimension(_dataset(settings)),
    num_directions=k,
    step_size=float(eta),
    radius=settings.field("radius"),
    smoothing=kw["smoothing"],
    directional_fraction=fraction,
    assumptions=assumptions,
  )


def privacy_value(
  settings: Settings, dataset_size: int, *, spec
) -> value_lib.Privacy:
  """The run's privacy value on ``dataset_size`` examples
  (:meth:`experiments.run.settings.RunPrivacy.on`) with ``estimator_kwargs.noise_std``, eq. (3)'s sigma, read as its
  ``noise_multiplier`` (the one conversion:
  :func:`zoprivacy.hidden_state.noise_multiplier_of_std`); refused next to
  a ``privacy.noise_multiplier`` or ``privacy.target_epsilon``."""
  privacy = settings.privacy.on(dataset_size)
  sigma = settings.estimator_kwargs.get(NOISE_STD)
  if sigma is None:
    return privacy
  given = {
    "noise_multiplier": settings.privacy.base.noise_multiplier,
    "target_epsilon": settings.privacy.target_epsilon,
  }
  both = [f"privacy.{k}={v!r}" for k, v in given.items() if v is not None]
  if both:
    raise ValueError(
      f"{spec.name}'s noise is set twice: estimator_kwargs.noise_std={sigma!r}"
      f" (eq. (3)'s sigma) and {' and '.join(both)}. Keep one: "
      "--config.estimator_kwargs.noise_std=None, or "
      "--config.privacy.target_epsilon=None and "
      "--config.privacy.noise_multiplier=None."
    )
  multiplier = from_privacy.noise_multiplier_of_std(
    float(sigma), privacy, **hyperparameters(settings, spec=spec)
  )
  return privacy.replace(noise_multiplier=multiplier)


def make_setting(
  settings: Settings, dataset_size: int, *, spec
) -> setting_lib.NoisyZOGDSetting:
  """The run's setting, from its privacy value (calibrated for
  ``privacy.target_epsilon`` when it sets no multiplier)."""
  privacy = privacy_value(settings, dataset_size, spec=spec)
  if privacy.noise_multiplier is None and privacy.target is not None:
    progress.stage(
      f"calibrating the noise for epsilon {privacy.target.epsilon:g}"
    )
  return from_privacy.setting_of_privacy(
    privacy, **hyperparameters(settings, spec=spec)
  )


def noise_source(settings: Settings) -> str:
  """Where the run's noise comes from, for the report's ``how``."""
  privacy = settings.privacy
  if privacy.base.noise_multiplier is not None:
    return "set by noise_multiplier"
  if privacy.target is not None:
    return f"calibrated for target epsilon {privacy.target.epsilon:g}"
  if settings.estimator_kwargs.get(NOISE_STD) is not None:
    return "set by estimator_kwargs.noise_std (eq. (3)'s sigma)"
  raise ValueError(
    "Set privacy.target_epsilon or privacy.noise_multiplier (or Noisy-ZOGD's"
    " estimator_kwargs.noise_std, eq. (3)'s sigma) for a private run."
  )


def preflight(settings: Settings, *, spec) -> None:
  """Every check that needs no data (a stand-in dataset size is used; the
  noise is only checked to be set, not calibrated)."""
  moved = [
    k
    for k in settings.estimator_kwargs
    if privacy_config.new_name(f"estimator_kwargs.{k}")
  ]
  if moved:
    raise ValueError(
      f"{spec.name} does not take "
      + ", ".join(
        privacy_config.moved_hint(f"estimator_kwargs.{k}") for k in moved
      )
      + ": its setting's clip and noise are the privacy block's."
    )
  noise_source(settings)
  p = settings.privacy
  stand_in = 1 if p.sampling == "full_batch" else int(p.expected_batch_size)
  privacy = privacy_value(settings, stand_in, spec=spec)
  if privacy.noise_multiplier is None:  # calibrated on the data's size
    privacy = privacy.replace(noise_multiplier=1.0, target=None)
  from_privacy.setting_of_privacy(
    privacy, **hyperparameters(settings, spec=spec)
  )


def factory_kwargs(settings: Settings, *, spec) -> dict[str, Any]:
  """The factory's ``setting=`` (from the run's privacy value, ``settings``
  bound to the dataset size), its test seed (the value's
  :class:`zoprivacy.TestNoise`) and the other ``estimator_kwargs``."""
  kw = _kwargs(settings, spec)
  extra = {
    k: v for k, v in kw.items() if k not in SETTING_FIELDS and k != NOISE_STD
  }
  setting = make_setting(settings, settings.privacy.dataset_size, spec=spec)
  seed = settings.privacy.base.test_seed
  if seed is not None:
    extra["insecure_test_noise_seed"] = seed
  return dict(extra, setting=setting)


def published_outputs(settings: Settings, history=()) -> list[str]:
  """Outputs computed from intermediate iterates that the run publishes
  (``settings``'), or that an earlier attempt published (``history``: the
  run's metrics rows, kept across resumes)."""
  out = []
  every, steps = settings.eval_every, settings.num_steps
  earlier = sorted({r["step"] for r in history if 0 < r["step"] < steps})
  if earlier and not (every and every < steps):
    out.append(
      f"test accuracy of intermediate iterates (steps {earlier[0]}.."
      f"{earlier[-1]}, evaluated before a resume)"
    )
  if every and every < steps:
    out.append(
      f"test accuracy of intermediate iterates (eval_every={every},"
      " also shown in the progress bar)"
    )
  ckpt = settings.checkpoint_every
  if (
    settings.workdir
    and ckpt
    and ckpt < steps
    and not settings.hidden_state.checkpoints_private
  ):
    out.append(
      f"intermediate checkpoints (checkpoint_every={ckpt}) not "
      "declared private (hidden_state.checkpoints_private)"
    )
  if settings.trajectory_log:
    out.append(
      "the trajectory log (trajectory_log) publishes intermediate iterates"
    )
  return out
