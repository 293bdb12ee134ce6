"""Learning-rate schedules (multiplicative factors for LambdaLR, one call per optimizer step)."""

from __future__ import annotations

import math


def warmup_cosine(total: int, warmup: int):
    """Linear warm-up over ``warmup`` steps, then cosine decay to zero at step ``total``."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    return factor
