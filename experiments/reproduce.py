"""Paper-reproduction commands.

    python -m experiments.reproduce dpzero_quadratic --quick  # try this first
    python -m experiments.reproduce dpzero_quadratic          # Table 6 grid
    python -m experiments.reproduce dpzero_rates              # slopes of it
    python -m experiments.reproduce dpzo_accounting
    python -m experiments.reproduce pazo_table1 --estimate  # F-MNIST analog
    python -m experiments.reproduce pazo_table1 --curve     # its step budget
    python -m experiments.reproduce pazo_table1             # its table
    python -m experiments.reproduce hidden_state_fig1   # Chien et al. Fig. 1
    python -m experiments.reproduce hidden_state_sweep  # accuracy vs eps, K
    python -m experiments.reproduce mia  # DP-ZO Table 6 analog (MIA AUC)

Results go to ``results/<name>/`` (``--out`` to change it); each command
prints a short summary and writes ``summary.md`` there. See REPRODUCTION.md.
"""

from __future__ import annotations

import argparse
import os
import sys

COMMANDS = (
  "dpzero_quadratic",
  "dpzero_rates",
  "dpzo_accounting",
  "pazo_table1",
  "hidden_state_fig1",
  "hidden_state_sweep",
  "mia",
)


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
    prog="python -m experiments.reproduce",
    description="Reproduce tables and figures of the zoprivacy papers.",
  )
  parser.add_argument("name", choices=COMMANDS)
  _add_common_options(parser)
  _add_quadratic_options(parser)
  _add_pazo_options(parser)
  return parser


def _add_common_options(parser: argparse.ArgumentParser) -> None:
  """The options several commands share: output, grid size, plots."""
  parser.add_argument(
    "--out",
    default=None,
    help="results directory (default results/<name>/, or "
    "results/<name>_quick/ with --quick)",
  )
  parser.add_argument(
    "--quick",
    action="store_true",
    help="dpzero_quadratic/dpzero_rates: the reduced grid "
    "(winning stepsize/clip region, fewer iteration "
    "counts); dpzo_accounting: skip the T=75000 "
    "calibrations; hidden_state_*: fewer K and T",
  )
  parser.add_argument(
    "--fast",
    action="store_true",
    help="dpzero_quadratic, pazo_table1: the tiny grid of "
    "the test suite (pazo_table1: a smoke run, no "
    "verdicts)",
  )
  parser.add_argument(
    "--methods",
    default=None,
    help="dpzero_quadratic: comma-separated subset of "
    "dpzero,dpgd_zeroth,dp_gd; pazo_table1: of its "
    "method names (DP-SGD,DPZero,PAZO-M,...)",
  )
  parser.add_argument(
    "--estimate",
    action="store_true",
    help="dpzero_quadratic, pazo_table1: time short "
    "probes and predict the grid's runtime instead of "
    "running it",
  )
  parser.add_argument("--no-plots", action="store_true")


def _add_quadratic_options(parser: argparse.ArgumentParser) -> None:
  """dpzero_quadratic's grid slices and dpzero_rates' source."""
  parser.add_argument(
    "--directions",
    choices=("sphere", "gaussian"),
    default="sphere",
    help="dpzero_quadratic: direction distribution "
    "(Alg. 1/2: sphere; DPZero Sec. 5 used gaussian)",
  )
  parser.add_argument(
    "--dims",
    default=None,
    help="dpzero_quadratic: comma-separated subset of d",
  )
  parser.add_argument(
    "--modes",
    default=None,
    help="dpzero_quadratic: comma-separated subset of "
    "rank_d,rank_sqrt_d,rank_log_d",
  )
  parser.add_argument(
    "--max-iterations",
    type=int,
    default=None,
    help="dpzero_quadratic: drop iteration counts above "
    "this (a partial run; the cache is shared with the "
    "full grid)",
  )
  parser.add_argument(
    "--source",
    default=None,
    help="dpzero_rates: results directory of "
    "dpzero_quadratic (default results/dpzero_quadratic"
    "[_quick]/)",
  )


def _add_pazo_options(parser: argparse.ArgumentParser) -> None:
  """pazo_table1's slices, time limit and step-budget curve."""
  parser.add_argument(
    "--epsilons",
    default=None,
    help="pazo_table1: comma-separated subset of the "
    "epsilon grid (a slice; the cache is shared)",
  )
  parser.add_argument(
    "--max-minutes",
    type=float,
    default=None,
    help="pazo_table1: start no new run after this many "
    "minutes; write the table of what is done",
  )
  parser.add_argument(
    "--curve",
    action="store_true",
    help="pazo_table1: the non-private learning curves on "
    "public data that set the step budget",
  )


