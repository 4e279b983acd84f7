"""Small dense linear-algebra primitives shared by the estimators.

Orthonormal bases by QR with the sign fix (Mezzadri 2007): multiplying each
column of ``Q`` by the sign of ``R``'s matching diagonal entry makes the
factorization unique, so a QR of a Gaussian matrix is Haar-distributed
(Noisy-ZOGD eq. (3)) and a QR of public gradients is their Gram-Schmidt basis
(PAZO-P Alg. 2 line 5, GEP's anchor subspace).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def orthonormalize_rows(matrix: jax.Array) -> jax.Array:
  """Orthonormal rows spanning ``matrix``'s rows: QR with the sign fix.

  ``Q R = matrix^T`` (reduced); each column of ``Q`` is multiplied by the
  sign of ``R``'s matching diagonal entry, so ``R`` has a nonnegative
  diagonal and row ``j`` of the result is the Gram-Schmidt vector of rows
  ``1..j`` (row 1 is ``matrix[0] / ||matrix[0]||``).
  """
  q, r = jnp.linalg.qr(matrix.T, mode="reduced")
  signs = jnp.sign(jnp.diagonal(r))
  signs = jnp.where(signs == 0, 1.0, signs)
  return (q * signs[None, :]).T


def normalize_rows(matrix: jax.Array) -> jax.Array:
  """Rows scaled to unit L2 norm (a zero row stays zero)."""
  norms = jnp.linalg.norm(matrix, axis=1, keepdims=True)
  return matrix / jnp.maximum(norms, jnp.finfo(matrix.dtype).tiny)
