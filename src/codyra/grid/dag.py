"""What the workflow's own DAG says depends on some result files (``codyra invalidate``).

``python -m codyra.grid.dag REQUEST ANSWER <snakemake arguments>`` parses the workflow and builds the
DAG of the given targets as ``snakemake --dag`` does (nothing runs). Instead of printing the graph, it
takes the jobs that write the requested files (a file, or every output under a folder) and every job
downstream of them along Snakemake's own edges, and answers (JSON, in ANSWER) with the files they
lose: the requested outputs, every output of a job downstream, and the logs of all those jobs (they
describe files that are gone; Snakemake deletes a job's log when it starts it anyway). Unless the
request is a dry run, the existing ones are removed under Snakemake's lock of the working directory,
so a Snakemake run busy with these files stops it before anything is removed. The answer also names
the fewest of the targets that remake everything removed.

This relies on Snakemake's DAG internals (``Workflow._prepare_dag``, ``DAG.dependencies``,
``DAG.depending``, ``DAG.bfs``), as scripts/count-submissions.py does: tests/workflow/test_grid_commands.py
fails when they change.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Snakemake is the workflow extra's: imported where the DAG is built
    from snakemake.workflow import Workflow


def answer(workflow: Workflow, request: dict) -> dict:
    """The files the requested outputs and everything downstream of them take with them (removed
    unless ``request["dry_run"]``), the jobs that lose a file, and the targets that remake them."""
    # a dry run only reads; a removal takes the lock (a Snakemake run busy with these files has it)
    workflow._prepare_dag(forceall=False, ignore_incomplete=True, lock_warn_only=request["dry_run"])
    workflow._build_dag()
    dag = workflow.dag
    paths = [os.path.normpath(p) for p in request["paths"]]

    def requested(file: str) -> bool:
        file = os.path.normpath(file)
        return any(file == p or file.startswith(p + os.sep) for p in paths)

    writers = {job: [f for f in map(str, job.output) if requested(f)] for job in dag.jobs}
    writers = {job: files for job, files in writers.items() if files}
    downstream = set(dag.bfs(dag.depending, *{job for w in writers for job in dag.depending[w]}))
    lost = {job: writers.get(job, []) for job in writers}  # a writer downstream of another loses all
    lost.update({job: list(map(str, job.output)) for job in downstream})
    existing = {job: [f for f in files if os.path.isfile(f)] for job, files in lost.items()}
    removed = sorted({f for files in existing.values() for f in files})
    logs = sorted({str(f) for job in lost for f in job.log if os.path.isfile(f)})
    affected = {job for job, files in existing.items() if files}
    targets, covered = [], set()
    for target in sorted(dag.targetjobs, key=lambda job: request["targets"].index(job.rule.name)):
        upstream = set(dag.bfs(dag.dependencies, target))
        if (affected & upstream) - covered:
            targets.append(target.rule.name)
            covered |= upstream
    result = {
        "matched": bool(writers),
        "removed": removed,
        "logs": logs,
        "jobs": dict(Counter(job.rule.name for job in affected)),
        "targets": targets,
        "locked": False,
    }
    if request["dry_run"]:
        return result
    from snakemake.exceptions import LockException

    try:
        with workflow.persistence.lock():
            for file in removed + logs:
                Path(file).unlink(missing_ok=True)
    except LockException:
        result["locked"] = True
    return result


def main(argv: list[str]) -> None:
    from snakemake import cli
    from snakemake.workflow import Workflow

    request_path, answer_path, *snakemake_args = argv
    request = json.loads(Path(request_path).read_text())

    def write_answer(workflow: Workflow) -> None:
        Path(answer_path).write_text(json.dumps(answer(workflow, request)))

    Workflow.printdag = write_answer  # `--dag` builds the DAG without running a job; answer instead of printing it
    cli.main([*request["targets"], *snakemake_args, "--dag"])  # --config takes the arguments after it


if __name__ == "__main__":
    main(sys.argv[1:])
