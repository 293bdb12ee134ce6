"""CoDyRA: rank-selective LoRA whose gates are sparsified by proximal soft-thresholding.

After a dense phase (``dense_ratio`` of the steps), every optimizer step is followed by
w <- T_kappa(w) with kappa ramped to ``kappa_max`` (see ``codyra.adapters.sparsity``).
A zero gate blocks the gradient of its A row and B column; the gate itself may revive
when a gradient step outgrows kappa (proximal gradient allows that). Components whose
gate is zero at the end are dropped from the stored update.
"""

from __future__ import annotations

import logging
from typing import ClassVar

from codyra.adapters.sparsity import (
    KAPPA_SCHEDULES,
    PROX_OPERATORS,
    kappa_at,
    staircase_stride,
    threshold_gates_,
)
from codyra.methods.lora import LoRA

log = logging.getLogger(__name__)


class CoDyRA(LoRA):
    kind = "codyra"
    gated = True
    defaults: ClassVar[dict] = {
        **LoRA.defaults,
        "w_init": "normal",
        "dense_ratio": 0.5,
        "kappa_max": 0.005,
        "prox": "paper",
        "schedule": "linear",
    }

    def __init__(self, spec):
        super().__init__(spec)
        if self.options["prox"] not in PROX_OPERATORS:
            raise ValueError(f"unknown prox {self.options['prox']!r}; choose one of {', '.join(PROX_OPERATORS)}")
        if self.options["schedule"] not in KAPPA_SCHEDULES:
            raise ValueError(
                f"unknown schedule {self.options['schedule']!r}; choose one of {', '.join(KAPPA_SCHEDULES)}"
            )
        self.kappa = 0.0

    def after_step(self, step, total_steps):
        o = self.options
        if step == 1 and o["schedule"] == "staircase" and staircase_stride(total_steps, o["dense_ratio"]) == 0:
            log.warning(
                "schedule staircase with %d steps and dense_ratio %g leaves fewer than 50 sparse steps: "
                "as in the released code the threshold never rises, so no gate is pruned",
                total_steps,
                o["dense_ratio"],
            )
        self.kappa = kappa_at(step, total_steps, o["dense_ratio"], o["kappa_max"], o["schedule"])
        if self.kappa > 0:
            threshold_gates_([adapter.w.data for adapter in self.adapters.values()], self.kappa, o["prox"])

    def step_metrics(self):
        return {**super().step_metrics(), "kappa": self.kappa}


METHOD = CoDyRA
