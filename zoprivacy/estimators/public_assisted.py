"""Public-data-assisted private estimators: PAZO-M/P/S and the first-order baselines.

Zeroth-order methods of Gong & Li, "Private Zeroth-Order Optimization with
Public Data" (PAZO), and the first-order public-data baselines it compares
with. Every method is a composition of the shared primitives:

* public directions / keys: :mod:`zoprivacy.directions`;
* loss queries at perturbed parameters: :mod:`zoprivacy.queries`;
* per-example clipping: :mod:`zoprivacy.clipping`;
* masked sums and noise: :mod:`zoprivacy.mechanisms`;
* state, keys, extra arguments, privacy: :mod:`zoprivacy.estimators.base`.

==============  ==========================================  ===================
factory         update returned (optax convention, minimised)  privatized part
==============  ==========================================  ===================
``pazo_m``      ``a g_pub + (1 - a) g~/q``  (Alg. 1 l. 13)     ``q`` scalars
``pazo_p``      ``g~/q = (1/q) sum_j s_j G u_j`` (Alg. 2)      ``q`` scalars
``pazo_s``      ``g_{j*}`` (Alg. 3 l. 15; sgd(eta) follows)    ``k(+1)`` losses
``dpmd``        ``a_t g_pub + (1 - a_t) g_dpsgd``             DP-SGD sum
``dope_sgd``    ``g_pub + (sum clip(g_i - g_pub) + N) / B``   residual sum
``gep``         ``V (e + N_0)/B + (r + N_1)/B``               embedding, residual
==============  ==========================================  ===================

Public data is not private: public gradients are first order (``jax.grad``
of the mean public loss), neither clipped nor noised. They arrive as keyword
extra arguments of ``update``:

* ``public_batch=``: one public batch (PAZO-M, DPMD, DOPE-SGD, GEP);
* ``public_batches=``: ``k`` public batches stacked along a new leading axis
  of every leaf (PAZO-P, PAZO-S), i.e. leaves of shape ``[k, b', ...]``;
* ``public_loss=`` (optional): ``(params, public_batch) -> scalar``. Without
  it the public loss is the mean of the private loss form over the public
  batch, and the public batch must have the private batch's structure.

Privacy: every method releases, per step, one Gaussian mechanism on a
Poisson-sampled private batch (``p = B/n``). PAZO's ``q`` (or ``k + 1``)
queries on one batch each get noise variance ``q C^2 sigma^2``, which is
exactly one Gaussian with ``noise_multiplier`` sigma (Dong et al. 2022
Cor. 3.3; ``docs/conventions.md`` §5), so ``privacy.step_event()`` is
``PoissonSampled(p, Gaussian(sigma))`` whatever ``q`` or ``k``. GEP's two
noises compose the same way (:class:`GEPMechanism`).
"""

from __future__ import annotations

import dataclasses
import math

import dp_accounting
import jax
import jax.flatten_util
import jax.numpy as jnp

from zoprivacy import clipping, mechanisms, queries, validation
from zoprivacy import directions as directions_lib
from zoprivacy.estimators import base, registry, scalar_zo
from zoprivacy.estimators.dp_sgd import dp_sgd as _dp_sgd

_FD = "finite_difference"  # PAZO clips the finite difference (conventions §2).


# ----------------------------------------------------------------- public data


def _public_loss(args: base.LossArgs):
  """``(params, public_batch) -> scalar`` mean public loss."""
  extra_args = args.extra
  public_loss = extra_args.get("public_loss")
  if public_loss is not None:
    return public_loss
  return lambda params, batch: jnp.mean(args.loss(params, batch))


def _shape_error(what: str, detail: str) -> ValueError:
  return ValueError(f"{what}: {detail}")


def _check_like_private(public, private, *, stacked: bool, what: str) -> None:
  """A public batch fed to the private loss must look like the private batch."""
  pub_leaves, pub_def = jax.tree.flatten(public)
  priv_leaves, priv_def = jax.tree.flatten(private)
  if pub_def != priv_def:
    raise _shape_error(
      what,
      f"its structure {pub_def} differs from the private batch's "
      f"{priv_def}; pass public_loss=(params, public_batch) -> scalar for "
      "public data of another form.",
    )
  skip = 2 if stacked else 1
  for pub, priv in zip(pub_leaves, priv_leaves):
    if jnp.shape(pub)[skip:] != jnp.shape(priv)[1:]:
      raise _shape_error(
        what,
        f"a leaf has per-example shape {jnp.shape(pub)[skip:]} but the "
        f"private batch's has {jnp.shape(priv)[1:]}.",
      )


def _get_public_batch(args: base.LossArgs):
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
    _check_like_private(
      public_batch, args.batch, stacked=False, what="public_batch"
    )
  return public_batch


def _get_public_batches(args: base.LossArgs, k: int):
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
      raise _shape_error(
        "public_batches",
        f"every leaf needs leading axis k={k} (the "
        f"stacked batches), got a leaf of shape {shape}.",
      )
  if extra_args.get("public_loss") is None:
    _check_like_private(
      public_batches, args.batch, stacked=True, what="public_batches"
    )
  return public_batches


