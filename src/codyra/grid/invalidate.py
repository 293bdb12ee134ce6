"""Redo part of a grid (``codyra invalidate``): remove a run, a task or a cell together with everything
that depends on it, so that Snakemake remakes exactly that.

Deleting a run folder by hand does nothing once the tables are newer: Snakemake does not rerun a job
for a missing intermediate file whose consumers are up to date. So the named outputs go with every
output downstream of them (the later tasks of the run, their rows, the run's matrix, held-out rows
and probes, the tables and figures, the analyses that read them) and the logs of those jobs, as the
workflow's own DAG says (:mod:`codyra.grid.dag`, run in a Snakemake process of its own), and the
command that remakes them is printed.

A direct ``codyra train`` or ``codyra cell`` on a finished grid leaves what is downstream older than
its new files: :func:`outdated_by` names it in one line, with the Snakemake command that updates it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from codyra.errors import ConfigError
from codyra.evaluation.tables import output_files
from codyra.extras import require_extra
from codyra.store.paths import (
    MATRIX_FILE,
    PRETRAINED,
    SUMMARY_FILE,
    cell_path,
    row0_cell_path,
    run_dir,
    tables_dir,
    task_dir,
)

TARGETS = ("all_tables", "all_heldout", "paper")  # the workflow's final targets, smallest first


def selected_paths(cfg: dict, method: str, seed: int | None, task: int | None, cell: list[int] | None) -> list[str]:
    """The outputs a selection names (a file, or every output under a folder), checked against the grid."""
    n = len(cfg["tasks"])
    if method == PRETRAINED:
        if seed is not None or task is not None:
            raise ConfigError("the pretrained model's row 0 is shared by every seed: give no --seed and no --task")
        if cell is None:
            return [str(row0_cell_path(cfg, 1).parent.parent)]
        if cell[0] != 0 or not 1 <= cell[1] <= n:
            raise ConfigError(f"the pretrained model only has cells A[0, j], j in 1..{n}: e.g. --cell 0 1")
        return [str(row0_cell_path(cfg, cell[1]))]
    if method not in cfg["methods"]:
        raise ConfigError(
            f"method {method!r} is not in the grid (config key methods: {', '.join(cfg['methods'])}); "
            "its runs are not the workflow's outputs"
        )
    if seed is not None and seed not in cfg["seeds"]:
        raise ConfigError(f"seed {seed} is not one of the grid's seeds {cfg['seeds']} (config key seeds)")
    if (task is not None or cell is not None) and seed is None:
        raise ConfigError("--task and --cell name one run's files: give its --seed too")
    if task is not None:
        if not 1 <= task <= n:
            raise ConfigError(f"task {task} out of range 1..{n}")
        from codyra.methods import method_of

        if not method_of(cfg, method).trains:
            raise ConfigError(f"method {method!r} never trains: it has no task to invalidate (--cell names its cells)")
        return [str(task_dir(cfg, method, seed, task))]
    if cell is not None:
        i, j = cell
        if not (0 <= i <= n and 1 <= j <= n):
            raise ConfigError(f"cell A[{i}, {j}] out of range: i in 0..{n} (0 = pretrained), j in 1..{n}")
        return [str(cell_path(cfg, method, seed, i, j))]
    if seed is None:
        return [str(run_dir(cfg, method, cfg["seeds"][0]).parent)]
    return [str(run_dir(cfg, method, seed))]


def invalidate(paths: list[str], configfile: str, *, dry_run: bool, snakefile: str) -> dict:
    """Remove (unless ``dry_run``) ``paths`` and what depends on them, as the DAG of the workflow
    ``snakefile`` with ``configfile`` says; the answer of :func:`codyra.grid.dag.answer`."""
    require_extra("snakemake", "workflow", "codyra invalidate (the workflow's DAG)")
    if not Path(snakefile).is_file():
        raise FileNotFoundError(
            f"no workflow at {snakefile}: run codyra invalidate from the project's root folder, where snakemake runs"
        )
    with tempfile.TemporaryDirectory() as tmp:
        request, answer = Path(tmp) / "request.json", Path(tmp) / "answer.json"
        request.write_text(json.dumps({"paths": paths, "targets": TARGETS, "dry_run": dry_run}))
        command = [sys.executable, "-m", "codyra.grid.dag", str(request), str(answer), "--snakefile", snakefile]
        # the DAG only: no data or weights are read, so their presence is not checked
        command += ["--configfile", configfile, "--config", "check_data=False"]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if not answer.is_file():
            raise ValueError(
                f"the workflow's DAG could not be built (nothing was removed):\n{(done.stderr or done.stdout)[-3000:]}"
            )
        result = json.loads(answer.read_text())
    if not result["matched"]:
        raise ValueError(f"no output of the workflow lies at {' or '.join(paths)}: nothing to invalidate")
    if result["locked"]:
        raise ValueError(
            "a Snakemake run holds this working directory (.snakemake/locks) and these files: nothing was removed; "
            "invalidate once it has ended (or, if none runs, after snakemake --unlock)"
        )
    return result


def remake_command(configfile: str | None, targets: list[str] | tuple[str, ...]) -> str:
    return " ".join(["snakemake --cores 2", *targets, *(["--configfile", configfile] if configfile else [])])


def report(result: dict, configfile: str | None, *, dry_run: bool) -> str:
    """What was (or would be) removed, folder by folder, and the command that remakes it."""
    if not result["removed"]:
        return "nothing to remove: none of these outputs, nor any downstream of them, exist"
    folders: dict[str, list[str]] = {}
    for file in result["removed"]:
        folders.setdefault(os.path.dirname(file), []).append(os.path.basename(file))
    verb = "would remove" if dry_run else "removed"
    jobs = ", ".join(f"{rule} x{count}" for rule, count in sorted(result["jobs"].items()))
    lines = [f"{verb} {len(result['removed'])} file(s) of {sum(result['jobs'].values())} job(s) ({jobs}):"]
    for folder, names in folders.items():
        lines.append(f"  {folder}/: " + (" ".join(names) if len(names) <= 6 else f"{len(names)} files"))
    if result["logs"]:
        lines.append(f"  and {len(result['logs'])} log(s) of these jobs")
    command = remake_command(configfile, result["targets"])
    lines.append(
        f"{'then ' if dry_run else ''}remake them: {command}  (on SLURM: --profile profiles/slurm instead of --cores 2)"
    )
    return "\n".join(lines)


def outdated_by(cfg: dict, method: str, seed: int | None, *, task: int | None = None) -> list[str]:
    """The existing results that a direct training of ``task`` of a run (or, without ``task``, an
    evaluation of one of its cells) leaves older than the files it wrote, so that Snakemake reruns
    them: the run's later tasks, its rows from ``task`` on, its matrix, and the tables (``method``
    pretrained: every run's copy of row 0 and matrix)."""
    n = len(cfg["tasks"])
    if method == PRETRAINED:
        runs, tasks, rows = [(m, s) for m in cfg["methods"] for s in cfg["seeds"]], (), (0,)
    elif task is not None:
        runs, tasks, rows = [(method, seed)], range(task + 1, n + 1), range(task, n + 1)
    else:
        runs, tasks, rows = [(method, seed)], (), ()
    parts = []
    for m, s in runs:
        later = [k for k in tasks if (task_dir(cfg, m, s, k) / SUMMARY_FILE).is_file()]
        evaluated = [i for i in rows if any(cell_path(cfg, m, s, i, j).is_file() for j in range(1, n + 1))]
        what = [spans(noun, found) for noun, found in (("task", later), ("row", evaluated)) if found]
        what += [MATRIX_FILE] * (run_dir(cfg, m, s) / MATRIX_FILE).is_file()
        if what:
            parts.append(f"{run_dir(cfg, m, s)}: {', '.join(what)}")
    if any(path.is_file() for path in output_files(cfg)):
        parts.append(f"the tables in {tables_dir(cfg)}")
    return parts


def spans(noun: str, indices: list[int]) -> str:
    """``task 3``, ``rows 2-5`` (consecutive), ``rows 1, 3``."""
    if len(indices) == 1:
        return f"{noun} {indices[0]}"
    if indices == list(range(indices[0], indices[-1] + 1)):
        return f"{noun}s {indices[0]}-{indices[-1]}"
    return f"{noun}s {', '.join(map(str, indices))}"
