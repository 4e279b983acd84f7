"""Small Flax models for the offline default and for benchmarks.

Neither uses batch statistics, so a model applied to a batch computes each
example's output from that example alone, as per-example clipping requires.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn


class SmallCNN(nn.Module):
  """Conv -> ReLU -> [Conv(stride 2) -> ReLU] -> flatten -> Dense(classes).

  Sized for 8x8 digits and 28x28 Fashion-MNIST; ``features`` sets the
  channels of each 3x3 convolution (stride 2 after the first).
  """

  num_classes: int = 10
  features: Sequence[int] = (8, 16)

  @nn.compact
  def __call__(self, x):
    for i, f in enumerate(self.features):
      x = nn.Conv(f, (3, 3), strides=(1, 1) if i == 0 else (2, 2))(x)
      x = nn.relu(x)
    x = x.reshape(x.shape[:-3] + (-1,))
    return nn.Dense(self.num_classes)(x)


class MLP(nn.Module):
  """Flatten -> [Dense -> ReLU] * len(hidden) -> Dense(classes)."""

  num_classes: int = 10
  hidden: Sequence[int] = (128,)

  @nn.compact
  def __call__(self, x):
    x = x.reshape(x.shape[:-3] + (-1,)) if x.ndim >= 3 else x
    for h in self.hidden:
      x = nn.relu(nn.Dense(h)(x))
    return nn.Dense(self.num_classes)(x)
