"""SoRA-style sparse gating (Ding et al. 2023, TsinghuaC3I/SoRA): a gate g per rank component,
h = ((x A^T) * g) B^T * alpha / r, sparsified by a proximal step after every optimizer step.

Its two sparsity terms, as the reference runs them:
- ``lambda_l1`` (``--sparse_lambda``, 10 in ``scripts/run_glue_sora_no_schedule.sh``): a mean-|g|
  penalty added to the loss, ``lambda * sum|g| / numel(g)`` over all gates (``src/trainer.py``
  ``compute_loss``);
- ``lambda_prox`` (``--sparse_lambda_2``, 3e-4 in the same script): the threshold of the proximal
  step of ``src/sparse_optimizer.py`` ``SparseAdamW.step``, applied from the first step, not
  scaled by the learning rate, with its three in-place statements (x > l: x - l; x < -l: x + l;
  then |x| < l of the result: 0), i.e. CoDyRA's ``official`` operator.
- ``lambda_schedule`` (the reference's sparsifying scheduler, ``_build_lambda_list``):
  ``linear`` / ``log_linear`` / ``exp_linear`` from ``lambda_prox`` to ``max_lambda`` over
  ``lambda_num`` values. The reference steps it every few epochs from its run script; here the
  task's steps are split into ``lambda_num`` equal stages.

Gates start at N(0, 1) (``nn.Parameter(torch.randn(1, r))``), A as nn.Linear, B at zero:
RankSelectiveLoRA with ``w_init: normal``. Difference kept for the matched comparison: the gates
train in the run's AdamW (no weight decay), not in SoRA's separate optimizer with its own
``sparse_lr``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from codyra.methods.lora import LoRA, LoRAOptions
from codyra.methods.options import option

LAMBDA_SCHEDULES = (None, "linear", "log_linear", "exp_linear")


def lambda_values(lam: float, max_lambda: float, num: int, schedule: str) -> list[float]:
    """The reference's ``_build_lambda_list``: ``num`` thresholds from ``lam`` to ``max_lambda``."""
    if num < 1:
        raise ValueError(f"lambda_num must be >= 1, got {num}")
    ramp = [i / (num - 1) if num > 1 else 0.0 for i in range(num)]
    if schedule == "linear":
        return [lam + (max_lambda - lam) * f for f in ramp]
    if schedule == "log_linear":  # log(linspace(exp(l), exp(max)))
        return [math.log(math.exp(lam) + (math.exp(max_lambda) - math.exp(lam)) * f) for f in ramp]
    if schedule == "exp_linear":  # exp(linspace(log(l), log(max)))
        return [math.exp(math.log(lam) + (math.log(max_lambda) - math.log(lam)) * f) for f in ramp]
    raise ValueError(f"unknown lambda_schedule {schedule!r}; choose one of {LAMBDA_SCHEDULES}")


def prox_lambda(step: int, total_steps: int, options: dict) -> float:
    """The proximal threshold applied after optimizer step ``step`` (1-based)."""
    if options.lambda_schedule is None:
        return options.lambda_prox
    values = lambda_values(options.lambda_prox, options.max_lambda, options.lambda_num, options.lambda_schedule)
    stage = min(len(values) - 1, (step - 1) * len(values) // total_steps)
    return values[stage]


def l1_mean(gates: list):
    """sum |g| / numel over all gates (the reference's ``sparse_loss / p_total``)."""
    total = sum(g.abs().sum() for g in gates)
    return total / sum(g.numel() for g in gates)


@dataclass(frozen=True)
class SoRAOptions(LoRAOptions):
    w_init: Literal["normal", "uniform", "ones"] = option("normal", doc="initial gates (SoRA: torch.randn)")
    lambda_l1: float = option(10.0, minimum=0, doc="weight of the mean-|g| loss term (--sparse_lambda)")
    lambda_prox: float = option(3e-4, minimum=0, doc="proximal threshold (--sparse_lambda_2)")
    lambda_schedule: str | None = option(None, choices=LAMBDA_SCHEDULES, doc="SoRA's sparsifying scheduler")
    max_lambda: float | None = option(None, exclusive_minimum=0)
    lambda_num: int | None = option(None, minimum=1)

    def check(self):
        if self.lambda_schedule is not None and (self.max_lambda is None or self.lambda_num is None):
            return [("lambda_schedule", "needs max_lambda and lambda_num (as the reference's SparseAdamW)")]
        if self.lambda_schedule == "exp_linear" and self.lambda_prox <= 0:
            return [("lambda_prox", "must be > 0 for lambda_schedule exp_linear (its log)")]
        return []


class SoRA(LoRA):
    kind = "sora"
    families = ("clip", "causal_lm")
    paper_row = None  # the paper has no SoRA row (its sparse gating appears in the ablation figure only)
    display_name = "SoRA (r={rank})"
    gated = True
    Options = SoRAOptions
    threshold = 0.0

    def extra_loss(self, ctx, batch, outputs):
        if not self.options.lambda_l1:
            return None
        return self.options.lambda_l1 * l1_mean([a.w for a in self.adapters.values()])

    def after_step(self, step, total_steps):
        from codyra.adapters.sparsity import threshold_gates_

        self.threshold = prox_lambda(step, total_steps, self.options)
        if self.threshold > 0:
            threshold_gates_([a.w.data for a in self.adapters.values()], self.threshold, "official")

    def step_metrics(self):
        return {**super().step_metrics(), "prox_lambda": self.threshold}


METHOD = SoRA
