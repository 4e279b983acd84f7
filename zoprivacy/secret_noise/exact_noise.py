"""Host-side exact noise for the discrete mechanisms.

The noise of a step does not depend on the data. Two routes reach the same
draws:

* by default, the jitted update of an exact-noise estimator calls this
  sampler through a host callback
  (:func:`zoprivacy.secret_noise.host_noise.draw_in_jit`) with the estimator's
  secret noise key and the step: the user passes no extra argument;
* a runner may draw the noise itself, ahead of the step, and pass it as the
  extra argument ``discrete_noise=`` (an ``int32[q]`` array).
  :meth:`ExactNoiseSource.for_state` gives the same draws as the callback.

The draws are exact (Canonne, Kamath, Steinke 2020; see
:mod:`zoprivacy.secret_noise.discrete_noise`) and keyed: step ``t`` reads a
SHAKE-256 stream keyed by ``(secret, "discrete_noise", plan fingerprint,
t)``: the same secret gives the same noise, so a step must never be
computed twice over other inputs from one secret. The runner gives each
computation of a step the secret of its attempt
(:func:`zoprivacy.privacy.randomness.attempt_secret`; the replay rule of
its ledger); a library state's session key gets a fresh secret for a step
computed again (:mod:`zoprivacy.privacy.noise_sessions`). A run resumed
under a changed plan (see :meth:`~zoprivacy.privacy.PrivacyPlan.
fingerprint`) gets independent noise. The secret comes from OS entropy
unless an insecure test seed was asked for.

Timing. The exact samplers' running time depends on the value drawn (a
large ``|Y|`` needs more uniform draws). So that a step's time does not
reveal its noise, the source draws steps in blocks of ``block_size`` ahead
of time: a background thread fills block ``k + 1`` while the steps of block
``k`` are served from memory, at a cost that does not depend on any one
step's noise. :meth:`ExactNoiseSource.warm` draws the block of the first
step after a start or a resume before that step runs.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from zoprivacy.mechanisms import values as mechanisms_accounting
from zoprivacy.privacy import noise_keys, randomness
from zoprivacy.privacy import plan as plan_lib
from zoprivacy.secret_noise import discrete_noise, noise_binding

PURPOSE = "discrete_noise"
THREAD_NAME = "zoprivacy-exact-noise-prefetch"
_LIMIT = 2**30  # |noise| <= 2**30 keeps the integer release in int32 range


@functools.lru_cache(maxsize=64)
def _fingerprint_counter(plan: plan_lib.PrivacyPlan) -> int:
  """The first 63 bits of the plan's fingerprint: a stream counter."""
  return int.from_bytes(plan.fingerprint()[:8], "little") >> 1


