"""Rank-stabilised LoRA: LoRA whose update is scaled by alpha / sqrt(rank) instead of alpha / rank.

Kalajdzievski (2023), "A Rank Stabilization Scaling Factor for Fine-Tuning with LoRA": with the
scale alpha / sqrt(r), the update's learning dynamics do not collapse as the rank grows. It is
LoRA with its alpha multiplied by sqrt(rank), so everything else (placement, merging after each
task, the stored update) is the built-in ``lora`` kind's.
"""

from __future__ import annotations

import math
from dataclasses import replace

from codyra.methods.lora import LoRA


class RankStabilisedLoRA(LoRA):
    kind = "mylora"  # the entry point's name in pyproject.toml
    families = LoRA.families  # every family LoRA runs on, declared as every kind declares its own
    paper_row = None  # the paper has no such row

    def __init__(self, spec: dict):
        super().__init__(spec)
        rank, alpha = self.options.rank, self.options.alpha
        # LoRA scales by alpha / rank; alpha * sqrt(rank) / rank = alpha / sqrt(rank)
        self.options = replace(self.options, alpha=(rank if alpha is None else alpha) * math.sqrt(rank))


METHOD = RankStabilisedLoRA
