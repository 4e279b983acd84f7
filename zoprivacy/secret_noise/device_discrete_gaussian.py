"""Exact discrete Gaussian noise drawn on the device, in constant time.

:func:`draw` gives ``int32[size]`` i.i.d. discrete Gaussians of integer
sigma (``P(y)`` proportional to ``exp(-y^2 / 2 sigma^2)`` on the integers,
Canonne, Kamath & Steinke 2020) as jitted JAX integer code, from the
estimator's secret noise key: a pure function of ``(key, step, sigma,
size)``, the same on every host. The host sampler
(:mod:`zoprivacy.secret_noise.vector_discrete_noise`, CKS Alg. 1-3 in
int64 numpy) is the reference; this one is the default of exact vector
noise.

**Algorithm** (rejection sampling, exact). Each candidate reads 64 bits
of Threefry-4x32-20 (:mod:`zoprivacy.secret_noise.threefry`) keyed by the
128-bit secret key, counter ``(candidate, step, stream, tag(sigma,
size))``: 11 bits pick a slot of a Walker alias table whose bucket
probabilities are exact integers over ``2^20``, 9 bits its threshold, one
bit the sign, up to 19 bits the offset ``u`` in the bucket, and 24 bits
``W``, the first bits of the uniform ``U`` of the acceptance test ``U <
alpha(y)`` (the tables and why the accepted values follow the discrete
Gaussian: :mod:`zoprivacy.secret_noise.device_tables`).

**The acceptance test is exact.** ``alpha(y) = rho_j exp(-x)``, ``x = u
(2 j w + u) / (2 sigma^2)`` in ``[0, 0.22]``. The float test computes
``x`` (four roundings: relative error at most ``4.01 u32``, ``u32 =
2^-24``), then ``exp(-x)`` by Horner's rule on its degree-6 Taylor
polynomial (remainder ``x^7 / 7! < 2^-27.5``; evaluation error at most
``gamma_12 sum |c_k| x^k <= 15.1 u32``, FMA or not, Higham 2002 eq.
(5.3), plus ``1.25 u32`` for the rounded coefficients), then ``rho_j``
times it (two more roundings): ``|alpha_f - alpha| <= 24 u32 alpha``.
The test accepts only where ``(W + 1) 2^-24 <= fl(alpha_f (1 - 2^-18))``
and rejects only where ``W 2^-24 >= fl(alpha_f (1 + 2^-18))``: with
``2^-18 = 64 u32`` both hold for the true ``alpha`` with 39 units to
spare, whatever the rounding order, so each decision is the one ``U`` and
the exact ``alpha`` make. The rest (probability below ``2^-16.9``) goes
to the exact test: ``U`` is extended by 136 fresh bits (keyed by the
candidate, so the result does not depend on which others were undecided)
and compared with 160-bit lower and upper bounds of ``alpha``, products of
certified constants formed in integers
(:mod:`zoprivacy.secret_noise.multiword`): ``U < L`` accepts, ``U >= H``
rejects. ``x`` is the integer ``u (2 j w + u)`` (up to 48 bits) times
``1 / 2 sigma^2``, so ``exp(-x)`` is the product of ``exp(-2^i / 2
sigma^2)`` over its set bits.

**Constant time, and the failure probability added to delta.** Nothing
loops on the draws: every candidate is computed; the undecided ones go,
through :func:`~zoprivacy.secret_noise.compaction.first_true`, to a fixed
number ``A`` of exact tests; the rejected lanes (about 0.7%) take the
accepted ones among ``S`` spare candidates, in order, through fixed-size
compactions; ``A``, ``S`` and the number ``R`` of lanes replaced are set
from ``size`` so that each overflows with probability at most
``2^-128`` (Chernoff bounds, :func:`~zoprivacy.secret_noise.device_tables.
pool_sizes`). The running time is a function of ``(sigma, size)`` only;
the addresses of the compactions' gathers depend on which candidates were
rejected (a cache-timing channel on a shared machine is outside the
threat model). The draw equals an exact sampler of the discrete Gaussian
restricted to ``|y| < 14.5 sigma`` (given the accepted values' indicators,
they are i.i.d. from it, and lanes take them injectively) except on the
events "a pool overflowed" and "an exact test was left open" (its bounds
are ``(4 n + 8) 2^-160`` wide); with the truncation's mass, a draw of any
size is at most ``2^-112`` in total variation from the exact i.i.d.
discrete Gaussian. That is added to delta: a step of ``k`` draws within
``k 2^-112`` of the exact mechanism makes ``T`` steps ``(epsilon, delta +
(1 + e^epsilon) T k 2^-112)``-DP (:mod:`zoprivacy.accounting.
subsampled_rdp`); the plan states it.

**32-bit arithmetic suffices.** Sigma is at most ``2^24``: ``|y| < 14.5
sigma + w < 2^28``, ``2 j w + u < 2^30``, every index below ``2^31``; the
exact ``u (2 j w + u)`` is formed from 16-bit halves (partial products
below ``2^32``), and the 160-bit arithmetic uses 16-bit limbs.
"""

