"""The experiments' XLA options: LLVM's optimization level 1 on the CPU.

The runner's step and evaluation, and the tasks' model initialization,
compile with them; this module sits below both.

XLA's CPU backend spends most of a compilation in LLVM's optimization
passes, at level 2 by default. At level 1 the default run's programs
compile 2-3 times faster and run as fast, computing the same bits: its step
5.3 -> 2.3 s of CPU to compile and 2.52 -> 2.48 ms per call (minimum of 300
interleaved calls), its model's initialization 3.7 -> 1.2 s, and the
parameters after 4,000 steps of a run with a pinned test secret have the
same SHA-256. The heavy kernels (matrix products, convolutions) are library
calls that the level does not touch; the elementwise loops it compiles are
vectorized at both levels (a 4-million-parameter noisy update: 180 against
245 ms, the same bits). Other backends keep their defaults; a level set
in ``XLA_FLAGS``, or JAX's ``jax_disable_most_optimizations`` (level 0, as
the test suite compiles), wins.
"""

from __future__ import annotations

import os

import jax

LEVEL = "xla_backend_optimization_level"


def compiler_options() -> dict | None:
  """``{level: 1}`` on the CPU backend, unless ``XLA_FLAGS`` sets a level
  or JAX disables most optimizations; ``None`` (the defaults) elsewhere."""
  if LEVEL in os.environ.get("XLA_FLAGS", ""):
    return None
  if jax.config.read("jax_disable_most_optimizations"):
    return None
  if jax.default_backend() != "cpu":
    return None
  return {LEVEL: 1}


def jit(fun, **kwargs):
  """``jax.jit(fun, **kwargs)`` with the runner's :func:`compiler_options`."""
  return jax.jit(fun, compiler_options=compiler_options(), **kwargs)
