"""DPZero's quadratic: every method run over a (step size, clip) grid at once.

The problem, the per-step updates and the paper's constants are in
:mod:`experiments.reproductions.quadratic`; this module vectorizes whole
runs over the grid (``vmap``) and returns their final-iterate metrics.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from experiments.reproductions.quadratic import (
  METHODS,
  Problem,
  dp_gd_noise,
  dp_gd_weights,
  dpgd_zeroth_step,
  dpzero_step,
  initial_point,
)
from zoprivacy.zo import directions


@dataclasses.dataclass(frozen=True)
class GridResult:
  """Final-iterate metrics for every ``(stepsize, clip)`` of one run."""

  test_grad_norm: np.ndarray  # [S, C]
  train_grad_norm: np.ndarray
  train_loss: np.ndarray
  test_loss: np.ndarray


def direction_matrix(
  key, dim: int, num_steps: int, distribution: str = "sphere"
) -> jax.Array:
  """``[T, d]`` public directions, step ``t`` drawn from ``fold_in(key, t)``.

  ``sphere``: uniform on ``sqrt(d) S^{d-1}`` (DPZero Alg. 1/2 line 2);
  ``gaussian``: ``N(0, I_d)`` (what DPZero's Sec. 5 experiments used).
  """
  sampler = directions.get_sampler(distribution)
  zeros = jnp.zeros([dim], jnp.float32)
  keys = jax.vmap(lambda t: jax.random.fold_in(key, t))(jnp.arange(num_steps))
  return jax.lax.map(lambda k: sampler(k, zeros), keys, batch_size=256)


@jax.jit
def projections(centred, a, dirs):
  """``[T, n]`` per-step projections ``E (A u_t)``: one matrix product."""
  return (dirs * a[None, :]) @ centred.T


def _metrics(problem: Problem, r):
  """Train/test gradient norms and losses at ``x = train_mean + r``."""
  a = problem.a
  r_test = r + (problem.train_mean - problem.test_mean)
  return (
    jnp.linalg.norm(a * r_test, axis=-1),
    jnp.linalg.norm(a * r, axis=-1),
    0.5 * jnp.sum(a * r * r, axis=-1) + problem.train_const,
    0.5 * jnp.sum(a * r_test * r_test, axis=-1) + problem.test_const,
  )


def zeroth_order_grads(
  method: str, r, clips, noise_multiplier, *, u, proj, a, noise_key, n
):
  """Privatized gradient estimates ``[K, d]`` of one step for ``K`` points.

  ``r``: [K, d]; ``u``: the step's direction; ``proj = E (A u)``. All grid
  points share ``u`` and the noise key (common random numbers).
  """
  au = a * u
  if method == "dpgd_zeroth":
    u_norm = jnp.sqrt(jnp.sum(jnp.square(u)))
    return jax.vmap(
      lambda rk, c: dpgd_zeroth_step(
        rk,
        c,
        noise_multiplier,
        au=au,
        proj=proj,
        u=u,
        u_norm=u_norm,
        noise_key=noise_key,
        n=n,
      )
    )(r, clips)
  if method == "dpzero":
    scalars = jax.vmap(
      lambda rk, c: dpzero_step(
        rk,
        c,
        noise_multiplier,
        au=au,
        proj=proj,
        noise_key=noise_key,
        n=n,
      )
    )(r, clips)
    return scalars[:, None] * u[None, :]
  raise ValueError(f"Unknown zeroth-order method {method!r}.")


def dp_gd_grads(r, clips, noise_multiplier, *, centred, sq_norms, a, noise_key):
  """DP-GD's privatized full-batch gradients ``[K, d]`` for ``K`` points."""
  n = centred.shape[0]
  a2 = a * a
  # Per-example squared norms ||A (r_k - e_i)||^2 for all k: [n, K].
  cross = centred @ (a2[:, None] * r.T)
  sq = jnp.sum(a2 * r * r, axis=1)[None, :] - 2.0 * cross + sq_norms[:, None]
  w = jax.vmap(dp_gd_weights, in_axes=(1, 0), out_axes=1)(sq, clips)
  # Clipped sums sum_i w_i A (r_k - e_i) = A (sum_i w_i r_k - E^T w_k): [K, d].
  wsum = jnp.sum(w, axis=0)
  clipped_sum = a[None, :] * (wsum[:, None] * r - (centred.T @ w).T)
  return jax.vmap(
    lambda g, c: dp_gd_noise(g, c, noise_multiplier, noise_key, n)
  )(clipped_sum, clips)


def _make_runner(grads_at):
  """A jitted run of ``num_steps`` privatized gradient steps from ``r0``
  (``[K, d]``, one row a grid point, each with its step size and clip).
  ``grads_at(t, r, clips, noise_multiplier, data, noise_key)`` gives step
  ``t``'s gradients ``[K, d]``, ``data`` being the method's inputs
  (:func:`_method_inputs`) and ``noise_key`` already folded with ``t``."""

  @jax.jit
  def run(r0, stepsizes, clips, noise_multiplier, data, noise_key, num_steps):
    def body(t, r):
      step_key = jax.random.fold_in(noise_key, t)
      grads = grads_at(t, r, clips, noise_multiplier, data, step_key)
      return r - stepsizes[:, None] * grads

    return jax.lax.fori_loop(0, num_steps, body, r0)

  return run


def _zeroth_grads_at(method: str):
  """``method``'s step gradients for :func:`_make_runner`, on ``data`` =
  (directions ``[T, d]``, projections ``[T, n]``, Hessian diagonal)."""

  def grads_at(t, r, clips, noise_multiplier, data, noise_key):
    dirs, proj, a = data
    return zeroth_order_grads(
      method,
      r,
      clips,
      noise_multiplier,
      u=dirs[t],
      proj=proj[t],
      a=a,
      noise_key=noise_key,
      n=proj.shape[1],
    )

  return grads_at


def _dp_gd_grads_at(t, r, clips, noise_multiplier, data, noise_key):
  """DP-GD's step gradients for :func:`_make_runner`, on ``data`` =
  (centred data, their squared norms, Hessian diagonal); ``t`` unused."""
  del t
  centred, sq_norms, a = data
  return dp_gd_grads(
    r,
    clips,
    noise_multiplier,
    centred=centred,
    sq_norms=sq_norms,
    a=a,
    noise_key=noise_key,
  )


_RUNNERS = {
  "dpzero": _make_runner(_zeroth_grads_at("dpzero")),
  "dpgd_zeroth": _make_runner(_zeroth_grads_at("dpgd_zeroth")),
  "dp_gd": _make_runner(_dp_gd_grads_at),
}


class Directions(NamedTuple):
  dirs: jax.Array  # [T_max, d]
  proj: jax.Array  # [T_max, n]


def prepare_directions(
  problem: Problem, num_steps: int, key, distribution: str = "sphere"
) -> Directions:
  dim = problem.a.shape[0]
  dirs = direction_matrix(key, dim, num_steps, distribution)
  chunks = [
    projections(problem.centred, problem.a, dirs[s : s + 1024])
    for s in range(0, num_steps, 1024)
  ]
  return Directions(dirs, jnp.concatenate(chunks, axis=0))


def _method_inputs(method: str, problem: Problem, num_steps: int, dirs):
  """The arrays ``method``'s runner takes (one tuple) between the noise
  multiplier and the noise key: the centred data for DP-GD, the directions
  for the zeroth-order methods (each with the Hessian ``problem.a``)."""
  if method == "dp_gd":
    return problem.centred, problem.sq_norms, problem.a
  if method in ("dpzero", "dpgd_zeroth"):
    if dirs is None or dirs.dirs.shape[0] < num_steps:
      raise ValueError(
        "Zeroth-order runs need prepare_directions() output "
        f"covering {num_steps} steps."
      )
    return dirs.dirs, dirs.proj, problem.a
  raise ValueError(f"Unknown method {method!r}; choose one of {METHODS}.")


def run_grid(
  method: str,
  problem: Problem,
  *,
  num_steps: int,
  stepsizes,
  clips,
  noise_multiplier: float,
  noise_key,
  dirs: Directions | None = None,
) -> GridResult:
  """Runs ``method`` for ``num_steps`` at every ``(stepsize, clip)`` pair.

  All grid points share the direction sequence and the standard-normal noise
  draws of each step (common random numbers); each is a valid run of the
  method on its own. ``noise_multiplier`` is the std of the noise on the
  clipped *sum* over the clip (the convention of
  ``zoprivacy.mechanisms.noise``).
  """
  stepsizes = np.asarray(stepsizes, np.float32)
  clips = np.asarray(clips, np.float32)
  ss, cc = np.meshgrid(stepsizes, clips, indexing="ij")
  ss, cc = jnp.asarray(ss.ravel()), jnp.asarray(cc.ravel())
  dim = problem.a.shape[0]
  r0 = jnp.broadcast_to(
    initial_point(dim) - problem.train_mean, (ss.shape[0], dim)
  )
  sigma = jnp.float32(noise_multiplier)
  data = _method_inputs(method, problem, num_steps, dirs)
  r = _RUNNERS[method](r0, ss, cc, sigma, data, noise_key, num_steps)
  shape = (stepsizes.size, clips.size)
  metrics = [
    np.asarray(m, np.float64).reshape(shape) for m in _metrics(problem, r)
  ]
  metrics = [np.where(np.isfinite(m), m, np.inf) for m in metrics]
  return GridResult(*metrics)
