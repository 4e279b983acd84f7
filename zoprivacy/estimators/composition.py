"""A private estimator releases only from a composition checked whole.

An estimator sees its own state, never the chain around it: it cannot tell
that ``optax.MultiSteps`` keeps its state only every k-th call, or that a
second private estimator releases beside it. Those are found where the
whole optimizer state is visible (:func:`zoprivacy.privacy.state.
check_composition`), and every road to a release goes through that check
BEFORE the first release:

* :func:`zoprivacy.init` (``state = zoprivacy.init(tx, params)``) runs
  ``tx.init``, checks the whole state and marks each estimator state in it
  as checked (:data:`CHECKED`, static: no leaf, no cost per step);
* :func:`zoprivacy.make_step` checks the whole state when it traces its
  step, and runs ``tx.update`` inside :func:`checked_trace`;
* the runner creates its state through :func:`check`.

A private estimator's ``update`` refuses, when it is traced, a state that is
neither marked nor inside a checked trace (:func:`refuse_unchecked`): a
state from a bare ``tx.init`` was never checked.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses

import jax

from zoprivacy.privacy import plan as plan_lib
from zoprivacy.privacy import state as state_lib


@dataclasses.dataclass(frozen=True)
class Composition:
  """Whether the optimizer state an estimator state was made in was checked
  whole (:func:`check`). A static pytree node: part of the tree structure,
  so a ``jax.jit`` traced for an unchecked state never serves a checked
  one, and checkpoints hold no more leaves."""

  checked: bool = False


jax.tree_util.register_static(Composition)
UNCHECKED, CHECKED = Composition(False), Composition(True)

_CHECKED_TRACE = contextvars.ContextVar("checked_trace", default=False)


class UncheckedCompositionError(plan_lib.PlanError):
  """A private estimator was asked to release from an unchecked state."""


@contextlib.contextmanager
def checked_trace():
  """Within it, estimator updates release from unchecked states: the caller
  (:func:`zoprivacy.make_step`) checked the whole state it updates."""
  token = _CHECKED_TRACE.set(True)
  try:
    yield
  finally:
    _CHECKED_TRACE.reset(token)


def refuse_unchecked(state) -> None:
  """Raises :class:`UncheckedCompositionError` for a private estimator's
  state that no whole-state check has passed (one paragraph)."""
  if not state.privacy_plan.is_noised or _CHECKED_TRACE.get():
    return
  if state.composition.checked:
    return
  raise UncheckedCompositionError(
    "This private estimator's state was made by tx.init alone, which does "
    "not check the transformation around the estimator: a wrapper that "
    "drops or repeats its updates (optax.MultiSteps, apply_if_finite, ...) "
    "or a second private estimator in the chain would release more than "
    "the privacy plan counts. Make the state with state = zoprivacy.init("
    "tx, params), tx being the whole transformation whose update you call "
    "(it checks the composition, then marks the state), or step with "
    "zoprivacy.make_step(tx, loss), which checks it when it traces its step."
  )


def _is_estimator_state(x) -> bool:
  fields = getattr(x, "_fields", ())
  return "composition" in fields and "privacy_plan" in fields


def check(state):
  """``state`` (a whole optimizer state) checked (:func:`zoprivacy.privacy.
  state.check_composition`: one plan, at most one private estimator, no
  wrapper that drops or repeats its releases, no member that reads the
  loss) and each estimator state in it marked :data:`CHECKED`."""
  state_lib.check_composition(state)
  return jax.tree.map(
    lambda x: x._replace(composition=CHECKED) if _is_estimator_state(x) else x,
    state,
    is_leaf=_is_estimator_state,
  )
