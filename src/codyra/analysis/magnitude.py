"""Per-task update magnitude (paper tables "norm_lowest" and "supp_norm_stability").

Per task update and adapted matrix: the effective rank (adapters: the number of stored,
surviving components; dense deltas: the numerical rank of each 2-D delta), ||dW||_F, and for
adapters the operator norms ||A||_2 and ||B||_2 of the stored factors (the gates and the
alpha / r scale live in ``w``, as in the paper's dW = B diag(w) A). As in the paper, the
operator norms are averaged over the matrices a task updated (active rank > 0); the
effective rank over every adapted matrix. ||dW||_F is reported per matrix (mean) and for
the whole task (Frobenius norm over all its matrices).
"""

from __future__ import annotations

import math
import statistics

import torch

from codyra.analysis.common import run_updates, trained_methods
from codyra.evaluation.table_formats import Table
from codyra.store.updates import TaskUpdate

TABLE = "magnitude"
# Markdown tables cannot hold "|": the norms are named in words
EFF_RANK, FRO_TASK, FRO_MATRIX = "eff. rank", "Frobenius dW (task)", "Frobenius dW (per matrix)"
SPECTRAL_A, SPECTRAL_B = "spectral A", "spectral B"
COLUMNS = [EFF_RANK, FRO_TASK, FRO_MATRIX, SPECTRAL_A, SPECTRAL_B]


def update_magnitude(update: TaskUpdate) -> dict:
    """Effective rank (mean per matrix), ||dW||_F (task, mean per matrix), mean ||A||_2, ||B||_2 (None for dense
    deltas)."""
    ranks, fro, a_norms, b_norms = [], [], [], []
    for name, (_, _, delta) in update.merge_order():  # one delta at a time: a 7B model's are 26 GB at once
        fro.append(float(torch.linalg.matrix_norm(delta)) if delta.ndim == 2 else float(delta.norm()))
        if update.kind == "lora":
            A, B = update.tensors[f"{name}.A"], update.tensors[f"{name}.B"]
            ranks.append(A.shape[0])
            if A.shape[0]:
                a_norms.append(float(torch.linalg.matrix_norm(A.float(), ord=2)))
                b_norms.append(float(torch.linalg.matrix_norm(B.float(), ord=2)))
        elif delta.ndim == 2:
            ranks.append(int(torch.linalg.matrix_rank(delta)))
    mean = lambda v: statistics.fmean(v) if v else None
    return {
        "eff_rank": mean(ranks),
        "dW_fro_task": math.sqrt(sum(f * f for f in fro)),
        "dW_fro_matrix": mean(fro),
        "A_op": mean(a_norms),
        "B_op": mean(b_norms),
    }


def run_magnitude(cfg: dict, method: str, seed: int) -> dict:
    """Each key of ``update_magnitude`` averaged over the run's tasks (None when undefined)."""
    per_task = [update_magnitude(u) for u in run_updates(cfg, method, seed)]
    columns = {k: [p[k] for p in per_task] for k in per_task[0]}
    return {k: None if None in v else statistics.fmean(v) for k, v in columns.items()}


def magnitude_table(cfg: dict) -> Table:
    table = Table(
        TABLE,
        f"{cfg['benchmark']}: per-task update magnitude, averaged over tasks (paper: norm tables); "
        f"mean ± std over seeds {cfg['seeds']}",
        COLUMNS,
        mark_best=False,
        decimals=3,
    )
    keys = ["eff_rank", "dW_fro_task", "dW_fro_matrix", "A_op", "B_op"]
    for method in trained_methods(cfg):
        runs = [run_magnitude(cfg, method, s) for s in cfg["seeds"]]
        table.rows.append(("", method, [None if runs[0][k] is None else [r[k] for r in runs] for k in keys]))
    return table
