"""ZSCL (Zheng et al. 2023) as its MTIL code runs it (Thunderbeee/ZSCL, mtil/scripts/ZSCL.sh):
full fine-tuning with three constraints toward the pretrained model.

1. Distillation from theta_0 (``--ref-model`` unset: the zero-shot CLIP) on *reference data*:
   images of ``--ref-dataset ImageNet`` (train split, evaluation transform, one batch per step)
   scored against the text features of ``--ref-sentences conceptual_captions`` (every caption of
   the GCC validation file), both directions (``--image_loss --text_loss``), temperature 2;
   the same term as LwF (:func:`codyra.methods.lwf.clip_distillation`), other teacher and data.
   Here the reference data is the config entry ``data.reference``.
2. An L2 pull toward theta_{i-1}: ``--l2 1`` adds 1 * sum (theta - theta_{i-1})^2 over every
   parameter (``l2_loss``, reduction "sum").
3. Weight ensembling (``--we --avg_freq 100``): a running mean of the weights, initialised to
   theta_{i-1} and updated after steps 1, 101, 201, ... (``iteration % avg_freq == 0`` with
   0-based iterations) by ``merge_we``: avg <- (avg * n + theta) / (n + 1), n = merges so far.
   ZSCL's loop runs iterations 0..T (T + 1 steps) and its last step has learning rate 0
   (cosine schedule at its end), so its final merge adds the weights after step T: we merge
   after step T too. The task's result is the running mean, not the last weights.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def ensemble_due(step: int, total_steps: int, every: int) -> bool:
    """Whether the weight ensemble absorbs the weights after optimizer step ``step`` (1-based)."""
    if every < 1:
        raise ValueError(f"weight-ensembling interval must be >= 1 step, got {every}")
    return (step - 1) % every == 0 or step == total_steps


def merge_into_average_(average: Iterable[torch.Tensor], current: Iterable[torch.Tensor], count: int) -> None:
    """ZSCL's ``merge_we``: average <- (average * count + current) / (count + 1), in place.

    ``count`` is the number of the merge (ZSCL's ``we_n`` after its increment: 1 at the first),
    which is how many weights the average holds, its initial theta_{i-1} included; after k
    merges it weighs theta_{i-1} and each merged snapshot 1 / (k + 1).
    """
    if count < 1:
        raise ValueError(f"the first weight-ensemble merge has count 1, got {count}")
    for avg, cur in zip(average, current, strict=True):
        avg.mul_(count).add_(cur.detach().to(avg.dtype)).div_(count + 1)


def l2_penalty(params: Iterable[torch.Tensor], reference: Iterable[torch.Tensor]) -> torch.Tensor:
    """ZSCL's ``l2_loss``: sum over parameters of sum (theta - theta_ref)^2."""
    terms = [(p - r.to(p.dtype)).pow(2).sum() for p, r in zip(params, reference, strict=True)]
    if not terms:
        raise ValueError("l2_penalty needs at least one parameter")
    return sum(terms[1:], terms[0])
