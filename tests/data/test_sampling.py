"""Poisson and shuffle samplers: real Poisson sampling in fixed shapes."""

import math

import numpy as np
import pytest
from scipy import stats

from zoprivacy.data import sampling
from zoprivacy.privacy import randomness


def test_poisson_inclusion_is_bernoulli_p():
  # A fixed test secret makes this test deterministic (it cannot flake);
  # the bounds below would hold for a fresh secret with the stated rates.
  n, b = 500, 25.0
  with pytest.warns(randomness.InsecureTestNoiseWarning):
    s = sampling.PoissonSampler(n, b, insecure_test_seed=7)
  counts = np.zeros(n)
  sizes = []
  steps = 2000
  for t in range(steps):
    idx = s.batch_indices(t)
    assert idx.indices.shape == (s.capacity,) and idx.mask.shape == (
      s.capacity,
    )
    real = idx.indices[idx.mask]
    assert len(np.unique(real)) == len(real)  # no duplicates
    assert np.all(idx.mask[: len(real)]) and not np.any(idx.mask[len(real) :])
    counts[real] += 1
    sizes.append(len(real))
  p = b / n
  # Each count ~ Binomial(2000, 0.05). The exact binomial quantiles at 1e-7
  # per tail bound the 500 counts with a false-failure rate below 1e-4 for
  # a fresh secret.
  low, high = stats.binom.ppf([1e-7, 1 - 1e-7], steps, p)
  assert counts.min() >= low and counts.max() <= high, (low, high)
  # Batch sizes are Binomial(500, 0.05): mean 25, variance 23.75.
  assert np.mean(sizes) == pytest.approx(25.0, abs=5 * math.sqrt(23.75 / steps))
  assert np.var(sizes) == pytest.approx(23.75, rel=0.15)


def test_poisson_is_a_pure_function_of_secret_and_step():
  a = sampling.PoissonSampler(1000, 16)
  b = sampling.PoissonSampler(1000, 16, secret=a.secret)
  c = sampling.PoissonSampler(1000, 16)  # a fresh secret
  np.testing.assert_array_equal(
    a.batch_indices(17).indices, b.batch_indices(17).indices
  )
  # Resume: step 17 does not depend on having drawn steps 0..16.
  for t in range(17):
    a.batch_indices(t)
  np.testing.assert_array_equal(
    a.batch_indices(17).mask, b.batch_indices(17).mask
  )
  assert not np.array_equal(
    a.batch_indices(5).indices, c.batch_indices(5).indices
  )


def test_poisson_overflow_grows_capacity_instead_of_dropping():
  s = sampling.PoissonSampler(100, 50)
  s.capacity = 8  # force an overflow
  with pytest.warns(UserWarning, match="exceeds the padded capacity"):
    idx = s.batch_indices(0)
  assert idx.mask.sum() > 8 and s.capacity >= idx.mask.sum()


def test_capacity_covers_binomial_tail():
  cap = sampling.poisson_capacity(60000, 256 / 60000)
  assert cap % 8 == 0 and 256 + 5 * 16 <= cap <= 256 + 8 * 16 + 8


def test_shuffle_epochs_cover_the_data_once():
  s = sampling.ShuffleSampler(100, 10, seed=0)
  seen = np.concatenate([s.batch_indices(t).indices for t in range(10)])
  np.testing.assert_array_equal(np.sort(seen), np.arange(100))
  assert s.scheme == "shuffle" and sampling.PoissonSampler.scheme == "poisson"


def test_bad_sampler_arguments():
  with pytest.raises(ValueError, match="larger than the dataset"):
    sampling.PoissonSampler(10, 20)
  with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
    sampling.ShuffleSampler(10, 0, seed=0)


def test_padding_rows_are_zeros_not_copies_of_real_examples():
  data = (
    np.arange(1, 101, dtype=np.float32)[:, None] * np.ones((1, 3)),
    np.arange(1, 101),
  )
  s = sampling.PoissonSampler(100, 10)
  idx = s.batch_indices(0)
  batch = sampling.padded_batch(data, idx)
  assert np.all(batch.data[0][~idx.mask] == 0) and np.all(
    batch.data[1][~idx.mask] == 0
  )
  assert np.all(batch.data[1][idx.mask] == data[1][idx.indices[idx.mask]])
  assert idx.mask.sum() < len(idx.mask)  # there is padding to check
