"""Classification by candidate likelihood, as MeZO evaluates OPT.

MeZO (``large_models/run.py``, no calibration) scores each candidate by the
*mean* log-probability of its verbalizer tokens (``log_probs.mean()``) and
predicts the argmax; ``zoprivacy.models.opt.per_example_lm_loss`` is exactly
the mean negative log-probability over the loss-masked tokens, so the
prediction is the argmin-loss candidate. Training uses the correct
candidate's sequence with the loss on its verbalizer tokens, mean-reduced
(MeZO's ``only_train_option`` LM loss; ``prompts.training_batch``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def predict_from_losses(losses, num_candidates: int) -> np.ndarray:
  """``losses``: flat ``[N * C]`` example-major -> argmin candidate ``[N]``."""
  losses = np.asarray(losses).reshape(-1, num_candidates)
  return np.argmin(losses, axis=-1)


def candidate_losses(loss_fn, params, batch: dict, *, batch_size: int = 64):
  """Per-row losses of a candidate batch, ``batch_size`` rows at a time;
  ``loss_fn(params, batch)`` is e.g. ``partial(per_example_lm_loss,
  model=model)``."""
  fn = jax.jit(loss_fn)
  n = batch["input_ids"].shape[0]
  out = []
  for s in range(0, n, batch_size):
    chunk = {k: jnp.asarray(v[s : s + batch_size]) for k, v in batch.items()}
    out.append(np.asarray(fn(params, chunk)))
  return np.concatenate(out)


def candidate_accuracy(losses, labels, *, num_candidates: int) -> float:
  """Accuracy of the argmin-loss candidate against ``labels``; ``losses``
  from :func:`candidate_losses` over ``prompts.candidate_batch``."""
  pred = predict_from_losses(losses, num_candidates)
  return float(np.mean(pred == np.asarray(labels)))
