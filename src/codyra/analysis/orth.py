"""Parameter-space directional analysis of A-matrix updates (paper figure "orth").

The paper: "the cosine similarity between the LoRA A-matrix updates obtained after each task,
comparing every task's update direction against those from all other tasks"; per task, the
average over the other tasks. Tasks keep different ranks (CoDyRA stores only surviving
components), so two tasks' A matrices of one adapted weight are compared row by row: the mean
|cos| over every pair (row of A_t, row of A_s), each row a direction in the input space (sign is
arbitrary in a rank-one component B[:, i] A[i, :], hence the absolute value). The similarity of
tasks t and s is the mean over the weights both updated (rank > 0); task t's value the mean over
s != t. Lower: more orthogonal, less interfering updates.
"""

from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F

from codyra.analysis.common import adapter_methods, new_figure, run_updates, save_figure
from codyra.evaluation.table_formats import Table
from codyra.store.paths import figures_dir
from codyra.store.updates import TaskUpdate


def row_cosine(A1: torch.Tensor, A2: torch.Tensor) -> float:
    """Mean |cos| over all pairs of rows of two (r x k) matrices with the same k."""
    if A1.ndim != 2 or A2.ndim != 2 or A1.shape[1] != A2.shape[1] or not len(A1) or not len(A2):
        raise ValueError(
            "row cosine needs two non-empty matrices with the same number of columns, "
            f"got {tuple(A1.shape)} and {tuple(A2.shape)}"
        )
    return float((F.normalize(A1.double(), dim=1) @ F.normalize(A2.double(), dim=1).T).abs().mean())


def a_matrices(update: TaskUpdate) -> dict[str, torch.Tensor]:
    """The A factor of every weight the task updated (rank > 0)."""
    if update.kind != "lora":
        raise ValueError(f"the A-matrix analysis needs low-rank adapter updates, got a {update.kind!r} update")
    return {name: update.tensors[f"{name}.A"] for name in update.targets if len(update.tensors[f"{name}.A"])}


def task_similarity(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float | None:
    """Mean row cosine over the weights both tasks updated; None when they share none."""
    shared = sorted(set(a) & set(b))
    return statistics.fmean(row_cosine(a[n], b[n]) for n in shared) if shared else None


def per_task_similarity(updates) -> list[float | None]:
    """Per task t: the mean similarity of its A matrices to those of every other task (None: no other shares a
    weight)."""
    tasks = [a_matrices(u) for u in updates]
    out = []
    for t, a in enumerate(tasks):
        values = [v for s, b in enumerate(tasks) if s != t and (v := task_similarity(a, b)) is not None]
        out.append(statistics.fmean(values) if values else None)
    return out


def a_cosine_table(cfg: dict) -> Table:
    if len(cfg["tasks"]) < 2:
        raise ValueError("the A-matrix cosine compares tasks: it needs at least two (config key tasks)")
    columns = list(cfg["tasks"]) + ["Mean"]
    table = Table(
        "a_cosine",
        f"{cfg['benchmark']}: mean |cos| between each task's LoRA A-matrix rows and those of every other task "
        "(lower: more orthogonal updates; paper: fig. orth), mean ± std over seeds",
        columns,
        higher_is_better=dict.fromkeys(columns, False),
        decimals=4,
    )
    for method in adapter_methods(cfg):
        per_seed = [per_task_similarity(run_updates(cfg, method, s)) for s in cfg["seeds"]]
        cells = [None if None in col else list(col) for col in zip(*per_seed, strict=True)]
        means = [
            statistics.fmean(v for v in run if v is not None) if any(v is not None for v in run) else None
            for run in per_seed
        ]
        table.rows.append(("", method, cells + [None if None in means else means]))
    return table


def write_a_cosine_figure(cfg: dict, table: Table) -> None:
    """Per task, one bar per method (mean over seeds, std as error bar), as the paper's figure."""
    rows = list(table.stats())
    tasks = table.columns[:-1]
    width = 0.8 / max(len(rows), 1)
    fig, ax = new_figure(figsize=(max(5, 1.2 * len(tasks)), 3.5))
    for k, (_, label, stats) in enumerate(rows):
        xs = [t + (k - (len(rows) - 1) / 2) * width for t, s in enumerate(stats[:-1]) if s is not None]
        defined = [s for s in stats[:-1] if s is not None]
        ax.bar(xs, [s[0] for s in defined], width, yerr=[s[1] for s in defined], label=label)
    ax.set_xticks(range(len(tasks)), tasks)
    ax.set_ylabel("mean |cos| of A-matrix rows to other tasks")
    ax.set_title(f"{cfg['benchmark']}: directional overlap of task updates (lower: more orthogonal)")
    ax.legend(fontsize=7)
    save_figure(fig, figures_dir(cfg) / "a_cosine")
