"""16-bit float parameters (bfloat16, float16): where float32 is needed.

A zeroth-order step on weights stored in 16 bits meets two roundings that
can erase it:

* **the perturbation** ``x + l u``: with ``l = 1e-3`` the increment is below
  half of bfloat16's spacing for ``|x| > 0.25`` (8 significant bits, spacing
  ``2^-7`` near 1), so ``x + l u`` rounded to bfloat16 is mostly ``x``, and
  the two-point difference is mostly rounding. :func:`perturbed` forms the
  point in float32 (:func:`compute_dtype`), never rounding it back;
* **the update** ``x - a g``: stored back with round-to-nearest, a change
  below half a spacing (``2^-9 |x|`` in bfloat16, ``2^-12 |x|`` in float16)
  is lost, which at MeZO's step sizes (1e-6 to 1e-7) is most of them.
  :func:`round_stochastic` rounds up with probability equal to the distance
  from the lower neighbour over the spacing, so the stored value equals the
  float32 update in expectation (Gupta et al. 2015, "Deep learning with
  limited numerical precision"), and small updates accumulate.

The random words come from the caller (a public counter hash:
:mod:`zoprivacy.zo.rounding`); nothing here draws randomness.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np


def is_narrow(x) -> bool:
  """A 16-bit floating array (bfloat16, float16)."""
  dtype = jnp.result_type(x)
  return jnp.issubdtype(dtype, jnp.floating) and dtype.itemsize == 2


def has_narrow(tree) -> bool:
  """Whether any leaf of ``tree`` is a 16-bit float."""
  return any(is_narrow(x) for x in jax.tree.leaves(tree))


def compute_dtype(x):
  """The dtype a leaf is perturbed and updated in: float32 for a 16-bit
  float leaf, else the leaf's own."""
  return jnp.float32 if is_narrow(x) else jnp.result_type(x)


def perturbed(p, delta):
  """``p + delta``: in float32 for a 16-bit float ``p`` (the result stays
  float32: rounding it back would erase ``delta``), else in ``p``'s dtype
  (``delta`` cast to it)."""
  if is_narrow(p):
    return p.astype(jnp.float32) + jnp.asarray(delta).astype(jnp.float32)
  return p + jnp.asarray(delta).astype(jnp.result_type(p))


def round_stochastic(x, dtype, words):
  """``x`` (float32) rounded to the 16-bit float ``dtype`` stochastically:
  to one of its two neighbours in ``dtype``, the upper (in magnitude) with
  probability equal to the distance from the lower over the spacing, so
  that ``E[result] = x`` (exactly, for the spacings' integer multiples of
  the uniform's resolution). ``words`` (``uint32``, ``x``'s shape) are the
  uniform random bits.

  As integers: the float32 bits of ``|x|`` plus a uniform integer below
  ``2^drop`` (the float32 positions between two neighbours in ``dtype``:
  16 for bfloat16; 13 for float16's normal range, more below it), then the
  low ``drop`` bits cleared. A carry into the exponent is the next
  binade, as it should be. Elementwise integer arithmetic on one read of
  ``x``, so it fuses into the update that produces ``x`` (a float
  ``nextafter`` made XLA:CPU convert whole bfloat16 stacks). Below
  float16's smallest subnormal ``2^-24`` the two neighbours are 0 and
  ``2^-24``. NaN stays NaN; values beyond the range round to infinity as
  the cast does."""
  x = jnp.asarray(x, jnp.float32)
  info = jnp.finfo(dtype)
  bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
  drop = 23 - info.nmant  # float32 mantissa bits below dtype's
  if info.minexp > -126:  # float16: its subnormals start earlier
    exponent = ((bits >> 23) & 0xFF).astype(jnp.int32) - 127
    drop = drop + jnp.clip(info.minexp - exponent, 0, info.nmant)
  drop = jnp.asarray(drop, jnp.uint32)
  low = (jnp.uint32(1) << drop) - jnp.uint32(1)
  rounded = (bits + (words & low)) & ~low
  magnitude = bits & jnp.uint32(0x7FFFFFFF)
  rounded = jnp.where(magnitude > jnp.uint32(0x7F800000), bits, rounded)  # NaN
  out = jax.lax.bitcast_convert_type(rounded, jnp.float32)
  if info.minexp > -126:
    out = _below_smallest(x, out, info, words)
  return out.astype(dtype)


def _below_smallest(x, out, info, words):
  """``out``, where ``|x|`` is below ``dtype``'s smallest subnormal ``s``:
  ``sign(x) s`` with probability ``|x| / s``, else ``sign(x) 0``."""
  smallest = np.float32(2.0 ** (info.minexp - info.nmant))
  uniform = (words >> 8).astype(jnp.float32) * np.float32(2.0**-24)
  up = uniform * smallest < jnp.abs(x)
  tiny = jnp.where(up, jnp.copysign(smallest, x), jnp.copysign(0.0, x))
  return jnp.where(jnp.abs(x) < smallest, tiny, out)


def cast_weights(value, dtype, name: str):
  """``value`` (a loaded weight tensor) cast to ``dtype``; refuses, naming
  the tensor, one whose finite entries the cast makes infinite (float16
  holds magnitudes up to 65,504)."""
  out = jnp.asarray(value).astype(dtype)
  if not jnp.issubdtype(out.dtype, jnp.floating) or out.dtype == jnp.float32:
    return out
  top = float(jnp.finfo(out.dtype).max)
  source = np.asarray(value)
  if source.size and np.issubdtype(source.dtype, np.floating):
    # max and min, not abs: no copy of a large stacked tensor
    extreme = max(abs(float(source.max())), abs(float(source.min())))
    if math.isfinite(extreme) and extreme > top:
      raise ValueError(
        f"{name}: a weight of magnitude {extreme:.4g} does not fit "
        f"{out.dtype.name} (largest {top:.6g}); load this model in "
        "bfloat16 or float32 (param_dtype)."
      )
  return out
