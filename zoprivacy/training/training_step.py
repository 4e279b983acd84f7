"""A jitted training step with the parameters and optimizer state donated,
and the one way to make an optimizer state for a step you write yourself.

A zeroth-order step writes its update over the parameters: the update
``x - a s u`` is fused into the optimizer and, when the parameters are
donated to the step, written into their buffers. Without donation the step
must keep the old parameters alive next to the new ones, one more copy of
the model (the wide MLP of ``benchmarks/step_memory.py``: 2.21x the
parameters against 1.38x donated). A plain ``jax.jit`` of ``tx.update``
and ``optax.apply_updates`` does not donate; :func:`make_step` does::

    tx = optax.chain(zoprivacy.dpzero(privacy), optax.sgd(1e-3))
    step = zoprivacy.make_step(tx, loss)        # loss(params, batch) -> [B]
    state = zoprivacy.init(tx, params)
    sampler = privacy.sampler()
    for t in range(num_steps):
      batch = zoprivacy.padded_batch(arrays, sampler.batch_indices(t))
      params, state = step(params, state, batch)

The arrays passed as ``params`` and ``state`` are consumed by the call (their
buffers are reused): keep only the returned ones.

Before the first release, both roads check what an estimator cannot see
from inside: :func:`init` (for a step written with ``tx.update``) and
:func:`make_step` (when it traces its step) refuse a composition whose
epsilon would be wrong (:mod:`zoprivacy.estimators.composition`), and
:func:`make_step` checks on its first call that the loss is per-example
(:func:`zoprivacy.first_order.per_example_check.assert_per_example`, on a
synthetic batch shaped like the first one).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import optax

from zoprivacy.estimators import composition
from zoprivacy.first_order import per_example_check
from zoprivacy.zo import queries


def init(tx: optax.GradientTransformation, params):
  """``tx.init(params)``, checked: the state of a step you write with
  ``tx.update`` (:func:`make_step` needs none, it checks its own).

  The whole state is checked before any release: one private estimator
  and one plan, no optax wrapper that drops or repeats its updates
  (``optax.MultiSteps``, ``apply_if_finite``, ...), no member that reads
  the loss, no ``optax.lookahead`` (``docs/library.md``). Each estimator
  state in it is then marked checked (static, no cost per step); a private
  estimator refuses to release from a state made by ``tx.init`` alone.
  ``tx`` must be the whole transformation whose ``update`` you call.

  Raises:
    zoprivacy.privacy.PlanError: (a ``ValueError``) the composition, in
      one paragraph.
  """
  return composition.check(tx.init(params))


def make_step(
  tx: optax.GradientTransformation,
  loss: Callable,
  *,
  per_example: bool = False,
  check_per_example: bool = True,
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
    check_per_example: on the first call, check that entry ``i`` of the
      loss depends on example ``i`` only (:func:`zoprivacy.first_order.
      per_example_check.assert_per_example`, on a synthetic batch shaped
      like the first batch, reading only each leaf's min and max), and
      refuse a loss that mixes examples (a batch mean, batch statistics),
      which breaks every estimator's sensitivity bound. ``False`` trusts
      the loss unchecked: for a loss checked otherwise, e.g. one too large
      for the check's ``num_probes + 2`` batched forward passes.

  ``batch`` is a :class:`zoprivacy.Batch` from the privacy value's sampler
  (it carries its mask and how it was drawn), or arrays with ``mask``
  (real examples of a padded batch; ``None``: all). ``extra`` goes to
  ``tx.update`` as keyword arguments (for example ``discrete_noise=`` of
  an exact-noise estimator, drawn per step by
  :class:`zoprivacy.privacy.ExactNoiseSource`). The estimator reads no
  incoming gradient, so the parameters stand in for it (no zeros tree is
  allocated). A state leaf that is a parameter array itself (optax's
  ``contrib.mechanize`` keeps the initial parameters) is copied first:
  donation cannot consume one buffer twice.

  When the step is traced (its first call), the whole optimizer state is
  checked as :func:`init` checks it: a wrapper that drops or repeats the
  estimator's releases (``optax.MultiSteps``, ...), a second private
  estimator or ``optax.lookahead`` is refused before any release, in one
  paragraph (a :class:`~zoprivacy.privacy.PlanError`).
  """
  loss_name = "per_example_loss" if per_example else "batched_loss"

  def step(params, opt_state, batch, mask=None, **extra):
    composition.check(opt_state)  # at trace time only: the state's structure
    with composition.checked_trace():
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

  checked = queries.as_batched_loss(**{loss_name: loss})
  jitted = jax.jit(step, donate_argnums=(0, 1))
  return _call(jitted, step, checked if check_per_example else None)


def _call(jitted, step, batched_loss):
  """``jitted`` behind what runs outside it: on the first call the
  per-example check of ``batched_loss`` (``None``: none), on every call a
  copy of the state leaves that are parameter arrays."""
  pending = [batched_loss]

  def call(params, opt_state, batch, mask=None, **extra):
    if pending[0] is not None:
      _check_loss(pending[0], params, batch)
      pending[0] = None
    opt_state = _unaliased(params, opt_state)
    return jitted(params, opt_state, batch, mask, **extra)

  call.lower, call.__wrapped__ = jitted.lower, step
  return call


def _check_loss(batched_loss, params, batch) -> None:
  """The per-example contract, on a synthetic batch shaped like ``batch``
  (its data, for a :class:`zoprivacy.Batch`): never on its values."""
  data = getattr(batch, "data", batch)
  synthetic = per_example_check.synthetic_batch_like(data, jax.random.key(0))
  report = per_example_check.check_per_example(batched_loss, params, synthetic)
  if not report.ok:
    raise per_example_check.CrossExampleDependenceError(report, paragraph=True)


def _unaliased(params, opt_state):
  """``opt_state`` with every leaf that is one of ``params``' arrays copied
  (``jax.jit`` cannot donate one buffer as two arguments)."""
  ids = {id(x) for x in jax.tree.leaves(params)}
  if not any(id(x) in ids for x in jax.tree.leaves(opt_state)):
    return opt_state
  return jax.tree.map(lambda x: x.copy() if id(x) in ids else x, opt_state)
