"""No noise twice: the attempt rule and fresh keys for a restored state.

A step computed again over other inputs must not reuse its noise (or its
batch): subtracting the two releases would reveal the noise-free difference
of the sums. The runner's ledger records the reserved step ranges, and the
attempt of a step (how many earlier ranges hold it) selects an independent
secret; a library user refreshes a restored state's keys.
"""

import json

import jax
import jax.numpy as jnp
import pytest

import zoprivacy
from experiments.run import run_ledger
from zoprivacy.privacy import PrivacyPlan, randomness
from zoprivacy.privacy.ledger import PrivacyLedger

PLAN = PrivacyPlan.build(
  mechanism="gaussian",
  noise_multiplier=2.0,
  clip=1.0,
  expected_batch_size=10,
  dataset_size=1000,
)


def _ledger(*ranges):
  ledger = PrivacyLedger(delta=1e-5)
  for start, stop in ranges:
    ledger.record(PLAN, stop - start, first_step=start)
  return ledger


def test_contiguous_blocks_merge_and_replays_stack():
  ledger = _ledger((0, 32), (32, 40), (20, 32), (32, 50), (45, 60))
  assert ledger.ranges == ((0, 40), (20, 50), (45, 60))
  assert ledger.num_steps == 40 + 30 + 15
  attempts = [ledger.times_recorded(t) for t in (0, 19, 20, 39, 40, 45, 49)]
  assert attempts == [1, 1, 2, 2, 1, 2, 2]
  assert ledger.times_recorded(60) == 0  # never reserved: attempt 0
  assert ledger.next_boundary(10) == 20 and ledger.next_boundary(47) == 50
  assert ledger.next_boundary(60) == float("inf")
  # Library use without steps: one range, as an uninterrupted run.
  plain = PrivacyLedger(delta=1e-5)
  plain.record(PLAN, 5), plain.record(PLAN, 7)
  assert plain.ranges == ((0, 12),)


def test_trim_drops_only_the_unrun_tail_of_the_last_range():
  ledger = _ledger((0, 40), (20, 52))
  eps = ledger.epsilon()
  ledger.trim(30)
  assert ledger.ranges == ((0, 40), (20, 30)) and ledger.num_steps == 50
  assert ledger.epsilon() < eps
  assert ledger.epsilon() == _ledger((0, 40), (20, 30)).epsilon()
  ledger.trim(20)  # nothing of the last range ran
  assert ledger.ranges == ((0, 40),) and ledger.num_steps == 40
  for bad in (53, 19):  # past the last range, or into an earlier one
    with pytest.raises(ValueError, match="Cannot trim"):
      _ledger((0, 40), (20, 52)).trim(bad)
  with pytest.raises(ValueError, match="Nothing recorded"):
    PrivacyLedger(delta=1e-5).trim(0)


def test_ranges_round_trip_and_a_v2_ledger_is_one_range(tmp_path):
  ledger = _ledger((0, 40), (20, 52))
  again = PrivacyLedger.from_json(ledger.to_json())
  assert again.ranges == ledger.ranges and again.num_steps == 72
  data = json.loads(ledger.to_json())
  assert data["version"] == 3 and data["ranges"] == [[0, 40], [20, 52]]
  # A version-2 file (no ranges) of 72 steps: read as [0, 72), so every
  # step below 72, which the old code may have computed with attempt 0,
  # gets attempt 1 (fresh randomness), and the steps from 72 on attempt 0.
  del data["ranges"]
  data["version"] = 2
  old = PrivacyLedger.from_dict(data)
  assert old.ranges == ((0, 72),) and old.epsilon() == ledger.epsilon()
  assert old.times_recorded(0) == old.times_recorded(71) == 1
  assert old.times_recorded(72) == 0
  data["version"] = 3  # version 3 must hold its ranges
  with pytest.raises(KeyError):
    PrivacyLedger.from_dict(data)
  data["ranges"] = [[0, 40]]  # ranges that do not hold the steps
  with pytest.raises(ValueError, match="do not hold"):
    PrivacyLedger.from_dict(data)


