"""The state of a grid at a glance (``codyra status``): per method and seed, the tasks trained, the
cells evaluated, the run's matrix, the jobs that failed or did not finish, and the compute left, read
from the result files and the jobs' logs alone (no Snakemake, no model, no torch: it answers in a second).

A file counts as done only while it is what the grid would compute now. It is stale when Snakemake
would rerun it: a task summary or a cell recording another settings fingerprint (settings and code
version) than the config gives, a task trained from other updates than the ones stored before it,
a cell older than the update of its row, and everything after a task that is not done. theta_0 is
not checked: its pretraining's settings are recorded by Snakemake alone.

Snakemake deletes a job's log when the job starts, so a log holds the last attempt: a log with a
Python traceback is a failed job (a failure record of a job submitted to a cluster,
:mod:`codyra.experiment.retries`, names its log the same way), and the log of a training, row or
summary whose outputs are missing, with no error in it, is a job started and not finished: running,
or stopped without a Python error (a node failure, a time limit).

The time left is serial compute: for each method, the mean recorded seconds of its finished trainings
(a task summary's ``seconds``) and rows (the sum of a row's cells' ``seconds``), or of every method's
where it has none finished yet, times its trainings and rows left. Model loading, queueing and jobs
running side by side are not counted.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import fmean

from codyra.evaluation.tables import output_files
from codyra.experiment.fingerprints import (
    cell_fingerprint,
    eval_fingerprint,
    expected_cell_fingerprints,
    train_fingerprint,
)
from codyra.methods import method_classes
from codyra.store.paths import (
    FAILED_JOBS_DIR,
    LOGS_DIR,
    MATRIX_FILE,
    PRETRAINED,
    SUMMARY_FILE,
    UPDATE_FILE,
    cell_path,
    results_path,
    row0_cell_path,
    run_dir,
    task_dir,
)
from codyra.tracking.mirror import cell_seconds

DONE, STALE, MISSING = "done", "stale", "missing"
TRAINING, ROW = "training", "row"  # the kinds of job whose time left is estimated
MATRIX = "matrix"
# a run's job logs: <stage>/<method>/seed<seed>.log or <stage>/<method>/seed<seed>/<name>.log
RUN_LOG = re.compile(r"(?P<stage>[^/]+)/(?P<method>[^/]+)/seed(?P<seed>\d+)(?:/(?P<name>[^/]+))?\.log")
# the jobs whose outputs tell a started job from a finished one: training task i, row i, the matrix
JOB_LOGS = {("train", "task"): TRAINING, ("cells", "row"): ROW, ("summarize", None): MATRIX}
ROW0_LOG = f"cells/{PRETRAINED}/row0.log"
TRACEBACK = "Traceback (most recent call last):"
LOG_TAIL = 65536  # bytes of a log read for its error: a traceback ends a failed job's log


@dataclass
class Job:
    """A job that failed (``error``) or started and did not finish (``error`` None), named by its log."""

    run: str
    job: str
    log: str
    error: str | None = None


@dataclass
class RunState:
    """A run's tasks and rows, each done, stale or missing (a row with any cell missing is missing)."""

    method: str
    seed: int
    tasks: list[str]  # task 1..N (none for a method that never trains)
    rows: list[str]  # row 0..N
    cells: int  # done
    stale_cells: int
    matrix: str
    left: dict[str, int]  # TRAINING / ROW -> jobs left
    seconds: dict[str, list[float]]  # TRAINING / ROW -> recorded seconds of the finished jobs


@dataclass
class GridState:
    benchmark: str
    config: str
    n_tasks: int
    runs: list[RunState]
    row0: str  # the shared pretrained row 0
    tables: dict  # present, expected, state
    failed: list[Job] = field(default_factory=list)
    started: list[Job] = field(default_factory=list)
    eta: dict = field(default_factory=dict)


