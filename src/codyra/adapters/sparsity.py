"""Proximal soft-thresholding of the importance weights and its threshold schedule.

Operators (applied in place to every gate vector after each optimizer step):
- ``paper``: T_kappa(x) = 1(|x| > kappa) * (x - sign(x) * kappa)  (paper Eq. 5)
- ``official``: the released code's in-place sequence, which zeroes every |x| < 2 kappa
  and shrinks the rest by kappa.

Schedules (the threshold at optimizer step t = 1..T, after a dense phase of D steps):
- ``linear``: kappa_t = kappa_max * (t - D) / (T - D) for t > D (paper, App. A.4 (iii))
- ``staircase``: 50 levels linspace(0, kappa_max, 50), advancing every (T - D) / 50 steps
  (official code).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # tensor methods only: config validation imports this module without torch
    import torch

PROX_OPERATORS = ("paper", "official")
KAPPA_SCHEDULES = ("linear", "staircase")
STAIRCASE_LEVELS = 50


def soft_threshold_(w: torch.Tensor, kappa: float, operator: str = "paper") -> torch.Tensor:
    if operator == "paper":
        w.copy_(w.sign() * (w.abs() - kappa).clamp_(min=0))
    elif operator == "official":
        w.copy_((w - w.sign() * kappa).masked_fill_(w.abs() < 2 * kappa, 0.0))
    else:
        raise ValueError(f"unknown proximal operator {operator!r}; choose one of {PROX_OPERATORS}")
    return w


def dense_steps(total_steps: int, dense_ratio: float) -> int:
    if not 0.0 <= dense_ratio <= 1.0:
        raise ValueError(f"dense_ratio must lie in [0, 1], got {dense_ratio}")
    return round(total_steps * dense_ratio)


def kappa_at(step: int, total_steps: int, dense_ratio: float, kappa_max: float, schedule: str = "linear") -> float:
    """Threshold after optimizer step ``step`` (1-based); 0 during the dense phase."""
    dense = dense_steps(total_steps, dense_ratio)
    if step <= dense or total_steps <= dense:
        return 0.0
    sparse_total = total_steps - dense
    if schedule == "linear":
        return kappa_max * min(step - dense, sparse_total) / sparse_total
    if schedule == "staircase":
        stride = sparse_total / STAIRCASE_LEVELS
        level = min(STAIRCASE_LEVELS - 1, math.floor((step - dense) / stride))
        return kappa_max * level / (STAIRCASE_LEVELS - 1)
    raise ValueError(f"unknown kappa schedule {schedule!r}; choose one of {KAPPA_SCHEDULES}")
