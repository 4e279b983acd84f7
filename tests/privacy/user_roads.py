"""A user's script on the library road, run as a subprocess by
``test_library_roads.py``: each road is tried once and its outcome printed
as one JSON object, ``{road: "ran: ..." or "refused: <message>"}``.

Every road builds DPZero on a small linear regression from one privacy
value and feeds it batches some way; the ones its plan does not account
must be refused when the step is first traced, before any release.
"""

import json
import sys
import warnings

import jax.numpy as jnp
import numpy as np
import optax

import zoprivacy
from zoprivacy.privacy import batch_selection

N, D = 2000, 4
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, D)).astype(np.float32)
Y = X @ np.arange(1, D + 1, dtype=np.float32)
LOSS = lambda w, b: (b[0] @ w - b[1]) ** 2  # noqa: E731  per example
PRIVACY = zoprivacy.Privacy(
  clip=10.0,
  noise=zoprivacy.TestNoise(0),
  sampling=zoprivacy.Poisson(dataset_size=N, expected_batch_size=64),
  target=zoprivacy.Target(epsilon=2.0, delta=1e-5, num_steps=20),
)


def _train(privacy, batches, steps=2):
  """Two steps of ``make_step``: the epsilon the state reports and the
  plan's description."""
  tx = optax.chain(zoprivacy.dpzero(privacy, smoothing=1e-3), optax.sgd(1e-3))
  step = zoprivacy.make_step(tx, LOSS)
  w, state = jnp.zeros(D), tx.init(jnp.zeros(D))
  for t in range(steps):
    w, state = step(w, state, batches(t))
  plan = zoprivacy.find_plan(state)
  return f"epsilon {zoprivacy.epsilon(state):.4f}; {plan.describe()}"


def _padded(sampler):
  return lambda t: zoprivacy.padded_batch((X, Y), sampler.batch_indices(t))


ROADS = {
  "the value's sampler": lambda: _train(PRIVACY, _padded(PRIVACY.sampler())),
  "a sampler at another rate": lambda: _train(
    PRIVACY, _padded(zoprivacy.PoissonSampler(N, 512, insecure_test_seed=0))
  ),
  "shuffled fixed-size batches": lambda: _train(
    PRIVACY, _padded(batch_selection.ShuffleSampler(N, 64, seed=0))
  ),
  "fixed-size batches for a Poisson plan": lambda: _train(
    PRIVACY,
    _padded(batch_selection.WithoutReplacementSampler(N, 64, secret=b"k" * 32)),
  ),
  "fixed-size sampling in the value": lambda: _train(
    PRIVACY.replace(
      sampling=zoprivacy.WithoutReplacement(dataset_size=N, batch_size=64),
      neighboring="replace_one",
    ),
    lambda t: (X[:64], Y[:64]),
  ),
  "arrays from elsewhere": lambda: _train(PRIVACY, lambda t: (X[:64], Y[:64])),
  "arrays, sampling assumed": lambda: _train(
    PRIVACY.replace(assume_sampling=True), lambda t: (X[:64], Y[:64])
  ),
}


def main(names):
  out = {}
  for name in names:
    try:
      with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out[name] = f"ran: {ROADS[name]()}"
    except Exception as e:  # pylint: disable=broad-except
      out[name] = f"refused: {type(e).__name__}: {e}"
  print(json.dumps(out))


if __name__ == "__main__":
  main(sys.argv[1:] or list(ROADS))
