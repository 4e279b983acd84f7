"""Noisy-ZOGD's setting from the run's one privacy value.

::

    privacy = zoprivacy.Privacy(
        clip=2.0,
        noise=zoprivacy.SecureMode(),
        neighboring="replace_one",
        sampling=zoprivacy.FullBatch(n),
        target=zoprivacy.Target(epsilon=2.0, delta=1e-5, num_steps=200),
    )
    setting = zoprivacy.hidden_state.setting_of_privacy(
        privacy, dimension=d, num_directions=K, step_size=eta, radius=R,
        smoothing=xi, assumptions=zoprivacy.hidden_state.LossAssumptions(...))
    tx = zoprivacy.noisy_zogd_chain(setting)

:func:`setting_of_privacy` takes from the value everything it holds: the
clip ``Delta`` (``None``: :data:`DEFAULT_CLIP`), the dataset size ``n``
and the batch size ``b`` (:func:`zoprivacy.FullBatch` or
:func:`zoprivacy.WithoutReplacement`) and the noise, as the value's
``noise_multiplier`` or its :class:`~zoprivacy.Target` (calibrated by the
library's one calibration, :func:`zoprivacy.privacy.calibrate`, on the
setting's composition plan). The other arguments are the mechanism's own.

**The noise multiplier and the paper's sigma.** The value's
``noise_multiplier`` is the composition plan's per-step multiplier (what
the ledger and every report read): for eq. (3)'s total noise std ``sigma``

  noise_multiplier = (b sigma / Delta) sqrt(beta + (1 - beta) K / d),

at the smallest ``beta`` of a schedule
(:func:`zoprivacy.hidden_state.privacy.plan_multiplier`, the one place
this relation is written; :func:`noise_multiplier_of_std` gives it for a
``sigma`` in the paper's units).

Refused, each in one paragraph: Poisson sampling or none (App. A.9
analyses batches drawn without replacement; no plan amplifies them);
add-or-remove neighbours (the analysis is replace-one); a mechanism other
than ``'gaussian'``; ``num_queries`` other than 1 or ``K`` (``K`` is
``num_directions``); ``assume_sampling=True`` (the final-iterate analysis
needs the selection it names, and an assumed one is not checked); and a
noise other than :class:`zoprivacy.SecureMode` (or
:class:`zoprivacy.TestNoise` of it): the estimator draws float32 Gaussians
with the secure-mode defence, then snaps its step to a fine lattice with
exact discrete noise
(:func:`zoprivacy.secret_noise.vector_discrete_mechanism.snap_to_lattice`),
which is neither :class:`zoprivacy.Exact` noise on a grid nor plain
:class:`zoprivacy.Float` noise. A :class:`zoprivacy.TestNoise` value's
seed is the factory's ``insecure_test_noise_seed=privacy.test_seed``.
"""

from __future__ import annotations

from zoprivacy.accounting import relations
from zoprivacy.hidden_state import privacy as privacy_lib
from zoprivacy.hidden_state import setting as setting_lib
from zoprivacy.mechanisms import registry as mechanism_registry
from zoprivacy.mechanisms import values
from zoprivacy.privacy import calibration
from zoprivacy.privacy import value as value_lib

DEFAULT_CLIP = 2.0  # Delta when the value leaves its clip to the estimator
SAMPLINGS = ("full_batch", "without_replacement")


def setting_of_privacy(
  privacy: value_lib.Privacy,
  *,
  dimension: int,
  num_directions: int,
  step_size: float,
  radius: float,
  smoothing: float = 0.0,
  directional_fraction: float | tuple[float, ...] = 0.5,
  assumptions: setting_lib.LossAssumptions | None = None,
) -> setting_lib.NoisyZOGDSetting:
  """The :class:`~zoprivacy.hidden_state.NoisyZOGDSetting` of ``privacy``
  (module docstring): ``sigma`` from its multiplier, or calibrated for its
  target; a value holding both is checked to meet its target."""
  setting = _unit_setting(
    privacy,
    dimension=dimension,
    num_directions=num_directions,
    step_size=step_size,
    radius=radius,
    smoothing=smoothing,
    directional_fraction=directional_fraction,
    assumptions=assumptions,
  )
  target = privacy.target
  if privacy.noise_multiplier is None:
    if target is None:
      raise value_lib.PrivacyValueError(
        "Noisy-ZOGD's privacy value sets no noise: give it noise_multiplier="
        " (the plan's per-step multiplier; from eq. (3)'s sigma: zoprivacy."
        "hidden_state.noise_multiplier_of_std) or target=zoprivacy.Target("
        "epsilon, delta, num_steps) to calibrate."
      )
    plan = calibration.calibrate(privacy_lib.composition_plan(setting), target)
    return privacy_lib.with_plan_multiplier(setting, plan.noise_multiplier)
  setting = privacy_lib.with_plan_multiplier(setting, privacy.noise_multiplier)
  if target is not None:
    _check_target(privacy, privacy_lib.composition_plan(setting))
  return setting


