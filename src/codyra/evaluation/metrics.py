"""Continual-learning metrics of an accuracy matrix: the paper's, and TreeLoRA's and TRACE's as they define theirs.

A[i, j] is the score on task j after training tasks 1..i. ``summarize`` takes the
(N+1) x N matrix whose row 0 is the pretrained model; an N x N matrix (no row 0) is
accepted by the metrics that do not need row 0. Rows and columns are 1-based in the
formulas, 0-based in the arrays (row r of an (N+1) x N matrix is "after task r").

- Transfer_j = mean_{i<j} A[i, j] for j >= 2 (None for j = 1)  [needs no row 0]
- Avg_j = mean_{i=1..N} A[i, j];  Last_j = A[N, j]
- Forgetting (paper) = 1/(N-1) sum_{j<N} (A[j, j] - A[N, j])  (None for N = 1)
- BWT (TreeLoRA) = 1/N sum_{j<=N} min(A[N, j] - A[j, j], 0)
- OP (TRACE) = 1/N sum_j A[N, j]
"""

from __future__ import annotations

import numpy as np


def _trained_rows(A) -> np.ndarray:
    """The N x N block of rows after tasks 1..N."""
    A = np.asarray(A, dtype=float)
    if A.ndim != 2:
        raise ValueError(f"expected a 2-D matrix, got shape {A.shape}")
    n = A.shape[1]
    if A.shape[0] == n + 1:
        return A[1:]
    if A.shape[0] == n:
        return A
    raise ValueError(f"expected an (N+1) x N or N x N matrix, got shape {A.shape}")


def transfer(A) -> list[float | None]:
    T = _trained_rows(A)
    return [None if j == 0 else float(T[:j, j].mean()) for j in range(T.shape[1])]


def average(A) -> list[float]:
    return [float(v) for v in _trained_rows(A).mean(axis=0)]


def last(A) -> list[float]:
    return [float(v) for v in _trained_rows(A)[-1]]


def forgetting(A) -> float | None:
    T = _trained_rows(A)
    n = T.shape[1]
    if n < 2:
        return None
    return float(np.mean([T[j, j] - T[-1, j] for j in range(n - 1)]))


def bwt(A) -> float:
    T = _trained_rows(A)
    n = T.shape[1]
    return float(sum(min(T[-1, j] - T[j, j], 0.0) for j in range(n)) / n)


def overall_performance(A) -> float:
    return float(_trained_rows(A)[-1].mean())


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else None


def summarize(A) -> dict:
    """Per-task and mean Transfer / Average / Last, Forgetting, BWT and OP of an (N+1) x N matrix."""
    A = np.asarray(A, dtype=float)
    if A.ndim != 2 or A.shape[0] != A.shape[1] + 1:
        raise ValueError(f"summarize expects the (N+1) x N matrix with row 0 = pretrained, got shape {A.shape}")
    per_task = {"transfer": transfer(A), "average": average(A), "last": last(A)}
    return {
        "per_task": per_task,
        "transfer": _mean(per_task["transfer"]),
        "average": _mean(per_task["average"]),
        "last": _mean(per_task["last"]),
        "forgetting": forgetting(A),
        "bwt": bwt(A),
        "op": overall_performance(A),
        "zero_shot": [float(v) for v in A[0]],
    }
