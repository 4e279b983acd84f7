"""The typed privacy plan: mechanism and sampling values, dp_accounting's
relation, a versioned JSON schema, and epsilons equal to dp_accounting's own
accountant on the plan's event."""

import dataclasses
import json
import math
import random

import dp_accounting
import pytest
from dp_accounting.pld import pld_privacy_accountant

from zoprivacy.accounting import discrete_pld
from zoprivacy.mechanisms import values as mech
from zoprivacy.privacy import PlanError, PrivacyPlan, sampling_scheme

DELTA = 1e-5

# The unversioned flat plan that result.json and checkpoints held before the
# schema (copied from a result.json written by the previous release).
OLD_PLAN = {
  "mechanism": "discrete_gaussian",
  "noise_multiplier": 1.25,
  "clip": 1.0,
  "num_queries": 1,
  "grid_points": 1024,
  "neighboring": "add_or_remove",
  "sampling": "poisson",
  "expected_batch_size": 16.0,
  "dataset_size": 1000,
  "noise_source": "os_entropy",
  "delta": 1e-5,
  "accountant": "pld",
  "notes": [],
  "float_defence": None,
}


def test_the_plan_holds_typed_values():
  plan = PrivacyPlan.from_dict(OLD_PLAN)
  assert plan.mechanism == mech.DiscreteGaussian(1.25, 1, 1024)
  assert plan.neighboring is dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
  assert plan.sampling == sampling_scheme.PoissonSampling(16.0, 1000)
  hash(plan)
  with pytest.raises(dataclasses.FrozenInstanceError):
    plan.clip = 2.0  # frozen


def test_an_old_plan_loads_and_round_trips_through_the_new_schema():
  plan = PrivacyPlan.from_dict(OLD_PLAN)
  data = json.loads(json.dumps(plan.to_dict()))
  assert data["schema"] == 2
  assert PrivacyPlan.from_dict(data) == plan
  assert plan.epsilon(100) == PrivacyPlan.from_dict(data).epsilon(100)


def test_an_unknown_schema_is_refused_clearly():
  data = {**PrivacyPlan.from_dict(OLD_PLAN).to_dict(), "schema": 3}
  with pytest.raises(PlanError, match="schema 3"):
    PrivacyPlan.from_dict(data)
  with pytest.raises(PlanError, match="Unknown mechanism|mechanism must be"):
    PrivacyPlan.from_dict({**OLD_PLAN, "mechanism": "skellam"})


def _reference(event, rel, delta=DELTA):
  accountant = pld_privacy_accountant.PLDAccountant(rel, 1e-4)
  accountant.compose(event)
  return accountant.get_epsilon(delta)


@pytest.mark.parametrize("seed", range(5))
def test_the_plan_epsilon_is_dp_accountings_on_its_own_event(seed):
  """Gaussian and Laplace, add/remove and replace-one, Poisson sampling:
  the plan's epsilon is dp_accounting's PLDAccountant on the plan's event."""
  rng = random.Random(seed)
  name = rng.choice(["gaussian", "laplace"])
  relation = rng.choice(["add_or_remove", "replace_one"])
  if name == "laplace":
    relation = "add_or_remove"
  plan = PrivacyPlan.build(
    mechanism=name,
    noise_multiplier=rng.uniform(0.8, 3.0),
    expected_batch_size=rng.randint(5, 60),
    dataset_size=1000,
    neighboring=relation,
  )
  steps = rng.randint(10, 300)
  event = dp_accounting.SelfComposedDpEvent(plan.step_event(), steps)
  expected = _reference(event, mech.relation(relation))
  assert plan.epsilon(steps, DELTA) == pytest.approx(expected, rel=1e-9)


def test_discrete_plans_use_the_mechanisms_pld_or_dp_accountings_event():
  gauss = PrivacyPlan.build(
    mechanism="discrete_gaussian",
    noise_multiplier=1.1,
    grid_points=64,
    expected_batch_size=20,
    dataset_size=1000,
  )
  assert gauss.step_event() is None  # dp_accounting has no such event
  direct = discrete_pld.discrete_noise_pld(
    sigma=1.1 * 64, sensitivity=64, sampling_probability=0.02, num_steps=50
  )
  assert gauss.epsilon(50, DELTA) == pytest.approx(
    direct.get_epsilon_for_delta(DELTA), rel=1e-9
  )
  full = PrivacyPlan.build(
    mechanism="discrete_laplace",
    noise_multiplier=2.0,
    grid_points=64,
    sampling="full_batch",
    expected_batch_size=20,
    dataset_size=1000,
  )
  event = full.step_event()
  assert isinstance(event, dp_accounting.dp_event.DiscreteLaplaceDpEvent)
  eps = full.epsilon(10, DELTA)
  assert eps == _reference(
    dp_accounting.SelfComposedDpEvent(event, 10), mech.ADD_OR_REMOVE
  )
  assert eps <= 10 / 2.0 + 1e-3  # ten 1/b-DP steps, pure
  assert math.isinf(PrivacyPlan.non_private().epsilon(5, DELTA))


def test_sampling_without_replacement_is_refused_when_accounted():
  plan = PrivacyPlan.build(
    mechanism="gaussian",
    noise_multiplier=1.0,
    sampling="without_replacement",
    expected_batch_size=10,
    dataset_size=100,
  )
  with pytest.raises(ValueError, match="SampledWithoutReplacement"):
    plan.epsilon(10, DELTA)
