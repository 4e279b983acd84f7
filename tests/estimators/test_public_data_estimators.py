"""PAZO-M/P/S and the first-order public-data baselines (DPMD, DOPE-SGD, GEP).

Statistical checks use fixed seeds and state their tolerances; privacy checks
use adversarial losses (NaN, inf, 1e9) and the same state (same direction and
noise keys) with one example masked out, so the difference is that example's
clipped contribution. Tests that compare the noise of two separately built
estimators give both the same ``insecure_test_noise_seed`` (NOT private: the
noise is then reproducible); statistical tests give every draw its own
direction and noise key with ``keys.with_keys``.
"""

import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from adversarial import ADV_BATCH, adversarial_loss
from keys import explicit_keys, with_keys

import zoprivacy
from zoprivacy import accounting
from zoprivacy.estimators import pazo as pazo_mod
from zoprivacy.estimators import public_data, public_first_order
from zoprivacy.estimators.gep import GEPMechanism, gep
from zoprivacy.estimators.pazo_s import pazo_s
from zoprivacy.privacy import InsecureTestNoiseWarning
from zoprivacy.secret_noise import device_discrete_gaussian

D = 6
X0 = {"a": jnp.linspace(-1.0, 1.0, 4), "b": jnp.array([0.5, -2.0])}
BATCH = jnp.arange(8 * D, dtype=jnp.float32).reshape(8, D) / 10.0 - 2.0
A_DIAG = jnp.array([1.0, 2.0, 0.5, 3.0, 1.5, 0.25])
B = 8.0
# One public batch of b' = 5 and k = 3 stacked public batches, each with
# different data so that their gradients differ.
# Public data resemble the private data (shifted), so public gradients help.
PUB = BATCH[1:6] + 0.2 * jnp.sin(jnp.arange(5 * D, dtype=jnp.float32)).reshape(
  5, D
)
PUBS = jnp.stack(
  [
    BATCH[j : j + 5] + 0.5 * jnp.cos(jnp.arange(D) * (j + 1.0))
    for j in range(3)
  ]
)


def _flat(t):
  return jax.flatten_util.ravel_pytree(t)[0]


def quadratic_loss(params, example):
  diff = _flat(params) - example
  return 0.5 * jnp.sum(A_DIAG * diff**2)


batched_quadratic = jax.vmap(quadratic_loss, (None, 0))


def mean_grad(params, batch):
  return jax.grad(lambda p: jnp.mean(batched_quadratic(p, batch)))(params)


def _kw(**kw):
  out = dict(clip=1.0, noise_multiplier=1.0, expected_batch_size=B)
  out.update(kw)
  return out


DEFAULTS = {
  "pazo_m": (pazo_mod.pazo_m, dict(smoothing=1e-3, alpha=0.5)),
  "pazo_p": (pazo_mod.pazo_p, dict(smoothing=1e-3, num_public_batches=3)),
  "pazo_p_prime": (
    pazo_mod.pazo_p,
    dict(smoothing=1e-3, num_public_batches=3, orthonormalize=False),
  ),
  "pazo_s": (
    pazo_s,
    dict(learning_rate=0.1, num_public_batches=3, candidate_noise_scale=0.01),
  ),
  "dpmd": (public_first_order.dpmd, dict(num_steps=100)),
  "dope_sgd": (public_first_order.dope_sgd, dict()),
}


def _make(name, **kw):
  """Each method with small, valid defaults; ``kw`` overrides."""
  if name == "gep":
    args = dict(
      embedding_clip=1.0,
      residual_clip=0.5,
      noise_multiplier=1.0,
      expected_batch_size=B,
      num_bases=2,
    )
    if "noise_multiplier" in kw or "embedding_noise_multiplier" in kw:
      args.pop("noise_multiplier")
    args.update(kw)
    return gep(**args)
  factory, defaults = DEFAULTS[name]
  args = _kw(**defaults)
  args.update(kw)
  return factory(**args)


def _public(name):
  return (
    dict(public_batches=PUBS)
    if name.startswith(("pazo_p", "pazo_s"))
    else dict(public_batch=PUB)
  )


ALL = ["pazo_m", "pazo_p", "pazo_p_prime", "pazo_s", "dpmd", "dope_sgd", "gep"]

# Near-noiseless exact noise (the default) for checks of what an estimator
# computes: exact noise rounds each clipped value to the grid of step
# clip / grid_points, so the clip must bound the values without dwarfing them
# (clip=1e6 with the default 1024 points rounds every value here to 0), and
# with several queries sigma must be >= 10 grid units: sigma = 1e-5 * 2**20
# = 10.5. The noise std is then 1e-5 * clip * sqrt(q) / b.
FINE_GRID = dict(grid_points=2**20, noise_multiplier=1e-5)

# Tests that build two estimators with the same insecure test-noise seed, so
# that both add the same (reproducible, NOT private) noise.
same_test_noise = pytest.mark.filterwarnings(
  "ignore::zoprivacy.privacy.InsecureTestNoiseWarning"
)


# ------------------------------------------------------------------ PAZO-M


