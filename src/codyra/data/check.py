"""`codyra data check --config config/<benchmark>.yaml`: is every dataset of a benchmark usable?

Registration only builds argparse objects; torch, torchvision and the registry are
imported when the command runs, so `codyra --help` stays fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register_cli(subparsers, handler) -> None:
    """Add the `data` command (subcommand `check`) to the main CLI's subparsers; ``handler(args)``
    (the CLI's: it loads the config and calls :func:`run_check`) returns the exit code."""
    data = subparsers.add_parser(
        "data",
        help="inspect the benchmark datasets",
        description="inspect the benchmark datasets",
        epilog="example: codyra data check --config config/mtil_5shot.yaml",
    )
    commands = data.add_subparsers(
        dest="data_command", required=True, metavar="SUBCOMMAND", help="codyra data SUBCOMMAND --help for its options"
    )
    check = commands.add_parser(
        "check",
        help="report whether every dataset of a benchmark is present: its metadata parses and every image file "
        "it lists exists (--deep: and decodes)",
        description="Reads each dataset's metadata (annotation, split and class files) and checks that every image "
        "file the splits list exists; it opens no image, so a corrupt one passes unless --deep. Trains nothing. "
        "Exit code 0 when all datasets are usable, 1 otherwise.",
        epilog="example: codyra data check --config config/mtil_5shot.yaml --root /shared/datasets --deep",
    )
    check.add_argument(
        "--log", default=argparse.SUPPRESS, metavar="FILE", help="append this command's log to this file"
    )
    check.add_argument(
        "--config", required=True, type=Path, metavar="FILE", help="benchmark config YAML (data.kind mtil or xtail)"
    )
    check.add_argument("--root", type=Path, metavar="DIR", help="data root to use instead of the config's data.root")
    check.add_argument(
        "--deep",
        action="store_true",
        help="also decode every image once, as training and evaluation do, and name each file that fails "
        "(reads every image: slow)",
    )
    check.set_defaults(handler=handler)


def run_check(args: argparse.Namespace, config: dict) -> int:
    """Check the datasets of ``config`` (loaded and validated from ``args.config``)."""
    from codyra.data.registry import check_datasets
    from codyra.errors import ConfigError

    protocol = config["data"]["kind"]
    if protocol not in ("mtil", "xtail"):
        raise ConfigError(f"{args.config}: data check applies to data.kind mtil or xtail, not {protocol!r}")
    root = args.root or config["data"]["root"]
    if root is None:
        raise ConfigError(f"{args.config}: data.root is not set (or pass --root)")
    root = Path(root).expanduser().absolute()
    names = [task["name"] for task in config["tasks"]] + config["heldout_tasks"]
    reports = check_datasets(names, protocol, root, deep=args.deep)
    print(format_reports(reports, protocol, root))
    reference_ok = report_reference({**config, "data": {**config["data"], "root": str(root)}})
    return 0 if reference_ok and all(report.usable for report in reports) else 1


def report_reference(config: dict) -> bool:
    """Print whether the reference data of data.reference (ZSCL) is present; True if usable or unset."""
    from codyra.data.reference import missing_reference

    ref = config["data"]["reference"]
    if ref is None:
        return True
    missing = missing_reference(config)
    lines = [f"reference data (data.reference, kind {ref['kind']}): " + ("ok" if not missing else "missing")]
    lines += [f"  {line}" for line in missing]
    print("\n" + "\n".join(lines))
    return not missing


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def format_reports(reports, protocol: str, root: Path) -> str:
    header = ("dataset", "status", "train", "test", "classes", "paper train/test/classes")
    rows = []
    for report in reports:
        if report.usable:
            status = "ok" if report.matches_paper else "ok*"
        else:
            status = "incomplete" if report.found else "missing"
        paper = report.expected
        rows.append(
            (
                report.dataset,
                status,
                _count(report.train_size),
                _count(report.test_size),
                _count(report.num_classes),
                f"{paper.train:,}/{paper.test:,}/{paper.num_classes}",
            )
        )
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    # Names and statuses left-aligned, numbers right-aligned.
    aligned = [
        "  ".join(
            cell.ljust(width) if column < 2 else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        )
        for row in [header, *rows]
    ]
    lines = [f"codyra data check: protocol {protocol}, data root {root}", "", *aligned]
    if any(report.usable and not report.matches_paper for report in reports):
        lines += ["", "ok* = usable, but sizes or classes differ from the paper's dataset"]
    for report in reports:
        for problem in report.problems:
            lines += ["", problem]
    usable = sum(report.usable for report in reports)
    lines += ["", f"{usable} of {len(reports)} datasets usable"]
    return "\n".join(lines)
