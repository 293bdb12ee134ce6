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
    SETTINGS,
    TIME,
    Store,
    cell_metrics,
    cell_run,
    flatten,
    provenance,
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
    flat = {
        f"{name}.{task}": values[j]
        for name, values in per_task.items()
        for j, task in enumerate(tasks)
        if values[j] is not None
    }
    rows = [{"step": 0, **summary, **flat}]
    for j in range(len(tasks)):
        rows.append(
            {"step": j + 1, **{f"{name}_task": values[j] for name, values in per_task.items() if values[j] is not None}}
        )
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


def work_span(path: Path, record: dict) -> tuple[float, float]:
    """When a result file's job did its work: it ended when the file was written, ``seconds`` earlier it began."""
    end = path.stat().st_mtime
    return end - float(record.get("seconds", 0.0)), end


def result_records(cfg: dict) -> list[dict]:
    """Every result file of ``cfg`` as the run it becomes: spec, settings, work span, metric rows, params."""
    records, n = [], len(cfg["tasks"])

    def cell(path: Path, method: str, seed: int | None, i: int, j: int) -> None:
        if path.is_file():
            found = read_cell(cfg, path, method, seed, i, j, classifies=family_of(cfg).classifies)
            records.append(
                {
                    "spec": cell_run(cfg, method, seed, i, j),
                    "settings": found.get("settings"),
                    "span": work_span(path, found),
                    "rows": [{"step": 0, **cell_metrics(found)}],
                }
            )

    for j in range(1, n + 1):
        cell(row0_cell_path(cfg, j), PRETRAINED, None, 0, j)
    for method in cfg["methods"]:
        for seed in cfg["seeds"]:
            for i in range(1, n + 1):
                summary_path = task_dir(cfg, method, seed, i) / SUMMARY_FILE
                if summary_path.is_file():
                    summary = read_json(summary_path)
                    history = task_dir(cfg, method, seed, i) / HISTORY_FILE
                    rows = [json.loads(line) for line in history.read_text().splitlines()] if history.is_file() else []
                    last = max(
                        (int(r.get("step", 0)) for r in rows), default=0
                    )  # final values at the last step, after the curves
                    records.append(
                        {
                            "spec": train_run(cfg, method, seed, i),
                            "settings": summary.get("settings"),
                            "span": work_span(summary_path, summary),
                            "rows": rows + [{"step": last, **train_final_metrics(summary)}],
                            "params": flatten(summary["job"]),
                        }
                    )
            for i in range(n + 1):
                for j in range(1, n + 1):
                    cell(cell_path(cfg, method, seed, i, j), method, seed, i, j)
    return records


def sync_mlflow(cfg: dict, tables_dir: Path | None = None, store: Store | None = None) -> dict:
    """Create the missing runs of every result file of ``cfg``; returns counts of what it did."""
    store = store or Store(cfg)
    existing = store.runs_by_key()
    counts = {"created": 0, "replaced": 0, "kept": 0}
    records = result_records(cfg)
    earliest: dict[tuple, int] = {}  # a parent rebuilt from files starts with its first job's work
    for record in records:
        parent, start = record["spec"]["parent"], int(record["span"][0] * 1000)
        earliest[parent] = min(earliest.get(parent, start), start)

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
        start, end = (int(t * 1000) for t in record["span"])
        parent = store.ensure_parent(*spec["parent"], start_time=earliest[spec["parent"]])
        tags = {
            KEY: spec["key"],
            SETTINGS: str(settings),
            "mlflow.parentRunId": parent,
            **provenance(),
            **{k: str(v) for k, v in spec["tags"].items()},
        }
        run_id = store.client.create_run(
            store.experiment_id, start_time=start, tags=tags, run_name=spec["name"]
        ).info.run_id
        if record.get("params"):
            store.log_params(run_id, record["params"])
        store.log_metrics(
            run_id, [{TIME: record["span"][1], **row} for row in record["rows"]]
        )  # a row's own _time wins
        store.complete(run_id, end_time=end)

    n = len(cfg["tasks"])
    if all(row0_cell_path(cfg, j).is_file() for j in range(1, n + 1)):
        store.end_parent(store.ensure_parent(PRETRAINED, None, start_time=earliest.get((PRETRAINED, None))))
    for method in cfg["methods"]:
        for seed in cfg["seeds"]:
            if run_dir(cfg, method, seed).is_dir():
                log_parent_results(store, cfg, method, seed)
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