def _check_target(privacy, plan) -> None:
  """A value holding a multiplier and a target: the multiplier meets it."""
  t = privacy.target
  spent = plan.epsilon(t.num_steps, t.delta)
  if spent <= t.epsilon:
    return
  raise value_lib.PrivacyValueError(
    f"Noisy-ZOGD at noise multiplier {privacy.noise_multiplier:.4g} spends "
    f"epsilon {spent:.4g} over {t.num_steps} steps, above the value's target"
    f" {t.epsilon:g}. Give the value without its multiplier (privacy.replace("
    "noise_multiplier=None)): it is then calibrated on this setting's plan."
  )


def noise_multiplier_of_std(
  noise_std: float, privacy: value_lib.Privacy, **hyperparameters
) -> float:
  """The value's ``noise_multiplier`` that gives eq. (3)'s ``sigma =
  noise_std`` (the paper's units) for ``privacy``'s clip and batch and the
  setting's other ``hyperparameters`` (:func:`setting_of_privacy`'s)."""
  unit = _unit_setting(privacy, **hyperparameters)
  return privacy_lib.plan_multiplier(unit.replace(noise_std=noise_std))


def _unit_setting(privacy, **hyperparameters) -> setting_lib.NoisyZOGDSetting:
  """The setting of ``privacy`` at ``sigma = 1`` (every check but the
  noise's scale)."""
  check(privacy)
  checked_queries(privacy, hyperparameters["num_directions"])
  sampling = privacy.sampling
  batch = None
  if sampling.name != "full_batch":
    batch = int(sampling.expected_batch_size)
  return setting_lib.NoisyZOGDSetting(
    dataset_size=sampling.dataset_size,
    batch_size=batch,
    noise_std=1.0,
    clip=DEFAULT_CLIP if privacy.clip is None else privacy.clip,
    **hyperparameters,
  )


def check(privacy) -> None:
  """Refuses, in one paragraph, a value Noisy-ZOGD cannot honour (module
  docstring) but for its ``num_queries`` (:func:`checked_queries`)."""
  if not isinstance(privacy, value_lib.Privacy):
    raise TypeError(
      "Noisy-ZOGD's setting is built from a zoprivacy.Privacy value, got "
      f"{type(privacy).__name__}."
    )
  sampling = privacy.sampling
  if sampling is None or sampling.name not in SAMPLINGS:
    got = "no sampling" if sampling is None else f"{sampling.name!r} sampling"
    raise value_lib.PrivacyValueError(
      f"Noisy-ZOGD's privacy value has {got}: its analysis (Thm 3.2, App. "
      "A.9) covers the full batch, sampling=zoprivacy.FullBatch(n), or "
      "batches drawn without replacement afresh each step, sampling="
      "zoprivacy.WithoutReplacement(dataset_size=n, batch_size=b); Poisson "
      "sampling is not analysed."
    )
  if privacy.assume_sampling:
    raise value_lib.PrivacyValueError(
      "Noisy-ZOGD does not take assume_sampling=True: its final-iterate "
      "epsilon (Thm 3.2, App. A.9) holds for the full batch or for batches "
      "drawn without replacement afresh each step, and an assumed selection "
      "is not checked. Give the whole dataset each step (sampling=zoprivacy."
      "FullBatch(n)), or draw the batches with privacy.sampler(), whose "
      "batches carry their selection."
    )
  if relations.relation(privacy.neighboring) is not relations.REPLACE_ONE:
    raise value_lib.PrivacyValueError(
      f"Noisy-ZOGD is analysed under replace-one neighbours, not "
      f"{privacy.neighboring!r} (a full batch's divisor n would reveal an "
      "added or removed example): give neighboring='replace_one'."
    )
  if mechanism_registry.get(privacy.mechanism) is not values.Gaussian:
    raise value_lib.PrivacyValueError(
      f"Noisy-ZOGD adds Gaussian noise (eq. (3)), not {privacy.mechanism!r}:"
      " give mechanism='gaussian' (the default)."
    )
  noise = privacy.noise
  kind = noise.of if isinstance(noise, value_lib.TestNoise) else noise
  if not isinstance(kind, value_lib.SecureMode):
    raise value_lib.PrivacyValueError(
      f"Noisy-ZOGD cannot draw {type(kind).__name__}() noise: its "
      "hidden-state analysis assumes continuous Gaussians, which it draws in "
      "float32 with the secure-mode defence and then snaps to a fine lattice "
      "with exact discrete noise. Give noise=zoprivacy.SecureMode() (or "
      "TestNoise(seed, of=zoprivacy.SecureMode()) for tests)."
    )


def checked_queries(privacy, num_directions: int) -> None:
  """A value's ``num_queries`` is 1 (the default) or ``K``."""
  if privacy.num_queries not in (1, num_directions):
    raise value_lib.PrivacyValueError(
      f"Noisy-ZOGD releases K = num_directions = {num_directions} sums per "
      f"step; the value's num_queries={privacy.num_queries} says otherwise. "
      "Leave num_queries at 1 (K comes from num_directions)."
    )