def _grid(args):
  import dataclasses  # pylint: disable=g-import-not-at-top

  # Imported per subcommand: keeps JAX out of the start-up of the others.
  # pylint: disable-next=g-import-not-at-top
  from experiments.reproductions import dpzero_quadratic

  cfg = dpzero_quadratic.CONFIGS[
    "fast" if args.fast else "quick" if args.quick else "full"
  ]
  changes = {"directions": args.directions}
  if args.dims:
    changes["dims"] = tuple(int(d) for d in args.dims.split(","))
  if args.modes:
    changes["modes"] = tuple(args.modes.split(","))
  if args.methods:
    changes["methods"] = tuple(args.methods.split(","))
  if args.max_iterations:
    changes["iterations"] = {
      m: tuple(t for t in ts if t <= args.max_iterations)
      for m, ts in cfg.iterations.items()
    }
  return dataclasses.replace(cfg, **changes)


def _default_out(name: str, args) -> str:
  suffix = "_fast" if args.fast else "_quick" if args.quick else ""
  if args.directions != "sphere":
    suffix += f"_{args.directions}"
  return os.path.join("results", name + suffix)


def _out(args) -> str:
  """``--out``, or the command's default results directory, created."""
  out = args.out or _default_out(args.name, args)
  os.makedirs(out, exist_ok=True)
  return out


def _dpzero_quadratic(args) -> None:
  # Imported per subcommand: keeps JAX out of the start-up of the others.
  # pylint: disable-next=g-import-not-at-top
  from experiments.reproductions import dpzero_quadratic

  if args.estimate:
    dpzero_quadratic.estimate_runtime(_grid(args))
    return
  dpzero_quadratic.main(_grid(args), _out(args), make_plots=not args.no_plots)


def _dpzero_rates(args) -> None:
  if args.fast:
    raise SystemExit(
      "dpzero_rates has no --fast mode: the fast dpzero_quadratic grid has "
      "one dimension, and a slope needs at least two. Use --quick (the "
      "reduced grid) or the full grid."
    )
  # Imported per subcommand: keeps JAX out of the start-up of the others.
  # pylint: disable-next=g-import-not-at-top
  from experiments.reproductions import dpzero_rates

  source = args.source or _default_out("dpzero_quadratic", args)
  dpzero_rates.main(source, _out(args))


def _dpzo_accounting(args) -> None:
  # Imported per subcommand: keeps JAX out of the start-up of the others.
  # pylint: disable-next=g-import-not-at-top
  from experiments.reproductions import dpzo_accounting

  out = args.out or os.path.join("results", args.name)
  os.makedirs(out, exist_ok=True)
  dpzo_accounting.main(out, quick=args.quick)


def _pazo_table1(args) -> None:
  # Imported per subcommand: keeps JAX out of the start-up of the others.
  # pylint: disable-next=g-import-not-at-top
  from experiments.reproductions import pazo_table1, pazo_table1_budget

  if args.quick:
    raise SystemExit(
      "pazo_table1 has no --quick mode: use --fast (smoke) "
      "or --epsilons/--max-minutes to run a slice."
    )
  mode = "fast" if args.fast else "full"
  methods = args.methods.split(",") if args.methods else None
  if args.estimate:
    pazo_table1_budget.estimate(mode, methods)
    return
  out = _out(args)
  if args.curve:
    pazo_table1_budget.curve(out, mode)
    return
  epsilons = (
    [float(e) for e in args.epsilons.split(",")] if args.epsilons else None
  )
  pazo_table1.main(out, mode, methods, epsilons, args.max_minutes)


def _hidden_state(args) -> None:
  """hidden_state_fig1 and hidden_state_sweep: the same interface."""
  import importlib  # pylint: disable=g-import-not-at-top

  module = importlib.import_module(f"experiments.reproductions.{args.name}")
  module.main(
    _out(args),
    module.QUICK if args.quick else module.FULL,
    make_plot=not args.no_plots,
  )


def _mia(args) -> None:  # DP-ZO Table 6 analog: membership inference
  # Imported per subcommand: keeps JAX out of the start-up of the others.
  from experiments.reproductions import mia  # pylint: disable=g-import-not-at-top

  mia.main(args.out or _default_out(args.name, args), fast=args.fast)


_RUNNERS = {
  "dpzero_quadratic": _dpzero_quadratic,
  "dpzero_rates": _dpzero_rates,
  "dpzo_accounting": _dpzo_accounting,
  "pazo_table1": _pazo_table1,
  "hidden_state_fig1": _hidden_state,
  "hidden_state_sweep": _hidden_state,
  "mia": _mia,
}


def main(argv=None) -> int:
  args = build_parser().parse_args(argv)
  _RUNNERS[args.name](args)
  return 0


if __name__ == "__main__":
  sys.exit(main())
