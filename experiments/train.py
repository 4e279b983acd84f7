"""Training loop shared by every experiment: private batches in, metrics out.

Read top to bottom, one run is:

1. load the data and build the model (``experiments.tasks``);
2. resolve the privacy parameters: calibrate the noise multiplier for
   ``target_epsilon`` or take ``noise_multiplier`` as given;
3. build the estimator and chain it with the optimizer;
4. for each step, draw a Poisson batch (padded, masked), apply one jitted
   step;
5. evaluate, and report accuracy with the ``(epsilon, delta)`` spent.
"""

from __future__ import annotations

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
from experiments import tasks


def make_optimizer(config: ml_collections.ConfigDict) -> optax.GradientTransformation:
  name = config.optimizer
  if name == "sgd":
    return optax.sgd(config.learning_rate, momentum=config.get("momentum") or None)
  if name == "adam":
    return optax.adam(config.learning_rate)
  raise ValueError(f"Unknown optimizer {name!r}; use 'sgd' or 'adam'.")


def make_sampler(config, dataset_size: int):
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
  return zoprivacy.ESTIMATORS[config.estimator](**kwargs)


def evaluate(predict, params, inputs, labels, batch_size: int = 512) -> float:
  correct = 0
  for start in range(0, len(labels), batch_size):
    logits = predict(params, inputs[start:start + batch_size])
    correct += int(np.sum(np.argmax(np.asarray(logits), -1)
                          == labels[start:start + batch_size]))
  return correct / len(labels)


def train(config: ml_collections.ConfigDict, *, progress: bool = True) -> dict[str, Any]:
  """Runs one experiment and returns its final metrics."""
  task = tasks.get_task(config)                                       # 1
  n = len(task.train_labels)
  sampler = make_sampler(config, n)
  noise_multiplier = resolve_noise_multiplier(config,                 # 2
                                              sampler.sampling_probability)
  estimator = build_estimator(config, noise_multiplier, n)            # 3
  tx = optax.chain(estimator, make_optimizer(config))
  params = task.init_params(jax.random.key(config.seed))
  opt_state = tx.init(params)

  @jax.jit
  def step(params, opt_state, batch, mask):
    zeros = jax.tree.map(jnp.zeros_like, params)
    updates, opt_state = tx.update(zeros, opt_state, params,
                                   batched_loss=task.batched_loss,
                                   batch=batch, mask=mask)
    return optax.apply_updates(params, updates), opt_state

  predict = jax.jit(task.predict)
  history = []

  def epsilon_at(num_steps):
    if estimator.privacy is None or num_steps == 0:
      return 0.0 if estimator.privacy is not None else float("inf")
    return estimator.privacy.epsilon(num_steps, config.delta)

  start = time.time()
  bar = tqdm.trange(config.num_steps, disable=not progress, desc=config.estimator,
                    mininterval=1.0)
  for t in bar:                                                        # 4
    idx = sampler.batch_indices(t)
    batch = sampling.gather((task.train_inputs, task.train_labels), idx.indices)
    params, opt_state = step(params, opt_state, batch, idx.mask)
    if config.eval_every and (t + 1) % config.eval_every == 0 and t + 1 < config.num_steps:
      acc = evaluate(predict, params, task.test_inputs, task.test_labels)
      history.append({"step": t + 1, "test_accuracy": acc})
      bar.set_postfix(test_acc=f"{acc:.3f}")
  train_seconds = time.time() - start

  test_accuracy = evaluate(predict, params, task.test_inputs, task.test_labels)  # 5
  history.append({"step": config.num_steps, "test_accuracy": test_accuracy})
  result = {
      "estimator": config.estimator,
      "dataset": config.dataset,
      "test_accuracy": test_accuracy,
      "num_steps": config.num_steps,
      "noise_multiplier": noise_multiplier,
      "epsilon": epsilon_at(config.num_steps),
      "delta": config.delta if estimator.privacy is not None else None,
      "sampling": sampler.scheme,
      "sampling_probability": sampler.sampling_probability,
      "train_seconds": train_seconds,
      "history": history,
  }
  mechanism = getattr(estimator.privacy, "mechanism", None)
  if mechanism is not None and isinstance(mechanism, mechanisms.LaplaceMechanism):
    # DP-ZO Thm 3.1: the pure epsilon of the subsampled Laplace mechanism.
    result["pure_epsilon"] = accounting.pure_epsilon_poisson_laplace(
        noise_multiplier=noise_multiplier,
        sampling_probability=sampler.sampling_probability,
        num_steps=config.num_steps)
  if config.get("workdir"):
    os.makedirs(config.workdir, exist_ok=True)
    with open(os.path.join(config.workdir, "result.json"), "w") as f:
      json.dump({"config": config.to_dict(), **result}, f, indent=2, default=str)
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
  return "\n".join([
      f"estimator: {result['estimator']} on {result['dataset']}",
      f"test accuracy: {result['test_accuracy']:.4f}",
      f"steps: {result['num_steps']} ({result['train_seconds']:.1f} s)",
      privacy,
  ])