@pytest.mark.parametrize("q", [pytest.param(1, marks=pytest.mark.slow), 3])
def test_pazo_m_alpha_zero_is_dpzero_on_the_quarter_sphere(q):
  # Same public direction key and same test-noise seed: key for key.
  common = dict(
    clip=0.5,
    noise_multiplier=1.3,
    smoothing=1e-2,
    expected_batch_size=B,
    num_queries=q,
    direction_key=7,
    insecure_test_noise_seed=7,
  )
  pazo = pazo_mod.pazo_m(alpha=0.0, **common)
  dpz = zoprivacy.dpzero(directions="sphere_quarter", **common)
  with pytest.warns(InsecureTestNoiseWarning):
    s_pazo = zoprivacy.init(pazo, X0)
  with pytest.warns(InsecureTestNoiseWarning):
    s_dpz = zoprivacy.init(dpz, X0)
  plan = zoprivacy.find_plan(s_pazo)
  assert plan.noise_source == "insecure_test_seed" and not plan.is_private
  assert "NOT PRIVATE" in plan.describe()
  step_pazo = jax.jit(
    lambda s: pazo.update(
      None,
      s,
      X0,
      per_example_loss=quadratic_loss,
      batch=BATCH,
      public_batch=PUB,
    )
  )
  step_dpz = jax.jit(
    lambda s: dpz.update(
      None, s, X0, per_example_loss=quadratic_loss, batch=BATCH
    )
  )
  for _ in range(3):  # several steps: the key chain must agree too
    g1, s_pazo = step_pazo(s_pazo)
    g2, s_dpz = step_dpz(s_dpz)
    np.testing.assert_allclose(_flat(g1), _flat(g2), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(s_pazo.released, s_dpz.released, rtol=1e-6)


@same_test_noise
def test_pazo_m_mixes_public_gradient_and_dpzero():
  common = dict(
    clip=0.5,
    noise_multiplier=1.3,
    smoothing=1e-2,
    expected_batch_size=B,
    num_queries=2,
    direction_key=3,
    insecure_test_noise_seed=3,
  )
  g_pub = _flat(mean_grad(X0, PUB))
  dpz = zoprivacy.dpzero(directions="sphere_quarter", **common)
  g_zo = _flat(
    jax.jit(
      lambda: dpz.update(
        None,
        zoprivacy.init(dpz, X0),
        X0,
        per_example_loss=quadratic_loss,
        batch=BATCH,
      )
    )()[0]
  )
  for alpha in (1.0, 0.25):
    est = pazo_mod.pazo_m(alpha=alpha, **common)
    g, _ = jax.jit(
      lambda: est.update(
        None,
        zoprivacy.init(est, X0),
        X0,
        per_example_loss=quadratic_loss,
        batch=BATCH,
        public_batch=PUB,
      )
    )()
    np.testing.assert_allclose(
      _flat(g), alpha * g_pub + (1 - alpha) * g_zo, rtol=1e-5, atol=1e-6
    )


def test_pazo_m_quarter_sphere_aligns_norms():
  """App. A.1: with r = d^{1/4}, E||g_zo||^2 = ||grad f||^2 (linear f: exact)."""
  w = jnp.array([1.0, -2.0, 0.5, 3.0, 0.0, 1.5])
  linear = lambda p, e: jnp.sum(w * _flat(p)) + 0.0 * e[0]
  est = pazo_mod.pazo_m(
    clip=10.0,  # |w . u| r <= 6.4: never clipped
    **FINE_GRID,
    smoothing=1e-2,
    expected_batch_size=B,
    alpha=0.0,
  )

  def sq_norm(key):
    g, _ = est.update(
      None,
      with_keys(zoprivacy.init(est, X0), key),
      X0,
      per_example_loss=linear,
      batch=BATCH,
      public_batch=PUB,
    )
    return jnp.sum(_flat(g) ** 2)

  sq = jax.jit(jax.vmap(sq_norm))(jax.random.split(jax.random.key(0), 4000))
  # ||g||^2 = d^{1/2} (w.u)^2 / ... has relative std ~1.2 on the sphere, so
  # the mean over 4000 draws has relative s.e. < 2%: 8% is > 4 s.e.
  assert float(jnp.mean(sq)) == pytest.approx(float(jnp.sum(w**2)), rel=0.08)


# ------------------------------------------------------------------ PAZO-P


def test_public_subspace_orthonormal_and_normalized():
  grads = public_data.public_gradients(
    lambda p, b: jnp.mean(batched_quadratic(p, b)), X0, PUBS
  )
  raw = jax.vmap(_flat)(grads)  # [k, d]
  assert raw.shape == (3, D)
  g_ortho = jax.vmap(_flat)(
    public_data.public_subspace(grads, orthonormalize=True)
  )
  np.testing.assert_allclose(g_ortho @ g_ortho.T, np.eye(3), atol=1e-5)
  # Same span as the raw gradients; sign fix: first row is g_1 / ||g_1||.
  proj = g_ortho.T @ (g_ortho @ raw.T)
  np.testing.assert_allclose(proj, raw.T, atol=1e-4)
  np.testing.assert_allclose(
    g_ortho[0], raw[0] / jnp.linalg.norm(raw[0]), atol=1e-6
  )
  g_norm = jax.vmap(_flat)(
    public_data.public_subspace(grads, orthonormalize=False)
  )
  np.testing.assert_allclose(jnp.linalg.norm(g_norm, axis=1), 1.0, atol=1e-6)
  np.testing.assert_allclose(
    g_norm, raw / jnp.linalg.norm(raw, axis=1, keepdims=True), rtol=1e-6
  )
  assert not np.allclose(g_norm @ g_norm.T, np.eye(3), atol=1e-2)


class CountingLoss:
  """A batched quadratic loss that records every call (run under disable_jit).

  A call whose params are tracers is inside ``jax.grad`` (a forward+backward
  pass); a call with concrete params is a plain forward pass; a call on a
  batch vmapped over ``k`` stacked batches counts as ``k`` passes. The batch
  size tells private (8, or 1 inside a vmapped per-example gradient) from
  public (5) data. The perturbed parameters of forward passes are recorded.
  """

  def __init__(self):
    self.calls = []
    self.forward_params = []

  def __call__(self, params, batch):
    traced = isinstance(jax.tree.leaves(params)[0], jax.core.Tracer)
    # A call inside jax.vmap over k stacked batches is k passes at once.
    width = 1
    # A vmap tracer exposes its batch axis (duck-typed: no jax internals
    # imported); other tracers and arrays have no ``batch_dim``.
    batch_dim = getattr(batch, "batch_dim", None)
    if isinstance(batch, jax.core.Tracer) and isinstance(batch_dim, int):
      width = int(batch.val.shape[batch_dim])
    self.calls.extend([(traced, int(batch.shape[0]))] * width)
    if not traced:
      self.forward_params.append(np.asarray(_flat(params)))
    return batched_quadratic(params, batch)

  def count(self, traced, size):
    return sum(1 for c in self.calls if c == (traced, size))


@pytest.mark.parametrize(
  "prng", [pytest.param("threefry", marks=pytest.mark.slow), "counter"]
)
def test_pazo_p_directions_lie_in_the_public_span(prng):
  for orthonormalize in (True, False):
    loss = CountingLoss()
    est = pazo_mod.pazo_p(
      **_kw(
        smoothing=1e-2,
        num_public_batches=3,
        num_queries=2,
        orthonormalize=orthonormalize,
        direction_prng=prng,
      )
    )
    with jax.disable_jit():
      g, _ = est.update(
        None,
        zoprivacy.init(est, X0),
        X0,
        batched_loss=loss,
        batch=BATCH,
        public_batches=PUBS,
      )
    raw = jax.vmap(_flat)(
      public_data.public_gradients(
        lambda p, b: jnp.mean(batched_quadratic(p, b)), X0, PUBS
      )
    )
    q, _ = jnp.linalg.qr(raw.T)  # span(G)
    perturbations = np.stack(loss.forward_params) - np.asarray(_flat(X0))
    assert perturbations.shape == (4, D)  # 2q forwards
    for v in list(perturbations) + [np.asarray(_flat(g))]:
      residual = v - q @ (q.T @ v)
      assert np.linalg.norm(residual) <= 1e-4 * max(np.linalg.norm(v), 1e-3)
    # ||lambda G u|| = lambda sqrt(k) for orthonormal G.
    if orthonormalize:
      np.testing.assert_allclose(
        np.linalg.norm(perturbations, axis=1),
        1e-2 * math.sqrt(3),
        rtol=1e-4,
      )


def test_pazo_p_estimates_the_projected_gradient():
  """E[g] = Proj_G(grad f) without clipping (and negligible noise)."""
  est = pazo_mod.pazo_p(
    clip=1e3,  # the per-example directional derivatives stay far below
    **FINE_GRID,
    smoothing=1e-3,
    expected_batch_size=B,
    num_public_batches=2,
  )
  pubs = PUBS[:2]

  def one(key):
    g, _ = est.update(
      None,
      with_keys(zoprivacy.init(est, X0), key),
      X0,
      per_example_loss=quadratic_loss,
      batch=BATCH,
      public_batches=pubs,
    )
    return _flat(g)

  g = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(1), 4000))
  basis = jax.vmap(_flat)(
    public_data.public_subspace(
      public_data.public_gradients(
        lambda p, b: jnp.mean(batched_quadratic(p, b)), X0, pubs
      )
    )
  )
  true = basis.T @ (basis @ _flat(mean_grad(X0, BATCH)))
  se = np.asarray(g.std(0)) / math.sqrt(g.shape[0])
  assert np.all(np.abs(np.asarray(g.mean(0) - true)) <= 5 * se + 1e-4)