def grid_status(cfg: dict, config: str = "") -> GridState:
    """The state of ``cfg``'s grid (``config``: the file it was read from, for the header)."""
    row0, row0_seconds = pretrained_row(cfg)
    classes = method_classes(cfg, cfg["methods"])
    expected = {m: expected_cell_fingerprints(cfg, m, cls) for m, cls in classes.items()}
    runs = [run_state(cfg, m, s, expected[m], classes[m]) for m in cfg["methods"] for s in cfg["seeds"]]
    state = GridState(cfg["benchmark"], config, len(cfg["tasks"]), runs, row0, tables_state(cfg, runs, classes))
    state.failed, state.started = job_logs(cfg, {(r.method, r.seed): r for r in runs}, row0)
    state.eta = time_left(runs, pretrained=(int(row0 != DONE), row0_seconds))
    return state


def run_state(cfg: dict, method: str, seed: int, expected: list[list[str]], method_class) -> RunState:
    """One run's tasks, cells and matrix, each checked as the module docstring says (``expected``:
    its cells' fingerprints, ``method_class``: its method's class)."""
    n = len(cfg["tasks"])
    trains, computed_rows = method_class.trains, not method_class.copies_row0()
    tasks, digests, updated, seconds = [], [], {}, {TRAINING: [], ROW: []}
    for i in range(1, n + 1) if trains else ():
        folder = task_dir(cfg, method, seed, i)
        summary = read_result(folder / SUMMARY_FILE)
        if summary is None or not (folder / UPDATE_FILE).is_file():
            tasks.append(MISSING)
            digests.append(None)
            continue
        if "seconds" in summary:
            seconds[TRAINING].append(float(summary["seconds"]))
        fresh = summary.get("settings") == train_fingerprint(cfg, method, i, method_class)
        fresh = fresh and summary.get("previous_updates") == digests and tasks.count(DONE) == i - 1
        tasks.append(DONE if fresh else STALE)
        digests.append(summary.get("update_digest"))
        updated[i] = (folder / UPDATE_FILE).stat().st_mtime
    rows, cells, stale_cells, newest = [], 0, 0, 0.0
    for i in range(n + 1):
        fresh_cells, present, row_seconds = 0, 0, 0.0
        for j in range(1, n + 1):
            path = cell_path(cfg, method, seed, i, j)
            cell = read_result(path)
            if cell is None:
                continue
            written = path.stat().st_mtime
            newest = max(newest, written)
            present += 1
            row_seconds += cell_seconds(cell)
            fresh = cell.get("settings") == expected[i][j - 1]
            if trains and i > 0:  # computed from updates 1..i: those must be done, and older than the cell
                fresh = fresh and tasks[i - 1] == DONE and written >= updated[i]
            fresh_cells += fresh
        cells += fresh_cells
        stale_cells += present - fresh_cells
        rows.append(DONE if fresh_cells == n else MISSING if present < n else STALE)
        if i > 0 and computed_rows and present == n:
            seconds[ROW].append(row_seconds)
    matrix = run_dir(cfg, method, seed) / MATRIX_FILE
    if not matrix.is_file():
        matrix_state = MISSING
    elif cells == (n + 1) * n and matrix.stat().st_mtime >= newest:
        matrix_state = DONE
    else:
        matrix_state = STALE
    left = {TRAINING: n - tasks.count(DONE) if trains else 0, ROW: n - rows[1:].count(DONE) if computed_rows else 0}
    return RunState(method, seed, tasks, rows, cells, stale_cells, matrix_state, left, seconds)


def pretrained_row(cfg: dict) -> tuple[str, list[float]]:
    """The shared row 0 (computed once, copied into every run) and its seconds if whole."""
    n = len(cfg["tasks"])
    cells = [read_result(row0_cell_path(cfg, j)) for j in range(1, n + 1)]
    if any(cell is None for cell in cells):
        return MISSING, []
    fresh = all(
        cell.get("settings") == cell_fingerprint(eval_fingerprint(cfg, j), []) for j, cell in enumerate(cells, 1)
    )
    return DONE if fresh else STALE, [sum(cell_seconds(cell) for cell in cells)]


