"""The first step's exact noise is drawn before the step, never in it.

After a start, a resume or new noise keys nothing is prefetched yet. The
scalar source's :meth:`ExactNoiseSource.warm` and
:func:`zoprivacy.secret_noise.predraw.predraw` draw that step ahead, in a
background thread and waited for, so the step itself (whose time is
observable) only copies its noise. Each sampler call records the thread it
ran in: a draw outside the prefetch threads is a draw inside the step (on
the caller's thread, or on the thread of the step's host callback).
Vector noise is drawn by the host sampler here (``sampler="host"``): the
default device sampler draws inside the jitted step in constant time, and
a traced step records nothing for it to predraw (the last test).
"""

import threading

import jax
import jax.numpy as jnp
import numpy as np

import zoprivacy
from configs import default
from experiments.run import train
from zoprivacy.secret_noise import exact_noise, predraw
from zoprivacy.secret_noise import vector_discrete_mechanism as vdm
from zoprivacy.secret_noise import vector_discrete_noise as vdn
from zoprivacy.secret_noise import vector_noise_prefetch as vnp

MAIN = threading.main_thread().name
PREFETCH = (exact_noise.THREAD_NAME, vnp.THREAD_NAME)


def _in_step(seen):
  return [step for step, name in seen if name not in PREFETCH]


def _record_scalar_draws(monkeypatch):
  seen = []
  real = exact_noise.ExactNoiseSource.draw_now

  def recording(self, step):
    seen.append((int(step), threading.current_thread().name))
    return real(self, step)

  monkeypatch.setattr(exact_noise.ExactNoiseSource, "draw_now", recording)
  return seen


def _record_vector_draws(monkeypatch):
  """Host-sampled vector draws (the sampler set to 'host' for the test)."""
  monkeypatch.setattr(vdm, "DEFAULT_SAMPLER", "host")
  seen = []
  real = vdn.draw_step

  def recording(words, sigma, size, step):
    seen.append((int(step), threading.current_thread().name))
    return real(words, sigma, size, step)

  monkeypatch.setattr(vdn, "draw_step", recording)
  return seen


def _dpzero():
  return zoprivacy.dpzero(
    clip=1.0,
    noise_multiplier=1.0,
    smoothing=1e-3,
    expected_batch_size=8,
    dataset_size=100,
  )


def test_a_warmed_scalar_source_serves_its_first_step_from_memory(
  monkeypatch,
):
  seen = _record_scalar_draws(monkeypatch)
  plan = zoprivacy.find_plan(_dpzero().init(jnp.zeros(3)))
  cold = zoprivacy.ExactNoiseSource(plan, bytes(32))
  first = cold.draw(70)
  assert seen == [(70, MAIN)]  # the control: drawn on demand, in the step
  seen.clear()
  warm = zoprivacy.ExactNoiseSource(plan, bytes(32))
  warm.warm(70)
  count = len(seen)
  assert count >= 64 and _in_step(seen) == []
  assert np.array_equal(warm.draw(70), first)  # the same noise
  assert np.array_equal(warm.draw(71), cold.draw_now(71))
  assert _in_step(seen[:count] + seen[count + 1 :]) == []


def _loss(p, x):
  return jnp.sum((x - p) ** 2)


def test_library_predraw_draws_the_next_step_of_a_state(monkeypatch):
  """Scalar (the update's own host draw) and vector (dp_sgd) exact noise:
  after ``predraw`` the step draws nothing on its own thread."""
  scalar = _record_scalar_draws(monkeypatch)
  vector = _record_vector_draws(monkeypatch)
  batch = jnp.linspace(-1, 1, 24).reshape(8, 3)
  dp_sgd = zoprivacy.dp_sgd(
    clip=1.0, noise_multiplier=1.0, expected_batch_size=8
  )
  for tx in (_dpzero(), dp_sgd):
    state = zoprivacy.refresh_noise_keys(zoprivacy.init(tx, jnp.zeros(3)))
    kwargs = {"per_example_loss": _loss, "batch": batch}
    params = jnp.zeros(3)
    update = jax.jit(
      lambda s, tx=tx, p=params, kw=kwargs: tx.update(None, s, p, **kw)
    )
    with vnp.recording() as draws:
      update.trace(state)
    predraw.predraw(state, draws)
    assert _in_step(scalar + vector) == []
    jax.block_until_ready(update(state))
    assert {s for s, _ in scalar + vector} >= {0}
    assert _in_step(scalar + vector) == []
  assert draws and draws[0].path == () and draws[0].size == 3


def _dp_sgd_update():
  """A fresh dp_sgd state and its jitted update on a fixed batch."""
  tx = zoprivacy.dp_sgd(clip=1.0, noise_multiplier=1.0, expected_batch_size=8)
  state = zoprivacy.refresh_noise_keys(zoprivacy.init(tx, jnp.zeros(3)))
  batch = jnp.linspace(-1, 1, 24).reshape(8, 3)
  update = jax.jit(
    lambda s: tx.update(
      None, s, jnp.zeros(3), per_example_loss=_loss, batch=batch
    )
  )
  return state, update


def test_without_predraw_the_first_step_draws_its_own_noise(monkeypatch):
  """The control: the same dp_sgd step, nothing drawn ahead."""
  vector = _record_vector_draws(monkeypatch)
  state, update = _dp_sgd_update()
  jax.block_until_ready(update(state))
  assert _in_step(vector) == [0]


def test_the_runner_draws_no_noise_inside_its_first_step(monkeypatch, tmp_path):
  """The default run (exact scalar noise drawn by the runner) and dp_sgd
  (exact vector noise, drawn by the step's callback): every draw of the
  first steps runs in a background thread."""
  scalar = _record_scalar_draws(monkeypatch)
  vector = _record_vector_draws(monkeypatch)
  for name in ("dpzero", "dp_sgd"):
    c = default.get_config()
    c.update(num_steps=3, eval_every=0, checkpoint_every=0, workdir="")
    c.privacy.update(target_epsilon=None, noise_multiplier=2.0)
    if name != "dpzero":
      c.estimator, c.estimator_kwargs = name, {}
    train.train(c, progress=False)
  assert {s for s, _ in scalar} >= {0, 1, 2}
  assert {s for s, _ in vector} >= {0, 1, 2}
  assert _in_step(scalar + vector) == []


def test_device_sampled_vector_noise_needs_no_predraw(monkeypatch):
  """The default: dp_sgd's exact vector noise is drawn on the device, in
  the step; a traced step records no host draw and the host sampler never
  runs, so ``predraw`` has nothing to draw for it."""
  seen = []
  real = vdn.draw_step

  def recording(words, sigma, size, step):
    seen.append(int(step))
    return real(words, sigma, size, step)

  monkeypatch.setattr(vdn, "draw_step", recording)
  assert vdm.DEFAULT_SAMPLER == "device"
  state, update = _dp_sgd_update()
  with vnp.recording() as draws:
    update.trace(state)
  assert draws == []
  predraw.predraw(state, draws)
  updates, _ = update(state)
  assert np.all(np.isfinite(np.asarray(updates)))
  assert seen == []
