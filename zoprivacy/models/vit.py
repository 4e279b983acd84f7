"""Vision Transformer (Dosovitskiy et al., 2021).

PAZO setting (2): a small ViT (about 10M parameters) trained on Tiny-ImageNet
64x64 images. The paper gives only the size; :func:`vit_small_pazo` is this
library's configuration of that size (patch 8, width 384, depth 6, 6 heads,
MLP 1536, 200 classes: 10.8M parameters). ViT-S/16 proper (depth 12, 22M) is
``ViT(hidden_size=384, depth=12, num_heads=6, mlp_dim=1536, patch_size=16)``.

Only LayerNorm (per token) is used, so examples never interact. All linear
maps are 2-D ``nn.Dense`` kernels so LoRA (:mod:`zoprivacy.models.peft`) can
target them by name (``query``, ``key``, ``value``, ``out``, ``mlp_in``, ``mlp_out``).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from zoprivacy.models import batch_dims


class SelfAttention(nn.Module):
  """Multi-head self-attention with separate query/key/value/out Dense layers.
  ``mask``: optional ``[..., L]`` boolean, True for tokens that may be attended to."""

  num_heads: int

  @nn.compact
  def __call__(self, x, mask=None):
    d = x.shape[-1]
    if d % self.num_heads:
      raise ValueError(
        f"hidden size {d} not divisible by {self.num_heads} heads"
      )
    hd = d // self.num_heads

    def heads(name):
      y = nn.Dense(d, name=name)(x)
      return y.reshape(y.shape[:-1] + (self.num_heads, hd))

    q, k, v = heads("query"), heads("key"), heads("value")
    logits = jnp.einsum("...qhd,...khd->...hqk", q, k) / jnp.sqrt(hd).astype(
      x.dtype
    )
    if mask is not None:
      logits = jnp.where(
        mask[..., None, None, :], logits, jnp.finfo(logits.dtype).min
      )
    weights = jax.nn.softmax(logits, axis=-1)
    y = jnp.einsum("...hqk,...khd->...qhd", weights, v).reshape(x.shape)
    return nn.Dense(d, name="out")(y)


class ViTBlock(nn.Module):
  num_heads: int
  mlp_dim: int

  @nn.compact
  def __call__(self, x):
    x = x + SelfAttention(self.num_heads, name="attention")(
      nn.LayerNorm(name="ln1")(x)
    )
    h = nn.Dense(self.mlp_dim, name="mlp_in")(nn.LayerNorm(name="ln2")(x))
    return x + nn.Dense(x.shape[-1], name="mlp_out")(nn.gelu(h))


class ViT(nn.Module):
  """Pre-LN ViT classifier: patch embedding (Conv with stride = patch), class
  token, learned position embeddings, ``depth`` blocks, final LayerNorm, linear
  head on the class token. Defaults are tiny (for tests); see :func:`vit_small_pazo`.
  Input ``[..., H, W, C]`` with H, W divisible by ``patch_size``."""

  num_classes: int = 10
  patch_size: int = 4
  hidden_size: int = 32
  depth: int = 2
  num_heads: int = 2
  mlp_dim: int = 64

  @nn.compact
  def __call__(self, x):
    x, batch_shape = batch_dims.fold(x, 3)
    p = self.patch_size
    x = nn.Conv(
      self.hidden_size,
      (p, p),
      strides=(p, p),
      padding="VALID",
      name="patch_embed",
    )(x)
    n, h, w, d = x.shape
    x = x.reshape(n, h * w, d)
    cls = self.param("cls_token", nn.initializers.zeros, (1, 1, d))
    x = jnp.concatenate(
      [jnp.broadcast_to(cls, (n, 1, d)).astype(x.dtype), x], axis=1
    )
    pos = self.param(
      "pos_embedding", nn.initializers.normal(0.02), (1, h * w + 1, d)
    )
    x = x + pos
    for i in range(self.depth):
      x = ViTBlock(self.num_heads, self.mlp_dim, name=f"block{i}")(x)
    x = nn.LayerNorm(name="ln_final")(x)
    logits = nn.Dense(self.num_classes, name="head")(x[:, 0])
    return logits.reshape(batch_shape + (self.num_classes,))


def vit_small_pazo(num_classes: int = 200) -> ViT:
  """The ~10M-parameter ViT used for PAZO's Tiny-ImageNet setting (64x64 inputs)."""
  return ViT(
    num_classes=num_classes,
    patch_size=8,
    hidden_size=384,
    depth=6,
    num_heads=6,
    mlp_dim=1536,
  )
