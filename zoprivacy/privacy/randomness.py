"""Two kinds of randomness, never mixed: public directions, secret noise.

* **Public** randomness draws the perturbation directions ``u``. It comes
  from a ``direction_key`` that may be published: with the released scalars
  it replays the whole trajectory (DP-ZO Sec. 5, "seed + scalar").
* **Secret** randomness draws the privacy noise and the Poisson batches. Its
  key has 256 bits from the operating system's entropy
  (:func:`secrets.token_bytes`) by default. It is never derived from the
  direction key, from a config value or from anything written to results.
  A library state's key stays in its process's memory
  (:mod:`zoprivacy.privacy.noise_sessions`); a runner's secret and the keys
  bound to it live in its state and checkpoints, which are therefore secret
  material (owner-only).

From one 256-bit secret, independent streams are derived by domain
separation with keyed BLAKE2b (a pseudorandom function):

* :func:`jax_noise_key`: a 128-bit ``rbg`` JAX key for floating-point noise
  inside a jitted step (XLA's counter-based ``RngBitGenerator``);
* :class:`KeyedStream`: a SHAKE-256 stream (a cryptographic XOF) keyed by
  ``(secret, purpose, counter)``, whose ``randbelow`` feeds the exact
  discrete samplers;
* :func:`numpy_generator`: a Philox generator with a 128-bit derived key,
  for Poisson sampling (fast, counter-based).

Every stream is a pure function of ``(secret, purpose, step)``. A step
computed again over other inputs (a replay after a crash, a forced resume
with another learning rate) must not reuse them: subtracting two releases
that share their noise reveals the noise-free difference of their sums. A
runner therefore keys every stream of a step also by its *attempt*, how
many times the step may already have been computed (its ledger's record):
:func:`attempt_secret` gives each attempt an independent secret, and
attempt 0 is the secret itself (an uninterrupted run is unchanged).

Reproducible noise exists only behind :func:`insecure_test_secret`, whose
use warns (:class:`InsecureTestNoiseWarning`) and marks the privacy plan as
not private.
"""

from __future__ import annotations

import hashlib
import secrets as _secrets
import struct
import warnings

import jax
import jax.numpy as jnp
import numpy as np

SECRET_BYTES = 32
_TEST_DOMAIN = b"zoprivacy insecure test noise, never use for a private run"


class InsecureTestNoiseWarning(UserWarning):
  """Noise or batches were drawn from a reproducible, public seed."""


def new_secret() -> bytes:
  """256 bits from the operating system's CSPRNG."""
  return _secrets.token_bytes(SECRET_BYTES)


def insecure_test_secret(seed: int) -> bytes:
  """A *reproducible* secret for tests and debugging: NOT private.

  Anyone who knows ``seed`` can regenerate every noise draw and batch, which
  voids the privacy guarantee; the privacy plan of a run that uses it says
  so. Warns every time it is called.
  """
  if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
    raise TypeError(f"The insecure test seed must be an integer, got {seed!r}.")
  warnings.warn(
    "Noise and batch sampling use a reproducible test seed: this run is "
    "NOT differentially private.",
    InsecureTestNoiseWarning,
    stacklevel=3,
  )
  return hashlib.sha256(_TEST_DOMAIN + str(int(seed)).encode()).digest()


def check_secret(secret) -> bytes:
  secret = (
    bytes(np.asarray(secret, np.uint8).tobytes())
    if not isinstance(secret, bytes)
    else secret
  )
  if len(secret) != SECRET_BYTES:
    raise ValueError(f"A secret has {SECRET_BYTES} bytes, got {len(secret)}.")
  return secret


def derive(
  secret: bytes, purpose: str, *counters: int, num_bytes: int = 16
) -> bytes:
  """Keyed BLAKE2b of ``(purpose, counters)``: independent sub-secrets."""
  data = (
    purpose.encode()
    + b"\x00"
    + b"".join(struct.pack("<q", int(c)) for c in counters)
  )
  return hashlib.blake2b(
    data, key=check_secret(secret), digest_size=num_bytes
  ).digest()


