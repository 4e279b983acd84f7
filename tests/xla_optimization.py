"""XLA's optimization level for the test suite.

The suite compiles far more than it computes, so ``conftest.py`` turns
most of XLA's backend optimization off for every process of the session
(``JAX_DISABLE_MOST_OPTIMIZATIONS=1``: LLVM level 0, none of its expensive
passes). A test whose steps cost more than their compilation (a training
run of thousands of steps) runs at full optimization instead: mark it
``@pytest.mark.compute_bound``, or, for a fixture, compile inside
:func:`full_optimization`. The computation is the same HLO either way;
only the machine code differs (XLA's fast-math stays off).
"""

import contextlib
import os

FLAG = "jax_disable_most_optimizations"


def low_optimization_by_default() -> bool:
  """What the session set for every process (JAX reads it at import)."""
  value = os.environ.get("JAX_DISABLE_MOST_OPTIMIZATIONS", "")
  return value.strip().lower() in ("1", "true", "t", "yes", "y", "on")


@contextlib.contextmanager
def full_optimization():
  """Compiles at XLA's full optimization inside the block."""
  import jax  # pylint: disable=g-import-not-at-top

  jax.config.update(FLAG, False)
  try:
    yield
  finally:
    jax.config.update(FLAG, low_optimization_by_default())
