"""Exact vector noise: the sampler's law, the lattice's proven sensitivity,
the int32 bounds, the RDP accounting and the estimators' releases.

Statistical tests use fixed keys, so they are deterministic; the stated
false-failure rate is the one a fresh key would have.
"""

import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import zoprivacy
from zoprivacy.accounting import subsampled_rdp
from zoprivacy.estimators import base
from zoprivacy.first_order import ghost_clipping
from zoprivacy.privacy import calibration
from zoprivacy.privacy.ledger import PrivacyLedger
from zoprivacy.privacy.plan import PrivacyPlan
from zoprivacy.secret_noise import rounded_sum_mechanism
from zoprivacy.secret_noise import vector_discrete_mechanism as vdm
from zoprivacy.secret_noise import vector_discrete_noise as vdn

KEY = np.arange(1, 5, dtype=np.uint32)


def _chi_square_p(x, sigma):
  """Chi-square p-value of draws ``x`` against the discrete Gaussian pmf,
  cells beyond an expected count of 5 pooled into two tails."""
  bound = int(math.ceil(12 * sigma)) + 2
  support = np.arange(-bound, bound + 1)
  pmf = np.exp(-0.5 * (support / sigma) ** 2)
  pmf /= pmf.sum()
  expected = pmf * len(x)
  keep = expected >= 5
  lo, hi = support[keep][0], support[keep][-1]
  counts = np.array(
    [np.sum(x < lo)]
    + [np.sum(x == k) for k in range(lo, hi + 1)]
    + [np.sum(x > hi)]
  )
  exp = np.concatenate(
    [[pmf[support < lo].sum()], pmf[keep], [pmf[support > hi].sum()]]
  ) * len(x)
  return stats.chisquare(counts, exp).pvalue


@pytest.mark.parametrize("sigma", [1, 3, 40])
def test_sampler_matches_the_discrete_gaussian_pmf(sigma):
  """200,000 draws: chi-square p > 1e-4 (false-failure rate 1e-4 per
  sigma at a fresh key) and the variance within 1.5% (> 4.5 s.e.)."""
  src = vdn.words_for_keys(KEY, sigma, 0)
  x = vdn.discrete_gaussian(src, sigma, 200_000)
  assert _chi_square_p(x, sigma) > 1e-4
  pmf_var = sum(
    k * k * math.exp(-0.5 * (k / sigma) ** 2)
    for k in range(-30 * sigma, 30 * sigma)
  ) / sum(
    math.exp(-0.5 * (k / sigma) ** 2) for k in range(-30 * sigma, 30 * sigma)
  )
  assert np.var(x) == pytest.approx(pmf_var, rel=0.015)


def test_the_chi_square_test_can_fail():
  """The same test rejects the discrete Gaussian of sigma 3.1 as sigma 3."""
  src = vdn.words_for_keys(KEY, 31, 0)
  x = vdn.discrete_gaussian(src, 31, 200_000) // 10  # roughly sigma 3.1
  assert _chi_square_p(x, 3) < 1e-6


