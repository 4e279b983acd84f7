"""The one-step PLD cache: epsilons at successive step counts of one plan
equal dp_accounting's own accountant, whatever was computed before."""

import dp_accounting
import pytest
from dp_accounting.pld import pld_privacy_accountant

from zoprivacy import accounting as acc
from zoprivacy.accounting import discrete_pld
from zoprivacy.accounting import epsilon as eps_lib
from zoprivacy.privacy import PrivacyPlan

DELTA = 1e-5
P = 0.03  # = 30 / 1000, the plan below


def _reference(event, count):
  """A fresh dp_accounting PLDAccountant (no cache of ours involved)."""
  accountant = pld_privacy_accountant.PLDAccountant(
    value_discretization_interval=1e-4
  )
  accountant.compose(event, count)
  return accountant.get_epsilon(DELTA)


@pytest.mark.parametrize(
  "inner",
  [dp_accounting.GaussianDpEvent(2.0), dp_accounting.LaplaceDpEvent(1.5)],
  ids=["gaussian", "laplace"],
)
def test_epsilons_at_several_step_counts_equal_a_fresh_accountant(inner):
  step = dp_accounting.PoissonSampledDpEvent(P, inner)
  eps_lib._lru_pld.cache_clear()
  # Larger counts first, then smaller and repeated ones: a composition that
  # mutated a cached PLD would change every later answer.
  plan = PrivacyPlan.build(
    mechanism="gaussian"
    if isinstance(inner, dp_accounting.GaussianDpEvent)
    else "laplace",
    noise_multiplier=inner.noise_multiplier,
    expected_batch_size=30,
    dataset_size=1000,
  )
  for count in (300, 30, 1, 300, 120):
    ours = acc.pld_epsilon(
      dp_accounting.SelfComposedDpEvent(step, count), delta=DELTA
    )
    # The event is composed by dp_accounting's own accountant.
    assert ours == _reference(step, count), count
    assert plan.epsilon(count, DELTA) == ours, count


def test_discrete_noise_single_step_is_built_once_and_never_mutated():
  discrete_pld._single_pld.cache_clear()
  discrete_pld._composed_pld.cache_clear()
  kwargs = dict(sigma=64.0, sensitivity=32, sampling_probability=P)
  first = {
    t: discrete_pld.discrete_noise_pld(
      num_steps=t, **kwargs
    ).get_epsilon_for_delta(DELTA)
    for t in (200, 1, 50)
  }
  assert discrete_pld._single_pld.cache_info().misses == 1
  discrete_pld._composed_pld.cache_clear()  # recompose from the cached step
  for t, value in first.items():
    again = discrete_pld.discrete_noise_pld(num_steps=t, **kwargs)
    assert again.get_epsilon_for_delta(DELTA) == value, t
  # Against a PLD built from scratch without any cache of ours.
  fresh = (
    discrete_pld._single_pld.__wrapped__(
      discrete_pld.GAUSSIAN, 64.0, 32, P, 1e-4
    )
    .self_compose(200)
    .get_epsilon_for_delta(DELTA)
  )
  assert first[200] == fresh
