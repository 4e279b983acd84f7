import numpy as np
import pytest

from zoprivacy.data.loaders import Dataset, load_digits
from zoprivacy.data.loaders.base import text_array
from zoprivacy.data.splits import (
  DataOverlapError,
  DataOverlapWarning,
  check_no_overlap,
  exclude_public,
  few_shot_subsample,
  find_overlap,
  imbalanced_class_proportions,
  ood_public_split,
  pazo_cifar10_split,
  public_rates,
  row_hashes,
  sample_ood_public,
  split_public_private,
)


def _images(n=1000, k=10, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.random((n, 4, 4, 3), dtype=np.float32)
  y = np.arange(n, dtype=np.int32) % k
  return Dataset(x, y, k, "synthetic")


def test_imbalanced_proportions_are_explicit_and_seeded():
  p = imbalanced_class_proportions(10, 10.0)
  assert p.sum() == pytest.approx(1.0)
  assert p[0] / p[-1] == pytest.approx(10.0) and np.all(np.diff(p) < 0)
  a = imbalanced_class_proportions(10, 10.0, seed=3)
  b = imbalanced_class_proportions(10, 10.0, seed=3)
  np.testing.assert_array_equal(a, b)
  np.testing.assert_allclose(np.sort(a), np.sort(p))
  assert not np.array_equal(a, imbalanced_class_proportions(10, 10.0, seed=4))
  np.testing.assert_allclose(imbalanced_class_proportions(5, 1.0), 0.2)
  with pytest.raises(ValueError, match="imbalance_ratio must be >= 1"):
    imbalanced_class_proportions(10, 0.5)


def test_public_rates_are_public_numbers():
  np.testing.assert_allclose(public_rates(10, 0.04), 0.04)
  props = imbalanced_class_proportions(10, 10.0)
  rates = public_rates(10, 0.04, props)
  assert rates.mean() == pytest.approx(0.04)
  assert rates[0] / rates[-1] == pytest.approx(10.0)
  with pytest.raises(ValueError, match="probability"):
    public_rates(3, 0.5, [1, 0, 0])
  with pytest.raises(ValueError, match="public_fraction"):
    public_rates(3, 1.5)


def _within(count, n, rate):
  """``count`` within 6 standard deviations of Binomial(n, rate) (the
  split is a deterministic function of the data; this bounds a change)."""
  return abs(count - n * rate) <= 6 * np.sqrt(n * rate * (1 - rate)) + 1


def test_pazo_cifar10_style_split():
  ds = _images(n=5000)
  s = pazo_cifar10_split(ds, imbalance_ratio=10.0, seed=0)
  assert _within(len(s.public), 5000, 0.04)  # 4% public in expectation
  assert len(s.public) + len(s.private) == 5000
  assert len(np.intersect1d(s.public_indices, s.private_indices)) == 0
  np.testing.assert_array_equal(
    np.union1d(s.public_indices, s.private_indices), np.arange(5000)
  )
  counts = s.public.class_counts()
  rates = public_rates(10, 0.04, imbalanced_class_proportions(10, 10.0, 0))
  assert all(_within(c, 500, r) for c, r in zip(counts, rates))
  assert counts[np.argmax(rates)] > 2 * counts[np.argmin(rates)]
  np.testing.assert_array_equal(s.public.inputs, ds.inputs[s.public_indices])
  again = pazo_cifar10_split(ds, imbalance_ratio=10.0, seed=0)
  np.testing.assert_array_equal(again.public_indices, s.public_indices)
  other = pazo_cifar10_split(ds, imbalance_ratio=10.0, seed=1)
  assert not np.array_equal(other.public_indices, s.public_indices)


def test_stratified_split_on_real_digits():
  train = load_digits().train
  s = split_public_private(train, public_fraction=0.1, seed=0)
  assert _within(len(s.public), len(train), 0.1)
  assert all(
    _within(c, n, 0.1)
    for c, n in zip(s.public.class_counts(), train.class_counts())
  )


def test_duplicates_between_public_and_private_are_flagged():
  ds = _images(n=100)
  x = ds.inputs.copy()
  x[1] = x[0]  # duplicate inputs (with different labels) across classes 0 and 1
  x[11] = x[10]
  dup = Dataset(x, ds.labels, 10, "dups")
  assert (row_hashes(x)[0] == row_hashes(x)[1]) and (
    row_hashes(x)[0] != row_hashes(x)[2]
  )
  # force 0 into public and 1 into private by putting all public mass on class 0
  props = np.eye(10)[0]
  with pytest.raises(DataOverlapError, match="exact duplicates"):
    split_public_private(
      dup, public_fraction=0.1, class_proportions=props, seed=0
    )
  with pytest.warns(DataOverlapWarning):
    s = split_public_private(dup, 0.1, props, seed=0, on_overlap="warn")
  assert len(s.public) == 10
  with pytest.warns(DataOverlapWarning, match="dropping"):
    s = split_public_private(dup, 0.1, props, seed=0, on_overlap="drop")
  # the public set is kept whole; the private duplicates 1 and 11 leave
  assert len(s.public) == 10 and {0, 10} <= set(s.public_indices)
  assert 1 not in s.private_indices and 11 not in s.private_indices
  assert len(s.private) == 88
  assert len(find_overlap(s.public.inputs, s.private.inputs)) == 0
  np.testing.assert_array_equal(s.public.inputs, dup.inputs[s.public_indices])
  np.testing.assert_array_equal(s.private.inputs, dup.inputs[s.private_indices])


def test_hash_is_dtype_aware_and_exact():
  a = np.zeros((2, 3), np.float32)
  assert row_hashes(a)[0] != row_hashes(a.astype(np.float64))[0]
  b = a.copy()
  b[1, 0] = 1e-7
  assert row_hashes(a)[1] != row_hashes(b)[1]
  t = text_array([("a", "bc"), ("ab", "c")])
  assert row_hashes(t)[0] != row_hashes(t)[1]


def test_ood_public_sampling_and_overlap():
  private = Dataset(
    text_array(["good film", "bad film", "fine", "awful"]),
    np.array([1, 0, 1, 0], np.int32),
    2,
    "movies",
  )
  pool = Dataset(
    text_array([f"review {i}" for i in range(50)] + ["bad film"]),
    np.array([i % 2 for i in range(50)] + [0], np.int32),
    2,
    "amazon",
  )
  with pytest.raises(DataOverlapError, match="1 of 4 movies"):
    sample_ood_public(pool, private)
  pub = sample_ood_public(
    pool.subset(np.arange(50)), private, num_samples=20, seed=0
  )
  assert len(pub) == 20 and len(set(pub.inputs)) == 20
  per = sample_ood_public(
    pool.subset(np.arange(50)), private, per_class=5, seed=2
  )
  np.testing.assert_array_equal(per.class_counts(), [5, 5])
  with pytest.warns(DataOverlapWarning):
    split = ood_public_split(pool, private, on_overlap="drop")
  # the public sample is the pool's; the private duplicate leaves
  assert len(split.public) == 51 and "bad film" in set(split.public.inputs)
  assert list(split.private.inputs) == ["good film", "fine", "awful"]
  np.testing.assert_array_equal(split.private_indices, [0, 2, 3])
  with pytest.raises(ValueError, match="ood_public_split"):
    sample_ood_public(pool, private, on_overlap="drop")
  three = Dataset(text_array(["x"]), np.array([2], np.int32), 3, "nli")
  with pytest.raises(ValueError, match="classes"):
    sample_ood_public(three, private)


def test_few_shot_subsample():
  ds = _images(n=300, k=3)
  fs = few_shot_subsample(ds, per_class=16, seed=0)
  np.testing.assert_array_equal(fs.class_counts(), [16, 16, 16])
  other = few_shot_subsample(ds, per_class=16, seed=1)
  assert not np.array_equal(fs.inputs, other.inputs)
  with pytest.raises(ValueError, match="fewer than"):
    few_shot_subsample(ds, per_class=101)


def test_check_no_overlap_validates_mode():
  ds = _images(n=10)
  with pytest.raises(ValueError, match="on_overlap"):
    check_no_overlap(ds, ds, on_overlap="ignore")
  with pytest.raises(ValueError, match="exclude_public"):
    check_no_overlap(ds, ds, on_overlap="drop")


def test_exclude_public_drops_private_duplicates_only():
  public = _images(n=10)
  private = _images(n=20, seed=1)
  x = private.inputs.copy()
  x[[3, 7]] = public.inputs[[0, 5]]
  private = Dataset(x, private.labels, 10, "private")
  with pytest.raises(DataOverlapError, match="2 of 20"):
    exclude_public(private, public)
  with pytest.warns(DataOverlapWarning):
    assert exclude_public(private, public, "warn") is private
  with pytest.warns(DataOverlapWarning, match="public set is kept"):
    kept = exclude_public(private, public, "drop")
  np.testing.assert_array_equal(kept.inputs, np.delete(x, [3, 7], axis=0))
