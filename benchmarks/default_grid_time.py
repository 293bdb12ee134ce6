"""The embedded default grid end to end, and where its time goes.

Runs ``snakemake --cores N all_tables`` on the default config (or ``--configfile``) in a fresh
temporary folder (nothing computed before; MLflow as configured, as ``make run`` logs it: each job
writes its own runs, so that is on the critical path; ``--no-tracking`` leaves it out), then
splits the wall time with what the jobs record: the optimizer steps of every training job
(``steps x step_seconds`` of its summary), the rest of each training job (building theta_{i-1},
the method's setup, data, writing the task), the evaluation jobs (each row's cells' seconds)
and the mini's pretraining, and Snakemake's start-up before its first job (``first_job_s``; with
whether SLURM's client is installed and its controller answers, as the SLURM executor plugin's
import waits for one that does not). ``compute_floor_s`` is the steps', evaluations' and pretraining's
core-seconds (seconds x the job's thread count: the pretraining's 2 threads hold 2 cores) spread
over the cores: no scheduling of these jobs on these cores ends sooner with the same numbers
(a CPU job's thread count is a setting of the numbers, see ``codyra.device.use_threads``).

``--also-native`` then runs the same grid again on the machine's native CPU kernels (what a user
gets by opting out of ``codyra.CPU_NUMERICS``, the pins that make every x86-64 machine compute the
same numbers) and records its times beside the pinned run's, with how far its accuracy matrices
lie from the pinned ones: what the pins cost a whole grid, and what opting out changes.

    .venv/bin/python benchmarks/default_grid_time.py                # minutes on 2 cores (docs/results/default-grid/)
    .venv/bin/python benchmarks/default_grid_time.py --also-native  # both, one after the other
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from codyra import CPU_NUMERICS

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_pin_cost import VARIANTS  # sibling scripts
from run_record import slurm_client, write_record

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 300.0


def split(results: Path, cfg: dict) -> dict:
    """Seconds by part, summed over the jobs' own records, and the core-seconds of the parts the
    floor counts (each part's seconds x its jobs' thread count)."""
    benchmark = cfg["benchmark"]
    parts = {"train_steps": 0.0, "train_other": 0.0, "eval": 0.0, "pretrain": 0.0}
    core_seconds = {"train_steps": 0.0, "eval": 0.0, "pretrain": 0.0}
    jobs = {"train": 0, "eval_rows": 0}
    for summary in (results / benchmark).glob("*/seed*/task*/summary.json"):
        s = json.loads(summary.read_text())
        steps = s["steps"] * s["step_seconds"]
        parts["train_steps"] += steps
        parts["train_other"] += s["seconds"] - steps
        core_seconds["train_steps"] += steps * s["torch_threads"]
        jobs["train"] += 1
    rows = {}
    for cell in (results / benchmark).glob("*/cells/A_*.json"):  # row 0 is computed once, in pretrained/
        c = json.loads(cell.read_text())
        rows.setdefault(cell.parent, []).append(c)
    for cell in (results / benchmark).glob("*/seed*/cells/A_*.json"):
        c = json.loads(cell.read_text())
        if "copied_from" not in c:
            rows.setdefault((cell.parent, c["i"]), []).append(c)
    for cells in rows.values():
        parts["eval"] += sum(c["seconds"] for c in cells)
        jobs["eval_rows"] += 1
    core_seconds["eval"] = parts["eval"] * cfg["eval"]["threads"]
    log = results / "logs" / benchmark / "pretrain_mini.log"  # its last line: "pretrained mini CLIP in <s>s"
    found = re.findall(r"pretrained mini \S+ in ([0-9.]+)s", log.read_text()) if log.is_file() else []
    parts["pretrain"] = float(found[-1]) if found else 0.0
    core_seconds["pretrain"] = parts["pretrain"] * cfg["mini"]["pretrain_threads"]
    return {"seconds": parts, "core_seconds": core_seconds, "jobs": jobs}


def compute_floor(core_seconds: dict, cores: int) -> float:
    """The wall time below which no schedule of these jobs on ``cores`` cores ends."""
    return sum(core_seconds.values()) / cores


# Snakemake's line before each job it starts: the local time, then the job's rule
JOB_START = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]\n(?:local)?rule ", re.MULTILINE)


def first_job_s(printout: str, launched: float) -> float:
    """Seconds from ``launched`` (epoch seconds) to the first job Snakemake's ``printout`` starts:
    its start-up (imports, the installed executor plugins', the DAG). To the second, as Snakemake
    prints its local time."""
    found = JOB_START.search(printout)
    if found is None:
        raise ValueError("Snakemake's printout starts no job: no grid ran")
    return datetime.strptime(found[1], "%a %b %d %H:%M:%S %Y").timestamp() - launched


def compare_matrices(pinned: dict[str, list[dict]], native: dict[str, list[dict]]) -> dict:
    """How far the native grid's accuracy cells lie from the pinned grid's (points): the largest
    difference, its run, and how many cells differ at all. Both: method -> its seeds' matrix.json."""
    worst, where, differing, cells = 0.0, None, 0, 0
    for method, runs in pinned.items():
        for ours, theirs in zip(runs, native[method], strict=True):
            run = f"{method}/seed{ours['seed']}"
            for row, other_row in zip(ours["A"], theirs["A"], strict=True):
                for a, b in zip(row, other_row, strict=True):
                    if a is None or b is None:  # a cell the protocol leaves empty must be empty in both
                        if a is not b:
                            raise ValueError(f"{run}: one grid has a cell the other lacks")
                        continue
                    cells += 1
                    gap = abs(a - b)
                    differing += gap > 0
                    if gap > worst:
                        worst, where = gap, run
    return {"max_abs_diff": worst, "max_abs_diff_run": where, "cells_differing": differing, "cells": cells}


SUMMARY_METRICS = ("last", "average", "transfer", "forgetting")


def compare_summaries(pinned: dict[str, list[dict]], native: dict[str, list[dict]]) -> dict:
    """Per method, the tables' metrics (mean over seeds) of both grids, with the spread of the pinned
    grid's seeds (sample SD, as the tables): whether the native kernels move a table row by more
    than its seeds differ."""
    from codyra.evaluation.metrics import summarize

    compared = {}
    for method, runs in pinned.items():
        ours = [summarize(run["A"]) for run in runs]
        theirs = [summarize(run["A"]) for run in native[method]]
        compared[method] = {}
        for metric in SUMMARY_METRICS:
            values, others = [s[metric] for s in ours], [s[metric] for s in theirs]
            if None in values or None in others:  # a metric the stream does not define
                continue
            compared[method][metric] = {
                "pinned": statistics.fmean(values),
                "pinned_sd": statistics.stdev(values) if len(values) > 1 else 0.0,
                "native": statistics.fmean(others),
            }
    return compared


def read_grid(results: Path, configfile: Path) -> tuple[dict, dict]:
    """A finished grid's figures (``split``) and each method's matrix.json per seed, as its tables
    read them."""
    from codyra.evaluation.tables import load_runs
    from codyra.experiment.config import config_from_files, load_config
    from codyra.methods import method_classes

    cfg = load_config(config_from_files([configfile], {"results": str(results)}))
    return split(results, cfg), load_runs(cfg, method_classes(cfg, cfg["methods"]))


def tracked(args) -> bool:
    """Whether the grid's jobs log to MLflow: the config's ``tracking.enabled``, unless ``--no-tracking``."""
    from codyra.experiment.config import config_from_files, load_config

    return args.tracking and load_config(config_from_files([args.configfile], {}))["tracking"]["enabled"]


def grid_command(args, results: Path) -> list[str]:
    """The Snakemake command of the grid into ``results``: `make run`'s, MLflow as configured
    unless ``--no-tracking``."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "workflow" / "Snakefile"), "all_tables"]
    cmd += ["--workflow-profile", str(REPO / "profiles" / "default"), "--cores", str(args.cores)]
    cmd += ["--configfile", str(args.configfile), "--config", f"results={results}"]
    if not args.tracking:
        cmd.append("tracking={enabled: false}")
    return cmd


def run_grid(args, env: dict[str, str]) -> tuple[dict, dict]:
    """``snakemake all_tables`` in a fresh folder under ``env``'s extra variables: the figures and
    each method's matrix.json per seed."""
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results"
        cmd = grid_command(args, results)
        launched, began = time.time(), time.perf_counter()
        done = subprocess.run(cmd, cwd=tmp, env={**os.environ, **env}, check=False, capture_output=True, text=True)
        wall = time.perf_counter() - began
        if done.returncode != 0:
            sys.exit(f"the grid failed:\n{done.stderr[-3000:]}")
        figures, matrices = read_grid(results, args.configfile)
    floor = compute_floor(figures["core_seconds"], args.cores)
    start = first_job_s(done.stderr, launched)
    figures |= {"wall_s": wall, "first_job_s": start, "compute_floor_s": floor, "meets_target": wall <= TARGET_S}
    return figures, matrices


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--configfile", type=Path, default=REPO / "config" / "config.yaml")
    parser.add_argument("--also-native", action="store_true", help="then the same grid on native CPU kernels")
    parser.add_argument(
        "--no-tracking", dest="tracking", action="store_false", help="MLflow off (default: as the config says)"
    )
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/default_grid_time.json"))
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    load_before = os.getloadavg()[0]
    figures, pinned = run_grid(args, CPU_NUMERICS)  # the pins, whatever this shell sets
    figures |= {"config": str(args.configfile), "cores": args.cores, "target_s": TARGET_S, "tracking": tracked(args)}
    figures |= slurm_client()  # whether first_job_s holds the SLURM plugin's wait for a controller
    if args.also_native:
        native, matrices = run_grid(args, VARIANTS["native"])
        figures["native"] = {
            **native,
            "env": VARIANTS["native"],
            "accuracy_vs_pinned": compare_matrices(pinned, matrices),
            "summary_vs_pinned": compare_summaries(pinned, matrices),
        }
    record = write_record(args.out, figures, load_before, {})
    print(json.dumps({k: v for k, v in record.items() if k != "host"}, indent=1))
    return record


if __name__ == "__main__":
    main()
