"""160-bit fixed-point numbers in ``[0, 1)`` as 16-bit limbs in ``uint32``.

The exact step of the device sampler
(:mod:`zoprivacy.secret_noise.device_discrete_gaussian`) decides the rare
candidates its float test leaves open by comparing a 160-bit uniform with
certified 160-bit bounds on an acceptance probability. Those bounds are
products of constants, formed here in integer arithmetic that needs no
64-bit types: a number is ``LIMBS = 10`` limbs ``x_0 .. x_9`` of 16 bits
each (stored in ``uint32``, the most significant first), worth ``sum_l x_l
2^-16(l+1)``. A product of two limbs is below ``2^32``; each is split into
its high and low 16 bits, and each column sums at most 22 halves (below
``2^21``) before the carries run, so nothing overflows.

:func:`mul_lower` truncates: it drops the products of limbs ``i + j >= 11``
(worth less than ``2^-170`` in all) and everything below ``2^-160`` after
the carries, so ``a b - 2^-159 < mul_lower(a, b) <= a b``;
:func:`mul_upper` adds two units of ``2^-160`` to it, so ``mul_upper(a, b)
>= a b`` (or saturates at ``1 - 2^-160`` with the flag that the true value
may reach 1).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

LIMBS = 10
BITS = 16 * LIMBS
_MASK = np.uint32(0xFFFF)


def from_int(value: int) -> np.ndarray:
  """The limbs of ``value / 2^160`` for an integer ``0 <= value < 2^160``."""
  if not 0 <= value < 1 << BITS:
    raise ValueError(f"{value} does not fit {BITS} bits.")
  return np.array(
    [(value >> (16 * (LIMBS - 1 - l))) & 0xFFFF for l in range(LIMBS)],
    np.uint32,
  )


def to_int(limbs) -> int:
  """The integer ``2^160 x`` of host limbs (tests and tables)."""
  out = 0
  for x in np.asarray(limbs).reshape(-1):
    out = (out << 16) | int(x)
  return out


def _normalize(acc):
  """Carries of column sums ``acc[0..LIMBS]`` (column ``r`` worth
  ``2^-16(r+1)``): the limbs of the columns above ``LIMBS`` (the last is
  dropped after its carry) and the carry out of column 0."""
  carry = jnp.zeros_like(acc[0])
  digits = [None] * LIMBS
  for r in range(LIMBS, -1, -1):
    v = acc[r] + carry
    if r < LIMBS:
      digits[r] = v & _MASK
    carry = v >> np.uint32(16)
  return jnp.stack(digits, axis=-1), carry


def _columns() -> np.ndarray:
  """``int32[2 L^2, L + 1]``: row ``(h, i, j)`` has a one in the column
  that half ``h`` (0 high, 1 low) of the limb product ``a_i b_j`` goes to
  (``i + j`` for the high half, ``i + j + 1`` for the low one), if it is a
  column at or above ``LIMBS`` (the others are dropped)."""
  out = np.zeros((2, LIMBS, LIMBS, LIMBS + 1), np.int32)
  for i in range(LIMBS):
    for j in range(LIMBS):
      for half, column in ((0, i + j), (1, i + j + 1)):
        if column <= LIMBS:
          out[half, i, j, column] = 1
  return out.reshape(2 * LIMBS * LIMBS, LIMBS + 1)


_COLUMNS = _columns()


def mul_lower(a, b):
  """``a b`` truncated (``a b - 2^-159 < result <= a b``); ``a``, ``b``:
  ``uint32[..., LIMBS]`` limbs. The limb products form one outer product;
  their halves are summed into columns by one integer matrix product with
  a 0/1 matrix (:func:`_columns`), then the carries run."""
  shape = jnp.broadcast_shapes(a.shape, b.shape)[:-1]
  p = a[..., :, None] * b[..., None, :]
  halves = jnp.stack([p >> np.uint32(16), p & _MASK], axis=-3)
  halves = halves.astype(jnp.int32).reshape(shape + (2 * LIMBS * LIMBS,))
  acc = jnp.matmul(
    halves, jnp.asarray(_COLUMNS), preferred_element_type=jnp.int32
  )
  acc = acc.astype(jnp.uint32)
  digits, _ = _normalize([acc[..., r] for r in range(LIMBS + 1)])
  return digits


def add_units(a, units: int):
  """``(a + units 2^-160, overflow)``: ``overflow`` is true where the sum
  reached 1 (the limbs are then all ones, ``1 - 2^-160``)."""
  acc = [a[..., l] for l in range(LIMBS)]
  acc[LIMBS - 1] = acc[LIMBS - 1] + np.uint32(units)
  carry = jnp.zeros_like(a[..., 0])
  digits = [None] * LIMBS
  for r in range(LIMBS - 1, -1, -1):
    v = acc[r] + carry
    digits[r] = v & _MASK
    carry = v >> np.uint32(16)
  out = jnp.stack(digits, axis=-1)
  overflow = carry > 0
  return jnp.where(overflow[..., None], _MASK, out), overflow


def mul_upper(a, b):
  """``(r, saturated)`` with ``r >= a b`` unless ``saturated`` (the bound
  reached 1): :func:`mul_lower` plus two units of ``2^-160``."""
  return add_units(mul_lower(a, b), 2)


def less(a, b):
  """``a < b`` (lexicographic over the limbs)."""
  lt = jnp.zeros(a.shape[:-1], bool)
  eq = jnp.ones(a.shape[:-1], bool)
  for l in range(LIMBS):
    lt = lt | (eq & (a[..., l] < b[..., l]))
    eq = eq & (a[..., l] == b[..., l])
  return lt


def from_words(*words):
  """The limbs of the 160 bits of five ``uint32`` words (most significant
  first)."""
  if len(words) != LIMBS // 2:
    raise ValueError(f"from_words takes {LIMBS // 2} words.")
  limbs = []
  for w in words:
    limbs += [w >> np.uint32(16), w & _MASK]
  return jnp.stack(limbs, axis=-1)
