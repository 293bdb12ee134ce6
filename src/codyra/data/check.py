"""`codyra data check --config <config>`: is every dataset of a benchmark usable?
`codyra data prepare --from coop SRC --config <config>`: link data.root's layout from CoOp's.

Registration only builds argparse objects; torch, torchvision and the registry are
imported when the command runs, so `codyra --help` stays fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


def register_cli(subparsers, handler) -> None:
    """Add the `data` command (subcommands `check`, `prepare`) to the main CLI's subparsers;
    ``handler(args)`` (the CLI's: it loads the config and calls :func:`run_check`) returns the exit code."""
    data = subparsers.add_parser(
        "data",
        help="inspect and prepare the benchmark datasets",
        description="inspect and prepare the benchmark datasets",
        epilog="example: codyra data check --config config/mtil_5shot.yaml",
    )
    commands = data.add_subparsers(
        dest="data_command", required=True, metavar="SUBCOMMAND", help="codyra data SUBCOMMAND --help for its options"
    )
    check = commands.add_parser(
        "check",
        help="report whether every dataset of a benchmark is present: its metadata parses and every image file "
        "it lists exists (--deep: and decodes); TRACE: every task's split files parse",
        description="Reads each dataset's metadata (annotation, split and class files) and checks that every image "
        "file the splits list exists; it opens no image, so a corrupt one passes unless --deep. TRACE configs: "
        "reads each task's train.json, eval.json and test.json and counts their examples. Trains nothing. "
        "Exit code 0 when all datasets are usable, 1 otherwise.",
        epilog="example: codyra data check --config config/mtil_5shot.yaml --root /shared/datasets --deep",
    )
    prepare = commands.add_parser(
        "prepare",
        help="create the layout data.root needs from the folders you hold (CoOp's layout), by symbolic links",
        description="Creates the folders of data.root (or --root) that the config's datasets need and links into "
        "them the files of a folder laid out as CoOp's DATASETS.md describes (oxford_pets/, caltech-101/, dtd/, "
        "eurosat/, fgvc_aircraft/, food-101/, oxford_flowers/, stanford_cars/, sun397/, imagenet/ with their "
        "split_zhou_*.json files). Nothing is copied and no existing file or link is replaced. Says for each "
        "dataset what it linked and what is still missing, with how to obtain it (MNIST, CIFAR100, Places365 "
        "and the captions are not part of CoOp's layout). Exit code 0 when every dataset is then present.",
        epilog="example: codyra data prepare --from coop /shared/coop-data --config config/xtail_16shot.yaml",
    )
    prepare.add_argument(
        "--from",
        dest="layout",
        required=True,
        choices=["coop"],
        help="the layout of SRC: coop (CoOp's DATASETS.md)",
    )
    prepare.add_argument("source", type=Path, metavar="SRC", help="the folder holding the dataset folders")
    for command in (check, prepare):
        command.add_argument(
            "--log", default=argparse.SUPPRESS, metavar="FILE", help="append this command's log to this file"
        )
        command.add_argument(
            "--config",
            required=True,
            type=Path,
            metavar="FILE",
            help="benchmark config YAML (data.kind mtil, xtail, trace)",
        )
        command.add_argument(
            "--root", type=Path, metavar="DIR", help="data root to use instead of the config's data.root"
        )
        command.set_defaults(handler=handler)
    check.add_argument(
        "--deep",
        action="store_true",
        help="also decode every image once, as training and evaluation do, and name each file that fails "
        "(reads every image: slow)",
    )


def run_check(args: argparse.Namespace, config: dict, reference_readers: Sequence[str] | None = None) -> int:
    """Run `codyra data check` or `codyra data prepare` (``args.data_command``) on ``config``
    (loaded and validated from ``args.config``); ``reference_readers``: the grid's methods that
    read the reference data (as :func:`inspect_config`)."""
    from codyra.errors import ConfigError

    _checked_kind(config)
    root = args.root or config["data"]["root"]
    if root is None:
        raise ConfigError(f"{args.config}: data.root is not set (or pass --root)")
    config = {**config, "data": {**config["data"], "root": str(Path(root).expanduser().absolute())}}
    root = Path(config["data"]["root"])
    if args.data_command == "prepare":
        from codyra.data.prepare import format_prepared, prepare_from_coop

        prepared = prepare_from_coop(config, args.source, root)
        print(format_prepared(prepared, args.source.absolute(), root))
        return 0 if all(item.complete for item in prepared) else 1
    report = inspect_config(config, deep=args.deep, reference_readers=reference_readers)
    print(report.text)
    return 0 if not report.problems else 1


def _checked_kind(cfg: dict) -> str:
    """The config's data.kind, if its datasets live under data.root."""
    from codyra.errors import ConfigError

    kind = cfg["data"]["kind"]
    if kind not in ("mtil", "xtail", "trace") or (kind == "trace" and cfg["llm"]["mini"] is not None):
        mini = " (the mini TRACE: the workflow writes its data)" if kind == "trace" else ""
        raise ConfigError(f"codyra data applies to data.kind mtil, xtail or trace, not {kind!r}{mini}")
    return kind


@dataclass
class ConfigReport:
    """What `codyra data check` prints, and the problems among it (none: every dataset usable)."""

    text: str
    problems: list[str] = field(default_factory=list)


def check_config(cfg: dict, *, deep: bool = False, reference_readers: Sequence[str] | None = None) -> list[str]:
    """The problems `codyra data check` finds in the datasets of ``cfg`` (a validated config) under
    its data.root: [] when every dataset it names is usable (see :func:`inspect_config`)."""
    return inspect_config(cfg, deep=deep, reference_readers=reference_readers).problems


def inspect_config(cfg: dict, *, deep: bool = False, reference_readers: Sequence[str] | None = None) -> ConfigReport:
    """`codyra data check` on ``cfg``: mtil / xtail: every dataset it names
    (:func:`codyra.data.presence.benchmark_datasets`) and the reference data of data.reference
    where a method reads it (``reference_readers``, as :func:`codyra.data.presence.require_benchmark_data`);
    trace: every task folder."""
    from codyra.errors import ConfigError

    protocol, root = _checked_kind(cfg), cfg["data"]["root"]
    if root is None:
        raise ConfigError("data.root is not set: data check reads the datasets there")
    root = Path(root).expanduser().absolute()
    if protocol == "trace":
        reports = check_trace_tasks(list(cfg["tasks"]), root)
        return ConfigReport(format_trace_reports(reports, root), [p for report in reports for p in report.problems])
    from codyra.data.presence import benchmark_datasets
    from codyra.data.registry import check_datasets

    reports = check_datasets(benchmark_datasets(cfg), protocol, root, deep=deep)
    problems = [problem for report in reports for problem in report.problems]
    text = format_reports(reports, protocol, root)
    reference_text, missing = report_reference(cfg, reference_readers)
    return ConfigReport(text + reference_text, problems + missing)


def report_reference(config: dict, readers: Sequence[str] | None) -> tuple[str, list[str]]:
    """What data check says about the reference data of data.reference (ZSCL), and what is missing
    of it where a method of the grid reads it (``readers``; None: not resolved, so wherever it is set)."""
    from codyra.data.reference import missing_reference

    ref = config["data"]["reference"]
    if ref is None:
        return "", []
    head = f"reference data (data.reference, kind {ref['kind']}): "
    if readers is not None and not readers:
        return f"\n\n{head}not read by any method of this grid", []
    missing = missing_reference(config)
    lines = [head + ("ok" if not missing else "missing"), *(f"  {line}" for line in missing)]
    return "\n\n" + "\n".join(lines), missing


@dataclass
class TraceReport:
    task: str
    folder: Path
    counts: dict[str, int] = field(default_factory=dict)  # examples per split that parsed
    problems: list[str] = field(default_factory=list)


def check_trace_tasks(tasks, root: Path) -> list[TraceReport]:
    """Each TRACE task folder under ``root``: its three split files parse as the reader reads them
    (a JSON list of records with string 'prompt' and 'answer'), and how many examples each holds."""
    from codyra.trace.data import SPLITS, TraceDataError, load_split

    reports = []
    for task in tasks:
        report = TraceReport(task, root / task)
        if not report.folder.is_dir():
            report.problems.append(
                f"TRACE task {task!r} is missing: expected the folder {report.folder} with {', '.join(SPLITS)} "
                '(.json), each a JSON list of {"prompt": ..., "answer": ...} records (TRACE\'s format)'
            )
        else:
            for split in SPLITS:
                try:
                    report.counts[split] = len(load_split(report.folder, split))
                except TraceDataError as error:
                    report.problems.append(f"TRACE task {task!r}: {error}")
        reports.append(report)
    return reports


def format_trace_reports(reports: list[TraceReport], root: Path) -> str:
    from codyra.trace.data import SPLITS

    header = ("task", "status", *SPLITS)
    rows = [
        (
            r.task,
            "ok" if not r.problems else "incomplete" if r.folder.is_dir() else "missing",
            *(_count(r.counts.get(split)) for split in SPLITS),
        )
        for r in reports
    ]
    lines = [f"codyra data check: TRACE task folders, data root {root}", "", *_aligned(header, rows)]
    lines += [line for r in reports for problem in r.problems for line in ("", problem)]
    lines += ["", f"{sum(not r.problems for r in reports)} of {len(reports)} tasks usable"]
    return "\n".join(lines)


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _aligned(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """The table's lines: names and statuses left-aligned, numbers right-aligned."""
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    return [
        "  ".join(
            cell.ljust(width) if column < 2 else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        )
        for row in [header, *rows]
    ]


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
    lines = [f"codyra data check: protocol {protocol}, data root {root}", "", *_aligned(header, rows)]
    if any(report.usable and not report.matches_paper for report in reports):
        lines += ["", "ok* = usable, but sizes or classes differ from the paper's dataset"]
    for report in reports:
        for problem in report.problems:
            lines += ["", problem]
    usable = sum(report.usable for report in reports)
    lines += ["", f"{usable} of {len(reports)} datasets usable"]
    return "\n".join(lines)
