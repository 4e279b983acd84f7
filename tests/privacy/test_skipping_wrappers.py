"""Optax wrappers that drop or repeat an estimator's releases are refused.

``optax.MultiSteps(optax.chain(est, optax.sgd(lr)), k)`` calls the
estimator on every mini-step and keeps its state on every k-th only: noise
repeats and the state counts k times fewer releases than were computed.
Every such wrapper (``zoprivacy.privacy.wrappers.REFUSED``) is refused by
``find_plan``, ``zoprivacy.epsilon`` and ``make_step`` (at trace time) with
one paragraph naming it and the alternative; a plain chain, injected
hyperparameters and wrappers placed *after* the estimator are not.
"""

import importlib
import importlib.util
import pathlib

import jax
import jax.numpy as jnp
import optax
import optax.contrib
import pytest

import zoprivacy
from zoprivacy.privacy import PlanError, SkippingWrapperError, wrappers

DOC = pathlib.Path(__file__).parents[2] / "docs" / "library.md"
LOSS = lambda p, batch: jnp.sum((batch - p["w"]) ** 2, axis=-1)  # noqa: E731
PRIVACY = zoprivacy.Privacy(
  noise=zoprivacy.TestNoise(0),
  noise_multiplier=1.0,
  sampling=zoprivacy.Poisson(dataset_size=16, expected_batch_size=4),
  assume_sampling=True,  # the tests feed their own batches
)


def _params():  # fresh buffers: make_step donates the ones it is given
  return {"w": jnp.ones(3)}


def _est():
  return zoprivacy.dpzero(PRIVACY, smoothing=1e-3)


def _inner():
  return optax.chain(_est(), optax.sgd(0.1))


REFUSED = {
  "optax.MultiSteps": lambda: optax.MultiSteps(_inner(), every_k_schedule=4),
  "optax.MultiSteps(skip_not_finite)": lambda: optax.MultiSteps(
    _inner(), 4, should_skip_update_fn=optax.skip_not_finite
  ),
  "optax.apply_if_finite": lambda: optax.apply_if_finite(_inner(), 3),
  "optax.transforms.conditionally_transform": lambda: (
    optax.transforms.conditionally_transform(_inner(), lambda s: s % 2 == 0)
  ),
  "optax.transforms.conditionally_mask": lambda: (
    optax.transforms.conditionally_mask(_inner(), lambda s: s % 2 == 0)
  ),
  "optax.contrib.sam": lambda: optax.contrib.sam(_inner(), optax.sgd(0.1)),
}
if importlib.util.find_spec("optax.experimental") is not None:  # optax 0.2.6+
  importlib.import_module("optax.experimental")
  REFUSED["optax.experimental.aggregating.process"] = lambda: (
    optax.experimental.aggregating.add_mean_variance_to_opt(
      _inner(), accumulation_steps=2
    )
  )

ACCEPTED = {
  "plain chain": _inner,
  "inject_hyperparams": lambda: optax.chain(
    optax.inject_hyperparams(
      zoprivacy.dpzero, static_args=zoprivacy.static_args(zoprivacy.dpzero)
    )(PRIVACY, smoothing=1e-3),
    optax.sgd(0.1),
  ),
  "MultiSteps after the estimator": lambda: optax.chain(
    _est(), optax.MultiSteps(optax.sgd(0.1), 4)
  ),
  "apply_if_finite after the estimator": lambda: optax.chain(
    _est(), optax.apply_if_finite(optax.sgd(0.1), 3)
  ),
  "apply_every after the estimator": lambda: optax.chain(
    _est(), optax.apply_every(2), optax.sgd(0.1)
  ),
}


def _name(key: str) -> str:
  return key.partition("(")[0]


@pytest.mark.parametrize("key", sorted(REFUSED))
def test_find_plan_and_epsilon_refuse_the_wrapper_by_name(key):
  state = REFUSED[key]().init(_params())
  for read in (zoprivacy.find_plan, lambda s: zoprivacy.epsilon(s, 1e-5)):
    with pytest.raises(SkippingWrapperError) as err:
      read(state)
    text = str(err.value)
    assert text.startswith(f"{_name(key)} wraps a zoprivacy estimator")
    assert "larger expected_batch_size" in text
    assert "repeat noise" in text and "\n" not in text
    assert isinstance(err.value, PlanError)