def test_write_ahead_ledger_blocks_keep_one_attempt(tmp_path):
  wal = run_ledger.WriteAheadLedger.open(
    str(tmp_path), delta=1e-5, epsilon_budget=None, write=True
  )
  wal.reserve(PLAN, 0, 40)
  assert wal.attempt(20, 52) == (1, 40)  # split where the attempt changes
  wal.reserve(PLAN, 20, 20)
  assert wal.attempt(40, 72) == (0, 72)
  assert wal.replayed(20, 100) == (20, 40)
  assert wal.replayed(40, 100) is None and wal.replayed(20, 20) is None
  wal.reserve(PLAN, 40, 32)
  wal.trim(50)  # a graceful stop after step 50: durable
  on_disk = PrivacyLedger.load(tmp_path / run_ledger.LEDGER_FILE)
  assert on_disk.ranges == ((0, 40), (20, 50)) and on_disk.num_steps == 70


def test_attempt_secrets_are_independent_and_attempt_0_is_the_secret():
  secret = bytes(range(32))
  keys = [randomness.attempt_secret(secret, k) for k in range(4)]
  assert keys[0] == secret and len(set(keys)) == 4
  assert all(len(k) == 32 for k in keys)
  with pytest.raises(ValueError):
    randomness.attempt_secret(secret, -1)


def _loss(w, x):
  return jnp.sum((x - w) ** 2, axis=-1)


def _integers(state):
  """The released value of a dpzero step, as the integer sum + noise."""
  plan = zoprivacy.find_plan(state)
  scale = plan.expected_batch_size * plan.grid_points / plan.clip
  return float(state[0].released[0]) * scale


def test_a_restored_state_steps_again_with_fresh_noise_after_refresh():
  """The library's replay: restore a state, step on other inputs. Without
  a refresh the two releases share their noise (their difference is the
  noise-free difference of the integer sums); after it they do not."""
  est = zoprivacy.dpzero(
    clip=1.0,
    noise_multiplier=2.0,
    smoothing=1e-3,
    expected_batch_size=8,
    dataset_size=100,
  )
  tx = jax.jit(
    lambda s, x: est.update(None, s, jnp.zeros(3), batched_loss=_loss, batch=x)
  )
  saved = zoprivacy.init(est, jnp.zeros(3))
  a, b = jnp.ones((8, 3)), -jnp.ones((8, 3))
  source = zoprivacy.ExactNoiseSource.for_state((saved,), block_size=0)
  noise = int(source.draw_now(0)[0])
  _, first = tx(saved, a)
  _, again = tx(saved, b)  # the bug: the same noise over another sum
  sum_a = _integers((first,)) - noise
  sum_b = _integers((again,)) - noise
  assert abs(sum_a - round(sum_a)) < 1e-2 and abs(sum_b - round(sum_b)) < 1e-2
  bound = 8 * saved.privacy_plan.grid_points  # 8 examples, each |k| <= m
  assert abs(sum_a) <= bound and abs(sum_b) <= bound  # noise-free sums
  (fresh,) = zoprivacy.refresh_noise_keys((saved,))
  assert fresh.step == saved.step and fresh.privacy_plan == saved.privacy_plan
  assert jnp.array_equal(
    jax.random.key_data(fresh.direction_key),
    jax.random.key_data(saved.direction_key),
  )
  new_noise = int(
    zoprivacy.ExactNoiseSource.for_state((fresh,), block_size=0).draw_now(0)[0]
  )
  assert new_noise != noise
  _, replay = tx(fresh, b)
  assert _integers((replay,)) - new_noise == pytest.approx(sum_b, abs=1e-2)
  assert zoprivacy.refresh_noise_keys is zoprivacy.privacy.refresh_noise_keys
