"""PrivacyLedger: recording plans, epsilon at any step, budget, JSON restarts."""

import json

import dp_accounting
import pytest
from dp_accounting.pld import pld_privacy_accountant

from zoprivacy import accounting as acc
from zoprivacy.privacy import PrivacyPlan
from zoprivacy.privacy.ledger import PrivacyBudgetExceededError, PrivacyLedger

DELTA = 1e-5


def _plan(sigma, p, mechanism="gaussian", **kw):
  return PrivacyPlan.build(
    mechanism=mechanism,
    noise_multiplier=sigma,
    clip=1.0,
    expected_batch_size=p * 10_000,
    dataset_size=10_000,
    **kw,
  )


RUN = [  # (num_steps, plan) of an uninterrupted run
  (300, _plan(2.0, 0.01)),
  (200, _plan(3.0, 0.02, "laplace")),
  (250, _plan(1.5, 0.01, num_queries=4)),
  (100, _plan(2.0, 0.01)),
]


def _record(ledger, run, chunk=None):
  for n, plan in run:
    done = 0
    while done < n:
      k = n - done if chunk is None else min(chunk, n - done)
      ledger.record(plan, k)
      done += k


def _reference(run):
  """An independent route: dp_accounting's own PLDAccountant on events."""
  ref = pld_privacy_accountant.PLDAccountant()
  for n, plan in run:
    inner = (
      dp_accounting.LaplaceDpEvent(plan.noise_multiplier)
      if plan.mechanism.name == "laplace"
      else dp_accounting.GaussianDpEvent(plan.noise_multiplier)
    )
    ref.compose(
      dp_accounting.PoissonSampledDpEvent(plan.sampling_probability, inner),
      n,
    )
  return ref.get_epsilon(DELTA)


def test_ledger_epsilon_matches_dp_accounting_composition():
  ledger = PrivacyLedger(delta=DELTA)
  _record(ledger, RUN)
  assert ledger.num_steps == 850
  assert len(ledger.segments) == 4
  assert ledger.epsilon() == pytest.approx(_reference(RUN), rel=1e-6)
  # Epsilon after 400 steps: the first segment and 100 steps of the second.
  assert ledger.epsilon(400) == pytest.approx(
    _reference([RUN[0], (100, RUN[1][1])]), rel=1e-6
  )
  assert ledger.epsilon(0) == 0.0
  eps_by_step = [ledger.epsilon(t) for t in (100, 300, 500, 750, 850)]
  assert eps_by_step == sorted(eps_by_step)
  assert ledger.epsilon(850) == ledger.epsilon()
  with pytest.raises(ValueError, match="num_steps"):
    ledger.epsilon(851)


def test_ledger_merges_single_steps_into_segments():
  a = PrivacyLedger(delta=DELTA)
  _record(a, RUN[:1], chunk=1)
  b = PrivacyLedger(delta=DELTA)
  _record(b, RUN[:1])
  assert a.segments == b.segments == ((RUN[0][1], 300),)
  assert a.epsilon() == b.epsilon()


def test_ledger_restart_from_json_gives_same_final_epsilon(tmp_path):
  full = PrivacyLedger(delta=DELTA)
  _record(full, RUN, chunk=50)
  first = PrivacyLedger(delta=DELTA)
  _record(first, RUN[:2] + [(120, RUN[2][1])], chunk=50)  # interrupted
  path = tmp_path / "privacy_ledger.json"
  first.save(path)
  data = json.loads(path.read_text())
  assert data["segments"][1]["plan"]["mechanism"] == "laplace"
  resumed = PrivacyLedger.load(path)
  assert resumed.num_steps == 620
  assert resumed.epsilon() == first.epsilon()
  _record(resumed, [(130, RUN[2][1]), RUN[3]], chunk=50)
  assert resumed.segments == full.segments
  assert resumed.epsilon() == full.epsilon()
  budgeted = PrivacyLedger(delta=1e-6, epsilon_budget=2.5)
  back = PrivacyLedger.from_json(budgeted.to_json())
  assert (back.delta, back.epsilon_budget) == (1e-6, 2.5)


