"""Shared pytest setup: keep XLA on the host and quiet, and compile once.

The suite runs many short trainings, most of them in subprocesses (the
command line as users run it), and most compile the same small steps. A
persistent XLA compilation cache shared by the whole session (every xdist
worker and every subprocess inherits the environment set here, in the
controller, before the workers start) lets a step compiled once be loaded
by every later process. The cache lives in a fresh temporary directory
removed at the end of the session; ``ZOPRIVACY_TEST_NO_COMPILE_CACHE=1``
turns it off.

The suite also compiles far more than it computes: its models are small and
its steps few. XLA's backend therefore runs with most optimization off
(``JAX_DISABLE_MOST_OPTIMIZATIONS=1``: LLVM level 0, no expensive passes;
unless ``XLA_FLAGS`` sets a level), which cut the compile-bound model,
estimator and mesh tests from 216 s to 164 s on 2 cores. The HLO, and so
what is computed, is the same; only the machine code is less optimized
(XLA's fast-math stays off). Tests marked ``compute_bound`` (long training
runs) compile at full optimization (:mod:`xla_optimization`).
``ZOPRIVACY_TEST_FULL_OPT=1`` keeps full optimization everywhere.

Most of what remains of a compilation is XLA's CPU fusion emitters (the
MLIR code generator for fused loops). The session turns them off
(``--xla_cpu_use_fusion_emitters=false``, appended to ``XLA_FLAGS``), and
XLA emits those loops with its elemental emitter instead: about 0.8x the
suite's time on 2 cores. The flag was found in jaxlib 0.6.2 (setup.cfg's
oldest) and 0.10.2, and is set for jaxlib 0.6 to 0.10 only: a later
version keeps XLA's default, since XLA refuses a flag it does not know. The
loops compute the
same HLO, but the generated code differs, so floating-point results can
differ in the last bits where multiply-adds are fused differently. The
slow tests whose result could depend on that (marked ``xla_defaults``:
every mesh against one device, two processes against one, the README's
first command) run in CI's own step with XLA's default emitters
(``ZOPRIVACY_TEST_FUSION_EMITTERS=1``, which keeps them on); the rest of
the slow suite runs without them, as the default suite does: on 2 cores,
four slow tests (every mesh, a new user's roads, Fig. 1's quick sweep, a
hidden-state resume audit) took 135 s of CPU without them, 251 s with.

Most runner tests calibrate their noise for a target epsilon, and the PLD
search behind it (seconds each) repeats across tests and subprocesses for
the same public settings. The session shares the optional calibration cache
(``ZOPRIVACY_CALIBRATION_CACHE_DIR``,
:mod:`zoprivacy.privacy.calibration`) in the same temporary
directory; it stores only the search's starting point, and every plan's
epsilon is still computed and checked against its target.
``ZOPRIVACY_TEST_NO_CALIBRATION_CACHE=1`` turns it off.
"""

import atexit
import os
import shutil
import tempfile

import pytest
from xla_optimization import full_optimization

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

if "xla_backend_optimization_level" not in os.environ.get(
  "XLA_FLAGS", ""
) and not os.environ.get("ZOPRIVACY_TEST_FULL_OPT"):
  os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")


def _without_fusion_emitters() -> bool:
  """Whether the session turns XLA's CPU fusion emitters off."""
  from importlib import metadata  # pylint: disable=g-import-not-at-top

  if os.environ.get("ZOPRIVACY_TEST_FUSION_EMITTERS"):
    return False
  if "xla_cpu_use_fusion_emitters" in os.environ.get("XLA_FLAGS", ""):
    return False
  try:
    major, minor = (int(x) for x in metadata.version("jaxlib").split(".")[:2])
  except (metadata.PackageNotFoundError, ValueError):
    return False
  return (0, 6) <= (major, minor) <= (0, 10)


if _without_fusion_emitters():
  os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_cpu_use_fusion_emitters=false"
  ).strip()


@pytest.fixture(autouse=True)
def _compute_bound_at_full_optimization(request):
  if request.node.get_closest_marker("compute_bound") is None:
    yield
    return
  with full_optimization():
    yield


def _session_directory(variable: str, switch_off: str, prefix: str) -> bool:
  """Points ``variable`` at a fresh temporary directory removed at exit, in
  the controller only (workers and subprocesses inherit it), unless it is
  already set or ``switch_off`` is."""
  if (
    "PYTEST_XDIST_WORKER" in os.environ
    or variable in os.environ
    or os.environ.get(switch_off)
  ):
    return False
  directory = tempfile.mkdtemp(prefix=prefix)
  os.environ[variable] = directory
  atexit.register(shutil.rmtree, directory, ignore_errors=True)
  return True


if _session_directory(
  "JAX_COMPILATION_CACHE_DIR",
  "ZOPRIVACY_TEST_NO_COMPILE_CACHE",
  "zoprivacy-test-xla-cache-",
):
  os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
  os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
_session_directory(
  "ZOPRIVACY_CALIBRATION_CACHE_DIR",
  "ZOPRIVACY_TEST_NO_CALIBRATION_CACHE",
  "zoprivacy-test-calibrations-",
)
