"""`codyra rehearse`: registration only builds argparse objects (``codyra --help`` stays fast)."""

from __future__ import annotations

import argparse
from pathlib import Path

from codyra.cli_options import add_set_option


def register_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "rehearse",
        help="run a paper config's grid end to end on this CPU, with only sizes shrunk (docs/cluster.md)",
        description="Runs the config's own DAG, methods, per-task values, precision, backend (DeepSpeed ZeRO-2 "
        "with two ranks where configured) and SLURM profile, through the paper target, on stand-in models of the "
        "same architecture at tiny width and fixture datasets in their real layouts; by default the first seed, "
        "the first two tasks and one value per sweep (--full: all of them), a few steps per task. Before "
        "anything runs, the paper grid's jobs are checked against what the profile requests. The jobs go to "
        "the local one-node SLURM (scripts/local-slurm.sh start) with the profile as a site sets it, or with "
        "--local to this machine's Snakemake process.",
        epilog="example: codyra rehearse --config config/trace.yaml --set backbone=gemma-2b-it",
    )
    p.add_argument("--log", default=argparse.SUPPRESS, metavar="FILE", help="append this command's log to this file")
    p.add_argument(
        "--config", required=True, type=Path, metavar="FILE", help="the paper config, e.g. config/mtil_5shot.yaml"
    )
    add_set_option(p, "override a key of the paper config (repeatable), e.g. --set backbone=gemma-2b-it")
    p.add_argument("--full", action="store_true", help="every seed, task and sweep value (default: the smallest size)")
    p.add_argument(
        "--local",
        action="store_true",
        help="run the jobs in this machine's Snakemake process (--cores 2), not on SLURM",
    )
    p.add_argument(
        "--dir",
        type=Path,
        metavar="DIR",
        help="the rehearsal's folder (default rehearsals/<benchmark>[-full]); rerunning reuses it",
    )
    p.add_argument("--profile", type=Path, metavar="DIR", help="the SLURM profile to rehearse (default profiles/slurm)")
    p.add_argument("--jobs", type=int, default=2, metavar="N", help="SLURM jobs at once (default 2, for 2 cores)")
    p.set_defaults(handler=handle)


def handle(args) -> None:
    from codyra.rehearsal.run import DEFAULT_PROFILE, Rehearsal, rehearse

    record = rehearse(
        Rehearsal(
            config=args.config,
            sets=args.set,
            folder=args.dir,
            full=args.full,
            local=args.local,
            profile=args.profile or DEFAULT_PROFILE,
            jobs=args.jobs,
        )
    )
    print(
        f"rehearsal of {record['config']} ({record['benchmark']}, {record['size']}, {record['executor']}): "
        f"{sum(record['jobs'].values())} jobs in {record['seconds']:.0f} s; tables in {record['tables']}"
    )
