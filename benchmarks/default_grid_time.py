"""The embedded default grid end to end, and where its time goes.

Runs ``snakemake --cores N all_tables`` on the default config (or ``--configfile``) in a fresh
temporary folder (nothing computed before; MLflow off, as it is off the critical path), then
splits the wall time with what the jobs record: the optimizer steps of every training job
(``steps x step_seconds`` of its summary), the rest of each training job (building theta_{i-1},
the method's setup, data, writing the task), the evaluation jobs (each row's cells' seconds)
and the mini's pretraining. ``compute_floor_s`` is the steps', evaluations' and pretraining's
core-seconds (seconds x the job's thread count: the pretraining's 2 threads hold 2 cores) spread
over the cores: no scheduling of these jobs on these cores ends sooner with the same numbers
(a CPU job's thread count is a setting of the numbers, see ``codyra.device.use_threads``).

    .venv/bin/python benchmarks/default_grid_time.py              # 12-18 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_record import write_record  # a sibling script

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


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--configfile", type=Path, default=REPO / "config" / "config.yaml")
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/default_grid_time.json"))
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results"
        cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "workflow" / "Snakefile"), "all_tables"]
        cmd += ["--workflow-profile", str(REPO / "profiles" / "default"), "--cores", str(args.cores)]
        cmd += ["--configfile", str(args.configfile), "--config", f"results={results}", "tracking={enabled: false}"]
        began = time.perf_counter()
        done = subprocess.run(cmd, cwd=tmp, check=False, capture_output=True, text=True)
        wall = time.perf_counter() - began
        if done.returncode != 0:
            sys.exit(f"the grid failed:\n{done.stderr[-3000:]}")
        from codyra.experiment.config import config_from_files, load_config

        cfg = load_config(config_from_files([args.configfile], {"results": str(results)}))
        figures = split(results, cfg)
    floor = compute_floor(figures["core_seconds"], args.cores)
    figures |= {
        "config": str(args.configfile),
        "cores": args.cores,
        "wall_s": wall,
        "compute_floor_s": floor,
        "target_s": TARGET_S,
        "meets_target": wall <= TARGET_S,
    }
    record = write_record(args.out, figures, load_before, {})
    print(json.dumps({k: v for k, v in record.items() if k != "host"}, indent=1))
    return record


if __name__ == "__main__":
    main()
