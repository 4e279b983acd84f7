"""Noise mechanisms: the privatization half of every private estimator.

Each mechanism privatizes the *sum* of per-example contributions that were
already clipped at ``clip`` (see :mod:`zoprivacy.clipping`). It states, in one
place next to the code that adds its noise:

* its sensitivity under the chosen neighbouring relation,
* the noise it adds (as a function of ``noise_multiplier`` and sensitivity),
* the ``dp_accounting`` event of one release, before subsampling.

Neighbouring relations (``shared/NOTES.md`` item 3). ``noise_multiplier``
always means noise std over the *per-example contribution bound* (the clip),
which is ``dp_accounting``'s convention for its events:

* add/remove-one (the default; DP-ZO App. A): sensitivity ``C``;
* replace-one (DPZero Alg. 2; must be asked for): sensitivity ``2C``. The
  factor 2 is applied by ``dp_accounting`` itself, whose replace-one analysis
  shifts the two neighbouring outputs by ``-C`` and ``+C``. The noise is not
  doubled here, the accountant pays for it.

``num_queries`` independent sums (n-SPSA, PAZO-M/P's ``q`` queries) released
from the *same* batch form one vector query whose per-example contribution
has L2 norm at most ``sqrt(q) C`` (L1 at most ``q C``). Giving each coordinate
Gaussian noise of std ``noise_multiplier * sqrt(q) C`` makes the whole release
exactly one Gaussian mechanism with ``noise_multiplier`` (Dong et al. 2022,
Cor. 3.3; ``shared/NOTES.md`` item 5), which is how it is accounted.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import dp_accounting
import jax
import jax.numpy as jnp

Neighboring = Literal["add_or_remove", "replace_one"]
NEIGHBORING_RELATIONS = ("add_or_remove", "replace_one")


def _check_neighboring(neighboring: str) -> None:
  if neighboring not in NEIGHBORING_RELATIONS:
    raise ValueError(
        f"Unknown neighboring relation {neighboring!r}; choose one of "
        f"{NEIGHBORING_RELATIONS}.")


def masked_sum(values: jax.Array, mask: jax.Array | None) -> jax.Array:
  """Sums per-example values over the leading axis; padding contributes 0.

  ``jnp.where`` (not multiplication) keeps a NaN in a padded slot from
  reaching the sum. The sum is a reduction over the batch axis, so a batch
  sharded over devices crosses devices only as this reduced quantity.
  """
  if mask is not None:
    mask = mask.astype(bool).reshape(mask.shape + (1,) * (values.ndim - 1))
    values = jnp.where(mask, values, jnp.zeros_like(values))
  return jnp.sum(values, axis=0)


def masked_tree_sum(tree, mask: jax.Array | None):
  """:func:`masked_sum` over every leaf of a per-example pytree."""
  return jax.tree.map(lambda x: masked_sum(x, mask), tree)


def _add_iid_noise(key: jax.Array, tree, scale: float, sample):
  """Adds ``scale * sample(key_leaf, shape, dtype)`` to every leaf of a tree."""
  leaves, treedef = jax.tree.flatten(tree)
  keys = jax.random.split(key, len(leaves))
  noisy = [x + scale * sample(k, jnp.shape(x), jnp.result_type(x))
           for k, x in zip(keys, leaves)]
  return jax.tree.unflatten(treedef, noisy)


@dataclasses.dataclass(frozen=True)
class GaussianMechanism:
  """Gaussian noise on a sum of clipped contributions.

  Implements DP-ZO Alg. 1 line 13 (``sum l_i + N(0, C^2 sigma^2)``), DPZero
  Alg. 2 line 3 (scalar ``z_t``), DPZero Alg. 1 line 3 / DP-SGD (isotropic
  ``N(0, sigma^2 C^2 I_d)`` on a vector sum).

  Per-example contribution bound (L2) of the released vector of
  ``num_queries`` sums: ``sqrt(num_queries) * clip``. Sensitivity: that bound
  under add/remove, twice it under replace-one (applied by the accountant).
  Noise std per coordinate: ``noise_multiplier * contribution_bound``.
  ``dp_accounting`` event of one release: ``GaussianDpEvent(noise_multiplier)``.
  """
  clip: float
  noise_multiplier: float
  num_queries: int = 1
  neighboring: Neighboring = "add_or_remove"

  def __post_init__(self):
    _check_neighboring(self.neighboring)

  @property
  def contribution_bound(self) -> float:
    """Max L2 norm of one example's contribution to the released vector."""
    return math.sqrt(self.num_queries) * self.clip

  @property
  def l2_sensitivity(self) -> float:
    factor = 2.0 if self.neighboring == "replace_one" else 1.0
    return factor * self.contribution_bound

  @property
  def noise_std(self) -> float:
    """Standard deviation of the noise on each coordinate of the sum."""
    return self.noise_multiplier * self.contribution_bound

  def dp_event(self) -> dp_accounting.DpEvent:
    return dp_accounting.GaussianDpEvent(self.noise_multiplier)

  def add_noise(self, key: jax.Array, clipped_sum):
    """Adds ``N(0, noise_std^2)`` to every coordinate of a pytree sum."""
    return _add_iid_noise(key, clipped_sum, self.noise_std, jax.random.normal)