def public_gradient(public_loss, params, public_batch):
  """One first-order public gradient ``grad (1/b') sum f(x; xi')``.

  One forward and one backward pass over the public batch (PAZO Table 6,
  "public for+backward"). No clipping or noise: the data are public.
  """
  return jax.grad(public_loss)(params, public_batch)


def public_gradients(public_loss, params, public_batches):
  """``k`` public gradients, one per stacked batch; leading axis ``k``.

  PAZO Alg. 2/3 line 4: ``k`` forward+backward passes, vectorized with
  ``vmap`` (the ``k`` gradients are kept anyway; on CPU a sequential
  ``lax.map`` of convolution gradients measured 4-5x slower).
  """
  return jax.vmap(lambda b: public_gradient(public_loss, params, b))(
    public_batches
  )


def _flatten_stacked(stacked):
  """Stacked pytree ``[k, ...]`` -> ``([k, d] float32 matrix, unravel)``."""
  first = jax.tree.map(lambda x: x[0], stacked)
  _, unravel = jax.flatten_util.ravel_pytree(first)
  flat = jax.vmap(lambda t: jax.flatten_util.ravel_pytree(t)[0])(stacked)
  return flat.astype(jnp.float32), unravel


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


def public_subspace(gradients, orthonormalize: bool = True):
  """PAZO-P's ``G``: ``k`` public gradients (ortho)normalized, leading axis ``k``.

  ``orthonormalize=True`` (PAZO-P): ``G^T G = I_k`` by QR with the sign fix.
  ``orthonormalize=False`` (PAZO-P'): only each column normalized.
  Returned as a pytree shaped like ``params`` with a leading axis ``k``.
  """
  flat, unravel = _flatten_stacked(gradients)
  k, dim = flat.shape
  if orthonormalize:
    if k > dim:
      raise ValueError(
        f"Cannot orthonormalize k={k} public gradients in dimension {dim}; "
        "use fewer public batches or orthonormalize=False."
      )
    basis = orthonormalize_rows(flat)
  else:
    basis = normalize_rows(flat)
  dtype = jax.tree.leaves(gradients)[0].dtype
  return jax.vmap(unravel)(basis.astype(dtype))


def _combine(weight_a, tree_a, tree_b):
  """``w a + (1 - w) b`` leaf-wise, in each leaf's dtype."""
  return jax.tree.map(
    lambda a, b: (
      weight_a * a.astype(jnp.float32)
      + (1.0 - weight_a) * b.astype(jnp.float32)
    ).astype(b.dtype),
    tree_a,
    tree_b,
  )


# --------------------------------------------- privatized two-point queries


def _zo_common(
  *,
  clip,
  noise_multiplier,
  smoothing,
  expected_batch_size,
  dataset_size,
  num_queries,
  neighboring,
  direction_prng,
  insecure_test_noise_seed,
  exact_noise=False,
  grid_points=1024,
):
  smoothing = validation.positive_or_traced("smoothing", smoothing)
  validation.one_of("direction_prng", direction_prng, directions_lib.PRNG_IMPLS)
  privacy = base.privacy_spec(
    clip=clip,
    noise_multiplier=noise_multiplier,
    expected_batch_size=expected_batch_size,
    dataset_size=dataset_size,
    num_queries=num_queries,
    neighboring=neighboring,
    exact_noise=exact_noise,
    grid_points=grid_points,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )
  return (
    privacy.mechanism,
    privacy,
    smoothing,
    privacy.mechanism.num_queries,
    privacy.expected_batch_size,
  )


def _require_params(params):
  if params is None:
    raise ValueError("Public-data-assisted estimators need params in update().")


# ------------------------------------------------------------------- PAZO-M


