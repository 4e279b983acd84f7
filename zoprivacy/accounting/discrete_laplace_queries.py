"""PLD of ``q`` discrete Laplace queries released from one Poisson batch.

The ``q`` integer sums of one step (:class:`zoprivacy.mechanisms.noise.
DiscreteMechanism`, ``kind='laplace'``) each move by at most ``m`` when one
example is added, and each gets independent discrete Laplace noise of scale
``b`` (``P[Y = y]`` proportional to ``exp(-|y| / b)``). Composing ``q``
subsampled PLDs would be unsound (the queries share one batch), so the ``q``
releases are composed *before* subsampling:

* the worst shift is the corner ``m 1`` (the discrete Laplace is
  log-concave, so its shifts are ordered by monotone likelihood ratio, and
  trade-off functions compose monotonically; the signs are symmetric);
* under it the likelihood ratio of the ``q``-vector is ``exp(K / b)`` with
  ``K = sum_j k(Y_j)``, ``k(y) = |y| - |y - m|`` in ``{-m, -m+2, ..., m}``,
  so ``K`` is a sufficient statistic: the pair is equivalent to the pair of
  laws of ``K``, ``P_0`` and ``P_1(K) = exp(K / b) P_0(K)``, on ``q m + 1``
  points. ``P_0`` is the exact ``q``-fold convolution (positive terms, no
  cancellation) of ``k``'s law, from the closed form ``P[Y <= 0] =
  1/(1+r)``, ``P[Y >= m] = r^m/(1+r)``, ``P[Y = y] = (1-r)/(1+r) r^|y|``,
  ``r = exp(-1/b)``.

Poisson subsampling at ``p`` then gives the remove pair ``((1-p) P_0 + p P_1,
P_0)`` and the add pair ``(P_0, (1-p) P_0 + p P_1)`` (Zhu, Dong, Wang 2022,
dominating pairs of subsampled mechanisms), each built by dp_accounting's
``from_two_probability_mass_functions`` with ``pessimistic_estimate=True``
(every privacy loss rounded up; nothing truncated). Add/remove only.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as _pld_lib

from zoprivacy.accounting import dp_accounting_adapter as _adapter


def _k_law(scale: float, m: int) -> np.ndarray:
  """Law of ``k(Y) = |Y| - |Y - m|`` on ``-m, -m+2, ..., m`` (float64)."""
  r = math.exp(-1.0 / scale)
  y = np.arange(1, m)
  inner = (1 - r) / (1 + r) * np.exp(-y / scale)
  return np.concatenate([[1 / (1 + r)], inner, [r**m / (1 + r)]])


@functools.lru_cache(maxsize=8)
def single_step_pld(
  scale: float, sensitivity: int, num_queries: int, p: float, interval: float
):
  """One Poisson-subsampled step of ``num_queries`` discrete Laplace
  queries of integer sensitivity ``sensitivity`` each (add/remove)."""
  m, q = int(sensitivity), int(num_queries)
  law = _k_law(scale, m)
  total = law
  for _ in range(q - 1):
    total = np.convolve(total, law)
  values = -q * m + 2 * np.arange(total.size)  # K on its support
  null = np.log(total)
  alt = null + values / scale
  mixture = np.logaddexp(np.log1p(-p) + null, math.log(p) + alt)
  if p == 1.0:
    mixture = alt
  as_dict = lambda logs: dict(enumerate(logs.tolist()))
  build = functools.partial(
    _pld_lib.from_two_probability_mass_functions,
    pessimistic_estimate=True,
    value_discretization_interval=interval,
  )
  remove = build(as_dict(null), as_dict(mixture))
  add = build(as_dict(mixture), as_dict(null))
  return _adapter.pld_from_remove_pmfs(remove, add)


def discrete_laplace_queries_pld(
  *,
  scale: float,
  sensitivity: int,
  num_queries: int,
  sampling_probability: float,
  num_steps: int,
  value_discretization_interval: float = 1e-4,
):
  """``num_steps`` composed steps (see the module docstring)."""
  single = single_step_pld(
    float(scale),
    int(sensitivity),
    int(num_queries),
    float(sampling_probability),
    float(value_discretization_interval),
  )
  return single if num_steps == 1 else single.self_compose(int(num_steps))