from __future__ import annotations

import functools
import hashlib

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.secret_noise import compaction, multiword, threefry
from zoprivacy.secret_noise import device_tables as tables_lib

_TAYLOR = tuple(
  float(np.float32((-1) ** k / np.prod(range(1, k + 1)))) for k in range(7)
)
_DOWN = float(1.0 - tables_lib.WINDOW)
_UP = float(1.0 + tables_lib.WINDOW)
_W_SCALE = tables_lib.RHO_SCALE / 2.0**tables_lib.UNIFORM_BITS  # 2^40
_MAIN, _FRESH_A, _FRESH_B = 0, 1, 2  # counter streams


def stream_tag(sigma: int, size: int) -> int:
  """The counter word naming a draw's ``(sigma, size)``."""
  data = f"zoprivacy device discrete gaussian {int(sigma)} {int(size)}"
  return int.from_bytes(
    hashlib.blake2b(data.encode(), digest_size=4).digest(), "little"
  )


def _exp_neg(x):
  """``exp(-x)`` for ``x`` in ``[0, 0.22]``: Horner on the degree-6 Taylor
  polynomial (the module docstring bounds its error)."""
  p = jnp.float32(_TAYLOR[6])
  for c in _TAYLOR[5::-1]:
    p = p * x + jnp.float32(c)
  return p


def _fields(tab, a, b):
  """``(slot, t, negative, u, w24)`` of candidates' words ``a, b``."""
  slot = (a & np.uint32(2047)).astype(jnp.int32)
  t = ((a >> np.uint32(11)) & np.uint32(511)).astype(jnp.int32)
  negative = ((a >> np.uint32(20)) & np.uint32(1)) == 1
  u = ((b >> np.uint32(24)) << np.uint32(11)) | (a >> np.uint32(21))
  u = (u & np.uint32((1 << tab.width_bits) - 1)).astype(jnp.int32)
  w24 = (b & np.uint32(0xFFFFFF)).astype(jnp.int32)
  return slot, t, negative, u, w24


def _bucket(tab, slot, t):
  """The alias table's symbol of ``(slot, t)``: a bucket ``j < J``, or a
  "reject" symbol (``>= J``)."""
  packed = jnp.asarray(tab.packed).at[slot].get(mode="promise_in_bounds")
  return jnp.where(t < (packed & 1023), slot, packed >> 10)


def _decode(tab, a, b):
  """``4 y + state`` of candidates from their words ``a, b`` (one int32,
  so that XLA computes it in one pass): ``state`` 0 accepted, 1
  rejected, 2 left to the exact test."""
  w = 1 << tab.width_bits
  slot, t, negative, u, w24 = _fields(tab, a, b)
  symbol = _bucket(tab, slot, t)
  j = jnp.minimum(symbol, tab.buckets)  # the "reject" symbols share J
  magnitude = j * w + u
  y = jnp.where(negative, -magnitude, magnitude)
  rejected = symbol >= tab.buckets
  if w > 1:
    rejected = rejected | (negative & (magnitude == 0))
  span = 2 * j * w + u  # below 2^30
  x = u.astype(jnp.float32) * span.astype(jnp.float32)
  x = x * jnp.float32(tab.inv_two_var)
  rho = jnp.asarray(tab.rho).at[j].get(mode="promise_in_bounds")
  alpha = rho * _exp_neg(x)  # scaled by 2^64
  w_f = w24.astype(jnp.float32)
  accept = (w_f + 1.0) * jnp.float32(_W_SCALE) <= alpha * jnp.float32(_DOWN)
  reject = w_f * jnp.float32(_W_SCALE) >= alpha * jnp.float32(_UP)
  state = jnp.where(rejected | reject, 1, jnp.where(accept, 0, 2))
  return 4 * y + state


