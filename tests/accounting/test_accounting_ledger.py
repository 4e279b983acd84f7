"""PrivacyLedger: recording, epsilon at any step, budget, JSON restarts."""

import json

import dp_accounting
import pytest
from dp_accounting.pld import pld_privacy_accountant

from zoprivacy import accounting as acc
from zoprivacy.accounting import PrivacyBudgetExceededError
from zoprivacy.accounting import PrivacyLedger

DELTA = 1e-5
PLAN = [  # (num_steps, params) of an uninterrupted run
    (300, dict(noise_multiplier=2.0, sampling_probability=0.01)),
    (200, dict(noise_multiplier=3.0, sampling_probability=0.02,
               mechanism="laplace")),
    (250, dict(noise_multiplier=1.5, sampling_probability=0.01,
               num_queries=4)),
    (100, dict(noise_multiplier=2.0, sampling_probability=0.01)),
]


def _record_plan(ledger, plan, chunk=None):
  for n, params in plan:
    if chunk is None:
      ledger.record(n, **params)
    else:
      done = 0
      while done < n:
        k = min(chunk, n - done)
        ledger.record(k, **params)
        done += k


def _plan_event(plan):
  events = []
  for n, params in plan:
    params = dict(params)
    params.pop("num_queries", None)
    if params.pop("mechanism", "gaussian") == "laplace":
      events.append(acc.poisson_laplace_event(num_steps=n, **params))
    else:
      events.append(acc.poisson_gaussian_event(num_steps=n, **params))
  return dp_accounting.ComposedDpEvent(events)


def test_ledger_epsilon_matches_dp_accounting_composition():
  ledger = PrivacyLedger(delta=DELTA)
  _record_plan(ledger, PLAN)
  assert ledger.num_steps == 850
  assert len(ledger.segments) == 4
  ref = pld_privacy_accountant.PLDAccountant()
  ref.compose(_plan_event(PLAN))
  assert ledger.epsilon() == pytest.approx(ref.get_epsilon(DELTA), rel=1e-6)
  # Epsilon after 400 steps: first segment and 100 steps of the second.
  ref = pld_privacy_accountant.PLDAccountant()
  ref.compose(_plan_event([PLAN[0], (100, PLAN[1][1])]))
  assert ledger.epsilon(400) == pytest.approx(ref.get_epsilon(DELTA), rel=1e-6)
  assert ledger.epsilon(0) == 0.0
  eps_by_step = [ledger.epsilon(t) for t in (100, 300, 500, 750, 850)]
  assert eps_by_step == sorted(eps_by_step)
  assert ledger.epsilon(850) == ledger.epsilon()
  with pytest.raises(ValueError, match="beyond"):
    ledger.epsilon(851)
  # RDP figure: Poisson-subsampled Laplace is not in dp_accounting's RDP.
  assert ledger.rdp_epsilon() is None


def test_ledger_merges_single_steps_into_segments():
  a = PrivacyLedger(delta=DELTA)
  _record_plan(a, PLAN[:1], chunk=1)
  b = PrivacyLedger(delta=DELTA)
  _record_plan(b, PLAN[:1])
  assert a.segments == b.segments
  assert a.epsilon() == b.epsilon()


def test_ledger_restart_from_json_gives_same_final_epsilon(tmp_path):
  full = PrivacyLedger(delta=DELTA)
  _record_plan(full, PLAN, chunk=50)

  first = PrivacyLedger(delta=DELTA)
  # Interrupt in the middle of the third segment.
  _record_plan(first, PLAN[:2] + [(120, PLAN[2][1])], chunk=50)
  path = tmp_path / "privacy_ledger.json"
  first.save(path)
  data = json.loads(path.read_text())
  assert data["segments"][1]["mechanism"] == "laplace"
  resumed = PrivacyLedger.load(path)
  assert resumed.num_steps == 620
  assert resumed.epsilon() == first.epsilon()
  _record_plan(resumed, [(130, PLAN[2][1]), PLAN[3]], chunk=50)
  assert resumed.segments == full.segments
  assert resumed.epsilon() == full.epsilon()
  assert PrivacyLedger.from_json(full.to_json()).epsilon() == full.epsilon()
  budgeted = PrivacyLedger(delta=1e-6, epsilon_budget=2.5,
                           neighboring="replace_one",
                           value_discretization_interval=5e-5,
                           shuffling_accounting="wor_rdp")
  back = PrivacyLedger.from_json(budgeted.to_json())
  assert (back.delta, back.epsilon_budget, back.neighboring,
          back.value_discretization_interval, back.shuffling_accounting) == (
              1e-6, 2.5, "replace_one", 5e-5, "wor_rdp")


def test_budget_refuses_before_mutating():
  budget = 1.0
  params = dict(noise_multiplier=2.0, sampling_probability=0.02)
  ledger = PrivacyLedger(delta=DELTA, epsilon_budget=budget)
  remaining = ledger.steps_remaining(**params)
  assert remaining > 100
  # The boundary is exact for the fine pessimistic PLD epsilon.
  at = acc.pld_epsilon(acc.poisson_gaussian_event(num_steps=remaining,
                                                  **params), delta=DELTA)
  over = acc.pld_epsilon(acc.poisson_gaussian_event(num_steps=remaining + 1,
                                                    **params), delta=DELTA)
  assert at <= budget < over
  ledger.record(100, **params)
  assert ledger.steps_remaining(**params) == remaining - 100
  before = (ledger.num_steps, ledger.epsilon(), ledger.segments)
  with pytest.raises(PrivacyBudgetExceededError) as info:
    ledger.check_can_spend(remaining - 99, **params)
  assert info.value.projected_epsilon > budget
  assert info.value.steps_remaining == remaining - 100
  with pytest.raises(PrivacyBudgetExceededError):
    ledger.record(remaining - 99, **params)
  assert (ledger.num_steps, ledger.epsilon(), ledger.segments) == before
  ledger.record(remaining - 100, **params)
  assert ledger.epsilon() == pytest.approx(at, rel=1e-6)
  assert ledger.epsilon() <= budget
  with pytest.raises(PrivacyBudgetExceededError):
    ledger.record(1, **params)
  assert ledger.num_steps == remaining