def test_budget_refuses_before_mutating():
  budget = 1.0
  plan = _plan(2.0, 0.02)
  ledger = PrivacyLedger(delta=DELTA, epsilon_budget=budget)
  remaining = ledger.steps_within_budget(plan, 10_000)
  assert 100 < remaining < 10_000
  # The boundary is exact for the plan's own epsilon.
  assert (
    plan.epsilon(remaining, DELTA)
    <= budget
    < plan.epsilon(remaining + 1, DELTA)
  )
  ledger.record(plan, 100)
  before = (ledger.num_steps, ledger.epsilon(), ledger.segments)
  with pytest.raises(PrivacyBudgetExceededError) as info:
    ledger.record(plan, remaining - 99)
  assert info.value.projected_epsilon > budget
  assert info.value.steps_remaining == remaining - 100
  assert (ledger.num_steps, ledger.epsilon(), ledger.segments) == before
  for _ in range(remaining - 100):  # step by step, as the runner does
    ledger.record(plan)
  assert ledger.epsilon() == pytest.approx(plan.epsilon(remaining, DELTA))
  with pytest.raises(PrivacyBudgetExceededError, match="0 step"):
    ledger.record(plan)
  assert ledger.num_steps == remaining


def test_num_queries_is_accounted_as_one_gaussian():
  a = PrivacyLedger(delta=DELTA)
  a.record(_plan(2.0, 0.05, num_queries=8), 200)
  single = acc.poisson_gaussian_event(
    noise_multiplier=2.0, sampling_probability=0.05, num_steps=200
  )
  assert a.epsilon() == pytest.approx(
    acc.pld_epsilon(single, delta=DELTA), rel=1e-9
  )
  assert a.segments[0][0].num_queries == 8


def test_non_private_steps_make_epsilon_infinite_and_never_fit_a_budget():
  ledger = PrivacyLedger(delta=DELTA)
  ledger.record(PrivacyPlan.non_private(), 3)
  assert ledger.epsilon() == float("inf")
  capped = PrivacyLedger(delta=DELTA, epsilon_budget=10.0)
  with pytest.raises(PrivacyBudgetExceededError, match="budget"):
    capped.record(PrivacyPlan.non_private())
  assert capped.num_steps == 0  # the refused step is not recorded


def test_report_names_every_plan():
  ledger = PrivacyLedger(delta=DELTA)
  _record(ledger, RUN[:2])
  text = ledger.report()
  assert "gaussian noise" in text and "laplace noise" in text
  assert "add/remove" in text


def test_ledger_input_errors():
  with pytest.raises(ValueError, match="delta"):
    PrivacyLedger(delta=0.0)
  with pytest.raises(ValueError, match="epsilon_budget"):
    PrivacyLedger(delta=DELTA, epsilon_budget=0.0)
  ledger = PrivacyLedger(delta=DELTA)
  with pytest.raises(ValueError, match="num_steps"):
    ledger.record(RUN[0][1], 0)
  assert ledger.num_steps == 0
  with pytest.raises(ValueError, match="privacy ledger"):
    PrivacyLedger.from_json(json.dumps({"format": "something else"}))
  with pytest.raises(ValueError, match="noise_multiplier"):
    _plan(-1.0, 0.1)
  with pytest.raises(ValueError, match="add/remove"):
    _plan(1.0, 0.1, "laplace", neighboring="replace_one")


@pytest.mark.parametrize("neighboring", ["add_or_remove", "replace_one"])
def test_full_batch_gaussian_epsilon_is_exact_and_below_the_pld(neighboring):
  """The analytic full-batch epsilon sits just below dp_accounting's
  pessimistic PLD (which upper-bounds the same exact quantity)."""
  plan = PrivacyPlan.build(
    mechanism="gaussian",
    noise_multiplier=20.0,
    clip=1.0,
    sampling="full_batch",
    neighboring=neighboring,
  )
  exact = plan.epsilon(50, DELTA)
  event = dp_accounting.SelfComposedDpEvent(plan.step_event(), 50)
  pld = acc.pld_epsilon(event, delta=DELTA, neighboring=neighboring)
  assert exact <= pld <= exact * 1.01 + 1e-3
  assert (
    PrivacyPlan.build(
      mechanism="gaussian", noise_multiplier=0.01, sampling="full_batch"
    ).epsilon(200, DELTA)
    > 1e4
  )
