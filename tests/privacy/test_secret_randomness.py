"""Secret noise, public directions: tests that play the adversary."""

import pickle
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import zoprivacy
from zoprivacy.accounting import discrete_laplace_queries as dlq
from zoprivacy.accounting import discrete_pld as dpld
from zoprivacy.data import sampling
from zoprivacy.privacy import find_plan, randomness
from zoprivacy.privacy.noise_keys import explicit_key

D = 6


def _loss(w, batch):
  x, y = batch
  return (x @ w - y) ** 2


def _batch(n=16, seed=0):
  rng = np.random.default_rng(seed)
  x = jnp.asarray(rng.normal(size=(n, D)), jnp.float32)
  return x, x @ jnp.arange(D, dtype=jnp.float32)


def _dpzero(**kw):
  args = dict(
    clip=1.0,
    noise_multiplier=3.0,
    smoothing=1e-3,
    expected_batch_size=16,
    dataset_size=1000,
  )
  args.update(kw)
  return zoprivacy.dpzero(**args)


def _updates(est, steps=20, **extra):
  w = jnp.zeros(D)
  state = zoprivacy.init(est, w)
  step = jax.jit(
    lambda s: est.update(
      jnp.zeros(D), s, w, batched_loss=_loss, batch=_batch(), **extra
    )
  )
  grads = []
  for _ in range(steps):
    g, state = step(state)
    grads.append(np.asarray(g))
  return np.stack(grads), state


def test_identical_estimators_add_independent_noise_along_the_same_directions():
  g1, s1 = _updates(_dpzero())
  g2, s2 = _updates(_dpzero())
  # Same public direction key: every step's direction is the same vector.
  cos = np.sum(g1 * g2, 1) / (
    np.linalg.norm(g1, axis=1) * np.linalg.norm(g2, axis=1)
  )
  np.testing.assert_allclose(np.abs(cos), 1.0, atol=1e-5)
  # ... but the released scalars differ: the noise is independent.
  scale = g1[:, 0] / np.where(g2[:, 0] == 0, 1, g2[:, 0])
  assert np.mean(np.abs(scale - 1.0) > 1e-3) > 0.9
  assert not np.array_equal(s1.noise_key.handle, s2.noise_key.handle)


def _next_key(state):
  """The key words the next step of ``state`` draws from (this process)."""
  return tuple(np.asarray(jax.random.key_data(explicit_key(state))))


def test_noise_key_is_not_derived_from_the_direction_key():
  est = _dpzero(direction_key=0)
  states = [est.init(jnp.zeros(D)) for _ in range(5)]
  assert len({tuple(np.asarray(s.noise_key.handle)) for s in states}) == 5
  assert len({_next_key(s) for s in states}) == 5  # fresh OS entropy
  jitted = jax.jit(est.init)
  states = [jitted(jnp.zeros(D)) for _ in range(3)]
  assert len({tuple(np.asarray(s.noise_key.handle)) for s in states}) == 3
  assert len({_next_key(s) for s in states}) == 3  # even when compiled


def test_an_adversary_with_the_public_seed_cannot_regenerate_the_noise():
  """Replays the step with the public key schedule and every guess of a
  noise key an attacker could derive from public values; none reproduces
  the released scalar."""
  est = _dpzero(direction_key=7)
  _, state = _updates(est, steps=1)
  released = float(state.released[0])
  guesses = [jax.random.key(7), jax.random.key(0), jax.random.key(8)]
  guesses += list(jax.random.split(jax.random.key(7), 3))
  w = jnp.zeros(D)
  for guess in guesses:
    forged = zoprivacy.init(est, w)._replace(
      noise_key=jax.random.wrap_key_data(
        jnp.tile(jax.random.key_data(guess), 2)[:4], impl="rbg"
      )
    )
    _, forged = est.update(
      jnp.zeros(D), forged, w, batched_loss=_loss, batch=_batch()
    )
    assert abs(float(forged.released[0]) - released) > 1e-4


def test_insecure_test_noise_is_reproducible_warns_and_is_not_private():
  with pytest.warns(randomness.InsecureTestNoiseWarning):
    g1, _ = _updates(_dpzero(insecure_test_noise_seed=3), steps=3)
  with pytest.warns(randomness.InsecureTestNoiseWarning):
    est = _dpzero(insecure_test_noise_seed=3)
    g2, _ = _updates(est, steps=3)
  np.testing.assert_array_equal(g1, g2)
  plan = est.privacy_plan
  assert plan.noise_source == "insecure_test_seed" and not plan.is_private
  assert "NOT PRIVATE" in plan.describe()


def test_poisson_batches_are_secret_and_reproducible_only_from_the_secret():
  a = sampling.PoissonSampler(1000, 16)
  b = sampling.PoissonSampler(1000, 16)
  assert not np.array_equal(
    a.batch_indices(0).indices, b.batch_indices(0).indices
  )
  c = sampling.PoissonSampler(1000, 16, secret=a.secret)
  np.testing.assert_array_equal(
    a.batch_indices(5).indices, c.batch_indices(5).indices
  )


