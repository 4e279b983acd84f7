"""Noisy-ZOGD's privacy spec: the ledger's composition view, and the
final-iterate report, from the same setting the mechanism runs.

:class:`NoisyZOGDPrivacy` is a :class:`zoprivacy.estimators.PrivacySpec`,
so everything that reads an estimator's ``privacy`` (the runner, the
ledger) sees an ordinary Gaussian step: each published step is one
replace-one Gaussian release of the ``K`` clipped sums, whose noise
multiplier (std over one example's bound ``sqrt(K) Delta``) is ``b sqrt(K
(beta/K + (1-beta)/d)) sigma / Delta`` (Thm 3.1; see
:mod:`zoprivacy.hidden_state.baselines`). The same object answers the
final-iterate question with :meth:`NoisyZOGDPrivacy.final_iterate`.
"""

from __future__ import annotations

import dataclasses

import dp_accounting

from zoprivacy import mechanisms
from zoprivacy.estimators import base
from zoprivacy.hidden_state import baselines
from zoprivacy.hidden_state import report as report_lib
from zoprivacy.hidden_state import setting as setting_lib


@dataclasses.dataclass(frozen=True)
class NoisyZOGDPrivacy(base.PrivacySpec):
  """Composition spec of a Noisy-ZOGD step plus its setting."""
  setting: setting_lib.NoisyZOGDSetting | None = None

  @classmethod
  def from_setting(cls, setting: setting_lib.NoisyZOGDSetting
                   ) -> NoisyZOGDPrivacy:
    return cls(cls._mechanism(setting, setting.fraction_at(0)),
               float(setting.divisor), setting.dataset_size, setting)

  @staticmethod
  def _mechanism(setting, beta) -> mechanisms.GaussianMechanism:
    multiplier = 2.0 * baselines.composition_step_multiplier(setting, beta)
    return mechanisms.GaussianMechanism(
        clip=setting.clip, noise_multiplier=multiplier,
        num_queries=setting.num_directions, neighboring="replace_one")

  @property
  def sampling(self) -> str:
    """``'full_batch'`` or ``'without_replacement'`` (App. A.9)."""
    return ("full_batch" if self.setting.full_batch
            else "without_replacement")

  def noise_multiplier_at(self, step: int) -> float:
    """The composition noise multiplier of step ``step`` (schedules vary)."""
    return self._mechanism(self.setting,
                           self.setting.fraction_at(step)).noise_multiplier

  def step_event(self, dataset_size: int | None = None,
                 step: int = 0) -> dp_accounting.DpEvent:
    del dataset_size
    event = dp_accounting.GaussianDpEvent(self.noise_multiplier_at(step))
    if self.setting.full_batch:
      return event
    return dp_accounting.SampledWithoutReplacementDpEvent(
        self.setting.dataset_size, self.setting.batch_size, event)

  def dp_event(self, num_steps: int,
               dataset_size: int | None = None) -> dp_accounting.DpEvent:
    del dataset_size
    counts: dict[float, int] = {}
    for beta in self.setting.fractions(int(num_steps)):
      counts[beta] = counts.get(beta, 0) + 1
    events = []
    for beta, count in counts.items():
      event = dp_accounting.GaussianDpEvent(
          self._mechanism(self.setting, beta).noise_multiplier)
      if not self.setting.full_batch:
        event = dp_accounting.SampledWithoutReplacementDpEvent(
            self.setting.dataset_size, self.setting.batch_size, event)
      events.append(dp_accounting.SelfComposedDpEvent(event, count))
    return events[0] if len(events) == 1 else dp_accounting.ComposedDpEvent(
        events)

  def epsilon(self, num_steps: int, delta: float,
              dataset_size: int | None = None) -> float:
    """Composition epsilon (every iterate published), replace-one.

    PLD for the full batch; RDP (Wang, Balle & Kasiviswanathan 2019) for
    batches sampled without replacement, which the PLD does not support.
    """
    from zoprivacy import accounting  # pylint: disable=g-import-not-at-top
    event = self.dp_event(num_steps, dataset_size)
    if self.setting.full_batch:
      return accounting.pld_epsilon(event, delta=delta,
                                    neighboring="replace_one")
    return accounting.rdp_epsilon(event, delta=delta,
                                  neighboring="replace_one")

  def final_iterate(self, num_steps: int, delta: float, *,
                    strict_output: bool = True
                    ) -> report_lib.FinalIterateReport:
    """Hidden-state, composition and output-perturbation epsilons.

    Raises ``ValueError`` if the loss assumptions were not declared.
    """
    return report_lib.final_iterate_report(self.setting, num_steps, delta,
                                           strict_output=strict_output)
