"""A jitted training step with the parameters and optimizer state donated.

A zeroth-order step writes its update over the parameters: the update
``x - a s u`` is fused into the optimizer and, when the parameters are
donated to the step, written into their buffers. Without donation the step
must keep the old parameters alive next to the new ones, one more copy of
the model (the wide MLP of ``benchmarks/step_memory.py``: 2.21x the
parameters against 1.38x donated). A plain ``jax.jit`` of ``tx.update``
and ``optax.apply_updates`` does not donate; :func:`make_step` does::

    tx = optax.chain(zoprivacy.dpzero(...), optax.sgd(1e-3))
    step = zoprivacy.make_step(tx, loss)        # loss(params, batch) -> [B]
    state = tx.init(params)
    for batch, mask in batches:
      params, state = step(params, state, batch, mask)

The arrays passed as ``params`` and ``state`` are consumed by the call (their
buffers are reused): keep only the returned ones.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import optax

from zoprivacy.privacy import wrappers


def make_step(
  tx: optax.GradientTransformation,
  loss: Callable,
  *,
  per_example: bool = False,
) -> Callable:
  """Returns ``step(params, opt_state, batch, mask=None, **extra) ->
  (params, opt_state)``: one ``tx.update`` and ``optax.apply_updates``,
  jitted with ``params`` and ``opt_state`` donated.

  Args:
    tx: the optax chain, a private estimator first (any
      :mod:`zoprivacy.estimators` factory, or a first-order one).
    loss: ``loss(params, batch) -> [B]``, one loss per example
      (``batched_loss=``); with ``per_example=True``, ``loss(params,
      example) -> scalar`` (``per_example_loss=``).
    per_example: which of the two loss forms ``loss`` is.

  ``mask`` marks the real examples of a padded batch (``None``: all).
  ``extra`` goes to ``tx.update`` as keyword arguments (for example
  ``discrete_noise=`` of an exact-noise estimator, drawn per step by
  :class:`zoprivacy.privacy.ExactNoiseSource`). The estimator reads no
  incoming gradient, so the parameters stand in for it (no zeros tree is
  allocated).

  An optax wrapper that drops or repeats the estimator's releases
  (``optax.MultiSteps``, ``optax.apply_if_finite``, ...: see
  :mod:`zoprivacy.privacy.wrappers`) is refused with a
  :class:`~zoprivacy.privacy.SkippingWrapperError` when the step is traced
  (its first call).
  """
  loss_name = "per_example_loss" if per_example else "batched_loss"

  def step(params, opt_state, batch, mask=None, **extra):
    wrappers.refuse_skipping_wrappers(opt_state)  # at trace time only
    updates, opt_state = tx.update(
      params,
      opt_state,
      params,
      **{loss_name: loss},
      batch=batch,
      mask=mask,
      **extra,
    )
    return optax.apply_updates(params, updates), opt_state

  return jax.jit(step, donate_argnums=(0, 1))