# ------------------------------------------------------------------ PAZO-S


def _targeted_loss(target):
  return lambda p, e: 0.5 * jnp.sum((_flat(p) - target) ** 2) + 0.0 * e[0]


def test_pazo_s_candidates_are_distinct_public_gradients():
  eta = 0.1
  grads = jax.vmap(_flat)(
    public_data.public_gradients(
      lambda p, b: jnp.mean(batched_quadratic(p, b)), X0, PUBS
    )
  )
  assert (
    float(
      jnp.min(
        jnp.linalg.norm(grads[:, None] - grads[None], axis=-1)
        + 1e9 * jnp.eye(3)
      )
    )
    > 0.1
  )
  outputs = []
  for j in range(3):
    # The private loss is smallest at x - eta g_j: PAZO-S must pick g_j.
    target = _flat(X0) - eta * grads[j]
    est = pazo_s(
      clip=1.0,  # the losses are <= 0.13 (score gaps >= 0.02): never clipped
      **FINE_GRID,
      learning_rate=eta,
      expected_batch_size=B,
      num_public_batches=3,
      extra_candidate=False,
    )
    g, state = est.update(
      None,
      zoprivacy.init(est, X0),
      X0,
      per_example_loss=_targeted_loss(target),
      batch=BATCH,
      public_batch=PUB,
      public_batches=PUBS,
      public_loss=lambda p, b: jnp.mean(batched_quadratic(p, b)),
    )
    assert int(jnp.argmin(state.released)) == j
    np.testing.assert_allclose(_flat(g), grads[j], rtol=1e-5, atol=1e-6)
    outputs.append(_flat(g))
  assert len({tuple(np.round(np.asarray(o), 5)) for o in outputs}) == 3


