"""One jitted private training step per implementation, same calling shape.

Every builder returns ``(step, state)`` with ``step(params, state, batch) ->
(params, state)`` jitted with ``params`` and ``state`` donated (the update
happens in place, as in a training loop and as in the PyTorch port), for a
``batched_loss(params, batch) -> [B]`` per-example losses and a ``batch``
whose leaves all lead with the batch axis. All steps end in plain SGD:

* :func:`zoprivacy_step`: any zoprivacy estimator (``dpzero``, ``dp_sgd``)
  chained with ``optax.sgd``;
* :func:`optax_dpsgd_step`: ``optax.contrib.dpsgd`` fed per-example
  gradients from ``vmap(grad)``, as its documentation prescribes;
* :func:`jax_privacy_step`: ``jax_privacy.clipped_grad`` (sum of clipped
  per-example gradients) + ``jax_privacy.noise_addition.gaussian_privatizer``
  (``N(0, sigma^2 C^2 I)`` on the sum) + division by the expected batch size
  + ``optax.sgd`` (Abadi et al. 2016, Alg. 1 lines 5-8).

Noise seeds default to OS entropy (the noise is secret); pass
``insecure_test_noise_seed`` only in tests.
"""

from __future__ import annotations

import functools
import secrets

import jax
import jax.numpy as jnp
import optax

import zoprivacy


def _noise_seed(insecure_test_noise_seed):
  if insecure_test_noise_seed is None:
    return secrets.randbits(31)
  return int(insecure_test_noise_seed)


def _example_loss(batched_loss):
  """``loss(params, example)`` for one example: a batch of one."""

  def loss_one(params, example):
    one = jax.tree.map(lambda a: a[None], example)
    return batched_loss(params, one)[0]

  return loss_one


def zoprivacy_step(estimator, batched_loss, params, *, learning_rate: float):
  """A zoprivacy estimator (its privatized gradient) + SGD, one jitted step."""
  tx = optax.chain(estimator, optax.sgd(learning_rate))
  state = zoprivacy.init(tx, params)

  @functools.partial(jax.jit, donate_argnums=(0, 1))
  def step(p, s, batch):
    mask = jnp.ones(jax.tree.leaves(batch)[0].shape[0], bool)
    updates, s = tx.update(
      jax.tree.map(jnp.zeros_like, p),
      s,
      p,
      batched_loss=batched_loss,
      batch=batch,
      mask=mask,
    )
    return optax.apply_updates(p, updates), s

  return step, state


def optax_dpsgd_step(
  batched_loss,
  params,
  *,
  clip: float,
  noise_multiplier: float,
  learning_rate: float,
  insecure_test_noise_seed: int | None = None,
):
  """``optax.contrib.dpsgd`` on ``vmap(grad)`` per-example gradients.

  optax clips each per-example gradient to ``clip``, adds
  ``N(0, (noise_multiplier clip)^2)`` to the sum and divides by the batch
  size (Abadi et al. 2016, Alg. 1), then scales by ``-learning_rate``.
  """
  tx = optax.contrib.dpsgd(
    learning_rate=learning_rate,
    l2_norm_clip=clip,
    noise_multiplier=noise_multiplier,
    seed=_noise_seed(insecure_test_noise_seed),
  )
  state = tx.init(params)
  per_example_grads = jax.vmap(
    jax.grad(_example_loss(batched_loss)), in_axes=(None, 0)
  )

  @functools.partial(jax.jit, donate_argnums=(0, 1))
  def step(p, s, batch):
    updates, s = tx.update(per_example_grads(p, batch), s, p)
    return optax.apply_updates(p, updates), s

  return step, state


def jax_privacy_step(
  batched_loss,
  params,
  *,
  clip: float,
  noise_multiplier: float,
  expected_batch_size: float,
  learning_rate: float,
  microbatch_size: int | None = None,
  insecure_test_noise_seed: int | None = None,
):
  """jax_privacy 2.x: ``clipped_grad`` + ``gaussian_privatizer`` + SGD.

  ``clipped_grad`` vmaps ``grad`` over examples (each a batch of one),
  clips each to ``clip`` and sums; the privatizer adds Gaussian noise of
  std ``noise_multiplier`` times the add/remove sensitivity ``clip``; the
  noisy sum is divided by ``expected_batch_size`` (Abadi et al. 2016,
  Alg. 1 lines 5-8). ``microbatch_size`` is jax_privacy's memory knob
  (sequential groups of vmapped examples).
  """
  import dp_accounting  # pylint: disable=g-import-not-at-top
  import jax_privacy  # pylint: disable=g-import-not-at-top
  from jax_privacy import noise_addition  # pylint: disable=g-import-not-at-top

  clipped_sum = jax_privacy.clipped_grad(
    lambda p, batch: jnp.sum(batched_loss(p, batch)),
    l2_clip_norm=clip,
    batch_argnums=1,
    microbatch_size=microbatch_size,
  )
  sensitivity = clipped_sum.sensitivity(
    dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
  )
  privatizer = noise_addition.gaussian_privatizer(
    stddev=noise_multiplier * sensitivity,
    prng_key=_noise_seed(insecure_test_noise_seed),
  )
  sgd = optax.sgd(learning_rate)
  state = (privatizer.init(params), sgd.init(params))

  @functools.partial(jax.jit, donate_argnums=(0, 1))
  def step(p, s, batch):
    noise_state, sgd_state = s
    noisy_sum, noise_state = privatizer.update(
      clipped_sum(p, batch), noise_state
    )
    mean = jax.tree.map(lambda g: g / expected_batch_size, noisy_sum)
    updates, sgd_state = sgd.update(mean, sgd_state, p)
    return optax.apply_updates(p, updates), (noise_state, sgd_state)

  return step, state
