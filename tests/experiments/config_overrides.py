"""Tests' config overrides: ``apply(config, {"num_steps": 3, ...})``.

A dotted name (``"privacy.sampling"``, a registry's ``run_settings``) sets
the field of its block; a privacy setting given by its bare name
(``target_epsilon=None``, ``clip=2.0``) sets the ``privacy`` block's.
"""

PRIVACY = frozenset(
  (
    "clip",
    "noise",
    "grid_points",
    "target_epsilon",
    "noise_multiplier",
    "delta",
    "sampling",
    "expected_batch_size",
    "neighboring",
    "num_queries",
    "mechanism",
  )
)


def apply(config, overrides: dict):
  """``config`` with ``overrides`` set (see the module); returns it."""
  for name, value in dict(overrides).items():
    *blocks, leaf = ("privacy." + name if name in PRIVACY else name).split(".")
    node = config
    for block in blocks:
      node = node[block]
    with node.unlocked():
      setattr(node, leaf, value)
  return config
