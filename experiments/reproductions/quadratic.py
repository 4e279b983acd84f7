"""DPZero's synthetic quadratic (Sec. 5, App. B.1), vectorized over a grid.

Problem (DPZero App. B.1): ``F_S(x) = 1/(2n) sum_i (x - x_i)^T A (x - x_i)``
with every coordinate of ``x_i`` drawn from ``N(1, 1)``, ``n = 10000`` train
and ``10000`` test examples, and one of three diagonal Hessians
(``HESSIANS``) of effective rank ``d``, ``sqrt(d)`` and ``log d``.

Methods, each one step of the matching ``zoprivacy`` estimator written for
this loss and vmapped over a ``stepsize x clip`` grid:

* DPZero (Alg. 2; ``zoprivacy.dpzero``): a public direction ``u``
  (:mod:`zoprivacy.directions`), per-example finite differences clipped by
  :func:`zoprivacy.clipping.clip_scalars`, one scalar of Gaussian noise from
  :class:`zoprivacy.mechanisms.GaussianMechanism`;
* DPGD-0th (Alg. 1; ``zoprivacy.dpgd_zeroth``): the same per-example vectors
  ``fd_i u`` clipped in L2, which for vectors parallel to ``u`` is exactly
  ``clip_scalars(fd_i, C / ||u||) u`` (the identity the estimator uses), and
  ``d``-dimensional Gaussian noise from the same mechanism;
* DP-GD (``zoprivacy.dp_sgd`` at ``p = 1``): per-example gradients
  ``A (x - x_i)`` clipped in L2 with weights ``clip_scalars(||g_i||, C) /
  ||g_i||`` (clipping a vector along itself clips its norm), and
  ``d``-dimensional Gaussian noise.

Why the specialized form is exact and cheap. For a quadratic the symmetric
difference has no smoothing error: ``(f(x+lu; x_i) - f(x-lu; x_i)) / (2l) =
u^T A (x - x_i)`` for every ``l``, so Table 6's ``lambda = 1e-4`` changes
nothing (and evaluating it in float32 would only add cancellation error).
Writing ``r = x - mean_i(x_i)`` and ``e_i = x_i - mean``, the per-example
scalar is ``(A u)^T r - (A u)^T e_i``. The projections ``p_t = E (A u_t)``
(``E`` the centred ``n x d`` data) depend on public directions only, so they
are computed for all steps at once as one matrix product ``E (A U^T)``
(``n x T``) and shared by every grid point, by both zeroth-order methods and
by every iteration count (all runs use the same direction sequence). A step
of a grid point then costs ``O(n + d)``. DP-GD needs, per grid point, the
per-example norms ``||A(r - e_i)||^2 = ||A r||^2 - 2 (A^2 r)^T e_i +
||A e_i||^2`` and the clipped sum ``A (sum_i w_i r - E^T w)``: two ``n x d x
K`` matrix products per step for ``K`` grid points instead of ``K`` per-example
gradient matrices of ``n x d`` each.

The per-step functions (``dpzero_step``, ``dpgd_zeroth_step``, ``dp_gd_step``)
take the direction and the noise key explicitly; ``tests/reproduce`` checks
them against ``zoprivacy.dpzero``, ``zoprivacy.dpgd_zeroth`` and
``zoprivacy.dp_sgd`` driven with the same keys.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy import clipping, directions, mechanisms

# Effective-rank modes of DPZero App. B.1 (a), (b), (c). ||A||_2 = 1, so the
# effective rank Tr(A)/||A||_2 is Tr(A).
HESSIANS = {
  "rank_d": "A = I (effective rank d)",
  "rank_sqrt_d": "A = diag(1/sqrt(i)) (effective rank O(sqrt d))",
  "rank_log_d": "A = diag(1/i) (effective rank O(log d))",
}
METHODS = ("dpzero", "dpgd_zeroth", "dp_gd")
METHOD_LABELS = {
  "dpzero": "DPZero",
  "dpgd_zeroth": "DPGD-0th",
  "dp_gd": "DP-GD",
}


def hessian_diagonal(mode: str, dim: int) -> np.ndarray:
  """The diagonal of ``A`` for one effective-rank mode (App. B.1 (a)-(c))."""
  i = np.arange(1, dim + 1, dtype=np.float64)
  if mode == "rank_d":
    a = np.ones(dim)
  elif mode == "rank_sqrt_d":
    a = 1.0 / np.sqrt(i)
  elif mode == "rank_log_d":
    a = 1.0 / i
  else:
    raise ValueError(
      f"Unknown Hessian mode {mode!r}; choose one of {tuple(HESSIANS)}."
    )
  return a.astype(np.float32)


class Problem(NamedTuple):
  """One ``(mode, d)`` instance: centred data and its summaries.

  ``E`` is the centred train data ``x_i - mean``; the test set enters only
  through its mean and the constant of its loss.
  """

  a: jax.Array  # [d] Hessian diagonal
  train_mean: jax.Array  # [d]
  centred: jax.Array  # [n, d] x_i - train_mean
  sq_norms: jax.Array  # [n] ||A e_i||^2 (DP-GD)
  train_const: float  # mean_i e_i^T A e_i / 2
  test_mean: jax.Array  # [d]
  test_const: float  # same for the test set
  num_train: int


def make_problem(
  mode: str,
  dim: int,
  *,
  num_train: int = 10000,
  num_test: int = 10000,
  seed: int = 0,
) -> Problem:
  """Draws train and test data ``x_i ~ N(1, I_d)`` (App. B.1), float32."""
  rng = np.random.default_rng([seed, dim])
  train = rng.normal(1.0, 1.0, size=(num_train, dim)).astype(np.float32)
  test = rng.normal(1.0, 1.0, size=(num_test, dim)).astype(np.float32)
  a = hessian_diagonal(mode, dim)
  train_mean = train.mean(axis=0, dtype=np.float64)
  test_mean = test.mean(axis=0, dtype=np.float64)
  centred = (train - train_mean).astype(np.float32)
  test_centred = test - test_mean
  train_quad = np.einsum("ij,j,ij->i", centred.astype(np.float64), a, centred)
  test_quad = np.einsum("ij,j,ij->i", test_centred, a, test_centred)
  sq_norms = np.einsum(
    "ij,j,ij->i",
    centred.astype(np.float64),
    a.astype(np.float64) ** 2,
    centred,
  )
  return Problem(
    a=jnp.asarray(a),
    train_mean=jnp.asarray(train_mean, jnp.float32),
    centred=jnp.asarray(centred),
    sq_norms=jnp.asarray(sq_norms, jnp.float32),
    train_const=float(0.5 * train_quad.mean()),
    test_mean=jnp.asarray(test_mean, jnp.float32),
    test_const=float(0.5 * test_quad.mean()),
    num_train=num_train,
  )


def initial_point(dim: int) -> jax.Array:
  """``x_0 = 0`` (App. B.1 does not state it; the data mean is ``1``)."""
  return jnp.zeros([dim], jnp.float32)


# ---------------------------------------------------------------------------
# One step of each method, for one grid point (vmapped over the grid below).
# ``r`` is ``x - train_mean``. ``n`` divides the noisy sum: with p = 1 the
# expected batch size is n (DPZero Alg. 1/2 line 3: (1/n) sum_i ... + z).


def dpzero_step(r, clip, noise_multiplier, *, au, proj, noise_key, n):
  """DPZero Alg. 2 line 3 for one grid point: the noisy mean scalar.

  ``au = A u`` and ``proj = E (A u)``, so ``au @ r - proj`` are the exact
  per-example finite differences ``u^T A (x - x_i)``.
  """
  fd = jnp.dot(au, r) - proj  # [n]
  clipped = clipping.clip_scalars(fd, clip)
  mech = mechanisms.GaussianMechanism(
    clip=clip, noise_multiplier=noise_multiplier
  )
  noisy = mech.add_noise(noise_key, jnp.sum(clipped))
  return noisy / n


def dpgd_zeroth_step(
  r, clip, noise_multiplier, *, au, proj, u, u_norm, noise_key, n
):
  """DPGD-0th Alg. 1 line 3 for one grid point (returns the noisy mean)."""
  fd = jnp.dot(au, r) - proj
  # L2 clip of fd_i u == clip of the scalar fd_i at C / ||u|| (vector_zo.py).
  clipped = clipping.clip_scalars(fd, clip / u_norm)
  mech = mechanisms.GaussianMechanism(
    clip=clip, noise_multiplier=noise_multiplier
  )
  noisy = mech.add_noise(noise_key, jnp.sum(clipped) * u)
  return noisy / n


def dp_gd_weights(sq_norms, clip):
  """Per-example clip factors ``min(1, C / ||g_i||)`` via ``clip_scalars``.

  A vector clipped in L2 along itself: ``clip_C(g) = clip_scalars(||g||, C) /
  ||g|| * g`` (``0`` for a zero gradient, which contributes nothing).
  """
  norms = jnp.sqrt(jnp.maximum(sq_norms, 0.0))
  safe = jnp.where(norms > 0, norms, 1.0)
  return jnp.where(norms > 0, clipping.clip_scalars(norms, clip) / safe, 1.0)


def dp_gd_noise(clipped_sum, clip, noise_multiplier, noise_key, n):
  mech = mechanisms.GaussianMechanism(
    clip=clip, noise_multiplier=noise_multiplier
  )
  return mech.add_noise(noise_key, clipped_sum) / n


# ---------------------------------------------------------------------------
# Runs over a grid.


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


def _make_zeroth_runner(method: str):

  @jax.jit
  def run(
    r0,
    stepsizes,
    clips,
    noise_multiplier,
    dirs,
    proj,
    a,
    noise_key,
    num_steps,
  ):
    n = proj.shape[1]

    def body(t, r):
      grads = zeroth_order_grads(
        method,
        r,
        clips,
        noise_multiplier,
        u=dirs[t],
        proj=proj[t],
        a=a,
        noise_key=jax.random.fold_in(noise_key, t),
        n=n,
      )
      return r - stepsizes[:, None] * grads

    return jax.lax.fori_loop(0, num_steps, body, r0)

  return run


def _make_dp_gd_runner():

  @jax.jit
  def run(
    r0,
    stepsizes,
    clips,
    noise_multiplier,
    centred,
    sq_norms,
    a,
    noise_key,
    num_steps,
  ):

    def body(t, r):
      grads = dp_gd_grads(
        r,
        clips,
        noise_multiplier,
        centred=centred,
        sq_norms=sq_norms,
        a=a,
        noise_key=jax.random.fold_in(noise_key, t),
      )
      return r - stepsizes[:, None] * grads

    return jax.lax.fori_loop(0, num_steps, body, r0)

  return run


_RUNNERS = {
  "dpzero": _make_zeroth_runner("dpzero"),
  "dpgd_zeroth": _make_zeroth_runner("dpgd_zeroth"),
  "dp_gd": _make_dp_gd_runner(),
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
  clipped *sum* over the clip (the convention of ``zoprivacy.mechanisms``).
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
  if method == "dp_gd":
    r = _RUNNERS[method](
      r0,
      ss,
      cc,
      sigma,
      problem.centred,
      problem.sq_norms,
      problem.a,
      noise_key,
      num_steps,
    )
  elif method in ("dpzero", "dpgd_zeroth"):
    if dirs is None or dirs.dirs.shape[0] < num_steps:
      raise ValueError(
        "Zeroth-order runs need prepare_directions() output "
        f"covering {num_steps} steps."
      )
    r = _RUNNERS[method](
      r0,
      ss,
      cc,
      sigma,
      dirs.dirs,
      dirs.proj,
      problem.a,
      noise_key,
      num_steps,
    )
  else:
    raise ValueError(f"Unknown method {method!r}; choose one of {METHODS}.")
  shape = (stepsizes.size, clips.size)
  metrics = [
    np.asarray(m, np.float64).reshape(shape) for m in _metrics(problem, r)
  ]
  metrics = [np.where(np.isfinite(m), m, np.inf) for m in metrics]
  return GridResult(*metrics)
