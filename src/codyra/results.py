"""A run's results: its A matrix and metrics, and the whole stream in one process."""

from __future__ import annotations

import logging
from pathlib import Path

from codyra.io import read_json, write_json
from codyra.metrics import summarize
from codyra.paths import (
    HEATMAP_FILE,
    MATRIX_FILE,
    SUMMARY_FILE,
    cell_path,
    row0_cell_path,
    run_dir,
    task_dir,
)

log = logging.getLogger(__name__)


def read_matrix(cfg: dict, method: str, seed: int) -> list[list[float]]:
    n = len(cfg["tasks"])
    missing = [str(cell_path(cfg, method, seed, i, j)) for i in range(n + 1) for j in range(1, n + 1)
               if not cell_path(cfg, method, seed, i, j).is_file()]
    if missing:
        raise FileNotFoundError(f"{len(missing)} cell file(s) missing, e.g. {missing[0]}; evaluate them first")
    return [[read_json(cell_path(cfg, method, seed, i, j))["accuracy"] for j in range(1, n + 1)] for i in range(n + 1)]


def summarize_run(cfg: dict, method: str, seed: int) -> dict:
    """Write ``matrix.json`` (A and its metrics) for one (method, seed) and return it."""
    A = read_matrix(cfg, method, seed)
    result = {
        "benchmark": cfg["benchmark"],
        "method": method,
        "seed": seed,
        "tasks": [t["name"] for t in cfg["tasks"]],
        "A": A,
        "metrics": summarize(A),
    }
    directory = run_dir(cfg, method, seed)
    save_heatmap(result, directory / HEATMAP_FILE)
    write_json(directory / MATRIX_FILE, result)
    mirror_parent(cfg, method, seed)
    return result


def save_heatmap(result: dict, path: Path) -> None:
    """The A matrix as a PNG (rows: after task i, columns: evaluated task j)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # no pyplot: its global state is not thread-safe

    A, tasks = result["A"], result["tasks"]
    fig = Figure(figsize=(1.2 + 0.9 * len(tasks), 1.0 + 0.7 * len(A)))
    ax = fig.add_subplot()
    image = ax.imshow(A, vmin=0, vmax=100, cmap="viridis")
    for i, row in enumerate(A):
        for j, value in enumerate(row):
            ax.text(j, i, f"{value:.1f}", ha="center", va="center", fontsize=8, color="white" if value < 60 else "black")
    ax.set_xticks(range(len(tasks)), tasks, rotation=45, ha="right")
    ax.set_yticks(range(len(A)), ["pretrained"] + [f"after {k}: {t}" for k, t in enumerate(tasks, 1)])
    ax.set_title(f"A[i,j] {result['benchmark']} / {result['method']} / seed {result['seed']}")
    fig.colorbar(image, ax=ax, label="accuracy (%)")
    fig.tight_layout()
    from codyra.io import atomic_write

    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))


def mirror_parent(cfg: dict, method: str, seed: int) -> None:
    """Best-effort: the run's metrics, matrix and heatmap onto its MLflow parent run."""
    from codyra.mlflow_sync import log_parent_results
    from codyra.tracking import with_store

    with_store(cfg, lambda store: log_parent_results(store, cfg, method, seed))


def run_stream(cfg: dict, method: str, seed: int, *, device=None) -> dict:
    """Pretrain (mini, if needed), train every task and evaluate every cell, skipping finished work."""
    from codyra.benchmarks import own_pretraining, pretrain_own
    from codyra.evaluate import PRETRAINED, evaluate_row
    from codyra.train import train_task

    n = len(cfg["tasks"])
    weights = own_pretraining(cfg)
    if weights is not None and not Path(weights).is_file():
        pretrain_own(cfg)
    tasks = range(1, n + 1)
    if missing := [j for j in tasks if not row0_cell_path(cfg, j).is_file()]:
        evaluate_row(cfg, PRETRAINED, None, 0, missing, device=device)
    for i in tasks:
        if not (task_dir(cfg, method, seed, i) / SUMMARY_FILE).is_file():
            train_task(cfg, method, seed, i, device=device)
    for i in range(n + 1):
        if missing := [j for j in tasks if not cell_path(cfg, method, seed, i, j).is_file()]:
            evaluate_row(cfg, method, seed, i, missing, device=device)
    result = summarize_run(cfg, method, seed)
    m = result["metrics"]
    log.info("%s seed %d: transfer %s average %.2f last %.2f forgetting %s", method, seed,
             m["transfer"], m["average"], m["last"], m["forgetting"])
    return result
