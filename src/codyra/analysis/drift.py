"""Cumulative parameter shift ||theta_t - theta_0||_F after each task (paper Table "drift").

theta_t - theta_0 is the sum of the stored updates 1..t, accumulated per changed block (a
parameter, or a row block of a fused one) in fp32, so no model is built. Blocks of one
parameter must be disjoint row ranges (Q, K, V of a fused in_proj) or the whole parameter.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable

import torch

from codyra.analysis.common import new_figure, run_updates, save_figure, trained_methods
from codyra.evaluation.table_formats import Table
from codyra.store.io import ResultError
from codyra.store.paths import figures_dir
from codyra.store.updates import TaskUpdate


def _check_blocks(keys) -> None:
    by_param: dict[str, list] = {}
    for param, rows in keys:
        by_param.setdefault(param, []).append(rows)
    for param, blocks in by_param.items():
        if None in blocks and len(blocks) > 1:
            raise ResultError(
                f"updates change parameter {param} both whole and by row blocks {blocks}: "
                "the drift cannot add them blockwise"
            )
        spans = sorted(b for b in blocks if b is not None)
        for (_, stop), (start, _) in itertools.pairwise(spans):
            if start < stop:
                raise ResultError(f"updates change overlapping row blocks of {param}: {spans}")


def cumulative_drift(updates: Iterable[TaskUpdate]) -> list[float]:
    """[||theta_t - theta_0||_F for t = 1..T] of the updates in task order."""
    total: dict[tuple, torch.Tensor] = {}
    drift = []
    for update in updates:
        for name in update.entries:  # one delta at a time beside the running totals
            param, rows, delta = update.dense_delta(name)
            key = (param, rows)
            total[key] = total[key] + delta if key in total else delta.clone()
        _check_blocks(total)
        drift.append(math.sqrt(sum(float(t.double().pow(2).sum()) for t in total.values())))
    return drift


TABLE = "drift"


def step_column(t: int, task: str) -> str:
    """The drift table's column of the shift after task ``t`` (1-based), named ``task``."""
    return f"{t}: {task}"


def drift_table(cfg: dict) -> tuple[Table, dict]:
    tasks = list(cfg["tasks"])
    columns = [step_column(t, name) for t, name in enumerate(tasks, 1)]
    table = Table(
        TABLE,
        f"{cfg['benchmark']}: cumulative parameter shift ||theta_t - theta_0||_F after task t (paper: drift table), "
        f"mean ± std over seeds {cfg['seeds']}",
        columns,
        higher_is_better=dict.fromkeys(columns, False),
        decimals=3,
    )
    curves = {}
    for method in trained_methods(cfg):
        per_seed = [cumulative_drift(run_updates(cfg, method, s)) for s in cfg["seeds"]]
        curves[method] = per_seed
        table.rows.append(("", method, [[d[t] for d in per_seed] for t in range(len(tasks))]))
    return table, curves


def write_drift(cfg: dict) -> None:
    from codyra.analysis.common import write_any_table

    table, curves = drift_table(cfg)
    write_any_table(cfg, table)
    fig, ax = new_figure(figsize=(5, 3.5))
    for method, per_seed in curves.items():
        mean = torch.tensor(per_seed, dtype=torch.float64).mean(0)
        ax.plot(range(1, len(mean) + 1), mean.tolist(), marker="o", label=method)
    ax.set_xticks(range(1, len(cfg["tasks"]) + 1))
    ax.set_xlabel("after task t")
    ax.set_ylabel(r"$\|\theta_t - \theta_0\|_F$")
    ax.set_title(f"{cfg['benchmark']}: cumulative drift")
    ax.legend()
    save_figure(fig, figures_dir(cfg) / "drift")
