"""How a variant factory takes the keyword arguments of the one it extends.

Several papers' methods are one estimator with a change: DOPE-SGD is DP-SGD
clipped around the public gradient, DPMD mixes DP-SGD with a public gradient,
PAZO-M mixes DPZero with one, DP-ZO is DPZero with another mechanism and
clipped quantity. :func:`extends` lets such a variant declare only what it
adds or changes; the rest of its signature is the base factory's, for
callers, ``inspect.signature``, the runner's config checks and the API docs.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable


def extends(base_factory: Callable, *, without: Iterable[str] = ()):
  """Decorator: the variant also takes ``base_factory``'s keyword arguments.

  The decorated factory is written as ``def variant(*, own..., **rest)``. Its
  signature becomes its own keyword-only parameters (which override the base
  factory's of the same name, defaults included) followed by the base
  factory's other parameters, less ``without``. A call is bound against that
  signature (an unknown or missing name raises ``TypeError`` exactly as for a
  plain ``def``) and the variant receives every argument, defaults filled in.
  """
  excluded = frozenset(without)

  def decorate(variant: Callable) -> Callable:
    own = inspect.signature(variant)
    parameters = [
      p for p in own.parameters.values() if p.kind is p.KEYWORD_ONLY
    ]
    names = {p.name for p in parameters} | excluded
    parameters += [
      p
      for p in inspect.signature(base_factory).parameters.values()
      if p.name not in names
    ]
    # Positional parameters (Noisy-ZOGD's setting) stay first.
    parameters.sort(key=lambda p: p.kind)
    signature = own.replace(parameters=parameters)

    @functools.wraps(variant)
    def bound_variant(*args, **kwargs):
      bound = signature.bind(*args, **kwargs)
      bound.apply_defaults()
      return variant(**bound.arguments)

    bound_variant.__signature__ = signature
    return bound_variant

  return decorate
