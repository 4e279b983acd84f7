"""Optax wrappers that drop or repeat an estimator's releases, refused.

A step of a :class:`~zoprivacy.privacy.PrivacyPlan` is one call of the
estimator's ``update``: the call computes one release, its state counts it
(``step``), and the count keys the next call's noise. A few optax wrappers
call the inner transformation's ``update`` on every call but keep its new
state only on some calls (or skip the call): the releases of the other
calls are computed and discarded, the step count stands still, so the next
call draws the *same* noise again, and an epsilon read from the state counts
fewer releases than were computed. An estimator cannot see that it is
wrapped, so the wrapper is found where the whole state is visible: in
:func:`~zoprivacy.privacy.find_plan`, in :func:`zoprivacy.epsilon` and when
:func:`zoprivacy.make_step` traces its step. The estimator is refused
*inside* these wrappers only; a wrapper that follows the estimator in the
chain (``optax.chain(est, optax.MultiSteps(optax.sgd(lr), k))``) only
post-processes released values and is fine.

Refused (optax 0.2.5 to 0.2.8), by the type of the state they put around
the estimator's: :data:`REFUSED` (also in ``docs/library.md``). Every other
wrapper in optax calls the inner update exactly once per call and keeps its
state (``inject_hyperparams``, ``lookahead``, ``contrib.schedule_free``,
``contrib.mechanize``, ``flatten``, ``ema``, ...); ``masked`` /
``partition`` / ``freeze`` are refused by the estimator itself (it needs
every parameter).

Also refused, anywhere in a state that holds an estimator: the optax
members that read the loss themselves (:data:`LOSS_READERS`: the line
searches, ``contrib.momo``, ``contrib.reduce_on_plateau``,
``contrib.sophia``). Each evaluates the user's loss (or its gradient or
Hessian) on the batch without noise and lets the value steer the update,
so the model would reveal more than the estimator's accounted releases.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from zoprivacy.privacy import plan as plan_lib


class SkippingWrapperError(plan_lib.PlanError):
  """An optax wrapper drops or repeats the releases of the estimator."""


class Refused(NamedTuple):
  """A refused wrapper: how it is written, what it does to the estimator's
  calls, and what to write instead."""

  name: str
  does: str
  instead: str


_MULTI_STEPS = Refused(
  "optax.MultiSteps",
  "calls the estimator on every mini-step but keeps its state only on every "
  "k-th (its skip_not_finite / skip_large_updates options skip more)",
  "To average over more examples per step, use a larger expected_batch_size "
  "(its privacy is accounted); to accumulate the released updates, put the "
  "wrapper after the estimator: optax.chain(estimator, "
  "optax.MultiSteps(optax.sgd(lr), k))",
)
_APPLY_IF_FINITE = Refused(
  "optax.apply_if_finite",
  "skips the estimator's update whenever the incoming updates are not finite",
  "Wrap only the optimizer that follows the estimator: optax.chain("
  "estimator, optax.apply_if_finite(optax.sgd(lr), n)); a larger "
  "expected_batch_size (its privacy is accounted) steadies the step",
)
_CONDITIONAL = (
  "calls the estimator's update on every call and keeps it only where its "
  "condition holds"
)
_AFTER = (
  "Put the wrapper around what follows the estimator in the chain; to "
  "average over more examples per step, use a larger expected_batch_size "
  "(its privacy is accounted)"
)
_SAM = Refused(
  "optax.contrib.sam",
  "keeps the outer and the adversarial optimizer's state only on "
  "alternate calls",
  _AFTER,
)
_PROCESS = Refused(
  "optax.experimental.aggregating.process",
  "runs its postprocessor only on the calls where the aggregator is ready",
  _AFTER,
)


class LossReader(NamedTuple):
  """An optax member that reads the loss itself: its name and what it reads."""

  name: str
  reads: str


LOSS_READERS = (
  LossReader(
    "optax.scale_by_backtracking_linesearch",
    "evaluates value_fn at trial steps",
  ),
  LossReader(
    "optax.scale_by_zoom_linesearch (optax.lbfgs)",
    "evaluates value_fn and its gradient at trial steps",
  ),
  LossReader("optax.contrib.momo / momo_adam", "takes the loss value="),
  LossReader("optax.contrib.reduce_on_plateau", "takes the loss value="),
  LossReader("optax.contrib.sophia", "evaluates obj_fn's Hessian on the batch"),
)
"""Every refused loss-reading member, for the documentation and the tests."""


class LossReadingError(plan_lib.PlanError):
  """An optax member beside the estimator reads the loss without noise."""


@functools.cache
def _loss_reader_types():
  """``(state type, LossReader)`` for the types this optax version has."""
  import optax  # pylint: disable=g-import-not-at-top
  from optax import contrib  # pylint: disable=g-import-not-at-top

  rows = (
    (optax, "ScaleByBacktrackingLinesearchState", LOSS_READERS[0]),
    (optax, "ScaleByZoomLinesearchState", LOSS_READERS[1]),
    (contrib, "MomoState", LOSS_READERS[2]),
    (contrib, "MomoAdamState", LOSS_READERS[2]),
    (contrib, "ReduceLROnPlateauState", LOSS_READERS[3]),
    (contrib, "SophiaState", LOSS_READERS[4]),
  )
  return tuple(
    (getattr(module, name), reader)
    for module, name, reader in rows
    if hasattr(module, name)
  )


def _loss_readers_in(state) -> list[LossReader]:
  import jax  # pylint: disable=g-import-not-at-top

  types = _loss_reader_types()
  is_reader = lambda x: any(isinstance(x, t) for t, _ in types)
  return [
    reader
    for node in jax.tree.leaves(state, is_leaf=is_reader)
    if is_reader(node)
    for t, reader in types
    if isinstance(node, t)
  ]


def refuse_loss_readers(state) -> None:
  """Raises :class:`LossReadingError` if ``state`` holds an estimator's plan
  and the state of an optax member that reads the loss itself."""
  if not holds_plan(state):
    return
  found = list(dict.fromkeys(_loss_readers_in(state)))
  if not found:
    return
  names = " and ".join(r.name for r in found)
  raise LossReadingError(
    f"{names} is chained with a zoprivacy estimator: it {found[0].reads}, "
    "without noise, and lets that value steer the update, so the trained "
    "model reveals more about the batch than the estimator's releases, "
    "which are all the privacy plan accounts. Use a fixed learning rate or "
    "a schedule (optax.sgd(optax.cosine_decay_schedule(...))), chosen on "
    "public data or with the accounted tuner (docs/tuning.md). Refused "
    "members: docs/library.md."
  )


@functools.cache
def _typed():
  """``(state type, Refused, fields holding the inner state)``, for the
  types this optax version has."""
  import optax  # pylint: disable=g-import-not-at-top
  from optax import contrib  # pylint: disable=g-import-not-at-top

  rows = (
    (optax, "MultiStepsState", _MULTI_STEPS, ("inner_opt_state",)),
    (optax, "ApplyIfFiniteState", _APPLY_IF_FINITE, ("inner_state",)),
    (
      optax,
      "ConditionallyTransformState",
      Refused("optax.transforms.conditionally_transform", _CONDITIONAL, _AFTER),
      ("inner_state",),
    ),
    (
      optax,
      "ConditionallyMaskState",
      Refused("optax.transforms.conditionally_mask", _CONDITIONAL, _AFTER),
      ("inner_state",),
    ),
    (contrib, "SAMState", _SAM, ("opt_state", "adv_state")),
  )
  return tuple(
    (getattr(module, name), refused, fields)
    for module, name, refused, fields in rows
    if hasattr(module, name)
  )


REFUSED = (
  _MULTI_STEPS,
  _APPLY_IF_FINITE,
  Refused("optax.transforms.conditionally_transform", _CONDITIONAL, _AFTER),
  Refused("optax.transforms.conditionally_mask", _CONDITIONAL, _AFTER),
  _SAM,
  _PROCESS,
)
"""Every refused wrapper, for the documentation and the tests."""


def _is_plan(x) -> bool:
  return isinstance(x, plan_lib.PrivacyPlan)


def holds_plan(tree) -> bool:
  """Whether ``tree`` holds a privacy plan (a zoprivacy estimator's state)."""
  import jax  # pylint: disable=g-import-not-at-top

  return any(map(_is_plan, jax.tree.leaves(tree, is_leaf=_is_plan)))


def _has_ready_field(tree) -> bool:
  import jax  # pylint: disable=g-import-not-at-top

  has = lambda x: "ready" in getattr(x, "_fields", ())
  return any(map(has, jax.tree.leaves(tree, is_leaf=has)))


def _skipped_parts(node) -> tuple[Refused | None, tuple]:
  """``(Refused, the parts of node it may skip)`` if ``node`` is the state of
  a refused wrapper, else ``(None, ())``."""
  for state_type, refused, fields in _typed():
    if isinstance(node, state_type):
      return refused, tuple(getattr(node, f) for f in fields)
  # aggregating.process: a plain (pre, aggregate, post) tuple whose
  # aggregator state has a 'ready' flag; the postprocessor runs when ready.
  if (
    type(node) is tuple  # pylint: disable=unidiomatic-typecheck
    and len(node) == 3
    and _has_ready_field(node[1])
  ):
    return _PROCESS, (node[2],)
  return None, ()


def _refused_around_plans(node) -> list[Refused]:
  import jax  # pylint: disable=g-import-not-at-top

  refused, parts = _skipped_parts(node)
  if refused is not None and any(map(holds_plan, parts)):
    return [refused]
  children = jax.tree.leaves(node, is_leaf=lambda x: x is not node)
  if len(children) == 1 and children[0] is node:  # an array (or tracer)
    return []
  found = []
  for child in children:
    array = hasattr(child, "shape") and hasattr(child, "dtype")
    if not (array or _is_plan(child)):  # arrays and tracers hold no state
      found += _refused_around_plans(child)
  return found


class UnsupportedWrapperError(plan_lib.PlanError):
  """An optax wrapper that cannot run in a chain with an estimator."""


def refuse_lookahead(state) -> None:
  """Raises :class:`UnsupportedWrapperError` if ``state`` holds an
  estimator's plan and an ``optax.lookahead`` state, wherever it is."""
  import jax  # pylint: disable=g-import-not-at-top
  import optax  # pylint: disable=g-import-not-at-top

  is_lookahead = lambda x: isinstance(x, optax.LookaheadState)
  leaves = jax.tree.leaves(state, is_leaf=is_lookahead)
  if not (holds_plan(state) and any(map(is_lookahead, leaves))):
    return
  raise UnsupportedWrapperError(
    "optax.lookahead is in a chain with a zoprivacy estimator, and the two "
    "cannot run together: lookahead's update takes optax.LookaheadParams (a "
    "fast and a slow copy of the parameters) and passes its inner "
    "transformation neither the loss nor the batch, so an estimator inside "
    "it gets no loss, and one before it would perturb and evaluate both "
    "copies. To pull the weights back to a slow copy, keep that copy "
    "yourself after the step (every k steps: slow = slow + alpha * (params "
    "- slow), params = slow), which only post-processes released updates; "
    "or average iterates after the estimator (optax.contrib.schedule_free_sgd)."
  )


def refuse_skipping_wrappers(state) -> None:
  """Raises :class:`SkippingWrapperError` if a refused wrapper holds an
  estimator's state (a privacy plan) in ``state``; one paragraph naming the
  wrapper, what goes wrong and what to write instead."""
  if not holds_plan(state):
    return
  refuse_loss_readers(state)
  refuse_lookahead(state)
  found = list(dict.fromkeys(_refused_around_plans(state)))
  if not found:
    return
  first = found[0]
  names = " and ".join(w.name for w in found)
  raise SkippingWrapperError(
    f"{names} wraps a zoprivacy estimator: it {first.does}. A step of the "
    "privacy plan must be one call of the estimator's update: the calls it "
    "drops still compute a release, the estimator's step count (which keys "
    "the noise) stands still, so later calls repeat noise, and an epsilon "
    f"read from the state would count fewer releases than were made. "
    f"{first.instead}. Refused wrappers: docs/library.md."
  )