def test_keyed_stream_is_uniform_and_keyed():
  secret = randomness.new_secret()
  s1 = randomness.KeyedStream(secret, "noise", 0)
  draws = np.array([s1.randbelow(10) for _ in range(5000)])
  counts = np.bincount(draws, minlength=10)
  assert counts.min() > 420 and counts.max() < 580  # ~ 500 +- 4.5 sd
  s2 = randomness.KeyedStream(secret, "noise", 0)
  s3 = randomness.KeyedStream(secret, "noise", 1)
  first = [s2.randbelow(2**30) for _ in range(4)]
  again = randomness.KeyedStream(secret, "noise", 0)
  assert first == [again.randbelow(2**30) for _ in range(4)]
  assert first != [s3.randbelow(2**30) for _ in range(4)]
  other = randomness.KeyedStream(randomness.new_secret(), "noise", 0)
  assert first != [other.randbelow(2**30) for _ in range(4)]


def test_vector_noise_is_float32_for_bf16_parameters():
  """bf16 noise would take ~256 values and be truncated near 2.9 sigma."""
  d = 200_000
  est = zoprivacy.dp_sgd(
    clip=1.0,
    noise_multiplier=1.0,
    expected_batch_size=1.0,
    dataset_size=100,
  )
  w = jnp.zeros(d, jnp.bfloat16)
  loss = lambda p, ex: jnp.sum(p.astype(jnp.float32)) * 0.0 + ex
  update = jax.jit(  # as a training step runs it (eagerly: 3x slower)
    lambda w, s: est.update(
      jnp.zeros_like(w),
      s,
      w,
      per_example_loss=loss,
      batch=jnp.zeros((1,)),
      mask=jnp.zeros((1,), bool),
    )
  )
  g, _ = update(w, zoprivacy.init(est, w))
  z = np.asarray(g, np.float32)  # pure noise: the only example is padding
  assert g.dtype == jnp.bfloat16
  tail = np.mean(np.abs(z) > 3.0)
  assert abs(tail - 0.0026998) < 5 * np.sqrt(0.0027 / d)  # Gaussian tail
  assert np.max(np.abs(z)) > 4.0


def test_plan_survives_wrappers_pickle_and_jit():
  est = _dpzero()
  w = jnp.zeros(D)
  plan = est.privacy_plan
  for tx in (
    optax.chain(est, optax.adam(1e-3)),
    optax.masked(est, lambda p: True),
    optax.chain(
      optax.inject_hyperparams(
        zoprivacy.dpzero,
        static_args=zoprivacy.static_args(zoprivacy.dpzero),
      )(est.privacy, smoothing=1e-3),
      optax.inject_hyperparams(optax.sgd)(learning_rate=0.1),
    ),
  ):
    state = zoprivacy.init(tx, w)
    assert find_plan(state) == plan
    assert find_plan(jax.tree.map(lambda x: x, state)) == plan
    _, state = jax.jit(
      lambda s: tx.update(
        jnp.zeros(D), s, w, batched_loss=_loss, batch=_batch()
      )
    )(state)
    assert find_plan(state) == plan
    assert find_plan(pickle.loads(pickle.dumps(jax.device_get(state)))) == plan


def test_privacy_hyperparameters_cannot_be_injected():
  """The value is static under inject_hyperparams (optax injects numbers
  only), and a traced number cannot become one of its fields."""
  privacy = _dpzero().privacy
  tx = optax.inject_hyperparams(zoprivacy.dpzero)(privacy, smoothing=1e-3)
  assert find_plan(zoprivacy.init(tx, jnp.zeros(D))) == _dpzero().privacy_plan
  with pytest.raises(TypeError, match="Python number"):
    jax.jit(lambda c: privacy.replace(clip=c))(1.0)


def test_find_plan_refuses_a_chain_without_an_estimator():
  with pytest.raises(zoprivacy.privacy.PlanError, match="no privacy plan"):
    find_plan(optax.sgd(0.1).init(jnp.zeros(D)))


def test_misspelled_mask_is_an_error_and_padded_batches_carry_their_mask():
  est = _dpzero()
  w = jnp.zeros(D)
  with pytest.raises(TypeError, match="did you mean 'mask'"):
    est.update(
      jnp.zeros(D),
      zoprivacy.init(est, w),
      w,
      batched_loss=_loss,
      batch=_batch(),
      masks=jnp.ones(16, bool),
    )
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    a = _dpzero(insecure_test_noise_seed=1)
    b = _dpzero(insecure_test_noise_seed=1)
  mask = np.arange(16) < 5
  g1, _ = a.update(
    jnp.zeros(D),
    zoprivacy.init(a, w),
    w,
    batched_loss=_loss,
    batch=sampling.PaddedBatch(_batch(), mask),
  )
  g2, _ = b.update(
    jnp.zeros(D),
    zoprivacy.init(b, w),
    w,
    batched_loss=_loss,
    batch=_batch(),
    mask=jnp.asarray(mask),
  )
  np.testing.assert_array_equal(g1, g2)