def test_pazo_s_extra_candidate_is_taken_only_when_it_scores_best():
  eta = 0.1
  grads = jax.vmap(_flat)(
    public_data.public_gradients(
      lambda p, b: jnp.mean(batched_quadratic(p, b)), X0, PUBS
    )
  )
  w = jnp.array([0.3, -0.2, 0.1, 0.4, -0.3, 0.2])
  target = _flat(X0) - eta * (grads[0] + w)
  est = pazo_s(
    clip=1.0,  # the candidates' losses are <= 0.15: never clipped
    **FINE_GRID,
    learning_rate=eta,
    expected_batch_size=B,
    num_public_batches=3,
    candidate_noise_scale=0.3,
  )

  def one(key):
    g, s = est.update(
      None,
      with_keys(zoprivacy.init(est, X0), key),
      X0,
      per_example_loss=_targeted_loss(target),
      batch=BATCH,
      public_batches=PUBS,
      public_loss=PUBLIC_QUADRATIC,
    )
    return _flat(g), s.released

  g, released = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(2), 64))
  chosen = np.argmin(np.asarray(released), axis=1)
  took_extra = chosen == 3
  assert took_extra.any() and (~took_extra).any()
  best = np.argmin(np.asarray(released)[:, :3], axis=1)
  rows = np.arange(len(best))
  dist = np.linalg.norm(
    np.asarray(g)[:, None] - np.asarray(grads)[None], axis=-1
  )
  # Not taken: the output is exactly the best public gradient.
  np.testing.assert_allclose(dist[rows, best][~took_extra], 0.0, atol=1e-5)
  # Taken: the output is g_best + z' (||z'|| ~ 0.3 sqrt(d)), no public gradient.
  assert np.all(dist[took_extra].min(axis=1) > 1e-3)
  assert np.all(dist[rows, best][took_extra] < 0.3 * math.sqrt(D) * 3)


def test_pazo_s_chain_with_sgd_is_the_candidate_step():
  eta = 0.1
  est = _make("pazo_s", learning_rate=eta)
  tx = optax.chain(est, optax.sgd(eta))
  state = explicit_keys(
    zoprivacy.init(tx, X0)
  )  # the estimator alone: the same keys
  g, _ = est.update(
    None,
    state[0],
    X0,
    per_example_loss=quadratic_loss,
    batch=BATCH,
    public_batches=PUBS,
  )
  u, _ = tx.update(
    None,
    state,
    X0,
    per_example_loss=quadratic_loss,
    batch=BATCH,
    public_batches=PUBS,
  )
  np.testing.assert_allclose(_flat(u), -eta * _flat(g), rtol=1e-6)


# ------------------------------------------------------ operation counts


@pytest.mark.parametrize(
  "name,kw,private_fwd,public_fb",
  [
    ("dpzero", dict(num_queries=3), 6, 0),
    ("pazo_m", dict(num_queries=1), 2, 1),
    ("pazo_m", dict(num_queries=3), 6, 1),
    ("pazo_p", dict(num_queries=2), 4, 3),
    ("pazo_p_prime", dict(num_queries=1), 2, 3),
    ("pazo_s", dict(), 4, 3),
    ("pazo_s", dict(extra_candidate=False), 3, 3),
  ],
)
def test_operation_counts_match_table_6(name, kw, private_fwd, public_fb):
  """PAZO Table 6: 2q or k+1 private forwards, 1 or k public for+backward."""
  if name == "dpzero":
    est = zoprivacy.dpzero(**_kw(smoothing=1e-3, **kw))
  else:
    est = _make(name, **kw)
  loss = CountingLoss()
  with jax.disable_jit():
    g, _ = est.update(
      None,
      zoprivacy.init(est, X0),
      X0,
      batched_loss=loss,
      batch=BATCH,
      **_public(name),
    )
  assert loss.count(False, 8) == private_fwd
  assert loss.count(True, 5) == public_fb
  assert len(loss.calls) == private_fwd + public_fb  # no private backward
  assert np.all(np.isfinite(_flat(g)))


@pytest.mark.parametrize("name", ["dpmd", "dope_sgd", "gep"])
def test_first_order_baselines_operation_counts(name, monkeypatch):
  """Table 6: b private forward+backward (vmapped over the b = 8 examples),
  one public for+backward (GEP: b' = 5 per-example public passes)."""
  # The exact vector noise's device draw calls no loss, and op by op (under
  # disable_jit) it took most of the test's time: zeros stand in for it.
  monkeypatch.setattr(
    device_discrete_gaussian,
    "draw",
    lambda key_words, step, sigma, size: jnp.zeros([size], jnp.int32),
  )
  loss = CountingLoss()
  est = _make(name)
  with jax.disable_jit():
    est.update(
      None,
      zoprivacy.init(est, X0),
      X0,
      batched_loss=loss,
      batch=BATCH,
      public_batch=PUB,
    )
  private_fb = loss.count(True, 1)
  public_fb = loss.count(True, 5)
  if name == "gep":
    assert private_fb == 8 + 5 and public_fb == 0  # b + b' per-example passes
  else:
    assert private_fb == 8 and public_fb == 1
  assert loss.count(False, 8) == 0


# ------------------------------------------------------------- noise std


def _zero_loss(params, example):
  return 0.0 * jnp.sum(_flat(params)) + 0.0 * example[0]


