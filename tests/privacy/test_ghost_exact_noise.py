"""Exact noise on ghost clipping: the certified norm, the rounded sum's
proven sensitivity, bfloat16 and TF32, the plan and the default."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import zoprivacy
from zoprivacy.estimators import base
from zoprivacy.first_order import ghost_certified, ghost_clipping, ghost_groups
from zoprivacy.secret_noise import rounded_sum_mechanism as rsm


def _dense_sizes(x, g):
  """The certified norm and absolute size of a dense layer (kernel and
  bias) from per-example inputs ``x [B, T, d_in]`` and output gradients
  ``g [B, T, d_out]``."""
  d_in, d_out = x.shape[-1], g.shape[-1]
  leaves = [jnp.zeros((d_in, d_out)), jnp.zeros(d_out)]
  parts, _ = ghost_groups.dense(
    None, [[jnp.asarray(x)]], [jnp.asarray(g)], {"kernel": 0, "bias": 1}, leaves
  )
  sizes = ghost_certified.certified_sizes(parts)
  unit = 2.0 ** np.asarray(sizes.exponent, np.float64)
  ok = np.asarray(sizes.ok)
  norm = np.where(ok, np.asarray(sizes.norm, np.float64) * unit, np.inf)
  return norm, np.asarray(sizes.absolute, np.float64) * unit


def _true_norm(x, g):
  """``||grad_b||`` in float64 from the float32 inputs (products exact)."""
  x, g = np.asarray(x, np.float64), np.asarray(g, np.float64)
  kernel = np.einsum("btd,bte->bde", x, g)
  bias = g.sum(axis=1)
  return np.sqrt((kernel**2).sum(axis=(1, 2)) + (bias**2).sum(axis=1))


def _adversarial_inputs(rng, positions):
  """Cancelling positions (the gradient nearly zero, each position's part
  large), wide magnitudes (1e-30 to 1e15) and plain random rows."""
  b, d_in, d_out = 12, 7, 5
  x = rng.normal(size=(b, positions, d_in)).astype(np.float32)
  g = rng.normal(size=(b, positions, d_out)).astype(np.float32)
  x[:4] = x[:4, :1]  # the same input at every position ...
  for k, eps in enumerate((2.0**-22, 2.0**-12, 1e-3, 0.0)):
    g[k, 1::2] = -g[k, 0::2][: g[k, 1::2].shape[0]] * np.float32(1 + eps)
  scale = 10.0 ** rng.integers(-30, 16, size=(b, 1, 1))
  x[4:8] *= scale[4:8].astype(np.float32)
  g[6:10] /= scale[6:10].astype(np.float32)
  return x, g


@pytest.mark.parametrize("positions", [1, 2, 5])
def test_certified_norm_bounds_the_float64_norm(positions):
  """On cancelling and badly scaled inputs the certified norm is never
  below the true per-example norm (float64 from the same float32 values)
  unless the example is refused (factor 0: shown infinite here)."""
  rng = np.random.default_rng(positions)
  for _ in range(20):
    x, g = _adversarial_inputs(rng, positions)
    norm, absolute = _dense_sizes(x, g)
    true = _true_norm(x, g)
    finite = np.isfinite(norm)
    assert np.all(norm[finite] >= true[finite])
    assert np.all(absolute[finite] >= true[finite] * (1 - 1e-6))


def test_ghost_norm_alone_can_under_estimate():
  """The reason for the certificate: the float32 ghost norm of cancelling
  positions is below the true norm (here 0 against a nonzero one)."""
  x = np.ones((1, 2, 3), np.float32)
  g = np.array([[[1.0, 2.0, 3.0], [-1.0, -2.0, -3.0000002]]], np.float32)
  parts, _ = ghost_groups.dense(
    None,
    [[jnp.asarray(x)]],
    [jnp.asarray(g)],
    {"kernel": 0},
    [jnp.zeros((3, 3))],
  )
  unit = 4.0 ** int(parts[0].exponent[0])
  assert float(parts[0].sq[0]) * unit < _true_norm(x, g)[0] ** 2
  sizes = ghost_certified.certified_sizes(parts)
  norm = float(sizes.norm[0]) * 2.0 ** int(sizes.exponent[0])
  assert norm >= _true_norm(x, g)[0]


class _Model(nn.Module):
  """A dense model over ``T`` positions (a sequence, so ghost norms sum
  position pairs), its parameters in ``dtype``."""

  dtype: object = jnp.float32

  @nn.compact
  def __call__(self, x):
    h = nn.tanh(nn.Dense(6, param_dtype=self.dtype, dtype=self.dtype)(x))
    return nn.Dense(2, param_dtype=self.dtype, dtype=self.dtype)(h).sum()


def _ghost_case(dtype=jnp.float32, rows=10, positions=3):
  model = _Model(dtype)
  x = np.random.default_rng(0).normal(size=(rows, positions, 4))
  x[0] *= 1e4  # an example far above the clip
  x[1, 1] = -x[1, 0]  # positions that cancel
  x = jnp.asarray(x, jnp.float32)
  params = model.init(jax.random.key(0), x[0])["params"]
  loss = lambda p, xb: model.apply({"params": p}, xb)
  return params, loss, x


def _rounded_sum(params, loss, x, mask, mech):
  args = base.parse_extra_args(dict(per_example_loss=loss, batch=x, mask=mask))
  sums, bound = ghost_clipping.certified_clipped_sum(
    args, params, clip=mech.clip
  )
  flat = jnp.concatenate([v.reshape(-1) for v in jax.tree.leaves(sums)])
  k = mech.grid_exponent(bound, flat.shape[0])
  ints = np.asarray(rsm.rounded(flat, k), np.int64)
  return ints, mech.sensitivity(bound, flat.shape[0], k), sums


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_rounded_sums_of_neighbours_are_within_the_proven_sensitivity(dtype):
  """Removing any one example (its mask) moves the integer sum by at most
  the proven ``Delta`` (and by nearly ``C / gamma`` for the example far
  above the clip); a bfloat16 model's sum stays float32."""
  params, loss, x = _ghost_case(dtype)
  mech = rsm.RoundedSumDiscreteGaussianMechanism(0.5, 1.0)
  full = jnp.ones(x.shape[0], bool)
  ints, delta, sums = _rounded_sum(params, loss, x, full, mech)
  assert all(v.dtype == jnp.float32 for v in jax.tree.leaves(sums))
  moved = []
  for i in range(x.shape[0]):
    other, delta_i, _ = _rounded_sum(
      params, loss, x, full.at[i].set(False), mech
    )
    assert delta_i == delta
    moved.append(np.sqrt(np.sum((ints - other) ** 2.0)))
  assert max(moved) <= delta
  assert moved[0] >= 0.9 * (delta - np.sqrt(ints.size))  # clipped at C


