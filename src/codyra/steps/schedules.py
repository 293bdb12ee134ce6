"""Learning-rate schedules (multiplicative factors for LambdaLR, one call per optimizer step).

``train.lr_schedule`` picks one for every task of a training job (:func:`lr_factor`); each
task's job starts its schedule afresh:

- ``cosine``: linear warm-up over ``train.warmup_steps``, then cosine decay to zero at the
  task's last step (the released CoDyRA code: cosine, no warm-up);
- ``constant``: the same warm-up, then the full rate (TRACE's and TreeLoRA's
  ``training/main.py``, which build ``get_constant_schedule_with_warmup`` whatever their
  scripts pass as ``--lr_scheduler_type``).
"""

from __future__ import annotations

import math

LR_SCHEDULES = ("cosine", "constant")


def _warmup(step: int, warmup: int) -> float:
    return (step + 1) / warmup


def warmup_cosine(total: int, warmup: int):
    """Linear warm-up over ``warmup`` steps, then cosine decay to zero at step ``total``."""

    def factor(step: int) -> float:
        if step < warmup:
            return _warmup(step, warmup)
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    return factor


def warmup_constant(warmup: int):
    """Linear warm-up over ``warmup`` steps, then a constant factor 1."""

    def factor(step: int) -> float:
        return _warmup(step, warmup) if step < warmup else 1.0

    return factor


def lr_factor(schedule: str, total: int, warmup: int):
    """The LambdaLR factor of ``train.lr_schedule`` over a task of ``total`` optimizer steps."""
    if schedule == "cosine":
        return warmup_cosine(total, warmup)
    if schedule == "constant":
        return warmup_constant(warmup)
    raise ValueError(f"unknown train.lr_schedule {schedule!r}; choose one of {LR_SCHEDULES}")
