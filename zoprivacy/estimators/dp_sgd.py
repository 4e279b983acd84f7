"""DP-SGD (Abadi et al. 2016): the first-order baseline, same calling convention.

Per-example gradients by ``jax.vmap(jax.grad(...))``, per-example L2
clipping, Gaussian noise on the sum, division by the expected batch size.
Takes the same ``per_example_loss`` / ``batched_loss``, ``batch`` and ``mask``
extra arguments as the zeroth-order estimators, so benchmarks can swap them.
"""

from __future__ import annotations

import jax

from zoprivacy import clipping, mechanisms, queries
from zoprivacy.estimators import base, registry


def dp_sgd(
  *,
  clip: float,
  noise_multiplier: float,
  expected_batch_size: float,
  dataset_size: int | None = None,
  neighboring: str = "add_or_remove",
  direction_key=0,
  insecure_test_noise_seed: int | None = None,
) -> base.PrivateEstimator:
  """DP-SGD's privatized gradient (Abadi et al. 2016, Alg. 1 lines 5-8).

  ``g = (sum_i clip_C(grad f(x; xi_i)) + N(0, sigma^2 C^2 I_d)) / B``.

  Privacy: sensitivity ``C`` (L2, add/remove; ``2C`` replace-one), noise std
  ``sigma C`` per coordinate, event ``GaussianDpEvent(sigma)`` Poisson-sampled
  at ``p = B/n``.

  The loss must be per-example: entry ``i`` of ``batched_loss(params,
  batch)`` may depend only on ``params`` and example ``i`` (padding rows
  included), or the sensitivity bound fails; check it with
  :func:`zoprivacy.per_example_check.assert_per_example`. Noise keys are
  secret (OS entropy at ``init``) unless ``insecure_test_noise_seed`` is set.
  """
  privacy = base.privacy_spec(
    clip=clip,
    noise_multiplier=noise_multiplier,
    expected_batch_size=expected_batch_size,
    dataset_size=dataset_size,
    neighboring=neighboring,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )
  mechanism = privacy.mechanism

  def compute(params, args, direction_key, noise_key):
    del direction_key
    loss_one = queries.as_per_example_loss(
      args.per_example_loss, args.batched_loss
    )
    per_example_grads = jax.vmap(jax.grad(loss_one), in_axes=(None, 0))(
      params, args.batch
    )
    clipped, _ = clipping.clip_tree_per_example(
      per_example_grads, mechanism.clip
    )
    noisy = mechanism.add_noise(
      noise_key, mechanisms.masked_tree_sum(clipped, args.mask)
    )
    grad = jax.tree.map(lambda x: x / privacy.expected_batch_size, noisy)
    return grad, base.release_norm(grad)

  return base.build_estimator(
    compute,
    direction_key=direction_key,
    privacy=privacy,
    num_released=1,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )


registry.register(
  registry.EstimatorSpec("dp_sgd", dp_sgd, defaults=(("clip", 1.0),))
)
