"""Membership-inference experiment: metrics, attacks, canaries, smoke run."""

import os

import jax.numpy as jnp
import numpy as np
import pytest

from experiments.reproductions import mia
from experiments.reproductions.mia import attacks, canaries, report, roc
from zoprivacy.data.loaders import Dataset


def test_perfectly_separated_scores_have_auc_one_and_full_tpr():
  rng = np.random.default_rng(0)
  is_member = rng.random(200) < 0.5
  scores = np.where(is_member, 10.0, 0.0) + rng.random(200)  # disjoint
  m = roc.evaluate(scores, is_member, num_bootstrap=200, seed=1)
  assert m.auc.value == 1.0
  assert m.auc.low == pytest.approx(1.0) and m.auc.high == 1.0
  assert m.tpr_at_fpr.value == 1.0
  assert roc.auc(-scores, is_member) == 0.0


def test_identical_distributions_have_auc_near_half_within_ci():
  rng = np.random.default_rng(2)
  is_member = rng.random(1000) < 0.5
  scores = rng.normal(size=1000)  # independent of membership
  m = roc.evaluate(scores, is_member, num_bootstrap=300, seed=3)
  assert m.auc.contains(0.5)
  assert abs(m.auc.value - 0.5) < 0.05
  assert m.auc.high - m.auc.low < 0.1
  # Hanley-McNeil at A = 0.5, 500/500: about sqrt(1/12 * 2 / 500) = 0.018.
  assert m.auc_hanley_mcneil_se == pytest.approx(0.0183, abs=0.001)
  # Bootstrap 95% width is about 4 standard errors.
  width = m.auc.high - m.auc.low
  assert width == pytest.approx(4 * m.auc_hanley_mcneil_se, rel=0.25)


def test_tpr_at_fpr_hand_computed():
  # Ranked by score: M M N M N N M N N N (M member, N non-member).
  scores = np.array([10, 9, 8, 7, 6, 5, 4, 3, 2, 1], float)
  is_member = np.array([1, 1, 0, 1, 0, 0, 1, 0, 0, 0], bool)
  # 4 members, 6 non-members. FPR 0 admits the top 2: TPR 2/4.
  assert roc.tpr_at_fpr(scores, is_member, 0.0) == 0.5
  assert roc.tpr_at_fpr(scores, is_member, 0.1) == 0.5  # 1/6 > 0.1
  # FPR <= 1/6 admits the top 4 (one non-member): TPR 3/4.
  assert roc.tpr_at_fpr(scores, is_member, 1 / 6) == 0.75
  # FPR <= 3/6 admits the top 7: TPR 1.
  assert roc.tpr_at_fpr(scores, is_member, 0.5) == 1.0
  # AUC: pairs (member above non-member) / 24 = (6 + 6 + 5 + 3) / 24.
  assert roc.auc(scores, is_member) == pytest.approx(20 / 24)


def test_statistics_from_logits_match_probabilities():
  logits = jnp.array([[2.0, 0.0, -1.0], [0.0, 0.0, 0.0], [50.0, -50.0, 0.0]])
  labels = jnp.array([0, 2, 0])
  loss, phi = attacks.statistics_from_logits(logits, labels)
  p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  py = p[np.arange(3), np.asarray(labels)]
  np.testing.assert_allclose(loss[:2], -np.log(py[:2]), rtol=1e-5)
  np.testing.assert_allclose(phi[:2], np.log(py / (1 - py))[:2], rtol=1e-5)
  assert phi[2] == pytest.approx(50.0, abs=1e-4)  # finite where p_y = 1


def test_padded_chunks_give_the_unpadded_statistics():
  rng = np.random.default_rng(4)
  w = rng.normal(size=(6, 3)).astype(np.float32)
  inputs = rng.normal(size=(23, 6)).astype(np.float32)
  labels = rng.integers(0, 3, size=23).astype(np.int32)
  apply = lambda p, x: x @ p
  chunked = attacks.canary_statistics(apply, w, inputs, labels, chunk_size=8)
  loss, phi = attacks.statistics_from_logits(inputs @ w, labels)
  assert chunked.loss.shape == (23,)  # padding rows dropped
  np.testing.assert_allclose(chunked.loss, loss, rtol=1e-5)
  np.testing.assert_allclose(chunked.phi, phi, rtol=1e-5)


