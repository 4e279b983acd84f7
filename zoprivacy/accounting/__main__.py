"""``python -m zoprivacy.accounting ...``: ``python -m zoprivacy.privacy ...``.

The accounting command builds a privacy plan, and plans live above the
accounting (:mod:`zoprivacy.privacy`), so the command is
:mod:`zoprivacy.privacy.__main__`. This module keeps the earlier command
working without importing upward: it runs ``python -m zoprivacy.privacy``
with the same arguments, in the same interpreter and environment, and
exits with its status.
"""

from __future__ import annotations

import subprocess
import sys


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  command = [sys.executable, "-m", "zoprivacy.privacy", *argv]
  return subprocess.call(command)


if __name__ == "__main__":
  sys.exit(main())