@pytest.mark.parametrize("key", sorted(REFUSED))
def test_make_step_refuses_the_wrapper_when_it_traces(key):
  tx = REFUSED[key]()
  state = tx.init(_params())
  step = zoprivacy.make_step(tx, LOSS)
  with pytest.raises(
    SkippingWrapperError, match=_name(key).replace(".", r"\.")
  ):
    step(_params(), state, jnp.zeros((4, 3)), jnp.ones(4, bool))


@pytest.mark.parametrize("key", sorted(ACCEPTED))
def test_chains_and_wrappers_after_the_estimator_are_unaffected(key):
  tx = ACCEPTED[key]()
  state = tx.init(_params())
  plan = zoprivacy.find_plan(state)
  assert plan == _est().privacy_plan
  assert zoprivacy.epsilon(state, 1e-5) == 0.0  # no release yet
  step = zoprivacy.make_step(tx, LOSS)
  params = _params()
  for t in range(2):
    params, state = step(params, state, jnp.full((4, 3), float(t)))
  assert zoprivacy.epsilon(state, 1e-5) == pytest.approx(plan.epsilon(2, 1e-5))
  assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(params))


def test_a_wrapper_holding_only_the_optimizer_inside_a_refused_one_is_found():
  """Nested: the refused wrapper is found under an accepted one, and one
  that holds no estimator (around the optimizer) is not refused."""
  outer = optax.inject_hyperparams(optax.sgd)(learning_rate=0.1)
  tx = optax.chain(optax.apply_if_finite(_inner(), 2), outer)
  with pytest.raises(SkippingWrapperError, match="apply_if_finite"):
    zoprivacy.find_plan(tx.init(_params()))
  fine = optax.chain(
    _est(), optax.MultiSteps(optax.apply_if_finite(outer, 2), 2)
  )
  assert zoprivacy.find_plan(fine.init(_params())).is_noised


def test_every_refused_wrapper_is_listed_in_the_docs_and_tested():
  text = DOC.read_text()
  names = {w.name for w in wrappers.REFUSED}
  untested = set()  # optax.experimental is absent before optax 0.2.6
  if importlib.util.find_spec("optax.experimental") is None:
    untested = {"optax.experimental.aggregating.process"}
  assert names - untested == {_name(k) for k in REFUSED}
  for name in names:
    assert f"`{name}`" in text, name


LOSS_READERS = {
  "optax.scale_by_backtracking_linesearch": lambda: (
    optax.scale_by_backtracking_linesearch(max_backtracking_steps=3)
  ),
  "optax.scale_by_zoom_linesearch (optax.lbfgs)": optax.lbfgs,
  "optax.contrib.momo / momo_adam": optax.contrib.momo,
  "optax.contrib.reduce_on_plateau": optax.contrib.reduce_on_plateau,
  "optax.contrib.sophia": lambda: optax.contrib.sophia(0.1),
}


@pytest.mark.parametrize("key", sorted(LOSS_READERS))
def test_members_that_read_the_loss_are_refused_beside_an_estimator(key):
  """A line search (or Momo, Sophia, reduce_on_plateau) after the estimator
  evaluates the private loss without noise: refused by find_plan, epsilon
  and make_step; alone (no estimator) it is none of our business."""
  tx = optax.chain(_est(), LOSS_READERS[key]())
  state = tx.init(_params())
  for read in (zoprivacy.find_plan, lambda s: zoprivacy.epsilon(s, 1e-5)):
    with pytest.raises(wrappers.LossReadingError) as err:
      read(state)
    assert str(err.value).startswith(f"{key} is chained with a zoprivacy")
    assert "\n" not in str(err.value)
  step = zoprivacy.make_step(tx, LOSS)
  with pytest.raises(wrappers.LossReadingError):
    step(_params(), state, jnp.zeros((4, 3)), jnp.ones(4, bool))
  wrappers.refuse_loss_readers(LOSS_READERS[key]().init(_params()))


def test_every_loss_reader_is_listed_in_the_docs_and_tested():
  text = DOC.read_text()
  assert {r.name for r in wrappers.LOSS_READERS} == set(LOSS_READERS)
  for name in LOSS_READERS:
    assert f"`{name}`" in text, name
