"""Direction samplers: moments, norms, orthonormality, key determinism."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoprivacy.zo import counter_directions, directions

PARAMS = {"w": jnp.zeros((2, 3)), "b": jnp.zeros((4,))}  # d = 10
D = 10
N = 20000


def _flat_samples(sampler):
  keys = jax.random.split(jax.random.key(0), N)
  samples = jax.vmap(lambda k: sampler(k, PARAMS))(keys)
  return np.asarray(
    jax.vmap(lambda t: jax.flatten_util.ravel_pytree(t)[0])(samples)
  )


@pytest.mark.parametrize("prng", ["threefry", "counter", "counter2"])
@pytest.mark.parametrize("name", ["gaussian", "sphere", "rademacher"])
def test_second_moment_is_identity(name, prng):
  u = _flat_samples(directions.get_sampler(name, prng=prng))
  second = u.T @ u / N
  # Each entry of E[uu^T] is a mean of N terms with variance <= 3 (Gaussian
  # u_i^2 has variance 2, u_i u_j variance 1): 5 standard errors.
  np.testing.assert_allclose(second, np.eye(D), atol=5 * math.sqrt(3 / N))
  np.testing.assert_allclose(u.mean(0), np.zeros(D), atol=5 * math.sqrt(1 / N))


def test_sphere_radii():
  key = jax.random.key(1)
  for radius, expected in [
    ("sqrt_dim", math.sqrt(D)),
    ("quarter_power_dim", D**0.25),
    (2.5, 2.5),
  ]:
    u = directions.sphere(key, PARAMS, radius)
    norm = float(jnp.linalg.norm(jax.flatten_util.ravel_pytree(u)[0]))
    assert norm == pytest.approx(expected, rel=1e-5)
  u = _flat_samples(directions.get_sampler("sphere_quarter"))
  np.testing.assert_allclose(np.linalg.norm(u, axis=1), D**0.25, rtol=1e-5)


def test_rademacher_entries_are_signs():
  u = _flat_samples(directions.rademacher)
  assert set(np.unique(u)) == {-1.0, 1.0}


def test_stiefel_orthonormal_and_isotropic():
  k = 4
  u = directions.stiefel(jax.random.key(3), PARAMS, k)
  assert u["w"].shape == (k, 2, 3)
  mat = np.asarray(jax.vmap(lambda t: jax.flatten_util.ravel_pytree(t)[0])(u))
  np.testing.assert_allclose(mat @ mat.T, np.eye(k), atol=1e-5)
  # Haar: E[sum_k u_k u_k^T] = (K/d) I.
  keys = jax.random.split(jax.random.key(4), 4000)
  mats = jax.vmap(
    lambda key: jax.vmap(lambda t: jax.flatten_util.ravel_pytree(t)[0])(
      directions.stiefel(key, PARAMS, k)
    )
  )(keys)
  proj = np.einsum("nki,nkj->ij", np.asarray(mats), np.asarray(mats)) / 4000
  np.testing.assert_allclose(proj, (k / D) * np.eye(D), atol=0.03)


@pytest.mark.parametrize("prng", directions.COUNTER_PRNGS)
def test_counter_stiefel_is_orthonormal(prng):
  u = directions.get_sampler("stiefel", num_directions=3, prng=prng)(
    jax.random.key(3), PARAMS
  )
  mat = np.asarray(jax.vmap(lambda t: jax.flatten_util.ravel_pytree(t)[0])(u))
  np.testing.assert_allclose(mat @ mat.T, np.eye(3), atol=1e-5)


def test_stiefel_rejects_too_many_directions():
  with pytest.raises(ValueError):
    directions.stiefel(jax.random.key(0), PARAMS, D + 1)


@pytest.mark.parametrize("impl", directions.PRNG_IMPLS)
def test_same_key_same_direction(impl):
  sampler = directions.get_sampler("gaussian")
  key = directions.direction_key(jax.random.key(7), impl)
  again = directions.direction_key(jax.random.key(7), impl)
  other = directions.direction_key(jax.random.key(8), impl)
  a, b, c = (sampler(k, PARAMS) for k in (key, again, other))
  np.testing.assert_array_equal(a["w"], b["w"])
  assert not np.allclose(a["w"], c["w"])


def test_unknown_names_rejected():
  with pytest.raises(ValueError):
    directions.get_sampler("uniform")
  with pytest.raises(ValueError):
    directions.direction_key(jax.random.key(0), "philox")
  with pytest.raises(ValueError):
    directions.sphere_radius(-1.0, 4)


def test_get_sampler_stiefel_block_is_orthonormal_and_isotropic():
  k, n = 3, 4000
  sampler = directions.get_sampler("stiefel", num_directions=k)
  keys = jax.random.split(jax.random.key(11), n)
  mats = np.asarray(
    jax.vmap(
      lambda key: jax.vmap(lambda t: jax.flatten_util.ravel_pytree(t)[0])(
        sampler(key, PARAMS)
      )
    )(keys)
  )  # [n, K, d]
  gram = np.einsum("nki,nli->nkl", mats, mats)
  np.testing.assert_allclose(
    gram, np.broadcast_to(np.eye(k), gram.shape), atol=1e-5
  )
  proj = np.einsum("nki,nkj->ij", mats, mats) / n
  # A Haar rank-K projection P has Var(P_ii) = 2K(d-K) / (d^2 (d+2)) and
  # smaller off-diagonal variance: allow 5 standard errors of the mean.
  tol = 5 * math.sqrt(2 * k * (D - k) / (D**2 * (D + 2)) / n)
  np.testing.assert_allclose(proj, (k / D) * np.eye(D), atol=tol)


def test_get_sampler_stiefel_default_is_one_unit_direction():
  u = directions.get_sampler("stiefel")(jax.random.key(2), PARAMS)
  assert u["w"].shape == (1, 2, 3)
  flat = jax.flatten_util.ravel_pytree(u)[0]
  assert float(jnp.linalg.norm(flat)) == pytest.approx(1.0, rel=1e-5)
  with pytest.raises(ValueError):
    directions.get_sampler("stiefel", num_directions=0)
  with pytest.raises(ValueError):
    directions.get_sampler("gaussian", num_directions=2)


@pytest.mark.parametrize("prng", directions.COUNTER_PRNGS)
@pytest.mark.parametrize(
  "name", ["gaussian", "rademacher", "sphere", "sphere_quarter"]
)
def test_counter_leaf_directions_equal_the_whole_tree_draw(name, prng):
  params = {
    "a": jnp.zeros((7, 5)),
    "b": jnp.zeros((3,), jnp.bfloat16),
    "c": jnp.zeros((2, 2, 2)),
  }
  key = jax.random.key(11)
  whole = jax.tree.leaves(directions.get_sampler(name, prng=prng)(key, params))
  after = jnp.array([jnp.nan])  # key_after is the identity on the key

  @jax.jit
  def by_leaf(key):
    leaf_u = counter_directions.counter_leaf_directions(
      name, key, params, prng=prng
    )
    return [leaf_u(i, after) for i in range(3)]

  for got, want in zip(by_leaf(key), whole):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(
      np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=1e-6
    )


@pytest.mark.parametrize(
  "name", ["gaussian", "sphere", "sphere_quarter", "rademacher"]
)
@pytest.mark.parametrize(
  "width, chosen",
  [(1023, "threefry"), (1024, "counter2")],  # 65,472 and 65,536 parameters
)
def test_auto_draws_are_the_chosen_generators_draws(name, width, chosen):
  # The default generator is chosen by size alone: below 2^16 parameters
  # its draws are threefry's, from there on the second counter hash's, bit
  # for bit (and not the first counter hash's).
  params = {"w": jnp.zeros((64, width)), "b": jnp.zeros((0,))}
  assert directions.generator("auto", params) == chosen
  key = jax.random.key(5)
  auto = jax.jit(directions.get_sampler(name, prng="auto"))(key, params)
  same = jax.jit(directions.get_sampler(name, prng=chosen))(key, params)
  for other in {"threefry", "counter", "counter2"} - {chosen}:
    different = jax.jit(directions.get_sampler(name, prng=other))(key, params)
    for a, c, o in zip(
      jax.tree.leaves(auto), jax.tree.leaves(same), jax.tree.leaves(different)
    ):
      assert np.asarray(a).tobytes() == np.asarray(c).tobytes()
      if a.size:
        assert np.asarray(a).tobytes() != np.asarray(o).tobytes()


def test_generator_rule():
  small = {"w": jax.ShapeDtypeStruct((64, 1023), jnp.float32)}
  large = {"w": jax.ShapeDtypeStruct((64, 1024), jnp.float32)}
  assert directions.AUTO_COUNTER_MIN_PARAMETERS == 64 * 1024
  assert directions.generator("auto", small) == "threefry"
  assert directions.generator("auto", large) == "counter2"
  for explicit in ("threefry", "counter", "counter2", "rbg", "unsafe_rbg"):
    assert directions.generator(explicit, small) == explicit
    assert directions.generator(explicit) == explicit
  with pytest.raises(ValueError, match="size"):
    directions.generator("auto")  # 'auto' needs the parameters


def test_auto_structure_rule():
  small = {"w": jax.ShapeDtypeStruct((64, 1023), jnp.float32)}
  large = {"w": jax.ShapeDtypeStruct((64, 1024), jnp.float32)}
  assert directions.LEAFWISE_MIN_PARAMETERS == 64 * 1024
  assert not directions.perturbs_leafwise("auto", small)
  assert directions.perturbs_leafwise("auto", large)  # one CPU device here
  # Explicit overrides keep their structure at every size.
  assert directions.perturbs_leafwise("counter", small)
  assert directions.perturbs_leafwise("counter2", small)
  assert not directions.perturbs_leafwise("threefry", large)
  assert not directions.perturbs_leafwise("rbg", large)


def test_auto_perturbs_the_whole_tree_on_an_accelerator(monkeypatch):
  large = {"w": jax.ShapeDtypeStruct((64, 1024), jnp.float32)}
  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
  assert not directions.perturbs_leafwise("auto", large)
  assert directions.perturbs_leafwise("counter", large)