def attempt_secret(secret: bytes, attempt: int) -> bytes:
  """The secret of the ``attempt``-th computation of a step: ``secret``
  itself for attempt 0, an independent 256-bit secret (keyed BLAKE2b, a
  PRF) for each later attempt."""
  if int(attempt) != attempt or attempt < 0:
    raise ValueError(f"attempt must be an integer >= 0, got {attempt!r}.")
  if attempt == 0:
    return check_secret(secret)
  return derive(secret, "replay attempt", int(attempt), num_bytes=SECRET_BYTES)


def secret_to_array(secret: bytes) -> np.ndarray:
  """The secret as ``uint8[32]``, to live in a checkpointed pytree."""
  return np.frombuffer(check_secret(secret), np.uint8).copy()


def jax_noise_key(secret: bytes, purpose: str = "noise") -> jax.Array:
  """A 128-bit ``rbg`` JAX key derived from the secret."""
  words = np.frombuffer(derive(secret, purpose), np.uint32)
  return jax.random.wrap_key_data(jnp.asarray(words), impl="rbg")


class KeyedStream:
  """A deterministic CSPRNG: SHAKE-256 of ``(secret, purpose, *counters)``.

  ``randbelow(n)`` returns an exactly uniform integer in ``[0, n)`` by
  rejection sampling on fresh stream bits; the exact discrete samplers of
  :mod:`zoprivacy.secret_noise.discrete_noise` need nothing else.

  Linear cost: hashlib's ``shake_256`` can only return a digest from its
  start, so the stream is read in blocks that double in size (the digest
  of ``2L`` bytes extends the one of ``L``): ``N`` bytes read cost
  ``O(N)`` hashing in all, not ``O(N^2)``.
  """

  _CHUNK = 512

  def __init__(self, secret: bytes, purpose: str, *counters: int):
    self._xof = hashlib.shake_256(
      derive(secret, purpose, *counters, num_bytes=32)
    )
    self._buffer = b""
    self._pos = 0

  def _read(self, num_bytes: int) -> bytes:
    if self._pos + num_bytes > len(self._buffer):
      # shake_256 is an XOF: a longer digest extends the shorter one.
      size = max(2 * len(self._buffer), self._CHUNK, self._pos + num_bytes)
      self._buffer = self._xof.digest(size)
    out = self._buffer[self._pos : self._pos + num_bytes]
    self._pos += num_bytes
    return out

  def randbits(self, k: int) -> int:
    if k <= 0:
      return 0
    value = int.from_bytes(self._read((k + 7) // 8), "little")
    return value >> (8 * ((k + 7) // 8) - k)

  def randbelow(self, n: int) -> int:
    if n <= 0:
      raise ValueError(f"randbelow needs n >= 1, got {n}.")
    k = int(n).bit_length()
    while True:
      r = self.randbits(k)
      if r < n:
        return r


def secret_from_key_data(words) -> bytes:
  """The 32-byte secret of an estimator's 128-bit noise key.

  An estimator's state holds one secret, its ``noise_key`` (an ``rbg`` key,
  ``uint32[4]``). Its exact integer noise reads SHAKE-256 streams keyed by
  this expansion of the key's bits (BLAKE2b, a PRF, domain-separated from
  every other use of the key), so the host sampler and a jitted callback
  derive the same streams from the same state.
  """
  data = np.asarray(words, np.uint32).astype("<u4").tobytes()
  if not data:
    raise ValueError("A noise key has no bits.")
  return hashlib.blake2b(
    b"zoprivacy estimator exact noise", key=data, digest_size=SECRET_BYTES
  ).digest()


def key_from_secret(secret: bytes, *counters: int) -> jax.Array:
  """A 128-bit ``rbg`` noise key derived from ``(secret, *counters)``."""
  words = np.frombuffer(derive(secret, "noise key", *counters), np.uint32)
  return jax.random.wrap_key_data(jnp.asarray(words), impl="rbg")


def numpy_generator(
  secret: bytes, purpose: str, counter: int
) -> np.random.Generator:
  """Philox-4x64 with a 128-bit key derived for ``(purpose, counter)``."""
  key = np.frombuffer(derive(secret, purpose, counter), np.uint64)
  return np.random.Generator(np.random.Philox(key=key))
