"""How long Snakemake takes to build the DAG of each paper config: the dry run a user types before
submitting, and the start-up of every real run.

For each config (``--configs``, default every config in ``config/``), ``snakemake -n`` of each
target (``--targets``, default ``all_tables`` and ``paper``) in a fresh process, in an empty
working directory (no results yet: the whole grid is planned), with ``--config
check_data=False`` (the datasets are not needed to plan). Reported per (config, target): the
median wall seconds of ``--repeats`` runs, the number of jobs planned, and whether it meets the
target of 10 s. Recorded beside them: the 1-minute load average at start and end, the number of
cores, whether SLURM's client (``sbatch``) is installed and whether its controller answers:
every Snakemake start imports the installed executor plugins, and the SLURM plugin's import asks
``scontrol show config`` for a default, which waits for its timeout where the client is
installed but no controller answers.

    .venv/bin/python benchmarks/dag_build_time.py                       # every config, ~10 min
    .venv/bin/python benchmarks/dag_build_time.py --configs xtail_16shot.yaml --targets paper
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_record import write_record  # a sibling script

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 10.0


def dry_run(config: Path, target: str, workdir: Path) -> tuple[float, int]:
    """(wall seconds, jobs planned) of one dry run in a fresh process."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "workflow" / "Snakefile"), "-n", target]
    cmd += ["--configfile", str(config), "--config", "check_data=False"]
    began = time.perf_counter()
    done = subprocess.run(cmd, cwd=workdir, check=False, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"snakemake -n {target} --configfile {config} failed:\n{done.stderr[-3000:]}")
    total = re.search(r"^total\s+(\d+)$", done.stdout, re.MULTILINE)
    return seconds, int(total.group(1)) if total else 0


def controller_answers() -> bool | None:
    """Whether ``scontrol ping`` reaches a SLURM controller (None: no SLURM client installed)."""
    if shutil.which("scontrol") is None:
        return None
    try:
        done = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0 and " is UP" in done.stdout


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default=None, help="comma-separated files of config/ (default: all)")
    parser.add_argument("--targets", default="all_tables,paper", help="comma-separated targets")
    parser.add_argument("--repeats", type=int, default=1, help="dry runs per (config, target); the median counts")
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/dag_build_time.json"))
    args = parser.parse_args(argv)
    names = args.configs.split(",") if args.configs else sorted(p.name for p in (REPO / "config").glob("*.yaml"))
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for target in args.targets.split(","):
                runs = [dry_run(REPO / "config" / name, target, Path(tmp)) for _ in range(args.repeats)]
                seconds = statistics.median(s for s, _ in runs)
                rows.append(
                    {
                        "config": name,
                        "target": target,
                        "seconds": seconds,
                        "jobs": runs[0][1],
                        "meets_target": seconds <= TARGET_S,
                    }
                )
                print(f"{name:28s} {target:10s} {seconds:6.1f} s  {runs[0][1]:6d} jobs", flush=True)
    import snakemake

    return write_record(
        args.out,
        {
            "runs": rows,
            "target_s": TARGET_S,
            "meets_target": all(r["meets_target"] for r in rows),
            "slurm_client_installed": shutil.which("sbatch") is not None,
            "slurm_controller_answers": controller_answers(),
            "repeats": args.repeats,
        },
        load_before,
        {"snakemake": snakemake.__version__},
    )


if __name__ == "__main__":
    main()
