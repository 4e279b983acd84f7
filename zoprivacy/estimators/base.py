"""What every estimator shares: its state, its extra arguments, its privacy.

Estimators are ``optax.GradientTransformationExtraArgs``. Their ``update``
ignores the incoming ``updates`` and returns a gradient estimate shaped like
``params``, so they go first in an ``optax.chain`` and any optimizer can
follow. The loss and the batch arrive as keyword extra arguments, the way
optax's line searches receive ``value_fn``:

    updates, state = tx.update(zeros, state, params,
                               per_example_loss=loss_fn, batch=batch, mask=mask)

``mask`` (optional, ``[B]`` bool) marks real examples in a fixed-shape padded
batch; padded slots contribute nothing. Extra arguments meant for other
members of a chain are ignored, but a near-miss of one of ours (``masks=``,
``bacth=``) is an error.

The per-example contract: entry ``i`` of ``batched_loss(params, batch)``
depends only on ``params`` and example ``i`` (padding rows included). A loss
that mixes examples (batch normalization, in-batch negatives) breaks every
estimator's sensitivity bound; check it with
:func:`zoprivacy.first_order.per_example_check.assert_per_example`.

Secret noise: a private estimator's state holds no secret. Its noise key
is a :class:`~zoprivacy.privacy.noise_sessions.SessionKey`, a public handle
to a key from OS entropy held in this process's memory only (never derived
from ``direction_key``, which is public), looked up when the step runs
(:func:`keyed_state`); a step computed again, from a restored or copied
state, gets a fresh key, so no serializer can save the noise and no
restore can replay it. Every noise draw of step ``t`` is keyed by ``(key,
plan fingerprint, t)``. Two kinds of explicit keys make that a pure
function of the state: a privacy value's ``zoprivacy.TestNoise(seed)``
(NOT private) and keys bound to a shared secret
(:func:`zoprivacy.privacy.bind_noise_secret`, the runner's).

Physical batches: every factory takes ``physical_batch_size`` (``None``,
the default: the whole batch at once). With it, the step's per-example
work (forward passes, per-example gradients, their clipping) runs over
physical chunks of that many rows, one after another
(:mod:`zoprivacy.core.physical_batches`), and the step still releases once
per logical batch: one clipped sum, one noise draw, one step of the plan.
An execution setting, not a privacy hyperparameter: the plan, the
calibration and the noise do not depend on it; on exact noise's integer
lattice the release equals the unchunked one, in float to rounding.

Noise kinds (the ``noise`` of the privacy value, :class:`zoprivacy.Privacy`):

* ``zoprivacy.Exact()`` (the default): each clipped scalar is quantized to an
  integer grid and exact discrete Gaussian / Laplace noise is added to the
  integer sum; the update fetches the noise from the host sampler by itself
  (:mod:`zoprivacy.secret_noise.host_noise`), or takes it as the extra argument
  ``discrete_noise=``. The vector estimators put each example's clipped
  vector on an integer lattice and add exact vector discrete Gaussian noise
  (:mod:`zoprivacy.secret_noise.vector_discrete_mechanism`);
* ``zoprivacy.SecureMode()`` (Noisy-ZOGD's, an opt-in elsewhere): floating-point
  Gaussian noise, each draw the scaled sum of 4 independent Gaussians
  (Opacus' defence, Holohan & Braghin 2021);
* ``zoprivacy.Float()``: plain floating-point noise, an explicit opt-in exposed to
  floating-point attacks (Mironov 2012); the plan and every report say so.
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from zoprivacy.core import physical_batches
from zoprivacy.estimators import composition as composition_lib
from zoprivacy.estimators.estimator_state import (  # noqa: F401 (re-exported)
  EstimatorState,
  init_state,
  next_state,
  step_keys,
)
from zoprivacy.privacy import plan as plan_lib
from zoprivacy.privacy.privatization import (  # noqa: F401 (re-exported)
  Privatization,
  make_plan,
)
from zoprivacy.secret_noise.session_lookup import (  # noqa: F401 (re-exported)
  keyed_state,
  keyed_with_noise,
)
from zoprivacy.zo import queries

# Extra arguments the estimators read; anything close to one of these but not
# equal is a misspelling that would silently change the computation.
KNOWN_EXTRA_ARGS = (
  "per_example_loss",
  "batched_loss",
  "batch",
  "mask",
  "public_batch",
  "public_batches",
  "public_loss",
  "discrete_noise",
)


def _reject_misspellings(extra_args: dict) -> None:
  for name in extra_args:
    if name in KNOWN_EXTRA_ARGS:
      continue
    close = difflib.get_close_matches(name, KNOWN_EXTRA_ARGS, n=1, cutoff=0.75)
    if close:
      raise TypeError(
        f"Unknown extra argument {name!r}: did you mean "
        f"{close[0]!r}? (Other optax members may take other "
        "extra arguments, but this one looks like a typo.)"
      )


class LossArgs(NamedTuple):
  loss: Any  # batched loss (params, batch) -> [B], over physical chunks
  batch: Any
  mask: jax.Array | None
  per_example_loss: Any
  batched_loss: Any
  extra: dict  # every keyword extra argument, e.g. public batches
  selection: Any = None  # the batch's selection (a zoprivacy.Batch's)
  physical_batch_size: int | None = None  # rows per chunk (None: all)

  @property
  def discrete_noise(self):
    return self.extra.get("discrete_noise")

  @property
  def whole_loss(self):
    """The batched loss on whatever batch it is given (not chunked)."""
    return queries.as_batched_loss(self.per_example_loss, self.batched_loss)


def parse_extra_args(
  extra_args: dict, physical_batch_size: int | None = None
) -> LossArgs:
  """Reads ``per_example_loss`` / ``batched_loss``, ``batch`` and ``mask``.

  A batch that carries its own mask (a :class:`~zoprivacy.data.sampling.
  Batch`) supplies it, and the selection it was drawn under; a padded batch
  without a mask is refused. With ``physical_batch_size``, ``loss``
  evaluates its batch over physical chunks of that many rows
  (:mod:`zoprivacy.core.physical_batches`).
  """
  _reject_misspellings(extra_args)
  per_example_loss = extra_args.get("per_example_loss")
  batched_loss = extra_args.get("batched_loss")
  if "batch" not in extra_args:
    raise ValueError(
      "The estimator's update needs the keyword extra arg batch=."
    )
  loss = queries.as_batched_loss(per_example_loss, batched_loss)
  batch, mask = extra_args["batch"], extra_args.get("mask")
  selection = getattr(batch, "selection", None)
  if hasattr(batch, "mask") and hasattr(batch, "data"):
    if mask is not None:
      raise ValueError("Pass either a Batch or batch= with mask=, not both.")
    batch, mask = batch.data, batch.mask
  return LossArgs(
    physical_batches.chunked_loss(loss, physical_batch_size),
    batch,
    mask,
    per_example_loss,
    batched_loss,
    dict(extra_args),
    selection,
    physical_batch_size,
  )


class UnaccountedBatchError(ValueError):
  """A private step was given a batch its plan does not account."""


def check_batch(plan: plan_lib.PrivacyPlan, selection, rows=None) -> None:
  """Refuses, when the step is traced (the selection is static), a batch
  that ``plan`` does not account: one drawn under another selection (a
  sampler at another rate, fixed-size batches for a Poisson plan), or one
  that carries none (arrays from elsewhere) unless the plan assumes its
  sampling (``zoprivacy.Privacy(assume_sampling=True)``) or the batch is
  the whole data set of a full-batch plan (``rows``, its static number of
  rows, is the plan's dataset size: there is no sampling to assume)."""
  if not plan.is_noised:
    return
  if selection is None:
    whole = plan.sampling.name == "full_batch"
    if plan.sampling_assumed or (whole and rows == plan.dataset_size):
      return
    raise UnaccountedBatchError(
      "This private estimator was given a batch that does not say how it "
      f"was drawn, and its plan accounts {plan.sampling.describe()}: the "
      "epsilon it reports holds only for batches drawn so. Draw them with "
      "the sampler of the privacy value it was built from (sampler = "
      "privacy.sampler(); batch = zoprivacy.padded_batch(arrays, "
      "sampler.batch_indices(t))), or, for batches of your own whose "
      "sampling you vouch for, build the value with assume_sampling=True "
      "(every report then says the sampling is assumed, not checked)."
    )
  try:
    selection.check_plan(plan)
  except ValueError as err:
    raise UnaccountedBatchError(str(err)) from None


def guard_release(state: EstimatorState, args: LossArgs) -> None:
  """Before a private estimator computes a release, when its update is
  traced: the batch is one its plan accounts (:func:`check_batch`) and the
  composition around it was checked
  (:func:`~zoprivacy.estimators.composition.refuse_unchecked`)."""
  leaves = jax.tree.leaves(args.batch)
  rows = leaves[0].shape[0] if leaves and jnp.ndim(leaves[0]) else None
  check_batch(state.privacy_plan, args.selection, rows)
  composition_lib.refuse_unchecked(state)


def forward_kwargs(factory, hyperparameters) -> dict:
  """The entries of ``hyperparameters`` that ``factory`` takes by name."""
  names = inspect.signature(factory).parameters
  return {k: v for k, v in hyperparameters.items() if k in names}


class PrivateEstimator(optax.GradientTransformationExtraArgs):
  """An ``optax.GradientTransformationExtraArgs`` whose state holds its plan.

  The plan travels in the state (``EstimatorState.privacy_plan``), so it is
  found however the estimator is wrapped:

      tx = optax.chain(zoprivacy.dpzero(...), optax.sgd(1e-3))
      state = tx.init(params)
      plan = zoprivacy.privacy.find_plan(state)
      eps = plan.epsilon(num_steps=T, delta=1e-5)

  ``privacy_plan`` on the estimator object is the same plan, for
  convenience before ``init``; ``privacy`` the (calibrated) privacy value
  a factory built it from (its ``sampler()`` draws the batches the plan
  accounts; ``None`` for the estimators built otherwise).
  """

  def __new__(cls, init, update, privacy_plan: plan_lib.PrivacyPlan):
    self = super().__new__(cls, init, update)
    self.privacy_plan = privacy_plan
    self.privacy = None
    return self


def reject_masked_params(params) -> None:
  """``optax.partition`` / ``multi_transform`` / ``masked`` hide leaves."""
  is_masked = lambda x: isinstance(x, optax.MaskedNode)
  if any(map(is_masked, jax.tree.leaves(params, is_leaf=is_masked))):
    raise ValueError(
      "A zoprivacy estimator evaluates the loss at perturbed parameters, so "
      "it needs every parameter; optax.partition / multi_transform / masked "
      "hand it a tree with hidden (MaskedNode) leaves. Freeze parameters by "
      "splitting instead: give the optimizer only the trainable tree and "
      "close the loss over the frozen one, loss = lambda p, b: "
      "f({**p, **frozen}, b) (docs/freezing.md)."
    )


def build_estimator(
  compute,
  *,
  direction_key,
  privacy: Privatization | None,
  num_released: int = 1,
  physical_batch_size: int | None = None,
  method_init=None,
) -> PrivateEstimator:
  """Wraps a step computation into an optax transformation.

  ``compute(params, loss_args, direction_key, noise_key) -> (grad, released)``
  holds the method; this wrapper owns what every estimator shares: the state,
  the public/secret key schedule and the extra-argument parsing (with the
  factory's ``physical_batch_size``, :mod:`zoprivacy.core.physical_batches`).

  A method with state of its own gives ``method_init(params) -> pytree``,
  the state's ``method`` slot at ``init``
  (:class:`~zoprivacy.estimators.estimator_state.EstimatorState`); its
  ``compute`` then takes that state last and returns it updated, ``compute(
  params, loss_args, direction_key, noise_key, method) -> (grad, released,
  method)``, with the same tree structure, shapes and dtypes.
  """
  physical_batch_size = physical_batches.check(physical_batch_size)
  plan = plan_lib.PrivacyPlan.non_private() if privacy is None else privacy.plan
  test_seed = None if privacy is None else privacy.insecure_test_noise_seed

  def init_fn(params):
    method = None if method_init is None else method_init(params)
    return init_state(direction_key, plan, num_released, test_seed, method)

  def update_fn(updates, state, params=None, **extra_args):
    del updates
    if params is None:
      raise ValueError("Estimators need params in update().")
    reject_masked_params(params)
    args = parse_extra_args(extra_args, physical_batch_size)
    guard_release(state, args)  # at trace time: both are static
    keyed, noise = keyed_with_noise(
      state, args.discrete_noise, inputs=(params, extra_args)
    )
    if noise is not None:
      args = args._replace(extra={**args.extra, "discrete_noise": noise})
    dir_key, noise_key = step_keys(keyed)
    if method_init is None:
      grad, released = compute(params, args, dir_key, noise_key)
      method = None
    else:
      grad, released, method = compute(
        params, args, dir_key, noise_key, state.method
      )
      check_method_state(state.method, method)
    released = jnp.asarray(released, jnp.float32).reshape([-1])
    return grad, next_state(state, released=released, method=method)

  return PrivateEstimator(init_fn, update_fn, plan)


def check_method_state(before, after) -> None:
  """A step returns its method state as it took it: the same tree, shapes
  and dtypes (a jitted loop or ``lax.scan`` needs one state type)."""
  types = lambda tree: (
    jax.tree.structure(tree),
    [(jnp.shape(x), jnp.result_type(x)) for x in jax.tree.leaves(tree)],
  )
  if types(before) != types(after):
    raise TypeError(
      "The estimator's step returned its method state changed in structure, "
      f"shape or dtype ({types(before)} became {types(after)}): a step must "
      "return the state with the type its method_init gave it (cast with "
      "astype, keep every field)."
    )


def noisy_mean(privacy: Privatization, noise_key, clipped_sum):
  """``(sum + noise) / B``: the mechanism's noise on a clipped (masked) sum,
  divided by the *expected* batch size (DP-SGD, DPZero Alg. 1 line 3)."""
  noisy = privacy.mechanism.add_noise(noise_key, clipped_sum)
  return jax.tree.map(lambda x: x / privacy.expected_batch_size, noisy)


def build_vector_estimator(
  gradient,
  *,
  direction_key,
  privacy: Privatization,
  physical_batch_size: int | None = None,
) -> PrivateEstimator:
  """:func:`build_estimator` for a privatized *vector*: ``gradient(params,
  args, direction_key, noise_key) -> grad``; the state logs ``||grad||``."""

  def compute(params, args, dir_key, noise_key):
    grad = gradient(params, args, dir_key, noise_key)
    return grad, release_norm(grad)

  return build_estimator(
    compute,
    direction_key=direction_key,
    privacy=privacy,
    physical_batch_size=physical_batch_size,
  )


def release_norm(grad) -> jax.Array:
  """``[||grad||_2]``: what a vector estimator logs as released (public
  post-processing of the privatized gradient)."""
  return jnp.reshape(optax.tree_utils.tree_norm(grad), [1])