def _exponent_words(tab, j, u):
  """``(low, high)``: the 32-bit halves of the exact integer ``u (2 j w +
  u)`` (below ``2^48``), formed from 16-bit halves."""
  u = u.astype(jnp.uint32)
  v = (2 * j * (1 << tab.width_bits)).astype(jnp.uint32) + u
  u0, u1 = u & np.uint32(0xFFFF), u >> np.uint32(16)
  v0, v1 = v & np.uint32(0xFFFF), v >> np.uint32(16)
  mid = u0 * v1 + u1 * v0  # below 2^31
  low_add = (mid & np.uint32(0xFFFF)) << np.uint32(16)
  low = u0 * v0 + low_add
  carry = (low < low_add).astype(jnp.uint32)
  return low, u1 * v1 + (mid >> np.uint32(16)) + carry


def exact_bounds(tab, j, u, *, upper: bool = True):
  """160-bit ``(lower, upper, saturated)`` bounds of ``alpha = rho_j
  exp(-u (2 j w + u) / 2 sigma^2)``: the products of the certified
  constants of the set bits of the exponent's integer; ``upper=False``
  skips the upper bound (the draw needs only the lower one)."""
  low, high = _exponent_words(tab, j, u)
  exp_lo, exp_hi = jnp.asarray(tab.exp_lower), jnp.asarray(tab.exp_upper)
  state = (jnp.asarray(tab.rho_lower)[j], jnp.asarray(tab.rho_upper)[j])
  state += (jnp.zeros(j.shape, bool),)

  def body(i, state):
    lo, hi, sat = state
    i32 = jnp.asarray(i).astype(jnp.uint32)
    word = jnp.where(
      i < 32, low >> jnp.minimum(i32, 31), high >> (jnp.maximum(i32, 32) - 32)
    )
    bit = ((word & np.uint32(1)) == 1)[..., None]
    lo = jnp.where(bit, multiword.mul_lower(lo, exp_lo[i]), lo)
    if upper:
      up, s = multiword.mul_upper(hi, exp_hi[i])
      hi, sat = jnp.where(bit, up, hi), sat | (bit[..., 0] & s)
    return lo, hi, sat

  n_bits = tab.exp_lower.shape[0]  # 0 when w = 1: alpha = rho_j
  lo, hi, sat = jax.lax.fori_loop(0, n_bits, body, state) if n_bits else state
  hi, s = multiword.add_units(hi, 1)  # rho's upper bound may be 1 - 2^-160
  return lo, hi, sat | s


def exact_uniform(key, step, tag, index, w24):
  """160-bit uniforms of candidates ``index``: their first 24 bits
  ``w24``, then 136 fresh bits keyed by the candidate."""
  idx = index.astype(jnp.uint32)
  fa = threefry.threefry4x32(key, [idx, step, np.uint32(_FRESH_A), tag])
  fb = threefry.threefry4x32(key, [idx, step, np.uint32(_FRESH_B), tag])
  fresh = fa + fb[:1]
  w24 = w24.astype(jnp.uint32)
  shifted = [(w24 << np.uint32(8)) | (fresh[0] >> np.uint32(24))]
  for k in range(1, 5):
    shifted.append((fresh[k - 1] << np.uint32(8)) | (fresh[k] >> np.uint32(24)))
  return multiword.from_words(*shifted)


def _exact_accept(tab, key, step, tag, index, j, u, w24):
  """The exact test of candidates ``index`` (module docstring): ``U < L``
  accepts; otherwise ``U >= H`` rejects or the test is open (rejected, a
  failure the bound counts)."""
  uniform = exact_uniform(key, step, tag, index, w24)
  lower, _, _ = exact_bounds(tab, j, u, upper=False)
  return multiword.less(uniform, lower)


_GROUP = 4  # Threefry blocks per element of the words' reduction