@pytest.mark.parametrize(
  "name,kw,expected_std",
  [
    ("pazo_m", dict(num_queries=1), 0.8 * 1.5 / 8),
    ("pazo_m", dict(num_queries=3), 0.8 * 1.5 * math.sqrt(3) / 8),
    ("pazo_p", dict(num_queries=2), 0.8 * 1.5 * math.sqrt(2) / 8),
    ("pazo_s", dict(), 0.8 * 1.5 * math.sqrt(4) / 8),  # k + 1 = 4
    ("pazo_s", dict(extra_candidate=False), 0.8 * 1.5 * math.sqrt(3) / 8),
  ],
)
@pytest.mark.parametrize("noise", ["exact", "float"])
def test_noise_std_per_query(name, kw, expected_std, noise):
  """Zero loss: each released value is pure noise / b, std sqrt(q) sigma C / b.

  Exact noise (the default): a discrete Gaussian of sigma ``z m sqrt(q)``
  grid units of ``C / m``, the same std as the float Gaussian's.
  """
  est = _make(name, clip=0.8, noise_multiplier=1.5, noise=noise, **kw)
  extra = _public(name)
  if name == "pazo_s":
    extra["public_loss"] = lambda p, b: jnp.mean(batched_quadratic(p, b))

  def one(key):
    _, s = est.update(
      None,
      with_keys(zoprivacy.init(est, X0), key),
      X0,
      per_example_loss=_zero_loss,
      batch=BATCH,
      **extra,
    )
    return s.released

  released = np.asarray(
    jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(11), 2000))
  )
  # The plan's per-query Gaussian std: sigma C sqrt(q) (q = k + 1 for PAZO-S).
  plan = est.privacy_plan
  exact = noise == "exact"
  assert plan.mechanism.name == ("discrete_gaussian" if exact else "gaussian")
  plan_std = plan.noise_multiplier * plan.clip * math.sqrt(plan.num_queries)
  assert plan_std / B == pytest.approx(expected_std)
  mechanism, _ = zoprivacy.mechanisms.noise.make_mechanism(
    "gaussian",
    clip=plan.clip,
    noise_multiplier=plan.noise_multiplier,
    num_queries=plan.num_queries,
    noise=noise,
  )
  assert mechanism.noise_std / B == pytest.approx(expected_std)
  if exact:  # every release is an integer number of grid steps C / (m b)
    assert plan.integer_noise_scale == pytest.approx(
      1.5 * 1024 * math.sqrt(plan.num_queries)
    )
    units = released * B * plan.grid_points / plan.clip
    np.testing.assert_allclose(units, np.round(units), rtol=1e-6, atol=1e-3)
  # Sample std over >= 2000 draws: relative s.e. < 1.6%; 10% is > 6 s.e.
  assert float(np.std(released)) == pytest.approx(expected_std, rel=0.10)
  assert abs(float(np.mean(released))) <= 5 * expected_std / math.sqrt(
    released.size
  )


# ------------------------------------------------------------ sensitivity


PUBLIC_QUADRATIC = lambda p, b: jnp.mean(batched_quadratic(p, b))


@pytest.mark.parametrize(
  "name,kw",
  [
    ("pazo_m", dict(num_queries=2)),
    ("pazo_p", dict(num_queries=2)),
    ("pazo_p_prime", dict()),
    ("pazo_s", dict()),
    ("pazo_m", dict(noise="float")),  # the floating-point opt-in
    ("pazo_p", dict(noise="float")),
  ],
)
def test_removing_one_example_moves_released_values_by_at_most_clip_over_b(
  name, kw
):
  """The default (exact noise, drawn by the update's own host callback) and
  the float opt-in: the same bound keys draw the same noise whatever the
  mask."""
  clip = 0.7
  est = _make(name, clip=clip, noise_multiplier=2.0, **kw)
  state = explicit_keys(zoprivacy.init(est, X0))  # one noise for every mask
  full = jnp.ones(8, bool)
  plan = est.privacy_plan
  exact = kw.get("noise", "exact") == "exact"
  assert plan.noise_kind == ("discrete" if exact else "continuous")

  @jax.jit
  def release(mask):
    g, s = est.update(
      None,
      state,
      X0,
      per_example_loss=adversarial_loss,
      batch=ADV_BATCH,
      mask=mask,
      public_loss=PUBLIC_QUADRATIC,
      **_public(name),
    )
    return _flat(g), s.released

  def run(mask):
    g, released = release(mask)
    assert np.all(np.isfinite(g))
    return np.asarray(released)

  r_full = run(full)
  assert np.all(np.isfinite(r_full))
  if exact:  # the release is an integer number of grid steps C / (m b)
    units = r_full * B * plan.grid_points / clip
    # (float32 keeps ~7 digits of the up to ~1e4 units)
    assert np.all(
      np.abs(units - np.round(units)) <= 1e-6 * np.abs(units) + 1e-3
    )
  for i in range(8):
    r_i = run(full.at[i].set(False))
    if name == "pazo_s":
      # The first k scores are fixed queries; the (k+1)-th is only comparable
      # when both runs chose the same best candidate.
      same_query = np.argmin(r_full[:3]) == np.argmin(r_i[:3])
      r_full_cmp, r_i_cmp = (
        (r_full, r_i) if same_query else (r_full[:3], r_i[:3])
      )
    else:
      r_full_cmp, r_i_cmp = r_full, r_i
    # Same key, same noise: the difference is example i's clipped value / b.
    assert np.max(np.abs(r_full_cmp - r_i_cmp)) * B <= clip * (1 + 1e-4)


def _adversarial_grad_loss(params, example):
  """Per-example gradients that are huge, NaN or inf."""
  scale, kind = example[0], example[1]
  factor = jnp.where(kind == 1, jnp.nan, jnp.where(kind == 2, jnp.inf, 1.0))
  return scale * factor * jnp.sum(_flat(params) ** 2 * jnp.arange(1.0, 7.0))


@pytest.mark.parametrize(
  "name,bound", [("dope_sgd", 0.7), ("gep", 0.7 + 0.4), ("dpmd", 0.7)]
)
def test_first_order_sensitivity(name, bound):
  if name == "gep":
    est = gep(
      embedding_clip=0.7,
      residual_clip=0.4,
      noise_multiplier=2.0,
      expected_batch_size=B,
      num_bases=2,
    )
  else:
    est = _make(name, clip=0.7, noise_multiplier=2.0)
  state = explicit_keys(zoprivacy.init(est, X0))  # one noise for every mask
  if name == "dpmd":  # mid-schedule: the private part has weight 1 - alpha_t
    state = state._replace(step=jnp.asarray(50, jnp.int32))
    bound *= 1.0 - float(public_first_order.dpmd_public_weight(50, 100))
  public = jnp.stack([jnp.linspace(1.0, 2.0, 5), jnp.zeros(5)], 1)

  @jax.jit
  def run(mask):
    g, _ = est.update(
      None,
      state,
      X0,
      per_example_loss=_adversarial_grad_loss,
      batch=ADV_BATCH,
      mask=mask,
      public_batch=public,
    )
    return _flat(g)

  g_full = np.asarray(run(jnp.ones(8, bool)))
  assert np.all(np.isfinite(g_full))
  for i in range(8):
    g_i = np.asarray(run(jnp.ones(8, bool).at[i].set(False)))
    assert np.all(np.isfinite(g_i))
    assert np.linalg.norm(g_full - g_i) * B <= bound * (1 + 1e-4)


