"""Proximal soft-thresholding of the importance weights and its threshold schedule.

Operators (applied in place to every gate vector after each optimizer step):
- ``paper``: T_kappa(x) = 1(|x| > kappa) * (x - sign(x) * kappa)  (paper Eq. 5)
- ``official``: the released code's three in-place statements (Artificer-AI-Lab/CoDyRA,
  ``models/codyra.py``, end of ``train_model``): x > kappa becomes x - kappa, x < -kappa
  becomes x + kappa, then every |x| < kappa *of the result* becomes 0. Net effect:
  |x| < kappa and kappa < |x| < 2 kappa become 0, |x| >= 2 kappa shrinks by kappa, and
  |x| == kappa exactly is left unchanged (every comparison is strict).

Schedules (the threshold applied after optimizer step t = 1..T):
- ``linear``: kappa_t = kappa_max * (t - D) / (T - D) for t > D, D = round(ratio * T)
  (paper, App. A.4 (iii)).
- ``staircase``: the released code's schedule, step for step. Its loop counts iterations
  it = t - 1 = 0..T-1 with D = ratio * T (not rounded) and levels linspace(0, kappa_max, 50);
  the stride is int((T - D) // 50); before iteration ``it`` runs, the level advances by one
  when it >= D and it is a multiple of the stride; after the step the gates are thresholded
  with the current level when it > D. So with T = 500 and ratio 0.5 the level reaches 1 at
  it = 250 (no pruning yet), the first pruning step (it = 251) uses kappa_max / 49, and the
  top level is reached at it = 490. With T - D < 50 the stride is 0 and the released code
  never advances: the threshold stays 0, nothing is pruned, and the gates train freely.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # tensor methods only: config validation imports this module without torch
    import torch

PROX_OPERATORS = ("paper", "official")
KAPPA_SCHEDULES = ("linear", "staircase")
STAIRCASE_LEVELS = 50

log = logging.getLogger(__name__)


def soft_threshold_(w: torch.Tensor, kappa: float, operator: str = "paper") -> torch.Tensor:
    if operator == "paper":
        w.copy_(w.sign() * (w.abs() - kappa).clamp_(min=0))
    elif operator == "official":
        shrunk = w - w.sign() * (w.abs() > kappa) * kappa
        w.copy_(shrunk.masked_fill_(shrunk.abs() < kappa, 0.0))
    else:
        raise ValueError(f"unknown proximal operator {operator!r}; choose one of {PROX_OPERATORS}")
    return w


def threshold_gates_(gates: list[torch.Tensor], kappa: float, operator: str = "paper") -> None:
    """Soft-threshold every gate vector in place, as one flat tensor (one kernel, not one per adapter)."""
    import torch

    flat = soft_threshold_(torch.cat(gates), kappa, operator)
    torch._foreach_copy_(gates, list(flat.split([g.numel() for g in gates])))


def dense_steps(total_steps: int, dense_ratio: float) -> int:
    if not 0.0 <= dense_ratio <= 1.0:
        raise ValueError(f"dense_ratio must lie in [0, 1], got {dense_ratio}")
    return round(total_steps * dense_ratio)


def staircase_stride(total_steps: int, dense_ratio: float) -> int:
    """Iterations per level of the released code's staircase (0: it never advances)."""
    return int((total_steps - total_steps * dense_ratio) // STAIRCASE_LEVELS)


def staircase_level(step: int, total_steps: int, dense_ratio: float) -> int:
    """Index into linspace(0, kappa_max, 50) in force during optimizer step ``step`` (1-based)."""
    dense, stride = total_steps * dense_ratio, staircase_stride(total_steps, dense_ratio)
    iteration = step - 1
    if stride == 0 or iteration < dense:
        return 0
    # number of multiples of the stride in [ceil(D), iteration]: one advance each
    advances = iteration // stride - (math.ceil(dense) - 1) // stride
    return min(STAIRCASE_LEVELS - 1, advances)


def kappa_at(step: int, total_steps: int, dense_ratio: float, kappa_max: float, schedule: str = "linear") -> float:
    """Threshold applied after optimizer step ``step`` (1-based); 0 during the dense phase."""
    if schedule == "staircase":
        dense_steps(total_steps, dense_ratio)  # validates the ratio
        if step - 1 <= total_steps * dense_ratio:  # the released code prunes from iteration > D
            return 0.0
        level = staircase_level(step, total_steps, dense_ratio)
        # numpy's linspace: level * (kappa_max / 49), the last level exactly kappa_max
        return kappa_max if level == STAIRCASE_LEVELS - 1 else level * (kappa_max / (STAIRCASE_LEVELS - 1))
    if schedule != "linear":
        raise ValueError(f"unknown kappa schedule {schedule!r}; choose one of {KAPPA_SCHEDULES}")
    dense = dense_steps(total_steps, dense_ratio)
    if step <= dense or total_steps <= dense:
        return 0.0
    sparse_total = total_steps - dense
    return kappa_max * min(step - dense, sparse_total) / sparse_total
