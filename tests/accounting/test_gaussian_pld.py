"""The accountant's PLD of a (Poisson-sampled) Gaussian, its one-step PMFs
built with numpy: the same PLD as dp_accounting's ``PLDAccountant``, bit for
bit, for every event it takes over; every other event is the accountant's."""

import math

import dp_accounting
import numpy as np
import pytest
from pld_equality import assert_same_pld

from zoprivacy.accounting import dp_accounting_adapter as adapter
from zoprivacy.accounting import epsilon as eps_lib
from zoprivacy.accounting import gaussian_pld

ADD_OR_REMOVE = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
REPLACE_ONE = dp_accounting.NeighboringRelation.REPLACE_ONE


def _events(seed: int, count: int, steps):
  rng = np.random.default_rng(seed)
  for _ in range(count):
    sigma = float(np.exp(rng.uniform(math.log(0.3), math.log(30.0))))
    q = float(rng.choice([1.0, 10 ** rng.uniform(-3, -0.3)]))
    inner = dp_accounting.GaussianDpEvent(sigma)
    full = q == 1.0 and bool(rng.integers(2))
    event = inner if full else dp_accounting.PoissonSampledDpEvent(q, inner)
    t = int(rng.choice(steps))
    yield (
      dp_accounting.SelfComposedDpEvent(event, min(t, 10) if q == 1 else t),
      float(rng.choice([1e-4, 1e-3])),
      float(10 ** rng.uniform(-8, -3)),
    )


def _check(event, interval, delta):
  ours = gaussian_pld.event_pld(event, ADD_OR_REMOVE, interval)
  theirs = adapter.accountant_pld(event, ADD_OR_REMOVE, interval)
  assert_same_pld(ours, theirs)
  mine = ours.get_epsilon_for_delta(delta)
  assert mine == theirs.get_epsilon_for_delta(delta)  # never below, equal


@pytest.mark.parametrize(
  "event, interval, delta",
  list(_events(0, 6, steps=(1, 3)))
  + [
    # A calibration of the default run for one step: multiplier 0.76 (at
    # a coarse grid: the accountant takes seconds at 1e-4, the slow test).
    (
      dp_accounting.PoissonSampledDpEvent(
        64 / 1437, dp_accounting.GaussianDpEvent(0.76)
      ),
      1e-3,
      1e-5,
    )
  ],
)
def test_random_events_equal_the_accountant(event, interval, delta):
  _check(event, interval, delta)


@pytest.mark.slow
@pytest.mark.parametrize(
  "event, interval, delta", list(_events(1, 50, steps=(1, 10, 300, 4000)))
)
def test_fifty_random_events_equal_the_accountant(event, interval, delta):
  _check(event, interval, delta)


def test_other_events_and_relations_are_left_to_the_accountant():
  gaussian = dp_accounting.GaussianDpEvent(1.0)
  laplace = dp_accounting.PoissonSampledDpEvent(
    0.1, dp_accounting.LaplaceDpEvent(1.0)
  )
  sampled = dp_accounting.PoissonSampledDpEvent(0.1, gaussian)
  assert gaussian_pld.event_pld(laplace, ADD_OR_REMOVE, 1e-3) is None
  assert gaussian_pld.event_pld(sampled, REPLACE_ONE, 1e-3) is None
  composed = dp_accounting.ComposedDpEvent([gaussian, sampled])
  assert gaussian_pld.event_pld(composed, ADD_OR_REMOVE, 1e-3) is None
  # The epsilon functions route through it (and their cache).
  eps_lib._lru_pld.cache_clear()  # noqa: SLF001
  event = dp_accounting.SelfComposedDpEvent(sampled, 20)
  ours = eps_lib.pld_epsilon(
    event, delta=1e-5, value_discretization_interval=1e-3
  )
  theirs = adapter.accountant_pld(event, ADD_OR_REMOVE, 1e-3)
  assert ours == theirs.get_epsilon_for_delta(1e-5)
