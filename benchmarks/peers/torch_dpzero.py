r"""PyTorch port of the reference DPZero step, for timing against JAX.

    python benchmarks/peers/torch_dpzero.py --model mlp --batch 64 --memory
    python benchmarks/peers/torch_dpzero.py --model minilm --length 64
    python benchmarks/peers/torch_dpzero.py --model cnn --batch 256 --forward

The step of the official DPZero code (Zhang et al. 2024, Alg. 2, its
RoBERTa trainer's memory-efficient path, itself MeZO's, Malladi et al.
2023, Alg. 1): with a fresh public seed ``s`` per step,

1. ``torch.manual_seed(s)``; every parameter ``x += lambda u`` with ``u``
   drawn by ``torch.normal`` in place of storing it; per-example losses
   ``f(x + lambda u; xi_i)`` (no grad);
2. reseed, ``x -= 2 lambda u``; losses at ``x - lambda u``;
3. ``d_i = (f_+ - f_-) / (2 lambda)``, clipped per example
   ``d_i min(1, C / |d_i|)``; ``g = sum_i clip(d_i) / B + z``,
   ``z ~ N(0, (sigma C / B)^2)`` (Alg. 2 line 3);
4. reseed, ``x += lambda u`` (back to ``x``);
5. reseed, ``x -= lr g u``.

So ``u`` is generated four times and never stored: the working memory is
the parameters, one ``u`` for the largest tensor and the forward pass.
Differences from the official code, none of which changes the cost: the
perturbations use ``Tensor.add_`` (in place) where the official code
rebinds ``param.data`` to a new tensor; the noise comes from its own
generator seeded from OS entropy (the official code draws it from the
global generator just reseeded with the public ``s``); the noise std is
the add/remove ``sigma C / B`` (the official replace-one uses ``2 sigma C /
B``), as zoprivacy's ``dpzero`` default.

:func:`build_mlp` and :func:`build_cnn` are the torch twins of
``zoprivacy.models.small.MLP`` and ``SmallCNN`` (same layers, same
parameter count; NCHW images); ``torch_bert.minilm`` is the twin of the
all-MiniLM-L6-v2 classifier (``BertClassifier``, mean pooling).

:func:`setup` puts the model and batch on the CPU or, for a run on a GPU
(``benchmarks/peers.py`` on a CUDA device), on the GPU;
:func:`cuda_step_memory` then reads the step's peak from torch's allocator.
``--memory`` reports the resident-set growth over one step (``VmHWM``
after ``/proc/self/clear_refs`` 5) in a process run with glibc's
``MALLOC_MMAP_THRESHOLD_`` fixed, so freed tensors leave the resident set
and the high-water mark is the step's own.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import time

import numpy as np
import torch
from torch import nn


def build_mlp(*, in_shape, hidden=(2304, 1024), num_classes=10) -> nn.Module:
  """Flatten -> [Linear -> ReLU] * len(hidden) -> Linear (small.MLP)."""
  layers, width = [nn.Flatten()], int(np.prod(in_shape))
  for h in hidden:
    layers += [nn.Linear(width, h), nn.ReLU()]
    width = h
  layers.append(nn.Linear(width, num_classes))
  return nn.Sequential(*layers)


def build_cnn(*, in_shape, features=(8, 16), num_classes=10) -> nn.Module:
  """3x3 convs (stride 1, then 2), ReLU, flatten, Linear (small.SmallCNN)."""
  channels, height, width = in_shape
  layers = []
  for i, f in enumerate(features):
    stride = 1 if i == 0 else 2
    layers += [nn.Conv2d(channels, f, 3, stride=stride, padding=1), nn.ReLU()]
    channels = f
    if stride == 2:
      height, width = (height + 1) // 2, (width + 1) // 2
  layers += [nn.Flatten(), nn.Linear(channels * height * width, num_classes)]
  return nn.Sequential(*layers)


class DPZeroStep:
  """The reference DPZero step (module docstring), parameters updated in place.

  Args:
    model: a ``torch.nn.Module`` mapping inputs to logits.
    learning_rate: ``lr``.
    smoothing: ``lambda``.
    clip: ``C`` on each per-example finite difference.
    noise_multiplier: ``sigma``.
    expected_batch_size: ``B``; the noisy sum is divided by it.
    direction_seed: seeds the public per-step seeds ``s``.
    insecure_test_noise_seed: fixes the secret noise (tests only).
  """

  def __init__(
    self,
    model,
    *,
    learning_rate: float,
    smoothing: float,
    clip: float,
    noise_multiplier: float,
    expected_batch_size: float,
    direction_seed: int = 0,
    insecure_test_noise_seed: int | None = None,
  ):
    self.model = model
    self.params = [p for p in model.parameters() if p.requires_grad]
    self.learning_rate = learning_rate
    self.smoothing = smoothing
    self.clip = clip
    self.noise_std = noise_multiplier * clip / expected_batch_size
    self.expected_batch_size = expected_batch_size
    self.seeds = np.random.default_rng(direction_seed)
    self.noise = torch.Generator()
    self.noise.manual_seed(
      secrets.randbits(63)
      if insecure_test_noise_seed is None
      else insecure_test_noise_seed
    )

  def _perturb(self, seed: int, scale: float):
    """``x += scale u`` with ``u ~ N(0, I)`` regenerated from ``seed``."""
    torch.manual_seed(seed)
    for p in self.params:
      u = torch.normal(0.0, 1.0, size=p.shape, dtype=p.dtype, device=p.device)
      p.data.add_(u, alpha=scale)

  def _losses(self, x, y):
    return nn.functional.cross_entropy(self.model(x), y, reduction="none")

  @torch.no_grad()
  def __call__(self, x, y) -> float:
    """One step on the batch ``(x, y)``; returns the privatized scalar ``g``."""
    self.model.eval()
    seed = int(self.seeds.integers(1_000_000_000))
    self._perturb(seed, self.smoothing)
    loss_plus = self._losses(x, y)
    self._perturb(seed, -2 * self.smoothing)
    loss_minus = self._losses(x, y)
    diff = (loss_plus - loss_minus) / (2 * self.smoothing)
    factor = torch.minimum(
      torch.ones_like(diff), self.clip / torch.abs(diff)
    )  # Official dpzero_clip: d min(1, C / |d|).
    noise = torch.normal(0.0, self.noise_std, (), generator=self.noise)
    g = float(torch.sum(factor * diff) / self.expected_batch_size + noise)
    self._perturb(seed, self.smoothing)  # back to x
    self._perturb(seed, -self.learning_rate * g)  # the update
    return g


def setup(
  model_name: str,
  batch_size: int,
  *,
  seed: int = 0,
  device="cpu",
  length: int = 64,
  weights: str = "pretrained",
):
  """``(step, x, y, num_params)`` for 'mlp' (28x28x1), 'cnn' (8x8x1) or
  'minilm' (``length`` tokens, every one real; ``weights`` "pretrained" or
  "random", ``torch_bert.minilm``), model and batch on ``device`` ("cpu"
  or "cuda")."""
  torch.manual_seed(seed)
  rng = np.random.default_rng(seed)
  if model_name == "minilm":
    import torch_bert  # pylint: disable=g-import-not-at-top

    model, num_classes = torch_bert.minilm(weights=weights), 2
    ids = rng.integers(1000, model.vocab_size, size=(batch_size, length))
    ids[:, 0], ids[:, -1] = 101, 102  # [CLS] ... [SEP]
    x = torch.from_numpy(ids)
  elif model_name in ("mlp", "cnn"):
    shape = (1, 28, 28) if model_name == "mlp" else (1, 8, 8)
    build = build_mlp if model_name == "mlp" else build_cnn
    model, num_classes = build(in_shape=shape), 10
    x = torch.from_numpy(
      rng.normal(size=(batch_size,) + shape).astype(np.float32)
    )
  else:
    raise ValueError(f"model_name={model_name!r}; use 'mlp', 'cnn', 'minilm'")
  model = model.to(device)
  x = x.to(device)
  y = torch.from_numpy(
    rng.integers(0, num_classes, size=batch_size).astype(np.int64)
  ).to(device)
  step = DPZeroStep(
    model,
    learning_rate=1e-3,
    smoothing=1e-3,
    clip=1.0,
    noise_multiplier=1.0,
    expected_batch_size=batch_size,
  )
  num_params = sum(p.numel() for p in model.parameters())
  return step, x, y, num_params


def _status_kib(field: str) -> int:
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(field + ":"):
        return int(line.split()[1])
  raise KeyError(field)


def _memory_report(step, x, y, num_params, growth) -> dict:
  return {
    "num_params": num_params,
    "param_bytes": sum(p.numel() * p.element_size() for p in step.params),
    "batch_bytes": x.numel() * x.element_size() + y.numel() * y.element_size(),
    "step_growth_bytes": growth,
  }


def cuda_step_memory(model_name: str, batch_size: int, **setup_kwargs) -> dict:
  """On the GPU: parameters + batch, and the step's peak allocation over
  them (``torch.cuda.max_memory_allocated``, the caching allocator's own
  count of live tensors)."""
  step, x, y, num_params = setup(
    model_name, batch_size, device="cuda", **setup_kwargs
  )
  for _ in range(2):
    step(x, y)
  torch.cuda.synchronize()
  before = torch.cuda.memory_allocated()
  torch.cuda.reset_peak_memory_stats()
  step(x, y)
  torch.cuda.synchronize()
  growth = torch.cuda.max_memory_allocated() - before
  return _memory_report(step, x, y, num_params, growth)


def step_memory(model_name: str, batch_size: int, **setup_kwargs) -> dict:
  """Resident bytes of parameters + batch, and the step's growth over them."""
  step, x, y, num_params = setup(model_name, batch_size, **setup_kwargs)
  for _ in range(2):
    step(x, y)
  before = _status_kib("VmRSS")
  with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets VmHWM to the current VmRSS
  step(x, y)
  growth = max(0, _status_kib("VmHWM") - before) * 1024
  return _memory_report(step, x, y, num_params, growth)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
    "--model", choices=("mlp", "cnn", "minilm"), default="mlp"
  )
  parser.add_argument("--batch", type=int, default=64)
  parser.add_argument("--length", type=int, default=64, help="minilm tokens")
  parser.add_argument(
    "--weights", choices=("pretrained", "random"), default="pretrained"
  )
  parser.add_argument("--reps", type=int, default=20)
  parser.add_argument(
    "--memory", action="store_true", help="print the step's memory as JSON"
  )
  parser.add_argument(
    "--forward",
    action="store_true",
    help="time one forward pass (no grad) instead of the step",
  )
  args = parser.parse_args()
  torch.set_num_threads(1)
  minilm_args = dict(length=args.length, weights=args.weights)
  if args.memory:
    print(json.dumps(step_memory(args.model, args.batch, **minilm_args)))
    return
  step, x, y, _ = setup(args.model, args.batch, **minilm_args)
  call = step
  if args.forward:

    def call(x, y):
      with torch.no_grad():
        return step.model(x)

  for _ in range(2):
    call(x, y)
  times = []
  for _ in range(args.reps):
    t0 = time.perf_counter()
    call(x, y)
    times.append(time.perf_counter() - t0)
  print(
    json.dumps(
      {
        "min_s": min(times),
        "median_s": statistics.median(times),
        "load": os.getloadavg(),
      }
    )
  )


if __name__ == "__main__":
  main()