def tables_state(cfg: dict, runs: list[RunState], classes: dict) -> dict:
    """The files the tables job writes (the tables in every format, their figures, the summary): how
    many exist, and whether they are newer than every run's matrix (all done)."""
    files = output_files(cfg, classes)
    present = [f.stat().st_mtime for f in files if f.is_file()]
    matrices = [run_dir(cfg, r.method, r.seed) / MATRIX_FILE for r in runs]
    newest = max((m.stat().st_mtime for m in matrices if m.is_file()), default=0.0)
    if not present:
        state = MISSING
    elif len(present) == len(files) and all(r.matrix == DONE for r in runs) and min(present) >= newest:
        state = DONE
    else:
        state = STALE
    return {"present": len(present), "expected": len(files), "state": state}


def read_result(path: Path) -> dict | None:
    """A result JSON object; None when it is missing or unreadable (its job runs again)."""
    try:
        obj = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def log_error(path: Path) -> str | None:
    """The error of a log whose job failed (the exception line of its last traceback), else None."""
    with open(path, "rb") as log:
        log.seek(max(0, os.path.getsize(path) - LOG_TAIL))
        tail = log.read().decode(errors="replace")
    if TRACEBACK not in tail:
        return None
    lines = tail.rsplit(TRACEBACK, 1)[1].splitlines()
    # after the frames (indented): the exception, "Name: message", its message's first line
    return next((line for line in lines if line.strip() and not line[0].isspace()), "an exception")


def job_logs(cfg: dict, runs: dict[tuple[str, int], RunState], row0: str) -> tuple[list[Job], list[Job]]:
    """The failed jobs (from their logs and failure records) and the started, unfinished ones."""
    logs = results_path(cfg, LOGS_DIR)
    records = {}
    for record in sorted(results_path(cfg, FAILED_JOBS_DIR).glob("*.json")):
        failure = read_result(record)
        if failure and "log" in failure:
            records[os.path.abspath(failure["log"])] = (str(failure.get("error") or "").splitlines() or [""])[0]
    failed, started = [], []
    for path in sorted(logs.rglob("*.log")):
        error = records.pop(os.path.abspath(path), None) or log_error(path)
        run, job, state = job_of_log(path.relative_to(logs).as_posix(), runs, row0)
        if error and state != DONE:
            failed.append(Job(run, job, str(path), error))
        elif state == MISSING and not error:
            started.append(Job(run, job, str(path)))
    failed += [Job("", "", log, error) for log, error in records.items()]  # a record whose log is gone
    return failed, started


def job_of_log(relative: str, runs: dict[tuple[str, int], RunState], row0: str) -> tuple[str, str, str | None]:
    """The run and job of a log (its path under the benchmark's logs) and its outputs' state (None
    where they are not followed: held-out rows, probes, analyses, tables)."""
    if relative == ROW0_LOG:
        return PRETRAINED, "row 0", row0
    match = RUN_LOG.fullmatch(relative)
    run = runs.get((match["method"], int(match["seed"]))) if match else None
    if run is None:
        return "", relative.removesuffix(".log"), None
    stage, name = match["stage"], match["name"]
    label = run_label(run)
    indexed = re.fullmatch(r"([a-z]+)(\d+)", name or "")
    what = JOB_LOGS.get((stage, indexed[1] if indexed else name))
    if what == TRAINING and 1 <= int(indexed[2]) <= len(run.tasks):
        return label, f"train task {indexed[2]}", run.tasks[int(indexed[2]) - 1]
    if what == ROW and int(indexed[2]) < len(run.rows):
        return label, f"row {indexed[2]}", run.rows[int(indexed[2])]
    if what == MATRIX:
        return label, "summary", run.matrix
    return label, f"{stage} {name}" if name else stage, None


def time_left(runs: list[RunState], pretrained: tuple[int, list[float]]) -> dict:
    """Serial compute left: per method, its finished jobs' mean seconds (every method's where it has
    none) times its jobs left, per kind of job."""
    left = {(kind, r.method): 0 for r in runs for kind in (TRAINING, ROW)}
    seconds = {key: [] for key in left}
    for r in runs:
        for kind in (TRAINING, ROW):
            left[kind, r.method] += r.left[kind]
            seconds[kind, r.method] += r.seconds[kind]
    left[ROW, PRETRAINED], seconds[ROW, PRETRAINED] = pretrained
    pooled = {kind: [s for (k, _), values in seconds.items() if k == kind for s in values] for kind in (TRAINING, ROW)}
    total, unknown = 0.0, {TRAINING: 0, ROW: 0}
    for (kind, method), count in left.items():
        times = seconds[kind, method] or pooled[kind]
        if count and not times:
            unknown[kind] += count
        elif count:
            total += count * fmean(times)
    return {
        "seconds": total,
        "jobs": {kind: sum(c for (k, _), c in left.items() if k == kind) for kind in (TRAINING, ROW)},
        "without_timing": unknown,
    }


