"""Gradient estimators as ``optax.GradientTransformationExtraArgs``."""

from zoprivacy.estimators.base import EstimatorState
from zoprivacy.estimators.base import PrivacySpec
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

ESTIMATORS = {
    "mezo": mezo,
    "dpzero": dpzero,
    "dp_zo": dp_zo,
    "dpgd_zeroth": dpgd_zeroth,
    "dp_sgd": dp_sgd,
    "pazo_m": pazo_m,
    "pazo_p": pazo_p,
    "pazo_s": pazo_s,
    "dpmd": dpmd,
    "dope_sgd": dope_sgd,
    "gep": gep,
}
