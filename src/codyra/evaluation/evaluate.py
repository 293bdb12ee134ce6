"""Evaluate cells A[i, j]: the score on task j's test set after training tasks 1..i.

The cell protocol of every family: index checks, row 0 (the pretrained model) shared by every
method and seed of a benchmark and copied for methods that never train, the settings
fingerprint, the JSON file, MLflow. A row's cells share one theta_i; the family computes them
(:mod:`codyra.clip.evaluate`, :mod:`codyra.llm.evaluate`).
"""

from __future__ import annotations

import logging

from codyra import __version__
from codyra.evaluation.routed import routed_cells
from codyra.experiment.fingerprints import cell_fingerprint, eval_fingerprint, untrained_settings
from codyra.family import family_of
from codyra.methods import method_of
from codyra.methods.base import CellPosition
from codyra.store.cells import read_cell
from codyra.store.io import read_json, require_writable, write_json
from codyra.store.model_states import require_updates
from codyra.store.paths import PRETRAINED, SUMMARY_FILE, cell_path, row0_cell_path
from codyra.tracking.mirror import SETTINGS, JobRun, cell_metric, row_run, row_seconds, row_settings, with_store
from codyra.tracking.sync import log_row

log = logging.getLogger(__name__)


def _check_indices(cfg: dict, i: int, j: int) -> None:
    n = len(cfg["tasks"])
    if not (0 <= i <= n and 1 <= j <= n):
        raise ValueError(f"cell A[{i},{j}] is outside the grid: i must be in 0..{n}, j in 1..{n}")


def tracked(cfg: dict, method: str, seed: int | None, i: int, js: list[int], compute) -> list[dict]:
    """``compute(j)`` (which writes cell A[i, j]'s file) for every j of ``js``, mirrored by one
    MLflow run of the row whose metrics are its cells: a job of the whole row sends each as soon
    as it is computed; a job of single cells (a copy of row 0) logs the row once it is whole."""
    if len(js) < len(cfg["tasks"]):
        with_store(cfg, lambda store: store.ensure_parent(method, seed))  # the run's parent starts with its first job
        cells = [compute(j) for j in js]
        with_store(cfg, lambda store: log_row(store, cfg, method, seed, i))
        return cells
    run = JobRun(cfg, **row_run(cfg, method, seed, i))
    cells = []
    try:
        for j in js:
            cells.append(compute(j))
            run.metrics({"step": 0, **cell_metric(cells[-1])})
    except BaseException:
        run.fail()
        raise
    run.finish(row_seconds(cells), tags={SETTINGS: row_settings(cells)})
    return cells


def evaluate_row0(cfg: dict, j: int, *, device=None) -> dict:
    """A[0, j] of the pretrained model, written to the benchmark's shared row-0 file."""
    return evaluate_row(cfg, PRETRAINED, None, 0, [j], device=device)[0]


def evaluate_cell(cfg: dict, method: str, seed: int, i: int, j: int, *, device=None) -> dict:
    """A[i, j] for (method, seed), written atomically to the contract path."""
    return evaluate_row(cfg, method, seed, i, [j], device=device)[0]


def evaluate_row(cfg: dict, method: str, seed: int | None, i: int, js=None, *, device=None) -> list[dict]:
    """Cells A[i, j] for every j in ``js`` (default: every task), theta_i built once for the row.

    Method ``pretrained`` (row 0 only) writes the benchmark's shared row-0 files. Row 0 and every
    row of a method that never trains (nor rewrites prompts) equal the pretrained model's row: those cells are copied
    from the shared row-0 files (computing the missing ones first). Each cell is written
    atomically as soon as it is done; the row is one MLflow run with its cells as metrics.
    """
    js = list(range(1, len(cfg["tasks"]) + 1) if js is None else js)
    for j in js:
        _check_indices(cfg, i, j)
    if method == PRETRAINED:
        if i != 0:
            raise ValueError("the pretrained model only has row i = 0")
        require_writable(row0_cell_path(cfg, 1).parent)
        cells = _with_settings(cfg, PRETRAINED, None, 0, _computed_cells(cfg, PRETRAINED, None, 0, js, device))
        return tracked(cfg, PRETRAINED, None, 0, js, lambda j: _stored(row0_cell_path(cfg, j), next(cells)))
    if method not in cfg["method_configs"]:
        raise ValueError(f"unknown method {method!r}; configured: {', '.join(sorted(cfg['method_configs']))}")
    require_writable(cell_path(cfg, method, seed, i, 1).parent)
    if i == 0 or method_of(cfg, method).copies_row0():
        missing = [j for j in js if not row0_cell_path(cfg, j).is_file()]
        if missing:
            evaluate_row(cfg, PRETRAINED, None, 0, missing, device=device)

        def copy(j):
            row0 = row0_cell_path(cfg, j)
            return {
                **read_cell(cfg, row0, PRETRAINED, None, 0, j, classifies=family_of(cfg).classifies),
                "method": method,
                "seed": seed,
                "i": i,
                "copied_from": str(row0),
            }

        return tracked(cfg, method, seed, i, js, lambda j: _stored(cell_path(cfg, method, seed, i, j), copy(j)))
    cells = _with_settings(cfg, method, seed, i, _computed_cells(cfg, method, seed, i, js, device))
    return tracked(cfg, method, seed, i, js, lambda j: _stored(cell_path(cfg, method, seed, i, j), next(cells)))


def _stored(path, result: dict) -> dict:
    write_json(path, result)
    log.info("A[%d,%d] = %.2f (%s)", result["i"], result["j"], result["accuracy"], path)
    return result


def _with_settings(cfg, method, seed, i, cells):
    """The cells with the code version and their settings fingerprint: column j's evaluation settings and those the
    summaries of the updates 1..i record (not the config's: an update trained with other
    settings shows here). Read before any cell is computed; fails early if an update is missing."""
    if method != PRETRAINED and not method_of(cfg, method).trains:
        # theta_0 (FIX(ICL)): no update; the method's config stands for each of them
        updates = untrained_settings(cfg, method) * i
    else:
        updates = [read_json(d / SUMMARY_FILE).get("settings") for d in require_updates(cfg, method, seed, i)]
    return (
        {**cell, "codyra_version": __version__, "settings": cell_fingerprint(eval_fingerprint(cfg, cell["j"]), updates)}
        for cell in cells
    )


def _computed_cells(cfg, method, seed, i, js, device):
    """Yield A[i, j] for j in ``js`` of theta_i (theta_0 for the method ``pretrained``), by the
    model family's protocol (CLIP: classification accuracy; TRACE: generated answers scored);
    a method that predicts the domain evaluates the row by its own task-agnostic inference."""
    kind = None if method == PRETRAINED else method_of(cfg, method)
    if kind is not None and kind.predicts_domain:
        return routed_cells(cfg, kind, CellPosition(method, seed, i, tuple(js)), device)
    return family_of(cfg).cells(cfg, method, seed, i, js, device, kind)
