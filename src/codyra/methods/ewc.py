"""EWC as TRACE implements it (BeyonderXX/TRACE, model/Regular/EWC.py; full-parameter
training, scripts/train_seq_cl.sh), in every model family.

- Fisher: one diagonal F for the whole stream, never reset. After every optimizer step,
  F += g^2 / (steps per epoch of the current task), g the step's gradient of the total loss
  (penalty included; NaN -> 0 as TRACE's gradient hook does). It therefore sums over every
  step of every epoch of every task so far, and grows *during* the current task too.
- Penalty from the second task on: loss += 0.5 * lambda * sum F (theta - theta_{i-1})^2, with
  theta_{i-1} the weights the task started from and the running F; lambda = 400 (TRACE's
  ``lambda_ewc`` default).

Stored per task beside the update: F after the task (theta_{i-1} is rebuilt from the updates).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def accumulate_fisher_(
    fisher: Mapping[str, torch.Tensor], grads: Mapping[str, torch.Tensor | None], steps_per_epoch: int
) -> None:
    """TRACE's ``_update_fisher``: F[n] += nan_to_num(g[n], nan=0)^2 / steps_per_epoch, in place.

    A parameter without a gradient this step (None) adds nothing, as TRACE's hook never fires for it.
    """
    import torch

    if steps_per_epoch < 1:
        raise ValueError(f"steps per epoch must be >= 1, got {steps_per_epoch}")
    for name, f in fisher.items():
        g = grads.get(name)
        if g is not None:
            f.add_(torch.nan_to_num(g.detach().to(f.dtype), nan=0.0).pow(2) / steps_per_epoch)


def ewc_penalty(
    params: Mapping[str, torch.Tensor],
    previous: Mapping[str, torch.Tensor],
    fisher: Mapping[str, torch.Tensor],
    strength: float,
) -> torch.Tensor:
    """0.5 * strength * sum_n sum F[n] (theta[n] - previous[n])^2 (TRACE: ``0.5 * lambda_ewc * penalty()``)."""
    missing = sorted(set(params) - set(fisher))
    if missing:
        raise KeyError(f"no Fisher diagonal for parameter(s) {missing[:3]}: was the stored state trained on this model?")
    terms = [(fisher[n] * (p - previous[n].to(p.dtype)).pow(2)).sum() for n, p in params.items()]
    return 0.5 * strength * sum(terms[1:], terms[0])
