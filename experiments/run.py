r"""Main entry point: ``python -m experiments.run --config configs/<name>.py``.

Override any field with ``--config.<field>=<value>``, e.g.

  python -m experiments.run --config configs/default.py \
      --config.target_epsilon=4 --config.num_steps=2000
"""

from absl import app
from absl import logging
from ml_collections import config_flags

from experiments import train

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Path to a configs/<name>.py file.", lock_config=True)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  logging.set_verbosity(logging.WARNING)
  config = _CONFIG.value
  result = train.train(config)
  print(train.format_report(result))


if __name__ == "__main__":
  app.run(main)
