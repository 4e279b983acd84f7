"""Gradient estimators as ``optax.GradientTransformationExtraArgs``.

Importing this package registers every estimator in
:mod:`zoprivacy.estimators.registry`.
"""

from zoprivacy.estimators import registry
from zoprivacy.estimators.base import EstimatorState, PrivateEstimator
from zoprivacy.estimators.dp_sgd import dp_sgd

# Noisy-ZOGD takes a NoisyZOGDSetting, not the keyword arguments above.
from zoprivacy.estimators.noisy_zogd import noisy_zogd, noisy_zogd_chain
from zoprivacy.estimators.public_assisted import (
  dope_sgd,
  dpmd,
  gep,
  pazo_m,
  pazo_p,
  pazo_s,
)
from zoprivacy.estimators.scalar_zo import dp_zo, dpzero, mezo
from zoprivacy.estimators.vector_zo import dpgd_zeroth

ESTIMATORS = registry.factories()
