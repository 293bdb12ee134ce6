"""Learning-rate schedules (multiplicative factors for LambdaLR, one call per optimizer step).

``train.lr_schedule`` picks one for every task of a training job (:func:`lr_factor`); each
task's job starts its schedule afresh:

- ``cosine``: linear warm-up over ``train.warmup_steps``, then cosine decay to zero at the
  task's last step (the released CoDyRA code: cosine, no warm-up);
- ``cosine_per_epoch``: the same warm-up, then a cosine that moves once per epoch (a pass over
  the task's training set), as ``CosineAnnealingLR(T_max=epochs, eta_min=0)`` stepped after each
  epoch: epoch e of E runs at 0.5 (1 + cos(pi e / E)), so the last one is above zero (CL-LoRA's
  ``models/cllora.py``);
- ``constant``: the same warm-up, then the full rate (TRACE's and TreeLoRA's
  ``training/main.py``, which build ``get_constant_schedule_with_warmup`` whatever their
  scripts pass as ``--lr_scheduler_type``).
"""

from __future__ import annotations

import math

LR_SCHEDULES = ("cosine", "cosine_per_epoch", "constant")


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


def warmup_cosine_per_epoch(total: int, warmup: int, steps_per_epoch: int):
    """Linear warm-up over ``warmup`` steps, then epoch e of the E = ceil((total - warmup) /
    steps_per_epoch) that follow at 0.5 (1 + cos(pi e / E))."""
    epochs = max(1, math.ceil((total - warmup) / steps_per_epoch))

    def factor(step: int) -> float:
        if step < warmup:
            return _warmup(step, warmup)
        epoch = min((step - warmup) // steps_per_epoch, epochs - 1)
        return 0.5 * (1 + math.cos(math.pi * epoch / epochs))

    return factor


def warmup_constant(warmup: int):
    """Linear warm-up over ``warmup`` steps, then a constant factor 1."""

    def factor(step: int) -> float:
        return _warmup(step, warmup) if step < warmup else 1.0

    return factor


def lr_factor(schedule: str, total: int, warmup: int, steps_per_epoch: int):
    """The LambdaLR factor of ``train.lr_schedule`` over a task of ``total`` optimizer steps, an epoch
    being ``steps_per_epoch`` of them."""
    if schedule == "cosine":
        return warmup_cosine(total, warmup)
    if schedule == "cosine_per_epoch":
        return warmup_cosine_per_epoch(total, warmup, steps_per_epoch)
    if schedule == "constant":
        return warmup_constant(warmup)
    raise ValueError(f"unknown train.lr_schedule {schedule!r}; choose one of {LR_SCHEDULES}")