# ----------------------------------------------------- first-order baselines


@same_test_noise
def test_dpmd_schedule_and_endpoints():
  T = 100
  assert float(public_first_order.dpmd_public_weight(0, T)) == pytest.approx(
    1.0
  )
  assert float(
    public_first_order.dpmd_public_weight(T // 2, T)
  ) == pytest.approx(math.cos(math.pi / 4), abs=1e-6)
  assert float(public_first_order.dpmd_public_weight(T, T)) == pytest.approx(
    0.0, abs=1e-6
  )
  assert float(
    public_first_order.dpmd_public_weight(3 * T, T)
  ) == pytest.approx(0.0, abs=1e-6)
  # Same direction key and test-noise seed: DPMD's private part at step T is
  # DP-SGD's step T, key for key.
  seeds = dict(direction_key=4, insecure_test_noise_seed=4)
  est = _make("dpmd", num_steps=T, **seeds)
  dpsgd = zoprivacy.dp_sgd(
    clip=1.0, noise_multiplier=1.0, expected_batch_size=B, **seeds
  )
  call = dict(per_example_loss=quadratic_loss, batch=BATCH, public_batch=PUB)
  g0, s1 = est.update(None, zoprivacy.init(est, X0), X0, **call)
  np.testing.assert_allclose(_flat(g0), _flat(mean_grad(X0, PUB)), rtol=1e-6)
  assert int(s1.step) == 1
  step_T = jnp.asarray(T, jnp.int32)
  late = zoprivacy.init(est, X0)._replace(step=step_T)
  g_T, _ = est.update(None, late, X0, **call)
  g_dp, _ = dpsgd.update(
    None, zoprivacy.init(dpsgd, X0)._replace(step=step_T), X0, **call
  )
  np.testing.assert_allclose(_flat(g_T), _flat(g_dp), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["dope_sgd", "gep"])
def test_first_order_baselines_recover_the_private_gradient(name):
  """Huge clips and negligible noise: the private batch gradient comes back
  (float noise: the exact lattice's step, clip / 2**19, would not vanish)."""
  if name == "gep":
    est = gep(
      embedding_clip=1e4,
      residual_clip=1e4,
      noise_multiplier=1e-9,
      expected_batch_size=B,
      num_bases=3,
      noise="float",
    )
  else:
    est = public_first_order.dope_sgd(
      clip=1e4, noise_multiplier=1e-9, expected_batch_size=B, noise="float"
    )
  g, _ = est.update(
    None,
    zoprivacy.init(est, X0),
    X0,
    per_example_loss=quadratic_loss,
    batch=BATCH,
    public_batch=PUB,
  )
  np.testing.assert_allclose(
    _flat(g), _flat(mean_grad(X0, BATCH)), rtol=1e-4, atol=1e-4
  )


def test_dope_clips_around_the_public_gradient():
  """Every private gradient equal to g_pub: nothing is clipped, output g_pub."""
  same = jnp.tile(PUB.mean(0, keepdims=True), (8, 1))
  pub_same = jnp.tile(PUB.mean(0, keepdims=True), (5, 1))
  est = public_first_order.dope_sgd(
    clip=1e-6, noise_multiplier=1e-9, expected_batch_size=B
  )
  g, _ = est.update(
    None,
    zoprivacy.init(est, X0),
    X0,
    per_example_loss=quadratic_loss,
    batch=same,
    public_batch=pub_same,
  )
  np.testing.assert_allclose(
    _flat(g), _flat(mean_grad(X0, pub_same)), rtol=1e-5
  )


def test_gep_mechanism_accounting():
  mech = GEPMechanism(
    embedding_clip=2.0,
    residual_clip=0.5,
    embedding_noise_multiplier=3.0,
    residual_noise_multiplier=4.0,
  )
  sigma_eff = (3.0**-2 + 4.0**-2) ** -0.5  # = 2.4
  assert mech.noise_multiplier == pytest.approx(2.4)
  assert mech.noise_std == pytest.approx((6.0, 2.0))
  assert mech.dp_event() == dp_accounting.GaussianDpEvent(
    pytest.approx(sigma_eff)
  )
  # RDP of the two Gaussians on one Poisson batch = RDP of one Gaussian(sigma_eff).
  for p, steps in ((1.0, 1), (0.05, 500)):

    def rdp_eps(event):
      acc = dp_accounting.rdp.RdpAccountant()
      acc.compose(
        dp_accounting.SelfComposedDpEvent(
          dp_accounting.PoissonSampledDpEvent(p, event), steps
        )
      )
      return acc.get_epsilon(1e-5)

    assert rdp_eps(mech.composed_dp_event()) == pytest.approx(
      rdp_eps(mech.dp_event()), rel=1e-9
    )
  # Unsampled PLD composition agrees too (discretization 1e-4).
  eps_composed = accounting.pld_epsilon(mech.composed_dp_event(), delta=1e-5)
  eps_single = accounting.pld_epsilon(mech.dp_event(), delta=1e-5)
  assert eps_composed == pytest.approx(eps_single, rel=1e-2)
  est = gep(
    embedding_clip=1.0,
    residual_clip=1.0,
    noise_multiplier=1.7,
    expected_batch_size=B,
    num_bases=2,
    dataset_size=100,
    noise="secure_mode",
  )
  plan = zoprivacy.find_plan(zoprivacy.init(est, X0))
  assert plan is est.privacy_plan
  assert plan.mechanism.name == "gaussian"
  assert plan.noise_multiplier == pytest.approx(1.7)  # the effective sigma
  assert plan.step_event() == dp_accounting.PoissonSampledDpEvent(
    0.08, dp_accounting.GaussianDpEvent(pytest.approx(1.7))
  )


def test_gep_noise_variance():
  """Zero private gradients: E||g||^2 = (k s0^2 C0^2 + d s1^2 C1^2) / b^2."""
  loss = lambda p, e: e[0] * quadratic_loss(p, e[1:])
  private = jnp.concatenate([jnp.zeros((8, 1)), BATCH], 1)
  public = jnp.concatenate([jnp.ones((5, 1)), PUB], 1)
  est = gep(
    embedding_clip=2.0,
    residual_clip=0.5,
    expected_batch_size=B,
    embedding_noise_multiplier=3.0,
    residual_noise_multiplier=1.0,
    num_bases=2,
  )

  def one(key):
    g, _ = est.update(
      None,
      with_keys(zoprivacy.init(est, X0), key),
      X0,
      per_example_loss=loss,
      batch=private,
      public_batch=public,
    )
    return jnp.sum(_flat(g) ** 2)

  sq = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(5), 2000))
  expected = (2 * 36.0 + D * 0.25) / B**2
  # ||g||^2 is a weighted chi-square with relative std < 1; 2000 draws give
  # relative s.e. < 2.3%, so 10% is > 4 s.e.
  assert float(jnp.mean(sq)) == pytest.approx(expected, rel=0.10)


