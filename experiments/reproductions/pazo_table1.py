"""Offline analog of PAZO Table 1 on Fashion-MNIST, tuned on public data only.

PAZO Table 1 trains NF-ResNet18 on CIFAR-10 with 4% imbalanced public data
at epsilon in {0.1, 0.5, 1, 2, 3}, delta = 1/(number of training samples).
CIFAR-10 is not on this machine, so this analog keeps the protocol and
swaps the data and model:

* Fashion-MNIST (Debian package), 4% of the training images public with an
  exponential class imbalance of ratio 10, the rest private; a small CNN
  (:mod:`experiments.reproductions.pazo_table1_data` has the splits);
* epsilon in {0.1, 0.5, 1, 2, 3} at delta = 1e-5 (below the paper's
  1/n = 1/57,600), Poisson sampling, the same number of steps, expected
  batch size and noise calibration for every method;
* DP-SGD, DPZero, PAZO-M, PAZO-P, PAZO-P', PAZO-S, DPMD, DOPE-SGD, GEP;
* ``Budget.seeds`` (3 in the full mode) per cell, mean and standard
  deviation reported. A seed sets the initialization, the public batches
  and the directions; the noise and the Poisson batches are secret.

Hyperparameter selection uses public data only:

1. The public images are split into public-train (imbalanced) and a
   balanced public-validation set.
2. For every method and epsilon, each step size of the method's grid is
   tried in a *simulated* private run on public-train: the same noise
   multiplier (the one calibrated for that epsilon on the private pool) and
   the same expected batch size as the final run, so the noise on every
   update is the same as in the final run, but only
   ``Budget.selection_steps`` steps (half the final run's, for CPU time);
   the PAZO methods draw their public batches from public-train too. The
   step size with the best public-validation accuracy wins (ties: the
   smaller one). Seed 0 only.
3. The final runs train on the private pool with the chosen step size and
   report test accuracy and the epsilon the ledger spent.

Neither the private pool nor the test set is used for any choice, so the
selection costs no privacy and the reported epsilon is the whole cost. The
step budget was chosen the same way, from the non-private learning curves
on public data (:func:`curve`). The paper instead tunes every method on its
own grid (App. C.3), with 100 epochs (200 for DPZero) and one seed.

Writes ``table.md``, ``table.png`` and ``selection.md`` to the output
directory. Finished runs are cached in ``runs.json``, so an interrupted
command resumes; ``max_minutes`` stops starting new runs after that long
and writes what is done, marked partial.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time

import ml_collections

from configs import fashion_mnist_pazo_public4
from experiments import tasks
from experiments.reproductions import pazo_table1_data as data
from experiments.reproductions import pazo_table1_report as report
from experiments.run import resolution, run_setup, train

EPSILONS = (0.1, 0.5, 1.0, 2.0, 3.0)
DELTA = 1e-5
K = 4  # public batches for PAZO-P/P'/S

# name -> (estimator, estimator_kwargs and the privacy block's clip, step-size
# grid)
METHODS = {
  "DP-SGD": ("dp_sgd", {"clip": 1.0}, (0.1, 0.3)),
  "DPZero": (
    "dpzero",
    {"clip": 1.0, "smoothing": 1e-3, "directions": "gaussian"},
    (0.01, 0.03),
  ),
  "PAZO-M": (
    "pazo_m",
    {"clip": 1.0, "smoothing": 1e-3, "alpha": 0.5},
    (0.1, 0.3),
  ),
  "PAZO-P": (
    "pazo_p",
    {"clip": 1.0, "smoothing": 1e-3, "num_public_batches": K},
    (0.1, 0.3),
  ),
  "PAZO-P'": (
    "pazo_p",
    {
      "clip": 1.0,
      "smoothing": 1e-3,
      "num_public_batches": K,
      "orthonormalize": False,
    },
    (0.1, 0.3),
  ),
  "PAZO-S": (
    "pazo_s",
    {"clip": 3.0, "num_public_batches": K, "candidate_noise_scale": 1e-3},
    (0.03, 0.1),
  ),
  "DPMD": ("dpmd", {"clip": 1.0}, (0.1, 0.3)),
  "DOPE-SGD": ("dope_sgd", {"clip": 1.0}, (0.1, 0.3)),
  "GEP": (
    "gep",
    {"embedding_clip": 1.0, "residual_clip": 0.5, "num_bases": 8},
    (0.1, 0.3),
  ),
}


@dataclasses.dataclass(frozen=True)
class Budget:
  """Steps, batch sizes, model and seeds of one mode."""

  num_steps: int
  expected_batch_size: int
  public_batch_size: int
  features: tuple[int, ...]
  seeds: tuple[int, ...]
  selection_steps: int

  def tag(self) -> str:
    feats = "x".join(map(str, self.features))
    return (
      f"T{self.num_steps}|S{self.selection_steps}|"
      f"B{self.expected_batch_size}|"
      f"b{self.public_batch_size}|cnn{feats}"
    )


BUDGETS = {
  "full": Budget(600, 128, 32, (4, 8), (0, 1, 2), 300),
  "fast": Budget(10, 32, 16, (4, 8), (0,), 10),
}
SMOKE_MODES = ("fast",)


def make_config(
  method: str,
  epsilon: float | None,
  learning_rate: float,
  seed: int,
  budget: Budget,
  selection: bool,
  num_steps: int | None = None,
) -> ml_collections.ConfigDict:
  """One run. ``selection``: public-train -> public-validation, private
  pool otherwise. ``method="MeZO"``: non-private (curves only)."""
  c = _config(method, learning_rate, seed, budget, selection, num_steps)
  if method != "MeZO":
    # The same noise multiplier in selection and final runs: calibrated for
    # epsilon on the private pool (in a selection run the data are public).
    c.privacy.noise_multiplier = noise_multiplier(method, epsilon, budget)
  return c


def _config(method, learning_rate, seed, budget, selection, num_steps=None):
  c = fashion_mnist_pazo_public4.get_config()
  c.dataset = data.SELECTION_TASK if selection else data.PRIVATE_TASK
  c.model_kwargs = ml_collections.ConfigDict({"features": budget.features})
  c.seed = seed
  c.privacy.expected_batch_size = budget.expected_batch_size
  c.public_batch_size = budget.public_batch_size
  c.num_steps = num_steps or budget.num_steps
  c.learning_rate = learning_rate
  c.privacy.delta = DELTA
  c.eval_every = 0
  c.privacy.target_epsilon = None
  if method == "MeZO":
    c.estimator = "mezo"
    c.estimator_kwargs = ml_collections.ConfigDict({"smoothing": 1e-3})
    c.privacy.sampling = "shuffle"
    return c
  estimator, kwargs, _ = METHODS[method]
  c.estimator = estimator
  kwargs = dict(kwargs)
  c.privacy.clip = kwargs.pop("clip", kwargs.pop("embedding_clip", None))
  c.privacy.num_queries = 1  # one query per step, as each method's default
  c.estimator_kwargs = ml_collections.ConfigDict(kwargs)
  return c


@functools.cache
def noise_multiplier(method: str, epsilon: float, budget: Budget) -> float:
  """The final runs' noise multiplier: the runner's own calibration of the
  method's privacy plan for (epsilon, DELTA) on the private pool, done once
  per method and epsilon instead of once per run."""

  c = _config(method, METHODS[method][2][0], 0, budget, False)
  c.privacy.target_epsilon = epsilon
  task = tasks.get_task(c)
  plan = run_setup.state_template(*resolution.resolve(c), task)[3]
  return float(plan.noise_multiplier)


class Runner:
  """Runs configs through the training loop, caching results by key."""

  def __init__(self, out: str, max_minutes: float | None = None):
    self.path = os.path.join(out, "runs.json")
    self.cache = {}
    if os.path.exists(self.path):
      with open(self.path) as f:
        self.cache = json.load(f)
    self.start = time.time()
    self.deadline = (
      None if max_minutes is None else self.start + 60 * max_minutes
    )
    self.stopped = False

  def __call__(self, key: str, make) -> dict | None:
    if key in self.cache:
      return self.cache[key]
    if self.deadline is not None and time.time() > self.deadline:
      self.stopped = True
      return None

    start = time.time()
    r = train.train(make(), progress=False)
    self.cache[key] = {
      "accuracy": r["test_accuracy"],
      "epsilon": r["epsilon"],
      "noise_multiplier": r["noise_multiplier"],
      "seconds": time.time() - start,
    }
    with open(self.path, "w") as f:
      json.dump(self.cache, f, indent=1)
    print(
      f"  {key}: accuracy {r['test_accuracy']:.4f}, "
      f"{self.cache[key]['seconds']:.0f} s",
      flush=True,
    )
    return self.cache[key]


def select(run: Runner, budget: Budget, methods, epsilons) -> dict:
  """``{(method, epsilon): (step size, {step size: public-val accuracy})}``
  for the cells whose selection runs are all done."""
  chosen = {}
  for e in epsilons:
    for m in methods:
      scores = {}
      for lr in METHODS[m][2]:
        r = run(
          f"select|{m}|{e:g}|{lr:g}|{budget.tag()}",
          lambda m=m, e=e, lr=lr: make_config(
            m, e, lr, 0, budget, True, budget.selection_steps
          ),
        )
        if r is not None:
          scores[lr] = r["accuracy"]
      if len(scores) == len(METHODS[m][2]):
        chosen[m, e] = (max(scores, key=scores.get), scores)
  return chosen


def final(run: Runner, budget: Budget, methods, epsilons, chosen) -> dict:
  """``{(method, epsilon): [result per finished seed]}``; seeds outermost,
  so a partial grid has whole seeds."""
  results = {(m, e): [] for m in methods for e in epsilons}
  for seed in budget.seeds:
    for e in epsilons:
      for m in methods:
        if (m, e) not in chosen:
          continue
        lr = chosen[m, e][0]
        r = run(
          f"final|{m}|{e:g}|{lr:g}|{seed}|{budget.tag()}",
          lambda m=m, e=e, lr=lr, s=seed: make_config(
            m, e, lr, s, budget, False
          ),
        )
        if r is not None:
          results[m, e].append(r)
  return results


def main(
  out: str,
  mode: str = "full",
  methods=None,
  epsilons=None,
  max_minutes: float | None = None,
) -> dict:
  """Selection, final runs, ``table.md`` / ``table.png`` / ``selection.md``.

  Returns ``accuracy`` (``{method: {epsilon: [per seed]}}``), ``step_size``
  (``{method: {epsilon: chosen}}``), ``complete`` and ``seconds``.
  """
  budget = BUDGETS[mode]
  methods = tuple(methods or METHODS)
  epsilons = tuple(float(e) for e in (epsilons or EPSILONS))
  compilation_cache(os.path.join(out, "jax_cache"))
  run = Runner(out, max_minutes)
  print(f"PAZO Table 1 analog ({mode}): {data.describe()}", flush=True)
  print(
    f"selection on public data: {len(methods)} methods x "
    f"{len(epsilons)} epsilons",
    flush=True,
  )
  chosen = select(run, budget, methods, epsilons)
  print("final runs on the private pool", flush=True)
  results = final(run, budget, methods, epsilons, chosen)
  seconds = time.time() - run.start
  expected = len(methods) * len(epsilons) * len(budget.seeds)
  done = sum(len(v) for v in results.values())
  info = _info(mode, budget, methods, epsilons, seconds, done, expected)
  report.write(out, info, chosen, results)
  acc = {
    m: {e: [r["accuracy"] for r in results[m, e]] for e in epsilons}
    for m in methods
  }
  step = {
    m: {e: chosen[m, e][0] for e in epsilons if (m, e) in chosen}
    for m in methods
  }
  return {
    "accuracy": acc,
    "step_size": step,
    "complete": done == expected,
    "seconds": seconds,
  }


def _info(mode, budget, methods, epsilons, seconds, done, expected):
  """What the report states about the run besides its results."""
  return report.Info(
    mode=mode,
    smoke=mode in SMOKE_MODES,
    budget=budget,
    delta=DELTA,
    epsilons=epsilons,
    methods=methods,
    split=data.describe(),
    sigma={
      (m, e): noise_multiplier(m, e, budget) for m in methods for e in epsilons
    },
    grids={m: METHODS[m][2] for m in methods},
    seconds=seconds,
    done=done,
    expected=expected,
    command=command(mode, methods, epsilons),
  )


def command(mode, methods, epsilons) -> str:
  cmd = "python -m experiments.reproduce pazo_table1"
  if mode != "full":
    cmd += f" --{mode}"
  if tuple(methods) != tuple(METHODS):
    cmd += " --methods " + ",".join(methods)
  if tuple(epsilons) != EPSILONS:
    cmd += " --epsilons " + ",".join(f"{e:g}" for e in epsilons)
  return cmd


def compilation_cache(path: str) -> None:
  """Keeps compiled steps on disk: a run whose step was compiled before
  (another seed, or the selection run of the same method, epsilon and step
  size) loads it instead of compiling again."""
  import jax  # pylint: disable=g-import-not-at-top

  jax.config.update("jax_compilation_cache_dir", path)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
