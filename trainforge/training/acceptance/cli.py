"""`trainforge acceptance parse {allreduce,dcgm} FILE|-`: pass/fail, with the numbers.

Reads an acceptance test's output (``kubectl logs`` of its pods, or a saved file) and prints
the verdict; exit 0 = pass, 1 = fail, 2 = usage. For an all-reduce, the floor comes from the
facts table (facts.py) for ``--instance-type`` and ``--nodes``, or from ``--min-busbw``.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys

from trainforge.training.acceptance import facts
from trainforge.training.acceptance.parse import parse_allreduce, parse_dcgm

DEFAULT_NODES = 2  # an all-reduce run's nodes when --nodes is not given


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="trainforge acceptance",
        description="Judge the output of a GPU pool's acceptance test (docs/reliability.md).",
    )
    sub = p.add_subparsers(dest="command", required=True)
    parse = sub.add_parser("parse", help="read a test's output and print PASS/FAIL")
    parse.add_argument("test", choices=["allreduce", "dcgm"])
    parse.add_argument("file", help="the output (kubectl logs ...), or - for stdin")
    parse.add_argument("--instance-type", action="append", default=[], metavar="TYPE",
                       help="all-reduce: the nodes' instance type (floor from the facts table)")  # fmt: skip
    parse.add_argument("--nodes", type=int, default=None,
                       help=f"all-reduce: nodes in the run (default {DEFAULT_NODES})")  # fmt: skip
    parse.add_argument("--min-busbw", type=float, default=None, metavar="GBPS",
                       help="all-reduce: the pass floor in GB/s (overrides the facts table)")  # fmt: skip
    parse.add_argument("--no-require-efa", action="store_true",
                       help="all-reduce: do not require NCCL to have used EFA")  # fmt: skip
    parse.add_argument("--level", type=int, choices=[1, 2, 3, 4], default=None,
                       help="dcgm: the diagnostic level that ran")  # fmt: skip
    parse.add_argument("--node", default=None, help="dcgm: the node name, for the report")
    return p


# each test's own flags (their help starts "all-reduce:" or "dcgm:"): given to the other test,
# one would be read by nothing, so it is refused rather than ignored
ALLREDUCE_FLAGS = ("--instance-type", "--nodes", "--min-busbw", "--no-require-efa")
DCGM_FLAGS = ("--level", "--node")


def _stray_flags(args: argparse.Namespace) -> list[str]:
    """The flags of the other test that were given."""
    given = {
        "--instance-type": bool(args.instance_type),
        "--nodes": args.nodes is not None,
        "--min-busbw": args.min_busbw is not None,
        "--no-require-efa": args.no_require_efa,
        "--level": args.level is not None,
        "--node": args.node is not None,
    }
    return [f for f in (ALLREDUCE_FLAGS if args.test == "dcgm" else DCGM_FLAGS) if given[f]]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if stray := _stray_flags(args):
        other = "allreduce" if args.test == "dcgm" else "dcgm"
        parser.error(f"{', '.join(stray)}: only for parse {other}, not parse {args.test}")
    if args.nodes is None:
        args.nodes = DEFAULT_NODES
    if args.nodes < 1:
        parser.error(f"--nodes must be >= 1, got {args.nodes}")
    if args.min_busbw is not None and not (math.isfinite(args.min_busbw) and args.min_busbw > 0):
        parser.error(f"--min-busbw must be a positive number of GB/s, got {args.min_busbw:g}")
    try:  # a log's stray non-UTF-8 byte is not a reason to refuse judging it
        if args.file == "-":
            text = sys.stdin.read()
        else:
            text = pathlib.Path(args.file).read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        print(f"trainforge acceptance: cannot read {args.file}: {e.strerror}", file=sys.stderr)
        return 2
    if args.test == "dcgm":
        verdict = parse_dcgm(text, level=args.level, node=args.node or "")
    else:
        floor, why = args.min_busbw, "--min-busbw" if args.min_busbw is not None else ""
        if floor is None and args.instance_type:
            f = facts.allreduce_floor(args.instance_type, args.nodes)
            floor, why = f.gbps, f.why
        verdict = parse_allreduce(
            text, min_busbw_gbps=floor, floor_why=why, require_efa=not args.no_require_efa
        )
    print(verdict.render())
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
