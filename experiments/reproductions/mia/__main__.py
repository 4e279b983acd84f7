"""``python -m experiments.reproductions.mia [--fast] --out DIR``."""

from __future__ import annotations

import argparse
import sys

from experiments.reproductions import mia


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
    prog="python -m experiments.reproductions.mia",
    description="Membership inference on inserted canaries "
    "(DP-ZO Table 6 analog).",
  )
  parser.add_argument("--out", default="results/mia")
  parser.add_argument(
    "--fast", action="store_true", help="tiny smoke run, no verdict"
  )
  args = parser.parse_args(argv)
  mia.main(args.out, fast=args.fast)
  return 0


if __name__ == "__main__":
  sys.exit(main())
