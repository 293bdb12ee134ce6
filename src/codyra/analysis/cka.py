"""Linear CKA between consecutive task updates (paper appendix table "supp_cka").

As in the paper, each task's merged update is flattened into one vector v_t over every
updated block (dense dW of each adapted matrix, or each parameter's delta), blocks in name
order, a block one task did not change counting as zeros, and CKA(v_t, v_{t+1}) is linear
CKA (Kornblith et al. 2019) of the two D x 1 representations: the squared cosine of the
centred vectors. 1: aligned updates, 0: orthogonal ones.
"""

from __future__ import annotations

import statistics

import torch

from codyra.analysis.common import run_updates, trained_methods
from codyra.evaluation.table_formats import Table, defined
from codyra.store.updates import TaskUpdate


def linear_cka(X: torch.Tensor, Y: torch.Tensor) -> float:
    """Linear CKA of representations X (n x p) and Y (n x q): ||Yc^T Xc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F)."""
    if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0]:
        raise ValueError(
            f"linear CKA needs two matrices with the same number of rows, got {tuple(X.shape)} and {tuple(Y.shape)}"
        )
    X = X.double() - X.double().mean(0)
    Y = Y.double() - Y.double().mean(0)
    denominator = torch.linalg.matrix_norm(X.T @ X) * torch.linalg.matrix_norm(Y.T @ Y)
    if denominator == 0:
        raise ValueError("linear CKA is undefined for a constant (zero after centring) representation")
    return float(torch.linalg.matrix_norm(Y.T @ X) ** 2 / denominator)


def _blocks(update: TaskUpdate) -> dict[str, torch.Tensor]:
    return {name: delta for name, (_, _, delta) in update.dense_deltas().items()}


def flat_pair(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Two updates' blocks flattened over the union of their names (missing blocks as zeros)."""
    names = sorted(set(a) | set(b))
    zeros = lambda name: torch.zeros_like(a[name] if name in a else b[name])
    # no block on either side (a method that never updates the backbone): two empty vectors
    flat = lambda u: torch.cat([torch.zeros(0), *((u[n] if n in u else zeros(n)).reshape(-1) for n in names)])
    return flat(a), flat(b)


def consecutive_cka(updates) -> list[float | None]:
    """[CKA(v_t, v_{t+1}) for t = 1..T-1]; None where an update is zero: every component pruned,
    or no block at all (RAIL trains a head beside the backbone, never the backbone)."""
    values, previous = [], None
    for update in updates:
        current = _blocks(update)
        if previous is not None:
            x, y = flat_pair(previous, current)
            zero = not (x.any() and y.any())
            values.append(None if zero else linear_cka(x[:, None], y[:, None]))
        previous = current
    return values


TABLE, MEAN = "cka", "Mean"


def pair_column(t: int) -> str:
    """The CKA table's column of the updates of tasks ``t`` and ``t + 1``."""
    return f"{t}-{t + 1}"


def cka_table(cfg: dict) -> Table:
    n = len(cfg["tasks"])
    if n < 2:
        raise ValueError("CKA between consecutive task updates needs at least two tasks (config key tasks)")
    columns = [pair_column(t) for t in range(1, n)] + [MEAN]
    table = Table(
        TABLE,
        f"{cfg['benchmark']}: linear CKA between consecutive task updates "
        "(lower: less interfering; paper: supp_cka), mean ± std over seeds",
        columns,
        higher_is_better=dict.fromkeys(columns, False),
        decimals=4,
    )
    for method in trained_methods(cfg):
        per_seed = [consecutive_cka(run_updates(cfg, method, s)) for s in cfg["seeds"]]
        cells = [defined([v[t] for v in per_seed]) for t in range(n - 1)]
        means = [
            statistics.fmean(x for x in v if x is not None) if any(x is not None for x in v) else None for v in per_seed
        ]
        table.rows.append(("", method, cells + [defined(means)]))
    return table