def _block_words(key, step, tag, elements: int):
  """The ``16`` words of blocks ``4 e .. 4 e + 3`` of the stream for
  elements ``e < elements``, as 16 arrays: word ``w`` of block ``4 e + k``
  is array ``4 k + w``.

  Written as one variadic ``reduce`` over the four blocks of an element
  (each output keeps its block's word, masked, or-ed with zeros): XLA:CPU
  computes a loop with several outputs only for a reduction, and a loop
  per output word would compute each block once per word it keeps.
  """
  block = jnp.arange(elements, dtype=jnp.uint32)[:, None] * _GROUP
  block = block + jnp.arange(_GROUP, dtype=jnp.uint32)[None, :]
  x = threefry.threefry4x32(key, [block, step, np.uint32(_MAIN), tag])
  operands = []
  for k in range(_GROUP):
    mask = np.zeros((1, _GROUP), np.uint32)
    mask[0, k] = 0xFFFFFFFF
    operands += [w & mask for w in x]
  zeros = [np.uint32(0)] * len(operands)
  either = lambda p, q: tuple(a | b for a, b in zip(p, q))
  return jax.lax.reduce(operands, zeros, either, (1,))


def candidate_words(key, step, tag, index, elements: int):
  """``(a, b)`` of candidates ``index`` of a draw of ``8 E`` candidates
  (``E = elements``): candidate ``c = E p + e`` reads words ``2 (p mod
  2)`` and ``2 (p mod 2) + 1`` of block ``4 e + p // 2``, the layout of
  :func:`_block_words`."""
  part, e = index // elements, index % elements
  block = (4 * e + part // 2).astype(jnp.uint32)
  x = threefry.threefry4x32(key, [block, step, np.uint32(_MAIN), tag])
  odd = (part % 2) == 1
  return jnp.where(odd, x[2], x[0]), jnp.where(odd, x[3], x[1])


def draw(key_words, step, sigma: int, size: int) -> jax.Array:
  """``int32[size]`` exact discrete Gaussian noise of integer ``sigma``.

  ``key_words``: the secret key (``uint32[4]``, the estimator's noise key
  bound to the plan); ``step``: the step (a traced integer). A pure
  function of ``(key_words, step, sigma, size)``; constant time.

  Jitted on its own (``sigma`` and ``size`` static), so the step that calls
  it traces the sampler once per ``(sigma, size)`` and process, not once
  per program: the same operations, inlined by XLA as before.
  """
  return _draw(key_words, step, int(sigma), int(size))


@functools.partial(jax.jit, static_argnums=(2, 3))
def _draw(key_words, step, sigma: int, size: int) -> jax.Array:
  """:func:`draw`'s computation."""
  tab = tables_lib.tables(int(sigma))
  pools = tables_lib.pool_sizes(int(sigma), int(size))
  key = [key_words[i].astype(jnp.uint32) for i in range(4)]
  step = jnp.asarray(step).astype(jnp.uint32)
  tag = np.uint32(stream_tag(sigma, size))
  elements = -(-(int(size) + pools.spares) // (2 * _GROUP))
  total = 2 * _GROUP * elements  # the candidates beyond size are spares
  words = _block_words(key, step, tag, elements)
  a = jnp.concatenate(words[0::2])  # candidate E p + e: part p, element e
  b = jnp.concatenate(words[1::2])
  packed = _decode(tab, a, b)
  state = packed & 3
  index, _ = compaction.first_true(state == 2, pools.undecided)
  a, b = candidate_words(key, step, tag, index, elements)
  slot, t, _, u, w24 = _fields(tab, a, b)
  j = jnp.minimum(_bucket(tab, slot, t), tab.buckets)
  decided = _exact_accept(tab, key, step, tag, index, j, u, w24)
  accepted = (state == 0).at[index].set(decided, mode="drop")
  # The rejected lanes, then the accepted spares, in one compaction: the
  # k-th rejected lane takes the k-th accepted spare.
  flags = jnp.concatenate([~accepted[:size], accepted[size:]])
  found, _ = compaction.first_true(flags, 2 * pools.rejected)
  lanes = found[: pools.rejected]
  count = jnp.sum(lanes < size)
  spares = jax.lax.dynamic_slice(found, (count,), (pools.rejected,))
  y = packed >> 2
  values = y[jnp.clip(spares, size, total - 1)]
  lanes = jnp.where(lanes < size, lanes, size)  # dropped by the scatter
  return y[:size].at[lanes].set(values, mode="drop")


def failure_bound(sigma: int, size: int) -> float:
  """The total-variation bound of one draw (module docstring)."""
  return tables_lib.pool_sizes(int(sigma), int(size)).failure
