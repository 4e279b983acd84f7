"""Gradient estimators as ``optax.GradientTransformationExtraArgs``.

Importing this package registers every estimator in
:mod:`zoprivacy.estimators.registry`.
"""

from zoprivacy.estimators import registry
from zoprivacy.estimators.base import EstimatorState, PrivateEstimator
from zoprivacy.estimators.dp_sgd import dp_sgd
from zoprivacy.estimators.gep import gep

# Noisy-ZOGD takes a NoisyZOGDSetting, not the keyword arguments above;
# ESTIMATORS['noisy_zogd'] is noisy_zogd_chain (the whole eq. (3) update).
from zoprivacy.estimators.noisy_zogd import noisy_zogd, noisy_zogd_chain
from zoprivacy.estimators.pazo import pazo_m, pazo_p
from zoprivacy.estimators.pazo_s import pazo_s
from zoprivacy.estimators.public_first_order import dope_sgd, dpmd
from zoprivacy.estimators.scalar_zo import dp_zo, dpzero, mezo
from zoprivacy.estimators.vector_zo import dpgd_zeroth
from zoprivacy.estimators.vr_dpzero import vr_dpzero

ESTIMATORS = registry.factories()
