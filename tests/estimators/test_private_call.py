"""``zoprivacy.private``: one call from a target epsilon to an estimator and
the plan its state holds; ``zoprivacy.epsilon(state)``: the epsilon of the
releases a state counted; and the paragraph a factory gives for
``target_epsilon=``."""

import jax
import jax.numpy as jnp
import optax
import pytest

import zoprivacy
from zoprivacy.privacy import PlanError
from zoprivacy.privacy import state as state_lib

TARGET, DELTA, STEPS = 1.0, 1e-5, 50
SAMPLING = dict(expected_batch_size=16, dataset_size=256)
HYPER = dict(clip=1.0, smoothing=1e-3)
LOSS = lambda p, batch: jnp.sum((batch - p["w"]) ** 2, axis=-1)  # noqa: E731


def _params():  # fresh buffers: make_step donates the ones it is given
  return {"w": jnp.zeros(3)}


@pytest.fixture(scope="module")
def calibrated():
  return zoprivacy.private(
    zoprivacy.dpzero,
    target_epsilon=TARGET,
    delta=DELTA,
    num_steps=STEPS,
    **SAMPLING,
    **HYPER,
  )


def test_the_plan_meets_the_target_tightly_and_is_the_one_the_state_holds(
  calibrated,
):
  est, plan = calibrated
  assert plan.delta == DELTA and plan.noise_kind == "discrete"  # exact
  assert plan.sampling_probability == 16 / 256
  assert 0.99 * TARGET < plan.epsilon(STEPS) <= TARGET
  smaller = plan.with_noise_multiplier(plan.noise_multiplier / 1.01)
  assert smaller.epsilon(STEPS) > TARGET  # the smallest multiplier, to 1%
  assert est.privacy_plan == plan
  state = optax.chain(est, optax.sgd(0.1)).init(_params())
  assert zoprivacy.find_plan(state) == plan
  direct = zoprivacy.dpzero(
    noise_multiplier=plan.noise_multiplier, **SAMPLING, **HYPER
  )
  assert direct.privacy_plan.replace(delta=DELTA) == plan  # same estimator


def test_epsilon_of_a_state_counts_every_release(calibrated):
  est, plan = calibrated
  tx = optax.chain(est, optax.sgd(0.1))
  state = tx.init(_params())
  assert zoprivacy.epsilon(state) == 0.0
  step = zoprivacy.make_step(tx, LOSS)
  params = _params()
  for t in range(3):
    params, state = step(params, state, jnp.full((16, 3), float(t)))
  assert state_lib.released_steps(state) == 3
  assert zoprivacy.epsilon(state) == plan.epsilon(3) > 0.0
  assert zoprivacy.epsilon(state, 1e-7) == plan.epsilon(3, 1e-7)
  assert zoprivacy.epsilon(state, 1e-7) > zoprivacy.epsilon(state)
  with pytest.raises(PlanError, match="outside jax.jit"):
    jax.jit(zoprivacy.epsilon)(state)


def test_sampling_probability_gives_the_same_plan(calibrated):
  _, plan = calibrated
  _, again = zoprivacy.private(
    zoprivacy.dpzero,
    target_epsilon=TARGET,
    delta=DELTA,
    num_steps=STEPS,
    sampling_probability=16 / 256,
    dataset_size=256,
    **HYPER,
  )
  assert again == plan


def test_epsilon_without_delta_or_with_two_estimators_is_refused():
  est = zoprivacy.dpzero(noise_multiplier=2.0, **SAMPLING, **HYPER)
  state = optax.chain(est, optax.sgd(0.1)).init(_params())
  with pytest.raises(PlanError, match="needs delta"):
    zoprivacy.epsilon(state)
  assert zoprivacy.epsilon(state, DELTA) == 0.0
  twice = optax.chain(est, est, optax.sgd(0.1)).init(_params())
  for read in (zoprivacy.find_plan, lambda s: zoprivacy.epsilon(s, DELTA)):
    with pytest.raises(PlanError, match="2 private estimators"):
      read(twice)
  mezo = optax.chain(zoprivacy.mezo(smoothing=1e-3), optax.sgd(0.1))
  assert zoprivacy.epsilon(mezo.init(_params()), DELTA) == float("inf")


def test_a_factory_given_target_epsilon_names_the_one_call():
  with pytest.raises(TypeError) as err:
    zoprivacy.dpzero(target_epsilon=2.0, **SAMPLING, **HYPER)
  text = str(err.value)
  assert text.startswith("dpzero() takes no target_epsilon")
  assert "target=zoprivacy.Target(epsilon=2.0" in text
  assert "zoprivacy.epsilon(state, delta)" in text and "\n" not in text
  with pytest.raises(TypeError, match="takes no delta: .*zoprivacy.Target"):
    zoprivacy.dp_sgd(noise_multiplier=1.0, delta=1e-5, **SAMPLING)
  with pytest.raises(TypeError, match="setting=..."):
    zoprivacy.noisy_zogd_chain(None, target_epsilon=1.0)
  with pytest.raises(TypeError, match="non-private baseline"):
    zoprivacy.mezo(target_epsilon=2.0)
  with pytest.raises(TypeError, match="unexpected keyword"):  # others: Python's
    zoprivacy.dpzero(noise_multiplier=1.0, clipp=1.0, **SAMPLING)


@pytest.mark.parametrize(
  "factory, kwargs, match",
  [
    (zoprivacy.mezo, SAMPLING, "takes no privacy value"),
    (optax.sgd, SAMPLING, "takes no privacy value"),
    (zoprivacy.dpzero, dict(noise_multiplier=1.0, **SAMPLING), "give one"),
    (zoprivacy.dpzero, dict(expected_batch_size=16), "dataset_size and one"),
    (
      zoprivacy.dpzero,
      dict(sampling_probability=0.1, **SAMPLING),
      "dataset_size and one",
    ),
  ],
)
def test_private_refuses_what_it_cannot_calibrate(factory, kwargs, match):
  with pytest.raises(TypeError, match=match):
    zoprivacy.private(
      factory, target_epsilon=1.0, delta=DELTA, num_steps=10, **kwargs
    )


def test_private_validates_the_target():
  for bad in (dict(target_epsilon=0.0), dict(delta=1.0), dict(num_steps=0)):
    args = dict(target_epsilon=1.0, delta=DELTA, num_steps=10) | bad
    with pytest.raises(ValueError):
      zoprivacy.private(zoprivacy.dpzero, **args, **SAMPLING)
