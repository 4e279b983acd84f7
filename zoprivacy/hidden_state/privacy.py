"""Noisy-ZOGD's privacy plan (composition view) and final-iterate report,
both from the same setting the mechanism runs.

:func:`composition_plan` is the :class:`zoprivacy.privacy.PrivacyPlan` the
estimator puts into its state, so the ledger, the calibration,
``result.json`` and the report see an ordinary step (Thm 3.1, every iterate
published): one replace-one Gaussian release of the ``K`` clipped sums on
the full batch, whose noise multiplier (std over one example's bound
``sqrt(K) Delta / b``) is ``2 x`` :func:`zoprivacy.hidden_state.baselines.
composition_step_multiplier` (the replace-one factor 2 is paid by the
accountant, ``docs/conventions.md`` §3).

* Mini-batches (App. A.9, ``b`` of ``n`` drawn without replacement) have no
  Poisson amplification the plan could express: they are charged as
  full-batch steps, which is an upper bound, and the plan's notes say so.
  The amplified composition figure (WBK'19) is in the final-iterate report.
* A schedule of directional fractions is charged at its noisiest-for-privacy
  step (smallest multiplier) for every step; the notes say so.

:func:`final_iterate` gives the hidden-state, composition and
output-perturbation epsilons of the final iterate (the extra report).

The plan records every other parameter of Thm 3.2 in its ``analysis``
(:func:`analysis_of`: ``d``, ``n``, ``K``, ``eta``, ``Delta``, ``R``,
``xi``, ``beta``, ``b`` and the declared loss; ``sigma`` is the plan's
multiplier), so a ledger's segments hold the setting each step ran under
and :func:`setting_of_plan` rebuilds it from the ledger alone.
"""

from __future__ import annotations

import dataclasses

from zoprivacy.hidden_state import baselines
from zoprivacy.hidden_state import report as report_lib
from zoprivacy.hidden_state import setting as setting_lib
from zoprivacy.privacy import plan as plan_lib


def _fractions(setting: setting_lib.NoisyZOGDSetting) -> tuple[float, ...]:
  fraction = setting.directional_fraction
  return tuple(fraction) if isinstance(fraction, tuple) else (fraction,)


def plan_multiplier(setting: setting_lib.NoisyZOGDSetting) -> float:
  """The plan's per-step noise multiplier (smallest over a schedule)."""
  return min(
    2.0 * baselines.composition_step_multiplier(setting, beta)
    for beta in _fractions(setting)
  )


def composition_plan(
  setting: setting_lib.NoisyZOGDSetting,
  *,
  insecure_test_noise_seed: int | None = None,
) -> plan_lib.PrivacyPlan:
  """The per-step :class:`~zoprivacy.privacy.PrivacyPlan` (Thm 3.1)."""
  notes = [
    "Noisy-ZOGD (Chien, Chen & Li) composition view, Thm 3.1: every "
    "iterate counted as published"
  ]
  if not setting.full_batch:
    notes.append(
      f"mini-batches of {setting.batch_size} drawn without "
      "replacement are charged as full-batch steps (no "
      "amplification by sampling)"
    )
  if len(_fractions(setting)) > 1:
    notes.append(
      "a directional-fraction schedule is charged at its "
      "smallest noise multiplier at every step"
    )
  return plan_lib.PrivacyPlan.build(
    mechanism="gaussian",
    noise_multiplier=plan_multiplier(setting),
    clip=float(setting.clip),
    num_queries=int(setting.num_directions),
    neighboring="replace_one",
    sampling="full_batch",
    expected_batch_size=float(setting.divisor),
    dataset_size=int(setting.dataset_size),
    noise_source=(
      "os_entropy" if insecure_test_noise_seed is None else "insecure_test_seed"
    ),
    notes=tuple(notes),
    float_defence="secure_mode",  # the estimator's Gaussians (Opacus' defence)
    analysis=analysis_of(setting),
  )


ANALYSIS = "noisy_zogd_final_iterate"
_LOSS = ("smoothness", "lipschitz", "strong_convexity", "convex")


def analysis_of(setting: setting_lib.NoisyZOGDSetting) -> dict:
  """The plan's record of ``setting``: every field but ``noise_std`` (the
  plan's multiplier gives it), the declared loss as ``loss_*`` fields."""
  out = {
    f.name: getattr(setting, f.name)
    for f in dataclasses.fields(setting)
    if f.name not in ("noise_std", "assumptions")
  }
  if setting.assumptions is not None:
    out.update({f"loss_{k}": getattr(setting.assumptions, k) for k in _LOSS})
  return {"kind": ANALYSIS, **out}


def setting_of_plan(plan) -> setting_lib.NoisyZOGDSetting | None:
  """The setting a Noisy-ZOGD plan was built from (``sigma`` from its
  multiplier), or ``None`` for a plan that records none (another estimator,
  or a ledger written before plans recorded it)."""
  record = dict(plan.analysis)
  if record.pop("kind", None) != ANALYSIS:
    return None
  loss = {k: record.pop(f"loss_{k}") for k in _LOSS if f"loss_{k}" in record}
  setting = setting_lib.NoisyZOGDSetting(
    **record,
    noise_std=1.0,
    assumptions=setting_lib.LossAssumptions(**loss) if loss else None,
  )
  return with_plan_multiplier(setting, plan.noise_multiplier)


def with_plan_multiplier(
  setting: setting_lib.NoisyZOGDSetting, noise_multiplier: float
) -> setting_lib.NoisyZOGDSetting:
  """The setting whose plan has ``noise_multiplier`` (``sigma`` rescaled).

  The plan's multiplier is linear in ``sigma``, so calibrating a plan for a
  target epsilon calibrates ``sigma``.
  """
  scale = float(noise_multiplier) / plan_multiplier(setting)
  return setting.replace(noise_std=setting.noise_std * scale)


def final_iterate(
  setting: setting_lib.NoisyZOGDSetting,
  num_steps: int,
  delta: float,
  *,
  strict_output: bool = True,
) -> report_lib.FinalIterateReport:
  """Hidden-state, composition and output-perturbation epsilons.

  Raises ``ValueError`` if the loss assumptions were not declared.
  """
  return report_lib.final_iterate_report(
    setting, num_steps, delta, strict_output=strict_output
  )
