"""Opacus' ghost clipping: the fastest first-order DP-SGD peer on a CPU.

One DP-SGD step (per-example clipping by ghost norms, Gaussian noise, SGD)
with ``PrivacyEngine.make_private(..., grad_sample_mode="ghost")`` on the
same torch models as the DPZero port (``torch_dpzero.build_mlp`` /
``build_cnn``), clip 1, noise multiplier 1, lr 1e-3. Optional: without
opacus (``pip install opacus``) :func:`setup` raises ``ImportError``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch_dpzero import build_cnn, build_mlp


def setup(model_name: str, batch_size: int, *, seed: int = 0):
  """``step()``: one ghost-clipping DP-SGD step of the 'mlp' (28x28x1) or
  'cnn' (8x8x1) model on a fixed batch of ``batch_size``."""
  from opacus import PrivacyEngine  # pylint: disable=g-import-not-at-top

  torch.manual_seed(seed)
  rng = np.random.default_rng(seed)
  shape = (1, 28, 28) if model_name == "mlp" else (1, 8, 8)
  build = build_mlp if model_name == "mlp" else build_cnn
  model = build(in_shape=shape)
  x = torch.from_numpy(rng.normal(size=(batch_size,) + shape).astype("f4"))
  y = torch.from_numpy(rng.integers(0, 10, size=batch_size).astype(np.int64))
  loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(x, y), batch_size=batch_size
  )
  optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
  engine = PrivacyEngine()
  model, optimizer, criterion, _ = engine.make_private(
    module=model,
    optimizer=optimizer,
    data_loader=loader,
    criterion=nn.CrossEntropyLoss(),
    noise_multiplier=1.0,
    max_grad_norm=1.0,
    grad_sample_mode="ghost",
    poisson_sampling=False,
  )

  def step():
    optimizer.zero_grad(set_to_none=True)
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    return loss

  return step


def threaded_call(model_name: str, batch_size: int, threads: int):
  """:func:`setup`'s step at ``threads`` torch threads, restoring the
  thread count after each call (the DPZero port runs at one)."""
  step = setup(model_name, batch_size)

  def call():
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
      return step()
    finally:
      torch.set_num_threads(before)

  return call