def pazo_m(
  *,
  clip: float,
  noise_multiplier: float,
  smoothing: float,
  expected_batch_size: float,
  alpha: float,
  dataset_size: int | None = None,
  num_queries: int = 1,
  directions: str = "sphere_quarter",
  neighboring: str = "add_or_remove",
  direction_key=0,
  insecure_test_noise_seed: int | None = None,
  direction_prng: str = "threefry",
  exact_noise: bool = False,
  grid_points: int = 1024,
) -> base.PrivateEstimator:
  """PAZO-M (PAZO Alg. 1): mix the public gradient with private DPZero.

  Lines 5-12: ``g~ = sum_{j=1}^q ((1/b) sum_i clip_C((f(x + l u_j; xi_i) -
  f(x - l u_j; xi_i)) / (2l)) + z_j) u_j`` with ``z_j ~ (1/b) N(0, q C^2
  sigma^2)`` and ``u_j`` uniform on ``d^{1/4} S^{d-1}`` (App. A.1: then
  ``E||g||^2 ~ ||grad f||^2``, so public and private parts have comparable
  norms). Line 13: the returned update is ``alpha g_pub + (1 - alpha) g~/q``,
  ``g_pub`` the gradient of the mean loss on ``public_batch``.

  Privacy: the public gradient is free; the ``q`` scalars are one Gaussian
  mechanism with ``noise_multiplier`` (each gets std ``sqrt(q) sigma C``),
  Poisson-sampled at ``p = b/n``. Cost (Table 6): ``2q`` private forward
  passes, one public forward+backward.

  Args:
    clip: ``C`` on the per-example finite difference.
    noise_multiplier: ``sigma``.
    smoothing: ``lambda``.
    expected_batch_size: ``b``; the noisy sums are divided by it.
    alpha: mixing coefficient in ``[0, 1]`` (weight of the public gradient).
    dataset_size: ``n``.
    num_queries: ``q``.
    directions: a sampler name; the paper's ``'sphere_quarter'`` by default.
    neighboring: 'add_or_remove' (default) or 'replace_one'.
    key: PRNG key or integer seed for directions and noise.
    direction_prng: 'threefry', 'rbg' or 'unsafe_rbg' for the directions.

  The loss must be per-example: entry ``i`` of ``batched_loss(params,
  batch)`` may depend only on ``params`` and example ``i`` (padding rows
  included), or the sensitivity bound fails; check it with
  :func:`zoprivacy.per_example_check.assert_per_example`. Noise keys are
  secret (OS entropy at ``init``) unless ``insecure_test_noise_seed`` is set.
  """
  alpha = validation.unit_interval("alpha", alpha)
  validation.one_of("directions", directions, directions_lib.DIRECTION_NAMES)
  mechanism, privacy, smoothing, num_queries, expected_batch_size = _zo_common(
    clip=clip,
    noise_multiplier=noise_multiplier,
    smoothing=smoothing,
    expected_batch_size=expected_batch_size,
    dataset_size=dataset_size,
    num_queries=num_queries,
    neighboring=neighboring,
    direction_prng=direction_prng,
    exact_noise=exact_noise,
    grid_points=grid_points,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )
  sampler = directions_lib.get_sampler(directions)

  def compute(params, args, dir_key, noise_key):
    public_batch = _get_public_batch(args)
    query_keys = jax.random.split(dir_key, num_queries)

    def direction(k):
      return sampler(directions_lib.direction_key(k, direction_prng), params)

    scalars = scalar_zo.two_point_scalars(
      loss=args.loss,
      params=params,
      batch=args.batch,
      mask=args.mask,
      direction=direction,
      query_keys=query_keys,
      noise_key=noise_key,
      smoothing=smoothing,
      clip_target=_FD,
      mechanism=mechanism,
      privacy=privacy,
      discrete_noise=args.discrete_noise,
    )
    g_private = scalar_zo.average_of_directions(
      direction, query_keys, scalars, params
    )
    g_pub = public_gradient(_public_loss(args), params, public_batch)
    grad = _combine(alpha, g_pub, g_private)
    return grad, scalars

  return base.build_estimator(
    compute,
    direction_key=direction_key,
    privacy=privacy,
    num_released=num_queries,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )


# ------------------------------------------------------------------- PAZO-P


