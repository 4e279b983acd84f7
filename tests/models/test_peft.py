import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoprivacy.models.peft import (
  LoRA,
  bind_frozen,
  bitfit,
  merge_params,
  num_params,
  path_regex,
  split_params,
)
from zoprivacy.models.vit import ViT


def rbg_key(seed):
  # XLA's RngBitGenerator keys compile in a fraction of the time of threefry keys on
  # CPU, which dominates these tests' runtime; model code accepts either.
  return jax.random.key(seed, impl="rbg")


@pytest.fixture(scope="module")
def vit():
  model = ViT(
    num_classes=3,
    patch_size=4,
    hidden_size=8,
    depth=1,
    num_heads=2,
    mlp_dim=16,
  )
  x = jax.random.normal(rbg_key(0), (2, 8, 8, 1))
  params = jax.jit(model.init)(rbg_key(1), x)["params"]
  return model, params, x


def _equal_trees(a, b):
  assert jax.tree.structure(a) == jax.tree.structure(b)
  for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(u, v)


def test_bitfit_split_merge_round_trip(vit):
  _, params, _ = vit
  trainable, frozen = split_params(params, bitfit)
  flat = jax.tree_util.tree_leaves_with_path(trainable)
  assert flat and all(p[-1].key == "bias" for p, _ in flat)
  assert not any(
    p[-1].key == "bias" for p, _ in jax.tree_util.tree_leaves_with_path(frozen)
  )
  assert num_params(trainable) + num_params(frozen) == num_params(params)
  _equal_trees(merge_params(trainable, frozen), params)
  with pytest.raises(ValueError, match="both parts"):
    merge_params(trainable, params)


def test_zeroth_order_perturbation_touches_only_trainable(vit):
  model, params, x = vit
  trainable, frozen = split_params(params, path_regex(r"^head/"))
  assert set(trainable) == {"head"}
  loss = bind_frozen(
    lambda p, b: jnp.sum(model.apply({"params": p}, b) ** 2), frozen
  )
  # a two-point zeroth-order step on the trainable subset
  u = jax.tree.map(lambda v: jax.random.normal(rbg_key(2), v.shape), trainable)
  plus = jax.tree.map(lambda v, d: v + 1e-3 * d, trainable, u)
  minus = jax.tree.map(lambda v, d: v - 1e-3 * d, trainable, u)
  diff = (loss(plus, x) - loss(minus, x)) / 2e-3
  stepped = jax.tree.map(lambda v, d: v - 0.1 * diff * d, trainable, u)
  new = merge_params(stepped, frozen)
  new_t, new_f = split_params(new, path_regex(r"^head/"))
  _equal_trees(new_f, frozen)  # frozen part bit-for-bit untouched
  _equal_trees(new_f, split_params(params, path_regex(r"^head/"))[1])
  assert not np.allclose(new_t["head"]["kernel"], params["head"]["kernel"])
  # directional derivative of the trainable subset agrees with autodiff
  g = jax.grad(loss)(trainable, x)
  exact = sum(
    jnp.vdot(a, b) for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(u))
  )
  np.testing.assert_allclose(diff, exact, rtol=1e-2)


def test_lora_adapters(vit):
  model, params, x = vit
  lora = LoRA(rank=2, targets=r"attention/(query|value)/kernel$", alpha=4.0)
  assert [("/".join(p)) for p in lora.target_paths(params)] == [
    "block0/attention/query/kernel",
    "block0/attention/value/kernel",
  ]
  adapters = lora.init(rbg_key(3), params)
  q = adapters["block0"]["attention"]["query"]
  assert q["lora_A"].shape == (8, 2) and q["lora_B"].shape == (2, 8)
  assert num_params(adapters) == 2 * (8 * 2 + 2 * 8)
  # B = 0: the merged model equals the base model at initialisation
  _equal_trees(lora.merge(params, adapters), params)
  # non-zero B changes exactly the targeted kernels, by (alpha / r) A @ B
  adapters = jax.tree.map(lambda v: v + 0.5, adapters)
  merged = lora.merge(params, adapters)
  qa = adapters["block0"]["attention"]["query"]
  np.testing.assert_allclose(
    merged["block0"]["attention"]["query"]["kernel"],
    params["block0"]["attention"]["query"]["kernel"]
    + 2.0 * qa["lora_A"] @ qa["lora_B"],
    atol=1e-6,
  )
  untouched = lambda t: split_params(t, path_regex(r"(query|value)/kernel$"))[1]
  _equal_trees(untouched(merged), untouched(params))
  # jit/vmap friendly: the loss is a pure function of the adapters
  f = jax.jit(lambda a, b: model.apply({"params": lora.merge(params, a)}, b))
  out = f(adapters, x)
  per_ex = jax.vmap(lambda a, b: f(a, b[None])[0], in_axes=(None, 0))(
    adapters, x
  )
  np.testing.assert_allclose(per_ex, out, atol=1e-5)
  assert not np.allclose(out, model.apply({"params": params}, x))
  with pytest.raises(ValueError, match="no 2-D kernel"):
    LoRA(rank=2, targets="nonexistent").init(rbg_key(0), params)
