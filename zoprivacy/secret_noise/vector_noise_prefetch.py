"""Exact vector noise off the timing path: steps drawn ahead of time.

The rejection sampler of :mod:`zoprivacy.secret_noise.vector_discrete_noise`
does more work for larger noise values. Drawn inside the jitted step, its
running time would be part of the step's time. Here the noise of step
``t`` is a pure function of ``(plan-bound key, sigma, size, t)``
(:func:`~zoprivacy.secret_noise.vector_discrete_noise.draw_step`), so it can be
drawn before the step asks for it:

* :class:`VectorNoiseSource` serves step ``t`` from memory and starts
  drawing steps ``t + 1 .. t + ahead`` in background threads; it holds at
  most ``ahead + 1`` (default 3) vectors of ``int32[size]`` (12 MB at a
  million coordinates). A step that was not prefetched (the first one, a
  jump, a resumed run) is drawn on demand: the same values, only later.
* :func:`draw_in_jit` is the step's host callback: a cache lookup and one
  copy. Lowered for the CPU it is ``jax.experimental.buffer_callback``,
  which writes the noise into the output buffer in place; elsewhere it is
  ``jax.pure_callback``. Under ``vmap`` (one key per trial, an audit) each
  row is drawn on demand.

The step's time still includes waiting for a step the sampler has not
finished; when the sampler keeps up (its draw is shorter than the step) it
never waits. The first step after a start, a resume or new keys has
nothing prefetched: :func:`recording` collects the draws a step makes when
it is traced (``jax.jit(step).trace(...)``), and :func:`predraw` draws them
for a state's next step, before the step runs.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import threading
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.secret_noise import host_callback, vector_discrete_noise

AHEAD = 2  # steps drawn ahead of the one served
THREAD_NAME = "zoprivacy-vector-noise-prefetch"
_CACHE_SIZE = 8
_sources: collections.OrderedDict = collections.OrderedDict()
_lock = threading.Lock()


@functools.partial(
  jax.tree_util.register_dataclass,
  data_fields=("key", "step"),
  meta_fields=("path",),
)
@dataclasses.dataclass(frozen=True)
class NoiseStep:
  """The noise key of a step, as a key that does not change from step to
  step (bound to the plan: the estimator's key folded with the plan's
  fingerprint) and the step. Passed where a per-step key would be, it
  makes the exact vector noise prefetchable. ``path``: the :meth:`part`
  indices folded in since (static)."""

  key: jax.Array
  step: jax.Array
  path: tuple[int, ...] = ()

  def _replace(self, **changes) -> NoiseStep:
    """A copy with ``changes`` (as a NamedTuple's ``_replace``)."""
    return dataclasses.replace(self, **changes)

  def part(self, index: int) -> NoiseStep:
    """The key of the ``index``-th independent release of the same step
    (e.g. GEP's two parts): a distinct step-independent key."""
    return NoiseStep(
      jax.random.fold_in(self.key, index), self.step, (*self.path, int(index))
    )


class VectorDraw(NamedTuple):
  """One exact vector draw of a step, as traced: the :meth:`NoiseStep.part`
  path from the estimator's plan-bound key, the integer sigma, the size."""

  path: tuple[int, ...]
  sigma: int
  size: int


_recording: list[list[VectorDraw]] = []


@contextlib.contextmanager
def recording():
  """Collects the :class:`VectorDraw` of every :func:`draw_in_jit` traced
  inside the block (trace the step in it: ``jax.jit(step).trace(...)``)."""
  draws: list[VectorDraw] = []
  _recording.append(draws)
  try:
    yield draws
  finally:
    _recording.remove(draws)


def noise_step(state) -> NoiseStep:
  """The :class:`NoiseStep` of an estimator state's current step: its
  secret ``noise_key`` folded with the plan's fingerprint words (as
  :func:`zoprivacy.estimators.base.step_keys` binds it), and its step."""
  key = state.noise_key
  for word in state.privacy_plan.fingerprint_words():
    key = jax.random.fold_in(key, word)
  return NoiseStep(key, state.step)


class VectorNoiseSource:
  """Serves ``draw_step(words, sigma, size, t)`` with steps drawn ahead."""

  def __init__(self, words, sigma: int, size: int, *, ahead: int = AHEAD):
    self.words = np.asarray(words, np.uint32).reshape(-1).copy()
    self.sigma = vector_discrete_noise.check_sigma(sigma)
    self.size = int(size)
    self.ahead = int(ahead)
    self.draws = 0  # sampler calls (on demand and prefetched)
    self.waits = 0  # steps that found their draw still under way
    self._ready: dict[int, np.ndarray] = {}
    self._pending: dict[int, threading.Thread] = {}
    self._errors: dict[int, BaseException] = {}
    self._lock = threading.Lock()

  def draw_now(self, step: int) -> np.ndarray:
    """The noise of ``step``, drawn now (counted in :attr:`draws`)."""
    with self._lock:
      self.draws += 1
    return vector_discrete_noise.draw_step(
      self.words, self.sigma, self.size, int(step)
    )

  def _fill(self, step: int) -> None:
    try:
      values = self.draw_now(step)
    except Exception as error:  # pylint: disable=broad-except
      with self._lock:
        self._errors[step] = error
      return
    with self._lock:
      self._ready[step] = values

  def prefetch(self, step: int) -> None:
    """Starts drawing ``step`` in the background (if not under way)."""
    step = int(step)
    with self._lock:
      if step in self._ready or step in self._pending or step < 0:
        return
      thread = threading.Thread(
        target=self._fill, args=(step,), name=THREAD_NAME, daemon=True
      )
      self._pending[step] = thread
    thread.start()

  def join(self, step: int) -> None:
    """Waits for the background draw of ``step``, if one is under way."""
    with self._lock:
      thread = self._pending.get(int(step))
    if thread is not None:
      thread.join()

  def draw(self, step: int) -> np.ndarray:
    """The noise of ``step``: the prefetched vector, or drawn on demand.

    Starts steps ``step + 1 .. step + ahead`` in the background and drops
    what lies outside ``step .. step + ahead`` (memory: at most ``ahead +
    1`` vectors). Kept until the next step, so several devices asking for
    the same step get the same vector.
    """
    step = int(step)
    with self._lock:
      thread = self._pending.get(step)
      if thread is not None and thread.is_alive():
        self.waits += 1
    if thread is not None:
      thread.join()
    with self._lock:
      error = self._errors.pop(step, None)
      values = self._ready.get(step)
      for table in (self._ready, self._pending, self._errors):
        for old in [s for s in table if not step <= s <= step + self.ahead]:
          del table[old]
    if error is not None:
      raise error
    if values is None:  # not prefetched: drawn now, before any later step
      values = self.draw_now(step)
      with self._lock:
        self._ready[step] = values
    for later in range(step + 1, step + 1 + self.ahead):
      self.prefetch(later)
    return values


def source_for(words, sigma: int, size: int) -> VectorNoiseSource:
  """The cached source of ``(key words, sigma, size)`` (LRU, 8 entries)."""
  index = (np.asarray(words, np.uint32).tobytes(), int(sigma), int(size))
  with _lock:
    source = _sources.get(index)
    if source is None:
      source = VectorNoiseSource(words, sigma, size)
      _sources[index] = source
      while len(_sources) > _CACHE_SIZE:
        _sources.popitem(last=False)
    _sources.move_to_end(index)
  return source


def _host_draw(sigma, size, words, t) -> np.ndarray:
  """``int32[batch..., size]``: each (key words, step) pair's noise."""
  words, t = np.asarray(words, np.uint32), np.asarray(t)
  if words.ndim == 1 and t.ndim == 0:  # a training step
    return source_for(words, sigma, size).draw(int(t))
  batch = np.broadcast_shapes(words.shape[:-1], t.shape)
  flat_words = np.broadcast_to(words, batch + words.shape[-1:])
  flat_words = flat_words.reshape(-1, words.shape[-1])
  flat_t = np.broadcast_to(t, batch).reshape(-1)
  rows = [
    vector_discrete_noise.draw_step(w, sigma, size, int(s))
    for w, s in zip(flat_words, flat_t)
  ]
  return np.stack(rows).reshape(batch + (size,))


def draw_in_jit(noise: NoiseStep, sigma: int, size: int) -> jax.Array:
  """``int32[size]``: the exact noise of ``noise.step`` under
  ``noise.key``, from the prefetching source (see the module)."""
  sigma = vector_discrete_noise.check_sigma(sigma)
  for draws in _recording:
    draws.append(VectorDraw(noise.path, sigma, int(size)))
  shape = jax.ShapeDtypeStruct((int(size),), jnp.int32)
  return host_callback.draw_on_host(
    functools.partial(_host_draw, sigma, int(size)),
    shape,
    noise.key,
    noise.step,
  )
