"""Fill MLflow from the result files: every run that live logging missed, exactly once.

Idempotent: a run whose key is already present, complete and tagged with the settings
fingerprint its file records is left alone; an incomplete one (its job died while logging)
or a stale one (the file was rewritten with other settings while tracking was down) is
replaced by a run rebuilt from the files. Running sync twice creates nothing the second time.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from codyra.cells import read_cell
from codyra.config import fingerprint
from codyra.io import read_json, write_json
from codyra.paths import (
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
from codyra.tracking import (
    COMPLETE,
    KEY,
    SETTINGS,
    Store,
    cell_metrics,
    cell_run,
    flatten,
    provenance,
    run_key,
    tracking_uri,
    train_final_metrics,
    train_run,
    with_store,
)

log = logging.getLogger(__name__)
SUMMARY_METRICS_TAG = "codyra.metrics_logged"


def parent_metric_rows(matrix: dict) -> list[dict]:
    """The run's summary metrics and per-task Transfer / Average / Last, twice: as `<metric>.<task>`
    (one column each in `mlflow.search_runs`, so Table 1 is a group-by) and as the curve
    `<metric>_task` over step j = task index (browsing)."""
    metrics, tasks = matrix["metrics"], matrix["tasks"]
    summary = {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
    per_task = {name: values for name, values in metrics["per_task"].items()}
    flat = {f"{name}.{task}": values[j] for name, values in per_task.items() for j, task in enumerate(tasks) if values[j] is not None}
    rows = [{"step": 0, **summary, **flat}]
    for j in range(len(tasks)):
        rows.append({"step": j + 1, **{f"{name}_task": values[j] for name, values in per_task.items() if values[j] is not None}})
    return rows


def log_parent_results(store: Store, cfg: dict, method: str, seed: int) -> None:
    """Metrics (summary and per task), matrix and heatmap on a (method, seed) parent run; ends the run."""
    parent = store.ensure_parent(method, seed)
    directory = run_dir(cfg, method, seed)
    matrix_path = directory / MATRIX_FILE
    if not matrix_path.is_file():
        return
    matrix = read_json(matrix_path)
    logged = fingerprint(matrix["A"])
    if store.client.get_run(parent).data.tags.get(SUMMARY_METRICS_TAG) != logged:  # log each matrix once
        store.log_metrics(parent, parent_metric_rows(matrix))
        store.client.set_tag(parent, SUMMARY_METRICS_TAG, logged)
    for path in (matrix_path, directory / HEATMAP_FILE):
        if path.is_file():
            store.client.log_artifact(parent, str(path))
    store.end_parent(parent)


def log_tables(store: Store, tables_dir: Path) -> None:
    """The benchmark's tables, once, on its `tables` run."""
    run = store.benchmark_run()
    store.client.log_artifacts(run, str(tables_dir), artifact_path="tables")
    store.client.set_terminated(run, "FINISHED")


def sync_mlflow(cfg: dict, tables_dir: Path | None = None, store: Store | None = None) -> dict:
    """Create the missing runs of every result file of ``cfg``; returns counts of what it did."""
    store = store or Store(cfg)
    existing = store.runs_by_key()
    counts = {"created": 0, "replaced": 0, "kept": 0}

    def needed(key: str, settings) -> bool:
        run = existing.get(key)
        if run is not None and run.data.tags.get(COMPLETE) == "true" and run.data.tags.get(SETTINGS) == str(settings):
            counts["kept"] += 1
            return False
        if run is not None:  # a job died mid-logging, or its file was rewritten since: rebuild the run from the files
            store.client.delete_run(run.info.run_id)
            counts["replaced"] += 1
        counts["created"] += 1
        return True

    def child(spec: dict, settings, metrics_rows: list[dict], params: dict | None = None) -> None:
        parent = store.ensure_parent(*spec["parent"])
        tags = {KEY: spec["key"], SETTINGS: str(settings), "mlflow.parentRunId": parent, **provenance(), **{k: str(v) for k, v in spec["tags"].items()}}
        run_id = store.client.create_run(store.experiment_id, tags=tags, run_name=spec["name"]).info.run_id
        if params:
            store.log_params(run_id, params)
        store.log_metrics(run_id, metrics_rows)
        store.complete(run_id)

    n = len(cfg["tasks"])
    for j in range(1, n + 1):
        path = row0_cell_path(cfg, j)
        spec = cell_run(cfg, PRETRAINED, None, 0, j)
        cell = read_cell(cfg, path, PRETRAINED, None, 0, j) if path.is_file() else None
        if cell is not None and needed(spec["key"], cell.get("settings")):
            child(spec, cell.get("settings"), [{"step": 0, **cell_metrics(cell)}])
    if all(row0_cell_path(cfg, j).is_file() for j in range(1, n + 1)):
        store.end_parent(store.ensure_parent(PRETRAINED, None))
    for method in cfg["methods"]:
        for seed in cfg["seeds"]:
            for i in range(1, n + 1):
                summary_path = task_dir(cfg, method, seed, i) / SUMMARY_FILE
                spec = train_run(cfg, method, seed, i)
                summary = read_json(summary_path) if summary_path.is_file() else None
                if summary is not None and needed(spec["key"], summary.get("settings")):
                    history = task_dir(cfg, method, seed, i) / HISTORY_FILE
                    rows = [json.loads(line) for line in history.read_text().splitlines()] if history.is_file() else []
                    last = max((int(r.get("step", 0)) for r in rows), default=0)  # final values at the last step, after the curves
                    child(spec, summary.get("settings"), rows + [{"step": last, **train_final_metrics(summary)}], params=flatten(summary["job"]))
            for i in range(n + 1):
                for j in range(1, n + 1):
                    path = cell_path(cfg, method, seed, i, j)
                    spec = cell_run(cfg, method, seed, i, j)
                    cell = read_cell(cfg, path, method, seed, i, j) if path.is_file() else None
                    if cell is not None and needed(spec["key"], cell.get("settings")):
                        child(spec, cell.get("settings"), [{"step": 0, **cell_metrics(cell)}])
            if run_dir(cfg, method, seed).is_dir():
                log_parent_results(store, cfg, method, seed)
    if tables_dir is not None and tables_dir.is_dir():
        log_tables(store, tables_dir)
    log.info("MLflow sync of %s (%s): %s", cfg["benchmark"], store.uri, counts)
    return counts


def init_store(cfg: dict, marker: str | Path) -> None:
    """Create the store, the experiment and every parent run once (before parallel jobs
    start: concurrent first opens of a fresh SQLite store race on its schema migrations).
    Best-effort like all tracking: ``marker`` records whether the store answered."""
    parents = [(PRETRAINED, None)] + [(m, s) for m in cfg["methods"] for s in cfg["seeds"]]

    def create(store: Store) -> None:
        for method, seed in parents:
            store.ensure_parent(method, seed)

    available = with_store(cfg, create)
    write_json(marker, {"uri": tracking_uri(cfg), "available": available, "parents": [run_key(cfg, m, s) for m, s in parents]})
