"""A privacy ledger: what was actually executed, and what it cost.

:class:`PrivacyLedger` records every DP step a training run executes as
segments of identical steps (mechanism, noise multiplier, sampling scheme and
probability, number of queries), answers the epsilon spent after any step,
refuses a step that would exceed a configured ``(epsilon, delta)`` budget
*before* it runs, and round-trips through JSON so it can sit next to a
checkpoint. Each segment's privacy loss distribution is built and cached by
dp_accounting; segments are composed with ``PrivacyLossDistribution.compose``.

Sampling schemes (``sampling=``):

* ``'poisson'`` (DP-ZO Alg. 1 line 3; ``zoprivacy.data.sampling.PoissonSampler``):
  pessimistic PLD, add/remove maximum by default (DP-ZO App. A).
* ``'full_batch'`` (DPZero Alg. 2): the un-subsampled mechanism.
* ``'shuffling'`` (alias ``'shuffle'``; ``ShuffleSampler``: fixed-size
  batches without replacement, a fresh permutation every epoch of
  ``dataset_size // batch_size`` steps, epochs starting at ledger step 0).
  Needs ``neighboring='replace_one'``. Two accountings, chosen by
  ``shuffling_accounting``:

  - ``'conservative'`` (default, a proven bound): within an epoch each example
    is in exactly one batch, so every epoch a segment touches is charged as
    one full-batch Gaussian release (no amplification by sampling), composed
    by PLD under replace-one.
  - ``'wor_rdp'``: each batch treated as an independent uniformly random
    subset of fixed size: ``SampledWithoutReplacementDpEvent`` with the RDP
    accountant (Wang, Balle, Kasiviswanathan 2019, Thm. 27). Common practice,
    but that theorem does not cover epoch-wise shuffling; the report says so.

The report always states which scheme(s) were used and which accountant.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Dict, List, Optional, Tuple

import dp_accounting
from dp_accounting.pld import privacy_loss_distribution as _pld_lib

from zoprivacy.accounting import epsilon as _eps
from zoprivacy.accounting import events as _ev

SAMPLING_SCHEMES = ("poisson", "full_batch", "shuffling")
_SAMPLING_ALIASES = {"poisson": "poisson", "full_batch": "full_batch",
                     "full": "full_batch", "shuffling": "shuffling",
                     "shuffle": "shuffling"}
SHUFFLING_ACCOUNTINGS = ("conservative", "wor_rdp")
_FORMAT = "zoprivacy.accounting.PrivacyLedger"
_VERSION = 1


class PrivacyBudgetExceededError(RuntimeError):
  """Raised, before anything runs or is recorded, for a step over budget."""

  def __init__(self, message: str, *, projected_epsilon: float,
               epsilon_budget: float, delta: float, steps_requested: int,
               steps_remaining: Optional[int] = None):
    super().__init__(message)
    self.projected_epsilon = projected_epsilon
    self.epsilon_budget = epsilon_budget
    self.delta = delta
    self.steps_requested = steps_requested
    self.steps_remaining = steps_remaining


@dataclasses.dataclass(frozen=True)
class LedgerSegment:
  """``num_steps`` identical DP steps starting at ledger step ``start_step``.

  ``noise_multiplier`` is the effective multiplier of one step: noise std (or
  Laplace scale) over ``C``; with ``num_queries = q`` Gaussian queries each
  query's noise std is ``sqrt(q) * noise_multiplier * C`` (NOTES item 5).
  """
  mechanism: str
  noise_multiplier: float
  sampling: str
  sampling_probability: float
  num_queries: int
  batch_size: Optional[int]
  dataset_size: Optional[int]
  start_step: int
  num_steps: int

  def params(self) -> Tuple:
    return (self.mechanism, self.noise_multiplier, self.sampling,
            self.sampling_probability, self.num_queries, self.batch_size,
            self.dataset_size)

  @property
  def steps_per_epoch(self) -> Optional[int]:
    if self.sampling != "shuffling":
      return None
    return self.dataset_size // self.batch_size

  def epochs_touched(self) -> int:
    """Epochs (of ``dataset_size // batch_size`` steps from step 0) it intersects."""
    spe = self.steps_per_epoch
    first = self.start_step // spe
    last = (self.start_step + self.num_steps - 1) // spe
    return last - first + 1

  def to_dict(self) -> Dict:
    return dataclasses.asdict(self)


class PrivacyLedger:
  """Records executed DP steps and enforces an ``(epsilon, delta)`` budget.

  Typical use in a training loop::

      ledger = PrivacyLedger(delta=1e-5, epsilon_budget=1.0)
      for step in range(T):
        ledger.record(1, noise_multiplier=16.4, sampling_probability=0.016)
        # raises PrivacyBudgetExceededError *before* mutating the ledger;
        # call it before the step's noisy release.
        ...
      ledger.save("ckpt/privacy_ledger.json")

  ``check_can_spend`` / ``record`` are O(1) after the first call for given
  parameters: the ledger computes (once per parameter change, by galloping
  and bisection on fine PLD epsilons) how many steps of those parameters fit
  in the budget.

  Args:
    delta: the delta at which epsilon is reported and the budget enforced.
    epsilon_budget: optional epsilon budget; ``None`` records without limit.
    neighboring: ``'add_or_remove'`` (default) or ``'replace_one'``.
    value_discretization_interval: PLD interval (pessimistic estimate).
    shuffling_accounting: ``'conservative'`` or ``'wor_rdp'`` (module doc).
  """

  def __init__(self, *, delta: float, epsilon_budget: Optional[float] = None,
               neighboring: _ev.NeighboringLike = "add_or_remove",
               value_discretization_interval: float = 1e-4,
               shuffling_accounting: str = "conservative"):
    self.delta = _ev.check_delta(delta)
    self.epsilon_budget = (None if epsilon_budget is None else
                           _ev.check_epsilon(epsilon_budget, "epsilon_budget"))
    self.neighboring = _ev.neighboring_name(neighboring)
    self.value_discretization_interval = _ev.check_interval(
        value_discretization_interval)
    if shuffling_accounting not in SHUFFLING_ACCOUNTINGS:
      raise ValueError(f"shuffling_accounting must be one of "
                       f"{SHUFFLING_ACCOUNTINGS}, got {shuffling_accounting!r}.")
    self.shuffling_accounting = shuffling_accounting
    self._segments: List[LedgerSegment] = []
    self._segment_pld_cache: Dict[LedgerSegment, object] = {}
    self._prefix_pld_cache: Dict[Tuple[LedgerSegment, ...], object] = {}
    self._max_run_cache: Dict[Tuple, int] = {}

  # ------------------------------------------------------------ properties

  @property
  def segments(self) -> Tuple[LedgerSegment, ...]:
    return tuple(self._segments)

  @property
  def num_steps(self) -> int:
    return sum(s.num_steps for s in self._segments)

  @property
  def sampling_schemes(self) -> Tuple[str, ...]:
    return tuple(sorted({s.sampling for s in self._segments}))

  @property
  def uses_rdp(self) -> bool:
    """True when the enforced epsilon comes from RDP (``'wor_rdp'`` shuffling)."""
    return (self.shuffling_accounting == "wor_rdp"
            and any(s.sampling == "shuffling" for s in self._segments))

  # -------------------------------------------------------------- building

  def _make_segment(self, num_steps, *, noise_multiplier, sampling_probability,
                    mechanism, num_queries, sampling, batch_size, dataset_size,
                    start_step) -> LedgerSegment:
    mechanism = _ev.check_mechanism(mechanism)
    sigma = _ev.check_noise_multiplier(noise_multiplier)
    q = _ev.check_num_steps(num_queries, name="num_queries")
    steps = _ev.check_num_steps(num_steps, minimum=0)
    if sampling not in _SAMPLING_ALIASES:
      raise ValueError(f"sampling must be one of {SAMPLING_SCHEMES} (or "
                       f"'shuffle'), got {sampling!r}.")
    sampling = _SAMPLING_ALIASES[sampling]
    if mechanism == "laplace" and self.neighboring != "add_or_remove":
      raise ValueError("The Laplace mechanism is accounted under add_or_remove "
                       "only (dp_accounting has no replace-one Laplace PLD).")
    if sampling == "poisson":
      if sampling_probability is None:
        raise ValueError("Poisson sampling needs sampling_probability.")
      p = _ev.check_sampling_probability(sampling_probability)
      batch_size = dataset_size = None
    elif sampling == "full_batch":
      if sampling_probability not in (None, 1, 1.0):
        raise ValueError("full_batch sampling has sampling_probability 1, got "
                         f"{sampling_probability!r}.")
      p, batch_size, dataset_size = 1.0, None, None
    else:
      if self.neighboring != "replace_one":
        raise ValueError(
            "Shuffling (fixed-size batches without replacement) is accounted "
            "under replace-one only (the dataset size is public); create the "
            "ledger with neighboring='replace_one'.")
      if mechanism != "gaussian":
        raise ValueError("Shuffling is supported for the Gaussian mechanism "
                         "only.")
      if batch_size is None or dataset_size is None:
        raise ValueError("Shuffling needs batch_size and dataset_size.")
      batch_size = _ev.check_num_steps(batch_size, name="batch_size")
      dataset_size = _ev.check_num_steps(dataset_size, name="dataset_size")
      if batch_size > dataset_size:
        raise ValueError(f"batch_size ({batch_size}) must be <= dataset_size "
                         f"({dataset_size}).")
      p = batch_size / dataset_size
      if sampling_probability is not None and not math.isclose(
          sampling_probability, p, rel_tol=1e-12):
        raise ValueError(f"sampling_probability {sampling_probability!r} does "
                         f"not match batch_size/dataset_size = {p!r}.")
    return LedgerSegment(mechanism=mechanism, noise_multiplier=sigma,
                         sampling=sampling, sampling_probability=p,
                         num_queries=q, batch_size=batch_size,
                         dataset_size=dataset_size, start_step=int(start_step),
                         num_steps=steps)

  def _pld_event(self, seg: LedgerSegment) -> dp_accounting.DpEvent:
    """The event charged by the PLD accounting of ``seg``."""
    if seg.mechanism == "laplace":
      return _ev.poisson_laplace_event(
          noise_multiplier=seg.noise_multiplier,
          sampling_probability=seg.sampling_probability,
          num_steps=seg.num_steps)
    if seg.sampling == "shuffling":
      # One full-batch release per epoch touched: no amplification.
      return _ev.full_batch_gaussian_event(
          noise_multiplier=seg.noise_multiplier, num_steps=seg.epochs_touched())
    return _ev.poisson_gaussian_queries_event(
        noise_multiplier=seg.noise_multiplier, num_queries=seg.num_queries,
        sampling_probability=seg.sampling_probability, num_steps=seg.num_steps)

  def _rdp_event(self, seg: LedgerSegment) -> dp_accounting.DpEvent:
    """The event charged by the RDP accounting of ``seg``."""
    if seg.sampling == "shuffling":
      return _ev.sampled_without_replacement_gaussian_event(
          noise_multiplier=seg.noise_multiplier, batch_size=seg.batch_size,
          dataset_size=seg.dataset_size, num_steps=seg.num_steps)
    if seg.mechanism == "laplace":
      return _ev.poisson_laplace_event(
          noise_multiplier=seg.noise_multiplier,
          sampling_probability=seg.sampling_probability,
          num_steps=seg.num_steps)
    return _ev.poisson_gaussian_event(
        noise_multiplier=seg.noise_multiplier,
        sampling_probability=seg.sampling_probability, num_steps=seg.num_steps)

  # ----------------------------------------------------------- accounting

  def _segment_pld(self, seg: LedgerSegment):
    pld = self._segment_pld_cache.get(seg)
    if pld is None:
      pld = _eps.build_pld(
          self._pld_event(seg), neighboring=self.neighboring,
          value_discretization_interval=self.value_discretization_interval)
      if len(self._segment_pld_cache) > 32:  # bounded memory
        self._segment_pld_cache.clear()
      self._segment_pld_cache[seg] = pld
    return pld

  def _prefix_pld(self, segs: Tuple[LedgerSegment, ...]):
    if not segs:
      return _pld_lib.identity(self.value_discretization_interval)
    pld = self._prefix_pld_cache.get(segs)
    if pld is None:
      pld = self._prefix_pld(segs[:-1]).compose(self._segment_pld(segs[-1]))
      if len(self._prefix_pld_cache) > 16:
        self._prefix_pld_cache.clear()
      self._prefix_pld_cache[segs] = pld
    return pld

  def _pld_epsilon_of(self, segs: Tuple[LedgerSegment, ...]) -> float:
    segs = tuple(s for s in segs if s.num_steps > 0)
    if not segs:
      return 0.0
    prefix = self._prefix_pld(segs[:-1])
    total = prefix.compose(self._segment_pld(segs[-1]))
    return float(total.get_epsilon_for_delta(self.delta))

  def _rdp_epsilon_of(self, segs: Tuple[LedgerSegment, ...]) -> float:
    segs = tuple(s for s in segs if s.num_steps > 0)
    if not segs:
      return 0.0
    event = dp_accounting.ComposedDpEvent([self._rdp_event(s) for s in segs])
    return _eps.rdp_epsilon(event, delta=self.delta,
                            neighboring=self.neighboring)

  def _enforced_epsilon_of(self, segs: Tuple[LedgerSegment, ...]) -> float:
    wor = (self.shuffling_accounting == "wor_rdp"
           and any(s.sampling == "shuffling" for s in segs))
    return self._rdp_epsilon_of(segs) if wor else self._pld_epsilon_of(segs)

  def _truncated(self, step: int) -> Tuple[LedgerSegment, ...]:
    out = []
    for s in self._segments:
      if s.start_step >= step:
        break
      n = min(s.num_steps, step - s.start_step)
      out.append(dataclasses.replace(s, num_steps=n))
    return tuple(out)

  def epsilon(self, step: Optional[int] = None) -> float:
    """Epsilon spent after the first ``step`` recorded steps (default: all).

    The pessimistic PLD epsilon at ``self.delta`` (add/remove maximum by
    default; DP-ZO App. A), or the RDP epsilon for ``'wor_rdp'`` shuffling.
    """
    if step is None:
      segs = tuple(self._segments)
    else:
      step = _ev.check_num_steps(step, name="step", minimum=0)
      if step > self.num_steps:
        raise ValueError(f"step {step} is beyond the {self.num_steps} "
                         "recorded steps.")
      segs = self._truncated(step)
    return self._enforced_epsilon_of(segs)

  def rdp_epsilon(self) -> Optional[float]:
    """RDP epsilon of everything recorded, or None where dp_accounting's RDP
    cannot account it (Poisson-subsampled Laplace; Poisson under replace-one)."""
    try:
      return self._rdp_epsilon_of(tuple(self._segments))
    except ValueError:
      return None

  # --------------------------------------------------------------- budget

  def _candidate(self, num_steps: int, params: Dict) -> Tuple[
      Tuple[LedgerSegment, ...], LedgerSegment, int]:
    """(prefix, run segment with ``num_steps`` more, run length before)."""
    new = self._make_segment(num_steps, start_step=self.num_steps, **params)
    if self._segments and self._segments[-1].params() == new.params():
      last = self._segments[-1]
      prefix = tuple(self._segments[:-1])
      run = dataclasses.replace(last, num_steps=last.num_steps + num_steps)
      return prefix, run, last.num_steps
    return tuple(self._segments), new, 0

  def _validate_accountable(self, segs: Tuple[LedgerSegment, ...]) -> None:
    """Raises ValueError if the enforced accountant cannot handle ``segs``."""
    wor = (self.shuffling_accounting == "wor_rdp"
           and any(s.sampling == "shuffling" for s in segs))
    if wor:
      for s in segs:
        if s.sampling == "poisson" and s.sampling_probability < 1.0:
          raise ValueError(
              "shuffling_accounting='wor_rdp' needs the RDP accountant, which "
              "has no Poisson sampling under replace-one; do not mix Poisson "
              "and shuffled segments in one 'wor_rdp' ledger.")

  def _max_run_steps(self, prefix, run: LedgerSegment) -> int:
    """Largest run length m with epsilon(prefix + run[m]) <= budget.

    Epsilon is non-decreasing in m (composition cannot reduce it). Upward
    phase: secant steps in (log m, log eps) aimed just past the budget, at
    most x8 in m per step, so the PLD is never evaluated far beyond the
    budget (that would be slow and memory hungry). Then an interpolation
    search with bisection safeguard finds the exact integer boundary.
    """
    key = (prefix, run.params(), run.start_step)
    cached = self._max_run_cache.get(key)
    if cached is not None:
      return cached
    budget = self.epsilon_budget
    evals: Dict[int, float] = {}

    def eps_at(m: int) -> float:
      if m not in evals:
        seg = dataclasses.replace(run, num_steps=m)
        evals[m] = self._enforced_epsilon_of(prefix + (seg,))
      return evals[m]

    cap = 2**40
    if eps_at(1) > budget:
      result = 0
    else:
      lo, hi, prev = 1, None, None
      while hi is None:
        e = eps_at(lo)
        if e <= 0:
          nxt = lo * 8
        else:
          slope = 1.0
          if prev is not None and eps_at(prev) > 0:
            slope = ((math.log(e) - math.log(eps_at(prev)))
                     / (math.log(lo) - math.log(prev)))
            slope = min(max(slope, 0.3), 2.0)
          # Aim just past the budget so that a bracket forms quickly.
          log_m = math.log(lo) + (math.log(1.01 * budget) - math.log(e)) / slope
          nxt = int(math.exp(min(log_m, math.log(8.0 * lo)))) + 1
        nxt = min(cap, max(lo + 1, nxt))
        if eps_at(nxt) <= budget:
          if nxt == cap:
            break
          prev, lo = lo, nxt
        else:
          hi = nxt
      if hi is None:
        result = cap
      else:
        last_width = None
        use_bisection = False
        while hi - lo > 1:
          e_lo, e_hi = eps_at(lo), eps_at(hi)
          if use_bisection or e_lo <= 0:
            mid = (lo + hi) // 2
          else:
            t = ((math.log(budget) - math.log(e_lo))
                 / (math.log(e_hi) - math.log(e_lo)))
            mid = int(math.exp(math.log(lo) + t * (math.log(hi) - math.log(lo))))
          mid = min(max(mid, lo + 1), hi - 1)
          if eps_at(mid) <= budget:
            lo = mid
            if mid + 1 < hi and eps_at(mid + 1) > budget:
              hi = mid + 1
          else:
            hi = mid
            if mid - 1 > lo and eps_at(mid - 1) <= budget:
              lo = mid - 1
          width = hi - lo
          use_bisection = last_width is not None and width > last_width // 2
          last_width = width
        result = lo
    if len(self._max_run_cache) > 256:
      self._max_run_cache.clear()
    self._max_run_cache[key] = result
    return result

  def steps_remaining(self, *, noise_multiplier: float,
                      sampling_probability: Optional[float] = None,
                      mechanism: str = "gaussian", num_queries: int = 1,
                      sampling: str = "poisson",
                      batch_size: Optional[int] = None,
                      dataset_size: Optional[int] = None) -> Optional[int]:
    """How many more steps of these parameters fit in the budget (None: no budget)."""
    params = dict(noise_multiplier=noise_multiplier,
                  sampling_probability=sampling_probability,
                  mechanism=mechanism, num_queries=num_queries,
                  sampling=sampling, batch_size=batch_size,
                  dataset_size=dataset_size)
    prefix, run, before = self._candidate(0, params)
    self._validate_accountable(prefix + (run,))
    if self.epsilon_budget is None:
      return None
    return max(self._max_run_steps(prefix, run) - before, 0)

  def check_can_spend(self, num_steps: int = 1, *, noise_multiplier: float,
                      sampling_probability: Optional[float] = None,
                      mechanism: str = "gaussian", num_queries: int = 1,
                      sampling: str = "poisson",
                      batch_size: Optional[int] = None,
                      dataset_size: Optional[int] = None) -> None:
    """Raises PrivacyBudgetExceededError if ``num_steps`` more steps would
    take the enforced epsilon over the budget. Never mutates the ledger."""
    num_steps = _ev.check_num_steps(num_steps)
    params = dict(noise_multiplier=noise_multiplier,
                  sampling_probability=sampling_probability,
                  mechanism=mechanism, num_queries=num_queries,
                  sampling=sampling, batch_size=batch_size,
                  dataset_size=dataset_size)
    prefix, run, before = self._candidate(num_steps, params)
    self._validate_accountable(prefix + (run,))
    if self.epsilon_budget is None:
      return
    allowed = self._max_run_steps(prefix, dataclasses.replace(run, num_steps=0))
    if before + num_steps <= allowed:
      return
    projected = self._enforced_epsilon_of(prefix + (run,))
    remaining = max(allowed - before, 0)
    raise PrivacyBudgetExceededError(
        f"Refusing {num_steps} step(s) at step {self.num_steps}: epsilon would "
        f"reach {projected:.6g} > budget {self.epsilon_budget:g} at delta="
        f"{self.delta:g} ({remaining} step(s) of these parameters remain).",
        projected_epsilon=projected, epsilon_budget=self.epsilon_budget,
        delta=self.delta, steps_requested=num_steps, steps_remaining=remaining)

  def record(self, num_steps: int = 1, *, noise_multiplier: float,
             sampling_probability: Optional[float] = None,
             mechanism: str = "gaussian", num_queries: int = 1,
             sampling: str = "poisson", batch_size: Optional[int] = None,
             dataset_size: Optional[int] = None) -> None:
    """Records ``num_steps`` executed steps, after :meth:`check_can_spend`.

    Call it before the step's noisy release: if the budget would be exceeded
    it raises PrivacyBudgetExceededError and records nothing.
    """
    params = dict(noise_multiplier=noise_multiplier,
                  sampling_probability=sampling_probability,
                  mechanism=mechanism, num_queries=num_queries,
                  sampling=sampling, batch_size=batch_size,
                  dataset_size=dataset_size)
    self.check_can_spend(num_steps, **params)
    prefix, run, _ = self._candidate(num_steps, params)
    self._segments = list(prefix) + [run]

  # -------------------------------------------------------------- report

  def summary(self) -> Dict:
    """A JSON-able summary: steps, epsilon, accountant and schemes used."""
    shuffled = any(s.sampling == "shuffling" for s in self._segments)
    if self.uses_rdp:
      accountant = ("RDP (replace-one); shuffling accounted as i.i.d. sampling "
                    "without replacement (WBK'19 Thm. 27), NOT a proven bound "
                    "for epoch-wise shuffling")
    else:
      accountant = (f"PLD (pessimistic, interval "
                    f"{self.value_discretization_interval:g}, "
                    f"{self.neighboring}"
                    + (", max of add and remove" if self.neighboring ==
                       "add_or_remove" else "") + ")")
      if shuffled:
        accountant += ("; shuffling accounted conservatively: one full-batch "
                       "release per epoch touched, no amplification")
    return {
        "num_steps": self.num_steps,
        "delta": self.delta,
        "epsilon": self.epsilon(),
        "epsilon_budget": self.epsilon_budget,
        "rdp_epsilon": self.rdp_epsilon(),
        "neighboring": self.neighboring,
        "sampling_schemes": list(self.sampling_schemes),
        "shuffling_used": shuffled,
        "accountant": accountant,
    }

  def report(self) -> str:
    """Human-readable report; says explicitly when shuffling was used."""
    s = self.summary()
    lines = [
        f"Privacy ledger: {s['num_steps']} steps in {len(self._segments)} "
        "segment(s)",
        f"  epsilon = {s['epsilon']:.6g} at delta = {s['delta']:g}"
        + (f" (budget {s['epsilon_budget']:g})" if s["epsilon_budget"] else ""),
        f"  accountant: {s['accountant']}",
        "  RDP epsilon (for comparison): "
        + ("n/a" if s["rdp_epsilon"] is None else f"{s['rdp_epsilon']:.6g}"),
        f"  sampling scheme(s): {', '.join(s['sampling_schemes']) or 'none'}",
    ]
    if s["shuffling_used"]:
      lines.append(
          "  NOTE: SHUFFLING (fixed-size batches without replacement) was used "
          "for some steps, not Poisson sampling.")
    for seg in self._segments:
      extra = (f" batch={seg.batch_size}/n={seg.dataset_size}"
               if seg.sampling == "shuffling" else
               f" p={seg.sampling_probability:g}")
      lines.append(
          f"  - steps [{seg.start_step}, {seg.start_step + seg.num_steps}): "
          f"{seg.mechanism} sigma={seg.noise_multiplier:g} q={seg.num_queries} "
          f"{seg.sampling}{extra}")
    return "\n".join(lines)

  # ------------------------------------------------------------ JSON

  def to_dict(self) -> Dict:
    return {
        "format": _FORMAT,
        "version": _VERSION,
        "delta": self.delta,
        "epsilon_budget": self.epsilon_budget,
        "neighboring": self.neighboring,
        "value_discretization_interval": self.value_discretization_interval,
        "shuffling_accounting": self.shuffling_accounting,
        "segments": [s.to_dict() for s in self._segments],
    }

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), indent=2)

  @classmethod
  def from_dict(cls, data: Dict) -> "PrivacyLedger":
    if data.get("format") != _FORMAT or data.get("version") != _VERSION:
      raise ValueError("Not a zoprivacy PrivacyLedger (version "
                       f"{_VERSION}) document.")
    ledger = cls(delta=data["delta"], epsilon_budget=data["epsilon_budget"],
                 neighboring=data["neighboring"],
                 value_discretization_interval=data[
                     "value_discretization_interval"],
                 shuffling_accounting=data["shuffling_accounting"])
    step = 0
    for raw in data["segments"]:
      seg = ledger._make_segment(
          raw["num_steps"], noise_multiplier=raw["noise_multiplier"],
          sampling_probability=raw["sampling_probability"],
          mechanism=raw["mechanism"], num_queries=raw["num_queries"],
          sampling=raw["sampling"], batch_size=raw["batch_size"],
          dataset_size=raw["dataset_size"], start_step=raw["start_step"])
      if seg.start_step != step:
        raise ValueError(f"Ledger segments are not contiguous at step {step}.")
      step += seg.num_steps
      ledger._segments.append(seg)
    ledger._validate_accountable(tuple(ledger._segments))
    return ledger

  @classmethod
  def from_json(cls, text: str) -> "PrivacyLedger":
    return cls.from_dict(json.loads(text))

  def save(self, path) -> None:
    with open(path, "w", encoding="utf-8") as f:
      f.write(self.to_json())

  @classmethod
  def load(cls, path) -> "PrivacyLedger":
    with open(path, encoding="utf-8") as f:
      return cls.from_json(f.read())
