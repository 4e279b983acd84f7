"""DP-SGD (Abadi et al. 2016): the first-order baseline, same calling convention.

Per-example gradients by ``jax.vmap(jax.grad(...))``, per-example L2
clipping, Gaussian noise on the sum, division by the expected batch size.
Takes the same ``per_example_loss`` / ``batched_loss``, ``batch`` and ``mask``
extra arguments as the zeroth-order estimators, so benchmarks can swap them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from zoprivacy import clipping
from zoprivacy import mechanisms
from zoprivacy import queries
from zoprivacy import validation
from zoprivacy.estimators import base


def dp_sgd(*, clip: float, noise_multiplier: float, expected_batch_size: float,
           dataset_size: int | None = None,
           neighboring: str = "add_or_remove", key=0) -> base.PrivateEstimator:
  """DP-SGD's privatized gradient (Abadi et al. 2016, Alg. 1 lines 5-8).

  ``g = (sum_i clip_C(grad f(x; xi_i)) + N(0, sigma^2 C^2 I_d)) / B``.

  Privacy: sensitivity ``C`` (L2, add/remove; ``2C`` replace-one), noise std
  ``sigma C`` per coordinate, event ``GaussianDpEvent(sigma)`` Poisson-sampled
  at ``p = B/n``.
  """
  clip = validation.positive("clip", clip)
  noise_multiplier = validation.positive("noise_multiplier", noise_multiplier)
  expected_batch_size, dataset_size = validation.batch_size_and_dataset(
      expected_batch_size, dataset_size)
  mechanism = mechanisms.GaussianMechanism(clip, noise_multiplier, 1,
                                           neighboring)
  privacy = base.PrivacySpec(mechanism, expected_batch_size, dataset_size)

  def init_fn(params):
    del params
    return base.init_state(key, 1)

  def update_fn(updates, state, params=None, **extra_args):
    del updates
    args = base.parse_extra_args(extra_args)
    next_key, _, noise_key = base.split_step_keys(state)
    loss_one = queries.as_per_example_loss(args.per_example_loss,
                                           args.batched_loss)
    per_example_grads = jax.vmap(jax.grad(loss_one), in_axes=(None, 0))(
        params, args.batch)
    clipped, _ = clipping.clip_tree_per_example(per_example_grads, clip)
    noisy = mechanism.add_noise(noise_key,
                                mechanisms.masked_tree_sum(clipped, args.mask))
    grad = jax.tree.map(lambda x: x / expected_batch_size, noisy)
    new_state = base.EstimatorState(key=next_key, step=state.step + 1,
                                    released=jnp.zeros([1], jnp.float32))
    return grad, new_state

  return base.PrivateEstimator(init_fn, update_fn, privacy)
