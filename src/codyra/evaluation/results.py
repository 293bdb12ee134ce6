"""A run's results: its cells (validated on read), its A matrix and metrics."""

from __future__ import annotations

from codyra.evaluation.figures import save_heatmap
from codyra.evaluation.metrics import summarize
from codyra.family import family_of
from codyra.store.cells import read_cells
from codyra.store.io import ResultError, write_json
from codyra.store.paths import (
    HEATMAP_FILE,
    MATRIX_FILE,
    SUMMARY_FILE,
    run_dir,
    task_dir,
)


def summarize_run(cfg: dict, method: str, seed: int) -> dict:
    """Write ``matrix.json`` (A, its metrics and each cell's settings fingerprint) for one (method, seed)."""
    cells = read_cells(cfg, method, seed, classifies=family_of(cfg).classifies)
    check_task_folders(cfg, method, seed)
    A = [[cell["accuracy"] for cell in row] for row in cells]
    result = {
        "benchmark": cfg["benchmark"],
        "method": method,
        "seed": seed,
        "tasks": list(cfg["tasks"]),
        "A": A,
        "settings": [[cell.get("settings") for cell in row] for row in cells],
        "metrics": summarize(A),
    }
    if any(
        "routing" in cell for row in cells for cell in row
    ):  # task-agnostic inference: the router's accuracy per cell
        result["routing"] = [
            [cell["routing"]["accuracy"] if "routing" in cell else None for cell in row] for row in cells
        ]
    directory = run_dir(cfg, method, seed)
    title = f"A[i,j] {result['benchmark']} / {method} / seed {seed}"
    save_heatmap(A, result["tasks"], title, directory / HEATMAP_FILE)
    write_json(directory / MATRIX_FILE, result)
    mirror_parent(cfg, method, seed)
    return result


def check_task_folders(cfg: dict, method: str, seed: int) -> None:
    """Every task folder of the run present beside its cells belongs where it sits
    (:func:`codyra.store.updates.task_summary`): a matrix is never built beside a misplaced update."""
    from codyra.store.updates import task_summary

    for i in range(1, len(cfg["tasks"]) + 1):
        if (task_dir(cfg, method, seed, i) / SUMMARY_FILE).is_file():
            task_summary(cfg, method, seed, i)


def check_settings(cfg: dict, matrices: dict[tuple[str, int], dict], classes: dict) -> None:
    """Refuse to combine runs whose cells were computed with settings other than ``cfg``'s
    (e.g. a task retrained out-of-band with ``codyra train --set``): name them and the fix.
    ``classes``: method -> its class (:func:`codyra.methods.method_classes`)."""
    from codyra.experiment.fingerprints import expected_cell_fingerprints

    n, stale = len(cfg["tasks"]), []
    expected = {m: expected_cell_fingerprints(cfg, m, classes[m]) for m in dict.fromkeys(m for m, _ in matrices)}
    for (method, seed), matrix in matrices.items():
        recorded = matrix.get("settings") or [[None] * n] * (n + 1)
        cells = [
            (i, j) for i in range(n + 1) for j in range(1, n + 1) if recorded[i][j - 1] != expected[method][i][j - 1]
        ]
        if cells:
            shown = ", ".join(f"A_{i}_{j}" for i, j in cells[:6]) + (
                f" and {len(cells) - 6} more" if len(cells) > 6 else ""
            )
            first = min(i for i, _ in cells)
            stale.append(f"{run_dir(cfg, method, seed)} (cells {shown}; first stale row i={first})")
    if stale:
        raise ResultError(
            "results computed with other settings than this config (a task trained or a cell computed out-of-band, "
            f"or a config edited since): {'; '.join(stale)}. The tables mix no settings: "
            "rerun those jobs from this config "
            "(e.g. snakemake -f <run>/task<i>/update.safetensors for the first stale row i > 0, "
            "or delete the run folder) and run the tables again"
        )


def mirror_parent(cfg: dict, method: str, seed: int) -> None:
    """Best-effort: the run's metrics, matrix and heatmap onto its MLflow parent run."""
    from codyra.tracking.mirror import with_store
    from codyra.tracking.sync import log_parent_results

    with_store(cfg, lambda store: log_parent_results(store, cfg, method, seed))