def pazo_p(
  *,
  clip: float,
  noise_multiplier: float,
  smoothing: float,
  expected_batch_size: float,
  num_public_batches: int,
  orthonormalize: bool = True,
  dataset_size: int | None = None,
  num_queries: int = 1,
  neighboring: str = "add_or_remove",
  direction_key=0,
  insecure_test_noise_seed: int | None = None,
  direction_prng: str = "threefry",
  exact_noise: bool = False,
  grid_points: int = 1024,
) -> base.PrivateEstimator:
  """PAZO-P (PAZO Alg. 2) and PAZO-P' (``orthonormalize=False``).

  Line 4-5: ``G = [g_1, ..., g_k]``, the gradients of ``k`` public batches
  (``public_batches=``, stacked), orthonormalized by QR with the sign fix
  (PAZO-P) or only normalized (PAZO-P'). Lines 6-11: ``u_j`` uniform on
  ``sqrt(k) S^{k-1}`` (the ``'sqrt_dim'`` sphere sampler in ``R^k``), the
  perturbation direction is ``G u_j``, and each of the ``q`` finite
  differences is clipped at ``C`` and gets noise ``(1/b) N(0, q C^2
  sigma^2)``. Line 13: the update is ``g~/q = G ((1/q) sum_j s_j u_j)``,
  which lies in ``span(G)`` by construction.

  Privacy as PAZO-M (one Gaussian with ``noise_multiplier`` per step). Cost
  (Table 6): ``2q`` private forward passes, ``k`` public forward+backward.
  ``G`` is a ``k x d`` matrix in memory.

  Args:
    num_public_batches: ``k``; ``public_batches`` leaves have leading axis k.
    orthonormalize: True for PAZO-P, False for PAZO-P'.
    Others: as :func:`pazo_m`.

  The loss must be per-example: entry ``i`` of ``batched_loss(params,
  batch)`` may depend only on ``params`` and example ``i`` (padding rows
  included), or the sensitivity bound fails; check it with
  :func:`zoprivacy.per_example_check.assert_per_example`. Noise keys are
  secret (OS entropy at ``init``) unless ``insecure_test_noise_seed`` is set.
  """
  k = validation.positive_int("num_public_batches", num_public_batches)
  if not isinstance(orthonormalize, bool):
    raise ValueError(f"orthonormalize must be a bool, got {orthonormalize!r}.")
  mechanism, privacy, smoothing, num_queries, expected_batch_size = _zo_common(
    clip=clip,
    noise_multiplier=noise_multiplier,
    smoothing=smoothing,
    expected_batch_size=expected_batch_size,
    dataset_size=dataset_size,
    num_queries=num_queries,
    neighboring=neighboring,
    direction_prng=direction_prng,
    exact_noise=exact_noise,
    grid_points=grid_points,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )
  coefficient_template = jnp.zeros([k], jnp.float32)

  def coefficients(key):
    """``u ~ Unif(sqrt(k) S^{k-1})`` (Alg. 2 line 7)."""
    return directions_lib.sphere(
      directions_lib.direction_key(key, direction_prng),
      coefficient_template,
      "sqrt_dim",
    )

  def compute(params, args, dir_key, noise_key):
    public_batches = _get_public_batches(args, k)
    query_keys = jax.random.split(dir_key, num_queries)
    basis = public_subspace(
      public_gradients(_public_loss(args), params, public_batches),
      orthonormalize,
    )

    def in_span(c):
      """``G c`` for a coefficient vector ``c`` in ``R^k``."""
      return jax.tree.map(
        lambda g: jnp.tensordot(c.astype(g.dtype), g, axes=1), basis
      )

    scalars = scalar_zo.two_point_scalars(
      loss=args.loss,
      params=params,
      batch=args.batch,
      mask=args.mask,
      direction=lambda kk: in_span(coefficients(kk)),
      query_keys=query_keys,
      noise_key=noise_key,
      smoothing=smoothing,
      clip_target=_FD,
      mechanism=mechanism,
      privacy=privacy,
      discrete_noise=args.discrete_noise,
    )
    mean_coefficients = jnp.mean(
      scalars[:, None] * jax.vmap(coefficients)(query_keys), axis=0
    )
    grad = in_span(mean_coefficients)
    return grad, scalars

  return base.build_estimator(
    compute,
    direction_key=direction_key,
    privacy=privacy,
    num_released=num_queries,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )


# ------------------------------------------------------------------- PAZO-S


