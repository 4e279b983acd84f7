"""Lazy package attributes (PEP 562): submodules and names imported on
first access, so that importing a package costs nothing until it is used
(``import zoprivacy.privacy.plan`` loads no JAX)."""

from __future__ import annotations

import importlib
import sys


def lazy_package(package: str, submodules=(), exports=None):
  """``(__getattr__, __dir__, __all__)`` for the package ``package``.

  Args:
    package: the package's ``__name__``.
    submodules: names of its submodules, each imported on first access
      (``package.name``).
    exports: ``{name: module}``: a name read from ``module`` on first access
      and then cached on the package.
  """
  exports = dict(exports or {})
  names = sorted((*submodules, *exports))

  def getattr_(name: str):
    if name in submodules:
      return importlib.import_module(f"{package}.{name}")
    if name not in exports:
      raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(exports[name]), name)
    setattr(sys.modules[package], name, value)  # later lookups skip this
    return value

  return getattr_, lambda: names, names
