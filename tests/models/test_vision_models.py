import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoprivacy.models.nf_resnet import (
  RELU_GAMMA,
  NFResNet,
  WSConv,
  nf_resnet18,
  scaled_relu,
)
from zoprivacy.models.vit import ViT, vit_small_pazo


def rbg_key(seed):
  # XLA's RngBitGenerator keys compile in a fraction of the time of threefry keys on
  # CPU, which dominates these tests' runtime; model code accepts either.
  return jax.random.key(seed, impl="rbg")


def _perturb_image(x, j):
  return x.at[j].set(x[j] + 1.0)


def test_nf_resnet_shapes_and_independence(assert_per_example_independent):
  model = NFResNet(num_classes=7, widths=(8, 16), depths=(1, 1), stem_width=8)
  x = jax.random.normal(rbg_key(0), (4, 8, 8, 3))
  variables = jax.jit(model.init)(rbg_key(1), x)
  assert set(variables) == {"params"}  # no batch statistics anywhere
  params = variables["params"]
  # SkipInit gains start at 0; give them a value so residual branches matter
  params = jax.tree_util.tree_map_with_path(
    lambda p, v: jnp.full_like(v, 0.5) if p[-1].key == "skip_gain" else v,
    params,
  )
  fn = lambda b: model.apply({"params": params}, b)
  out = assert_per_example_independent(fn, x, _perturb_image)
  assert out.shape == (4, 7) and np.all(np.isfinite(out))
  # leading batch dims are preserved
  assert jax.eval_shape(fn, x.reshape(2, 2, 8, 8, 3)).shape == (2, 2, 7)
  # stage 1 downsamples: the transition block has a projection shortcut
  assert (
    "shortcut" in params["stage1_block0"]
    and "shortcut" not in params["stage0_block0"]
  )


def test_ws_conv_standardizes_weights():
  conv = WSConv(5, (3, 3))
  x = jax.random.normal(rbg_key(0), (1, 6, 6, 4))
  p = jax.jit(conv.init)(rbg_key(1), x)["params"]
  p = {**p, "kernel": p["kernel"] * 7.0 + 3.0, "gain": jnp.full((5,), 2.0)}
  apply = jax.jit(conv.apply)
  y = apply({"params": p}, x)
  # the standardized kernel is invariant to affine rescaling of the raw kernel
  p2 = {**p, "kernel": p["kernel"] * 0.1 - 1.0}
  np.testing.assert_allclose(apply({"params": p2}, x), y, atol=1e-4)
  # scaled ReLU preserves the second moment of a unit Gaussian
  z = jax.random.normal(rbg_key(2), (200_000,))
  assert abs(float(jnp.mean(scaled_relu(z) ** 2)) - RELU_GAMMA**2 / 2) < 0.02
  assert abs(RELU_GAMMA**2 / 2 - 1 / (1 - 1 / math.pi)) < 1e-12


def test_nf_resnet18_default_size():
  shapes = jax.eval_shape(
    NFResNet().init, rbg_key(0), jnp.zeros((1, 32, 32, 3))
  )
  n = sum(x.size for x in jax.tree.leaves(shapes))
  assert 11.1e6 < n < 11.3e6  # ResNet18-sized


def test_vit_shapes_and_independence(assert_per_example_independent):
  model = ViT(
    num_classes=5,
    patch_size=4,
    hidden_size=16,
    depth=2,
    num_heads=2,
    mlp_dim=32,
  )
  x = jax.random.normal(rbg_key(0), (3, 8, 8, 3))
  params = jax.jit(model.init)(rbg_key(1), x)["params"]
  fn = lambda b: model.apply({"params": params}, b)
  out = assert_per_example_independent(fn, x, _perturb_image)
  assert out.shape == (3, 5)
  assert params["pos_embedding"].shape == (
    1,
    5,
    16,
  )  # 2x2 patches + class token
  assert params["block0"]["attention"]["query"]["kernel"].shape == (16, 16)


@pytest.mark.slow
def test_full_size_paper_models_forward():
  """NF-ResNet18 on CIFAR-sized and the PAZO ViT-small on Tiny-ImageNet-sized inputs."""
  for model, shape, classes in (
    (nf_resnet18(10), (2, 32, 32, 3), 10),
    (vit_small_pazo(200), (2, 64, 64, 3), 200),
  ):
    x = jax.random.uniform(rbg_key(0), shape)
    params = jax.jit(model.init)(rbg_key(1), x)["params"]
    fn = jax.jit(lambda p, b, m=model: m.apply({"params": p}, b))
    out = fn(params, x)
    assert out.shape == (2, classes) and bool(jnp.all(jnp.isfinite(out)))
    out2 = fn(params, x.at[1].set(0.0))
    np.testing.assert_array_equal(out[0], out2[0])