@pytest.mark.parametrize(
  "name,kw",
  [("dpzero", {}), ("dp_zo", {}), ("dp_zo", {"mechanism": "laplace"})],
)
def test_exact_noise_releases_lie_on_the_grid(name, kw):
  """Every released scalar is an integer number of grid steps C / m (times
  the estimator's fixed scale), so no float artefact depends on the data."""
  m, clip, b, lam = 256, 0.5, 16.0, 1e-3
  est = zoprivacy.ESTIMATORS[name](
    clip=clip,
    noise_multiplier=2.0,
    smoothing=lam,
    expected_batch_size=b,
    dataset_size=1000,
    grid_points=m,
    **kw,
  )  # no noise argument: exact noise is the default
  plan = est.privacy_plan
  assert plan.noise_kind == "discrete" and plan.grid_points == m
  w = jnp.zeros(D)
  # Bound keys: the two routes compute each step twice from one state.
  secret = randomness.new_secret()
  state = zoprivacy.refresh_noise_keys(zoprivacy.init(est, w), secret=secret)
  source = zoprivacy.ExactNoiseSource.for_state(state)
  scale = b / (clip / m) * (2 * lam if name == "dp_zo" else 1.0)
  plain = jax.jit(
    lambda s: est.update(jnp.zeros(D), s, w, batched_loss=_loss, batch=_batch())
  )
  given = jax.jit(
    lambda s, z: est.update(
      jnp.zeros(D),
      s,
      w,
      batched_loss=_loss,
      batch=_batch(),
      discrete_noise=z,
    )
  )
  for t in range(50):
    # The plain call draws its noise on the host by itself; the runner's
    # route (the noise passed in) gives the same release for the same step.
    _, after = plain(state)
    _, same = given(state, source.draw(t))
    np.testing.assert_array_equal(after.released, same.released)
    state = after
    units = float(state.released[0]) * scale
    assert abs(units - round(units)) < 1e-3 * max(1.0, abs(units) * 1e-4)


def test_exact_noise_covers_several_queries_and_replace_one():
  """No fallback to floating point: q queries on one batch and replace-one
  are exact discrete Gaussians, accounted like their continuous twins."""
  for kw in (dict(num_queries=4), dict(neighboring="replace_one")):
    est, floating = _dpzero(**kw), _dpzero(noise="float", **kw)
    plan = est.privacy_plan
    assert plan.mechanism.name == "discrete_gaussian" and not plan.notes
    assert (
      "exposed to floating-point attacks" in floating.privacy_plan.describe()
    )
    eps = plan.epsilon(50, 1e-5)
    assert eps == pytest.approx(floating.privacy_plan.epsilon(50, 1e-5), 1e-3)
  kw = dict(clip=1.0, smoothing=1e-3, expected_batch_size=8, dataset_size=100)
  lap = zoprivacy.dp_zo(
    noise_multiplier=2.0, mechanism="laplace", num_queries=3, **kw
  )
  assert lap.privacy_plan.mechanism.name == "discrete_laplace"
  flo = zoprivacy.dp_zo(
    noise_multiplier=2.0,
    mechanism="laplace",
    num_queries=3,
    noise="float",
    **kw,
  )
  # q Laplace queries of scale sigma q C: at most the L1 bound's epsilon.
  assert lap.privacy_plan.epsilon(20, 1e-5) <= flo.privacy_plan.epsilon(
    20, 1e-5
  )


def test_laplace_queries_pld_matches_dp_accounting_for_one_query():
  """The sufficient-statistic construction with q = 1 reproduces
  dp_accounting's discrete Laplace PLD (buckets: at most 2% above)."""
  kw = dict(sensitivity=1024, sampling_probability=0.08, num_steps=50)
  mine = dlq.discrete_laplace_queries_pld(scale=2048.0, num_queries=1, **kw)
  ref = dpld.discrete_noise_pld(scale=2048.0, **kw)
  eps, eps_ref = (dpld.discrete_epsilon(x, 1e-5) for x in (mine, ref))
  assert eps_ref - 1e-6 <= eps <= 1.02 * eps_ref


def test_the_exact_noise_flag_is_gone_with_its_replacement_named():
  with pytest.raises(TypeError, match=r"noise=zoprivacy\.Float\(\)"):
    _dpzero(exact_noise=False)


def test_a_test_seed_cannot_feed_exact_noise_of_a_plan_that_promises_secrecy():
  plan = _dpzero().privacy_plan
  with pytest.raises(ValueError, match="NOT PRIVATE"):
    zoprivacy.ExactNoiseSource(plan, insecure_test_noise_seed=0)
  assert "p unknown" in _dpzero(dataset_size=None).privacy_plan.describe()
