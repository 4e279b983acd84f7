"""The DPZero quadratic grid: the paper's Table 6 constants and the full, quick and fast grids."""

from __future__ import annotations

import dataclasses

from experiments.reproductions import quadratic

EPSILON = 2.0
DELTA = 1e-6
NUM_TRAIN = 10000
NUM_TEST = 10000

# DPZero Table 6.
PAPER_DIMS = (20, 50, 100, 200, 500, 1000, 2000)
PAPER_ITERATIONS = (10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120)
PAPER_STEPSIZES = (
  1e-5,
  3e-5,
  1e-4,
  3e-4,
  1e-3,
  3e-3,
  1e-2,
  3e-2,
  0.1,
  0.3,
  1.0,
)
PAPER_CLIPS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0)


@dataclasses.dataclass(frozen=True)
class GridConfig:
  """What to run. ``iterations``/``stepsizes``/``clips`` may depend on method."""

  name: str
  dims: tuple[int, ...]
  modes: tuple[str, ...]
  methods: tuple[str, ...]
  iterations: dict
  stepsizes: dict
  clips: dict
  num_train: int = NUM_TRAIN
  num_test: int = NUM_TEST
  directions: str = "sphere"
  seed: int = 0


def _same(value) -> dict:
  return {m: tuple(value) for m in quadratic.METHODS}


FULL = GridConfig(
  name="full",
  dims=PAPER_DIMS,
  modes=tuple(quadratic.HESSIANS),
  methods=quadratic.METHODS,
  iterations=_same(PAPER_ITERATIONS),
  stepsizes=_same(PAPER_STEPSIZES),
  clips=_same(PAPER_CLIPS),
)

# The region of Table 6's grid that holds the winners of the full grid
# (measured with the full grid, see REPRODUCTION.md), with fewer iteration
# counts: the zeroth-order methods win at T >= 640, DP-GD at T <= 640.
_ZO_QUICK = dict(
  iterations=(640, 2560, 5120),
  stepsizes=(1e-2, 3e-2, 0.1, 0.3, 1.0),
  clips=(0.1, 0.3, 1.0, 3.0),
)
QUICK = GridConfig(
  name="quick",
  dims=PAPER_DIMS,
  modes=tuple(quadratic.HESSIANS),
  methods=quadratic.METHODS,
  iterations={
    "dpzero": _ZO_QUICK["iterations"],
    "dpgd_zeroth": _ZO_QUICK["iterations"],
    "dp_gd": (80, 320, 640),
  },
  stepsizes={
    "dpzero": _ZO_QUICK["stepsizes"],
    "dpgd_zeroth": _ZO_QUICK["stepsizes"],
    "dp_gd": (0.1, 0.3, 1.0),
  },
  clips={
    "dpzero": _ZO_QUICK["clips"],
    "dpgd_zeroth": _ZO_QUICK["clips"],
    "dp_gd": (0.3, 1.0, 3.0, 10.0),
  },
)

# Small enough for the default test suite: one dimension, one mode, the two
# zeroth-order methods, one iteration count, the same 4 x 4 grid for both.
FAST = GridConfig(
  name="fast",
  dims=(500,),
  modes=("rank_log_d",),
  methods=("dpzero", "dpgd_zeroth"),
  iterations=_same((320,)),
  stepsizes=_same((0.03, 0.1, 0.3, 1.0)),
  clips=_same((1.0, 3.0, 10.0, 30.0)),
)

CONFIGS = {"full": FULL, "quick": QUICK, "fast": FAST}
SMOKE = "smoke run: no verdict"
