#!/usr/bin/env python
"""Render a finished grid's measured results as a Markdown page (``docs/results/<benchmark>.md``).

Reads each run's ``matrix.json`` (and the trained tasks' ``summary.json``) under
``<results>/<benchmark>/``; writes, with the machine, the date and theta_0's sha256:
- per method: Transfer, Average, Last and Forgetting, mean ± std over seeds, and the gain
  A[j,j] - A[0,j] of every task (mean over seeds);
- paired comparisons over seeds (``--compare A:B``; default: the first trained method of
  ``--focus`` against every other): the mean difference of Last and of Forgetting with its 95 %
  t-interval, and what the interval supports ("higher", "lower", or "not resolved" when it
  holds 0);
- CoDyRA-style runs' effective rank (``active_rank_mean`` of their summaries), min to max.

With ``--configfile`` (the grid's config) the summary holds that config's methods only,
``--table NAME`` (repeatable) appends a table the grid wrote (e.g. ``blip``), ``--figure NAME``
(repeatable) a figure it drew (e.g. ``comparison_last_forgetting``, ``comparison_per_task``: the
methods compared), and ``--analysis NAME`` (repeatable) the tables and figures that the ``paper``
target's analysis NAME wrote (``codyra.analysis.registry.outputs``), the figures copied beside the
page into a folder of the page's name.

With ``--since PAGE`` (a previous rendering, usually the page being replaced) the page says what
changed since: every method whose summary row differs, its old and new Transfer, Average, Last and
Forgetting, the methods added or gone, and how many rows reproduced exactly; ``--why TEXT``
(repeatable) adds the reasons, which only the person rerunning the grid knows.

The docs quote measured numbers only from pages this script writes.

Usage: python scripts/render-results.py results/ mini --out docs/results/mini.md [--focus codyra] \
           [--since docs/results/mini.md --why "..."]
       python scripts/render-results.py results/ mini --configfile config/mini_ablations.yaml \
           --analysis ablations --analysis single_task --analysis amplification --out docs/results/mini-ablations.md
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

from scipy import stats

METRICS = ("transfer", "average", "last", "forgetting")


def load_runs(folder: Path, methods: list[str] | None = None) -> dict[str, list[dict]]:
    """method -> the matrix.json of each seed, in seed order (of ``methods`` only, when given)."""
    runs: dict[str, list[dict]] = {}
    for matrix in sorted(folder.glob("*/seed*/matrix.json"), key=lambda p: (p.parts[-3], int(p.parent.name[4:]))):
        if methods is None or matrix.parts[-3] in methods:
            runs.setdefault(matrix.parts[-3], []).append(json.loads(matrix.read_text()))
    if methods is not None and set(methods) - set(runs):
        missing = ", ".join(sorted(set(methods) - set(runs)))
        raise SystemExit(f"no */seed*/matrix.json under {folder} for {missing}: run the config's grid first")
    if not runs:
        raise SystemExit(f"no */seed*/matrix.json under {folder}: run the grid first (snakemake ... all_tables)")
    return runs


def mean_std(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def interval(diffs: list[float]) -> tuple[float, float, float]:
    """Mean and 95 % t-interval of paired differences."""
    mean = statistics.mean(diffs)
    if len(diffs) < 2:
        return mean, float("nan"), float("nan")
    half = stats.t.ppf(0.975, len(diffs) - 1) * statistics.stdev(diffs) / len(diffs) ** 0.5
    return mean, mean - half, mean + half


def verdict(low: float, high: float, above: str, below: str) -> str:
    if low > 0:
        return above
    if high < 0:
        return below
    return "not resolved (the interval holds 0)"


def metric(run: dict, name: str) -> float:
    return run["metrics"][name]


def effective_ranks(folder: Path, method: str) -> list[float]:
    ranks = []
    for summary in folder.glob(f"{method}/seed*/task*/summary.json"):
        value = json.loads(summary.read_text()).get("active_rank_mean")
        if value is not None:
            ranks.append(value)
    return ranks


def theta0_digest(folder: Path) -> str:
    weights = sorted((folder / "pretrain").glob("*.safetensors"))
    return ", ".join(f"`{hashlib.sha256(w.read_bytes()).hexdigest()[:12]}…`" for w in weights) or "not pretrained here"


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def analysis_sections(cfg: dict, names: list[str], page: Path) -> list[str]:
    """The tables (Markdown) and figures (copied to the folder ``page`` without its suffix) of the
    ``paper`` target's analyses ``names`` under ``cfg``'s results folder. Every name and file is
    checked before anything is copied."""
    from codyra.analysis.registry import ANALYSES, available, outputs

    unknown = [name for name in names if name not in available(cfg)]
    if unknown:
        names_given = ", ".join(map(repr, unknown))
        raise SystemExit(f"analysis {names_given} does not apply to this config; it has: {', '.join(available(cfg))}")
    found = {name: output_files(cfg, *outputs(cfg, name), f"analysis {name}") for name in names}
    lines = []
    for name, files in found.items():
        lines += ["", f"## Analysis `{name}`: {ANALYSES[name].description}", *copied_files(files, page)]
    return lines


def output_files(cfg: dict, tables: list[str], figures: list[str], what: str) -> list[Path]:
    """The files of the written ``tables`` (Markdown) and ``figures`` (PNG); ``what`` produced them
    (named when one is missing)."""
    from codyra.store.paths import figures_dir, tables_dir

    files = [tables_dir(cfg) / f"{t}.md" for t in tables] + [figures_dir(cfg) / f"{f}.png" for f in figures]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise SystemExit(f"{what}: {', '.join(missing[:3])} missing: run the config's `paper` target first")
    return files


def copied_files(files: list[Path], page: Path) -> list[str]:
    """Markdown of ``files``: tables inline, figures copied beside ``page`` into the folder of its name."""
    lines = ["\n" + f.read_text().strip() for f in files if f.suffix == ".md"]
    figure_folder = page.with_suffix("")
    for figure in (f for f in files if f.suffix == ".png"):
        figure_folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(figure, figure_folder / figure.name)
        lines += ["", f"![{figure.stem}]({figure_folder.name}/{figure.name})"]
    return lines


def render(
    folder: Path,
    benchmark: str,
    focus: str | None,
    pairs: list[tuple[str, str]],
    made_by: str | None = None,
    methods: list[str] | None = None,
    configfile: Path | None = None,
) -> str:
    runs = load_runs(folder, methods)
    tasks = next(iter(runs.values()))[0]["tasks"]
    seeds = sorted({r["seed"] for rs in runs.values() for r in rs})
    lines = [
        # a benchmark has several grids (baselines, ablations): the config says which one the page shows
        f"# Measured: `{benchmark}`" + (f", `{configfile}`" if configfile else ""),
        "",
        (
            f"Rendered {time.strftime('%Y-%m-%d')} by `scripts/render-results.py` from `{folder}` on {cpu_name()} "
            f"({os.cpu_count()} cores, {platform.system()}); seeds {', '.join(map(str, seeds))}; "
            f"theta_0 sha256 {theta0_digest(folder)}."
        ),
        *([f"The grid: `{made_by}`."] if made_by else []),
        "",
        "## Summary (mean ± std over seeds)",
        "",
        "| method | "
        + " | ".join(m.capitalize() for m in METRICS)
        + " | "
        + " | ".join(f"gain {t}" for t in tasks)
        + " |",
        "|---" * (1 + len(METRICS) + len(tasks)) + "|",
    ]
    for method, rs in sorted(runs.items(), key=lambda kv: -statistics.mean(metric(r, "last") for r in kv[1])):
        gains = [statistics.mean(r["A"][j + 1][j] - r["A"][0][j] for r in rs) for j in range(len(tasks))]
        cells = [mean_std([metric(r, m) for r in rs]) for m in METRICS]
        lines.append(
            f"| {method} ({len(rs)}) | " + " | ".join(cells) + " | " + " | ".join(f"{g:+.1f}" for g in gains) + " |"
        )
    if not pairs and focus in runs:
        pairs = [(focus, other) for other in runs if other != focus and len(runs[other]) > 1]
    if pairs:
        lines += [
            "",
            "## Paired comparisons over seeds",
            "",
            "Difference of the first method minus the second, seed by seed: mean and 95 % t-interval.",
            "",
            (
                "| comparison | seeds | Last | Last: the interval supports "
                "| Forgetting | Forgetting: the interval supports |"
            ),
            "|---|---|---|---|---|---|",
        ]
        for a, b in pairs:
            by_seed = {r["seed"]: r for r in runs[b]}
            common = [(r, by_seed[r["seed"]]) for r in runs[a] if r["seed"] in by_seed]
            row = [f"{a} − {b}", str(len(common))]
            for name, above, below in (
                ("last", f"{a} ends higher", f"{a} ends lower"),
                ("forgetting", f"{a} forgets more", f"{a} forgets less"),
            ):
                mean, low, high = interval([metric(x, name) - metric(y, name) for x, y in common])
                row += [f"{mean:+.1f} [{low:+.1f}, {high:+.1f}]", verdict(low, high, above, below)]
            lines.append("| " + " | ".join(row) + " |")
    rank_lines = []
    for method in runs:
        ranks = effective_ranks(folder, method)
        if ranks and any(r != ranks[0] for r in ranks):
            rank_lines.append(
                f"- `{method}`: {min(ranks):.1f} to {max(ranks):.1f} (`active_rank_mean` over tasks and seeds)"
            )
    if rank_lines:
        lines += ["", "## Effective rank", "", *rank_lines]
    return lines


def summary_rows(page: str) -> dict[str, list[str]]:
    """method -> its cells in the summary table of a rendered ``page`` (Transfer, Average, Last,
    Forgetting, then the gains)."""
    rows, inside = {}, False
    for line in page.splitlines():
        if line.startswith("## "):
            inside = line.startswith("## Summary")
        elif inside and line.startswith("| ") and not line.startswith("| method |"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            rows[cells[0].rsplit(" (", 1)[0]] = cells[1:]
    return rows


def changes_since(previous: str, lines: list[str], why: list[str]) -> list[str]:
    """The section saying what changed between the ``previous`` page and the new one (``lines``)."""
    old, new = summary_rows(previous), summary_rows("\n".join(lines))
    date = next((line.split()[1] for line in previous.splitlines() if line.startswith("Rendered ")), "an earlier date")
    names = ", ".join(m.capitalize() for m in METRICS)
    changed = [m for m in new if m in old and old[m] != new[m]]
    out = ["", f"## Changes since the rendering of {date}", "", *[f"- {reason}" for reason in why]]
    out += [f"- `{m}` ({names}): {' | '.join(old[m][:4])} → {' | '.join(new[m][:4])}" for m in changed]
    out += [f"- `{m}`: new" for m in new if m not in old] + [f"- `{m}`: gone" for m in old if m not in new]
    same = sum(1 for m in new if old.get(m) == new[m])
    out += [f"- {same} of the {len(new)} methods reproduce their previous row exactly."]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="the results folder (config key `results`)")
    parser.add_argument("benchmark", help="the benchmark's folder name under it, e.g. mini, mini-trace")
    parser.add_argument("--out", type=Path, help="write the page here (default: print it)")
    parser.add_argument("--made-by", metavar="COMMAND", help="the command that ran the grid, quoted on the page")
    parser.add_argument("--focus", default="codyra", help="method compared with every other (default codyra)")
    parser.add_argument("--configfile", type=Path, help="the grid's config: its methods only, and --analysis")
    parser.add_argument(
        "--table",
        action="append",
        default=[],
        metavar="NAME",
        help="append results/tables/<benchmark>/NAME.md, e.g. blip (repeatable; needs --configfile)",
    )
    parser.add_argument(
        "--figure",
        action="append",
        default=[],
        metavar="NAME",
        help="append results/figures/<benchmark>/NAME.png, e.g. comparison_last_forgetting (repeatable; needs "
        "--configfile)",
    )
    parser.add_argument(
        "--analysis",
        action="append",
        default=[],
        metavar="NAME",
        help="append the tables and figures of the paper target's analysis NAME (repeatable; needs --configfile)",
    )
    parser.add_argument("--since", type=Path, metavar="PAGE", help="a previous rendering: say what changed since")
    parser.add_argument(
        "--why",
        action="append",
        default=[],
        metavar="TEXT",
        help="a reason for the changes (repeatable; --since)",
    )
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="A:B",
        help="a paired comparison (repeatable; replaces the default pairs)",
    )
    args = parser.parse_args(argv)
    folder = args.results / args.benchmark
    if not folder.is_dir():
        parser.error(f"{folder} does not exist: give the results folder and a benchmark in it")
    pairs = [tuple(p.split(":", 1)) for p in args.compare]
    if any(len(p) != 2 for p in pairs):
        parser.error("--compare takes METHOD:METHOD, e.g. codyra:lora-r16")
    if args.why and not args.since:
        parser.error("--why gives the reasons for the changes --since finds: give --since PAGE")
    previous = args.since.read_text() if args.since else None  # read before --out may replace it
    if (args.analysis or args.table or args.figure) and not (args.configfile and args.out):
        parser.error(
            "--analysis, --table and --figure need --configfile (the grid's config) and --out (figures go beside it)"
        )
    cfg = None
    if args.configfile:
        from codyra.experiment.config import load_config

        cfg = {**load_config(args.configfile), "results": str(args.results)}
        if cfg["benchmark"] != args.benchmark:
            parser.error(f"{args.configfile} is the grid of benchmark {cfg['benchmark']!r}, not {args.benchmark!r}")
    lines = render(folder, args.benchmark, args.focus, pairs, args.made_by, cfg and cfg["methods"], args.configfile)
    if previous is not None:
        summary = lines.index("## Summary (mean ± std over seeds)")  # the section goes just above it
        lines[summary:summary] = changes_since(previous, lines, args.why)[1:] + [""]
    # every file is checked before any is copied
    table_files = output_files(cfg, args.table, [], "--table") if args.table else []
    figure_files = output_files(cfg, [], args.figure, "--figure") if args.figure else []
    analyses = analysis_sections(cfg, args.analysis, args.out) if args.analysis else []
    if table_files:
        lines += ["", "## Tables", *copied_files(table_files, args.out)]
    if figure_files:
        lines += ["", "## Figures", *copied_files(figure_files, args.out)]
    lines += analyses
    page = "\n".join(lines) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(page)
        print(f"-> {args.out}")
    else:
        print(page, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
