"""Compatibility aliases: the public-data estimators moved to their own modules.

PAZO-M/P/S live in :mod:`zoprivacy.estimators.pazo`, DPMD and DOPE-SGD in
:mod:`zoprivacy.estimators.public_first_order`, GEP in
:mod:`zoprivacy.estimators.gep` and the public-data helpers in
:mod:`zoprivacy.estimators.public_data` (see CHANGELOG 0.3.0).
"""

from zoprivacy.estimators.gep import GEPMechanism, anchor_subspace, gep
from zoprivacy.estimators.pazo import pazo_m, pazo_p
from zoprivacy.estimators.pazo_s import pazo_s
from zoprivacy.estimators.public_data import (
  public_gradient,
  public_gradients,
  public_subspace,
)
from zoprivacy.estimators.public_first_order import (
  dope_sgd,
  dpmd,
  dpmd_public_weight,
)
from zoprivacy.linalg import normalize_rows, orthonormalize_rows

__all__ = [
  "GEPMechanism",
  "anchor_subspace",
  "dope_sgd",
  "dpmd",
  "dpmd_public_weight",
  "gep",
  "normalize_rows",
  "orthonormalize_rows",
  "pazo_m",
  "pazo_p",
  "pazo_s",
  "public_gradient",
  "public_gradients",
  "public_subspace",
]
