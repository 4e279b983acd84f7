"""Training loop shared by every experiment: private batches in, metrics out.

One run, top to bottom:

1. load the data and build the model (:mod:`experiments.tasks`);
2. resolve the privacy parameters: calibrate the noise multiplier for
   ``target_epsilon`` or take ``noise_multiplier`` as given;
3. build the estimator, chain it with the optimizer, open the privacy ledger;
4. resume from the latest checkpoint in ``workdir`` if there is one;
5. for each step: charge the ledger (it refuses a step over budget *before*
   the step runs), draw a Poisson batch (padded, masked), apply one jitted
   step; evaluate and checkpoint every so often;
6. report accuracy with the ``(epsilon, delta)`` spent, write metrics and a
   plot.

Only test-set metrics are logged: a training loss on private batches is
itself private and is never written out.
"""

from __future__ import annotations

import csv
import json
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import tqdm

import zoprivacy
from zoprivacy import accounting
from zoprivacy import mechanisms
from zoprivacy.data import sampling
from experiments import checkpointing
from experiments import tasks


def make_optimizer(config: ml_collections.ConfigDict) -> optax.GradientTransformation:
  name = config.optimizer
  if name == "sgd":
    return optax.sgd(config.learning_rate, momentum=config.get("momentum") or None)
  if name == "adam":
    return optax.adam(config.learning_rate)
  raise ValueError(f"Unknown optimizer {name!r}; use 'sgd' or 'adam'.")


def make_sampler(config, dataset_size: int, supported=("poisson", "shuffle")):
  if config.sampling not in supported:
    raise ValueError(
        f"config.sampling={config.sampling!r}, but the {config.dataset!r} loader "
        f"can only provide {supported}: it cannot draw the batches whose privacy "
        "the accountant would report.")
  if config.sampling == "poisson":
    return sampling.PoissonSampler(dataset_size, config.expected_batch_size,
                                   seed=config.seed + 1)
  if config.sampling == "shuffle":
    if config.estimator != "mezo":
      raise ValueError(
          "Private estimators are accounted under Poisson sampling; "
          "sampling='shuffle' is only for the non-private baseline.")
    return sampling.ShuffleSampler(dataset_size, int(config.expected_batch_size),
                                   seed=config.seed + 1)
  raise ValueError(f"Unknown sampling {config.sampling!r}; use 'poisson' or 'shuffle'.")


def resolve_noise_multiplier(config, sampling_probability: float) -> float | None:
  """Step 2: the noise multiplier for the run, or ``None`` if non-private."""
  if config.estimator == "mezo":
    return None
  target = config.get("target_epsilon")
  if target is not None:
    mechanism = config.estimator_kwargs.get("mechanism", "gaussian")
    result = accounting.calibrate_noise_multiplier(
        target_epsilon=target, delta=config.delta,
        sampling_probability=sampling_probability, num_steps=config.num_steps,
        mechanism=mechanism)
    return float(result.noise_multiplier)
  if config.get("noise_multiplier") is None:
    raise ValueError("Set target_epsilon or noise_multiplier for a private run.")
  return float(config.noise_multiplier)


def build_estimator(config, noise_multiplier, dataset_size):
  kwargs = dict(config.estimator_kwargs)
  kwargs["key"] = config.seed
  if config.estimator != "mezo":
    kwargs.update(noise_multiplier=noise_multiplier,
                  expected_batch_size=config.expected_batch_size,
                  dataset_size=dataset_size)
  if config.estimator == "dpmd":
    kwargs.setdefault("num_steps", config.num_steps)
  if config.estimator == "pazo_s":
    kwargs.setdefault("learning_rate", config.learning_rate)
  return zoprivacy.ESTIMATORS[config.estimator](**kwargs)


# Estimators that take public data, and the extra argument they take it by.
PUBLIC_BATCH = ("pazo_m", "dpmd", "dope_sgd", "gep")
PUBLIC_BATCHES = ("pazo_p", "pazo_s")


def public_batch_indices(config, num_public: int, step: int) -> np.ndarray | None:
  """Public examples for ``step``: uniform without replacement, seeded.

  Public data carries no privacy cost, so any sampling is allowed; ``[k, b']``
  indices for methods that take ``k`` public batches, ``[b']`` otherwise.
  """
  if config.estimator not in PUBLIC_BATCH + PUBLIC_BATCHES:
    return None
  if not num_public:
    raise ValueError(f"{config.estimator} needs public data: set config.public "
                     "to a task that provides a public split.")
  k = (config.estimator_kwargs.get("num_public_batches", 1)
       if config.estimator in PUBLIC_BATCHES else 1)
  size = min(int(config.public_batch_size), num_public)
  rng = np.random.default_rng([config.seed, 2, int(step)])
  idx = np.stack([rng.choice(num_public, size, replace=False) for _ in range(k)])
  return idx if config.estimator in PUBLIC_BATCHES else idx[0]


