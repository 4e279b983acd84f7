"""Noisy-ZOGD (eq. (3)): noise split, gradient, projection, bad input."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import zoprivacy
from zoprivacy.data import sampling
from zoprivacy.estimators import base, composition
from zoprivacy.hidden_state import baselines, theorem32
from zoprivacy.hidden_state import setting as setting_lib
from zoprivacy.zo import directions, projection

D, K, N = 20, 4, 8
PARAMS = {"w": jnp.zeros((4, 4)), "b": jnp.zeros((4,))}  # d = 20
DATA = jnp.asarray(np.random.default_rng(0).normal(size=(N, D)), jnp.float32)


def flat(tree):
  return jax.flatten_util.ravel_pytree(tree)[0]


def quadratic_loss(params, x):
  """l_i(w) = ||w - x_i||^2 / 2: its finite difference is exact."""
  return 0.5 * jnp.sum(jnp.square(flat(params) - x))


def make_setting(**changes):
  kw = dict(
    dimension=D,
    dataset_size=N,
    num_directions=K,
    step_size=0.5,
    noise_std=1.0,
    clip=2.0,
    radius=3.0,
    smoothing=1e-2,
    directional_fraction=0.3,
  )
  kw.update(changes)
  return setting_lib.NoisyZOGDSetting(**kw)


def test_noise_split_matches_directional_fraction_and_accountant():
  setting = make_setting()
  est = zoprivacy.noisy_zogd(setting, direction_key=1)
  const = lambda p, x: jnp.zeros(())  # no signal: the estimate is noise
  n = 3000

  def sample(key):
    direction_key, noise_key = jax.random.split(key)
    state = base.EstimatorState(
      direction_key,
      noise_key,
      jnp.zeros([], jnp.int32),
      jnp.zeros([1], jnp.float32),
      est.privacy_plan,
      composition.CHECKED,  # a bare estimator: nothing around it to check
    )
    g, _ = est.update(None, state, PARAMS, per_example_loss=const, batch=DATA)
    dkey, _ = base.step_keys(state)
    mat = jax.vmap(flat)(directions.stiefel(dkey, PARAMS, K))  # [K, d]
    coeff = mat @ flat(g)
    resid = flat(g) - mat.T @ coeff
    return coeff, jnp.sum(resid**2)

  # n independent steps (independent keys), evaluated at once.
  coeffs, resid = jax.jit(jax.vmap(sample))(
    jax.random.split(jax.random.key(1), n)
  )
  along, across = setting.noise_variances()
  emp_along = float(jnp.mean(coeffs**2))
  emp_across = float(jnp.mean(resid)) / (D - K)
  # Variances of n*K (resp. n*(d-K)) chi-square terms: 5 standard errors.
  print(
    f"along: {emp_along:.4f} vs {along:.4f}; across: {emp_across:.4f} "
    f"vs {across:.4f}"
  )
  assert emp_along == pytest.approx(along, rel=5 * math.sqrt(2 / (n * K)))
  assert emp_across == pytest.approx(
    across, rel=5 * math.sqrt(2 / (n * (D - K)))
  )
  # The accountant, given the same object, uses the same split: the
  # composition RDP from the *measured* variance along the directions ...
  sens = 2 * setting.clip / (N * math.sqrt(K))
  measured_slope = sens**2 / (2 * emp_along)
  accounted = baselines.composition_rdp(setting, 1)
  slope = accounted.rdp[0] / accounted.orders[0]
  assert slope == pytest.approx(measured_slope, rel=5 * math.sqrt(2 / (n * K)))
  # ... and the plan in the state (the ledger's view, std over one example's
  # bound sqrt(K) Delta / n, replace-one factor paid by the accountant).
  plan = zoprivacy.find_plan(zoprivacy.init(est, PARAMS))
  measured_multiplier = math.sqrt(emp_along) / (
    setting.clip / (N * math.sqrt(K))
  )
  print(
    f"plan multiplier {plan.noise_multiplier:.4f} vs measured "
    f"{measured_multiplier:.4f}"
  )
  assert plan.noise_multiplier == pytest.approx(
    measured_multiplier, rel=5 * math.sqrt(2 / (n * K))
  )
  # ... and Thm 3.2 charges the mechanism's own beta at every step.
  assumptions = setting_lib.LossAssumptions(
    smoothness=1.0, lipschitz=2.0, strong_convexity=0.5
  )
  bound = theorem32.hidden_state_bound(
    setting.replace(assumptions=assumptions), 50, 1e-5
  )
  for point in bound.points.values():
    if point.solution is not None:
      np.testing.assert_array_equal(
        point.solution.fractions, setting.directional_fraction
      )


def test_gradient_is_average_of_clipped_directional_derivatives():
  setting = make_setting(noise_std=1e-9, clip=1.5)
  est = zoprivacy.noisy_zogd(setting, direction_key=3)
  w = {"w": jnp.full((4, 4), 0.1), "b": jnp.full((4,), -0.2)}
  state = zoprivacy.init(est, w)
  g, _ = est.update(None, state, w, per_example_loss=quadratic_loss, batch=DATA)
  dkey, _ = base.step_keys(state)
  mat = np.asarray(jax.vmap(flat)(directions.stiefel(dkey, w, K)))
  fd = (np.asarray(flat(w)) - np.asarray(DATA)) @ mat.T  # [N, K]
  ghat = np.clip(fd, -1.5, 1.5).mean(0)  # [K]
  expected = ghat @ mat / K
  np.testing.assert_allclose(np.asarray(flat(g)), expected, atol=1e-5)


def test_schedule_is_indexed_by_step():
  setting = make_setting(directional_fraction=(1.0, 0.0))
  est = zoprivacy.noisy_zogd(setting, direction_key=0)
  const = lambda p, x: jnp.zeros(())
  state = zoprivacy.init(est, PARAMS)
  out = []
  for _ in range(2):
    dkey, _ = base.step_keys(state)
    mat = jax.vmap(flat)(directions.stiefel(dkey, PARAMS, K))
    g, state = est.update(
      None, state, PARAMS, per_example_loss=const, batch=DATA
    )
    out.append(float(jnp.sum((flat(g) - mat.T @ (mat @ flat(g))) ** 2)))
  # step 0 all directional (up to the float defence's snapping, about
  # 2**-16 of the noise's square), step 1 not
  assert out[0] < 1e-3 * out[1] and out[1] > 1e-10


def test_projection_keeps_ball_and_is_identity_inside():
  tx = projection.project_l2_ball(2.0)
  inside = {"a": jnp.array([0.3, -0.4]), "b": jnp.array([[0.5]])}
  step = {"a": jnp.array([0.1, 0.1]), "b": jnp.array([[-0.2]])}
  up, _ = tx.update(step, zoprivacy.init(tx, inside), inside)
  for k in inside:
    np.testing.assert_array_equal(up[k], step[k])
  far = {"a": jnp.array([3.0, 4.0]), "b": jnp.array([[12.0]])}
  new = optax.apply_updates(inside, tx.update(far, None, inside)[0])
  norm = float(projection.tree_norm(new))
  assert norm == pytest.approx(2.0, rel=1e-6)
  direction = flat(optax.apply_updates(inside, far))
  np.testing.assert_allclose(
    flat(new), 2.0 * direction / jnp.linalg.norm(direction), rtol=1e-6
  )


def test_chain_stays_in_ball():
  setting = make_setting(noise_std=5.0, step_size=2.0, radius=0.5)
  tx = zoprivacy.noisy_zogd_chain(setting, direction_key=2)
  params, state = PARAMS, zoprivacy.init(tx, PARAMS)
  for _ in range(5):
    up, state = tx.update(
      jax.tree.map(jnp.zeros_like, params),
      state,
      params,
      per_example_loss=quadratic_loss,
      batch=DATA,
    )
    params = optax.apply_updates(params, up)
    assert float(projection.tree_norm(params)) <= 0.5 * (1 + 1e-6)


@pytest.mark.parametrize(
  "changes, match",
  [
    (dict(num_directions=11), "d >= 2K"),
    (dict(radius=0.0), "radius"),
    (dict(radius=-1.0), "radius"),
    (dict(directional_fraction=1.5), r"\[0, 1\]"),
    (dict(directional_fraction=(0.5, -0.1)), r"\[0, 1\]"),
  ],
)
def test_bad_settings_rejected(changes, match):
  with pytest.raises(ValueError, match=match):
    make_setting(**changes)


def test_step_size_limit_and_undeclared_assumptions():
  strong = setting_lib.LossAssumptions(
    smoothness=2.0, lipschitz=1.0, strong_convexity=1.0
  )
  with pytest.raises(ValueError, match="above the limit K/M"):
    make_setting(step_size=K / 2.0 + 0.01, assumptions=strong)
  convex = setting_lib.LossAssumptions(
    smoothness=2.0, lipschitz=1.0, convex=True
  )
  with pytest.raises(ValueError, match="2K/M"):
    make_setting(step_size=K + 0.01, assumptions=convex)
  make_setting(step_size=K, assumptions=convex)  # at the limit: ok
  with pytest.raises(ValueError, match="declared loss assumptions"):
    theorem32.hidden_state_bound(make_setting(), 10, 1e-5)
  with pytest.raises(ValueError, match="Lipschitz"):
    make_setting(
      assumptions=setting_lib.LossAssumptions(smoothness=1.0, lipschitz=5.0)
    )


def test_bad_estimator_input_rejected_before_data():
  with pytest.raises(ValueError, match="radius"):
    projection.project_l2_ball(0.0)
  with pytest.raises(ValueError, match="smoothing"):
    zoprivacy.noisy_zogd(make_setting(smoothing=0.0))
  est = zoprivacy.noisy_zogd(make_setting(dimension=22))
  with pytest.raises(ValueError, match="d = 22"):
    zoprivacy.init(est, PARAMS)


def test_without_replacement_sampler_draws_independent_uniform_subsets():
  sampler = sampling.WithoutReplacementSampler(50, 10)  # secret batches
  counts = np.zeros(50)
  steps = 2000
  for t in range(steps):
    batch = sampler.batch_indices(t)
    assert len(set(batch.indices.tolist())) == 10 and batch.mask.all()
    counts[batch.indices] += 1
  np.testing.assert_array_equal(
    sampler.batch_indices(7).indices, sampler.batch_indices(7).indices
  )
  # Inclusion frequency b/n = 0.2 for every example: Binomial(2000, 0.2)
  # has std 17.9; allow 5 of them.
  np.testing.assert_allclose(counts, 0.2 * steps, atol=5 * 17.9)
  full = sampling.FullBatchSampler(5).batch_indices(3)
  np.testing.assert_array_equal(full.indices, np.arange(5))
  # The batches come from the secret (OS entropy), never from a seed: a
  # second sampler draws other batches, the restored secret the same ones.
  other = sampling.WithoutReplacementSampler(50, 10)
  assert any(
    not np.array_equal(
      sampler.batch_indices(t).indices, other.batch_indices(t).indices
    )
    for t in range(5)
  )
  again = sampling.WithoutReplacementSampler(50, 10, secret=sampler.secret)
  for t in range(5):
    np.testing.assert_array_equal(
      again.batch_indices(t).indices, sampler.batch_indices(t).indices
    )


def test_noise_is_secret_and_directions_public():
  """Noise from the state's secret noise_key (OS entropy at init), never
  from the direction key; directions from the public direction key."""
  setting = make_setting()
  const = lambda p, x: jnp.zeros(())
  est = zoprivacy.noisy_zogd(setting, direction_key=5)
  s1, s2 = zoprivacy.init(est, PARAMS), zoprivacy.init(est, PARAMS)
  np.testing.assert_array_equal(
    jax.random.key_data(s1.direction_key),
    jax.random.key_data(s2.direction_key),
  )
  g1, _ = est.update(None, s1, PARAMS, per_example_loss=const, batch=DATA)
  g2, _ = est.update(None, s2, PARAMS, per_example_loss=const, batch=DATA)
  assert not np.allclose(flat(g1), flat(g2))  # fresh secret noise
  assert flat(g1).dtype == jnp.float32
  with pytest.warns(UserWarning, match="NOT differentially private"):
    test_est = zoprivacy.noisy_zogd(
      setting, direction_key=5, insecure_test_noise_seed=7
    )
    t1, t2 = zoprivacy.init(test_est, PARAMS), zoprivacy.init(test_est, PARAMS)
  h1, _ = test_est.update(None, t1, PARAMS, per_example_loss=const, batch=DATA)
  h2, _ = test_est.update(None, t2, PARAMS, per_example_loss=const, batch=DATA)
  np.testing.assert_array_equal(flat(h1), flat(h2))
  assert not zoprivacy.find_plan(t1).is_private


def test_plan_in_state_is_the_composition_view():
  """Thm 3.1 per step: replace-one Gaussian, full batch; the mini-batch
  form is charged as full batch, and the plan says so."""
  setting = make_setting()
  plan = zoprivacy.find_plan(zoprivacy.noisy_zogd_chain(setting).init(PARAMS))
  assert (
    plan.mechanism.name,
    plan.to_dict()["neighboring"],
    plan.sampling.name,
  ) == (
    "gaussian",
    "replace_one",
    "full_batch",
  )
  assert plan.num_queries == K and plan.dataset_size == N
  assert plan.noise_multiplier == pytest.approx(
    2 * baselines.composition_step_multiplier(setting, 0.3)
  )
  assert plan.is_private and plan.noise_kind == "continuous"
  mini = zoprivacy.noisy_zogd(make_setting(batch_size=4)).privacy_plan
  assert mini.sampling.name == "full_batch" and mini.expected_batch_size == 4
  assert any("charged as full-batch" in note for note in mini.notes)
  assert "charged as full-batch" in mini.describe()
  # The plan's epsilon is the PLD of T replace-one Gaussians: it equals the
  # composition RDP figure up to the conversion (PLD is tighter).
  rdp_eps = baselines.composition_rdp(setting, 20).epsilon(1e-5)
  pld_eps = plan.epsilon(20, 1e-5)
  print(f"plan (PLD) {pld_eps:.4f} vs RDP {rdp_eps:.4f}")
  assert 0 < pld_eps <= rdp_eps * (1 + 1e-6)


def test_masked_parameters_are_rejected_like_every_estimator():
  """optax.masked hides leaves the perturbed loss needs (docs/freezing.md)."""
  params = {**PARAMS, "frozen": jnp.zeros(3)}  # d = 20 unmasked
  mask = {"w": True, "b": True, "frozen": False}
  tx = optax.masked(zoprivacy.noisy_zogd(make_setting()), mask)
  state = zoprivacy.init(tx, params)
  with pytest.raises(ValueError, match="docs/freezing.md"):
    tx.update(
      jax.tree.map(jnp.zeros_like, params),
      state,
      params,
      per_example_loss=lambda p, x: jnp.zeros(()),
      batch=DATA,
    )
