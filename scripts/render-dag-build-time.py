#!/usr/bin/env python
"""Render ``benchmarks/dag_build_time.py`` records as a Markdown page (``docs/results/dag-build.md``):
per config and target, the dry run's seconds and jobs, one column per record (e.g. SLURM's client
installed with its controller up or down, or not installed), with the machine, load and date each was measured on.

Usage: python scripts/render-dag-build-time.py RECORD.json [RECORD.json ...] --out docs/results/dag-build.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def shown(path: Path) -> str:
    return str(path.resolve().relative_to(REPO) if path.resolve().is_relative_to(REPO) else path)


def setting(record: dict) -> str:
    if not record["slurm_client_installed"]:
        return "no SLURM client"
    return "SLURM client, controller " + ("up" if record["slurm_controller_answers"] else "down")


def columns_of(records: list[dict]) -> dict[int, str]:
    """Each record's column name: its SLURM setting, with its time of measurement where two
    records share the setting (a before and an after)."""
    settings = [setting(r) for r in records]
    return {
        id(r): s if settings.count(s) == 1 else f"{s}, {r['measured'][:16].replace('T', ' ')}"
        for r, s in zip(records, settings, strict=True)
    }


def title(name: str, floor: bool) -> str:
    return f"{name}, Snakemake alone" if floor else name


def cell(row: dict | None, floor: bool) -> str:
    if row is None:
        return "-"
    if floor:
        return f"{row['floor_seconds']:.1f}"
    return f"{row['seconds']:.1f}" + ("" if row["meets_target"] else " *")


def render(records: list[tuple[str, dict]]) -> list[str]:
    target_s = records[0][1]["target_s"]
    lines = [
        "# How long the DAG takes to build",
        "",
        (
            "`snakemake -n TARGET --configfile config/CONFIG --config check_data=False` in a fresh process and an "
            "empty working directory (the whole grid planned), timed by `benchmarks/dag_build_time.py`; rendered by "
            f"`scripts/render-dag-build-time.py`. The target is {target_s:.0f} s per dry run."
        ),
        "",
        (
            "A record made with `--floor` adds a column *Snakemake alone*: the dry run of a generated workflow with "
            "the same jobs, files, wildcards and groups, whose input functions look each job's inputs up in a table. "
            "It lacks the workflow's own work (config, code versions, fingerprints, inputs, params, threads), so no "
            "input function brings the dry run below it with this Snakemake and this DAG."
        ),
        "",
    ]
    names = columns_of([r for _, r in records])
    for source, r in records:
        load = ", ".join(f"{x:.2f}" for x in r["loadavg_1min"])
        lines.append(
            f"- {names[id(r)]}: `{source}`, measured {r['measured']} on {r['cpu_count']} {r['machine']} cores "
            f"(1-minute load {load} at start and end), Snakemake {r['snakemake']}, median of {r['repeats']}."
        )
    columns = [(r, False) for _, r in records] + [(r, True) for _, r in records if r.get("floor")]
    header = (
        "| config | target | jobs | " + " | ".join(f"{title(names[id(r)], floor)} (s)" for r, floor in columns) + " |"
    )
    lines += ["", header, "|---|---|---:|" + "---:|" * len(columns)]
    keys = [(row["config"], row["target"]) for row in records[0][1]["runs"]]
    by_record = {id(r): {(row["config"], row["target"]): row for row in r["runs"]} for _, r in records}
    for key in keys:
        cells = [cell(by_record[id(r)].get(key), floor) for r, floor in columns]
        jobs = by_record[id(records[0][1])][key]["jobs"]
        lines.append(f"| `{key[0]}` | `{key[1]}` | {jobs:,} | " + " | ".join(cells) + " |")
    lines += ["", f"\\* above {target_s:.0f} s.", ""]
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    records = [(shown(p), json.loads(p.read_text())) for p in args.records]
    args.out.write_text("\n".join(render(records)))


if __name__ == "__main__":
    main()
