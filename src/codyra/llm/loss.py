"""The causal-LM loss of TRACE's supervised fine-tuning: next-token cross-entropy on the
answer and EOS tokens only (labels elsewhere are ``IGNORE_INDEX``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from codyra.trace.data import IGNORE_INDEX


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions counted from each row's first real token, as ``generate`` does for left padding."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def answer_tokens(labels: torch.Tensor) -> torch.Tensor:
    """Number of positions whose next token is labelled (the terms of the causal-LM loss)."""
    return (labels[:, 1:] != IGNORE_INDEX).sum()


def answer_loss_sum(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum of next-token cross-entropies over labelled positions, number of those positions)."""
    total = F.cross_entropy(
        logits[:, :-1].float().flatten(0, 1), labels[:, 1:].flatten(), ignore_index=IGNORE_INDEX, reduction="sum"
    )
    return total, answer_tokens(labels)
