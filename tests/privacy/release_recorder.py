"""Records every step the runner computes: release, noise, batch, attempt.

:func:`install` patches the loop of :mod:`experiments.run.loop` so that each
computed step hands ``sink`` one dict: the step, its attempt, the process,
the released values, the exact integer noise the step received (None
without one) and a digest of the sampled batch (its indices). Used by the
composition audit's worker (a file sink, kept through a SIGKILL) and by the
in-process replay tests.
"""

import hashlib

import jax
import numpy as np

from experiments.run import loop, multihost
from zoprivacy.privacy import noise_keys


def install(monkeypatch, sink, launch: int = 0, after=None) -> None:
  """Patches the loop (``monkeypatch``: a pytest fixture, or None to patch
  for good, in a worker process); ``after(record)`` runs after ``sink``."""
  real_inputs, real_one_step = loop.step_inputs, loop.Loop._one_step
  seen = {}

  def inputs(run, t, draws=None):
    batch, public, noise = real_inputs(run, t, draws)
    drawn = draws.sampler.batch_indices(t)
    chosen = np.sort(np.asarray(drawn.indices)[np.asarray(drawn.mask)])
    seen[t] = (
      None if noise is None else multihost.fetch(noise).tolist(),
      hashlib.sha256(chosen.tobytes()).hexdigest(),
      int(chosen.size),
    )
    return batch, public, noise

  def one_step(self, step, t, last):
    params = real_one_step(self, step, t, last)
    (est,) = noise_keys.estimator_states(self.state["opt_state"])
    noise, batch, size = seen.pop(t)
    record = {
      "launch": launch,
      "process": jax.process_index(),
      "step": t,
      "attempt": self.randomness.attempt,
      "released": multihost.fetch(est.released).tolist(),
      "noise": noise,
      "batch": batch,
      "batch_size": size,
    }
    sink(record)
    if after is not None:
      after(record)
    return params

  if monkeypatch is None:
    loop.step_inputs, loop.Loop._one_step = inputs, one_step
  else:
    monkeypatch.setattr(loop, "step_inputs", inputs)
    monkeypatch.setattr(loop.Loop, "_one_step", one_step)
