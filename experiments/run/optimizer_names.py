"""The error for an optimizer name that optax lacks (no JAX needed).

Both the JAX-free pre-flight check and the optax-building
:mod:`experiments.run.optimizers` raise it, so it sits below both.
"""

from __future__ import annotations

import difflib

# Named in the message for an unknown optimizer.
OPTIMIZER_EXAMPLES = (
  "sgd",
  "adam",
  "adamw",
  "lion",
  "adafactor",
  "rmsprop",
  "lamb",
  "adagrad",
  "radam",
  "nadam",
)


def unknown_optimizer(name, optax_names) -> ValueError:
  """The error for an optimizer that optax does not have."""
  close = difflib.get_close_matches(str(name), list(optax_names), n=3)
  return ValueError(
    f"Unknown optimizer {name!r}; any optax optimizer works, "
    f"e.g. {', '.join(OPTIMIZER_EXAMPLES)}"
    + (f" (did you mean {', '.join(close)}?)" if close else "")
    + "."
  )
