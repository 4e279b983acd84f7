"""What :mod:`zoprivacy.first_order.per_example_check` reports: violations, the
report and the error raised when a loss mixes examples."""

from __future__ import annotations

import dataclasses

_CAUSES = (
  "Common causes: batch norm with batch statistics (use group or layer "
  "norm, or frozen statistics), in-batch negatives or a softmax over the "
  "batch, a loss normalized by a batch mean or by the number of non-zero "
  "rows, randomness drawn per batch position. See "
  "docs/per_example_contract.md."
)


class CrossExampleDependenceError(ValueError):
  """A batched loss lets one example move another example's loss.

  Attributes:
    report: the :class:`PerExampleReport` that failed.
  """

  def __init__(self, report: PerExampleReport, *, paragraph: bool = False):
    super().__init__(report.message(paragraph=paragraph))
    self.report = report


@dataclasses.dataclass(frozen=True)
class Violation:
  """The worst row a single probe moved.

  Attributes:
    check: ``"replace"`` (example ``probe`` was replaced) or ``"permute"``
      (the batch was permuted).
    probe: the replaced position, or -1 for the permutation.
    replacement: what example ``probe`` was replaced by, in words (for the
      permutation: the slot example ``row`` moved to).
    row: the example whose loss moved the most (its position in the
      original batch).
    before: its loss on the original batch.
    after: its loss after the replacement (or after the permutation).
    change: ``|after - before|`` (inf if exactly one of them is NaN).
    tolerance: ``atol + rtol * |before|``.
    num_moved: how many compared rows moved beyond their tolerance.
    num_compared: how many rows were compared.
  """

  check: str
  probe: int
  replacement: str
  row: int
  before: float
  after: float
  change: float
  tolerance: float
  num_moved: int
  num_compared: int

  def describe(self) -> str:
    amount = (
      f"from {self.before:.7g} to {self.after:.7g} (|change| "
      f"{self.change:.2e} > tolerance {self.tolerance:.2e})"
    )
    if self.check == "permute":
      return (
        f"permuting the batch did not permute the losses: example "
        f"{self.row}'s loss moved {amount} when it moved to "
        f"{self.replacement}; "
        f"{self.num_moved} of {self.num_compared} examples moved"
      )
    return (
      f"replacing example {self.probe} by {self.replacement} moved the "
      f"loss of example {self.row} {amount}; {self.num_moved} of "
      f"{self.num_compared} other examples moved"
    )


@dataclasses.dataclass(frozen=True)
class PerExampleReport:
  """Result of :func:`check_per_example`.

  Attributes:
    ok: True when no probe moved another example's loss.
    batch_size: ``B``.
    probes: the replaced positions, in probe order.
    replacements: what each probed example was replaced by, in words.
    violations: one :class:`Violation` per failed probe (worst row only).
    max_change: the largest ``|after - before|`` over all compared rows.
    num_nonfinite: reference losses (real rows) that are NaN or infinite;
      equal non-finite values count as unchanged, which can hide mixing.
    num_evaluations: forward passes of batch size ``B`` the check cost.
    rtol: relative tolerance used.
    atol: absolute tolerance used.
  """

  ok: bool
  batch_size: int
  probes: tuple[int, ...]
  replacements: tuple[str, ...]
  violations: tuple[Violation, ...]
  max_change: float
  num_nonfinite: int
  num_evaluations: int
  rtol: float
  atol: float

  def message(self, *, paragraph: bool = False) -> str:
    """The verdict; a failure lists each violation on its own line, or,
    with ``paragraph``, in one paragraph."""
    note = ""
    if self.num_nonfinite:
      note = (
        f" Note: {self.num_nonfinite} of the {self.batch_size} "
        "reference losses are not finite, which can hide mixing; "
        "check on inputs with finite losses."
      )
    if self.ok:
      return (
        f"batched_loss is per-example on this batch (B="
        f"{self.batch_size}, {len(self.probes)} probes, max change "
        f"{self.max_change:.2e}).{note}"
      )
    lines = [
      "batched_loss mixes examples: entry i of batched_loss(params, "
      "batch) must depend only on params and on example i of batch."
    ]
    if paragraph:
      found = "; ".join(v.describe() for v in self.violations)
      return f"{lines[0]} On a synthetic batch, {found}. {_CAUSES}{note}"
    lines += [f"  - {v.describe()}" for v in self.violations]
    lines.append(_CAUSES + note)
    return "\n".join(lines)
