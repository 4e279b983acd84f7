"""An independent NumPy transcription of the two counter hashes'
documented constructions (``zoprivacy/zo/counter_hash.py``,
``counter_hash2.py``), for positions of any size (64-bit integers: the
high word keys both lanes, and is 0 below 2^32)."""

import numpy as np

_K0_SALT = np.uint32(0x85EBCA6B)
_K1_SALT = np.uint32(0xC2B2AE35)


def mix_a(x):
  x = x ^ (x >> np.uint32(16))
  x = x * np.uint32(0x7FEB352D)
  x = x ^ (x >> np.uint32(15))
  x = x * np.uint32(0x846CA68B)
  return x ^ (x >> np.uint32(16))


def mix_b(x):
  x = x ^ (x >> np.uint32(17))
  x = x * np.uint32(0xED5AD4BB)
  x = x ^ (x >> np.uint32(11))
  x = x * np.uint32(0xAC4C1B51)
  x = x ^ (x >> np.uint32(15))
  x = x * np.uint32(0x31848BAB)
  return x ^ (x >> np.uint32(14))


def _words(k0, k1, i):
  """Salted key words and the positions' two words."""
  k0 = mix_b(np.uint32(k0) ^ _K0_SALT)
  k1 = mix_a(np.uint32(k1) ^ _K1_SALT)
  i = np.asarray(i, np.uint64)
  low = (i & np.uint64(0xFFFFFFFF)).astype(np.uint32)
  high = (i >> np.uint64(32)).astype(np.uint32)
  high_a = mix_b(high * (k1 | np.uint32(1)))
  high_c = mix_a(high * (k0 | np.uint32(1)))
  return k0, k1, low, high_a, high_c


def bits(k0, k1, leaf, i):
  """The first hash's words at positions ``i`` of leaf ``leaf``."""
  with np.errstate(over="ignore"):
    k0, k1, i, high_a, high_c = _words(k0, k1, i)
    leaf = np.uint32(leaf)
    rot = (k1 << np.uint32(16)) | (k1 >> np.uint32(16))
    lane_a = mix_b(leaf + k1) ^ high_a
    a = mix_a((i * np.uint32(0x9E3779B9)) ^ k0 ^ lane_a)
    b = mix_b(a ^ k1)
    c = mix_a(i ^ rot ^ mix_a(leaf ^ k0) ^ high_c)
    return b ^ c


def bits2(k0, k1, leaf, i):
  """The second hash's words at positions ``i`` of leaf ``leaf``."""
  with np.errstate(over="ignore"):
    k0, k1, i, high_a, high_c = _words(k0, k1, i)
    leaf = np.uint32(leaf)
    ka = mix_b(mix_a(leaf ^ k0) + k1) ^ high_a
    kb = mix_a(mix_b(leaf + k1) ^ k0) ^ high_c
    rot = (i << np.uint32(16)) | (i >> np.uint32(16))
    return mix_a(i ^ ka) ^ mix_a(rot ^ kb)
