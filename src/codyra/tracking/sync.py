"""Fill MLflow from the result files: every run that live logging missed, exactly once.

Idempotent: a run whose key is already present, complete and tagged with the settings
fingerprint its file records is left alone; an incomplete one (its job died while logging)
or a stale one (the file was rewritten with other settings while tracking was down) is
replaced by a run rebuilt from the files. Running sync twice creates nothing the second time.

Each method also gets a summary run (kind ``summary``, ``codyra (3 seeds)``) once every seed of the
config has its matrix: the mean and std over seeds of the tables' metrics, so the runs table compares
methods without grouping (MLflow's group rows average without a spread and print every digit).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from codyra.family import family_of
from codyra.store.cells import read_cell
from codyra.store.io import fingerprint, read_json, write_json
from codyra.store.paths import (
    HEATMAP_FILE,
    HISTORY_FILE,
    MATRIX_FILE,
    PRETRAINED,
    SUMMARY_FILE,
    cell_path,
    row0_cell_path,
    run_dir,
    task_dir,
)
from codyra.tracking.mirror import (
    COMPLETE,
    KEY,
    RUN_COLOR,
    SETTINGS,
    TIME,
    Store,
    cell_seconds,
    flatten,
    method_color,
    parent_params,
    provenance,
    rounded,
    row_metrics,
    row_run,
    row_settings,
    task_labels,
    tracking_uri,
    train_final_metrics,
    train_run,
    with_store,
)

log = logging.getLogger(__name__)
SUMMARY_METRICS_TAG = "codyra.metrics_logged"


SUMMARY_NAMES = {
    "transfer": "Transfer",
    "average": "Average",
    "last": "Last",
    "forgetting": "Forgetting",
    "bwt": "BWT",
    "op": "OP",
}  # Table 1's names (runs table columns) for summarize's keys
# on the experiment: its tasks and methods in the grid's order, Table 1's columns and rows
TASKS_TAG, METHODS_TAG = "codyra.tasks", "codyra.methods"
MATRIX_TABLE, MATRIX_IMAGE = "A.json", "A_heatmap"


def metric_rows(matrices: list[dict], spread: bool = False) -> list[dict]:
    """The metrics of runs with these matrices (one: a (method, seed) run; a method's seeds: its summary
    run), each the mean over the matrices, rounded: at step 0 (one value: a bar per run in the UI) the
    summary as the tables name it (Transfer, Average, Last, Forgetting, BWT, OP; with ``spread`` also
    ``<name> std``, the sample std over the matrices as the tables print it) and per task j as
    ``<name>/<j>_<task>`` (one column each in ``mlflow.search_runs``; one chart section each in the UI);
    and ``Accuracy/<j>_<task>`` at step i = 0..N, the accuracy on the task after training task i (a
    curve over the run's progress: row i of A). A metric undefined in any matrix is left out."""
    labels = task_labels(matrices[0]["tasks"])
    final = {}
    for key, name in SUMMARY_NAMES.items():
        values = [m["metrics"][key] for m in matrices]
        if None not in values:
            final[name] = rounded(np.mean(values))
            if spread:
                final[f"{name} std"] = rounded(np.std(values, ddof=1) if len(values) > 1 else 0.0)
    for key, name in SUMMARY_NAMES.items():
        if key in matrices[0]["metrics"]["per_task"]:
            for j, label in enumerate(labels):
                values = [m["metrics"]["per_task"][key][j] for m in matrices]
                if None not in values:
                    final[f"{name}/{label}"] = rounded(np.mean(values))
    A = np.mean([m["A"] for m in matrices], axis=0)
    rows = [
        {"step": i, **{f"Accuracy/{label}": rounded(v) for label, v in zip(labels, row, strict=True)}}
        for i, row in enumerate(A)
    ]
    rows[0].update(final)
    return rows


def matrix_table(matrix: dict):
    """A as a table: one row per model (pretrained, after task 1, ...), one column per task."""
    import pandas as pd

    tasks = matrix["tasks"]
    after = ["pretrained", *(f"after {i}: {task}" for i, task in enumerate(tasks, start=1))]
    table = pd.DataFrame([[rounded(v) for v in row] for row in matrix["A"]], columns=tasks)
    table.insert(0, "model", after)
    return table


def log_matrix(store: Store, run_id: str, matrix: dict, heatmap: Path) -> None:
    """A on the run as a table and, if drawn, its heatmap as an image (the UI's artifact and image views);
    MLflow appends to a logged table, so an earlier matrix's table and images are removed first."""
    from codyra.tracking.artifacts import artifact_repository

    present = {f.path for f in store.client.list_artifacts(run_id)}
    for stale in {MATRIX_TABLE, "images"} & present:
        artifact_repository(store.client, run_id).delete_artifacts(stale)
    store.client.log_table(run_id, data=matrix_table(matrix), artifact_file=MATRIX_TABLE)
    if heatmap.is_file():
        from PIL import Image

        with Image.open(heatmap) as image:
            store.client.log_image(run_id, image.convert("RGB"), key=MATRIX_IMAGE, step=len(matrix["tasks"]))


def log_parent_results(store: Store, cfg: dict, method: str, seed: int) -> None:
    """A finished (method, seed) run in MLflow: first the runs of its trainings and rows that live
    logging missed (its jobs ran on cluster nodes, or the store was down), then its metrics
    (summary and per task), matrix and heatmap on its parent run, which it ends."""
    records = run_records(cfg, method, seed)
    existing = {}
    for kind in ("train", "row"):
        existing.update(store.runs_by_key(f"{kind}/{cfg['benchmark']}/{method}/seed{seed}/"))
    fill_runs(store, records, existing, parent_starts(records))
    log_parent_metrics(store, cfg, method, seed)
    log_summary(store, cfg, method)


def log_parent_metrics(store: Store, cfg: dict, method: str, seed: int) -> None:
    """Metrics (summary and per task), matrix and heatmap on a (method, seed) parent run; ends the run."""
    parent = store.ensure_parent(method, seed)
    directory = run_dir(cfg, method, seed)
    matrix_path = directory / MATRIX_FILE
    if not matrix_path.is_file():
        return
    matrix = read_json(matrix_path)
    logged = fingerprint(matrix["A"])
    if store.client.get_run(parent).data.tags.get(SUMMARY_METRICS_TAG) != logged:  # log each matrix once
        store.log_metrics(parent, metric_rows([matrix]))
        log_matrix(store, parent, matrix, directory / HEATMAP_FILE)
        store.client.set_experiment_tag(store.experiment_id, TASKS_TAG, json.dumps(matrix["tasks"]))
        store.client.set_experiment_tag(store.experiment_id, METHODS_TAG, json.dumps(cfg["methods"]))
        store.client.set_tag(parent, SUMMARY_METRICS_TAG, logged)
    for path in (matrix_path, directory / HEATMAP_FILE):
        if path.is_file():
            store.client.log_artifact(parent, str(path))
    store.end_parent(parent)


def summary_name(method: str, seeds: list[int]) -> str:
    return f"{method} ({len(seeds)} seed{'s' if len(seeds) != 1 else ''})"


def log_summary(store: Store, cfg: dict, method: str) -> None:
    """The method's summary run, once every seed of the config has its matrix (``metric_rows`` over
    the seeds; a run per method, in its colour, with its hyperparameters); rebuilt when a matrix
    changes. None while the seeds' cells were computed with different settings (the tables refuse
    to combine them too, naming the stale cells)."""
    paths = [run_dir(cfg, method, seed) / MATRIX_FILE for seed in cfg["seeds"]]
    if not all(path.is_file() for path in paths):
        return
    matrices = [read_json(path) for path in paths]
    seeds = ",".join(map(str, cfg["seeds"]))
    key = f"summary/{cfg['benchmark']}/{method}/seeds{seeds}"  # configs over other seeds: summaries of their own
    logged = fingerprint([[m["A"], m.get("settings")] for m in matrices])
    run = store.find(key)
    if run is not None and run.data.tags.get(SUMMARY_METRICS_TAG) == logged:
        return
    if run is not None:
        store.client.delete_run(run.info.run_id)
    if len({json.dumps(m.get("settings")) for m in matrices}) > 1:
        log.warning(
            "MLflow: no summary run of %s: its seeds' cells were computed with different settings "
            "(`codyra tables` names the stale cells)",
            method,
        )
        return
    tags = {
        KEY: key,
        "kind": "summary",
        "benchmark": cfg["benchmark"],
        "method": method,
        "seeds": seeds,
        RUN_COLOR: method_color(cfg, method),
        SUMMARY_METRICS_TAG: logged,
        **provenance(),
    }
    run_id = store.client.create_run(
        store.experiment_id, tags=tags, run_name=summary_name(method, cfg["seeds"])
    ).info.run_id
    store.log_params(run_id, parent_params(cfg, method))
    store.log_metrics(run_id, metric_rows(matrices, spread=True))
    store.complete(run_id)
    store.find(key)  # two processes that summarized at once: one run survives


def log_tables(store: Store, tables_dir: Path) -> None:
    """The benchmark's tables, once, on its `tables` run."""
    run = store.benchmark_run()
    store.client.log_artifacts(run, str(tables_dir), artifact_path="tables")
    store.client.set_terminated(run, "FINISHED")


def work_span(path: Path, record: dict) -> tuple[float, float]:
    """When a result file's job did its work: it ended when the file was written, ``seconds``
    earlier it began (a copied cell: when it was copied)."""
    end = path.stat().st_mtime
    return end - cell_seconds(record), end


def row_record(cfg: dict, method: str, seed: int | None, i: int) -> dict | None:
    """Row i's cell files as the run they become (None: no cell of the row yet)."""
    n = len(cfg["tasks"])
    paths = [
        row0_cell_path(cfg, j) if method == PRETRAINED else cell_path(cfg, method, seed, i, j) for j in range(1, n + 1)
    ]
    found = [
        (path, read_cell(cfg, path, method, seed, i, j, classifies=family_of(cfg).classifies))
        for j, path in enumerate(paths, start=1)
        if path.is_file()
    ]
    if not found:
        return None
    spans = [work_span(path, cell) for path, cell in found]
    cells = [cell for _, cell in found]
    return {
        "spec": row_run(cfg, method, seed, i),
        "settings": row_settings(cells),
        "span": (min(start for start, _ in spans), max(end for _, end in spans)),
        "rows": [{"step": 0, **row_metrics(cfg, cells)}],
        "whole": len(found) == n,
    }


def run_records(cfg: dict, method: str, seed: int) -> list[dict]:
    """The result files of a (method, seed) run as the runs they become: spec, settings, work span,
    metric rows, params."""
    n = len(cfg["tasks"])
    records = []
    for i in range(1, n + 1):
        summary_path = task_dir(cfg, method, seed, i) / SUMMARY_FILE
        if summary_path.is_file():
            summary = read_json(summary_path)
            history = task_dir(cfg, method, seed, i) / HISTORY_FILE
            rows = [json.loads(line) for line in history.read_text().splitlines()] if history.is_file() else []
            last = max((int(r.get("step", 0)) for r in rows), default=0)  # final values at the last step
            records.append(
                {
                    "spec": train_run(cfg, method, seed, i),
                    "settings": summary.get("settings"),
                    "span": work_span(summary_path, summary),
                    "rows": rows + [{"step": last, **train_final_metrics(summary)}],
                    "params": flatten(summary["job"]),
                }
            )
    records += [row_record(cfg, method, seed, i) for i in range(n + 1)]
    return [record for record in records if record is not None]


def result_records(cfg: dict) -> list[dict]:
    """Every result file of ``cfg`` as the run it becomes (``run_records``, and the pretrained row's)."""
    pretrained = row_record(cfg, PRETRAINED, None, 0)
    runs = [record for method in cfg["methods"] for seed in cfg["seeds"] for record in run_records(cfg, method, seed)]
    return ([pretrained] if pretrained else []) + runs


def create_run(store: Store, record: dict, parent_start: int | None = None) -> None:
    """The run of a result ``record``, dated when its job did the work (its parent, if new, at ``parent_start``)."""
    spec = record["spec"]
    start, end = (int(t * 1000) for t in record["span"])
    parent = store.ensure_parent(*spec["parent"], start_time=start if parent_start is None else parent_start)
    tags = {
        KEY: spec["key"],
        SETTINGS: str(record["settings"]),
        "mlflow.parentRunId": parent,
        **provenance(),
        **{k: str(v) for k, v in spec["tags"].items()},
    }
    run_id = store.client.create_run(
        store.experiment_id, start_time=start, tags=tags, run_name=spec["name"]
    ).info.run_id
    if record.get("params"):
        store.log_params(run_id, record["params"])
    store.log_metrics(run_id, [{TIME: record["span"][1], **row} for row in record["rows"]])  # a row's own _time wins
    store.complete(run_id, end_time=end)


def log_row(store: Store, cfg: dict, method: str, seed: int | None, i: int) -> None:
    """Row i's run, once its last cell is written by a job of single cells (a copy of row 0):
    one run of the whole row, replacing any earlier one; nothing while cells are missing."""
    record = row_record(cfg, method, seed, i)
    if record is None or not record["whole"]:
        return
    while (old := store.find(record["spec"]["key"])) is not None:
        store.client.delete_run(old.info.run_id)
    create_run(store, record)
    store.find(record["spec"]["key"])  # two cell jobs that completed the row at once: one run survives


def parent_starts(records: list[dict]) -> dict[tuple, int]:
    """When each parent of ``records`` starts, in ms, if rebuilt from files: with its first job's work."""
    earliest: dict[tuple, int] = {}
    for record in records:
        parent, start = record["spec"]["parent"], int(record["span"][0] * 1000)
        earliest[parent] = min(earliest.get(parent, start), start)
    return earliest


def fill_runs(store: Store, records: list[dict], existing: dict, earliest: dict[tuple, int]) -> dict:
    """Create the run of each record that ``existing`` (runs by key) lacks, or holds incomplete or with
    other settings; returns counts of what it did."""
    counts = {"created": 0, "replaced": 0, "kept": 0}
    for record in records:
        spec, settings = record["spec"], record["settings"]
        run = existing.get(spec["key"])
        if run is not None and run.data.tags.get(COMPLETE) == "true" and run.data.tags.get(SETTINGS) == str(settings):
            counts["kept"] += 1
            continue
        if run is not None:  # a job died mid-logging, or its file was rewritten since: rebuild the run from the files
            store.client.delete_run(run.info.run_id)
            counts["replaced"] += 1
        counts["created"] += 1
        create_run(store, record, earliest[spec["parent"]])
    return counts


def sync_mlflow(cfg: dict, tables_dir: Path | None = None, store: Store | None = None) -> dict:
    """Create the missing runs of every result file of ``cfg``; returns counts of what it did."""
    store = store or Store(cfg)
    records = result_records(cfg)
    earliest = parent_starts(records)
    counts = fill_runs(store, records, store.runs_by_key(), earliest)

    n = len(cfg["tasks"])
    if all(row0_cell_path(cfg, j).is_file() for j in range(1, n + 1)):
        store.end_parent(store.ensure_parent(PRETRAINED, None, start_time=earliest.get((PRETRAINED, None))))
    for method in cfg["methods"]:
        for seed in cfg["seeds"]:
            if run_dir(cfg, method, seed).is_dir():
                log_parent_metrics(store, cfg, method, seed)
        log_summary(store, cfg, method)
    store.describe(store.experiment_id)  # as this code writes them: a store made by earlier code gets them too
    if tables_dir is not None and tables_dir.is_dir():
        log_tables(store, tables_dir)
    log.info("MLflow sync of %s (%s): %s", cfg["benchmark"], store.uri, counts)
    return counts


def init_store(cfg: dict, marker: str | Path) -> None:
    """Create the store and the experiment once, before parallel jobs start: concurrent first
    opens of a fresh SQLite store race on its schema migrations. Parent runs are not made here:
    each is created by the first job of its (method, seed), so its start time is its work's.
    Best-effort like all tracking: ``marker`` records whether the store answered."""
    available = with_store(cfg, lambda store: None)
    write_json(marker, {"uri": tracking_uri(cfg), "available": available})
