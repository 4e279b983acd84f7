"""Noise mechanisms and their accounting values.

* :mod:`~zoprivacy.mechanisms.clipping`: per-example clipping, the bound
  every mechanism's sensitivity starts from;
* :mod:`~zoprivacy.mechanisms.noise`: the runtime mechanisms that add the
  noise (Gaussian, Laplace, none) and :func:`make_mechanism`;
* :mod:`~zoprivacy.mechanisms.float_gaussian`: the float mechanisms'
  Gaussian draw (``jax.random.normal`` bit for bit, its bits materialized);
* :mod:`~zoprivacy.mechanisms.discrete`: exact discrete noise on a quantized
  sum (the default scalar mechanism);
* :mod:`~zoprivacy.mechanisms.value_base`,
  :mod:`~zoprivacy.mechanisms.values`,
  :mod:`~zoprivacy.mechanisms.vector_values`: each mechanism as a frozen value
  that states its own accounting and calibration (what a privacy plan knows
  about its noise; no JAX);
* :mod:`~zoprivacy.mechanisms.registry`: the mechanism values by name, what
  configs, the command line and serialized plans select (no JAX).

The names of :mod:`~zoprivacy.mechanisms.noise` are also read here
(``zoprivacy.mechanisms.GaussianMechanism``). Everything is imported on
first access (PEP 562): ``import zoprivacy.mechanisms.values`` loads no JAX.
"""

import importlib

_SUBMODULES = (
  "clipping",
  "discrete",
  "float_gaussian",
  "noise",
  "registry",
  "value_base",
  "values",
  "vector_values",
)
__all__ = list(_SUBMODULES)


def __getattr__(name: str):
  """A submodule, or a name of :mod:`~zoprivacy.mechanisms.noise`, imported
  on first access."""
  if name in _SUBMODULES:
    return importlib.import_module(f"{__name__}.{name}")
  noise = importlib.import_module(f"{__name__}.noise")
  if name.startswith("_") or not hasattr(noise, name):
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  value = getattr(noise, name)
  globals()[name] = value  # cache: later lookups skip __getattr__
  return value


def __dir__():
  return __all__
