"""test_end_to_end.py's MeZO-against-DPZero comparison over many seeds.

Not collected by pytest (each seed is two 4,000-step runs, about 25 s on 2
cores): run by hand, from the repository root, as docs/experiments.md
shows::

  PYTHONPATH=$PWD python tests/experiments/mezo_dpzero_seeds.py 50 [MARGIN]

Seed s is ``config.seed = s`` for both runs under ``insecure_test_noise``
(model initialization, directions, the DPZero run's noise and Poisson
batches); seed 0 is the test's own. The environment is the default test
session's (tests/conftest.py is imported first: XLA flags, compilation
cache) and each run compiles at full optimization, as the test does. Prints
one line per seed and exits 1 if the comparison fails for any. MARGIN
defaults to the test's (``MEZO_MARGIN``).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/: conftest, xla_optimization
sys.path.insert(0, HERE)

import conftest  # noqa: E402,F401  # pylint: disable=unused-import,g-bad-import-order
import test_end_to_end as e2e  # noqa: E402
from xla_optimization import full_optimization  # noqa: E402

from configs import default  # noqa: E402
from configs import mezo as mezo_config  # noqa: E402
from experiments.run import train  # noqa: E402

MARGIN = e2e.MEZO_MARGIN


def compare(seed: int, margin: float) -> tuple[float, float, bool]:
  """(DPZero accuracy, MeZO accuracy, whether the test's assertion holds)."""
  runs = []
  for module in (default, mezo_config):
    config = e2e._seeded(module.get_config())  # pylint: disable=protected-access
    config.seed = seed
    with full_optimization():
      runs.append(train.train(config, progress=False))
  dpzero, mezo = runs
  holds = (
    mezo["epsilon"] == float("inf")
    and mezo["delta"] is None
    and mezo["test_accuracy"] >= dpzero["test_accuracy"] - margin
  )
  return dpzero["test_accuracy"], mezo["test_accuracy"], holds


def main(num_seeds: int, margin: float = MARGIN) -> int:
  failures = []
  for seed in range(num_seeds):
    dpzero, mezo, holds = compare(seed, margin)
    print(
      f"seed {seed:3d}: dpzero {dpzero:.4f} mezo {mezo:.4f} "
      f"difference {mezo - dpzero:+.4f} {'ok' if holds else 'FAIL'}",
      flush=True,
    )
    if not holds:
      failures.append(seed)
  print(
    f"{num_seeds - len(failures)}/{num_seeds} seeds pass at margin "
    f"{margin:g}; failed: {failures}"
  )
  return 1 if failures else 0


if __name__ == "__main__":
  args = sys.argv[1:]
  sys.exit(
    main(
      int(args[0]) if args else 50,
      float(args[1]) if len(args) > 1 else MARGIN,
    )
  )