def test_exact_ghost_sums_run_at_highest_precision():
  """Every product of the exact ghost path's sums and norms is a float32
  HIGHEST product (no TF32 or bfloat16 passes), even under a bfloat16
  default matmul precision, and a TPU is refused."""
  params, loss, x = _ghost_case(jnp.bfloat16)
  args = base.parse_extra_args(dict(per_example_loss=loss, batch=x))
  fn = lambda p: ghost_clipping.certified_clipped_sum(args, p, clip=1.0)[0]
  with jax.default_matmul_precision("bfloat16"):
    jaxpr = jax.make_jaxpr(fn)(params)
  dots = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "dot_general"]
  assert dots and all(
    e.params["precision"] is not None
    and all(p == jax.lax.Precision.HIGHEST for p in e.params["precision"])
    for e in dots
    if e.invars[0].aval.dtype == jnp.float32
  )
  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(jax, "default_backend", lambda: "tpu")
    with pytest.raises(ValueError, match="IEEE float32"):
      fn(params)


def test_float_error_bound_refuses_or_warns_when_large():
  bound = ghost_certified.SumBound(rows=4096, length=4096 * 512, ratio=22.6)
  mech = rsm.RoundedSumDiscreteGaussianMechanism(1.0, 1.0)
  with pytest.raises(ValueError, match="smaller physical batch"):
    mech.check_bound(bound)
  with pytest.warns(UserWarning, match="proven float error"):
    mech.check_bound(ghost_certified.SumBound(128, 128 * 16, 4.0))  # 12.5%
  small = ghost_certified.SumBound(64, 64, 1.0)
  assert mech.check_bound(small) < 1e-3
  k = mech.grid_exponent(small, 4_200_000)
  assert 2.0**-k <= 1.0 / rsm.SUM_GRID
  # 3.2% over C at d = 4.2M, B = 64 (the rounding, almost all of it)
  assert mech.sensitivity(small, 4_200_000, k) * 2.0**-k == pytest.approx(
    1.0 + np.sqrt(4_200_000) / 2**16, rel=1e-3
  )


