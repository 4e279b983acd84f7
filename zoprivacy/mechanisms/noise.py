"""Noise mechanisms: the privatization half of every private estimator.

Each mechanism privatizes the *sum* of per-example contributions that were
already clipped at ``clip`` (see :mod:`zoprivacy.mechanisms.clipping`). It
states, in one place next to the code that adds its noise:

* its sensitivity under the chosen neighbouring relation,
* the noise it adds (as a function of ``noise_multiplier`` and sensitivity),
* the ``dp_accounting`` event of one release, before subsampling.

Neighbouring relations (``docs/conventions.md`` §3). ``noise_multiplier``
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
Cor. 3.3; ``docs/conventions.md`` §5), which is how it is accounted.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Protocol

import dp_accounting
import jax
import jax.numpy as jnp

from zoprivacy.core import validation
from zoprivacy.core.masked_sums import masked_sum, masked_tree_sum  # noqa: F401
from zoprivacy.mechanisms import float_gaussian
from zoprivacy.mechanisms.discrete import (  # noqa: F401 (re-exported)
  DiscreteMechanism,
  exact_release,
  integer_noise_scale,
)

Neighboring = validation.Neighboring
NEIGHBORING_RELATIONS = validation.NEIGHBORING_RELATIONS


def _add_iid_noise(key: jax.Array, tree, scale: float, sample):
  """Adds ``scale * sample(key_leaf, shape, float32)`` to every leaf of a tree.

  The noise is drawn and added in float32 (or the leaf's dtype if wider),
  whatever the parameter dtype: bf16 noise would take only a few hundred
  values and be truncated near 3 sigma. The sum is cast back to the leaf's
  dtype afterwards.
  """
  leaves, treedef = jax.tree.flatten(tree)
  keys = jax.random.split(key, len(leaves))
  noisy = []
  for k, x in zip(keys, leaves):
    dtype = jnp.promote_types(jnp.result_type(x), jnp.float32)
    z = sample(k, jnp.shape(x), dtype)
    noisy.append((x.astype(dtype) + scale * z).astype(jnp.result_type(x)))
  return jax.tree.unflatten(treedef, noisy)


class Mechanism(Protocol):
  """What an estimator needs from a noise mechanism on a sum of clipped values.

  Every mechanism states, next to the code that adds its noise, one
  example's contribution bound (the sensitivity under add/remove), the noise
  it adds and its ``dp_accounting`` event. Implementations:
  :class:`GaussianMechanism`, :class:`LaplaceMechanism`, :class:`NoNoise`,
  :class:`DiscreteMechanism` and GEP's pair
  (:class:`zoprivacy.estimators.gep.GEPMechanism`).
  """

  name: str
  clip: float
  noise_multiplier: float
  num_queries: int
  neighboring: Neighboring

  @property
  def contribution_bound(self) -> float: ...

  @property
  def noise_std(self) -> float: ...

  def dp_event(self) -> dp_accounting.DpEvent: ...

  def add_noise(self, key: jax.Array, clipped_sum): ...

  def privatize_sum(
    self,
    noise_key: jax.Array,
    clipped: jax.Array,
    mask: jax.Array | None,
    discrete_noise=None,
  ) -> jax.Array: ...


class _SumMechanism:
  """Shared by the mechanisms that add float noise to a masked sum."""

  def privatize_sum(self, noise_key, clipped, mask, discrete_noise=None):
    """Masked sum over the leading axis of clipped values, plus noise."""
    del discrete_noise
    return self.add_noise(noise_key, masked_sum(clipped, mask))


@dataclasses.dataclass(frozen=True)
class _IidNoiseMechanism(_SumMechanism):
  """I.i.d. noise of scale ``noise_multiplier * contribution_bound`` per
  coordinate of the sum; subclasses fix the norm of the bound and the law.

  ``float_defence`` names how the floating-point noise is hardened:
  'none' (plain, exposed to floating-point attacks, Mironov 2012) or
  'secure_mode' (Gaussian only: Opacus' defence, Holohan & Braghin 2021).
  """

  clip: float
  noise_multiplier: float
  num_queries: int = 1
  neighboring: Neighboring = "add_or_remove"
  float_defence: str = "none"

  def __post_init__(self):
    validation.one_of("neighboring", self.neighboring, NEIGHBORING_RELATIONS)
    validation.one_of("float_defence", self.float_defence, FLOAT_DEFENCES)

  @property
  def noise_scale(self) -> float:
    """Scale of the noise on each coordinate (Gaussian std, Laplace ``b``)."""
    return self.noise_multiplier * self.contribution_bound

  def add_noise(self, key: jax.Array, clipped_sum):
    """Adds ``noise_scale * sample()`` to every coordinate of a pytree sum."""
    return _add_iid_noise(key, clipped_sum, self.noise_scale, self._sample)


@dataclasses.dataclass(frozen=True)
class GaussianMechanism(_IidNoiseMechanism):
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

  name = "gaussian"

  def _sample(self, key, shape, dtype):
    """A standard normal; under 'secure_mode' the sum of
    ``SECURE_MODE_DRAWS`` = 4 independent normals divided by 2 (same law),
    as Opacus' ``secure_mode`` draws it: the low-order bits of a sum no
    longer reveal one draw (Holohan & Braghin 2021, Sec. 4). Not exact: the
    float addition to the sum still leaves releases impossible in one world
    (docs/exact_noise.md, "Vector noise")."""
    if self.float_defence != "secure_mode":
      return float_gaussian.normal(key, shape, dtype)
    return float_gaussian.secure_mode_normal(
      key, shape, dtype, draws=SECURE_MODE_DRAWS
    )

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
    return self.noise_scale

  def dp_event(self) -> dp_accounting.DpEvent:
    return dp_accounting.GaussianDpEvent(self.noise_multiplier)


@dataclasses.dataclass(frozen=True)
class LaplaceMechanism(_IidNoiseMechanism):
  """Laplace noise on a sum of clipped scalars (DP-ZO Alg. 1 line 15).

  Per-example contribution bound (L1) of the released vector of
  ``num_queries`` sums: ``num_queries * clip``, which is the sensitivity under
  add/remove. Noise: i.i.d. ``Laplace(0, b)`` per coordinate with scale
  ``b = noise_multiplier * contribution_bound`` (DP-ZO's ``Laplace(0, C sigma)``).
  ``dp_accounting`` event of one release: ``LaplaceDpEvent(noise_multiplier)``,
  which is ``1/noise_multiplier``-pure-DP before subsampling. Replace-one is
  rejected: ``dp_accounting``'s PLD has no replace-one Laplace analysis.
  """

  name = "laplace"

  def _sample(self, key, shape, dtype):
    return jax.random.laplace(key, shape, dtype)

  def __post_init__(self):
    super().__post_init__()
    if self.float_defence != "none":
      raise ValueError("secure_mode covers Gaussian noise only.")
    if self.neighboring != "add_or_remove":
      raise ValueError(
        "The Laplace mechanism supports only add_or_remove neighbouring "
        "(dp_accounting has no replace-one PLD for subsampled Laplace)."
      )

  @property
  def contribution_bound(self) -> float:
    """Max L1 norm of one example's contribution to the released vector."""
    return self.num_queries * self.clip

  @property
  def l1_sensitivity(self) -> float:
    return self.contribution_bound

  @property
  def noise_std(self) -> float:
    return math.sqrt(2.0) * self.noise_scale

  def dp_event(self) -> dp_accounting.DpEvent:
    return dp_accounting.LaplaceDpEvent(self.noise_multiplier)


@dataclasses.dataclass(frozen=True)
class NoNoise(_SumMechanism):
  """The non-private identity release (MeZO); accounted as non-private."""

  clip: float = math.inf
  noise_multiplier: float = 0.0
  num_queries: int = 1
  neighboring: Neighboring = "add_or_remove"
  noise_std: float = 0.0
  name = "none"

  def dp_event(self) -> dp_accounting.DpEvent:
    return dp_accounting.NonPrivateDpEvent()

  def add_noise(self, key: jax.Array, clipped_sum):
    del key
    return clipped_sum


FLOAT_DEFENCES = ("none", "secure_mode")
SECURE_MODE_DRAWS = 4


def make_mechanism(
  name: str,
  *,
  clip: float,
  noise_multiplier: float,
  num_queries: int = 1,
  neighboring: Neighboring = "add_or_remove",
  noise: str = "exact",
  grid_points: int = 1024,
) -> tuple[Mechanism, tuple[str, ...]]:
  """The mechanism called ``name`` ('gaussian' or 'laplace'), and notes.

  ``noise='exact'`` (the default): a :class:`DiscreteMechanism`, accounted
  by dp_accounting's discrete PLDs. ``'secure_mode'``: floating-point
  Gaussian noise hardened by Opacus' defence. ``'float'``: plain
  floating-point noise, exposed to floating-point attacks (Mironov 2012),
  which the plan and every report say.
  """
  if name not in ("gaussian", "laplace"):
    raise ValueError(
      f"Unknown noise mechanism {name!r}; use 'gaussian' or 'laplace'."
    )
  validation.one_of("noise", noise, ("exact", "secure_mode", "float"))
  if noise == "exact":
    mech = DiscreteMechanism(
      clip,
      noise_multiplier,
      grid_points,
      name,
      num_queries=num_queries,
      neighboring=neighboring,
    )
    return mech, ()
  cls = GaussianMechanism if name == "gaussian" else LaplaceMechanism
  defence = "secure_mode" if noise == "secure_mode" else "none"
  return cls(clip, noise_multiplier, num_queries, neighboring, defence), ()
