"""What an optimizer state says about privacy: its plan and its releases.

:func:`find_plan` reads the one :class:`~zoprivacy.privacy.PrivacyPlan`
held in an optimizer state however the estimator is chained or wrapped;
:func:`epsilon` composes that plan over the releases the estimator's state
has counted (its ``step``): ``zoprivacy.epsilon(state, delta)``. The plan
itself never sees a state. Both refuse the optax wrappers that drop or
repeat an estimator's releases (:mod:`zoprivacy.privacy.wrappers`), since
the count would then be wrong.
"""

from __future__ import annotations

from zoprivacy.privacy import plan as plan_lib
from zoprivacy.privacy import wrappers
from zoprivacy.privacy.plan import PlanError, PrivacyPlan


def _plans(state) -> list[PrivacyPlan]:
  # JAX only once a state is read: importing the package stays JAX-free.
  import jax  # pylint: disable=g-import-not-at-top

  plan_lib.register_pytree()
  is_plan = lambda x: isinstance(x, PrivacyPlan)
  return [x for x in jax.tree.leaves(state, is_leaf=is_plan) if is_plan(x)]


def find_plan(state) -> PrivacyPlan:
  """The privacy plan inside an optimizer state, however it is wrapped.

  Raises:
    PlanError: when the state holds no plan (no zoprivacy estimator in the
      chain), several different ones, or several private estimators.
    SkippingWrapperError: (a ``PlanError``) when a wrapper that drops or
      repeats the estimator's releases (``optax.MultiSteps``,
      ``optax.apply_if_finite``, ...) holds it.
  """
  unique = list(dict.fromkeys(_plans(state)))
  if not unique:
    raise PlanError(
      "This optimizer state holds no privacy plan: no zoprivacy "
      "estimator is in the chain."
    )
  if len(unique) > 1:
    raise PlanError(
      f"This optimizer state holds {len(unique)} different "
      "privacy plans; compose them explicitly."
    )
  wrappers.refuse_skipping_wrappers(state)
  if unique[0].is_noised and len(_counters(state)) > 1:
    raise PlanError(
      f"This optimizer state holds {len(_counters(state))} private "
      "estimators with the same plan: each step releases once per "
      "estimator, so one plan's epsilon would under-count. Use one "
      "estimator per chain (more queries per step: num_queries=)."
    )
  return unique[0]


def check_composition(state) -> None:
  """Refuses an optimizer state whose composition :func:`find_plan` would
  refuse (several plans or private estimators, a wrapper that drops or
  repeats the releases, a member that reads the loss, ``optax.lookahead``);
  a state without a plan passes. Run before the first release, by
  :func:`zoprivacy.init` and :func:`zoprivacy.make_step`."""
  if wrappers.holds_plan(state):
    find_plan(state)


def _counters(state) -> list:
  """The estimator states in ``state``: nodes with a ``step`` count next
  to their ``privacy_plan`` (:class:`zoprivacy.EstimatorState`)."""
  # JAX only once a state is read: importing the package stays JAX-free.
  import jax  # pylint: disable=g-import-not-at-top

  fields = lambda x: getattr(x, "_fields", ())
  counts = lambda x: "step" in fields(x) and "privacy_plan" in fields(x)
  return [x for x in jax.tree.leaves(state, is_leaf=counts) if counts(x)]


def released_steps(state) -> int:
  """How many releases the estimator in ``state`` has made (its
  ``step``: every call of its ``update``)."""
  find_plan(state)  # one plan, at most one private estimator, no wrapper
  counters = _counters(state)
  if len(counters) != 1:
    raise PlanError(
      f"This optimizer state holds {len(counters)} estimator states; "
      "epsilon(state) reads the step count of exactly one."
    )
  try:
    return int(counters[0].step)
  except TypeError as err:  # a tracer: inside jit
    raise PlanError(
      "epsilon(state) reads the state's step count: call it outside "
      f"jax.jit, on the state a step returned ({err})."
    ) from None


def epsilon(state, delta: float | None = None) -> float:
  """Epsilon spent by the releases ``state`` has made, at ``delta``.

  ``find_plan(state).epsilon(num_steps=T, delta=delta)`` with ``T`` the
  estimator state's step count (every call of its ``update``), so the
  number of steps cannot be mistyped; ``delta`` defaults to the plan's own
  (set by :func:`zoprivacy.private`). ``inf`` for a non-private estimator.

  Raises:
    PlanError: no plan, no delta, or a wrapper that drops releases (then
      the count would be wrong: :mod:`zoprivacy.privacy.wrappers`).
  """
  plan = find_plan(state)
  if not plan.is_noised:
    return float("inf")
  if delta is None and plan.delta is None:
    raise PlanError(
      "epsilon(state) needs delta: pass it (zoprivacy.epsilon(state, "
      "1e-5)), or build the estimator with zoprivacy.private(..., delta=)."
    )
  return plan.epsilon(released_steps(state), delta=delta)
