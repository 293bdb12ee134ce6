#!/usr/bin/env python3
"""How many jobs a grid submits to SLURM, without submitting anything.

    python scripts/count-submissions.py --profile profiles/slurm all_tables --configfile config/mtil_5shot.yaml

Takes snakemake's arguments and builds the DAG as `snakemake --dag` does (nothing runs, nothing
is written), then prints one JSON line: `submissions` (group jobs count once; local rules
never reach the queue), `local` (jobs the Snakemake process runs itself), `jobs` (all jobs
that would run), `submissions_by_rule` (a group job listed under its rules joined by '+') and
the `resources` one submission of each kind requests (a group's as Snakemake combines them).
"""

from __future__ import annotations

import json
import sys
from collections import Counter

from snakemake import cli
from snakemake.settings.types import ExecutionSettings, GroupSettings
from snakemake.workflow import Workflow

REPORTED = ("gpu", "gpu_model", "runtime", "mem_mb", "_cores")


def count(self: Workflow) -> None:
    self._prepare_dag(forceall=self.dag_settings.forceall, ignore_incomplete=True, lock_warn_only=True)
    self._build_dag()
    if self.execution_settings is None:  # --dag has none; group jobs read the attempt number from it
        self.execution_settings = ExecutionSettings()
    self.async_run(
        self.dag.postprocess(update_needrun=False, check_initial=True)
    )  # assigns the group jobs, as execute() does
    dag = self.dag
    needrun = set(dag.needrun_jobs())
    submitted, resources, local, seen = Counter(), {}, 0, set()
    for job in sorted(needrun, key=lambda j: j.jobid):
        if job.group is None and (job.rule.name in self._localrules or job.rule.norun):
            local += 1
            continue
        unit = job if job.group is None else dag._group[job]
        if unit in seen:
            continue
        seen.add(unit)
        name = "+".join(sorted({j.rule.name for j in getattr(unit, "jobs", [job])}))
        submitted[name] += 1
        resources.setdefault(name, {k: unit.resources.get(k) for k in REPORTED})  # one example per kind
    print(
        json.dumps(
            {
                "submissions": sum(submitted.values()),
                "local": local,
                "jobs": len(needrun),
                "submissions_by_rule": dict(sorted(submitted.items())),
                "resources": dict(sorted(resources.items())),
            }
        )
    )


def with_groups(printdag, settings: GroupSettings):
    def counting(self: Workflow) -> None:
        self.group_settings = (
            settings  # `--dag` ignores --groups / --group-components (a profile's too); a run does not
        )
        printdag(self)

    return counting


if __name__ == "__main__":
    argv = [*sys.argv[1:], "--dag"]
    _, args = cli.parse_args(argv)
    groups = GroupSettings(
        group_components=args.group_components, overwrite_groups=args.groups, local_groupid=args.local_groupid
    )
    Workflow.printdag = with_groups(
        count, groups
    )  # `--dag` builds the DAG without running a job; print counts instead of dot
    Workflow.local_exec = property(lambda self: False)  # as under a cluster executor: rules' groups apply
    sys.exit(cli.main(argv))
