"""Fresh randomness for every computation of a step: the attempt rule.

The write-ahead ledger records the step ranges the run reserved
(:mod:`experiments.run.run_ledger`). The *attempt* of step ``t``, when it is
about to be computed, is the number of earlier ranges that hold it: 0 for a
step never reserved, 1 for a step reserved before a kill or a forced resume,
and so on. Attempt ``k`` draws everything secret from
``attempt_secret(run secret, k)``
(:func:`zoprivacy.privacy.randomness.attempt_secret`):

* the Poisson (or without-replacement) batch: the sampler's secret;
* the runner's exact integer noise (:class:`ExactNoiseSource`);
* every estimator's noise key in the optimizer state
  (:func:`zoprivacy.secret_noise.bind_noise_secret`): the floating-point
  noise, the exact noise an update draws by itself and the exact vector
  noise, whatever the step (the generic chain, the layer-wise step,
  Noisy-ZOGD).

A replay is then a fresh, independent subsampled step, charged as one; two
computations of a step never share noise over different sums, nor a batch.
Attempt 0 is the run secret itself, so a run that is never killed is
unchanged, bit for bit. Every process derives the same attempt from the
same ledger (process 0's, shared at start-up), hence the same randomness.

The loop splits its reservations where the attempt changes
(:meth:`~experiments.run.run_ledger.WriteAheadLedger.attempt`), so a block has
one attempt; :meth:`StepRandomness.use` rebinds when it changes, and draws
the first step's noise before that step runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax

from experiments.run.batches import make_sampler
from zoprivacy.privacy import randomness
from zoprivacy.secret_noise import (
  ExactNoiseSource,
  bind_noise_secret,
  vector_noise_prefetch,
)
from zoprivacy.secret_noise import predraw as predraw_lib

if TYPE_CHECKING:
  from experiments.run.settings import Settings


def sampler_for(settings: Settings, task, spec, secret: bytes, plan):
  """The run's batch sampler (``settings`` bound to the task's training
  set), drawing from ``secret`` the batches ``plan`` accounts."""
  return make_sampler(
    settings, secret, task.sampling_schemes, spec=spec, plan=plan
  )


def noise_source_for(plan, secret: bytes):
  """The runner's exact noise source for ``plan`` (None unless its noise is
  exact scalar noise), drawing from ``secret``."""
  if plan.noise_kind != "discrete":
    return None
  return ExactNoiseSource(
    plan, randomness.derive(secret, "exact noise", num_bytes=32)
  )


def rebind(opt_state, secret: bytes, placement):
  """``opt_state`` with its estimators' noise keys derived from ``secret``,
  each new key placed as the key it replaces."""
  fresh = bind_noise_secret(opt_state, secret)
  return jax.tree.map(
    lambda old, new: new if new is old else placement.like(new, old),
    opt_state,
    fresh,
  )


class StepRandomness:
  """The sampler, exact noise source and noise keys of the attempt being
  computed (see the module)."""

  def __init__(self, run):
    self.run = run
    self.attempt = None  # the state's keys may be any attempt's: rebind
    self.sampler = run.sampler
    self.noise_source = run.noise_source
    self.vector_draws = None  # the exact vector draws of the traced step
    self._predraw = False

  def use(self, attempt: int, state: dict, step: int) -> dict:
    """``state`` whose noise keys are those of ``attempt``; the sampler
    and the noise source too. On a change, the noise of ``step`` is drawn
    now (:meth:`before_step` finishes the vector noise)."""
    if attempt == self.attempt:
      return state
    run = self.run
    secret = randomness.attempt_secret(run.secret, attempt)
    if attempt != 0 or self.attempt is not None:
      sampler = sampler_for(run.settings, run.task, run.spec, secret, run.plan)
      sampler.capacity = max(sampler.capacity, self.sampler.capacity)
      self.sampler = sampler
      self.noise_source = noise_source_for(run.plan, secret)
    self.attempt = attempt
    if self.noise_source is not None:
      self.noise_source.warm(step)
    self._predraw = run.plan.noise_kind == "discrete_vector"
    opt_state = rebind(state["opt_state"], secret, run.placement)
    return dict(state, opt_state=opt_state)

  def before_step(self, step_fn, args) -> None:
    """Draws the exact vector noise of the next step (after a start or
    new keys) before it runs; the step is traced once to learn its
    draws."""
    if not self._predraw:
      return
    self._predraw = False
    if self.vector_draws is None:
      trace = getattr(step_fn, "trace", None)
      if trace is None:  # not a jitted step: drawn in the step, as before
        return
      with vector_noise_prefetch.recording() as draws:
        trace(*args)
      self.vector_draws = tuple(draws)
    predraw_lib.predraw(args[2], self.vector_draws, in_jit_scalar=False)
