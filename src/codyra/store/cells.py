"""Cell files A[i,j], validated on read: every reader of results (evaluation copies, matrices,
the MLflow mirror) goes through here, so an absurd or mislabelled cell is named, never used."""

from __future__ import annotations

import math
import time
from pathlib import Path

from codyra.store.io import ResultError, read_json
from codyra.store.paths import cell_path, run_dir


def read_cell(cfg: dict, path: Path, method: str, seed: int | None, i: int, j: int, *, classifies: bool) -> dict:
    """A cell file, checked: a finite accuracy in 0..100 and the cell it claims to be (benchmark,
    method, seed, i, j, task; num_classes a positive integer where the family ``classifies``)."""
    cell = read_json(path)
    if not isinstance(cell, dict):
        raise ResultError(
            f"cell file {path} does not hold a JSON object; delete it and rerun its job (snakemake -f {path})"
        )
    problems = []
    accuracy = cell.get("accuracy")
    if (
        isinstance(accuracy, bool)
        or not isinstance(accuracy, (int, float))
        or not (math.isfinite(accuracy) and 0 <= accuracy <= 100)
    ):
        problems.append(f"accuracy {accuracy!r} is not a finite number in 0..100")
    expected = {
        "benchmark": cfg["benchmark"],
        "method": method,
        "seed": seed,
        "i": i,
        "j": j,
        "task": cfg["tasks"][j - 1],
    }
    problems += [
        f"{key} is {cell.get(key)!r}, expected {value!r}" for key, value in expected.items() if cell.get(key) != value
    ]
    classes = cell.get("num_classes")
    if classifies and (isinstance(classes, bool) or not isinstance(classes, int) or classes < 1):
        problems.append(f"num_classes {classes!r} is not a positive integer")
    if "routing" in cell:  # optional: the routing decisions of a task-agnostic cell
        routed = cell["routing"].get("accuracy") if isinstance(cell["routing"], dict) else None
        if (
            isinstance(routed, bool)
            or not isinstance(routed, (int, float))
            or not (math.isfinite(routed) and 0 <= routed <= 100)
        ):
            problems.append(f"routing accuracy {routed!r} is not a finite number in 0..100")
    if problems:
        raise ResultError(
            f"cell file {path} is invalid: {'; '.join(problems)}; delete it and rerun its job (snakemake -f {path})"
        )
    return cell


def read_cells(cfg: dict, method: str, seed: int, *, classifies: bool) -> list[list[dict]]:
    """The validated cells ``A[i][j-1]`` of a run (one column's cells must agree on num_classes)."""
    n = len(cfg["tasks"])
    paths = [[cell_path(cfg, method, seed, i, j) for j in range(1, n + 1)] for i in range(n + 1)]
    missing = [str(p) for row in paths for p in row if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{len(missing)} cell file(s) missing, e.g. {missing[0]}; evaluate them first")
    cells = [
        [read_cell(cfg, p, method, seed, i, j, classifies=classifies) for j, p in enumerate(row, 1)]
        for i, row in enumerate(paths)
    ]
    for j in range(n):
        counts = {cells[i][j].get("num_classes") for i in range(n + 1)}
        if len(counts) > 1:
            raise ResultError(
                f"the cells of column j={j + 1} of {run_dir(cfg, method, seed)} disagree on num_classes "
                f"{sorted(counts, key=str)}: "
                "they were not computed with the same label space; rerun that column's cells"
            )
    return cells


def cell_record(
    cfg: dict, method: str, seed: int | None, i: int, j: int, accuracy: float, started: float, **fields
) -> dict:
    """A cell's JSON object: the accuracy (0-100), which cell it is, the family's own fields
    (``fields``: label space and class count for CLIP, metric and decoding for TRACE) and its
    seconds since ``started`` (the evaluation job adds the code version and the settings)."""
    return {
        "accuracy": accuracy,
        "benchmark": cfg["benchmark"],
        "method": method,
        "seed": seed,
        "i": i,
        "j": j,
        "task": cfg["tasks"][j - 1],
        **fields,
        "seconds": round(time.time() - started, 3),
    }