def evaluate(predict, trainable, frozen, inputs, labels, batch_size: int = 512) -> float:
  correct = 0
  for start in range(0, len(labels), batch_size):
    chunk = jax.tree.map(lambda a: a[start:start + batch_size], inputs)
    logits = predict(trainable, frozen, chunk)
    correct += int(np.sum(np.argmax(np.asarray(logits), -1)
                          == labels[start:start + batch_size]))
  return correct / len(labels)


class MetricsWriter:
  """Appends metric rows to ``metrics.csv`` and ``metrics.jsonl`` (and
  TensorBoard when ``tensorboardX`` is installed)."""

  FIELDS = ("step", "test_accuracy", "epsilon", "seconds")

  def __init__(self, workdir: str | None):
    self.workdir = workdir
    self._tb = None
    if workdir:
      os.makedirs(workdir, exist_ok=True)
      try:
        from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top
        self._tb = SummaryWriter(os.path.join(workdir, "tensorboard"))
      except ImportError:
        self._tb = None

  def write(self, row: dict) -> None:
    if not self.workdir:
      return
    path = os.path.join(self.workdir, "metrics.csv")
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
      w = csv.DictWriter(f, fieldnames=self.FIELDS)
      if new:
        w.writeheader()
      w.writerow({k: row.get(k) for k in self.FIELDS})
    with open(os.path.join(self.workdir, "metrics.jsonl"), "a") as f:
      f.write(json.dumps(row) + "\n")
    if self._tb is not None:
      for k in ("test_accuracy", "epsilon"):
        if row.get(k) is not None:
          self._tb.add_scalar(k, row[k], row["step"])


def plot_report(history: list[dict], path: str, title: str) -> str | None:
  """PNG of test accuracy against step and against epsilon."""
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  steps = [h["step"] for h in history]
  acc = [h["test_accuracy"] for h in history]
  eps = [h.get("epsilon") for h in history]
  fig, axes = plt.subplots(1, 2, figsize=(10, 4))
  axes[0].plot(steps, acc, marker="o")
  axes[0].set(xlabel="step", ylabel="test accuracy", title=title)
  if all(e is not None and np.isfinite(e) for e in eps):
    axes[1].plot(eps, acc, marker="o")
    axes[1].set(xlabel="epsilon spent", ylabel="test accuracy")
  else:
    axes[1].text(0.5, 0.5, "non-private run", ha="center")
    axes[1].set_axis_off()
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path