@pytest.mark.parametrize("num,den", [(0, 1), (3, 10), (1, 1), (5, 2), (91, 9)])
def test_bernoulli_exp(num, den):
  """Mean of 100,000 draws within 5 s.e. of exp(-num/den)."""
  src = vdn.words_for_keys(KEY, num, den)
  n = 100_000
  b = vdn.bernoulli_exp(src, np.full(n, num), np.full(n, den))
  p = math.exp(-num / den)
  assert abs(b.mean() - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_noise_is_a_function_of_the_step_key():
  a = vdn.draw(KEY, 50, 1000)
  assert np.array_equal(a, vdn.draw(KEY, 50, 1000))
  assert not np.array_equal(a, vdn.draw(KEY + 1, 50, 1000))
  rows = vdn.draw(np.stack([KEY, KEY + 1]), 50, 1000)
  assert rows.shape == (2, 1000) and not np.array_equal(rows[0], rows[1])
  with pytest.raises(ValueError):
    vdn.check_sigma(vdn.MAX_SIGMA + 1)


def test_certified_norm_is_an_upper_bound():
  rng = np.random.default_rng(0)
  k = rng.integers(-(2**20) + 1, 2**20, (3, 5000)).astype(np.int32)
  k[1] = 2**20 - 1  # every coordinate at the limit
  k[2, 100:] = 0
  exact = np.sum(k.astype(np.int64) ** 2, axis=1).astype(np.float64)
  bound = np.asarray(vdm.certified_sq_norms(jnp.asarray(k)), np.float64)
  assert np.all(bound >= exact)
  assert np.all(bound <= exact * (1 + 1e-4))


@pytest.mark.parametrize("d", [1, 7, 3000])
def test_reclipped_rows_have_integer_norm_at_most_the_grid(d):
  """Adversarial rows (just above and below the bound, huge ones, a single
  coordinate): the exact int64 norm never exceeds M, and a row above the
  bound keeps almost all of it."""
  grid = 2**19
  rng = np.random.default_rng(d)
  rows = rng.normal(size=(6, d))
  rows /= np.linalg.norm(rows, axis=1, keepdims=True)
  rows *= np.array([1.0, 1.0 + 1e-7, 1.5, 1.0 - 1e-7, 1e3, 0.5])[:, None]
  k = np.round(rows * grid).clip(-vdm.COORD_LIMIT, vdm.COORD_LIMIT)
  out = np.asarray(vdm.reclip_rows(jnp.asarray(k, jnp.int32), grid), np.int64)
  norms = np.sqrt(np.sum(out**2, axis=1))
  assert np.all(norms <= grid)
  assert np.all(norms[[0, 1, 2]] >= grid * (1 - 2e-3) - math.sqrt(d))


@pytest.mark.parametrize("d", [1, 10, 10_000])
def test_direction_lattice_sensitivity(d):
  """||V(K) - V(K + m)||_2 <= M for the extreme K of a batch of 256."""
  mech = vdm.VectorDiscreteGaussianMechanism(1.0, 1.0)
  batch = 256
  grid, m = mech.direction_grid(batch, d)
  u = jnp.asarray(np.random.default_rng(d).normal(size=d), jnp.float32)
  for k in (0, -batch * m, (batch - 1) * m, 12345):
    v0 = np.asarray(vdm.direction_lattice(jnp.int32(k), u), np.int64)
    v1 = np.asarray(vdm.direction_lattice(jnp.int32(k + m), u), np.int64)
    assert np.sqrt(np.sum((v1 - v0) ** 2)) <= grid
    assert np.max(np.abs(v0)) <= batch * grid


def test_grid_keeps_the_int32_sum_and_the_sampler_in_range():
  mech = vdm.VectorDiscreteGaussianMechanism(1.0, 3.0)
  for rows in (1, 8, 1000, 4096, 2**20):
    grid = mech.grid(rows)
    assert rows * grid <= 2**31 - 1
    assert mech.integer_sigma(grid) <= vdn.MAX_SIGMA
    assert mech.integer_sigma(grid) >= 3.0 * grid
  with pytest.raises(ValueError, match="lower the batch size"):
    mech.grid(2**28)
  with pytest.raises(ValueError, match="add/remove"):
    vdm.VectorDiscreteGaussianMechanism(1.0, 1.0, "replace_one")


def test_default_release_is_on_the_lattice_ghost_clipping_included():
  """DP-SGD's release times B M / C is an integer (C = 1, B = 8, M a power
  of two: every float step is exact); with ghost clipping the release
  times B / gamma is (gamma = 2^-k, the rounded sum's grid, from the bound
  of the step's sum)."""

  params = {"w": jnp.ones((3, 2)), "b": jnp.zeros(2)}
  batch = jnp.arange(24, dtype=jnp.float32).reshape(8, 3) / 10
  loss = lambda p, x: jnp.sum((x @ p["w"] + p["b"]) ** 2)
  for clipping in ("explicit", "ghost"):
    tx = zoprivacy.dp_sgd(
      clip=1.0,
      noise_multiplier=2.0,
      expected_batch_size=8,
      per_example_clipping=clipping,
    )
    g, _ = jax.jit(
      lambda s, tx=tx: tx.update(
        None, s, params, per_example_loss=loss, batch=batch
      )
    )(zoprivacy.init(tx, params))
    scale = 8 * vdm.MAX_GRID  # B M / C
    if clipping == "ghost":
      args = base.parse_extra_args(dict(per_example_loss=loss, batch=batch))
      _, bound = ghost_clipping.certified_clipped_sum(args, params, clip=1.0)
      k = tx_mechanism(tx).grid_exponent(bound, 8)
      scale = 8 * 2.0**k
    for leaf in jax.tree.leaves(g):
      n = np.asarray(leaf, np.float64) * scale
      assert np.array_equal(n, np.round(n)) and np.any(n != 0)


def tx_mechanism(tx):
  """The runtime mechanism of an estimator built by a factory (its plan's
  values rebuilt as the factory builds them)."""

  plan = tx.privacy_plan
  return rounded_sum_mechanism.RoundedSumDiscreteGaussianMechanism(
    plan.clip, plan.noise_multiplier
  )


@pytest.mark.parametrize(
  "sigma,p,steps", [(1.0, 0.01, 1000), (2.0, 0.036, 300), (0.8, 0.004, 3000)]
)
def test_rdp_bound_is_at_least_the_continuous_gaussian_pld(sigma, p, steps):
  """The integer-order RDP bound is above the continuous sampled
  Gaussian's PLD epsilon (never under-reported against it) and not far."""
  eps = subsampled_rdp.epsilon(
    noise_multiplier=sigma, sampling_probability=p, num_steps=steps, delta=1e-5
  )
  acc = dp_accounting.pld.PLDAccountant()
  event = dp_accounting.PoissonSampledDpEvent(
    p, dp_accounting.GaussianDpEvent(sigma)
  )
  acc.compose(event, steps)
  assert acc.get_epsilon(1e-5) <= eps <= 1.5 * acc.get_epsilon(1e-5)


def test_pairing_inequality_of_the_remove_direction():
  """Step 3 of the accounting (module docstring of subsampled_rdp): for
  every ratio t in [e^-30, e^30], p and alpha, the add-direction pair term
  is at least the remove-direction one (in logs, to 1e-12)."""
  t = np.exp(np.linspace(-30, 30, 2001))[:, None, None]
  p = np.concatenate([np.linspace(1e-4, 0.999, 60), [1e-6]])[None, :, None]
  a = np.array([2, 3, 5, 8, 16, 64, 256, 1024.0])[None, None, :]
  u, v = np.log(1 - p + p * t), np.log((1 - p) * t + p)
  add = np.logaddexp(a * u, (1 - a) * np.log(t) + a * v)
  remove = np.logaddexp((1 - a) * u, a * np.log(t) + (1 - a) * v)
  assert np.min(add - remove) > -1e-12
  assert np.max(add - remove) > 1.0  # not trivially equal


@pytest.mark.slow  # about 10 s: some 40 RDP evaluations
def test_calibration_meets_the_target_with_exact_vector_noise():
  plan = zoprivacy.dp_sgd(
    clip=1.0, noise_multiplier=1.0, expected_batch_size=64, dataset_size=1797
  ).privacy_plan
  calibrated = calibration.calibrate(
    plan, zoprivacy.Target(epsilon=2.0, delta=1e-5, num_steps=300)
  )
  assert calibrated.epsilon(300) <= 2.0
  assert calibrated.epsilon(300) >= 2.0 * 0.98
  assert calibrated.mechanism.name == "vector_discrete_gaussian"


def test_a_ledger_of_several_vector_plans_composes_their_rdp():
  """A forced resume that changes the multiplier leaves two segments: the
  ledger composes them in RDP (no PLD exists), equal to the direct RDP
  composition and above either segment alone; mixing with a PLD plan is
  refused rather than accounted wrongly."""

  def plan(sigma, mechanism="vector_discrete_gaussian"):
    return PrivacyPlan.build(
      mechanism=mechanism,
      noise_multiplier=sigma,
      clip=1.0,
      expected_batch_size=64,
      dataset_size=1437,
    )

  a, b = plan(6.0), plan(5.0)
  ledger = PrivacyLedger(delta=1e-5)
  ledger.record(a, 300)
  ledger.record(b, 200)
  direct = subsampled_rdp.composed_epsilon(
    [
      (subsampled_rdp.step_event(6.0, 64 / 1437), 300),
      (subsampled_rdp.step_event(5.0, 64 / 1437), 200),
    ],
    1e-5,
  )
  assert ledger.epsilon() == pytest.approx(direct, rel=1e-12)
  assert ledger.epsilon() > max(a.epsilon(300, 1e-5), b.epsilon(200, 1e-5))
  ledger.record(plan(6.0, "gaussian"), 10)
  with pytest.raises(ValueError, match="RDP-accounted"):
    ledger.epsilon()
