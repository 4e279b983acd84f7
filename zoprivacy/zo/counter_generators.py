"""The counter hashes by name, and slices of their directions.

A counter hash draws each element of ``u`` as a pure function of the key,
the leaf number and the element's position, so any slice of a leaf (a
layer of a stacked leaf, a shard, a block of rows) is drawn alone and
equals the same slice of the whole draw. The per-layer, blockwise and
sharded paths regenerate their part of ``u`` here.
"""

from __future__ import annotations

import jax

from zoprivacy.zo import counter_hash, counter_hash2

# The counter hashes, by the name that selects them (and that a trajectory
# log records): 'counter' (the first, kept so that its runs replay bit for
# bit) and 'counter2' (the same design in about three quarters of the
# instructions; what 'auto' draws with). Each module gives ``bits``,
# ``leaf_bits``, ``to_gaussian`` and ``to_rademacher``.
COUNTER_GENERATORS = {"counter": counter_hash, "counter2": counter_hash2}
COUNTER_PRNGS = tuple(COUNTER_GENERATORS)
# What 'auto' draws with from AUTO_COUNTER_MIN_PARAMETERS on.
AUTO_COUNTER = "counter2"


def leaf_slice(
  name: str,
  key: jax.Array,
  leaf: int,
  shape,
  dtype,
  *,
  start=0,
  prng: str = "counter",
) -> jax.Array:
  """Elements ``start, start + 1, ...`` (``shape``) of leaf ``leaf`` of the
  counter-hash direction ``name`` drawn from ``key`` by the counter hash
  ``prng`` (:data:`COUNTER_PRNGS`; the first, ``'counter'``, unless given).
  ``start``: a Python integer of any size, a traced integer below 2^32, or
  a :class:`~zoprivacy.zo.counter_positions.Offset` (a traced position of
  a leaf of 2^32 or more elements, :func:`~zoprivacy.zo.counter_positions.
  row_offset`).

  The per-layer and sharded paths regenerate their slice of ``u`` with this:
  it equals the same slice of ``directions.get_sampler(name,
  prng=prng)(key, params)``, flattened leaf ``leaf``. Only the
  coordinate-wise distributions
  (``'gaussian'``, ``'rademacher'``) can be sliced; a sphere needs the
  global norm.
  """
  words = _counter(prng).leaf_bits(key, leaf, shape, start=start)
  return _from_words(name, words, dtype, prng)


def leaf_at(
  name: str,
  key: jax.Array,
  leaf: int,
  positions: jax.Array,
  dtype,
  *,
  prng: str = "counter",
) -> jax.Array:
  """The elements at flat ``positions`` (any shape; e.g. a column block of
  a ``[D, V]`` kernel) of leaf ``leaf``, as :func:`leaf_slice` draws them:
  ``uint32``, or :class:`~zoprivacy.zo.counter_positions.Positions` in a
  leaf of 2^32 or more elements."""
  words = _counter(prng).bits(key, leaf, positions)
  return _from_words(name, words, dtype, prng)


def _counter(prng: str):
  if prng not in COUNTER_GENERATORS:
    raise ValueError(
      f"Slices of u are drawn by a counter hash {COUNTER_PRNGS}, got {prng!r}."
    )
  return COUNTER_GENERATORS[prng]


def _from_words(name: str, words: jax.Array, dtype, prng: str) -> jax.Array:
  if name == "gaussian":
    return COUNTER_GENERATORS[prng].to_gaussian(words, dtype)
  if name == "rademacher":
    return counter_hash.to_rademacher(words, dtype)
  raise ValueError(
    f"Only 'gaussian' and 'rademacher' directions can be drawn by slice, "
    f"got {name!r}."
  )
