"""Membership scores: the loss-threshold attack and offline LiRA.

A score is larger for canaries the attack believes are members.

* **Loss threshold** (Yeom et al. 2018): ``score_i = -loss_i``, the
  cross-entropy of canary ``i`` under its training label and the final
  model.
* **Offline LiRA, fixed variance** (Carlini et al. 2022, Alg. 1 without IN
  models, and their fixed-variance variant for few reference models): the
  statistic is the logit-scaled confidence ``phi_i = log(p_y / (1 - p_y))``
  (their eq. (4)) of the canary's label. ``K`` reference models are trained
  by the same procedure (same hyperparameters, noise multiplier and public
  seed, fresh secret noise and batches) on the base training set WITHOUT
  any canary, so each ``phi_i`` under a reference model is a draw of the
  OUT distribution. The score is the one-sided z-statistic
  ``(phi_i(target) - mu_i) / sigma`` with ``mu_i`` the mean over reference
  models and ``sigma`` the standard deviation pooled over canaries and
  reference models; it is monotone in LiRA's offline likelihood
  ``1 - Pr[N(mu_i, sigma^2) > phi_i]``, so ROC and AUC are the same.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax


class CanaryStatistics:
  """Per-canary ``loss`` and ``phi`` (logit-scaled confidence) of one model."""

  def __init__(self, loss: np.ndarray, phi: np.ndarray):
    self.loss = np.asarray(loss, np.float64)
    self.phi = np.asarray(phi, np.float64)

  def to_dict(self) -> dict:
    return {"loss": self.loss.tolist(), "phi": self.phi.tolist()}

  @classmethod
  def from_dict(cls, d: dict) -> CanaryStatistics:
    return cls(np.array(d["loss"]), np.array(d["phi"]))


def statistics_from_logits(logits, labels) -> tuple[jax.Array, jax.Array]:
  """``(loss, phi)`` per row: cross-entropy and ``log p_y - log(1 - p_y)``.

  ``log(1 - p_y)`` is ``logsumexp`` of the other logits minus the log
  partition function, which stays finite when ``p_y`` rounds to 1.
  """
  logits = jnp.asarray(logits, jnp.float32)
  labels = jnp.asarray(labels, jnp.int32)
  loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
  own = jnp.take_along_axis(logits, labels[:, None], axis=-1)[:, 0]
  is_own = jax.nn.one_hot(labels, logits.shape[-1], dtype=bool)
  others = jax.nn.logsumexp(jnp.where(is_own, -jnp.inf, logits), axis=-1)
  return loss, own - others


def canary_statistics(
  apply: Callable[[object, object], jax.Array],
  params,
  inputs: np.ndarray,
  labels: np.ndarray,
  *,
  chunk_size: int = 256,
) -> CanaryStatistics:
  """Statistics of every canary under ``apply(params, inputs) -> logits``.

  Canaries go through in chunks of ``chunk_size``; the last chunk is padded
  with zero rows (one compiled shape), whose outputs are dropped.
  """
  m = len(labels)
  fn = jax.jit(lambda p, x, y: statistics_from_logits(apply(p, x), y))
  losses, phis = [], []
  for start in range(0, m, chunk_size):
    x = inputs[start : start + chunk_size]
    y = labels[start : start + chunk_size]
    real = len(y)
    pad = chunk_size - real
    if pad:
      x = np.concatenate([x, np.zeros((pad,) + x.shape[1:], x.dtype)])
      y = np.concatenate([y, np.zeros([pad], y.dtype)])
    loss, phi = fn(params, x, y)
    losses.append(np.asarray(loss)[:real])
    phis.append(np.asarray(phi)[:real])
  return CanaryStatistics(np.concatenate(losses), np.concatenate(phis))


def loss_attack_scores(target: CanaryStatistics) -> np.ndarray:
  """Loss threshold (Yeom et al. 2018): ``-loss``."""
  return -target.loss


def lira_offline_scores(
  target: CanaryStatistics, references: list[CanaryStatistics]
) -> np.ndarray:
  """Offline LiRA with a fixed (pooled) variance: ``(phi - mu_i) / sigma``.

  ``references``: statistics of ``K >= 1`` models trained without any
  canary. With ``K = 1`` the pooled variance is undefined, and ``sigma``
  is set to 1 (the score is then ``phi - mu_i``, the same ranking).
  """
  if not references:
    raise ValueError("LiRA needs at least one reference model.")
  out = np.stack([r.phi for r in references])  # [K, m]
  mu = out.mean(axis=0)
  sigma = 1.0
  if len(references) > 1:
    sigma = float(np.sqrt(np.mean((out - mu) ** 2) * len(out) / (len(out) - 1)))
    sigma = max(sigma, 1e-12)
  return (target.phi - mu) / sigma
