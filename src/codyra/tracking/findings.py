"""What a finished run of the workflow found, said at its end (``onsuccess`` in workflow/Snakefile):
the headline table, where the tables and figures are, and the MLflow link with the command that
serves it."""

from __future__ import annotations

import datetime
from pathlib import Path

from codyra.store.paths import figures_dir, tables_dir
from codyra.tracking.mirror import artifact_root, experiment_name, is_remote, store_answers, tracking_uri
from codyra.tracking.views import BAND, CURVES, SUMMARY, view_link

# One row per method: Forgetting, BWT, OP and the means over tasks (codyra.evaluation.tables); table1
# holds them per task.
HEADLINE_TABLE = "forgetting"
UI_PORT = 5000  # mlflow ui's default port


def findings(cfg: dict) -> str:
    """The headline table of ``cfg``'s benchmark as its Markdown file holds it, where the tables and
    figures are, and, with tracking on, the links to the MLflow views."""
    tables, figures = tables_dir(cfg), figures_dir(cfg)
    table = tables / f"{HEADLINE_TABLE}.md"
    if table.is_file():
        written = datetime.datetime.fromtimestamp(table.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
        where = f"Tables: {tables}/ (table1: Transfer / Average / Last per task; Markdown, CSV, LaTeX, HTML)"
        lines = [
            f"== What the grid of {cfg['benchmark']} found ({table}, written {written}) ==",
            table.read_text().strip(),
            "",
            f"{where}; figures (heatmaps, the methods compared): {figures}/",
        ]
    else:
        lines = [f"No tables of {cfg['benchmark']} yet: `snakemake all_tables` writes them to {tables}/"]
    return "\n".join(lines + mlflow_lines(cfg))


def mlflow_lines(cfg: dict) -> list[str]:
    """The links to the experiment's views in the MLflow UI (nothing with tracking off)."""
    if not cfg["tracking"]["enabled"]:
        return []
    uri = tracking_uri(cfg)
    experiment = experiment_id(cfg)
    if experiment is None:
        fill = "`codyra sync-mlflow --config <config>` fills it from the result files"
        return [f"MLflow: {uri} holds no experiment {experiment_name(cfg)} or does not answer; {fill}"]
    base = ui_base(cfg)
    serve = serve_command(cfg)
    return [
        f"MLflow{' (serve it, then open the links)' if serve else ''}:",
        *([f"  {serve}"] if serve else []),
        f"  methods, mean ± std over seeds: {view_link(experiment, SUMMARY, base=base)}",
        f"  per-task accuracy curves:       {view_link(experiment, CURVES, charts=True, base=base)}",
        f"  the same, band over seeds:      {view_link(experiment, BAND, charts=True, base=base)}",
    ]


def experiment_id(cfg: dict) -> str | None:
    """The id of the benchmark's experiment in the config's store; None where there is none (a local
    store is never created here) or the store does not answer."""
    uri = tracking_uri(cfg)
    if not (store_answers(uri) if is_remote(uri) else Path(uri.removeprefix("sqlite:///")).is_file()):
        return None
    from mlflow import MlflowClient

    found = MlflowClient(uri).get_experiment_by_name(experiment_name(cfg))
    return None if found is None else found.experiment_id


def ui_base(cfg: dict) -> str:
    """Where the UI of the config's store is: its tracking server, or ``mlflow ui`` on this machine."""
    uri = tracking_uri(cfg)
    return uri.rstrip("/") if is_remote(uri) else f"http://127.0.0.1:{UI_PORT}"


def serve_command(cfg: dict) -> str | None:
    """The command that serves the UI of a local store, on 127.0.0.1 only (None: a tracking server serves it)."""
    uri = tracking_uri(cfg)
    if is_remote(uri):
        return None
    return (
        f"mlflow ui --backend-store-uri {uri} --artifacts-destination {artifact_root(cfg)} "
        f"--host 127.0.0.1 --port {UI_PORT}"
    )
