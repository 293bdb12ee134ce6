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

``--floor`` also times Snakemake alone on the same DAG: a generated workflow with the same rules,
output and log patterns (wildcard constraints included) and groups, whose input
functions look each job's input list up in a table exported from the real dry run. What it lacks
is the workflow's own work: loading and validating the config, code versions, settings
fingerprints, computing inputs, params, threads and resources. Its seconds are the least any
input function can bring the dry run to with Snakemake and this DAG.

    .venv/bin/python benchmarks/dag_build_time.py                       # every config, ~10 min
    .venv/bin/python benchmarks/dag_build_time.py --configs xtail_16shot.yaml --targets paper --floor
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
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_record import slurm_client, write_record  # a sibling script

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 10.0


def run_snakemake(args: list[str], workdir: Path) -> tuple[float, str]:
    """(wall seconds, printout) of ``snakemake ARGS`` in a fresh process; exits on failure."""
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=workdir, check=False, capture_output=True, text=True
    )
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"snakemake {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout + done.stderr


def planned(printout: str) -> int:
    total = re.search(r"^total\s+(\d+)$", printout, re.MULTILINE)
    return int(total.group(1)) if total else 0


def dry_run(config: Path, target: str, workdir: Path) -> tuple[float, str]:
    """(wall seconds, printout) of the workflow's dry run of ``target``."""
    args = ["-s", str(REPO / "workflow" / "Snakefile"), "-n", target]
    return run_snakemake([*args, "--configfile", str(config), "--config", "check_data=False"], workdir)


# Snakemake's own cost on a DAG: the workflow's rules exported as patterns (a wrapper Snakefile
# including the real one), its jobs' inputs read from the dry run's printout.
EXPORT_RULES = """include: {snakefile!r}

import json as _json

with open({out!r}, "w") as _out:  # _group: Rule.group reads None until the DAG is built
    _json.dump({{r.name: {{"output": [str(f) for f in r.output], "log": [str(f) for f in r.log],
                          "group": r._group}} for r in workflow.rules}}, _out)
"""

FLOOR_WORKFLOW = """import json


with open(config["floor_spec"]) as spec:
    SPEC = json.load(spec)


def inputs_of(jobs):
    return lambda wildcards: jobs[",".join(sorted(f"{k}={v}" for k, v in wildcards.items()))]


for name, r in SPEC.items():

    rule:
        name:
            name
        input:
            inputs_of(r["jobs"]),
        output:
            *r["output"],
        log:
            *r["log"],
        group:
            r["group"]
        shell:
            "true"
"""

JOB = re.compile(r"^\s*(?:local)?rule (\w+):$")


def printed_jobs(printout: str) -> dict[str, dict]:
    """Per rule of a dry run's printout: each job's input list by its wildcards (``k=v`` sorted,
    comma-joined, as ``FLOOR_WORKFLOW`` looks them up)."""
    rules: dict[str, dict] = {}
    jobs: list[tuple[str, dict]] = []
    for line in printout.splitlines():
        if match := JOB.match(line):
            rules.setdefault(match.group(1), {})
            jobs.append((match.group(1), {"input": [], "wildcards": ""}))
        elif jobs:
            key, _, value = line.strip().partition(": ")
            if key == "input":
                jobs[-1][1]["input"] = value.split(", ")
            elif key == "wildcards":
                jobs[-1][1]["wildcards"] = ",".join(sorted(value.split(", ")))
    for name, job in jobs:
        rules[name][job["wildcards"]] = job["input"]
    return rules


def floor_spec(config: Path, workdir: Path, printout: str) -> Path:
    """The table the generated workflow (written beside it, ``.smk``) reads: the workflow's rules
    (output and log patterns, group) with the inputs of each job of the dry run that printed
    ``printout``."""
    export, exported = workdir / "export.smk", workdir / "rules.json"
    export.write_text(EXPORT_RULES.format(snakefile=str(REPO / "workflow" / "Snakefile"), out=str(exported)))
    run_snakemake(
        ["-s", str(export), "--list-rules", "--configfile", str(config), "--config", "check_data=False"], workdir
    )
    printed = printed_jobs(printout)
    spec = {name: {**r, "jobs": printed.get(name, {})} for name, r in json.loads(exported.read_text()).items()}
    table = workdir / "floor.json"
    table.write_text(json.dumps(spec))
    table.with_suffix(".smk").write_text(FLOOR_WORKFLOW)
    return table


def floor_run(spec: Path, config: str, target: str, jobs: int) -> float:
    """Wall seconds of the generated workflow's dry run of ``target`` (``floor_spec`` of
    ``config``); exits unless it plans the workflow's ``jobs``."""
    args = ["-s", str(spec.with_suffix(".smk")), "-n", target, "--config", f"floor_spec={spec}"]
    seconds, printout = run_snakemake(args, spec.parent)
    if planned(printout) != jobs:
        sys.exit(
            f"the generated workflow plans {planned(printout)} jobs for {config} {target}, "
            f"the workflow {jobs}:\n{printout[-3000:]}"
        )
    return seconds


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default=None, help="comma-separated files of config/ (default: all)")
    parser.add_argument("--targets", default="all_tables,paper", help="comma-separated targets")
    parser.add_argument("--repeats", type=int, default=1, help="dry runs per (config, target); the median counts")
    parser.add_argument("--floor", action="store_true", help="also time Snakemake alone on the same DAG")
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/dag_build_time.json"))
    args = parser.parse_args(argv)
    names = args.configs.split(",") if args.configs else sorted(p.name for p in (REPO / "config").glob("*.yaml"))
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for target in args.targets.split(","):
                runs = [dry_run(REPO / "config" / name, target, Path(tmp)) for _ in range(args.repeats)]
                seconds, jobs = statistics.median(s for s, _ in runs), planned(runs[0][1])
                row = {"config": name, "target": target, "seconds": seconds, "jobs": jobs}
                row["meets_target"] = seconds <= TARGET_S
                if args.floor:
                    spec = floor_spec(REPO / "config" / name, Path(tmp), runs[0][1])
                    floors = [floor_run(spec, name, target, jobs) for _ in range(args.repeats)]
                    row["floor_seconds"] = statistics.median(floors)
                rows.append(row)
                floor = f"  Snakemake alone {row['floor_seconds']:6.1f} s" if args.floor else ""
                print(f"{name:28s} {target:10s} {seconds:6.1f} s  {jobs:6d} jobs{floor}", flush=True)
    import snakemake

    return write_record(
        args.out,
        {
            "runs": rows,
            "target_s": TARGET_S,
            "meets_target": all(r["meets_target"] for r in rows),
            **slurm_client(),
            "repeats": args.repeats,
            "floor": args.floor,
        },
        load_before,
        {"snakemake": snakemake.__version__},
    )


if __name__ == "__main__":
    main()