def pazo_s(
  *,
  clip: float,
  noise_multiplier: float,
  learning_rate: float,
  expected_batch_size: float,
  num_public_batches: int,
  candidate_noise_scale: float = 0.0,
  extra_candidate: bool = True,
  dataset_size: int | None = None,
  neighboring: str = "add_or_remove",
  direction_key=0,
  insecure_test_noise_seed: int | None = None,
  direction_prng: str = "threefry",
) -> base.PrivateEstimator:
  """PAZO-S (PAZO Alg. 3): select the best public gradient by private loss.

  Lines 4-9: ``k`` public gradients ``g_j`` from ``k`` public batches; each
  candidate step ``x - eta g_j`` is scored by ``f_j = (1/b) sum_i
  clip_C(f(x - eta g_j; xi_i)) + z`` with ``z ~ (1/b) N(0, (k+1) C^2
  sigma^2)``: ``clip`` bounds each per-example *loss value* (NaN -> 0,
  ``+-inf`` -> ``+-C``). Line 10: ``j^ = argmin f_j``. Lines 11-14 (with
  ``extra_candidate``): ``g_{k+1} = g_j^ + z'``, ``z' ~ N(0, s^2 I_d)`` with
  ``s = candidate_noise_scale`` (a perturbation scale, *not* a privacy
  parameter; conventions §6), scored the same way, and ``j* = argmin_{j <=
  k+1} f_j``.

  Returned update: ``g_{j*}``. Line 15 ``x <- x - eta g_{j*}`` is then
  ``optax.chain(pazo_s(learning_rate=eta, ...), optax.sgd(eta))``; the
  candidates are always scored at ``x - learning_rate g_j``, whatever
  optimizer follows. ``state.released`` holds the ``k(+1)`` noisy scores.

  Privacy: ``k + 1`` loss-value queries on one batch, each with noise variance
  ``(k+1) C^2 sigma^2`` (``k`` when ``extra_candidate=False``): one Gaussian
  with ``noise_multiplier`` per step, Poisson-sampled at ``p = b/n``. The
  ``(k+1)``-th query is chosen adaptively from the first ``k`` noisy scores,
  which Gaussian-DP composition allows. Cost (Table 6): ``k + 1`` private
  forward passes, ``k`` public forward+backward.

  Args:
    clip: ``C`` on each per-example loss value.
    noise_multiplier: ``sigma``.
    learning_rate: ``eta`` of the candidate steps ``x - eta g_j``.
    expected_batch_size: ``b``.
    num_public_batches: ``k``.
    candidate_noise_scale: ``s`` (the paper's ``epsilon``), ``>= 0``.
    extra_candidate: whether to add the perturbed candidate ``g_j^ + z'``.
    dataset_size, neighboring, key, direction_prng: as :func:`pazo_m`; the
      PRNG choice applies to ``z'``.

  The loss must be per-example: entry ``i`` of ``batched_loss(params,
  batch)`` may depend only on ``params`` and example ``i`` (padding rows
  included), or the sensitivity bound fails; check it with
  :func:`zoprivacy.per_example_check.assert_per_example`. Noise keys are
  secret (OS entropy at ``init``) unless ``insecure_test_noise_seed`` is set.
  """
  k = validation.positive_int("num_public_batches", num_public_batches)
  learning_rate = validation.positive("learning_rate", learning_rate)
  if not isinstance(extra_candidate, bool):
    raise ValueError(
      f"extra_candidate must be a bool, got {extra_candidate!r}."
    )
  try:
    candidate_noise_scale = float(candidate_noise_scale)
  except (TypeError, ValueError):
    candidate_noise_scale = math.nan
  if not 0.0 <= candidate_noise_scale < math.inf:
    raise ValueError(
      "candidate_noise_scale must be a finite number >= 0 (a "
      "perturbation scale, not a privacy epsilon)."
    )
  num_scores = k + 1 if extra_candidate else k
  mechanism, privacy, _, _, expected_batch_size = _zo_common(
    clip=clip,
    noise_multiplier=noise_multiplier,
    smoothing=1.0,
    expected_batch_size=expected_batch_size,
    dataset_size=dataset_size,
    num_queries=num_scores,
    neighboring=neighboring,
    direction_prng=direction_prng,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )

  def compute(params, args, dir_key, noise_key):
    public_batches = _get_public_batches(args, k)
    candidates_noise_key, extra_noise_key = jax.random.split(noise_key)
    grads = public_gradients(_public_loss(args), params, public_batches)

    def clipped_loss_sum(g):
      """``sum_i clip_C(f(x - eta g; xi_i))``: one private forward pass."""
      losses = args.loss(
        queries.perturb(params, g, -learning_rate), args.batch
      ).astype(jnp.float32)
      return mechanisms.masked_sum(
        clipping.clip_scalars(losses, mechanism.clip), args.mask
      )

    sums = jax.lax.map(clipped_loss_sum, grads)  # [k]
    scores = (
      mechanism.add_noise(candidates_noise_key, sums) / expected_batch_size
    )
    best = jnp.argmin(scores)
    g_best = jax.tree.map(lambda g: g[best], grads)
    if extra_candidate:
      z = directions_lib.gaussian(
        directions_lib.direction_key(dir_key, direction_prng), params
      )
      g_extra = jax.tree.map(
        lambda g, n: g + (candidate_noise_scale * n).astype(g.dtype),
        g_best,
        z,
      )
      extra_score = (
        mechanism.add_noise(extra_noise_key, clipped_loss_sum(g_extra))
        / expected_batch_size
      )
      scores = jnp.concatenate([scores, extra_score[None]])
      take_extra = jnp.argmin(scores) == k
      grad = jax.tree.map(
        lambda e, g: jnp.where(take_extra, e, g), g_extra, g_best
      )
    else:
      grad = g_best
    return grad, scores

  return base.build_estimator(
    compute,
    direction_key=direction_key,
    privacy=privacy,
    num_released=num_scores,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )


# --------------------------------------------------------------------- DPMD


def dpmd_public_weight(step, num_steps: int):
  """DPMD's public weight ``alpha_t = cos(pi t / (2T))``, held at 0 for t >= T."""
  t = jnp.minimum(jnp.asarray(step, jnp.float32), float(num_steps))
  return jnp.cos(jnp.pi * t / (2.0 * num_steps))


def dpmd(
  *,
  clip: float,
  noise_multiplier: float,
  expected_batch_size: float,
  num_steps: int,
  dataset_size: int | None = None,
  neighboring: str = "add_or_remove",
  direction_key=0,
  insecure_test_noise_seed: int | None = None,
) -> base.PrivateEstimator:
  """DPMD (Amid et al. 2022, public-data-assisted mirror descent), first order.

  The first-order form used as PAZO's baseline: ``g_t = alpha_t g_pub + (1 -
  alpha_t) g_priv`` with ``g_priv`` the DP-SGD gradient (per-example clip
  ``C``, noise ``N(0, sigma^2 C^2 I)``, divided by ``b``), ``g_pub`` the
  gradient of the mean loss on ``public_batch`` and ``alpha_t = cos(pi t /
  (2T))`` (:func:`dpmd_public_weight`), ``t`` the estimator's step count and
  ``T = num_steps``: all public at ``t = 0``, all private from ``t = T``.

  Privacy: exactly DP-SGD's (the public gradient is free). Cost (Table 6):
  ``b`` private forward+backward (vmapped), one public forward+backward.

  The loss must be per-example: entry ``i`` of ``batched_loss(params,
  batch)`` may depend only on ``params`` and example ``i`` (padding rows
  included), or the sensitivity bound fails; check it with
  :func:`zoprivacy.per_example_check.assert_per_example`. Noise keys are
  secret (OS entropy at ``init``) unless ``insecure_test_noise_seed`` is set.
  """
  num_steps = validation.positive_int("num_steps", num_steps)
  private = _dp_sgd(
    clip=clip,
    noise_multiplier=noise_multiplier,
    expected_batch_size=expected_batch_size,
    dataset_size=dataset_size,
    neighboring=neighboring,
    direction_key=direction_key,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )

  def update_fn(updates, state, params=None, **extra_args):
    _require_params(params)
    g_private, new_state = private.update(updates, state, params, **extra_args)
    args = base.parse_extra_args(extra_args)
    g_pub = public_gradient(_public_loss(args), params, _get_public_batch(args))
    weight = dpmd_public_weight(state.step, num_steps)
    return _combine(weight, g_pub, g_private), new_state

  return base.PrivateEstimator(private.init, update_fn, private.privacy_plan)