# ------------------------------------------------------------- accounting


@pytest.mark.parametrize(
  "name,kw",
  [
    ("pazo_m", dict(num_queries=1)),
    ("pazo_m", dict(num_queries=5)),
    ("pazo_p", dict(num_queries=3)),
    ("pazo_s", dict()),
    ("pazo_s", dict(extra_candidate=False)),
    ("dpmd", dict()),
    ("dope_sgd", dict()),
    ("gep", dict()),
  ],
)
def test_step_event_is_one_poisson_gaussian(name, kw):
  """The floating-point opt-in (PAZO and the vector estimators)."""
  kw = dict(kw, noise="float")
  est = _make(name, noise_multiplier=1.3, dataset_size=400, **kw)
  plan = zoprivacy.find_plan(optax.chain(est, optax.sgd(0.1)).init(X0))
  assert plan == est.privacy_plan and plan.is_private
  assert plan.step_event() == dp_accounting.PoissonSampledDpEvent(
    B / 400, dp_accounting.GaussianDpEvent(pytest.approx(1.3))
  )


@pytest.mark.parametrize(
  "name,kw",
  [
    ("pazo_m", dict(num_queries=1)),
    ("pazo_m", dict(num_queries=5)),
    ("pazo_p", dict(num_queries=3)),
    ("pazo_s", dict()),
    ("pazo_s", dict(extra_candidate=False)),
  ],
)
def test_exact_default_step_is_one_poisson_discrete_gaussian(name, kw):
  """PAZO's default: the q queries are one Poisson-sampled discrete Gaussian
  (no dp_accounting event; accounted by its PLD), whose epsilon equals the
  continuous q-query Gaussian's (to ~1e-9, docs/exact_noise.md)."""
  est = _make(name, noise_multiplier=1.3, dataset_size=400, **kw)
  plan = zoprivacy.find_plan(optax.chain(est, optax.sgd(0.1)).init(X0))
  assert plan == est.privacy_plan and plan.is_private
  assert (
    plan.mechanism.name == "discrete_gaussian" and plan.step_event() is None
  )
  assert plan.sampling_probability == pytest.approx(B / 400)
  q = plan.num_queries
  assert q == kw.get("num_queries", 3 + kw.get("extra_candidate", True))
  assert plan.integer_noise_scale == pytest.approx(1.3 * 1024 * math.sqrt(q))
  float_plan = _make(
    name, noise_multiplier=1.3, dataset_size=400, noise="float", **kw
  ).privacy_plan
  assert plan.epsilon(100, 1e-5) == pytest.approx(
    float_plan.epsilon(100, 1e-5), rel=1e-6
  )


# ------------------------------------------------------------ composition


@pytest.mark.parametrize(
  "name,opt",
  [(n, "sgd") for n in ALL]
  + [("pazo_m", "adam")]
  + [
    pytest.param(n, "adam", marks=pytest.mark.slow)
    for n in ("pazo_p", "pazo_s", "gep")
  ],
)
def test_jitted_chain_composes_and_descends(name, opt):
  if name in ("dpmd", "dope_sgd", "gep"):
    kw = dict(noise_multiplier=0.01)
    kw.update(
      dict(embedding_clip=10.0, residual_clip=10.0)
      if name == "gep"
      else dict(clip=10.0)
    )
  elif name == "pazo_s":
    kw = dict(clip=100.0, noise_multiplier=0.01, learning_rate=0.05)
  else:
    kw = dict(clip=50.0, noise_multiplier=0.01, num_queries=2)
  est = _make(name, **kw)
  tx = optax.chain(est, optax.sgd(0.05) if opt == "sgd" else optax.adam(0.05))
  extra = _public(name)

  @jax.jit
  def step(params, state):
    updates, state = tx.update(
      jax.tree.map(jnp.zeros_like, params),
      state,
      params,
      per_example_loss=quadratic_loss,
      batch=BATCH,
      **extra,
    )
    return optax.apply_updates(params, updates), state

  mean_loss = lambda p: float(jnp.mean(batched_quadratic(p, BATCH)))
  optimum = mean_loss({"a": BATCH.mean(0)[:4], "b": BATCH.mean(0)[4:]})
  params, state = X0, zoprivacy.init(tx, X0)
  for _ in range(100):
    params, state = step(params, state)
  # The excess loss over the private optimum at least halves.
  assert mean_loss(params) - optimum < 0.5 * (mean_loss(X0) - optimum)


