"""zoprivacy: differentially private zeroth-order optimization in JAX.

Estimators are optax transformations that go first in a chain:

    est = zoprivacy.dpzero(clip=1.0, noise_multiplier=2.0, smoothing=1e-3,
                           expected_batch_size=64, dataset_size=1437)
    tx = optax.chain(est, optax.sgd(1e-3))
    updates, state = tx.update(zeros, state, params,
                               per_example_loss=loss_fn, batch=batch, mask=mask)
    epsilon = est.privacy.epsilon(num_steps=T, delta=1e-5)
"""

from zoprivacy import clipping
from zoprivacy import directions
from zoprivacy import mechanisms
from zoprivacy import queries
from zoprivacy.estimators import ESTIMATORS
from zoprivacy.estimators import EstimatorState
from zoprivacy.estimators import PrivacySpec
from zoprivacy.estimators import PrivateEstimator
from zoprivacy.estimators import dope_sgd
from zoprivacy.estimators import dp_sgd
from zoprivacy.estimators import dp_zo
from zoprivacy.estimators import dpgd_zeroth
from zoprivacy.estimators import dpmd
from zoprivacy.estimators import dpzero
from zoprivacy.estimators import gep
from zoprivacy.estimators import mezo
from zoprivacy.estimators import pazo_m
from zoprivacy.estimators import pazo_p
from zoprivacy.estimators import pazo_s

__version__ = "0.1.0"
