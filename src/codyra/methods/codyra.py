"""CoDyRA: rank-selective LoRA whose gates are sparsified by proximal soft-thresholding.

After a dense phase (``dense_ratio`` of the steps), every optimizer step is followed by
w <- T_kappa(w) with kappa ramped to ``kappa_max`` (see ``codyra.adapters.sparsity``).
A zero gate blocks the gradient of its A row and B column; the gate itself may revive
when a gradient step outgrows kappa (proximal gradient allows that). Components whose
gate is zero at the end are dropped from the stored update.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from codyra.adapters.sparsity import (
    KAPPA_SCHEDULES,
    PROX_OPERATORS,
    kappa_at,
    staircase_stride,
    threshold_gates_,
)
from codyra.methods.lora import LoRA, LoRAOptions
from codyra.methods.options import option

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CoDyRAOptions(LoRAOptions):
    # codyra.adapters.lora.W_INITS (that module imports torch; a test keeps the two equal)
    w_init: Literal["normal", "uniform", "ones"] = option("normal", doc="initial gates")
    dense_ratio: float = option(0.5, minimum=0, maximum=1, doc="fraction of the steps before thresholding starts")
    kappa_max: float = option(0.005, minimum=0, doc="final soft threshold (0 = no pruning)")
    prox: str = option("paper", choices=PROX_OPERATORS)
    schedule: str = option("linear", choices=KAPPA_SCHEDULES)


class CoDyRA(LoRA):
    kind = "codyra"
    families = ("clip", "causal_lm", "blip")
    paper_row = "CoDyRA"
    gated = True
    Options = CoDyRAOptions
    kappa = 0.0

    def after_step(self, step, total_steps):
        o = self.options
        if step == 1 and o.schedule == "staircase" and staircase_stride(total_steps, o.dense_ratio) == 0:
            log.warning(
                "schedule staircase with %d steps and dense_ratio %g leaves fewer than 50 sparse steps: "
                "as in the released code the threshold never rises, so no gate is pruned",
                total_steps,
                o.dense_ratio,
            )
        self.kappa = kappa_at(step, total_steps, o.dense_ratio, o.kappa_max, o.schedule)
        if self.kappa > 0:
            threshold_gates_([adapter.w.data for adapter in self.adapters.values()], self.kappa, o.prox)

    def step_metrics(self):
        return {**super().step_metrics(), "kappa": self.kappa}


METHOD = CoDyRA