@same_test_noise
@pytest.mark.parametrize(
  # GEP's (6 s on 2 cores) in CI's slow step: DPMD's and DOPE-SGD's cover
  # the first-order baselines' keys here.
  "name",
  [pytest.param(n, marks=pytest.mark.slow) if n == "gep" else n for n in ALL],
)
def test_key_determinism_and_batched_loss(name):
  # Two inits with the same test-noise seed give the same noise key.
  est = _make(name, direction_key=3, insecure_test_noise_seed=3)
  call = dict(batch=BATCH, **_public(name))
  g1, s1 = est.update(
    None, zoprivacy.init(est, X0), X0, per_example_loss=quadratic_loss, **call
  )
  g2, _ = est.update(
    None,
    zoprivacy.init(est, X0),
    X0,
    batched_loss=batched_quadratic,
    unknown_arg=1,
    **call,
  )
  np.testing.assert_allclose(_flat(g1), _flat(g2), rtol=1e-5, atol=1e-6)
  g3, _ = est.update(None, s1, X0, per_example_loss=quadratic_loss, **call)
  if name != "pazo_s":  # PAZO-S may pick the same public gradient again
    assert not np.allclose(_flat(g1), _flat(g3))


@pytest.mark.parametrize(
  "name", ["pazo_m", "pazo_p", "pazo_s", "dope_sgd", "gep"]
)
def test_padding_contributes_nothing(name):
  est = _make(name)
  state = explicit_keys(zoprivacy.init(est, X0))  # both calls: the same keys
  garbage = jnp.concatenate([BATCH[:5], jnp.full((3, D), jnp.nan)], 0)
  garbage = garbage.at[6].set(1e30)
  call = dict(per_example_loss=quadratic_loss, **_public(name))
  padded, _ = est.update(
    None, state, X0, batch=garbage, mask=jnp.arange(8) < 5, **call
  )
  trimmed, _ = est.update(None, state, X0, batch=BATCH[:5], **call)
  np.testing.assert_allclose(
    _flat(padded), _flat(trimmed), rtol=1e-5, atol=1e-6
  )


# -------------------------------------------------------------- bad input


@pytest.mark.parametrize(
  "make,match",
  [
    (lambda: _make("pazo_m", alpha=-0.1), "alpha"),
    (lambda: _make("pazo_m", alpha=1.5), "alpha"),
    (lambda: _make("pazo_m", num_queries=0), "num_queries"),
    (lambda: _make("pazo_m", directions="cube"), "directions"),
    (lambda: _make("pazo_p", num_public_batches=0), "num_public_batches"),
    (lambda: _make("pazo_p", orthonormalize="yes"), "orthonormalize"),
    (lambda: _make("pazo_s", num_public_batches=0), "num_public_batches"),
    (
      lambda: _make("pazo_s", candidate_noise_scale=-1.0),
      "candidate_noise_scale",
    ),
    (lambda: _make("pazo_s", learning_rate=0.0), "learning_rate"),
    (lambda: _make("pazo_s", extra_candidate=1), "extra_candidate"),
    (lambda: _make("dpmd", num_steps=0), "num_steps"),
    (lambda: _make("dope_sgd", clip=0.0), "clip"),
    (
      lambda: _make(
        "gep", noise_multiplier=1.0, embedding_noise_multiplier=1.0
      ),
      "either",
    ),
    (lambda: _make("gep", noise_multiplier=None), "needs noise_multiplier"),
    (lambda: _make("gep", num_bases=0), "num_bases"),
    (lambda: _make("pazo_m", noise_multiplier=0.0), "noise_multiplier"),
  ],
)
def test_bad_hyperparameters_fail_at_construction(make, match):
  with pytest.raises(ValueError, match=match):
    make()


@pytest.mark.parametrize(
  "name,extra,match",
  [
    ("pazo_m", dict(), "public_batch="),
    ("pazo_m", dict(public_batch={"x": PUB}), "structure"),
    ("pazo_m", dict(public_batch=PUB[:, :4]), "per-example shape"),
    ("pazo_p", dict(), "public_batches="),
    ("pazo_p", dict(public_batch=PUB), "stack k batches"),
    ("pazo_p", dict(public_batches=PUBS[:2]), "leading axis k=3"),
    ("pazo_p", dict(public_batches=PUB[:3]), "per-example shape"),
    ("pazo_s", dict(public_batches=jnp.ones(3)), "per-example shape"),
    ("pazo_s", dict(public_batches={"a": PUBS}), "structure"),
    ("pazo_s", dict(public_batches=[]), "no array leaves"),
    ("dpmd", dict(), "public_batch="),
    ("gep", dict(), "public_batch="),
    ("dope_sgd", dict(public_batches=PUBS), "public_batch="),
  ],
)
def test_bad_public_data_fails_at_first_call(name, extra, match):
  est = _make(name)
  with pytest.raises(ValueError, match=match):
    est.update(
      None,
      zoprivacy.init(est, X0),
      X0,
      per_example_loss=quadratic_loss,
      batch=BATCH,
      **extra,
    )


def test_too_many_public_directions_for_the_dimension():
  pubs = jnp.stack([PUB + j for j in range(D + 1)])
  est = _make("pazo_p", num_public_batches=D + 1)
  with pytest.raises(ValueError, match="orthonormalize"):
    est.update(
      None,
      zoprivacy.init(est, X0),
      X0,
      per_example_loss=quadratic_loss,
      batch=BATCH,
      public_batches=pubs,
    )
  est = _make("gep", num_bases=D + 1)
  with pytest.raises(ValueError, match="num_bases"):
    est.update(
      None,
      zoprivacy.init(est, X0),
      X0,
      per_example_loss=quadratic_loss,
      batch=BATCH,
      public_batch=PUB,
    )
