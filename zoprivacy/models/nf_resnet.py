"""Normalizer-free ResNet (Brock, De & Smith, 2021, "Characterizing signal
propagation to close the performance gap in unnormalized ResNets").

PAZO setting (1): NF-ResNet18 trained from scratch on CIFAR-10. Batch
normalization is replaced by scaled weight standardization and analytic
signal-propagation scalars, so there are no batch statistics: each example's
output depends only on that example (required for per-example clipping and for
``jax.vmap`` over examples), and nothing leaks across examples in a batch.

Block (pre-activation, basic 3x3-3x3 for ResNet18)::

    h = act(x) / beta                    # beta = expected std of x
    shortcut = x, or WSConv1x1(h) at transitions (stride or width change)
    out = shortcut + alpha * skip_gain * WSConv3x3(act(WSConv3x3(h)))

with ``expected_std**2`` growing by ``alpha**2`` per block and reset at each
stage's first block, ``act`` the ReLU scaled by ``sqrt(2 / (1 - 1/pi))`` to
preserve variance, and ``skip_gain`` a learnable scalar initialised to 0
(SkipInit). The stem is a CIFAR-style 3x3 stride-1 convolution without max
pooling.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from zoprivacy.models import batch_dims

#: gamma for ReLU: Var(relu(z)) correction so that act(z) has unit second moment.
RELU_GAMMA = math.sqrt(2.0 / (1.0 - 1.0 / math.pi))


def scaled_relu(x):
  return nn.relu(x) * RELU_GAMMA


class WSConv(nn.Module):
  """Convolution with scaled weight standardization (Brock et al., 2021):
  ``W_hat = gain * (W - mean(W)) / (std(W) * sqrt(fan_in))``, statistics over
  the fan-in axes of each output channel (parameters only, never activations)."""

  features: int
  kernel_size: Sequence[int] = (3, 3)
  strides: Sequence[int] = (1, 1)
  use_bias: bool = True
  eps: float = 1e-4

  @nn.compact
  def __call__(self, x):
    in_ch = x.shape[-1]
    shape = tuple(self.kernel_size) + (in_ch, self.features)
    kernel = self.param(
      "kernel",
      nn.initializers.variance_scaling(1.0, "fan_in", "normal"),
      shape,
    )
    gain = self.param("gain", nn.initializers.ones, (self.features,))
    fan_in = math.prod(shape[:-1])
    mean = jnp.mean(kernel, axis=(0, 1, 2), keepdims=True)
    var = jnp.var(kernel, axis=(0, 1, 2), keepdims=True)
    w = (
      (kernel - mean)
      * jax.lax.rsqrt(jnp.maximum(var * fan_in, self.eps))
      * gain
    )
    y = jax.lax.conv_general_dilated(
      x,
      w.astype(x.dtype),
      window_strides=tuple(self.strides),
      padding="SAME",
      dimension_numbers=("NHWC", "HWIO", "NHWC"),
    )
    if self.use_bias:
      y = y + self.param("bias", nn.initializers.zeros, (self.features,))
    return y


class NFBasicBlock(nn.Module):
  """Normalizer-free pre-activation basic block (two 3x3 WSConvs)."""

  features: int
  strides: int = 1
  alpha: float = 0.2
  beta: float = 1.0

  @nn.compact
  def __call__(self, x):
    h = scaled_relu(x) / self.beta
    shortcut = x
    if self.strides != 1 or x.shape[-1] != self.features:
      shortcut = WSConv(
        self.features,
        (1, 1),
        (self.strides, self.strides),
        name="shortcut",
      )(h)
    out = WSConv(
      self.features, (3, 3), (self.strides, self.strides), name="conv0"
    )(h)
    out = WSConv(self.features, (3, 3), name="conv1")(scaled_relu(out))
    skip_gain = self.param("skip_gain", nn.initializers.zeros, ())
    return shortcut + self.alpha * skip_gain * out


class NFResNet(nn.Module):
  """NF-ResNet with basic blocks. ``NFResNet()`` is NF-ResNet18 for 32x32
  inputs (widths 64-128-256-512, two blocks per stage, about 11.2M parameters);
  shrink ``widths`` / ``depths`` for tests. Input ``[..., H, W, C]`` -> logits."""

  num_classes: int = 10
  widths: Sequence[int] = (64, 128, 256, 512)
  depths: Sequence[int] = (2, 2, 2, 2)
  stem_width: int = 64
  alpha: float = 0.2

  @nn.compact
  def __call__(self, x):
    x, batch_shape = batch_dims.fold(x, 3)
    x = WSConv(self.stem_width, (3, 3), name="stem")(x)
    expected_std = 1.0
    for stage, (width, depth) in enumerate(zip(self.widths, self.depths)):
      for i in range(depth):
        strides = 2 if (i == 0 and stage > 0) else 1
        x = NFBasicBlock(
          width,
          strides,
          self.alpha,
          expected_std,
          name=f"stage{stage}_block{i}",
        )(x)
        if i == 0:  # a transition block's shortcut re-normalises the signal
          expected_std = 1.0
        expected_std = math.sqrt(expected_std**2 + self.alpha**2)
    x = scaled_relu(x)
    x = jnp.mean(x, axis=(1, 2))
    x = nn.Dense(self.num_classes, name="head")(x)
    return x.reshape(batch_shape + (self.num_classes,))


def nf_resnet18(num_classes: int = 10) -> NFResNet:
  """NF-ResNet18 as in PAZO's CIFAR-10 experiments."""
  return NFResNet(num_classes=num_classes)
