"""A user's script on the library road, run as a subprocess by
``test_library_roads.py``: each road is tried once and its outcome printed
as one JSON object, ``{road: "ran: ..." or "refused: <message>"}``.

Every road builds DPZero on a small linear regression from one privacy
value and trains it some way: with batches drawn some way, a loss, a
wrapper or a second estimator around it, on ``make_step`` or the docs'
``tx.update`` loop. What its plan does not account must be refused when
the step is first traced or the state made, before any release.
"""

import json
import sys
import warnings

import jax.numpy as jnp
import numpy as np
import optax
from optax import contrib

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


def _tx(privacy=PRIVACY, around=lambda tx: tx):
  est = zoprivacy.dpzero(privacy, smoothing=1e-3)
  return around(optax.chain(est, optax.sgd(1e-3)))


def _train(privacy, batches, *, loss=LOSS, steps=2):
  """Two steps of ``make_step`` from ``zoprivacy.init``'s state: the
  epsilon the state reports and the plan's description."""
  tx = _tx(privacy)
  step = zoprivacy.make_step(tx, loss)
  w = jnp.zeros(D)
  state = zoprivacy.init(tx, w)
  for t in range(steps):
    w, state = step(w, state, batches(t))
  plan = zoprivacy.find_plan(state)
  return f"epsilon {zoprivacy.epsilon(state):.4f}; {plan.describe()}"


def _make_step(around):
  """``make_step`` on ``tx.init``'s state: the step checks it when traced."""
  tx, w = _tx(around=around), jnp.zeros(D)
  step = zoprivacy.make_step(tx, LOSS)
  w, state = step(w, tx.init(w), _padded(PRIVACY.sampler())(0))
  return f"epsilon {zoprivacy.epsilon(state):.4f}"


def _manual(around, init):
  """The docs' own loop with ``tx.update``, from ``init(tx, params)``."""
  tx, w = _tx(around=around), jnp.zeros(D)
  state, sampler = init(tx, w), PRIVACY.sampler()
  for t in range(2):
    batch = zoprivacy.padded_batch((X, Y), sampler.batch_indices(t))
    updates, state = tx.update(w, state, w, batched_loss=LOSS, batch=batch)
    w = optax.apply_updates(w, updates)
  return f"epsilon {zoprivacy.epsilon(state):.4f}"


def _padded(sampler):
  return lambda t: zoprivacy.padded_batch((X, Y), sampler.batch_indices(t))


def _mean_subtracted(w, b):
  losses = LOSS(w, b)
  return losses - losses.mean()  # one example moves every other's loss


MULTI_STEPS = lambda tx: optax.MultiSteps(tx, 2)  # noqa: E731
TWO = lambda tx: optax.chain(zoprivacy.dpzero(PRIVACY), tx)  # noqa: E731
TX_INIT = lambda tx, w: tx.init(w)  # noqa: E731
MECHANIZE = contrib.mechanize  # keeps the initial parameters in its state
LOOKAHEAD = lambda tx: optax.lookahead(tx, 2, 0.5)  # noqa: E731


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
  "a batch-mean loss": lambda: _train(
    PRIVACY, _padded(PRIVACY.sampler()), loss=_mean_subtracted
  ),
  "the docs' tx.update loop": lambda: _manual(lambda tx: tx, zoprivacy.init),
  "tx.init alone, tx.update": lambda: _manual(lambda tx: tx, TX_INIT),
  "MultiSteps, make_step": lambda: _make_step(MULTI_STEPS),
  "MultiSteps, zoprivacy.init": lambda: _manual(MULTI_STEPS, zoprivacy.init),
  "MultiSteps, tx.init": lambda: _manual(MULTI_STEPS, TX_INIT),
  "two estimators, make_step": lambda: _make_step(TWO),
  "two estimators, zoprivacy.init": lambda: _manual(TWO, zoprivacy.init),
  "two estimators, tx.init": lambda: _manual(TWO, TX_INIT),
  "mechanize, make_step": lambda: _make_step(MECHANIZE),
  "mechanize, zoprivacy.init": lambda: _manual(MECHANIZE, zoprivacy.init),
  "lookahead around, make_step": lambda: _make_step(LOOKAHEAD),
  "lookahead after, zoprivacy.init": lambda: _manual(
    lambda tx: optax.chain(tx, LOOKAHEAD(optax.sgd(1e-3))), zoprivacy.init
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