@dataclasses.dataclass(frozen=True)
class LaplaceMechanism:
  """Laplace noise on a sum of clipped scalars (DP-ZO Alg. 1 line 15).

  Per-example contribution bound (L1) of the released vector of
  ``num_queries`` sums: ``num_queries * clip``, which is the sensitivity under
  add/remove. Noise: i.i.d. ``Laplace(0, b)`` per coordinate with scale
  ``b = noise_multiplier * contribution_bound`` (DP-ZO's ``Laplace(0, C sigma)``).
  ``dp_accounting`` event of one release: ``LaplaceDpEvent(noise_multiplier)``,
  which is ``1/noise_multiplier``-pure-DP before subsampling. Replace-one is
  rejected: ``dp_accounting``'s PLD has no replace-one Laplace analysis.
  """
  clip: float
  noise_multiplier: float
  num_queries: int = 1
  neighboring: Neighboring = "add_or_remove"

  def __post_init__(self):
    _check_neighboring(self.neighboring)
    if self.neighboring != "add_or_remove":
      raise ValueError(
          "The Laplace mechanism supports only add_or_remove neighbouring "
          "(dp_accounting has no replace-one PLD for subsampled Laplace).")

  @property
  def contribution_bound(self) -> float:
    """Max L1 norm of one example's contribution to the released vector."""
    return self.num_queries * self.clip

  @property
  def l1_sensitivity(self) -> float:
    return self.contribution_bound

  @property
  def noise_scale(self) -> float:
    """Laplace scale ``b`` of the noise on each coordinate."""
    return self.noise_multiplier * self.contribution_bound

  @property
  def noise_std(self) -> float:
    return math.sqrt(2.0) * self.noise_scale

  def dp_event(self) -> dp_accounting.DpEvent:
    return dp_accounting.LaplaceDpEvent(self.noise_multiplier)

  def add_noise(self, key: jax.Array, clipped_sum):
    """Adds ``Laplace(0, noise_scale)`` to every coordinate of a pytree sum."""
    return _add_iid_noise(key, clipped_sum, self.noise_scale, jax.random.laplace)


@dataclasses.dataclass(frozen=True)
class NoNoise:
  """The non-private identity release (MeZO); accounted as non-private."""
  clip: float = math.inf
  noise_multiplier: float = 0.0
  num_queries: int = 1
  neighboring: Neighboring = "add_or_remove"
  noise_std: float = 0.0

  def dp_event(self) -> dp_accounting.DpEvent:
    return dp_accounting.NonPrivateDpEvent()

  def add_noise(self, key: jax.Array, clipped_sum):
    del key
    return clipped_sum


Mechanism = GaussianMechanism | LaplaceMechanism | NoNoise


def make_mechanism(name: str, *, clip: float, noise_multiplier: float,
                   num_queries: int = 1,
                   neighboring: Neighboring = "add_or_remove") -> Mechanism:
  """Builds the mechanism called ``name`` ('gaussian' or 'laplace')."""
  if name == "gaussian":
    return GaussianMechanism(clip, noise_multiplier, num_queries, neighboring)
  if name == "laplace":
    return LaplaceMechanism(clip, noise_multiplier, num_queries, neighboring)
  raise ValueError(f"Unknown noise mechanism {name!r}; use 'gaussian' or 'laplace'.")
