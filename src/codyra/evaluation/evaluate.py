"""Evaluate cells A[i, j]: the score on task j's test set after training tasks 1..i.

The cell protocol of every family: index checks, row 0 (the pretrained model) shared by every
method and seed of a benchmark and copied for methods that never train, the settings
fingerprint, the JSON file, MLflow. A row's cells share one theta_i; the family computes them
(:mod:`codyra.clip.evaluate`, :mod:`codyra.llm.evaluate`).

A row survives a failed attempt: Snakemake deletes a failed job's outputs, so each computed cell
(with the files the family writes beside it, TRACE's predictions) is also kept, as it finishes,
in the row's partial folder (``PARTIAL_ROW``), keyed by the settings of every cell of the row, the
digests of the updates it is computed from and the codyra version. A rerun with the same key
takes those cells and computes only the rest; another key (a changed setting, a retrained
update) deletes the folder and computes everything. The kept cells go once the row is whole.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import replace
from pathlib import Path

from codyra import __version__
from codyra.evaluation.routed import routed_cells
from codyra.experiment.fingerprints import cell_fingerprint, eval_fingerprint, untrained_settings
from codyra.family import family_of
from codyra.methods import method_of
from codyra.methods.base import Row
from codyra.store.cells import read_cell
from codyra.store.io import ResultError, atomic_write, fingerprint, read_json, require_writable, write_json
from codyra.store.model_states import require_updates
from codyra.store.paths import PARTIAL_ROW, PRETRAINED, SUMMARY_FILE, cell_path, row0_cell_path
from codyra.tracking.mirror import SETTINGS, JobRun, cell_metric, row_run, row_seconds, row_settings, with_store
from codyra.tracking.sync import log_row

log = logging.getLogger(__name__)


def row_of(cfg: dict, method: str, seed: int | None, i: int, js) -> Row:
    """Row i of (``method``, ``seed``) on the tasks ``js``, its method resolved here, once for the
    job: the pretrained model's row (``method`` ``pretrained``) has none."""
    if method == PRETRAINED:
        return Row(method, seed, i, tuple(js))
    return Row(method, seed, i, tuple(js), method_of(cfg, method), cfg["method_configs"][method])


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
            run.metrics({"step": 0, **cell_metric(cfg, cells[-1])})
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
        return _computed_row(cfg, row_of(cfg, PRETRAINED, None, 0, js), device)
    row = row_of(cfg, method, seed, i, js)  # the job's one resolution of its method
    require_writable(cell_path(cfg, method, seed, i, 1).parent)
    if i == 0 or row.kind.copies_row0():
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
    return _computed_row(cfg, row, device)


def _stored(path, result: dict) -> dict:
    write_json(path, result)
    log.info("A[%d,%d] = %.2f (%s)", result["i"], result["j"], result["accuracy"], path)
    return result


def _computed_row(cfg: dict, row: Row, device) -> list[dict]:
    """The cells of ``row`` computed from theta_i (each written as it is done), those a failed
    attempt with the same key left in the partial folder taken from there instead."""
    method, seed, i, js = row.method, row.seed, row.i, list(row.js)

    def path(j: int) -> Path:
        return row0_cell_path(cfg, j) if row.kind is None else cell_path(cfg, method, seed, i, j)

    updates, digests = _updates(cfg, row)
    settings = {j: cell_fingerprint(eval_fingerprint(cfg, j), updates) for j in range(1, len(cfg["tasks"]) + 1)}
    partial = _partial_folder(path(1).parent.parent, i, fingerprint([settings, digests, __version__]))
    kept = {j: cell for j in js if (cell := _kept_cell(cfg, partial, path(j), method, seed, i, j, settings[j]))}
    todo = [j for j in js if j not in kept]
    computed = _computed_cells(cfg, replace(row, js=tuple(todo)), device) if todo else iter(())

    def cell(j: int) -> dict:
        if j in kept:
            _copy_files(partial, path(j), path(j).parent)
            log.info("A[%d,%d] taken from %s (an earlier attempt of this row computed it)", i, j, partial)
            return kept[j]
        result = {**next(computed), "codyra_version": __version__, "settings": settings[j]}
        _copy_files(path(j).parent, path(j), partial)  # the family's files beside the cell (TRACE: predictions)
        write_json(partial / path(j).name, result)  # last: the cell's presence means its files are all there
        return result

    cells = tracked(cfg, method, seed, i, js, lambda j: _stored(path(j), cell(j)))
    for j in js:  # the row's files are in place: its kept copies go
        for kept_file in _cell_files(partial, path(j)):
            kept_file.unlink()
    for folder in (partial, partial.parent, partial.parent.parent):  # empty folders only
        try:
            folder.rmdir()
        except OSError:
            break
    return cells


def _updates(cfg: dict, row: Row) -> tuple[list, list]:
    """The settings the summaries of the updates 1..i record (not the config's: an update trained
    with other settings shows in its cells' fingerprint) and their tensors' digests. Read before
    any cell is computed; fails early if an update is missing."""
    if row.kind is None:
        return [], []
    if not row.kind.trains:  # theta_0 (FIX(ICL)): no update; the method's config stands for each
        return untrained_settings(row.kind, row.spec) * row.i, []
    summaries = [read_json(d / SUMMARY_FILE) for d in require_updates(cfg, row.method, row.seed, row.i)]
    return [s.get("settings") for s in summaries], [s.get("update_digest") for s in summaries]


def _partial_folder(folder: Path, i: int, key: str) -> Path:
    """Row i's partial folder of ``key`` beside the ``cells`` of ``folder``; another key's is stale and deleted."""
    partial = folder / PARTIAL_ROW.format(i=i, key=key)
    for stale in partial.parent.iterdir() if partial.parent.is_dir() else ():
        if stale != partial:
            log.info("deleting %s: cells of row %d computed with other settings, updates or code", stale, i)
            shutil.rmtree(stale)
    return partial


def _kept_cell(cfg, partial: Path, cell_file: Path, method, seed, i: int, j: int, settings: str) -> dict | None:
    """Cell A[i, j] as an earlier attempt of the row kept it in ``partial``, if it did and it is sound."""
    kept = partial / cell_file.name
    if not kept.is_file():
        return None
    try:
        cell = read_cell(cfg, kept, method, seed, i, j, classifies=family_of(cfg).classifies)
    except ResultError as err:
        log.warning("recomputing A[%d,%d]: %s", i, j, err)
        return None
    return cell if cell.get("settings") == settings else None


def _cell_files(folder: Path, cell_file: Path) -> list[Path]:
    """The files of a cell in ``folder``: its JSON and those named after it (TRACE: its predictions)."""
    return sorted(folder.glob(f"{cell_file.stem}.*"))


def _copy_files(source: Path, cell_file: Path, target: Path) -> None:
    """Copy the files beside a cell, not its JSON (written by the caller), from ``source`` to ``target``."""
    for file in _cell_files(source, cell_file):
        if file.name != cell_file.name:
            atomic_write(target / file.name, lambda tmp, file=file: shutil.copyfile(file, tmp))


def _computed_cells(cfg: dict, row: Row, device):
    """Yield the cells of ``row`` (theta_0's for the pretrained row), by the model family's protocol
    (CLIP: classification accuracy; TRACE: generated answers scored); a method that predicts the
    domain evaluates the row by its own task-agnostic inference."""
    if row.kind is not None and row.kind.predicts_domain:
        return routed_cells(cfg, row, device)
    return family_of(cfg).cells(cfg, row, device)
