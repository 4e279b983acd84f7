"""Gradient estimators as ``optax.GradientTransformationExtraArgs``.

Importing this package registers every estimator in
:mod:`zoprivacy.estimators.registry`.
"""

from zoprivacy.estimators import registry
from zoprivacy.estimators.base import EstimatorState
from zoprivacy.estimators.base import PrivateEstimator
from zoprivacy.estimators.dp_sgd import dp_sgd
from zoprivacy.estimators.public_assisted import dope_sgd
from zoprivacy.estimators.public_assisted import dpmd
from zoprivacy.estimators.public_assisted import gep
from zoprivacy.estimators.public_assisted import pazo_m
from zoprivacy.estimators.public_assisted import pazo_p
from zoprivacy.estimators.public_assisted import pazo_s
from zoprivacy.estimators.scalar_zo import dp_zo
from zoprivacy.estimators.scalar_zo import dpzero
from zoprivacy.estimators.scalar_zo import mezo
from zoprivacy.estimators.vector_zo import dpgd_zeroth
# Noisy-ZOGD takes a NoisyZOGDSetting, not the keyword arguments above.
from zoprivacy.estimators.noisy_zogd import noisy_zogd
from zoprivacy.estimators.noisy_zogd import noisy_zogd_chain

ESTIMATORS = registry.factories()