@pytest.mark.parametrize("name", ["dp_sgd", "dpmd"])
def test_ghost_default_is_exact_with_the_bound_in_its_plan(name):
  """``per_example_clipping='ghost'`` defaults to exact noise; the plan
  names the rounded sum and its bound (describe and to_dict); the update
  runs; ``noise='secure_mode'`` stays a named opt-in."""
  kw = dict(noise_multiplier=1.0, expected_batch_size=10, clip=0.5)
  if name == "dpmd":
    kw["num_steps"] = 10
  factory = getattr(zoprivacy, name)
  est = factory(per_example_clipping="ghost", **kw)
  plan = est.privacy_plan
  assert plan.mechanism.name == "rounded_sum_discrete_gaussian"
  assert plan.noise_kind == "discrete_vector"
  assert "proven float error" in plan.describe()
  assert "(C + 2E) / gamma + sqrt(d)" in plan.describe()
  assert plan.to_dict()["sum_grid"] == 2**16
  assert zoprivacy.privacy.PrivacyPlan.from_dict(plan.to_dict()) == plan
  opt_in = factory(per_example_clipping="ghost", noise="secure_mode", **kw)
  assert opt_in.privacy_plan.float_defence == "secure_mode"
  params, loss, x = _ghost_case()
  extra = {"public_batch": x[:2]} if name == "dpmd" else {}
  tx = optax.chain(est, optax.sgd(0.1))
  step = jax.jit(
    lambda s: tx.update(
      params, s, params, per_example_loss=loss, batch=x, **extra
    )
  )
  updates, _ = step(zoprivacy.init(tx, params))
  assert all(np.all(np.isfinite(u)) for u in jax.tree.leaves(updates))


def test_a_large_formed_gradient_is_certified_in_two_stages():
  """A gradient formed per example of more than 2^20 entries (a tied
  embedding's, which falls back) sums its squares row by row, then the
  rows: ``c + r`` roundings, where ``gamma(n)`` has no bound from 2^23
  entries; its certified norm still bounds the float64 norm, with rows of
  very different magnitudes (1e-30 to 1e30) in one example."""
  rng = np.random.default_rng(3)
  v = rng.normal(size=(2, 1100, 1000)).astype(np.float32)
  v[0] *= (10.0 ** rng.integers(-30, 31, size=(1100, 1))).astype(np.float32)
  part = ghost_certified.object_part(jnp.asarray(v))
  assert part.terms == 1100 + 1000 + 6
  sizes = ghost_certified.certified_sizes([part])
  norm = np.asarray(sizes.norm, np.float64) * 2.0 ** np.asarray(
    sizes.exponent, np.float64
  )
  true = np.sqrt(np.sum(np.asarray(v, np.float64) ** 2, axis=(1, 2)))
  assert np.all(np.asarray(sizes.ok)) and np.all(norm >= true)
  assert np.all(norm <= true * 1.001)


def test_default_exact_ghost_dp_sgd_traces_with_a_tied_embedding_of_10m():
  """The default (exact) ghost DP-SGD on an OPT whose tied embedding
  (50,272 x 192 = 9.7M entries, also read by the LM head) falls back to
  its per-example gradient: traced, not refused for want of a float error
  bound."""
  from zoprivacy.models.opt import (  # pylint: disable=g-import-not-at-top
    OPTConfig,
    OPTForCausalLM,
    per_example_lm_loss,
  )

  config = OPTConfig(
    hidden_size=192, num_hidden_layers=2, ffn_dim=384, num_attention_heads=4
  )
  model = OPTForCausalLM(config)
  ids = jax.ShapeDtypeStruct((2, 16), jnp.int32)
  params = jax.eval_shape(
    lambda: model.init(
      jax.random.key(0), jnp.zeros((1, 4), jnp.int32), jnp.ones((1, 4))
    )["params"]
  )
  batch = {"input_ids": ids, "attention_mask": ids, "loss_mask": ids}
  loss = lambda p, b: per_example_lm_loss(p, b, model=model, answer_window=4)

  bounds = []  # static: read at trace time

  def clipped_sum(p, b):
    args = base.parse_extra_args(dict(batched_loss=loss, batch=b))
    sums, bound = ghost_clipping.certified_clipped_sum(args, p, clip=1.0)
    bounds.append(bound)
    return sums

  with pytest.warns(UserWarning, match="embed_tokens"):
    sums = jax.eval_shape(clipped_sum, params, batch)
  (bound,) = bounds
  assert bound.error(1.0) < 1e-3
  assert jax.tree.structure(sums) == jax.tree.structure(params)