def test_lira_offline_scores_center_and_scale_by_references():
  refs = [
    attacks.CanaryStatistics(np.zeros(3), np.array([0.0, 1.0, 2.0])),
    attacks.CanaryStatistics(np.zeros(3), np.array([2.0, 3.0, 4.0])),
  ]
  target = attacks.CanaryStatistics(np.zeros(3), np.array([1.0, 5.0, 3.0]))
  # mu = [1, 2, 3]; deviations all +-1: pooled unbiased sigma = sqrt(2).
  scores = attacks.lira_offline_scores(target, refs)
  np.testing.assert_allclose(scores, np.array([0.0, 3.0, 0.0]) / np.sqrt(2))


def _pool():
  rng = np.random.default_rng(5)
  x = rng.random((60, 8, 8, 1)).astype(np.float32)
  y = (np.arange(60) % 10).astype(np.int32)
  return Dataset(x, y, 10, "pool")


@pytest.mark.parametrize("kind", canaries.CANARY_KINDS)
def test_exactly_the_members_are_inserted(kind):
  pool = _pool()
  canary_set, used = canaries.make_canaries(
    pool, num_canaries=20, kind=kind, seed=7
  )
  assert len(used) == (20 if kind == "mislabeled" else 0)
  if kind == "mislabeled":  # a wrong label on a real image
    assert np.all(canary_set.labels != pool.labels[used])
    np.testing.assert_array_equal(canary_set.inputs, pool.inputs[used])
  keep = np.setdiff1d(np.arange(len(pool)), used)
  base = pool.subset(keep, "base")
  train = canaries.insert_canaries(base, canary_set)
  members = canary_set.is_member
  assert 0 < members.sum() < 20
  assert len(train) == len(base) + members.sum()
  np.testing.assert_array_equal(train.inputs[: len(base)], base.inputs)
  np.testing.assert_array_equal(
    train.inputs[len(base) :], canary_set.inputs[members]
  )
  np.testing.assert_array_equal(
    train.labels[len(base) :], canary_set.labels[members]
  )
  rows = {r.tobytes() for r in train.inputs}
  for i in range(20):  # each canary image is in the training set iff member
    assert (canary_set.inputs[i].tobytes() in rows) == bool(members[i])
  reference = canaries.insert_canaries(base, canary_set, include_members=False)
  assert len(reference) == len(base)


def test_membership_is_a_fixed_seeded_half():
  a = canaries.draw_membership(4000, seed=11)
  np.testing.assert_array_equal(a, canaries.draw_membership(4000, seed=11))
  assert abs(a.mean() - 0.5) < 0.03  # 4 standard deviations: 0.032
  assert not np.array_equal(a, canaries.draw_membership(4000, seed=12))


def test_task_trains_on_base_plus_members():
  config = mia.run.zo_config(
    mia.run.Setting("dpzero", 1.0),
    mia.run.MODES["fast"],
    seed=0,
    include_members=True,
  )
  base, canary_set, _ = canaries.experiment_data(32, "ood", mia.run.CANARY_SEED)
  task = canaries.canary_task(config)
  assert task.num_train == len(base) + canary_set.num_members
  config.canaries.include_members = False
  assert canaries.canary_task(config).num_train == len(base)


@pytest.mark.slow  # trains the target models: ~17 s
def test_fast_smoke_run_end_to_end(tmp_path):
  out = str(tmp_path)
  result = mia.main(out, fast=True)
  for name in ("summary.md", "table.md", "roc.png", "results.json"):
    assert os.path.getsize(os.path.join(out, name)) > 0
  text = open(os.path.join(out, "summary.md")).read()
  assert report.SMOKE in text
  assert "evaluation runs" in text
  rows = result["rows"]
  assert [r["label"] for r in rows] == ["DPZero eps=1", "SGD (non-private)"]
  dpzero = rows[0]
  assert 0 < dpzero["epsilon"] <= 1.0 + 1e-9  # never over the target
  for r in rows:
    for attack in ("loss_attack", "lira"):
      a = r[attack]["auc"]
      assert 0 <= a["low"] <= a["value"] <= a["high"] <= 1
  work = os.path.join(out, "work")  # the runs' checkpoints hold secrets
  assert not os.path.exists(work) or not os.listdir(work)