def test_num_queries_is_accounted_as_one_gaussian():
  a = PrivacyLedger(delta=DELTA)
  a.record(200, noise_multiplier=2.0, sampling_probability=0.05,
           num_queries=8)
  single = acc.poisson_gaussian_event(noise_multiplier=2.0,
                                      sampling_probability=0.05, num_steps=200)
  assert a.epsilon() == pytest.approx(acc.pld_epsilon(single, delta=DELTA),
                                      rel=1e-9)
  assert a.segments[0].num_queries == 8


def test_shuffling_is_recorded_and_reported_conservatively():
  shuffle = dict(noise_multiplier=4.0, sampling="shuffle", batch_size=100,
                 dataset_size=1000)
  ledger = PrivacyLedger(delta=DELTA, neighboring="replace_one")
  ledger.record(15, **shuffle)  # epochs 0, 1
  ledger.record(10, **dict(shuffle, noise_multiplier=5.0))  # steps 15-24
  assert [s.sampling for s in ledger.segments] == ["shuffling", "shuffling"]
  assert [s.epochs_touched() for s in ledger.segments] == [2, 2]
  # Conservative: each epoch touched is one full-batch release, replace-one.
  ref = pld_privacy_accountant.PLDAccountant(
      dp_accounting.NeighboringRelation.REPLACE_ONE)
  ref.compose(acc.full_batch_gaussian_event(noise_multiplier=4.0,
                                            num_steps=2))
  ref.compose(acc.full_batch_gaussian_event(noise_multiplier=5.0,
                                            num_steps=2))
  assert ledger.epsilon() == pytest.approx(ref.get_epsilon(DELTA), rel=1e-6)
  summary = ledger.summary()
  assert summary["shuffling_used"] is True
  assert summary["sampling_schemes"] == ["shuffling"]
  text = ledger.report()
  assert "SHUFFLING" in text and "no amplification" in text
  assert PrivacyLedger.from_json(ledger.to_json()).segments == ledger.segments

  poisson = PrivacyLedger(delta=DELTA, neighboring="replace_one")
  poisson.record(25, noise_multiplier=4.0, sampling_probability=0.1)
  assert "SHUFFLING" not in poisson.report()
  assert poisson.summary()["shuffling_used"] is False


def test_shuffling_wor_rdp_option():
  ledger = PrivacyLedger(delta=DELTA, neighboring="replace_one",
                         shuffling_accounting="wor_rdp")
  ledger.record(40, noise_multiplier=4.0, sampling="shuffling",
                batch_size=100, dataset_size=1000)
  ev = acc.sampled_without_replacement_gaussian_event(
      noise_multiplier=4.0, batch_size=100, dataset_size=1000, num_steps=40)
  assert ledger.uses_rdp
  assert ledger.epsilon() == pytest.approx(
      acc.rdp_epsilon(ev, delta=DELTA, neighboring="replace_one"), rel=1e-9)
  assert "NOT a proven bound" in ledger.report()
  with pytest.raises(ValueError, match="wor_rdp"):
    ledger.record(5, noise_multiplier=4.0, sampling_probability=0.1)


def test_ledger_input_errors():
  with pytest.raises(ValueError, match="delta"):
    PrivacyLedger(delta=0.0)
  with pytest.raises(ValueError, match="epsilon_budget"):
    PrivacyLedger(delta=DELTA, epsilon_budget=0.0)
  with pytest.raises(ValueError, match="shuffling_accounting"):
    PrivacyLedger(delta=DELTA, shuffling_accounting="optimistic")
  ledger = PrivacyLedger(delta=DELTA)
  with pytest.raises(ValueError, match="noise_multiplier"):
    ledger.record(1, noise_multiplier=-1.0, sampling_probability=0.1)
  with pytest.raises(ValueError, match="sampling_probability"):
    ledger.record(1, noise_multiplier=1.0, sampling_probability=0.0)
  with pytest.raises(ValueError, match="num_steps"):
    ledger.record(0, noise_multiplier=1.0, sampling_probability=0.1)
  with pytest.raises(ValueError, match="replace_one"):
    ledger.record(1, noise_multiplier=1.0, sampling="shuffling",
                  batch_size=10, dataset_size=100)
  with pytest.raises(ValueError, match="sampling"):
    ledger.record(1, noise_multiplier=1.0, sampling="bernoulli",
                  sampling_probability=0.1)
  rep = PrivacyLedger(delta=DELTA, neighboring="replace_one")
  with pytest.raises(ValueError, match="Laplace"):
    rep.record(1, noise_multiplier=1.0, sampling_probability=0.1,
               mechanism="laplace")
  with pytest.raises(ValueError, match="batch_size"):
    rep.record(1, noise_multiplier=1.0, sampling="shuffling")
  assert ledger.num_steps == 0 and rep.num_steps == 0
  with pytest.raises(ValueError, match="PrivacyLedger"):
    PrivacyLedger.from_json(json.dumps({"format": "something else"}))