def duration(seconds: float) -> str:
    """``2 h 05 min``, ``7 min 30 s``, ``45 s``."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"


def render(state: GridState) -> str:
    """The table a cluster user reads every morning: a line per method and seed, a totals line, the
    failures with their logs, the compute left."""
    failed, started = Counter(j.run for j in state.failed), Counter(j.run for j in state.started)
    header = ("method", "seed", "trained", "cells", "matrix", "failed", "started")
    rows = [
        (r.method, str(r.seed), *counts([r], state.n_tasks), {DONE: "yes", STALE: "stale", MISSING: "-"}[r.matrix])
        + (str(failed.get(run_label(r), "")), str(started.get(run_label(r), "")))
        for r in state.runs
    ]
    done = sum(r.matrix == DONE for r in state.runs)
    rows.append(
        ("total", "", *counts(state.runs, state.n_tasks), f"{done}/{len(state.runs)}")
        + (str(len(state.failed) or ""), str(len(state.started) or ""))
    )
    widths = [max(len(row[k]) for row in [header, *rows]) for k in range(len(header))]
    methods, seeds = {r.method for r in state.runs}, {r.seed for r in state.runs}
    source = f" ({state.config})" if state.config else ""
    lines = [
        f"{state.benchmark}{source}: {len(methods)} method(s) x {len(seeds)} seed(s), {state.n_tasks} tasks. "
        + "done: what the grid computes now (settings fingerprints and file times checked); stale: Snakemake reruns it",
        *("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]),
        f"pretrained row 0: {state.row0}; tables: {state.tables['present']}/{state.tables['expected']} files, "
        + state.tables["state"],
    ]
    for title, jobs in (("failed", state.failed), ("started, not finished (running, or stopped)", state.started)):
        if jobs:
            lines.append(f"{title}:")
            lines += [
                f"  {' '.join(filter(None, (j.run, j.job)))}{': ' * bool(j.error)}{j.error or ''} (log {j.log})"
                for j in jobs
            ]
    lines.append(eta_line(state.eta))
    return "\n".join(lines)


def counts(runs: list[RunState], n: int) -> tuple[str, str]:
    """The trained and cells columns of some runs: done/expected (stale)."""
    trained = [r for r in runs if r.tasks]
    tasks = (sum(r.tasks.count(DONE) for r in trained), n * len(trained), sum(r.tasks.count(STALE) for r in trained))
    cells = (sum(r.cells for r in runs), (n + 1) * n * len(runs), sum(r.stale_cells for r in runs))
    return (counted(*tasks) if trained else "-", counted(*cells))


def counted(done: int, total: int, stale: int) -> str:
    return f"{done}/{total}" + (f" ({stale} stale)" if stale else "")


def run_label(run: RunState) -> str:
    return f"{run.method} seed {run.seed}"


def eta_line(eta: dict) -> str:
    jobs, unknown = eta["jobs"], eta["without_timing"]
    if not any(jobs.values()):
        return "nothing left to compute"
    parts = [f"{jobs[k]} {k}{'s' if jobs[k] != 1 else ''}" for k in (TRAINING, ROW) if jobs[k]]
    line = (
        f"serial compute remaining: {duration(eta['seconds'])} for {' and '.join(parts)} (each method's mean "
        "recorded seconds per finished job; loading, queueing and jobs side by side not counted)"
    )
    missing = [f"{unknown[k]} {k}(s)" for k in (TRAINING, ROW) if unknown[k]]
    if missing:
        line += f"; not estimated: {', '.join(missing)} (none of their kind finished yet)"
    return line


def as_json(state: GridState) -> str:
    return json.dumps(asdict(state), indent=2)
