"""Shared pytest setup: keep XLA on the host and quiet, and compile once.

The suite runs many short trainings, most of them in subprocesses (the
command line as users run it), and most compile the same small steps. A
persistent XLA compilation cache shared by the whole session (every xdist
worker and every subprocess inherits the environment set here, in the
controller, before the workers start) lets a step compiled once be loaded
by every later process. The cache lives in a fresh temporary directory
removed at the end of the session; ``ZOPRIVACY_TEST_NO_COMPILE_CACHE=1``
turns it off.
"""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

if (
  "PYTEST_XDIST_WORKER" not in os.environ
  and "JAX_COMPILATION_CACHE_DIR" not in os.environ
  and not os.environ.get("ZOPRIVACY_TEST_NO_COMPILE_CACHE")
):
  _cache = tempfile.mkdtemp(prefix="zoprivacy-test-xla-cache-")
  os.environ["JAX_COMPILATION_CACHE_DIR"] = _cache
  os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
  os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
  atexit.register(shutil.rmtree, _cache, ignore_errors=True)