# ----------------------------------------------------------------- DOPE-SGD


def dope_sgd(
  *,
  clip: float,
  noise_multiplier: float,
  expected_batch_size: float,
  dataset_size: int | None = None,
  neighboring: str = "add_or_remove",
  direction_key=0,
  insecure_test_noise_seed: int | None = None,
) -> base.PrivateEstimator:
  """DOPE-SGD's gradient (Nasr et al. 2023): clip around the public gradient.

  ``g = g_pub + (sum_i clip_C(grad f(x; xi_i) - g_pub) + N(0, sigma^2 C^2
  I)) / b``: the clipping origin moves to the public gradient ``g_pub``
  (mean loss on ``public_batch``), which is added back. Adding ``b g_pub``
  to the clipped sum before the noise, as the paper describes, is the same
  release since ``b`` is the *expected* batch size; adding ``g_pub`` once per
  realized example instead would make the sensitivity ``C + ||g_pub||``.
  (Nasr et al.'s synthetic-data augmentation and averaging are not part of
  this gradient.)

  Privacy: sensitivity ``C`` of the residual sum (add/remove; ``2C``
  replace-one), noise std ``sigma C``, ``GaussianDpEvent(sigma)``
  Poisson-sampled at ``p = b/n``. Cost (Table 6): ``b`` private
  forward+backward (vmapped), one public forward+backward.

  The loss must be per-example: entry ``i`` of ``batched_loss(params,
  batch)`` may depend only on ``params`` and example ``i`` (padding rows
  included), or the sensitivity bound fails; check it with
  :func:`zoprivacy.per_example_check.assert_per_example`. Noise keys are
  secret (OS entropy at ``init``) unless ``insecure_test_noise_seed`` is set.
  """
  privacy = base.privacy_spec(
    clip=clip,
    noise_multiplier=noise_multiplier,
    expected_batch_size=expected_batch_size,
    dataset_size=dataset_size,
    neighboring=neighboring,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )
  mechanism, expected_batch_size = (
    privacy.mechanism,
    privacy.expected_batch_size,
  )

  def compute(params, args, dir_key, noise_key):
    g_pub = public_gradient(_public_loss(args), params, _get_public_batch(args))
    loss_one = queries.as_per_example_loss(
      args.per_example_loss, args.batched_loss
    )
    per_example = jax.vmap(jax.grad(loss_one), in_axes=(None, 0))(
      params, args.batch
    )
    residual = jax.tree.map(lambda g, p: g - p[None], per_example, g_pub)
    clipped, _ = clipping.clip_tree_per_example(residual, clip)
    noisy = mechanism.add_noise(
      noise_key, mechanisms.masked_tree_sum(clipped, args.mask)
    )
    grad = jax.tree.map(lambda p, s: p + s / expected_batch_size, g_pub, noisy)
    return grad, base.release_norm(grad)

  return base.build_estimator(
    compute,
    direction_key=direction_key,
    privacy=privacy,
    num_released=1,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )


# ---------------------------------------------------------------------- GEP


