"""Command line: ``python -m zoprivacy.privacy {epsilon,calibrate} ...``.

Examples (DP-ZO Table 16; then what a default run reports)::

    python -m zoprivacy.privacy epsilon --noise-multiplier 30.9 \
        --sampling-probability 0.016 --steps 75000 --delta 1e-5
    python -m zoprivacy.privacy calibrate --epsilon 0.5 --delta 1e-5 \
        --sampling-probability 0.016 --steps 75000
    python -m zoprivacy.privacy epsilon --mechanism laplace \
        --noise-multiplier 10.48 --sampling-probability 0.02 --steps 2000
    python -m zoprivacy.privacy epsilon --mechanism vector_discrete_gaussian \
        -s 2 --dataset-size 1438 --batch-size 64 -T 300

Both build the :class:`~zoprivacy.privacy.PrivacyPlan` the arguments
describe and print its own epsilon first (what a run reports), then the
pessimistic PLD epsilon (max of add and remove), the RDP epsilon where
dp_accounting supports the event, and for Laplace the pure epsilon of
DP-ZO Thm. 3.1, side by side. ``--mechanism`` takes every plan mechanism:
the continuous ones an estimator's ``mechanism=`` takes, the exact
discrete noises on a grid of ``--grid`` points per clip (a run's default,
1024) and the exact vector noise on a lattice (``vector_discrete_gaussian``,
DP-SGD's default; ``rounded_sum_discrete_gaussian``, its ghost clipping,
``--grid`` its sum grid), accounted by the sampled Gaussian's RDP bound:
their integer noise is scaled to the lattice's sensitivity (the clip, the
grid and the dimension set the lattice, not the epsilon). The sampling
rate is ``-p`` or, as a run computes it, ``--batch-size /
--dataset-size``. Neither command imports JAX nor loads more than
dp_accounting. The command lives with the
plan it builds, above the accounting it calls; ``python -m
zoprivacy.accounting`` runs it too.
"""

from __future__ import annotations

import argparse
import sys
import time

from zoprivacy.mechanisms import registry
from zoprivacy.privacy import calibration, report, sampling_scheme, value
from zoprivacy.privacy import plan as plan_lib

MECHANISMS = tuple(n for n in registry.MECHANISMS if n != "none")


def _common(p: argparse.ArgumentParser) -> None:
  rate = p.add_mutually_exclusive_group(required=True)
  rate.add_argument(
    "--sampling-probability",
    "-p",
    type=float,
    help="Poisson sampling probability (expected batch / n); 1 for full batch.",
  )
  rate.add_argument(
    "--dataset-size",
    "-n",
    type=int,
    help="dataset size n: the sampling probability is --batch-size / n, "
    "as a run computes it.",
  )
  p.add_argument(
    "--batch-size",
    "-b",
    type=float,
    help="expected batch size (with --dataset-size).",
  )
  p.add_argument(
    "--steps",
    "-T",
    dest="num_steps",
    type=int,
    required=True,
    help="number of steps T.",
  )
  p.add_argument("--delta", type=float, default=1e-5, help="delta (1e-5).")
  p.add_argument(
    "--mechanism",
    choices=MECHANISMS,
    default="gaussian",
    help="a plan's mechanism: DPZero and the scalar estimators run "
    "discrete_gaussian by default, DP-SGD vector_discrete_gaussian "
    "(rounded_sum_discrete_gaussian with ghost clipping).",
  )
  p.add_argument(
    "--grid",
    type=int,
    help="discrete noise: grid points per clip (1024); the rounded sum: "
    "its sum grid (2^16).",
  )
  p.add_argument("--clip", type=float, default=1.0, help="clip C (1).")
  p.add_argument(
    "--neighboring",
    choices=("add_or_remove", "replace_one"),
    default="add_or_remove",
  )
  p.add_argument(
    "--interval",
    dest="value_discretization_interval",
    type=float,
    default=1e-4,
    help="PLD value discretization interval (1e-4).",
  )


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
    prog="python -m zoprivacy.privacy",
    description="Privacy accounting for DP zeroth-order optimization "
    "(dp_accounting PLD and RDP).",
  )
  sub = parser.add_subparsers(dest="command", required=True)
  e = sub.add_parser("epsilon", help="epsilon of a training configuration")
  e.add_argument(
    "--noise-multiplier",
    "-s",
    type=float,
    required=True,
    help="noise std (Gaussian) or Laplace scale over the clip C.",
  )
  e.add_argument(
    "--num-queries",
    "-q",
    type=int,
    default=1,
    help="Gaussian queries per batch, each with std "
    "sqrt(q)*sigma*C (accounted as one Gaussian).",
  )
  _common(e)
  c = sub.add_parser(
    "calibrate", help="noise multiplier for a target (epsilon, delta)"
  )
  c.add_argument(
    "--epsilon", "-e", type=float, required=True, help="target epsilon."
  )
  _common(c)
  return parser


def _sampling(args) -> dict:
  """The plan's sampling arguments: ``-p``, or ``-b / -n`` as a run."""
  if args.dataset_size is None:
    if args.batch_size is not None:
      raise ValueError("--batch-size goes with --dataset-size (not -p).")
    p = args.sampling_probability
    return {"sampling": sampling_scheme.with_probability(p)}
  if args.batch_size is None:
    raise ValueError("--dataset-size needs --batch-size (the expected batch).")
  return {
    "expected_batch_size": args.batch_size,
    "dataset_size": args.dataset_size,
  }


def _plan(args, noise_multiplier: float, num_queries: int = 1):
  """The plan of one step the arguments describe."""
  name = "sum_grid" if "rounded_sum" in args.mechanism else "grid_points"
  grid = {} if args.grid is None else {name: args.grid}
  return plan_lib.PrivacyPlan.build(
    mechanism=args.mechanism,
    noise_multiplier=noise_multiplier,
    num_queries=num_queries,
    clip=args.clip,
    neighboring=args.neighboring,
    delta=args.delta,
    **_sampling(args),
    **grid,
  )


def _calibrated(args):
  """The plan calibrated for ``--epsilon`` on its own epsilon."""
  start = time.perf_counter()
  plan = calibration.calibrate(
    _plan(args, 1.0),
    value.Target(
      epsilon=args.epsilon, delta=args.delta, num_steps=args.num_steps
    ),
  )
  print(
    f"calibrated noise_multiplier {plan.noise_multiplier:.6g}  (the "
    f"smallest to 0.2% whose plan epsilon {plan.epsilon(args.num_steps):.6g}"
    f" <= {args.epsilon:g}; {time.perf_counter() - start:.2f} s)"
  )
  return plan


def main(argv=None) -> int:
  parser = build_parser()
  args = parser.parse_args(argv)
  try:
    if args.command == "epsilon":
      plan = _plan(args, args.noise_multiplier, args.num_queries)
    else:
      plan = _calibrated(args)
    result = report.epsilon_report(
      plan,
      num_steps=args.num_steps,
      delta=args.delta,
      value_discretization_interval=args.value_discretization_interval,
    )
    print(result.format())
  except ValueError as exc:
    print(f"error: {exc}", file=sys.stderr)
    return 2
  return 0


if __name__ == "__main__":
  sys.exit(main())