def train(config: ml_collections.ConfigDict, *, progress: bool = True,
          stop_after: int | None = None) -> dict[str, Any]:
  """Runs (or resumes) one experiment and returns its final metrics.

  ``stop_after``: stop (after checkpointing) once this many steps are done,
  as if interrupted; a later call with the same ``workdir`` resumes.
  """
  task = tasks.get_task(config)                                        # 1
  n = task.num_train
  num_public = 0 if task.public_labels is None else len(task.public_labels)
  sampler = make_sampler(config, n, task.sampling_schemes)
  noise_multiplier = resolve_noise_multiplier(config,                  # 2
                                              sampler.sampling_probability)
  estimator = build_estimator(config, noise_multiplier, n)             # 3
  tx = optax.chain(estimator, make_optimizer(config))
  privacy = estimator.privacy
  ledger = None
  if privacy is not None:
    ledger = accounting.PrivacyLedger(delta=config.delta,
                                      epsilon_budget=config.get("epsilon_budget"),
                                      neighboring=privacy.neighboring)
    ledger_step = dict(noise_multiplier=noise_multiplier,
                       sampling_probability=sampler.sampling_probability,
                       mechanism=("laplace" if isinstance(
                           privacy.mechanism, mechanisms.LaplaceMechanism)
                                  else "gaussian"),
                       num_queries=privacy.mechanism.num_queries,
                       sampling=sampler.scheme)
  trainable, frozen = task.init(jax.random.key(config.seed))
  state = {"params": trainable, "opt_state": tx.init(trainable),
           "step": np.array(0, np.int64)}

  workdir = config.get("workdir") or None
  ckpt = None
  if workdir:                                                          # 4
    ckpt = checkpointing.Checkpointer(os.path.join(workdir, "checkpoints"))
    latest = ckpt.latest_step()
    if latest is not None:
      state, ledger_dict = ckpt.restore(latest, state)
      if ledger is not None:
        ledger = accounting.PrivacyLedger.from_dict(ledger_dict)

  public_arg = ("public_batches" if config.estimator in PUBLIC_BATCHES
                else "public_batch")

  @jax.jit
  def step(params, frozen, opt_state, batch, mask, public):
    loss = lambda p, b: task.batched_loss(p, frozen, b)
    zeros = jax.tree.map(jnp.zeros_like, params)
    extra = {} if public is None else {public_arg: public}
    updates, opt_state = tx.update(zeros, opt_state, params, batched_loss=loss,
                                   batch=batch, mask=mask, **extra)
    return optax.apply_updates(params, updates), opt_state

  predict = jax.jit(task.apply)
  metrics = MetricsWriter(workdir)
  history = []
  if workdir and os.path.exists(os.path.join(workdir, "metrics.jsonl")):
    # Resuming: keep the rows up to the checkpoint; rows logged after it
    # (before the interruption) will be logged again by the resumed run.
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
      history = [r for r in map(json.loads, f) if r["step"] <= int(state["step"])]
    for name in ("metrics.jsonl", "metrics.csv"):
      os.remove(os.path.join(workdir, name))
    for row in history:
      metrics.write(row)

  def spent(num_steps=None):
    if ledger is None:
      return float("inf")
    return ledger.epsilon(num_steps)

  def log_eval(t):
    row = {"step": t, "test_accuracy": evaluate(predict, state["params"], frozen,
                                                task.test_inputs, task.test_labels),
           "epsilon": spent(), "seconds": time.time() - start}
    history.append(row)
    metrics.write(row)
    return row

  def save(t):
    if ckpt is not None:
      ckpt.save(t, state, ledger.to_dict() if ledger is not None else None)

  start = time.time()
  first = int(state["step"])
  last = config.num_steps if stop_after is None else min(stop_after, config.num_steps)
  bar = tqdm.tqdm(range(first, last), initial=first, total=config.num_steps,
                  disable=not progress, desc=config.estimator, mininterval=1.0)
  for t in bar:                                                        # 5
    if ledger is not None:
      ledger.record(1, **ledger_step)
    idx = sampler.batch_indices(t)
    batch = sampling.gather((task.train_inputs, task.train_labels), idx.indices)
    pub_idx = public_batch_indices(config, num_public, t)
    public = None if pub_idx is None else sampling.gather(
        (task.public_inputs, task.public_labels), pub_idx)
    params, opt_state = step(state["params"], frozen, state["opt_state"], batch,
                             idx.mask, public)
    state = {"params": params, "opt_state": opt_state, "step": np.array(t + 1, np.int64)}
    done = t + 1
    if config.eval_every and done % config.eval_every == 0 and done < config.num_steps:
      row = log_eval(done)
      bar.set_postfix(test_acc=f"{row['test_accuracy']:.3f}", eps=f"{row['epsilon']:.3f}")
    if ckpt is not None and config.checkpoint_every and done % config.checkpoint_every == 0:
      save(done)
  train_seconds = time.time() - start

  done = int(state["step"])
  if done < config.num_steps:          # interrupted on purpose (stop_after)
    save(done)
    return {"interrupted_at": done, "params_sha256": checkpointing.tree_digest(state["params"])}
  if not history or history[-1]["step"] != done:                      # 6
    log_eval(done)
  save(done)
  result = {
      "estimator": config.estimator,
      "dataset": config.dataset,
      "test_accuracy": history[-1]["test_accuracy"],
      "num_steps": done,
      "noise_multiplier": noise_multiplier,
      "epsilon": spent(),
      "delta": config.delta if privacy is not None else None,
      "sampling": sampler.scheme,
      "sampling_probability": sampler.sampling_probability,
      "train_seconds": train_seconds,
      "history": history,
      "params_sha256": checkpointing.tree_digest(state["params"]),
  }
  if ledger is not None:
    result["ledger"] = ledger.summary()
  if privacy is not None and isinstance(privacy.mechanism, mechanisms.LaplaceMechanism):
    # DP-ZO Thm 3.1: the pure epsilon of the subsampled Laplace mechanism.
    result["pure_epsilon"] = accounting.pure_epsilon_poisson_laplace(
        noise_multiplier=noise_multiplier,
        sampling_probability=sampler.sampling_probability, num_steps=done)
  if workdir:
    result["plot"] = plot_report(history, os.path.join(workdir, "report.png"),
                                 f"{config.estimator} on {config.dataset}")
    with open(os.path.join(workdir, "result.json"), "w") as f:
      json.dump({"config": config.to_dict(), **result}, f, indent=2, default=str)
    if ledger is not None:
      ledger.save(os.path.join(workdir, "privacy_ledger.json"))
  if ckpt is not None:
    ckpt.close()
  return result


def format_report(result: dict[str, Any]) -> str:
  """The closing lines of a run: accuracy, steps and privacy spent."""
  if result["delta"] is None:
    privacy = "privacy: none (non-private baseline, epsilon = inf)"
  else:
    privacy = (f"privacy: (epsilon, delta) = ({result['epsilon']:.4f}, "
               f"{result['delta']:g}) [PLD, add/remove, {result['sampling']} "
               f"sampling p={result['sampling_probability']:.5f}, "
               f"noise multiplier {result['noise_multiplier']:.4f}]")
  if "pure_epsilon" in result:
    privacy += (f"\npure epsilon (Laplace, basic composition, DP-ZO Thm 3.1): "
                f"{result['pure_epsilon']:.4f}")
  lines = [
      f"estimator: {result['estimator']} on {result['dataset']}",
      f"test accuracy: {result['test_accuracy']:.4f}",
      f"steps: {result['num_steps']} ({result['train_seconds']:.1f} s)",
      privacy,
  ]
  if result.get("plot"):
    lines.append(f"plot: {result['plot']}")
  return "\n".join(lines)
