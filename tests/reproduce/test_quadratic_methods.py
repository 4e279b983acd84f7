"""The vectorized quadratic methods equal the zoprivacy estimators step by step.

Each test drives the optax estimator (``zoprivacy.dpzero``, ``dpgd_zeroth``,
``dp_sgd``) on the DPZero quadratic with a known key, rebuilds that step's
direction and noise key with the estimator's key schedule, and checks that
the specialized grid implementation in ``experiments.reproductions.quadratic``
produces the same privatized gradient (same clipping, same noise draws).
The grid implementation draws plain float32 Gaussian noise, so the
estimators are built with ``noise="float"`` (the floating-point opt-in; their
defaults are exact discrete noise for dpzero and ``"secure_mode"`` for the
vector estimators, which the grid simulation does not reproduce).
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import zoprivacy
from experiments.reproductions import quadratic, quadratic_grid
from zoprivacy.estimators import base
from zoprivacy.zo import directions

N, D = 64, 12
CLIPS = (0.05, 0.5, 5.0, 50.0)  # from "all clipped" to "none clipped"
SIGMA = 3.0


def _setup(mode="rank_sqrt_d"):
  problem = quadratic.make_problem(mode, D, num_train=N, num_test=N, seed=3)
  data = problem.centred + problem.train_mean  # the x_i
  x = jnp.linspace(-1.0, 2.0, D, dtype=jnp.float32)

  def loss(params, xi):
    diff = params - xi
    return 0.5 * jnp.sum(problem.a * diff * diff)

  return problem, data, x, loss


def _estimator_grad(est, x, loss, data):
  state = zoprivacy.init(est, x)
  grad, _ = est.update(
    jnp.zeros_like(x), state, x, per_example_loss=loss, batch=data
  )
  # The estimator's key schedule: step t folds t into the direction key, and
  # the plan's fingerprint, then t, into the noise key.
  dir_key, noise_key = base.step_keys(state)
  return grad, dir_key, noise_key


@pytest.mark.parametrize("clip", CLIPS)
def test_dpzero_matches_estimator(clip):
  problem, data, x, loss = _setup()
  est = zoprivacy.dpzero(
    clip=clip,
    noise_multiplier=SIGMA,
    smoothing=0.5,
    expected_batch_size=N,
    dataset_size=N,
    direction_key=7,
    noise="float",
  )
  grad, dir_key, noise_key = _estimator_grad(est, x, loss, data)
  # dpzero draws with its default generator ('auto': the counter hash).
  u = directions.sphere(
    jax.random.split(dir_key, 1)[0], x, "sqrt_dim", prng="auto"
  )
  proj = problem.centred @ (problem.a * u)
  r = (x - problem.train_mean)[None]
  ours = quadratic_grid.zeroth_order_grads(
    "dpzero",
    r,
    jnp.array([clip]),
    SIGMA,
    u=u,
    proj=proj,
    a=problem.a,
    noise_key=noise_key,
    n=N,
  )[0]
  np.testing.assert_allclose(ours, grad, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("clip", CLIPS)
def test_dpgd_zeroth_matches_estimator(clip):
  problem, data, x, loss = _setup()
  est = zoprivacy.dpgd_zeroth(
    clip=clip,
    noise_multiplier=SIGMA,
    smoothing=0.5,
    expected_batch_size=N,
    dataset_size=N,
    direction_key=11,
    noise="float",
  )
  grad, dir_key, noise_key = _estimator_grad(est, x, loss, data)
  u = directions.sphere(dir_key, x, "sqrt_dim")
  proj = problem.centred @ (problem.a * u)
  r = (x - problem.train_mean)[None]
  ours = quadratic_grid.zeroth_order_grads(
    "dpgd_zeroth",
    r,
    jnp.array([clip]),
    SIGMA,
    u=u,
    proj=proj,
    a=problem.a,
    noise_key=noise_key,
    n=N,
  )[0]
  np.testing.assert_allclose(ours, grad, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("mode", list(quadratic.HESSIANS))
def test_dp_gd_matches_dp_sgd_estimator(mode):
  problem, data, x, loss = _setup(mode)
  r = jnp.stack([x - problem.train_mean] * len(CLIPS))
  for k, clip in enumerate(CLIPS):
    est = zoprivacy.dp_sgd(
      clip=clip,
      noise_multiplier=SIGMA,
      expected_batch_size=N,
      dataset_size=N,
      direction_key=5,
      noise="float",
    )
    grad, _, noise_key = _estimator_grad(est, x, loss, data)
    ours = quadratic_grid.dp_gd_grads(
      r,
      jnp.array(CLIPS, jnp.float32),
      SIGMA,
      centred=problem.centred,
      sq_norms=problem.sq_norms,
      a=problem.a,
      noise_key=noise_key,
    )[k]
    np.testing.assert_allclose(ours, grad, rtol=2e-4, atol=2e-5)


def test_grid_run_matches_sequential_estimator_updates():
  """A 5-step grid run equals 5 optax-chained estimator updates, per point."""
  problem, data, x0, loss = _setup("rank_log_d")
  del x0
  steps, stepsizes, clips = 5, (0.01, 0.1), (0.3, 3.0)
  res = quadratic_grid.run_grid(
    "dp_gd",
    problem,
    num_steps=steps,
    stepsizes=stepsizes,
    clips=clips,
    noise_multiplier=SIGMA,
    noise_key=jax.random.key(0),
  )
  # Sequential reference with the same per-step noise keys (fold_in(key, t)).
  for i, s in enumerate(stepsizes):
    for j, c in enumerate(clips):
      x = quadratic.initial_point(D)
      for t in range(steps):
        key_t = jax.random.fold_in(jax.random.key(0), t)
        g = quadratic_grid.dp_gd_grads(
          (x - problem.train_mean)[None],
          jnp.array([c], jnp.float32),
          SIGMA,
          centred=problem.centred,
          sq_norms=problem.sq_norms,
          a=problem.a,
          noise_key=key_t,
        )[0]
        updates, _ = optax.sgd(s).update(g, optax.sgd(s).init(x))
        x = optax.apply_updates(x, updates)
      want = jnp.linalg.norm(problem.a * (x - problem.test_mean))
      np.testing.assert_allclose(res.test_grad_norm[i, j], want, rtol=1e-4)


def test_exact_finite_difference_identity():
  """(f(x+lu) - f(x-lu)) / (2l) == u^T A (x - x_i) for the quadratic."""
  problem, data, x, loss = _setup("rank_d")
  u = directions.sphere(jax.random.key(1), x, "sqrt_dim")
  lam = 0.25
  fd = (
    jax.vmap(loss, (None, 0))(x + lam * u, data)
    - jax.vmap(loss, (None, 0))(x - lam * u, data)
  ) / (2 * lam)
  closed = jnp.dot(problem.a * u, x - problem.train_mean) - problem.centred @ (
    problem.a * u
  )
  np.testing.assert_allclose(closed, fd, rtol=1e-4, atol=1e-4)
