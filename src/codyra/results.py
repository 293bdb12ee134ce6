"""A run's results: its A matrix and metrics, and the whole stream in one process."""

from __future__ import annotations

import logging
from pathlib import Path

from codyra.io import read_json, write_json
from codyra.metrics import summarize
from codyra.paths import cell_path, run_dir, row0_cell_path, task_dir
from codyra.updates import SUMMARY_FILE

log = logging.getLogger(__name__)
MATRIX_FILE = "matrix.json"


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
    write_json(run_dir(cfg, method, seed) / MATRIX_FILE, result)
    return result


def run_stream(cfg: dict, method: str, seed: int, *, device=None) -> dict:
    """Pretrain (mini, if needed), train every task and evaluate every cell, skipping finished work."""
    from codyra.benchmarks import pretrained_weights
    from codyra.evaluate import evaluate_cell, evaluate_row0
    from codyra.train import train_task

    n = len(cfg["tasks"])
    weights = pretrained_weights(cfg)
    if cfg["data"]["kind"] == "mini" and not Path(weights).is_file():
        from codyra.mini.pretrain import pretrain_mini

        pretrain_mini(cfg, weights)
    for j in range(1, n + 1):
        if not row0_cell_path(cfg, j).is_file():
            evaluate_row0(cfg, j, device=device)
    for i in range(1, n + 1):
        if not (task_dir(cfg, method, seed, i) / SUMMARY_FILE).is_file():
            train_task(cfg, method, seed, i, device=device)
    for i in range(n + 1):
        for j in range(1, n + 1):
            if not cell_path(cfg, method, seed, i, j).is_file():
                evaluate_cell(cfg, method, seed, i, j, device=device)
    result = summarize_run(cfg, method, seed)
    m = result["metrics"]
    log.info("%s seed %d: transfer %s average %.2f last %.2f forgetting %s", method, seed,
             m["transfer"], m["average"], m["last"], m["forgetting"])
    return result