class ExactNoiseSource:
  """Draws the integer noise of each step of a discrete plan.

  Args:
    plan: a plan whose ``noise_kind`` is 'discrete'.
    secret: 32 secret bytes (e.g. restored from a checkpoint). ``None``
      draws a fresh one from OS entropy, or derives the reproducible test
      secret when the plan's noise source is 'insecure_test_seed' and
      ``insecure_test_noise_seed`` is given.
    block_size: steps drawn together ahead of time (see the module's
      "Timing"); ``0`` draws each step on demand.
  """

  def __init__(
    self,
    plan: plan_lib.PrivacyPlan,
    secret: bytes | None = None,
    *,
    insecure_test_noise_seed: int | None = None,
    block_size: int = 64,
  ):
    if plan.noise_kind != "discrete":
      raise ValueError(
        f"ExactNoiseSource needs a discrete plan, got {plan.mechanism!r}."
      )
    if insecure_test_noise_seed is not None and plan.is_private:
      raise ValueError(
        "This plan promises secret noise from OS entropy; a reproducible "
        "test seed would void it. Build the estimator with the same "
        "insecure_test_noise_seed so that its plan says NOT PRIVATE."
      )
    if secret is None:
      if insecure_test_noise_seed is not None:
        secret = randomness.insecure_test_secret(insecure_test_noise_seed)
      else:
        secret = randomness.new_secret()
    self.secret = randomness.check_secret(secret)
    self.plan = plan
    self._fingerprint = _fingerprint_counter(plan)
    self.block_size = int(block_size)
    self._blocks: dict[int, np.ndarray] = {}
    self._pending: dict[int, threading.Thread] = {}
    self._errors: dict[int, BaseException] = {}
    self._last: int | None = None
    self._lock = threading.Lock()

  @classmethod
  def for_state(cls, state, **kwargs) -> ExactNoiseSource:
    """The source whose draws equal the ones an estimator's jitted update
    adds by itself: keyed by the noise key in ``state`` (an optimizer state
    holding exactly one exact-noise estimator, however wrapped); for a
    session key, the key that the next computation of the state's step
    will get in this process (its later steps too, until a step is
    computed again)."""
    (est,) = noise_binding.estimator_states(state)
    plan = est.privacy_plan
    key = noise_keys.explicit_key(est)
    words = np.asarray(noise_binding.key_words(key))
    return cls(plan, randomness.secret_from_key_data(words), **kwargs)

  @property
  def integer_scale(self) -> float:
    """Each query's discrete Gaussian sigma / discrete Laplace scale, in
    grid units."""
    return self.plan.integer_noise_scale

  def draw_now(self, step: int) -> np.ndarray:
    """The ``int32[num_queries]`` noise of step ``step``, drawn now."""
    stream = randomness.KeyedStream(
      self.secret, PURPOSE, self._fingerprint, int(step)
    )
    size = self.plan.num_queries
    if isinstance(self.plan.mechanism, mechanisms_accounting.DiscreteGaussian):
      values = discrete_noise.discrete_gaussian_noise(
        self.integer_scale, size, stream
      )
    else:
      values = discrete_noise.discrete_laplace_noise(
        self.integer_scale, size, stream
      )
    values = np.asarray(values, np.int64)
    if np.any(np.abs(values) > _LIMIT):
      raise OverflowError("Integer noise exceeds the int32 range.")
    return values.astype(np.int32)

  def _fill(self, block: int) -> None:
    first = block * self.block_size
    try:
      values = np.stack(
        [self.draw_now(t) for t in range(first, first + self.block_size)]
      )
    except Exception as error:  # pylint: disable=broad-except
      with self._lock:
        self._errors[block] = error
      return
    with self._lock:
      self._blocks[block] = values

  def _start(self, block: int) -> None:
    """Starts drawing ``block`` in the background (caller holds the lock)."""
    if block in self._blocks or block in self._pending or block < 0:
      return
    thread = threading.Thread(
      target=self._fill, args=(block,), name=THREAD_NAME, daemon=True
    )
    self._pending[block] = thread
    thread.start()

  def draw(self, step: int) -> np.ndarray:
    """The ``int32[num_queries]`` noise of step ``step``.

    Served from the prefetched block of ``step``; asking for a step starts
    the background draw of the next block, and blocks two or more behind
    are dropped. A source asked for a step that does not follow the last
    one it served, and not prefetched, draws that step alone on demand (a
    fresh source, or one key per trial in an audit): blocks are drawn only
    for a source that steps forward.
    """
    step = int(step)
    block = step // max(self.block_size, 1)
    with self._lock:
      warm = self._last is not None and step == self._last + 1
      self._last = step
      ready = block in self._blocks or block in self._pending
      if self.block_size > 0 and (warm or ready):
        self._start(block)
        self._start(block + 1)
        thread = self._pending.get(block)
      else:
        thread = False
    if thread is False:
      return self.draw_now(step)
    if thread is not None:
      thread.join()
    with self._lock:
      self._pending.pop(block, None)
      if block in self._errors:
        raise self._errors.pop(block)
      values = self._blocks.get(block)
      for old in [b for b in self._blocks if b < block - 1 or b > block + 1]:
        del self._blocks[old]
    if values is None:  # dropped by a concurrent caller far from this step
      return self.draw_now(step)
    return values[step - block * self.block_size].copy()

  def warm(self, step: int) -> None:
    """Draws the block of ``step`` now and waits for it (the next block
    starts in the background): ``draw(step)`` is then served from memory,
    like every later step, instead of being drawn inside the step."""
    if self.block_size <= 0:
      return
    block = int(step) // self.block_size
    with self._lock:
      self._start(block)
      self._start(block + 1)
      thread = self._pending.get(block)
    if thread is not None:
      thread.join()

  def prefetch(self, step: int) -> None:
    """Starts drawing the block of ``step`` now, in the background."""
    if self.block_size > 0:
      with self._lock:
        self._start(int(step) // self.block_size)