@dataclasses.dataclass(frozen=True)
class GEPMechanism:
  """GEP's two Gaussian releases on one batch, accounted as one Gaussian.

  Released: the sum of per-example embeddings clipped at ``C0`` (in the
  ``k``-dim anchor subspace) with noise ``N(0, sigma_0^2 C0^2 I_k)``, and the
  sum of per-example residuals clipped at ``C1`` (in ``R^d``) with noise
  ``N(0, sigma_1^2 C1^2 I_d)``.

  Sensitivity (add/remove): ``C0`` for the embedding sum, ``C1`` for the
  residual sum (twice each under replace-one, applied by the accountant).
  Scaling each part by ``1 / (sigma_i C_i)`` makes the noise ``N(0, I)`` and
  one example's contribution at most ``sqrt(sigma_0^-2 + sigma_1^-2)`` in
  L2, so the pair is exactly one Gaussian mechanism with
  ``sigma_eff = (sigma_0^-2 + sigma_1^-2)^{-1/2}`` (Gaussian DP composition,
  Dong et al. 2022 Cor. 3.3; GEP, Yu et al. 2021 Thm 3.1). That single
  Gaussian is the ``dp_event``, which a PLD accountant can subsample
  (``composed_dp_event`` is the equivalent two-event form).
  """

  embedding_clip: float
  residual_clip: float
  embedding_noise_multiplier: float
  residual_noise_multiplier: float
  neighboring: mechanisms.Neighboring = "add_or_remove"

  def __post_init__(self):
    validation.one_of(
      "neighboring", self.neighboring, mechanisms.NEIGHBORING_RELATIONS
    )

  @property
  def embedding(self) -> mechanisms.GaussianMechanism:
    return mechanisms.GaussianMechanism(
      self.embedding_clip,
      self.embedding_noise_multiplier,
      1,
      self.neighboring,
    )

  @property
  def residual(self) -> mechanisms.GaussianMechanism:
    return mechanisms.GaussianMechanism(
      self.residual_clip,
      self.residual_noise_multiplier,
      1,
      self.neighboring,
    )

  @property
  def noise_multiplier(self) -> float:
    """``sigma_eff = (sigma_0^-2 + sigma_1^-2)^{-1/2}``."""
    return (
      self.embedding_noise_multiplier**-2 + self.residual_noise_multiplier**-2
    ) ** -0.5

  num_queries = 1  # one (composed) Gaussian release per step
  name = "gaussian"  # accounted as one Gaussian with ``noise_multiplier``

  @property
  def clip(self) -> float:
    """The embedding clip (the residual has its own, ``residual_clip``)."""
    return self.embedding_clip

  @property
  def noise_std(self) -> tuple[float, float]:
    """``(sigma_0 C0, sigma_1 C1)``: std per embedding / residual coordinate."""
    return self.embedding.noise_std, self.residual.noise_std

  @property
  def l2_sensitivity(self) -> tuple[float, float]:
    return self.embedding.l2_sensitivity, self.residual.l2_sensitivity

  def dp_event(self) -> dp_accounting.DpEvent:
    return dp_accounting.GaussianDpEvent(self.noise_multiplier)

  def composed_dp_event(self) -> dp_accounting.DpEvent:
    return dp_accounting.ComposedDpEvent(
      [self.embedding.dp_event(), self.residual.dp_event()]
    )

  def add_noise(self, key: jax.Array, sums):
    """Noises ``(embedding_sum, residual_sum)`` each with its own std."""
    embedding_sum, residual_sum = sums
    key_0, key_1 = jax.random.split(key)
    return (
      self.embedding.add_noise(key_0, embedding_sum),
      self.residual.add_noise(key_1, residual_sum),
    )


def anchor_subspace(
  key, anchor_gradients: jax.Array, num_bases: int, power_iterations: int = 1
) -> jax.Array:
  """GEP's anchor subspace: ``[d, k]`` orthonormal columns by power iteration.

  ``anchor_gradients`` is the ``[b', d]`` matrix ``P`` of per-example public
  gradients. ``V ~ N(0, 1)^{d x k}``; ``power_iterations`` times ``V <- P^T
  (P V)`` then orthonormalize (QR with the sign fix, the Gram-Schmidt of
  GEP's code). The key is public randomness.
  """
  dim = anchor_gradients.shape[1]
  v = jax.random.normal(key, (dim, num_bases), jnp.float32)
  for _ in range(power_iterations):
    v = anchor_gradients.T @ (anchor_gradients @ v)
    v = orthonormalize_rows(v.T).T
  return v


