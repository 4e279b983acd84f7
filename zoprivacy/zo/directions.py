"""Random perturbation directions over parameter pytrees.

Every zeroth-order method in zoprivacy perturbs the parameters along a random
direction ``u`` that is *public*: it depends only on a PRNG key, never on data.
Directions are regenerated from their key whenever they are needed instead of
being stored (MeZO / DP-ZO Alg. 2, "PerturbParameters" with a reset seed).

The papers disagree on the distribution of ``u`` (see ``docs/conventions.md`` §1,
item 1); this module offers one family of samplers with explicit names:

===================  ==========================================  =====================
name                 distribution                                 used by
===================  ==========================================  =====================
``gaussian``         ``N(0, I_d)``                                MeZO, DP-ZO Alg. 1,
                                                                  DPZero experiments
``sphere``           uniform on ``sqrt(d) S^{d-1}``               DPZero Alg. 1/2, line 2
``sphere_quarter``   uniform on ``d^{1/4} S^{d-1}``               PAZO-M (App. A.1)
``rademacher``       i.i.d. ``+-1`` coordinates                   fast variant, E[uu^T]=I
``stiefel``          K orthonormal unit directions (Haar)         Noisy-ZOGD eq. (3)
===================  ==========================================  =====================

``gaussian``, ``sphere`` and ``rademacher`` all satisfy ``E[u u^T] = I_d``, so
the two-point estimator ``(f(x+lu) - f(x-lu)) / (2l) * u`` is an unbiased
estimate of the gradient of the smoothed loss (DPZero eq. (2)).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Literal

import jax
import jax.flatten_util
import jax.numpy as jnp

from zoprivacy.core import linalg
from zoprivacy.core.low_precision import compute_dtype
from zoprivacy.zo import counter_hash
from zoprivacy.zo.counter_generators import (  # noqa: F401 (re-exported)
  AUTO_COUNTER,
  COUNTER_GENERATORS,
  COUNTER_PRNGS,
  leaf_at,
  leaf_slice,
)

PyTree = object
Sampler = Callable[[jax.Array, PyTree], PyTree]
SphereRadius = Literal["sqrt_dim", "quarter_power_dim"] | float

# Samplers of one direction shaped like ``params``.
DIRECTION_NAMES = ("gaussian", "sphere", "sphere_quarter", "rademacher")
SPHERE_RADII = {"sphere": "sqrt_dim", "sphere_quarter": "quarter_power_dim"}
# Samplers of a block of ``K`` directions (leading axis ``K``).
BLOCK_DIRECTION_NAMES = ("stiefel",)


def tree_size(tree: PyTree) -> int:
  """Total number of scalar entries ``d`` of a pytree."""
  return sum(math.prod(jnp.shape(x)) for x in jax.tree.leaves(tree))


# 'auto' (the default of the two-point estimators) draws with the counter
# hash from this many parameters on, and with threefry below: a function of
# the parameters' shapes only, so every machine, device count and replay
# chooses the same generator for the same model. Below it the counter step's
# fixed per-leaf costs (its sphere norm loops) outweigh its cheaper draw:
# the README's 3,818-parameter digits run trained 4000 steps in 10.0-11.3 s
# with the counter hash against 8.2-9.1 s with threefry. Above it threefry's
# whole draw costs 1.1-2.0x two forward passes on CPU and three times the
# drawn size in temporaries.
AUTO_COUNTER_MIN_PARAMETERS = 2**16


def generator(prng: str, params: PyTree | None = None) -> str:
  """The generator that draws ``u`` for ``direction_prng=prng`` on ``params``.

  ``'auto'`` (the default) is :data:`AUTO_COUNTER` (``'counter2'``, the
  counter hash of :mod:`zoprivacy.zo.counter_hash2`) for at least
  :data:`AUTO_COUNTER_MIN_PARAMETERS` parameters and ``'threefry'`` below,
  bit for bit the draws of that explicit choice; ``params`` (arrays or
  ``jax.ShapeDtypeStruct``) is then required. Any other ``prng`` is itself.
  """
  if prng != "auto":
    return prng
  if params is None:
    raise ValueError(
      "direction_prng='auto' chooses its generator from the parameters' "
      "size: pass the parameters (or their shapes)."
    )
  if tree_size(params) >= AUTO_COUNTER_MIN_PARAMETERS:
    return AUTO_COUNTER
  return "threefry"


# A two-point step with direction_prng='auto' perturbs leaf by leaf (each
# leaf of x + l u formed at its first use, large kernels in row blocks)
# where 'auto' draws with the counter hash (from this many parameters on),
# on one CPU device; with several devices or on an accelerator it perturbs
# the whole tree at once with the same counter draws.
LEAFWISE_MIN_PARAMETERS = AUTO_COUNTER_MIN_PARAMETERS


def perturbs_leafwise(prng: str, params: PyTree) -> bool:
  """Whether a two-point step perturbs ``params`` leaf by leaf.

  A counter hash (``'counter'``, ``'counter2'``): always (the explicit
  choice). ``'auto'``: on one CPU
  device, where it draws with the counter hash (:func:`generator`: at least
  :data:`LEAFWISE_MIN_PARAMETERS` parameters). Leaf by leaf,
  one layer's perturbed copy is live and the draws fuse into their uses,
  but every leaf costs a few small loops: on a model of a few thousand
  parameters those fixed costs outweigh the draw. With several devices the
  leaf-by-leaf order reads values sharded over the batch (one-element
  all-reduces on every step), so the whole tree is perturbed at once. On
  a GPU the leaf-by-leaf step's many small kernels and row-block loops run
  one after the other (the wide MLP's counter step measured 2.2-4.1x two
  forward passes on an H200, threefry's whole draw 1.05-1.16x), so there
  too the whole tree is perturbed at once.
  Threefry and RngBitGenerator draw ``u`` whole: never. A function of the
  parameters' shapes and the device count only; the directions are the
  same either way.
  """
  if prng in COUNTER_PRNGS:
    return True
  if prng != "auto" or generator(prng, params) not in COUNTER_PRNGS:
    return False
  return jax.device_count() == 1 and jax.default_backend() == "cpu"


def _leaf_draws(key: jax.Array, params: PyTree, prng: str, draw: Callable):
  """One draw per leaf, shaped like it, in its dtype (float32 for a 16-bit
  float leaf, whose points and update are float32:
  :func:`zoprivacy.core.low_precision.compute_dtype`).

  ``draw(leaf_key_or_words, leaf_number, shape, dtype)``: with a counter
  hash (``prng`` in :data:`COUNTER_PRNGS`, or ``'auto'`` choosing one) it
  receives that hash's 32-bit words of the whole leaf (element ``j`` of
  leaf ``l`` depends on ``(key, l, j)`` only); otherwise a key per leaf
  split from ``key``.
  """
  leaves, treedef = jax.tree.flatten(params)
  prng = generator(prng, params)
  if prng in COUNTER_PRNGS:
    hash_ = COUNTER_GENERATORS[prng]
    out = [
      draw(hash_.leaf_bits(key, i, jnp.shape(x)), compute_dtype(x))
      for i, x in enumerate(leaves)
    ]
  else:
    keys = jax.random.split(direction_key(key, prng), len(leaves))
    out = [
      draw(k, jnp.shape(x), compute_dtype(x)) for k, x in zip(keys, leaves)
    ]
  return jax.tree.unflatten(treedef, out)


def gaussian(key: jax.Array, params: PyTree, prng: str = "threefry") -> PyTree:
  """Standard Gaussian direction ``u ~ N(0, I_d)`` shaped like ``params``.

  DP-ZO Alg. 1 line 4 and MeZO: ``z ~ N(0, I_{|theta|})``. One key per leaf,
  split from ``key``, in the leaf's own dtype; or a counter hash's inverse
  CDF transform with ``prng='counter'`` or ``'counter2'`` (or ``'auto'`` on
  a large tree).
  """
  chosen = generator(prng, params)
  if chosen in COUNTER_PRNGS:
    transform = COUNTER_GENERATORS[chosen].to_gaussian
    return _leaf_draws(key, params, prng, transform)
  return _leaf_draws(key, params, prng, jax.random.normal)


def rademacher(
  key: jax.Array, params: PyTree, prng: str = "threefry"
) -> PyTree:
  """Rademacher direction: i.i.d. uniform ``+-1`` coordinates.

  Satisfies ``E[u u^T] = I_d`` like the Gaussian (DPZero Sec. 2 allows "any u
  satisfying E[uu^T] = I_d"), and needs one random bit per coordinate instead
  of a Box-Muller transform, so it is the cheapest direction to generate.
  """
  if generator(prng, params) in COUNTER_PRNGS:
    return _leaf_draws(key, params, prng, counter_hash.to_rademacher)
  return _leaf_draws(key, params, prng, jax.random.rademacher)


def sphere_radius(radius: SphereRadius, dim: int) -> float:
  """Resolves a named sphere radius for dimension ``dim``.

  ``"sqrt_dim"``: ``sqrt(d)``, DPZero Alg. 1/2 line 2 (so ``E[uu^T] = I_d``).
  ``"quarter_power_dim"``: ``d^{1/4}``, PAZO App. A.1 (so that the PAZO-M
  estimate's second moment matches the gradient's squared norm).
  """
  if radius == "sqrt_dim":
    return math.sqrt(dim)
  if radius == "quarter_power_dim":
    return dim**0.25
  if isinstance(radius, str):
    raise ValueError(
      f"Unknown sphere radius {radius!r}; use 'sqrt_dim', "
      "'quarter_power_dim' or a positive float."
    )
  if not radius > 0:
    raise ValueError(f"Sphere radius must be positive, got {radius}.")
  return float(radius)


def sphere(
  key: jax.Array,
  params: PyTree,
  radius: SphereRadius = "sqrt_dim",
  prng: str = "threefry",
) -> PyTree:
  """Uniform direction on the sphere ``r S^{d-1}`` over the whole pytree.

  Marsaglia's method, as in DPZero Sec. 2: ``u = r z / ||z||`` with
  ``z ~ N(0, I_d)``; the norm is global over all leaves.
  """
  z = gaussian(key, params, prng)
  r = sphere_radius(radius, tree_size(params))
  sq_norm = sum(
    jnp.sum(jnp.square(x.astype(jnp.float32))) for x in jax.tree.leaves(z)
  )
  scale = r * jax.lax.rsqrt(sq_norm)
  return jax.tree.map(lambda x: (x * scale).astype(x.dtype), z)


def stiefel(
  key: jax.Array, params: PyTree, num_directions: int, prng: str = "threefry"
) -> PyTree:
  """``K`` orthonormal unit directions, Haar-uniform on the Stiefel manifold.

  Noisy-ZOGD eq. (3) draws ``U_t = [u_1, ..., u_K]`` with orthonormal
  columns uniformly. We take the QR decomposition of a ``d x K`` Gaussian
  matrix and multiply each column of Q by the sign of the matching diagonal
  entry of R (Mezzadri 2007), which makes the distribution exactly Haar.

  Returns a pytree shaped like ``params`` with a leading axis of size ``K``;
  slice ``k`` is the unit-norm direction ``u_k`` and slices are orthogonal.
  Needs the full ``d x K`` matrix in memory, unlike the other samplers.
  """
  if num_directions < 1:
    raise ValueError(f"num_directions must be >= 1, got {num_directions}.")
  flat, unravel = jax.flatten_util.ravel_pytree(params)
  dim = flat.shape[0]
  if num_directions > dim:
    raise ValueError(
      f"Cannot draw {num_directions} orthonormal directions in dimension {dim}."
    )
  gauss = gaussian(key, jnp.zeros((dim, num_directions), jnp.float32), prng)
  q = linalg.orthonormalize_rows(gauss.T)  # [K, d]: Q^T of gauss, sign-fixed
  return jax.vmap(unravel)(q.astype(flat.dtype))


def get_sampler(
  name: str, num_directions: int | None = None, prng: str = "threefry"
) -> Sampler:
  """Returns the sampler ``(key, params) -> direction`` called ``name``.

  The one direction function of every path: the generic step, the
  per-layer and sharded paths (through :func:`leaf_slice`) and replay all
  regenerate ``u`` from the same key with it. Names are listed in
  ``DIRECTION_NAMES`` and ``BLOCK_DIRECTION_NAMES``; see the module
  docstring. ``'stiefel'`` returns ``K = num_directions`` orthonormal
  directions stacked on a leading axis (``K = 1`` if not given: one uniform
  unit direction, Noisy-ZOGD eq. (3) with ``K = 1``). ``num_directions`` is
  only meaningful for ``'stiefel'``. ``prng`` is one of :data:`PRNG_IMPLS`.
  """
  if prng not in PRNG_IMPLS:
    raise ValueError(
      f"Unknown PRNG implementation {prng!r}; choose one of {PRNG_IMPLS}."
    )
  if name == "stiefel":
    k = 1 if num_directions is None else num_directions
    if isinstance(k, bool) or int(k) != k or k < 1:
      raise ValueError(f"num_directions must be an integer >= 1, got {k!r}.")
    return functools.partial(stiefel, num_directions=int(k), prng=prng)
  if num_directions is not None:
    raise ValueError(
      f"num_directions applies to {BLOCK_DIRECTION_NAMES} only; the "
      f"{name!r} sampler draws one direction."
    )
  if name == "gaussian":
    return functools.partial(gaussian, prng=prng)
  if name == "rademacher":
    return functools.partial(rademacher, prng=prng)
  if name in SPHERE_RADII:
    return functools.partial(sphere, radius=SPHERE_RADII[name], prng=prng)
  raise ValueError(
    f"Unknown direction distribution {name!r}; choose one of "
    f"{DIRECTION_NAMES + BLOCK_DIRECTION_NAMES}."
  )


# 'auto' (the default of the two-point estimators): threefry or the counter
# hash by size (:func:`generator`), with the step's structure chosen from the
# parameters (:func:`perturbs_leafwise`).
PRNG_IMPLS = ("auto", "threefry", "rbg", "unsafe_rbg") + COUNTER_PRNGS


def direction_key(key: jax.Array, prng_impl: str = "threefry") -> jax.Array:
  """Derives the key used to draw a direction, with a chosen PRNG.

  ``threefry`` (JAX's default) is the paper-faithful, counter-based choice.
  ``rbg`` and ``unsafe_rbg`` use the XLA RngBitGenerator and are several times
  cheaper on accelerators and large parameter counts; directions are public,
  so a faster generator does not touch the privacy argument. Privacy noise is
  always drawn with the default (threefry) key. The counter hashes and
  ``auto`` keep the key: :mod:`zoprivacy.zo.counter_hash` and
  :mod:`zoprivacy.zo.counter_hash2` read its two words, and threefry
  (``auto`` on a small tree) uses it as it is.
  """
  if prng_impl in ("threefry", "auto") + COUNTER_PRNGS:
    return key
  if prng_impl in ("rbg", "unsafe_rbg"):
    bits = jax.random.bits(key, (4,), jnp.uint32)
    return jax.random.wrap_key_data(bits, impl=prng_impl)
  raise ValueError(
    f"Unknown PRNG implementation {prng_impl!r}; choose one of {PRNG_IMPLS}."
  )


def key_after(key: jax.Array, *values) -> jax.Array:
  """``key`` itself, computed after ``values``: the same direction, drawn
  only once ``values`` exist.

  A regenerated direction (the counter hash) is drawn at each use. To keep
  the uses apart, each is given its own key expression: the key words plus
  ``v[0] > inf`` for the first element of each float array ``v``, which is
  false for every value (NaN and inf included) but which XLA cannot fold.
  The draw then depends on ``values``: it cannot be hoisted before the
  operations that make them, nor merged (CSE) with another use into one
  materialized ``u``. (``lax.optimization_barrier`` is removed before
  scheduling by XLA's CPU compiler, so it does not give this order there.)
  """
  zero = jnp.zeros((), jnp.uint32)
  for v in jax.tree.leaves(values):
    v = jnp.ravel(v)
    if v.size and jnp.issubdtype(v.dtype, jnp.floating):
      zero = zero + (v[0] > jnp.inf).astype(jnp.uint32)
  if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
    data = jax.random.key_data(key)
    return jax.random.wrap_key_data(data + zero, impl=jax.random.key_impl(key))
  return key + zero.astype(key.dtype)
