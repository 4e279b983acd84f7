"""Property: a valid configuration never turns finite losses into NaN or inf
parameters.

Over estimators, clip, noise, smoothing, queries, directions, generators and
learning rates, three steps on a linear model whose per-example losses are
finite but span many orders of magnitude (inputs up to 1e6, one example's
loss about 1e12, which the private estimators' clipping bounds) leave
every parameter finite. Hypothesis runs
derandomized, without a saved example database.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zoprivacy

_SETTINGS = settings(
  max_examples=15,
  derandomize=True,
  database=None,
  deadline=None,
  suppress_health_check=[HealthCheck.too_slow],
)

_X = np.concatenate(
  [np.random.default_rng(0).normal(size=(7, 5)), np.full((1, 5), 1e6)]
).astype(np.float32)
_Y = np.arange(8, dtype=np.float32)
_MASK = np.arange(8) < 7  # the huge example (row 7) as a padded row
_PARAMS = {"w": jnp.zeros(5, jnp.float32), "b": jnp.zeros((), jnp.float32)}


def _loss(params, batch):
  x, y = batch
  return jnp.square(x @ params["w"] + params["b"] - y)


@_SETTINGS
@given(
  name=st.sampled_from(
    ["mezo", "dpzero", "dp_zo", "dpgd_zeroth", "dp_sgd", "vr_dpzero"]
  ),
  clip=st.floats(1e-3, 1e3),
  noise_multiplier=st.floats(0.1, 100.0),
  smoothing=st.floats(1e-4, 1.0),
  learning_rate=st.floats(1e-4, 1.0),
  num_queries=st.integers(1, 3),
  directions=st.sampled_from(["gaussian", "sphere", "rademacher"]),
  prng=st.sampled_from(["threefry", "counter"]),
  huge_is_real=st.booleans(),
)
def test_finite_losses_never_give_nonfinite_parameters(
  name,
  clip,
  noise_multiplier,
  smoothing,
  learning_rate,
  num_queries,
  directions,
  prng,
  huge_is_real,
):
  kwargs = dict(smoothing=smoothing, directions=directions, direction_prng=prng)
  if name in ("mezo", "dpzero", "dp_zo"):
    kwargs["num_queries"] = num_queries
  if name == "dp_sgd":
    kwargs = {}
  if name != "mezo":
    kwargs.update(
      clip=clip,
      noise_multiplier=noise_multiplier,
      expected_batch_size=8,
      dataset_size=100,
      insecure_test_noise_seed=0,
    )
  tx = optax.chain(
    zoprivacy.ESTIMATORS[name](**kwargs), optax.sgd(learning_rate)
  )
  # MeZO does not clip: a loss of 1e12 with a learning rate of 1 diverges
  # by design, so it only sees the ordinary examples.
  mask = np.ones(8, bool) if huge_is_real and name != "mezo" else _MASK
  losses = _loss(_PARAMS, (_X, _Y))
  assert np.all(np.isfinite(losses)) and float(np.max(losses)) >= 0
  state = zoprivacy.init(tx, _PARAMS)

  @jax.jit
  def step(p, s):
    u, s = tx.update(
      jax.tree.map(jnp.zeros_like, p),
      s,
      p,
      batched_loss=_loss,
      batch=(_X, _Y),
      mask=mask,
    )
    return optax.apply_updates(p, u), s

  params = _PARAMS
  for _ in range(3):
    params, state = step(params, state)
    assert all(np.all(np.isfinite(v)) for v in jax.tree.leaves(params)), params