def gep(
  *,
  embedding_clip: float,
  residual_clip: float,
  expected_batch_size: float,
  num_bases: int,
  noise_multiplier: float | None = None,
  embedding_noise_multiplier: float | None = None,
  residual_noise_multiplier: float | None = None,
  power_iterations: int = 1,
  dataset_size: int | None = None,
  neighboring: str = "add_or_remove",
  direction_key=0,
  insecure_test_noise_seed: int | None = None,
) -> base.PrivateEstimator:
  """GEP (Yu et al. 2021, gradient embedding perturbation), first order.

  Anchor subspace ``V`` (``d x k``, :func:`anchor_subspace`) from the
  per-example gradients of ``public_batch``. Per private example ``g_i``:
  embedding ``e_i = V^T g_i`` clipped at ``C0``, residual ``r_i = g_i - V
  e_i`` clipped at ``C1``. Update ``V (sum e_i + N(0, sigma_0^2 C0^2 I_k)) /
  b + (sum r_i + N(0, sigma_1^2 C1^2 I_d)) / b``.

  Noise: pass ``noise_multiplier`` sigma (the effective one; both parts then
  get ``sqrt(2) sigma``, the equal split of GEP's code) or both
  ``embedding_noise_multiplier`` and ``residual_noise_multiplier``.
  Privacy: :class:`GEPMechanism`, one Gaussian with ``sigma_eff``
  Poisson-sampled at ``p = b/n``. Cost (Table 6): ``b`` private and ``b'``
  public forward+backward (both vmapped); memory ``O((b + b') d)``.

  The loss must be per-example: entry ``i`` of ``batched_loss(params,
  batch)`` may depend only on ``params`` and example ``i`` (padding rows
  included), or the sensitivity bound fails; check it with
  :func:`zoprivacy.per_example_check.assert_per_example`. Noise keys are
  secret (OS entropy at ``init``) unless ``insecure_test_noise_seed`` is set.
  """
  embedding_clip = validation.positive("embedding_clip", embedding_clip)
  residual_clip = validation.positive("residual_clip", residual_clip)
  num_bases = validation.positive_int("num_bases", num_bases)
  power_iterations = validation.positive_int(
    "power_iterations", power_iterations
  )
  expected_batch_size, dataset_size = validation.batch_size_and_dataset(
    expected_batch_size, dataset_size
  )
  split = (embedding_noise_multiplier, residual_noise_multiplier)
  if noise_multiplier is not None:
    if any(s is not None for s in split):
      raise ValueError(
        "Pass either noise_multiplier or both embedding_noise_multiplier and "
        "residual_noise_multiplier, not both forms."
      )
    sigma = validation.positive("noise_multiplier", noise_multiplier)
    split = (math.sqrt(2.0) * sigma, math.sqrt(2.0) * sigma)
  elif any(s is None for s in split):
    raise ValueError(
      "GEP needs noise_multiplier, or both embedding_noise_multiplier and "
      "residual_noise_multiplier."
    )
  mechanism = GEPMechanism(
    embedding_clip,
    residual_clip,
    validation.positive("embedding_noise_multiplier", split[0]),
    validation.positive("residual_noise_multiplier", split[1]),
    neighboring,
  )
  expected_batch_size, dataset_size = validation.batch_size_and_dataset(
    expected_batch_size, dataset_size
  )
  privacy = base.Privatization(
    mechanism,
    base.make_plan(
      mechanism,
      expected_batch_size=expected_batch_size,
      dataset_size=dataset_size,
      insecure_test_noise_seed=insecure_test_noise_seed,
    ),
  )

  def compute(params, args, dir_key, noise_key):
    public_batch = _get_public_batch(args)
    loss_one = queries.as_per_example_loss(
      args.per_example_loss, args.batched_loss
    )
    per_example_grad = jax.vmap(jax.grad(loss_one), in_axes=(None, 0))
    anchors, _ = _flatten_stacked(per_example_grad(params, public_batch))
    if num_bases > anchors.shape[1]:
      raise ValueError(
        f"num_bases={num_bases} exceeds the dimension {anchors.shape[1]}."
      )
    v = anchor_subspace(dir_key, anchors, num_bases, power_iterations)
    grads, unravel = _flatten_stacked(per_example_grad(params, args.batch))
    embedding = grads @ v  # [B, k]
    residual = grads - embedding @ v.T  # [B, d]
    clipped_embedding, _ = clipping.clip_tree_per_example(
      embedding, embedding_clip
    )
    clipped_residual, _ = clipping.clip_tree_per_example(
      residual, residual_clip
    )
    noisy_embedding, noisy_residual = mechanism.add_noise(
      noise_key,
      (
        mechanisms.masked_sum(clipped_embedding, args.mask),
        mechanisms.masked_sum(clipped_residual, args.mask),
      ),
    )
    flat = (v @ noisy_embedding + noisy_residual) / expected_batch_size
    dtype = jax.tree.leaves(params)[0].dtype
    grad = jax.tree.map(
      lambda g, p: g.astype(p.dtype), unravel(flat.astype(dtype)), params
    )
    return grad, base.release_norm(grad)

  return base.build_estimator(
    compute,
    direction_key=direction_key,
    privacy=privacy,
    num_released=1,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )


registry.register(
  registry.EstimatorSpec(
    "pazo_m",
    pazo_m,
    public_data="batch",
    exact_noise=True,
    defaults=(("clip", 1.0), ("smoothing", 1e-3), ("alpha", 0.5)),
  )
)
registry.register(
  registry.EstimatorSpec(
    "pazo_p",
    pazo_p,
    public_data="batches",
    exact_noise=True,
    defaults=(
      ("clip", 1.0),
      ("smoothing", 1e-3),
      ("num_public_batches", 4),
    ),
  )
)
registry.register(
  registry.EstimatorSpec(
    "pazo_s",
    pazo_s,
    public_data="batches",
    needs_learning_rate=True,
    defaults=(("clip", 1.0), ("num_public_batches", 4)),
  )
)
registry.register(
  registry.EstimatorSpec(
    "dpmd",
    dpmd,
    public_data="batch",
    needs_num_steps=True,
    defaults=(("clip", 1.0),),
  )
)
registry.register(
  registry.EstimatorSpec(
    "dope_sgd", dope_sgd, public_data="batch", defaults=(("clip", 1.0),)
  )
)
registry.register(
  registry.EstimatorSpec(
    "gep",
    gep,
    public_data="batch",
    defaults=(("embedding_clip", 1.0), ("residual_clip", 0.5)),
  )
)
