"""The runner's full fine-tuning section of paper_scale_memory's report,
from made-up measurements (no compilation): GB beside GiB, one device
beside the mesh's per-device peak, 16-bit over float32, what is missing
named, the papers' statements only where they make one."""

import pathlib
import sys
from typing import NamedTuple

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "benchmarks"))
import paper_scale_report as report  # noqa: E402

GIB = 2**30


class Setting(NamedTuple):  # the fields the report reads
  section: str
  model: str
  dtype: str
  batch: int
  length: int
  devices: int
  rows: tuple


def _results():
  row = "the runner's full fine-tuning"
  full = lambda m, d, n: Setting("full", m, d, 2 * n, 2048, n, (row,))
  return {
    full("opt-30b", "float16", 1): {row: {"peak": 60 * GIB, "compile_s": 3}},
    full("opt-30b", "float16", 8): {row: {"peak": 9 * GIB, "compile_s": 4}},
    full("opt-66b", "float32", 1): {row: {"peak": 250 * GIB}},
    full("opt-30b", "float32", 1): {row: {"peak": 120 * GIB}},
  }


def test_full_rows_give_gb_beside_gib_and_the_mesh_beside_one_device():
  counts = {"opt-30b": 29_974_564_864, "opt-66b": 65_716_666_368}
  lines = report.full_lines(_results(), counts, "GiB")
  text = "\n".join(lines)
  assert "2047 predicted positions" in text
  (half,) = [l for l in lines if l.startswith("| opt-30b |") and "float16" in l]
  cells = [c.strip() for c in half.strip("|").split("|")]
  assert cells[2] == "float16"
  assert cells[3] == f"{2 * counts['opt-30b'] / GIB:.2f} / 59.95"
  assert cells[4] == f"60.00 / {60 * GIB / 1e9:.2f}"
  assert cells[5] == f"9.00 / {9 * GIB / 1e9:.2f}"
  assert cells[6] == "0.500, -"  # over float32's one-device peak; no mesh
  assert "MeZO" in cells[7] and cells[8] == "7"
  (full,) = [l for l in lines if l.startswith("| opt-66b |")]
  assert full.split("|")[7].strip() == ""  # no ratio on a float32 row
  assert "(over)" in full and "not compiled in this run" in full
  assert "DP-ZO" not in full  # its statement is about the float16 run
