"""DPZero's synthetic quadratic (Sec. 5, App. B.1), vectorized over a grid.

Problem (DPZero App. B.1): ``F_S(x) = 1/(2n) sum_i (x - x_i)^T A (x - x_i)``
with every coordinate of ``x_i`` drawn from ``N(1, 1)``, ``n = 10000`` train
and ``10000`` test examples, and one of three diagonal Hessians
(``HESSIANS``) of effective rank ``d``, ``sqrt(d)`` and ``log d``.

Methods, each one step of the matching ``zoprivacy`` estimator written for
this loss and vmapped over a ``stepsize x clip`` grid:

* DPZero (Alg. 2; ``zoprivacy.dpzero``): a public direction ``u``
  (:mod:`zoprivacy.zo.directions`), per-example finite differences clipped by
  :func:`zoprivacy.mechanisms.clipping.clip_scalars`, one scalar of Gaussian
  noise from :class:`zoprivacy.mechanisms.noise.GaussianMechanism`;
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

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.mechanisms import clipping
from zoprivacy.mechanisms import noise as mechanisms

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
