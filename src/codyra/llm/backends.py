"""How an LM training step runs: one process with torch AdamW (this module) or DeepSpeed
ZeRO-2 across ranks (:mod:`codyra.llm.zero`). Both expose the same small interface to the
training loop in :mod:`codyra.llm.train`:

- ``forward(**inputs)``, ``backward(loss)`` (once per micro-batch: gradients accumulate),
  ``step()`` (clipping and the optimizer step, once per optimizer step),
  ``after_step(method, step, total)`` (the method's post-step operator, e.g. CoDyRA's
  proximal step), ``all_sum(tensor)`` (sum over ranks);
- ``save(directory, step, scheduler, history)`` / ``load(directory, scheduler)``: resumable
  checkpoints in the layout of :mod:`codyra.checkpoint` (full fp32 tensors, torch AdamW's
  state layout), so a checkpoint resumes on any number of ranks;
- ``finalize()``: before ``Method.finish``, make the module's trainable parameters hold their
  exact fp32 values; ``report()``: what the summary records about the backend.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from codyra.checkpoint import load_checkpoint, save_checkpoint
from codyra.llm.data import IGNORE_INDEX
from codyra.state import autocast


def client_optimizer(groups: list[dict], hp: dict) -> torch.optim.AdamW:
    return torch.optim.AdamW(groups, lr=hp["lr"], betas=tuple(hp["betas"]), eps=hp["eps"])


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


class PlainBackend:
    """A single process: torch AdamW, optional bf16 autocast on a GPU (``train.precision``)."""

    rank, world_size = 0, 1

    def __init__(self, model, groups, method, hp: dict, llm: dict, device: torch.device):
        self.module, self.device, self.precision = model.to(device), device, hp["precision"]
        self.params = {n: p for n, p in model.named_parameters() if p.requires_grad}
        self.optimizer = client_optimizer(groups, hp)
        self.clip_norm = llm["gradient_clipping"]

    def autocast(self):
        return autocast(self.device, self.precision)

    def forward(self, **inputs):
        return self.module(**inputs)

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def step(self) -> None:
        if self.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(list(self.params.values()), self.clip_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def after_step(self, method, step: int, total: int) -> None:
        method.after_step(step, total)

    def all_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def save(self, directory, step: int, scheduler, history: list) -> None:
        save_checkpoint(
            directory, step=step, params=self.params, optimizer=self.optimizer, scheduler=scheduler, history=history
        )

    def load(self, directory, scheduler) -> tuple[int, list]:
        return load_checkpoint(directory, params=self.params, optimizer=self.optimizer, scheduler=scheduler)

    def finalize(self) -> None:
        """Parameters already are the fp32 values the optimizer produced."""

    def report(self) -> dict:
        return {}

    def close(self) -> None:
        """Nothing to release."""
