"""Public data for the public-data-assisted estimators (PAZO, DPMD, DOPE-SGD, GEP).

Public data is not private: public gradients are first order (``jax.grad``
of the mean public loss), neither clipped nor noised. They arrive as keyword
extra arguments of ``update``:

* ``public_batch=``: one public batch (PAZO-M, DPMD, DOPE-SGD, GEP);
* ``public_batches=``: ``k`` public batches stacked along a new leading axis
  of every leaf (PAZO-P, PAZO-S), i.e. leaves of shape ``[k, b', ...]``;
* ``public_loss=`` (optional): ``(params, public_batch) -> scalar``. Without
  it the public loss is the mean of the private loss form over the public
  batch, and the public batch must have the private batch's structure.
"""

from __future__ import annotations

import jax
import jax.flatten_util
import jax.numpy as jnp

from zoprivacy.core import linalg
from zoprivacy.estimators import base


def public_loss_fn(args: base.LossArgs):
  """``(params, public_batch) -> scalar`` mean public loss."""
  extra_args = args.extra
  public_loss = extra_args.get("public_loss")
  if public_loss is not None:
    return public_loss
  return lambda params, batch: jnp.mean(args.loss(params, batch))


def shape_error(what: str, detail: str) -> ValueError:
  return ValueError(f"{what}: {detail}")


def check_like_private(public, private, *, stacked: bool, what: str) -> None:
  """A public batch fed to the private loss must look like the private batch."""
  pub_leaves, pub_def = jax.tree.flatten(public)
  priv_leaves, priv_def = jax.tree.flatten(private)
  if pub_def != priv_def:
    raise shape_error(
      what,
      f"its structure {pub_def} differs from the private batch's "
      f"{priv_def}; pass public_loss=(params, public_batch) -> scalar for "
      "public data of another form.",
    )
  skip = 2 if stacked else 1
  for pub, priv in zip(pub_leaves, priv_leaves):
    if jnp.shape(pub)[skip:] != jnp.shape(priv)[1:]:
      raise shape_error(
        what,
        f"a leaf has per-example shape {jnp.shape(pub)[skip:]} but the "
        f"private batch's has {jnp.shape(priv)[1:]}.",
      )


def get_public_batch(args: base.LossArgs):
  extra_args = args.extra
  public_batch = extra_args.get("public_batch")
  if public_batch is None:
    raise ValueError(
      "This estimator needs one public batch: pass public_batch= to update() "
      "(a pytree like the private batch, leading axis b')."
    )
  if not jax.tree.leaves(public_batch):
    raise ValueError("public_batch has no array leaves.")
  if extra_args.get("public_loss") is None:
    check_like_private(
      public_batch, args.batch, stacked=False, what="public_batch"
    )
  return public_batch


def get_public_batches(args: base.LossArgs, k: int):
  """``public_batches``: every leaf stacked ``[k, b', ...]``; checked here."""
  extra_args = args.extra
  public_batches = extra_args.get("public_batches")
  if public_batches is None:
    hint = (
      " (got public_batch=; stack k batches along a new leading axis "
      "and pass them as public_batches=)"
      if extra_args.get("public_batch") is not None
      else ""
    )
    raise ValueError(
      f"This estimator needs k={k} public batches: pass public_batches= to "
      f"update(), a pytree whose leaves have leading axis k{hint}."
    )
  leaves = jax.tree.leaves(public_batches)
  if not leaves:
    raise ValueError("public_batches has no array leaves.")
  for leaf in leaves:
    shape = jnp.shape(leaf)
    if len(shape) < 1 or shape[0] != k:
      raise shape_error(
        "public_batches",
        f"every leaf needs leading axis k={k} (the "
        f"stacked batches), got a leaf of shape {shape}.",
      )
  if extra_args.get("public_loss") is None:
    check_like_private(
      public_batches, args.batch, stacked=True, what="public_batches"
    )
  return public_batches


def public_gradient(public_loss, params, public_batch):
  """One first-order public gradient ``grad (1/b') sum f(x; xi')``.

  One forward and one backward pass over the public batch (PAZO Table 6,
  "public for+backward"). No clipping or noise: the data are public.
  """
  return jax.grad(public_loss)(params, public_batch)


def public_batch_gradient(args: base.LossArgs, params):
  """The gradient of the mean public loss on ``public_batch=`` (checked)."""
  return public_gradient(public_loss_fn(args), params, get_public_batch(args))


def public_gradients(public_loss, params, public_batches):
  """``k`` public gradients, one per stacked batch; leading axis ``k``.

  PAZO Alg. 2/3 line 4: ``k`` forward+backward passes, vectorized with
  ``vmap`` (the ``k`` gradients are kept anyway; on CPU a sequential
  ``lax.map`` of convolution gradients measured 4-5x slower).
  """
  return jax.vmap(lambda b: public_gradient(public_loss, params, b))(
    public_batches
  )


def flatten_stacked(stacked):
  """Stacked pytree ``[k, ...]`` -> ``([k, d] float32 matrix, unravel)``."""
  first = jax.tree.map(lambda x: x[0], stacked)
  _, unravel = jax.flatten_util.ravel_pytree(first)
  flat = jax.vmap(lambda t: jax.flatten_util.ravel_pytree(t)[0])(stacked)
  return flat.astype(jnp.float32), unravel


def public_subspace(gradients, orthonormalize: bool = True):
  """PAZO-P's ``G``: ``k`` public gradients (ortho)normalized, leading axis ``k``.

  ``orthonormalize=True`` (PAZO-P): ``G^T G = I_k`` by QR with the sign fix.
  ``orthonormalize=False`` (PAZO-P'): only each column normalized.
  Returned as a pytree shaped like ``params`` with a leading axis ``k``.
  """
  flat, unravel = flatten_stacked(gradients)
  k, dim = flat.shape
  if orthonormalize:
    if k > dim:
      raise ValueError(
        f"Cannot orthonormalize k={k} public gradients in dimension {dim}; "
        "use fewer public batches or orthonormalize=False."
      )
    basis = linalg.orthonormalize_rows(flat)
  else:
    basis = linalg.normalize_rows(flat)
  dtype = jax.tree.leaves(gradients)[0].dtype
  return jax.vmap(unravel)(basis.astype(dtype))


def combine(weight_a, tree_a, tree_b):
  """``w a + (1 - w) b`` leaf-wise, in each leaf's dtype."""
  return jax.tree.map(
    lambda a, b: (
      weight_a * a.astype(jnp.float32)
      + (1.0 - weight_a) * b.astype(jnp.float32)
    ).astype(b.dtype),
    tree_a,
    tree_b,
  )


def require_params(params):
  if params is None:
    raise ValueError("Public-data-assisted estimators need params in update().")
