"""``python -m experiments.run --config configs/<name>.py``: see
:mod:`experiments.run.cli`."""

import sys

from experiments.run import cli

if __name__ == "__main__":
  sys.exit(cli.main())
